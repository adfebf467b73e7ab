/// Recurrent layers (MIL `recurrent`): `lstm`, `gru`, `rnn`; x `[S, B, I]` gives `[S or 1, B, D·H]`
/// and the last states `[B, D·H]`. Kernels: `Interpreter/RecurrentKernels.swift`.
extension OpDefs {
    static func declareRecurrent(_ b: inout OpTableBuilder) {
        b.family = .recurrent
        // Recurrent (iOS15; fp16 iOS17; gru reset_after / input_bias iOS18).
        b.add(OpSchema("lstm", [x(.float), req("initial_h", .float), req("initial_c", .float), req("weight_ih", .float), req("weight_hh", .float),
                              opt("bias", .float), opt("peephole", .float), opt("weight_ih_back", .float), opt("weight_hh_back", .float),
                              opt("bias_back", .float), opt("peephole_back", .float), opt("direction", .string), opt("output_sequence", .bool),
                              opt("recurrent_activation", .string), opt("cell_activation", .string), opt("activation", .string), opt("clip", .float)]), rule: recurrentRule("lstm"))
        b.add(OpSchema("gru", [x(.float), req("initial_h", .float), req("weight_ih", .float), req("weight_hh", .float), opt("bias", .float),
                             opt("direction", .string), opt("output_sequence", .bool), opt("recurrent_activation", .string),
                             opt("activation", .string), opt("reset_after", .bool), opt("input_bias", .float)]), rule: recurrentRule("gru"))
        b.add(OpSchema("rnn", [x(.float), req("initial_h", .float), req("weight_ih", .float), req("weight_hh", .float), opt("bias", .float),
                             opt("direction", .string), opt("output_sequence", .bool), opt("activation", .string)]), rule: recurrentRule("rnn"))

    }

    static func recurrentRule(_ op: String) -> ShapeRule {
        return { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), whh = try ctx.shape("weight_hh")
            let sh = [("x", text(xs)), ("weight_hh", text(whh))]
            guard xs.count == 3, whh.count == 2 else { throw ctx.fail(.shapeError, "\(op) needs x [S, B, I] and a rank-2 weight_hh", sh) }
            let dirs = op == "lstm" && ctx.string("direction") == "bidirectional" ? 2 : 1
            let h = whh[1] * DimExpr(dirs)
            let steps = ctx.bool("output_sequence", default: false) ? xs[0] : DimExpr(1)
            let outs = [t(x.dtype, [steps, xs[1], h]), t(x.dtype, [xs[1], h])]
            return op == "lstm" ? outs + [t(x.dtype, [xs[1], h])] : outs
        }
    }
}
