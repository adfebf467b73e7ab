import GraphIR
import Interpreter

/// coremltools 9's `aten::rms_norm` lowering (frontend/torch/ops.py `rms_norm`):
///
/// ```
/// m  = reduce_max(x = abs(x), axes = A, keep_dims = true)
/// xs = real_div(x = x, y = m)
/// ms = reduce_mean(x = square(xs), axes = A, keep_dims = true)
/// v  = add(x = ms, y = eps)          // ← eps added to the max-scaled mean
/// r  = sqrt(v)  (or rsqrt)
/// ```
/// computes x / sqrt(mean(x²) + eps·m²): eps scaled by m² (coremltools#2821).
struct CoremltoolsRMSNorm {
    var x: Value
    /// The row scale `m` that x is divided by.
    var scale: Value
    var addEps: Op
    var epsInput: String
    var eps: Double

    static func match(addEps op: Op, uses: UseMap) -> CoremltoolsRMSNorm? {
        guard op.type == "add" else { return nil }
        for (meanName, epsName) in [("x", "y"), ("y", "x")] {
            guard let mean = op.producer(of: meanName, type: "reduce_mean"),
                  let epsOperand = op.operand(epsName), let c = epsOperand.constValue, let e = c.doubles(), e.count == 1,
                  let sqv = mean.operand("x")?.value, let sq = sqv.producer, NumericChecks.isSquare(sq),
                  let xs = sq.operand("x")?.value, NumericChecks.isScaledByRowMax(xs),
                  let div = xs.producer, let x = div.operand("x")?.value, let m = div.operand("y")?.value,
                  let out = op.outputs.first,
                  uses.users(of: out).contains(where: { $0.type == "sqrt" || $0.type == "rsqrt" }) else { continue }
            return CoremltoolsRMSNorm(x: x, scale: m, addEps: op, epsInput: epsName, eps: e[0])
        }
        return nil
    }
}

/// `exact_rms_norm`: makes coremltools' max-scaled RMSNorm lowering exact by adding eps / m²
/// (as `(eps / m) / m`, which cannot overflow in fp16) instead of eps to the mean of
/// (x / m)²: sqrt(mean((x/m)²) + eps/m²) · m = sqrt(mean(x²) + eps). Still divides by the
/// row max first, so it stays fp16-safe (coremltools#2821).
///
/// ```
/// before:  v = add(x = ms, y = 1e-5)
/// after:   e1 = real_div(x = 1e-5, y = m)
///          e2 = real_div(x = e1, y = m)
///          v  = add(x = ms, y = e2)
/// ```
public struct ExactRMSNorm: OpRewritePass {
    public static let info = PassInfo("exact_rms_norm", "Make coremltools' rms_norm lowering exact: add eps/max^2, not eps, to the max-scaled mean (#2821).")
    public init() {}

    public static func isAnchor(_ op: Op) -> Bool { op.type == "add" }

    /// Reads `site.uses` (the program before the sweep): the pattern's values are not touched by
    /// an earlier rewrite, which only changes another add's eps input.
    public func rewrite(_ op: Op, in site: RewriteSite) {
        guard let m = CoremltoolsRMSNorm.match(addEps: op, uses: site.uses), let mt = m.scale.type.tensorType,
              let epsOperand = op.operand(m.epsInput) else { return }
        // eps in the scale's dtype (a scalar const).
        let epsValue: Value
        if case let .value(v) = epsOperand, v.type.tensorType?.dtype == mt.dtype { epsValue = v } else {
            guard let c = ConstEncoding.constValue(.scalar(Float(m.eps), mt.dtype), type: TensorType(mt.dtype, [])) else { return }
            epsValue = site.make.const("\(op.name)_eps", c)
        }
        let e1 = site.make.op("real_div", "\(op.name)_eps_over_max", [("x", epsValue), ("y", m.scale)], .tensor(mt))
        let e2 = site.make.op("real_div", "\(op.name)_eps_over_max2", [("x", e1), ("y", m.scale)], .tensor(mt))
        site.make.flush(before: op)
        op.setInput(m.epsInput, .value(e2))
        site.count("rms norms made exact")
    }
}
