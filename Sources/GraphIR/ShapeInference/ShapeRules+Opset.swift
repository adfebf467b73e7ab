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

        // MARK: image resizing (ImageResizeKernels)
        for op in ["resize_bilinear", "resize_nearest_neighbor"] {
            r[op] = { ctx in
                let x = try ctx.tensor("x")
                var xs = try ctx.shape("x")
                guard xs.count >= 3 else { throw ctx.fail(.shapeError, "\(op) needs x of rank >= 3", [("x", text(xs))]) }
                guard let h = ctx.constInt("target_size_height") ?? (op == "resize_bilinear" ? 1 : nil),
                      let w = ctx.constInt("target_size_width") ?? (op == "resize_bilinear" ? 1 : nil) else { throw Unsupported() }
                xs[xs.count - 2] = DimExpr(h)
                xs[xs.count - 1] = DimExpr(w)
                return [t(x.dtype, xs)]
            }
        }
        r["crop"] = { ctx in
            let x = try ctx.tensor("x")
            var xs = try ctx.shape("x")
            guard xs.count >= 3, let ch = ctx.constInts("crop_height"), let cw = ctx.constInts("crop_width"), ch.count == 2, cw.count == 2 else { throw Unsupported() }
            xs[xs.count - 2] = xs[xs.count - 2] - DimExpr(ch[0] + ch[1])
            xs[xs.count - 1] = xs[xs.count - 1] - DimExpr(cw[0] + cw[1])
            return [t(x.dtype, xs)]
        }
        r["resample"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x"), cs = try ctx.shape("coordinates")
            guard xs.count == 4, cs.count == 4 else { throw ctx.fail(.shapeError, "resample needs x [B, C, H, W] and coordinates [B, H2, W2, 2]", [("x", text(xs)), ("coordinates", text(cs))]) }
            return [t(x.dtype, [xs[0], xs[1], cs[1], cs[2]])]
        }
        r["affine"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let h = ctx.constInt("output_height"), let w = ctx.constInt("output_width") else { throw Unsupported() }
            return [t(x.dtype, [xs[0], xs[1], DimExpr(h), DimExpr(w)])]
        }

        // MARK: space / batch, reverse_sequence (ShapeKernels+Space)
        r["reverse_sequence"] = { ctx in [.tensor(try ctx.tensor("x"))] }
        r["pixel_unshuffle"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let f = ctx.constInt("downscale_factor"), f >= 1 else { throw Unsupported() }
            return [t(x.dtype, [xs[0], xs[1] * DimExpr(f * f), DimExpr.floorDiv(xs[2], DimExpr(f)), DimExpr.floorDiv(xs[3], DimExpr(f))])]
        }
        r["space_to_batch"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let b = ctx.constInts("block_shape"), let p = ctx.constInts("paddings"), b.count == 2, p.count == 4, b.allSatisfy({ $0 >= 1 }) else { throw Unsupported() }
            return [t(x.dtype, [xs[0] * DimExpr(b[0] * b[1]), xs[1], DimExpr.floorDiv(xs[2] + DimExpr(p[0] + p[1]), DimExpr(b[0])),
                                DimExpr.floorDiv(xs[3] + DimExpr(p[2] + p[3]), DimExpr(b[1]))])]
        }
        r["batch_to_space"] = { ctx in
            let x = try ctx.tensor("x")
            let xs = try ctx.shape("x")
            guard xs.count == 4, let b = ctx.constInts("block_shape"), let c = ctx.constInts("crops"), b.count == 2, c.count == 4, b.allSatisfy({ $0 >= 1 }) else { throw Unsupported() }
            return [t(x.dtype, [DimExpr.floorDiv(xs[0], DimExpr(b[0] * b[1])), xs[1], xs[2] * DimExpr(b[0]) - DimExpr(c[0] + c[1]),
                                xs[3] * DimExpr(b[1]) - DimExpr(c[2] + c[3])])]
        }
    }
}
