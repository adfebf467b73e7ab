import GraphIR

/// `common_subexpression_elimination`: an op computing exactly what an earlier op computes (same
/// type, same operands, same attributes other than `name`) is replaced by the earlier one. Ops
/// that read or write state, and control flow, are never merged.
///
/// ```
/// before:  %a = mul(x = %x, y = %x); %b = mul(x = %x, y = %x); %c = add(x = %a, y = %b)
/// after:   %a = mul(x = %x, y = %x); %c = add(x = %a, y = %a)
/// ```
public struct CommonSubexpressionElimination: FunctionPass {
    public static let name = "common_subexpression_elimination"
    public static let summary = "Merge ops that compute the same thing from the same operands."
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        var seen: [Key: Op] = [:]
        var dead = Set<ObjectIdentifier>()
        var ids: [ObjectIdentifier: Int] = [:]
        func id(_ v: Value) -> Int {
            if let i = ids[ObjectIdentifier(v)] { return i }
            let i = ids.count
            ids[ObjectIdentifier(v)] = i
            return i
        }
        for op in function.body.operations {
            // Constants are const_deduplication's; a state read depends on when it runs.
            guard op.type != "const", op.blocks.isEmpty, !op.outputs.isEmpty,
                  let schema = OpRegistry.schema(op.type), !schema.hasSideEffects, schema.stateAccess == .none else { continue }
            let key = Key(
                type: op.type,
                inputs: op.inputs.sorted { $0.name < $1.name }.map { input in
                    InputKey(name: input.name, operands: input.operands.map { o in
                        switch o {
                        case let .value(v): return .value(id(v))
                        case let .constant(c): return .constant(c)
                        }
                    })
                },
                attributes: op.attributes.filter { $0.name != "name" }.sorted { $0.name < $1.name }.map { AttrKey(name: $0.name, value: $0.value) },
                outputTypes: op.outputs.map(\.type))
            if let first = seen[key] {
                if op.outputs.contains(where: { o in function.body.outputs.contains { $0 === o } }) { continue }
                for (a, b) in zip(op.outputs, first.outputs) { function.body.replaceAllUses(of: a, with: b) }
                dead.insert(ObjectIdentifier(op))
                result.count("ops merged")
            } else {
                seen[key] = op
            }
        }
        function.body.removeOps { dead.contains(ObjectIdentifier($0)) }
        return result
    }

    enum OperandKey: Hashable { case value(Int), constant(ConstValue) }
    struct InputKey: Hashable { let name: String; let operands: [OperandKey] }
    struct AttrKey: Hashable { let name: String; let value: ConstValue }
    struct Key: Hashable {
        let type: String
        let inputs: [InputKey]
        let attributes: [AttrKey]
        let outputTypes: [MILType]
    }
}
