import GraphIR
import Interpreter

/// `fp16_safe_rms_norm`: an RMSNorm that squares `x` in fp16 (`mul(x, x)`, `square(x)` or
/// `pow(x, 2)` → `reduce_mean` → `add(eps)` → `rsqrt` → `mul(x, ·)`, or `sqrt` → `real_div(x, ·)`)
/// overflows to inf as soon as |x| > 256 — and then normalises the row to 0. The rewrite divides
/// `x` by its row maximum `m = max(reduce_max(|x|), floor)` before squaring, and the eps by `m²`:
///
///     y = (x/m) · rsqrt(mean((x/m)²) + eps/m²) = x · rsqrt(mean(x²) + eps)
///
/// so the result is the same function (exactly, up to rounding) while every square is ≤ 1. It
/// stays fp16 throughout — the form Core ML's fp16 backends (GPU, Neural Engine, which would
/// demote an fp32 island back to fp16) run correctly; coremltools' own `rms_norm` lowering uses
/// the same max-scaling (but adds the unscaled eps). `eps/m²` is computed as `(sqrt(eps)/m)²`,
/// and `floor = max(2^-14, sqrt(eps)/200)` keeps it ≤ 40000 (finite in fp16) for an all-zero row.
///
/// Before:
/// ```
/// tensor<fp16, [1, ?, 64]> sq = mul(x = h, y = h)
/// tensor<fp16, [1, ?, 1]> ms = reduce_mean(x = sq, axes = [-1], keep_dims = true)
/// tensor<fp16, [1, ?, 1]> v = add(x = ms, y = eps)            // eps = 1e-05
/// tensor<fp16, [1, ?, 1]> r = rsqrt(x = v)
/// tensor<fp16, [1, ?, 64]> y = mul(x = h, y = r)
/// ```
/// After (the new ops go before the square; reduce_mean's axes / keep_dims are copied):
/// ```
/// tensor<int32, [1]> sq_axes = const()                        // [-1]
/// bool sq_keep_dims = const()                                 // true
/// fp16 sq_floor = const()                                     // 6.1035e-05
/// tensor<fp16, [1, ?, 64]> sq_abs = abs(x = h)
/// tensor<fp16, [1, ?, 1]> sq_absmax = reduce_max(axes = sq_axes, keep_dims = sq_keep_dims, x = sq_abs)
/// tensor<fp16, [1, ?, 1]> sq_scale = maximum(x = sq_absmax, y = sq_floor)
/// tensor<fp16, [1, ?, 64]> sq_scaled = real_div(x = h, y = sq_scale)
/// fp16 sq_sqrt_eps = const()                                  // 0.0031623
/// tensor<fp16, [1, ?, 1]> sq_eps_root = real_div(x = sq_sqrt_eps, y = sq_scale)
/// tensor<fp16, [1, ?, 1]> sq_eps = mul(x = sq_eps_root, y = sq_eps_root)
/// tensor<fp16, [1, ?, 64]> sq = mul(x = sq_scaled, y = sq_scaled)
/// tensor<fp16, [1, ?, 1]> ms = reduce_mean(x = sq, axes = [-1], keep_dims = true)
/// tensor<fp16, [1, ?, 1]> v = add(x = ms, y = sq_eps)
/// tensor<fp16, [1, ?, 1]> r = rsqrt(x = v)
/// tensor<fp16, [1, ?, 64]> y = mul(x = sq_scaled, y = r)
/// ```
/// Only fp16 chains whose intermediates have no other user are rewritten (see `RMSNormIdiom`),
/// and not twice: an `x` already divided by `reduce_max(abs(x))` is the safe form. An `rsqrt`'s
/// own `epsilon` input is left as it is; the old eps constant is left for `dead_code_elimination`.
public struct FP16SafeRMSNorm: OpRewritePass {
    public static let info = PassInfo("fp16_safe_rms_norm", "Make fp16 RMSNorms overflow-safe: divide x by its row max|x| before squaring (eps scaled to match).")
    public init() {}

    /// Smallest row scale (fp16's smallest normal), raised for large eps so that eps/m² stays finite.
    static func floor(eps: Double) -> Double { max(0x1p-14, eps.squareRoot() / 200) }

    public static func isAnchor(_ op: Op) -> Bool { NumericChecks.isSquare(op) }

    /// Reads the uses afresh (an earlier rewrite changes them), not `site.uses`.
    public func rewrite(_ op: Op, in site: RewriteSite) {
        let uses = UseMap(site.function)
        guard let m = RMSNormIdiom.match(square: op, uses: uses), let block = op.parent,
              let xt = m.x.type.tensorType, let reducedType = m.mean.outputs.first?.type,
              let axesValue = m.mean.operand("axes").flatMap(\.constValue),
              let keepValue = m.mean.operand("keep_dims").flatMap(\.constValue) else { return }
        let base = op.name
        var newOps: [Op] = []
        func name(_ suffix: String) -> String { site.make.names.fresh("\(base)_\(suffix)") }
        func scalar(_ suffix: String, _ v: Double) -> Value {
            let c = Op.const(name(suffix), ConstEncoding.constValue(.scalar(Float(v), .fp16), type: TensorType(.fp16, []))!)
            newOps.append(c)
            return c.outputs[0]
        }
        func add(_ type: String, _ suffix: String, _ inputs: [OpInput], _ out: MILType) -> Value {
            let n = name(suffix)
            let o = Op(type: type, inputs: inputs, outputs: [Value(name: n, type: out)],
                       attributes: [Attribute(name: "name", value: .string(n))])
            newOps.append(o)
            return o.outputs[0]
        }
        func v(_ n: String, _ x: Value) -> OpInput { OpInput(name: n, operands: [.value(x)]) }
        // reduce_mean's axes / keep_dims constants may be defined after the square: copy them.
        func constant(_ suffix: String, _ c: ConstValue) -> OpInput {
            let op = Op.const(name(suffix), c)
            newOps.append(op)
            return OpInput(name: suffix, operands: [.value(op.outputs[0])])
        }
        let axes = constant("axes", axesValue), keep = constant("keep_dims", keepValue)
        let floorValue = scalar("floor", Self.floor(eps: m.eps))
        let absX = add("abs", "abs", [v("x", m.x)], .tensor(xt))
        let absMax = add("reduce_max", "absmax", [v("x", absX), axes, keep], reducedType)
        let scale = add("maximum", "scale", [v("x", absMax), v("y", floorValue)], reducedType)
        let scaled = add("real_div", "scaled", [v("x", m.x), v("y", scale)], .tensor(xt))
        var scaledEps: Value?
        if let addEps = m.addEps, let epsInput = m.epsInput {
            let sqrtEps = scalar("sqrt_eps", m.eps.squareRoot())
            let root = add("real_div", "eps_root", [v("x", sqrtEps), v("y", scale)], reducedType)
            scaledEps = add("mul", "eps", [v("x", root), v("y", root)], reducedType)
            addEps.setInput(epsInput, .value(scaledEps!))
        }
        guard let at = block.index(of: op) else { return }
        for (i, n) in newOps.enumerated() { block.insert(n, at: at + i) }
        // Square the scaled x; pow(x, 2) becomes mul(x, x).
        if op.type == "pow" {
            op.type = "mul"
            op.setInput("y", .value(scaled))
        }
        op.replaceOperand(m.x, with: scaled)
        m.apply.setInput(m.applyXInput, .value(scaled))
        site.count("rms norms made fp16-safe")
    }
}
