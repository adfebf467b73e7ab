import GraphIR

/// The RMSNorm / variance idiom that squares in the compute precision:
///
/// ```
/// sq = mul(x = x, y = x)            // or square(x = x), pow(x = x, y = 2)
/// ms = reduce_mean(x = sq, axes = A, keep_dims = true)
/// v  = add(x = ms, y = eps)         // optional; eps a constant with one element
/// r  = rsqrt(x = v)                 →  y = mul(x = x, y = r)     (either operand order)
///   or sqrt(x = v)                  →  y = real_div(x = x, y = r)
/// ```
///
/// Shared by `NumericChecks` (which points at `fp16_safe_rms_norm` only when the idiom matches)
/// and ``FP16SafeRMSNorm``.
public struct RMSNormIdiom {
    var x: Value
    var square: Op
    var mean: Op
    /// The `add` of eps, if any, and which of its inputs holds eps.
    var addEps: Op?
    var epsInput: String?
    var eps: Double
    /// `rsqrt` or `sqrt`.
    var root: Op
    /// `mul(x, rsqrt)` or `real_div(x, sqrt)`, and the name of its input that is `x`.
    var apply: Op
    var applyXInput: String

    /// Matches the idiom starting at its square op. Requires every intermediate to have exactly
    /// one user (so that rewriting it changes nothing else), `keep_dims = true`, an fp16 square,
    /// and an `x` that is not already divided by its row max (the safe form).
    public static func match(square op: Op, uses: UseMap) -> RMSNormIdiom? {
        guard NumericChecks.isSquare(op), let sq = op.outputs.first, sq.type.tensorType?.dtype == .fp16,
              let x = op.operand("x")?.value, x.type.tensorType?.dtype == .fp16,
              !NumericChecks.isScaledByRowMax(x) else { return nil }
        func onlyUser(_ v: Value) -> Op? {
            let u = uses.users(of: v)
            guard u.count == 1, !uses.isReturned(v) else { return nil }
            return u[0]
        }
        guard let mean = onlyUser(sq), mean.type == "reduce_mean", mean.operand("x")?.value === sq,
              let keep = mean.operand("keep_dims").flatMap(\.constValue)?.ints(), keep == [1],
              mean.operand("axes").flatMap(\.constValue)?.ints() != nil,
              let ms = mean.outputs.first, let next = onlyUser(ms) else { return nil }
        var addEps: Op?, epsInput: String?, eps = 0.0
        var rootOp = next
        if next.type == "add" {
            let other = next.operand("x")?.value === ms ? "y" : "x"
            guard next.operand(other == "y" ? "x" : "y")?.value === ms,
                  let c = next.operand(other).flatMap(\.constValue)?.doubles(), c.count == 1, c[0] >= 0,
                  let v = next.outputs.first, let r = onlyUser(v) else { return nil }
            addEps = next
            epsInput = other
            eps = c[0]
            rootOp = r
        }
        guard rootOp.type == "rsqrt" || rootOp.type == "sqrt", let r = rootOp.outputs.first,
              let apply = onlyUser(r) else { return nil }
        let wantApply = rootOp.type == "rsqrt" ? "mul" : "real_div"
        guard apply.type == wantApply else { return nil }
        let xInput: String
        if apply.operand("x")?.value === x, apply.operand("y")?.value === r {
            xInput = "x"
        } else if wantApply == "mul", apply.operand("y")?.value === x, apply.operand("x")?.value === r {
            xInput = "y"
        } else {
            return nil
        }
        return RMSNormIdiom(x: x, square: op, mean: mean, addEps: addEps, epsInput: epsInput, eps: eps,
                            root: rootOp, apply: apply, applyXInput: xInput)
    }

    /// Human description of the chain, e.g. `mul → reduce_mean → add → rsqrt → mul`.
    public var chain: String {
        ([square, mean] + (addEps.map { [$0] } ?? []) + [root, apply]).map(\.type).joined(separator: " → ")
    }
}
