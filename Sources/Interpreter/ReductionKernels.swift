import Foundation
import GraphIR

/// MIL reductions (iOS15 `reduction`, iOS17 `reduce_argmax/argmin` with `output_dtype`).
///
/// `reduce_*(x, axes = all, keep_dims = false)`; negative axes count from the end; an empty
/// `axes` list reduces nothing (numpy `axis=()`). When the reduced axes form one contiguous block
/// the data is read in place as `[outer, n, inner]`; otherwise it is first permuted so the
/// reduced axes come last. Rows (inner = 1, e.g. RMSNorm's `reduce_mean` over the last axis) are
/// summed with SIMD8 accumulators.
///
/// Integer inputs with an integer output reduce in Int64 (as numpy), then wrap to int32; `mean`,
/// `l2_norm`, `log_sum`, `log_sum_exp` compute in Double and truncate (numpy `astype(int32)`).
/// Over an empty axis: sum / l1 / l2 / sum_square 0, prod 1, mean NaN, log_sum and
/// log_sum_exp −inf; max / min / argmax / argmin throw (numpy refuses too).
/// `reduce_log_sum_exp` shifts by the max unless it is infinite (as torch.logsumexp), so a row of
/// −inf gives −inf and a +inf element gives +inf.
enum ReductionKernels {
    enum Mode { case sum, mean, max, min, prod, l1, l2, logSum, logSumExp, sumSquare }

    static let table: [String: Kernel] = [
        "reduce_sum": { try reduce($0, .sum) },
        "reduce_mean": { try reduce($0, .mean) },
        "reduce_max": { try reduce($0, .max) },
        "reduce_min": { try reduce($0, .min) },
        "reduce_prod": { try reduce($0, .prod) },
        "reduce_l1_norm": { try reduce($0, .l1) },
        "reduce_l2_norm": { try reduce($0, .l2) },
        "reduce_log_sum": { try reduce($0, .logSum) },
        "reduce_log_sum_exp": { try reduce($0, .logSumExp) },
        "reduce_sum_square": { try reduce($0, .sumSquare) },
        "reduce_argmax": { try argReduce($0, max: true) },
        "reduce_argmin": { try argReduce($0, max: false) },
    ]

    /// Sorted, normalized, distinct axes.
    static func axes(_ raw: [Int], rank: Int, op: String) throws -> [Int] {
        var out: [Int] = []
        for a in raw {
            let r = a < 0 ? a + rank : a
            guard r >= 0, r < rank else { throw KernelError("\(op): axis \(a) out of range for rank \(rank)") }
            guard !out.contains(r) else { throw KernelError("\(op): axis \(a) repeated in \(raw)") }
            out.append(r)
        }
        return out.sorted()
    }

    /// The layout of a reduction over sorted `axes`: (outer, n, inner) plus the permutation to
    /// apply first when the axes are not one contiguous block (kept axes first, then reduced).
    static func layout(_ shape: [Int], _ axes: [Int]) -> (outer: Int, n: Int, inner: Int, perm: [Int]?) {
        if axes.isEmpty { return (shape.reduce(1, *), 1, 1, nil) }
        let first = axes[0], last = axes[axes.count - 1]
        let n = axes.reduce(1) { $0 * shape[$1] }
        if last - first + 1 == axes.count {
            return (shape[..<first].reduce(1, *), n, shape[(last + 1)...].reduce(1, *), nil)
        }
        let kept = (0..<shape.count).filter { !axes.contains($0) }
        return (kept.reduce(1) { $0 * shape[$1] }, n, 1, kept + axes)
    }

    static func reducedShape(_ shape: [Int], _ axes: [Int], keepDims: Bool) -> [Int] {
        var out: [Int] = []
        for (i, d) in shape.enumerated() {
            if axes.contains(i) {
                if keepDims { out.append(1) }
            } else {
                out.append(d)
            }
        }
        return out
    }

    static func reduce(_ inv: KernelInvocation, _ mode: Mode) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let op = inv.op.type
        let ax = try axes(inv.has("axes") ? try inv.ints("axes") : Array(0..<x.rank), rank: x.rank, op: op)
        let keep = try inv.bool("keep_dims", default: false)
        let outShape = reducedShape(x.shape, ax, keepDims: keep)
        let (outer, n, inner, perm) = layout(x.shape, ax)
        let outType = inv.outputDType()
        if n == 0 && outer * inner > 0 && (mode == .max || mode == .min) {
            throw KernelError("\(op): reduction over an empty axis of shape \(x.shape) has no identity")
        }
        if !outType.isFloat, EW.isIntegral(x) {
            var src = x.ints
            if let p = perm { src = Reduce.permute(src, x.shape, p) }
            let r = Reduce.ints(src, outer, n, inner, mode)
            return [.tensor(Tensor(outType, shape: outShape, ints: r))]
        }
        var src = x.floats
        if let p = perm { src = Reduce.permute(src, x.shape, p) }
        if outer * inner == 0 { return [EW.floatResult(outType, outShape, [])] }
        let r = Reduce.floats(src, outer, n, inner, mode)
        return [EW.floatResult(outType, outShape, r)]
    }

    /// `reduce_argmax/argmin(x, axis = -1, keep_dims = false, output_dtype = "int32")`: the first
    /// index of the extreme value; a NaN counts as the extreme (numpy).
    static func argReduce(_ inv: KernelInvocation, max isMax: Bool) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let op = inv.op.type
        if inv.has("output_dtype") {
            let s = try inv.string("output_dtype")
            guard s == "int32" || s == "uint16" else { throw KernelError("\(op): output_dtype '\(s)' (int32 or uint16)") }
        }
        let keep = try inv.bool("keep_dims", default: false)
        let outType: DType = inv.outputDType().isInteger ? inv.outputDType() : .int32
        if x.rank == 0 { return [.tensor(Tensor(outType, shape: [], ints: [0]))] }
        let axis = try Act.axis(try inv.int("axis", default: -1), rank: x.rank, op: op)
        let outShape = reducedShape(x.shape, [axis], keepDims: keep)
        let (outer, n, inner) = Act.split(x.shape, axis)
        if n == 0 && outer * inner > 0 { throw KernelError("\(op): empty axis \(axis) of shape \(x.shape)") }
        var out = BufferPool.zeroInts(outer * inner)
        if case let .float(a) = x.data {
            a.withUnsafeBufferPointer { p in
                for o in 0..<outer {
                    for j in 0..<inner {
                        let base = o * n * inner + j
                        var best = p[base], bi = 0
                        if !best.isNaN {
                            for k in 1..<Swift.max(n, 1) {
                                let v = p[base + k * inner]
                                if v.isNaN { bi = k; break }
                                if isMax ? v > best : v < best { best = v; bi = k }
                            }
                        }
                        out[o * inner + j] = Int32(bi)
                    }
                }
            }
        } else {
            let a = x.ints
            for o in 0..<outer {
                for j in 0..<inner {
                    let base = o * n * inner + j
                    var best = a[base], bi = 0
                    for k in 1..<Swift.max(n, 1) {
                        let v = a[base + k * inner]
                        if isMax ? v > best : v < best { best = v; bi = k }
                    }
                    out[o * inner + j] = Int32(bi)
                }
            }
        }
        return [.tensor(Tensor(outType, shape: outShape, ints: out))]
    }
}

/// Reduction loops.
enum Reduce {
    /// Row-major transpose: `out[i] = a[...]` with output dimension d taken from input axis perm[d].
    static func permute<T>(_ a: [T], _ shape: [Int], _ perm: [Int]) -> [T] {
        let n = a.count
        guard n > 0 else { return [] }
        let strides = contiguousStrides(shape)
        let dims = perm.map { shape[$0] }
        let st = perm.map { strides[$0] }
        var cursor = StridedCursor(shape: dims, a: st)
        var out: [T] = []
        out.reserveCapacity(n)
        a.withUnsafeBufferPointer { p in
            for _ in 0..<n {
                out.append(p[cursor.offsetA])
                cursor.step()
            }
        }
        return out
    }

    /// Inverse of a permutation.
    static func inverse(_ perm: [Int]) -> [Int] {
        var inv = [Int](repeating: 0, count: perm.count)
        for (i, p) in perm.enumerated() { inv[p] = i }
        return inv
    }

    // MARK: SIMD row sums

    @inline(__always)
    static func rowSum(_ p: UnsafePointer<Float>, _ n: Int, _ pre: (SIMD8<Float>) -> SIMD8<Float>, _ pre1: (Float) -> Float) -> Float {
        var a0 = SIMD8<Float>(), a1 = SIMD8<Float>()
        let raw = UnsafeRawPointer(p)
        var i = 0
        while i + 16 <= n {
            a0 += pre(raw.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self))
            a1 += pre(raw.loadUnaligned(fromByteOffset: (i + 8) * 4, as: SIMD8<Float>.self))
            i += 16
        }
        if i + 8 <= n {
            a0 += pre(raw.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self))
            i += 8
        }
        var s = (a0 + a1).sum()
        while i < n {
            s += pre1(p[i])
            i += 1
        }
        return s
    }

    /// Σ x over a contiguous row.
    @inline(__always)
    static func sum(_ p: UnsafePointer<Float>, _ n: Int) -> Float { rowSum(p, n, { $0 }, { $0 }) }

    /// Σ x² over a contiguous row.
    @inline(__always)
    static func sumSquares(_ p: UnsafePointer<Float>, _ n: Int) -> Float { rowSum(p, n, { $0 * $0 }, { $0 * $0 }) }

    /// Σ (x - m)² over a contiguous row.
    @inline(__always)
    static func sumSquaredDeviations(_ p: UnsafePointer<Float>, _ n: Int, _ m: Float) -> Float {
        let mv = SIMD8<Float>(repeating: m)
        return rowSum(p, n, { let d = $0 - mv; return d * d }, { let d = $0 - m; return d * d })
    }

    @inline(__always)
    static func sumAbs(_ p: UnsafePointer<Float>, _ n: Int) -> Float {
        rowSum(p, n, { $0.replacing(with: -$0, where: $0 .< 0) }, { Swift.abs($0) })
    }

    /// Max (or min) of a contiguous row of n > 0 values; NaN if any is NaN.
    @inline(__always)
    static func extreme(_ p: UnsafePointer<Float>, _ n: Int, max isMax: Bool) -> Float {
        let raw = UnsafeRawPointer(p)
        var m = SIMD8<Float>(repeating: p[0])
        var nan = SIMDMask<SIMD8<Int32>>()
        var i = 0
        while i + 8 <= n {
            let v = raw.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
            nan .|= v .!= v
            m.replace(with: v, where: isMax ? v .> m : v .< m)
            i += 8
        }
        if any(nan) { return .nan }
        var r = isMax ? m.max() : m.min()
        while i < n {
            let v = p[i]
            if v.isNaN { return v }
            r = isMax ? (v > r ? v : r) : (v < r ? v : r)
            i += 1
        }
        return r
    }

    // MARK: float

    /// Reduces `src` viewed as `[outer, n, inner]` over the middle dimension.
    static func floats(_ src: [Float], _ outer: Int, _ n: Int, _ inner: Int, _ mode: ReductionKernels.Mode) -> [Float] {
        var out = BufferPool.zeros(outer * inner)
        src.withUnsafeBufferPointer { sp in
            out.withUnsafeMutableBufferPointer { op in
                let o = op.baseAddress!
                guard let s = sp.baseAddress, n > 0 else {
                    // Empty reduced axis.
                    let v: Float
                    switch mode {
                    case .mean: v = .nan
                    case .prod: v = 1
                    case .logSum, .logSumExp: v = -.infinity
                    default: v = 0
                    }
                    for i in 0..<op.count { o[i] = v }
                    return
                }
                if inner == 1 {
                    for r in 0..<outer { o[r] = row(s + r * n, n, mode) }
                } else {
                    for r in 0..<outer { columns(s + r * n * inner, n, inner, o + r * inner, mode) }
                }
            }
        }
        return out
    }

    /// One contiguous row.
    @inline(__always)
    static func row(_ p: UnsafePointer<Float>, _ n: Int, _ mode: ReductionKernels.Mode) -> Float {
        switch mode {
        case .sum: return sum(p, n)
        case .mean: return sum(p, n) / Float(n)
        case .sumSquare: return sumSquares(p, n)
        case .l2: return sumSquares(p, n).squareRoot()
        case .l1: return sumAbs(p, n)
        case .logSum: return Foundation.log(sum(p, n))
        case .max: return extreme(p, n, max: true)
        case .min: return extreme(p, n, max: false)
        case .prod:
            var r: Float = 1
            for i in 0..<n { r *= p[i] }
            return r
        case .logSumExp:
            var m = p[0]
            var nan = false
            for i in 0..<n { let v = p[i]; m = v > m ? v : m; nan = nan || v.isNaN }
            if nan { return .nan }
            let shift: Float = m.isInfinite ? 0 : m
            var s: Float = 0
            for i in 0..<n { s += Foundation.exp(p[i] - shift) }
            return Foundation.log(s) + shift
        }
    }

    /// Reduces `n` rows of `inner` contiguous values into `o[0..<inner]`.
    static func columns(_ p: UnsafePointer<Float>, _ n: Int, _ inner: Int, _ o: UnsafeMutablePointer<Float>, _ mode: ReductionKernels.Mode) {
        switch mode {
        case .sum, .mean, .logSum:
            for j in 0..<inner { o[j] = p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] += q[j] } }
            if mode == .mean { let f = Float(n); for j in 0..<inner { o[j] /= f } }
            if mode == .logSum { for j in 0..<inner { o[j] = Foundation.log(o[j]) } }
        case .sumSquare, .l2:
            for j in 0..<inner { o[j] = p[j] * p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] += q[j] * q[j] } }
            if mode == .l2 { for j in 0..<inner { o[j] = o[j].squareRoot() } }
        case .l1:
            for j in 0..<inner { o[j] = Swift.abs(p[j]) }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] += Swift.abs(q[j]) } }
        case .prod:
            for j in 0..<inner { o[j] = p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] *= q[j] } }
        case .max:
            for j in 0..<inner { o[j] = p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] = EW.maxNaN(o[j], q[j]) } }
        case .min:
            for j in 0..<inner { o[j] = p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { o[j] = EW.minNaN(o[j], q[j]) } }
        case .logSumExp:
            var m = [Float](repeating: 0, count: inner)
            for j in 0..<inner { m[j] = p[j] }
            for k in 1..<n { let q = p + k * inner; for j in 0..<inner { m[j] = EW.maxNaN(m[j], q[j]) } }
            for j in 0..<inner { if m[j].isInfinite { m[j] = 0 }; o[j] = 0 }
            for k in 0..<n { let q = p + k * inner; for j in 0..<inner { o[j] += Foundation.exp(q[j] - m[j]) } }
            for j in 0..<inner { o[j] = Foundation.log(o[j]) + m[j] }
        }
    }

    // MARK: int

    /// Integer reduction of `[outer, n, inner]` (numpy: int64 accumulation, then int32).
    static func ints(_ src: [Int32], _ outer: Int, _ n: Int, _ inner: Int, _ mode: ReductionKernels.Mode) -> [Int32] {
        var out = BufferPool.zeroInts(outer * inner)
        for o in 0..<outer {
            for j in 0..<inner {
                let base = o * n * inner + j
                var acc: Int64 = mode == .prod ? 1 : 0
                var m: Int32 = n > 0 ? src[base] : 0
                var d: Double = 0
                for k in 0..<n {
                    let v = src[base + k * inner]
                    switch mode {
                    case .sum, .mean, .logSum: acc &+= Int64(v)
                    case .prod: acc = acc &* Int64(v)
                    case .sumSquare, .l2: acc &+= Int64(v &* v)
                    case .l1: acc &+= Int64(v == .min ? v : Swift.abs(v))
                    case .max: m = Swift.max(m, v)
                    case .min: m = Swift.min(m, v)
                    case .logSumExp: break
                    }
                }
                let r: Int32
                switch mode {
                case .sum, .prod, .sumSquare, .l1: r = Int32(truncatingIfNeeded: acc)
                case .mean: r = EW.toInt32(Double(acc) / Double(n))
                case .l2: r = EW.toInt32(Double(acc).squareRoot())
                case .logSum: r = EW.toInt32(Foundation.log(Double(acc)))
                case .max, .min: r = m
                case .logSumExp:
                    var mx = -Double.infinity
                    for k in 0..<n { mx = Swift.max(mx, Double(src[base + k * inner])) }
                    if mx.isInfinite { mx = 0 }
                    for k in 0..<n { d += Foundation.exp(Double(src[base + k * inner]) - mx) }
                    r = EW.toInt32(Foundation.log(d) + mx)
                }
                out[o * inner + j] = r
            }
        }
        return out
    }
}
