import GraphIR

/// `dead_code_elimination`: removes ops none of whose outputs is used or returned. State writes
/// (`write_state`, `coreml_update_state`) are side effects and always stay.
///
/// ```
/// before:  %a = const(); %b = add(x, %a); %c = mul(x, x); return %c
/// after:   %c = mul(x, x); return %c
/// ```
public struct DeadCodeElimination: FunctionPass {
    public static let info = PassInfo("dead_code_elimination", "Remove ops whose results are never used (state writes stay).")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        var removedAny = true
        while removedAny {
            removedAny = false
            let uses = UseMap(function)
            func sweep(_ block: Block) {
                for op in block.operations { for b in op.blocks { sweep(b) } }
                let before = block.operations.count
                block.removeOps { op in
                    if DeadCodeElimination.hasSideEffects(op) { return false }
                    return !op.outputs.contains { uses.isUsed($0) }
                }
                let n = before - block.operations.count
                if n > 0 { result.count("ops removed", n); removedAny = true }
            }
            sweep(function.body)
        }
        return result
    }

    static func hasSideEffects(_ op: Op) -> Bool {
        if OpRegistry.schema(op.type)?.hasSideEffects == true { return true }
        // Unknown ops and control flow are kept: they may write states inside.
        if OpRegistry.schema(op.type) == nil || !op.blocks.isEmpty { return true }
        return false
    }
}
