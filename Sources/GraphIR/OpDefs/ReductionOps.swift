/// Reductions (MIL `reduction`): `axes` (all when absent) are removed or kept as 1. Kernels:
/// `Interpreter/ReductionKernels.swift`.
extension OpDefs {
    static func declareReductions(_ b: inout OpTableBuilder) {
        b.family = .reduction
        for op in ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1_norm",
                   "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square"] {
            b.add(OpSchema(op, [x(.numeric), opt("axes", .integer), opt("keep_dims", .bool)])) { ctx in
                let x = try ctx.tensor("x")
                guard let s = x.shape else { throw Unsupported() }
                let keep = ctx.bool("keep_dims", default: false)
                var axes: [Int]
                if ctx.has("axes") {
                    guard let a = ctx.constInts("axes") else { throw Unsupported() }
                    axes = try a.map { try ctx.normalizeAxis($0, rank: s.count) }
                } else { axes = Array(0..<s.count) }
                var out: [DimExpr] = []
                for (i, d) in s.enumerated() {
                    if axes.contains(i) { if keep { out.append(1) } } else { out.append(d) }
                }
                return [t(x.dtype, out)]
            }
        }
        for op in ["reduce_argmax", "reduce_argmin"] {
            b.add(OpSchema(op, [x(.numeric), opt("axis", .integer), opt("keep_dims", .bool), opt("output_dtype", .string)])) { ctx in
                let s = try ctx.shape("x")
                guard !s.isEmpty else { throw ctx.unknown("\(ctx.op.type) of a rank-0 x") }
                let axis = try ctx.normalizeAxis(ctx.constInt("axis") ?? -1, rank: s.count)
                var out = s
                if ctx.bool("keep_dims", default: false) { out[axis] = 1 } else { out.remove(at: axis) }
                let dt = ctx.string("output_dtype").flatMap { DType(rawValue: $0) } ?? .int32
                return [t(dt, out)]
            }
        }
    }
}
