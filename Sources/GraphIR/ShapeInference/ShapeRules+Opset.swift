import GraphIR

/// Shape rules of the recurrent, image-resizing, quantization, list and random ops (MIL
/// iOS15–18), one section per kernel family of the interpreter.
extension ShapeRules {
    static func addOpsetRules(_ r: inout [String: Rule]) {
        // MARK: recurrent (RecurrentKernels): x [S, B, I] → [S or 1, B, D·H], [B, D·H] (, [B, D·H])
        for op in ["lstm", "gru", "rnn"] {
            r[op] = { ctx in
                let x = try ctx.tensor("x")
                let xs = try ctx.shape("x"), whh = try ctx.shape("weight_hh")
                let sh = [("x", text(xs)), ("weight_hh", text(whh))]
                guard xs.count == 3, whh.count == 2 else { throw ctx.fail(.shapeError, "\\(op) needs x [S, B, I] and a rank-2 weight_hh", sh) }
                let dirs = op == "lstm" && ctx.string("direction") == "bidirectional" ? 2 : 1
                let h = whh[1] * DimExpr(dirs)
                let steps = ctx.bool("output_sequence", default: false) ? xs[0] : DimExpr(1)
                let outs = [t(x.dtype, [steps, xs[1], h]), t(x.dtype, [xs[1], h])]
                return op == "lstm" ? outs + [t(x.dtype, [xs[1], h])] : outs
            }
        }
    }
}
