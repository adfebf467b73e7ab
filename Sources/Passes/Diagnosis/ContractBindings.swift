import GraphIR

/// A binding of the flexible dimensions that diagnose does not evaluate, because no call the
/// model's own contract allows has those sizes.
public struct SkippedBinding: Sendable {
    public var binding: [String: Int]
    /// Why, in words (names the expression and its value).
    public var reason: String
}

/// Which bindings a model's contract can produce. A KV-cache graph that computes where it
/// writes a state from its input shapes (Apple's Llama 3.1 recipe writes at
/// `causalMask.shape[-1] − S`: the mask's `END` is the cached tokens plus the S new ones) says by
/// that expression that it counts tokens already cached: a binding that makes it negative
/// (`END < S`) is no call a caller can make, so a shape error there is not a failure of the model.
///
/// Read from the graph, not from one converter's op order: every `slice_update` whose `x` is a
/// `read_state` (or whose result a `write_state` stores) and whose `begin` depends on a flexible
/// dimension contributes its non-constant `begin` entries (one negative at every binding is MIL's
/// negative indexing from the end, and is ignored).
enum ContractBindings {
    /// The symbolic write offsets (non-constant `begin` entries of state writes).
    static func writeOffsets(_ f: Function, _ inference: ShapeInference) -> [(op: String, offset: DimExpr)] {
        var ops: [Op] = []
        f.body.walk { ops.append($0) }
        let stored = Set(ops.filter { $0.type == "write_state" }.compactMap { $0.operand("data")?.value }.map(ObjectIdentifier.init))
        var out: [(op: String, offset: DimExpr)] = []
        for op in ops where op.type == "slice_update" {
            guard let result = op.outputs.first else { continue }
            let readsState = op.operand("x")?.value?.producer?.type == "read_state"
            guard readsState || stored.contains(ObjectIdentifier(result)),
                  let begin = op.operand("begin")?.value,
                  let entries = inference.symbolic.value(of: begin)?.elements() else { continue }
            for e in entries where !e.isConstant && !e.hasOpaque && !e.symbols.isEmpty {
                if !out.contains(where: { $0.offset == e }) { out.append((op.name, e)) }
            }
        }
        return out
    }

    /// Splits `bindings` into those to evaluate and those outside the contract.
    static func filter(_ bindings: [[String: Int]], offsets: [(op: String, offset: DimExpr)]) -> (keep: [[String: Int]], skipped: [SkippedBinding]) {
        // An offset negative at every binding is MIL's negative indexing (from the end), not a
        // count of cached tokens.
        let offsets = offsets.filter { o in bindings.contains { (o.offset.evaluate($0) ?? -1) >= 0 } }
        guard !offsets.isEmpty else { return (bindings, []) }
        var keep: [[String: Int]] = []
        var skipped: [SkippedBinding] = []
        for b in bindings {
            if let bad = offsets.first(where: { ($0.offset.evaluate(b) ?? 0) < 0 }) {
                let v = bad.offset.evaluate(b) ?? 0
                skipped.append(SkippedBinding(binding: b, reason: "the state write offset \(bad.offset) of '\(bad.op)' would be \(v): fewer than zero tokens cached"))
            } else {
                keep.append(b)
            }
        }
        return (keep, skipped)
    }
}
