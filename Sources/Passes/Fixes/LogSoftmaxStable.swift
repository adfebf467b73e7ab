import GraphIR

/// `log_softmax_stable`: rewrites `log(softmax(x, axis))` as `x − reduce_log_sum_exp(x, axis)`
/// (coremltools#2728: in fp16 a probability below 6e-8 rounds to 0 and its log is −inf). Same
/// function, finite wherever x is; the softmax is left for `dead_code_elimination` when nothing
/// else reads it.
///
/// ```
/// before:
///   tensor<fp16, [1, 8]> p = softmax(x = z, axis = -1)
///   tensor<fp16, [1, 8]> lp = log(x = p, epsilon = 1e-45)
/// after:
///   tensor<fp16, [1, 1]> lse = reduce_log_sum_exp(x = z, axes = [-1], keep_dims = true)
///   tensor<fp16, [1, 8]> lp = sub(x = z, y = lse)
/// ```
public struct LogSoftmaxStable: OpRewritePass {
    public static let info = PassInfo("log_softmax_stable", "Rewrite log(softmax(x)) as x - reduce_log_sum_exp(x) (fp16 -inf, #2728).")
    public init() {}

    public static func isAnchor(_ op: Op) -> Bool { op.type == "log" }

    public func rewrite(_ op: Op, in site: RewriteSite) {
        guard let sm = op.producer(of: "x", type: "softmax"),
              let z = sm.operand("x")?.value, let zt = z.type.tensorType, !op.outputs.isEmpty else { return }
        let axis = sm.operand("axis")?.constValue?.ints()?.first ?? -1
        var reduced = zt
        if let r = zt.rank as Int?, r > 0 {
            let a = axis < 0 ? axis + r : axis
            guard a >= 0, a < r else { return }
            var s = zt.shape
            s[a] = .fixed(1)
            reduced = TensorType(zt.dtype, s)
        }
        let axes = site.make.ints("\(op.name)_axes", [Int32(axis)])
        let keep = site.make.const("\(op.name)_keep_dims", .bool(true))
        let lse = site.make.op("reduce_log_sum_exp", "\(op.name)_lse", [("x", z), ("axes", axes), ("keep_dims", keep)], .tensor(reduced))
        site.make.flush(before: op)
        op.type = "sub"
        op.inputs = [OpInput(name: "x", operands: [.value(z)]), OpInput(name: "y", operands: [.value(lse)])]
        site.count("log(softmax) rewritten")
    }
}
