import Foundation
import GraphIR

/// MIL normalization ops (iOS15/iOS17 `normalization`). Statistics are computed in Float per
/// row (two passes: mean, then mean squared deviation; biased variance).
///
/// - `layer_norm(x, axes = all, gamma, beta, epsilon = 1e-5)`:
///   `(x - mean) / sqrt(var + eps) * gamma + beta`; gamma/beta have the shape of the normalized
///   dims (in axis order).
/// - `batch_norm(x, mean, variance, gamma, beta, epsilon = 1e-5)`, per channel (axis 1).
/// - `instance_norm(x, gamma, beta, epsilon = 1e-5)`: per (batch, channel) over the dims after 1.
/// - `l2_norm(x, axes?, epsilon = 1e-6)`: `x / sqrt(sum(x²) + eps)` over the last three dims
///   (leading dims are batch; rank < 3: all dims), or over `axes` when given.
/// - `local_response_norm(x, size, alpha = 1e-4, beta = 0.75, k = 1)`:
///   `x / (k + alpha/size · Σ x²)^beta`, the sum over channels `c - size/2 … c + (size-1)/2`
///   (torch's window; the same centred window for odd sizes).
///
/// Default epsilons are taken in the dtype of `x` (see ``EW/epsilon(_:default:input:)``).
enum NormKernels {
    static let table: [String: Kernel] = [
        "layer_norm": layerNorm,
        "batch_norm": batchNorm,
        "instance_norm": instanceNorm,
        "l2_norm": l2Norm,
        "local_response_norm": localResponseNorm,
    ]

    /// Runs `body(rows, rowLength, data)` on `x`'s data arranged so that the `axes` (sorted) are
    /// the trailing, contiguous part of each row, and returns the result in `x`'s layout.
    static func overRows(_ x: Tensor, axes: [Int], _ body: (Int, Int, inout [Float]) throws -> Void) rethrows -> [Float] {
        let (outer, n, inner, perm) = ReductionKernels.layout(x.shape, axes)
        var data = x.floats
        if data.isEmpty { return data }
        if inner == 1 && perm == nil {
            try body(outer, n, &data)
            return data
        }
        // Put the normalized axes last, normalize, put them back.
        let p = perm ?? {
            let kept = (0..<x.rank).filter { !axes.contains($0) }
            return kept + axes
        }()
        var t = Reduce.permute(data, x.shape, p)
        try body(data.count / n, n, &t)
        let permutedShape = p.map { x.shape[$0] }
        return Reduce.permute(t, permutedShape, Reduce.inverse(p))
    }

    static func layerNorm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let axes = try ReductionKernels.axes(inv.has("axes") ? try inv.ints("axes") : Array(0..<x.rank), rank: x.rank, op: "layer_norm")
        let eps = try EW.epsilon(inv, default: 1e-5)
        let d = axes.reduce(1) { $0 * x.shape[$1] }
        let gamma = try inv.optionalTensor("gamma")?.floats, beta = try inv.optionalTensor("beta")?.floats
        if let g = gamma, g.count != d { throw KernelError("layer_norm: gamma has \(g.count) elements, normalized dims \(axes.map { x.shape[$0] }) have \(d)") }
        if let b = beta, b.count != d { throw KernelError("layer_norm: beta has \(b.count) elements, normalized dims \(axes.map { x.shape[$0] }) have \(d)") }
        let out = overRows(x, axes: axes) { rows, n, data in
            data.withUnsafeMutableBufferPointer { bp in
                let p = bp.baseAddress!
                for r in 0..<rows {
                    let row = p + r * n
                    let (mean, rstd) = Norm.stats(row, n, eps)
                    if let g = gamma, let b = beta {
                        for i in 0..<n { row[i] = (row[i] - mean) * rstd * g[i] + b[i] }
                    } else if let g = gamma {
                        for i in 0..<n { row[i] = (row[i] - mean) * rstd * g[i] }
                    } else if let b = beta {
                        for i in 0..<n { row[i] = (row[i] - mean) * rstd + b[i] }
                    } else {
                        for i in 0..<n { row[i] = (row[i] - mean) * rstd }
                    }
                }
            }
        }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }

    static func batchNorm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let (x, c) = try Norm.channelInput(inv, needs: "rank >= 2 (channel axis 1)")
        let mean = try Norm.channelParam(inv, "mean", c, default: 0)
        let variance = try Norm.channelParam(inv, "variance", c, default: 1)
        let gamma = try Norm.channelParam(inv, "gamma", c, default: 1)
        let beta = try Norm.channelParam(inv, "beta", c, default: 0)
        let eps = try EW.epsilon(inv, default: 1e-5)
        let rstd = zip(variance, gamma).map { v, g in g / (v + eps).squareRoot() }
        return Norm.channelRows(inv, x) { row, n, ch in
            let m = mean[ch], s = rstd[ch], b = beta[ch]
            for i in 0..<n { row[i] = (row[i] - m) * s + b }
        }
    }

    static func instanceNorm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let (x, c) = try Norm.channelInput(inv, needs: "rank >= 3 ([N, C, *D])")
        let gamma = try Norm.channelParam(inv, "gamma", c, default: 1)
        let beta = try Norm.channelParam(inv, "beta", c, default: 0)
        let eps = try EW.epsilon(inv, default: 1e-5)
        return Norm.channelRows(inv, x) { row, n, ch in
            let (mean, rstd) = Norm.stats(row, n, eps)
            let g = gamma[ch] * rstd, b = beta[ch]
            for i in 0..<n { row[i] = (row[i] - mean) * g + b }
        }
    }

    static func l2Norm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let eps = try EW.epsilon(inv, default: 1e-6)
        let axes: [Int]
        if inv.has("axes") {
            axes = try ReductionKernels.axes(try inv.ints("axes"), rank: x.rank, op: "l2_norm")
        } else {
            axes = Array(Swift.max(x.rank - 3, 0)..<x.rank)
        }
        let out = overRows(x, axes: axes) { rows, n, data in
            data.withUnsafeMutableBufferPointer { bp in
                let p = bp.baseAddress!
                for r in 0..<rows {
                    let row = p + r * n
                    let scale = 1 / (Reduce.sumSquares(row, n) + eps).squareRoot()
                    for i in 0..<n { row[i] *= scale }
                }
            }
        }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }

    static func localResponseNorm(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 2 else { throw KernelError("local_response_norm: x must have rank >= 3 ([N, C, *D]), has shape \(x.shape)") }
        let size = try inv.int("size")
        guard size >= 1 else { throw KernelError("local_response_norm: size \(size) must be >= 1") }
        let alpha = try inv.float("alpha", default: 1e-4), beta = try inv.float("beta", default: 0.75), k = try inv.float("k", default: 1)
        let c = x.shape[1], s = x.shape[2...].reduce(1, *)
        let src = x.floats
        var out = BufferPool.zeros(src.count)
        let sq = src.map { $0 * $0 }
        let scale = alpha / Float(size)
        let lo = size / 2, hi = (size - 1) / 2
        var acc = [Float](repeating: 0, count: s)
        for b in 0..<(src.count / Swift.max(c * s, 1)) {
            let base = b * c * s
            for ch in 0..<c {
                for j in 0..<s { acc[j] = 0 }
                for cc in Swift.max(ch - lo, 0)...Swift.min(ch + hi, c - 1) {
                    let q = base + cc * s
                    for j in 0..<s { acc[j] += sq[q + j] }
                }
                let q = base + ch * s
                for j in 0..<s { out[q + j] = src[q + j] / Foundation.pow(k + scale * acc[j], beta) }
            }
        }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }
}

enum Norm {
    /// Mean and 1/sqrt(biased variance + eps) of a contiguous row.
    @inline(__always)
    static func stats(_ row: UnsafePointer<Float>, _ n: Int, _ eps: Float) -> (mean: Float, rstd: Float) {
        let mean = Reduce.sum(row, n) / Float(n)
        let variance = Reduce.sumSquaredDeviations(row, n, mean) / Float(n)
        return (mean, 1 / (variance + eps).squareRoot())
    }

    /// `x` of `batch_norm` / `instance_norm` and its channel count (axis 1).
    /// - Throws: `KernelError` "<op>: x must have `needs`" when x has rank < 2.
    static func channelInput(_ inv: KernelInvocation, needs: String) throws -> (x: Tensor, channels: Int) {
        let x = try inv.tensor("x")
        guard x.rank >= 2 else { throw KernelError("\(inv.op.type): x must have \(needs), has shape \(x.shape)") }
        return (x, x.shape[1])
    }

    /// The normalization of `batch_norm` and `instance_norm`: `x` (rank ≥ 2, channel axis 1)
    /// viewed as one contiguous row per (sample, channel) over its trailing dimensions;
    /// `body(row, length, channel)` rewrites each row of a copy in place. Returns the copy, of
    /// `x`'s shape, in the op's output dtype.
    static func channelRows(_ inv: KernelInvocation, _ x: Tensor,
                            _ body: (_ row: UnsafeMutablePointer<Float>, _ length: Int, _ channel: Int) -> Void) -> [RuntimeValue] {
        let c = x.shape[1], inner = x.shape[2...].reduce(1, *)
        var data = x.floats
        if !data.isEmpty {
            data.withUnsafeMutableBufferPointer { bp in
                let p = bp.baseAddress!
                for r in 0..<(bp.count / inner) { body(p + r * inner, inner, r % c) }
            }
        }
        return [EW.floatResult(inv.outputDType(), x.shape, data)]
    }

    /// A per-channel parameter of length `c` (a single value is broadcast), or `default`.
    static func channelParam(_ inv: KernelInvocation, _ name: String, _ c: Int, default d: Float) throws -> [Float] {
        guard let t = try inv.optionalTensor(name) else { return [Float](repeating: d, count: c) }
        let v = t.floats
        if v.count == c { return v }
        if v.count == 1 { return [Float](repeating: v[0], count: c) }
        throw KernelError("\(inv.op.type): \(name) has \(v.count) elements, expected \(c) (channels)")
    }
}
