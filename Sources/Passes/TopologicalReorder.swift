import GraphIR

/// `topological_reorder`: moves each constant (`const`, `constexpr_*` with constant inputs) to
/// just before its first use, so a reader of the MIL text sees weights next to the op that uses
/// them and the interpreter can release them early. The relative order of all other ops —
/// state reads and writes above all — is kept.
///
/// ```
/// before:  %w = const(); %b = const(); %y = relu(x); %z = linear(x = %y, weight = %w, bias = %b)
/// after:   %y = relu(x); %w = const(); %b = const(); %z = linear(x = %y, weight = %w, bias = %b)
/// ```
public struct TopologicalReorder: FunctionPass {
    public static let info = PassInfo("topological_reorder", "Move constants next to their first use; keep every other op's order.")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        let block = function.body
        let ops = block.operations
        func isMovable(_ op: Op) -> Bool {
            op.type == "const" || (OpRegistry.schema(op.type)?.isConstant ?? false)
        }
        // Movable ops are emitted lazily, right before the first op that reads them.
        var pending: [ObjectIdentifier: Op] = [:]
        var producerOfValue: [ObjectIdentifier: Op] = [:]
        for op in ops where isMovable(op) {
            pending[ObjectIdentifier(op)] = op
            for v in op.outputs { producerOfValue[ObjectIdentifier(v)] = op }
        }
        var emitted: [Op] = []
        var done = Set<ObjectIdentifier>()
        func emit(_ op: Op) {
            guard !done.contains(ObjectIdentifier(op)) else { return }
            for v in op.operandValues { if let p = producerOfValue[ObjectIdentifier(v)] { emit(p) } }
            var nestedReads: [Value] = []
            for b in op.blocks { b.walk { nestedReads += $0.operandValues }; nestedReads += b.outputs }
            for v in nestedReads { if let p = producerOfValue[ObjectIdentifier(v)] { emit(p) } }
            done.insert(ObjectIdentifier(op))
            emitted.append(op)
        }
        for op in ops where !isMovable(op) { emit(op) }
        for v in block.outputs { if let p = producerOfValue[ObjectIdentifier(v)] { emit(p) } }
        // Unused constants keep their place at the end (dead_code_elimination removes them).
        for op in ops where isMovable(op) { emit(op) }
        if !zip(emitted, ops).allSatisfy({ $0 === $1 }) {
            block.setOperations(emitted)
            result.count("ops moved", zip(emitted, ops).filter { $0 !== $1 }.count)
        }
        return result
    }
}
