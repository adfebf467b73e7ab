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

    /// Inputs a tokenizer makes with the shape of the token ids (Hugging Face's contract:
    /// `attention_mask` and `token_type_ids` hold one entry per token of `input_ids`).
    static let tokenAligned: Set<String> = ["attention_mask", "attentionMask", "token_type_ids", "tokenTypeIds"]
    static let tokenIDs: Set<String> = ["input_ids", "inputIds"]

    /// Pairs of symbols (token ids axis, aligned input's same axis) that a call always binds
    /// equal: an exporters / sentence-transformers package gives `input_ids` and
    /// `attention_mask` separate RangeDims, and the graph may well broadcast a mask of
    /// another length into a shape error that no tokenizer output can reach.
    static func alignedSymbols(_ inference: ShapeInference) -> [(ids: String, other: String, input: String)] {
        var axisSymbol: [String: [Int: String]] = [:]
        for c in inference.symbols { for m in c.members { axisSymbol[m.input, default: [:]][m.axis] = c.name } }
        guard let ids = axisSymbol.first(where: { tokenIDs.contains($0.key) })?.value else { return [] }
        var out: [(String, String, String)] = []
        for (input, axes) in axisSymbol where tokenAligned.contains(input) {
            for (axis, sym) in axes { if let s = ids[axis], s != sym { out.append((s, sym, input)) } }
        }
        return out
    }

    /// Splits `bindings` into those to evaluate and those outside the contract: a negative
    /// state write offset, or a token-aligned input (``alignedSymbols(_:)``) of another length
    /// than the token ids (evaluated instead with that input at the ids' length).
    static func filter(_ bindings: [[String: Int]], offsets: [(op: String, offset: DimExpr)],
                       aligned: [(ids: String, other: String, input: String)] = []) -> (keep: [[String: Int]], skipped: [SkippedBinding]) {
        // A binding where they differ is evaluated with the aligned symbol set to the ids' size.
        var merged: [[String: Int]] = []
        var out: [SkippedBinding] = []
        for b in bindings {
            var m = b
            for a in aligned { if let n = b[a.ids], b[a.other] != nil { m[a.other] = n } }
            if m != b, let a = aligned.first(where: { b[$0.ids] != b[$0.other] }) {
                out.append(SkippedBinding(binding: b, reason: "'\(a.input)' has one entry per token id, so \(a.other) = \(a.ids)"))
            }
            if !merged.contains(m) { merged.append(m) }
        }
        let (keep, skipped) = filter(merged, offsets: offsets)
        return (keep, out + skipped)
    }

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
