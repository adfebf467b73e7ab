import CKernels
import Foundation
import GraphIR

/// MIL activations (iOS15/iOS17 `activation`): computed in Float, NaN propagated (as numpy's
/// `maximum`/`minimum` in coremltools' value inference).
///
/// Parameters that MIL requires but OpRegistry lists as optional take the NeuralNetwork-layer
/// defaults when absent: `leaky_relu` alpha 0.01, `elu` alpha 1, `thresholded_relu` alpha 1,
/// `sigmoid_hard` alpha 0.2 / beta 0.5, `scaled_tanh` alpha 1 / beta 1, `linear_activation`
/// beta 0.
///
/// `clamped_relu` follows the op reference's definition, `x >= 0 ? min(beta, x) : min(beta, alpha·x)`;
/// coremltools' value inference (`min(max(x,0),beta) + min(min(x,0)·alpha, beta)`) agrees with it
/// only for beta >= 0.
enum ActivationKernels {
    static let table: [String: Kernel] = [
        "relu": { try ElementwiseKernels.unary($0, EW.relu) },
        "relu6": { try ElementwiseKernels.unary($0, { $0 < 0 ? 0 : ($0 > 6 ? 6 : $0) }) },
        "sigmoid": { try unary8($0, FastExp.sigmoid8) },
        "silu": { try unary8($0, FastExp.silu8) },
        "softplus": { try ElementwiseKernels.unary($0, { Act.softplus($0) }) },
        "softsign": { try ElementwiseKernels.unary($0, { $0 / (1 + Swift.abs($0)) }) },
        "gelu": gelu,
        "elu": { inv in
            let a = try inv.float("alpha", default: 1)
            return try ElementwiseKernels.unary(inv, { $0 > 0 ? $0 : ($0.isNaN ? $0 : a * Foundation.expm1($0)) })
        },
        "leaky_relu": { inv in
            let a = try inv.float("alpha", default: 0.01)
            return try ElementwiseKernels.unary(inv, { $0 < 0 ? a * $0 : $0 })
        },
        "thresholded_relu": { inv in
            let a = try inv.float("alpha", default: 1)
            return try ElementwiseKernels.unary(inv, { $0 < a ? 0 : $0 })
        },
        "clamped_relu": { inv in
            let a = try inv.float("alpha"), b = try inv.float("beta")
            return try ElementwiseKernels.unary(inv, { x in
                x.isNaN ? x : EW.minNaN(x >= 0 ? x : a * x, b)
            })
        },
        "sigmoid_hard": { inv in
            let a = try inv.float("alpha", default: 0.2), b = try inv.float("beta", default: 0.5)
            return try ElementwiseKernels.unary(inv, { EW.minNaN(EW.maxNaN(a * $0 + b, 0), 1) })
        },
        "scaled_tanh": { inv in
            let a = try inv.float("alpha", default: 1), b = try inv.float("beta", default: 1)
            return try unary8(inv, { a * FastExp.tanh8(b * $0) })
        },
        "linear_activation": { inv in
            let a = try inv.float("alpha"), b = try inv.float("beta", default: 0)
            return try ElementwiseKernels.unary(inv, { a * $0 + b })
        },
        "prelu": prelu,
        "softplus_parametric": softplusParametric,
        "softmax": softmax,
    ]

    /// A float unary op computed eight lanes at a time.
    @inline(__always)
    static func unary8(_ inv: KernelInvocation, _ f: (SIMD8<Float>) -> SIMD8<Float>) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        return [EW.floatResult(inv.outputDType(), x.shape, FastExp.map(x.floats, f))]
    }

    /// MIL `gelu(x, mode)`: EXACT (default) `0.5x(1+erf(x/√2))`, TANH_APPROXIMATION
    /// `0.5x(1+tanh(√(2/π)(x+0.044715x³)))`, SIGMOID_APPROXIMATION `x·sigmoid(1.702x)`.
    static func gelu(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let mode = try inv.string("mode", default: "EXACT")
        switch mode {
        case "EXACT":
            // C body (fk_gelu_erf: Cephes erff / erfcf, the negative tail as erfc, no
            // cancellation): Swift's SIMD8 selects lower to per-lane code, ~10× the instructions.
            // Element by element, so chunks on several cores give the same bits (~7 cycles an
            // element: cost ≈ 40 multiply-adds).
            let x = try inv.tensor("x")
            let src = x.floats
            let n = src.count
            let out: [Float] = BufferPool.build(n) { o in
                src.withUnsafeBufferPointer { s in
                    guard let b = s.baseAddress else { return }
                    GEMM.parallelChunks(n, align: 64, work: n * 40) { r in fk_gelu_erf(b + r.lowerBound, o + r.lowerBound, r.count) }
                }
            }
            return [EW.floatResult(inv.outputDType(), x.shape, out)]
        case "TANH_APPROXIMATION":
            let k = Float((2 / Double.pi).squareRoot())
            return try unary8(inv, { x in 0.5 * x * (1 + FastExp.tanh8(k * (x + 0.044715 * x * x * x))) })
        case "SIGMOID_APPROXIMATION":
            return try unary8(inv, { $0 / (1 + FastExp.exp8(-1.702 * $0)) })
        default:
            throw KernelError("gelu: unknown mode '\(mode)' (EXACT, TANH_APPROXIMATION, SIGMOID_APPROXIMATION)")
        }
    }

    /// MIL `prelu(x, alpha)`: `x > 0 ? x : alpha[c] * x`, c along axis 1 (alpha of length C or 1).
    static func prelu(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let alpha = try inv.tensor("alpha").floats
        let out = try Act.perChannel(x, [alpha], name: "prelu") { v, p in v > 0 ? v : (v.isNaN ? v : p[0] * v) }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }

    /// MIL `softplus_parametric(x, alpha, beta)`: `alpha[c] · log(1 + exp(beta[c] · x))`, c on axis 1.
    static func softplusParametric(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let a = try inv.tensor("alpha").floats, b = try inv.tensor("beta").floats
        let out = try Act.perChannel(x, [a, b], name: "softplus_parametric") { v, p in p[0] * Act.softplus(p[1] * v) }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }

    /// MIL `softmax(x, axis = -1)`: `exp(x - max) / sum(exp(x - max))` along `axis`.
    static func softmax(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        let axis = try Act.axis(try inv.int("axis", default: -1), rank: x.rank, op: "softmax")
        let src = x.floats
        let (outer, n, inner) = Act.split(x.shape, axis)
        // Both paths below write every element.
        var out: [Float] = BufferPool.uninitialized(src.count)
        guard !src.isEmpty else { return [EW.floatResult(inv.outputDType(), x.shape, out)] }
        src.withUnsafeBufferPointer { sp in
            out.withUnsafeMutableBufferPointer { op in
                let s = sp.baseAddress!, o = op.baseAddress!
                if inner == 1 {
                    // C rows (fk_softmax_rows: vectorized exp; Swift's SIMD8 exp lowers to
                    // per-lane selects), in place on a copy; rows split across cores (each row
                    // on its own: the same bits however they are split).
                    GEMM.parallelChunks(outer, work: outer * n * 24) { r in
                        let off = r.lowerBound * n
                        (o + off).update(from: s + off, count: r.count * n)
                        fk_softmax_rows(o + off, r.count, n, n)
                    }
                } else {
                    var m = [Float](repeating: 0, count: inner)
                    var sum = [Float](repeating: 0, count: inner)
                    for r in 0..<outer {
                        let base = r * n * inner
                        for j in 0..<inner { m[j] = -.infinity; sum[j] = 0 }
                        for k in 0..<n {
                            let row = s + base + k * inner
                            for j in 0..<inner { m[j] = EW.maxNaN(m[j], row[j]) }
                        }
                        for k in 0..<n {
                            let row = s + base + k * inner, orow = o + base + k * inner
                            for j in 0..<inner { orow[j] = row[j] - m[j] }
                            FastExp.apply(orow, orow, inner) { FastExp.exp8($0) }
                            for j in 0..<inner { sum[j] += orow[j] }
                        }
                        for j in 0..<inner { sum[j] = 1 / sum[j] }
                        for k in 0..<n {
                            let orow = o + base + k * inner
                            for j in 0..<inner { orow[j] *= sum[j] }
                        }
                    }
                }
            }
        }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }
}

enum Act {
    /// `log(1 + e^x)` without overflow: `log1p(e^-|x|) + max(x, 0)`.
    @inline(__always)
    static func softplus(_ x: Float) -> Float {
        x.isNaN ? x : Foundation.log1p(Foundation.exp(-Swift.abs(x))) + (x > 0 ? x : 0)
    }

    /// Normalizes a possibly negative axis.
    static func axis(_ a: Int, rank: Int, op: String) throws -> Int {
        let r = a < 0 ? a + rank : a
        guard r >= 0, r < max(rank, 1) else { throw KernelError("\(op): axis \(a) out of range for rank \(rank)") }
        return r
    }

    /// (product of dims before `axis`, dim `axis`, product of dims after `axis`).
    static func split(_ shape: [Int], _ axis: Int) -> (Int, Int, Int) {
        guard !shape.isEmpty else { return (1, 1, 1) }
        return (shape[..<axis].reduce(1, *), shape[axis], shape[(axis + 1)...].reduce(1, *))
    }

    /// Softmax of one contiguous row (n > 0).
    @inline(__always)
    static func softmaxRow(_ s: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        let m = Reduce.extreme(s, n, max: true)
        let mv = SIMD8<Float>(repeating: m)
        let rs = UnsafeRawPointer(s), ro = UnsafeMutableRawPointer(o)
        var acc = SIMD8<Float>()
        var i = 0
        while i + 8 <= n {
            let e = FastExp.exp8(rs.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self) - mv)
            ro.storeBytes(of: e, toByteOffset: i * 4, as: SIMD8<Float>.self)
            acc += e
            i += 8
        }
        var sum = acc.sum()
        while i < n {
            let e = FastExp.exp(s[i] - m)
            o[i] = e
            sum += e
            i += 1
        }
        let inv = 1 / sum
        for i in 0..<n { o[i] *= inv }
    }

    /// Applies `f(x, params at channel c)` with c the index along axis 1; each parameter vector
    /// has length C (or 1, broadcast).
    static func perChannel(_ x: Tensor, _ params: [[Float]], name: String, _ f: (Float, [Float]) -> Float) throws -> [Float] {
        let c = x.rank >= 2 ? x.shape[1] : 1
        for p in params where p.count != c && p.count != 1 {
            throw KernelError("\(name): parameter of length \(p.count), expected \(c) (dimension 1 of \(x.shape)) or 1")
        }
        let inner = x.rank >= 2 ? x.shape[2...].reduce(1, *) : 1
        let src = x.floats
        var out = BufferPool.zeros(src.count)
        var pv = [Float](repeating: 0, count: params.count)
        var i = 0
        let outer = src.count / max(c * inner, 1)
        for _ in 0..<outer {
            for ch in 0..<c {
                for (k, p) in params.enumerated() { pv[k] = p.count == 1 ? p[0] : p[ch] }
                for _ in 0..<inner {
                    out[i] = f(src[i], pv)
                    i += 1
                }
            }
        }
        return out
    }
}

/// Vectorized `exp` for Float (Cephes `expf` scheme: `x = n·ln2 + r`, |r| ≤ ln2/2, a degree-6
/// polynomial for `e^r`, `2^n` built in the exponent bits). Within a few ulp of libm's `expf`
/// (checked over the whole input range in ElementwiseKernelTests); underflows gradually to 0,
/// overflows to +inf, NaN stays NaN. Used by `exp`, `sigmoid`, `silu`, `softmax`, `gelu` (sigmoid
/// and tanh forms), `tanh`, `scaled_tanh`, which on LLM activations are dominated by exp.
enum FastExp {
    /// `sigmoid` eight lanes at a time: 1 / (1 + e^−x) (the kernel's and the row programs' form).
    @inline(__always)
    static func sigmoid8(_ x: SIMD8<Float>) -> SIMD8<Float> { 1 / (1 + exp8(-x)) }

    /// `silu` eight lanes at a time: x / (1 + e^−x).
    @inline(__always)
    static func silu8(_ x: SIMD8<Float>) -> SIMD8<Float> { x / (1 + exp8(-x)) }

    @inline(__always)
    static func exp8(_ x: SIMD8<Float>) -> SIMD8<Float> {
        let hi = SIMD8<Float>(repeating: 88.72283)   // ln(Float.greatestFiniteMagnitude)
        let lo = SIMD8<Float>(repeating: -103.97208) // ln(Float.leastNonzeroMagnitude / 2)
        // (Mask selects: SIMD's `clamped` is a scalar, NaN-aware loop.)
        let v = x.replacing(with: lo, where: x .< lo).replacing(with: hi, where: x .> hi)
        // n = round(v / ln2) with the 1.5·2^23 trick (no SSE4.1 rounding needed).
        let magic = SIMD8<Float>(repeating: 12_582_912)
        let t = v * 1.442_695_04 + magic
        let n = t - magic
        var r = v - n * 0.693_359_375        // ln2 hi
        r = r - n * (-2.121_944_4e-4)        // ln2 lo
        var p = SIMD8<Float>(repeating: 1.987_569_1e-4)
        p = p * r + 1.398_199_9e-3
        p = p * r + 8.333_452e-3
        p = p * r + 4.166_579_6e-2
        p = p * r + 1.666_666_5e-1
        p = p * r + 5e-1
        p = p * (r * r) + r + 1
        // 2^n (n in -150...128) as 2^n1 · 2^n2, both factors normal; n sits in t's low bits.
        let ni = unsafeBitCast(t, to: SIMD8<Int32>.self) &- 0x4B40_0000
        let n1 = ni &>> 1, n2 = ni &- n1
        let s1 = unsafeBitCast((n1 &+ 127) &<< 23, to: SIMD8<Float>.self)
        let s2 = unsafeBitCast((n2 &+ 127) &<< 23, to: SIMD8<Float>.self)
        var out = p * s1 * s2
        out.replace(with: .infinity, where: x .> hi)
        out.replace(with: 0, where: x .< lo)
        out.replace(with: x, where: x .!= x)
        return out
    }

    @inline(__always)
    static func exp(_ x: Float) -> Float { exp8(SIMD8(repeating: x))[0] }

    /// Vectorized `tanh` (Cephes `tanhf` scheme): `x + x·z·P(z)`, z = x², for |x| < 0.625;
    /// `sign(x)·(1 − 2/(e^{2|x|} + 1))` above. Within a few ulp of libm; NaN stays NaN.
    @inline(__always)
    static func tanh8(_ x: SIMD8<Float>) -> SIMD8<Float> {
        let a = x.replacing(with: -x, where: x .< 0)
        let z = x * x
        var p = SIMD8<Float>(repeating: -5.704_988_7e-3)
        p = p * z + 2.063_908_9e-2
        p = p * z - 5.373_971_6e-2
        p = p * z + 1.333_144_2e-1
        p = p * z - 3.333_328_2e-1
        let small = x + x * z * p
        var big = 1 - 2 / (exp8(a + a) + 1)
        big.replace(with: -big, where: x .< 0)
        var out = small.replacing(with: big, where: a .>= 0.625)
        out.replace(with: x, where: x .!= x)
        return out
    }

    /// `out[i] = f(a[i])` eight lanes at a time (the tail padded), f built on ``exp8(_:)``.
    @inline(__always)
    static func map(_ a: [Float], _ f: (SIMD8<Float>) -> SIMD8<Float>) -> [Float] {
        let n = a.count
        return BufferPool.build(n) { o in
            a.withUnsafeBufferPointer { p in apply(p.baseAddress!, o, n, f) }
        }
    }

    /// `o[i] = f(s[i])` for i < n (s and o may alias).
    @inline(__always)
    static func apply(_ s: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int, _ f: (SIMD8<Float>) -> SIMD8<Float>) {
        let rs = UnsafeRawPointer(s), ro = UnsafeMutableRawPointer(o)
        var i = 0
        while i + 8 <= n {
            ro.storeBytes(of: f(rs.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)), toByteOffset: i * 4, as: SIMD8<Float>.self)
            i += 8
        }
        if i < n {
            var v = SIMD8<Float>()
            for k in 0..<(n - i) { v[k] = s[i + k] }
            let r = f(v)
            for k in 0..<(n - i) { o[i + k] = r[k] }
        }
    }
}
