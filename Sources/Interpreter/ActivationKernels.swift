import Foundation
import GraphIR

/// MIL activations (iOS15/iOS17 `activation`): computed in Float, NaN propagated (as numpy's
/// `maximum`/`minimum` in coremltools' value inference).
///
/// Parameters that MIL requires but OpRegistry lists as optional take the NeuralNetwork-layer
/// defaults when absent: `leaky_relu` alpha 0.01, `elu` alpha 1, `thresholded_relu` alpha 1,
/// `sigmoid_hard` alpha 0.2 / beta 0.5, `scaled_tanh` alpha 1 / beta 1, `linear_activation`
/// beta 0.
enum ActivationKernels {
    static let table: [String: Kernel] = [
        "relu": { try ElementwiseKernels.unary($0, { $0 < 0 ? 0 : $0 }) },
        "relu6": { try ElementwiseKernels.unary($0, { $0 < 0 ? 0 : ($0 > 6 ? 6 : $0) }) },
        "sigmoid": { try ElementwiseKernels.unary($0, { 1 / (1 + Foundation.exp(-$0)) }) },
        "silu": { try ElementwiseKernels.unary($0, { $0 / (1 + Foundation.exp(-$0)) }) },
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
            return try ElementwiseKernels.unary(inv, { a * Foundation.tanh(b * $0) })
        },
        "linear_activation": { inv in
            let a = try inv.float("alpha"), b = try inv.float("beta", default: 0)
            return try ElementwiseKernels.unary(inv, { a * $0 + b })
        },
        "prelu": prelu,
        "softplus_parametric": softplusParametric,
        "softmax": softmax,
    ]

    /// MIL `gelu(x, mode)`: EXACT (default) `0.5x(1+erf(x/√2))`, TANH_APPROXIMATION
    /// `0.5x(1+tanh(√(2/π)(x+0.044715x³)))`, SIGMOID_APPROXIMATION `x·sigmoid(1.702x)`.
    static func gelu(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let mode = try inv.string("mode", default: "EXACT")
        switch mode {
        case "EXACT":
            let r = Float(0.5).squareRoot()
            return try ElementwiseKernels.unary(inv, { 0.5 * $0 * (1 + Foundation.erf($0 * r)) })
        case "TANH_APPROXIMATION":
            let k = Float((2 / Double.pi).squareRoot())
            return try ElementwiseKernels.unary(inv, { x in 0.5 * x * (1 + Foundation.tanh(k * (x + 0.044715 * x * x * x))) })
        case "SIGMOID_APPROXIMATION":
            return try ElementwiseKernels.unary(inv, { $0 / (1 + Foundation.exp(-1.702 * $0)) })
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
        var out = [Float](repeating: 0, count: src.count)
        guard !src.isEmpty else { return [EW.floatResult(inv.outputDType(), x.shape, out)] }
        src.withUnsafeBufferPointer { sp in
            out.withUnsafeMutableBufferPointer { op in
                let s = sp.baseAddress!, o = op.baseAddress!
                if inner == 1 {
                    for r in 0..<outer {
                        Act.softmaxRow(s + r * n, o + r * n, n)
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
                            for j in 0..<inner {
                                let e = Foundation.exp(row[j] - m[j])
                                orow[j] = e
                                sum[j] += e
                            }
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

    /// Softmax of one contiguous row.
    @inline(__always)
    static func softmaxRow(_ s: UnsafePointer<Float>, _ o: UnsafeMutablePointer<Float>, _ n: Int) {
        var m = -Float.infinity
        var nan = false
        for i in 0..<n {
            let v = s[i]
            m = v > m ? v : m
            nan = nan || v.isNaN
        }
        if nan { m = .nan }
        var sum: Float = 0
        for i in 0..<n {
            let e = Foundation.exp(s[i] - m)
            o[i] = e
            sum += e
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
        var out = [Float](repeating: 0, count: src.count)
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
