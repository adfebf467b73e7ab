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
    public static let info = PassInfo("common_subexpression_elimination", "Merge ops that compute the same thing from the same operands.")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var ids: [ObjectIdentifier: Int] = [:]
        func id(_ v: Value) -> Int {
            if let i = ids[ObjectIdentifier(v)] { return i }
            let i = ids.count
            ids[ObjectIdentifier(v)] = i
            return i
        }
        return DuplicateMerging.merge(function, counting: "ops merged") { op -> Key? in
            // Constants are const_deduplication's; a state read depends on when it runs.
            guard op.type != "const", op.blocks.isEmpty, !op.outputs.isEmpty,
                  let schema = OpRegistry.schema(op.type), !schema.hasSideEffects, schema.stateAccess == .none else { return nil }
            return Key(
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
        }
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
