import Foundation
import GraphIR

/// MIL random ops (iOS15 `random`). Source: the MIL op reference
/// (`coremltools.converters.mil.mil.ops.defs.iOS15.random`).
///
/// - `random_uniform(shape, low = 0, high = 1, seed = −1)`: U[low, high).
/// - `random_normal(shape, mean = 0, stddev = 1, seed = −1)`: N(mean, stddev²) (Box–Muller).
/// - `random_bernoulli(shape, prob = 0.5, seed = −1)`: 1 with probability `prob`, else 0.
/// - `random_categorical(x [*D, K], mode = logits | probs, size = 1, seed = −1)` → [*D, size]:
///   class indices (as x's float dtype) drawn with replacement from softmax(x) (`logits`) or
///   x normalized (`probs`).
///
/// The values come from forge-ir's SplitMix64 stream: a `seed` ≥ 0 gives the same values on
/// every run, −1 a fresh stream each call. They follow the distribution but cannot equal a
/// device's values bit for bit (Core ML's generator is not documented); degenerate
/// distributions (low = high, stddev = 0, prob 0 or 1, one class) are exact.
enum RandomKernels {
    static let table: [String: Kernel] = [
        "random_uniform": randomUniform,
        "random_normal": randomNormal,
        "random_bernoulli": randomBernoulli,
        "random_categorical": randomCategorical,
    ]

    static func generator(_ inv: KernelInvocation) throws -> SplitMix64 {
        let seed = try inv.int("seed", default: -1)
        if seed >= 0 { return SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1) }
        var sys = SystemRandomNumberGenerator()
        return SplitMix64(seed: sys.next())
    }

    /// A uniform double in [0, 1) from 53 random bits.
    @inline(__always)
    static func unit(_ g: inout SplitMix64) -> Double { Double(g.next() >> 11) * 0x1p-53 }

    static func shape(_ inv: KernelInvocation) throws -> [Int] {
        let s = try inv.ints("shape")
        guard s.allSatisfy({ $0 >= 0 }) else { throw KernelError("\(inv.op.type): shape \(s) has a negative dimension") }
        var n = 1
        for d in s {
            let (p, o) = n.multipliedReportingOverflow(by: d)
            guard !o, p <= 1 << 31 else { throw KernelError("\(inv.op.type): shape \(s) has too many elements") }
            n = p
        }
        return s
    }

    static func fill(_ inv: KernelInvocation, _ f: (inout SplitMix64) -> Float) throws -> [RuntimeValue] {
        let s = try shape(inv)
        var g = try generator(inv)
        let n = s.reduce(1, *)
        var out = [Float](repeating: 0, count: n)
        for i in 0..<n { out[i] = f(&g) }
        return [EW.floatResult(inv.outputDType(), s, out)]
    }

    static func randomUniform(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let lo = Double(try inv.float("low", default: 0)), hi = Double(try inv.float("high", default: 1))
        return try fill(inv) { g in Float(lo + (hi - lo) * unit(&g)) }
    }

    static func randomNormal(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let mean = Double(try inv.float("mean", default: 0)), sd = Double(try inv.float("stddev", default: 1))
        return try fill(inv) { g in
            let u1 = 1 - unit(&g), u2 = unit(&g)
            return Float(mean + sd * (-2 * Foundation.log(u1)).squareRoot() * Foundation.cos(2 * Double.pi * u2))
        }
    }

    static func randomBernoulli(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let p = Double(try inv.float("prob", default: 0.5))
        return try fill(inv) { g in unit(&g) < p ? 1 : 0 }
    }

    static func randomCategorical(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("x")
        guard x.rank >= 1, let k = x.shape.last, k > 0 else { throw KernelError("random_categorical: x must have a non-empty last axis, has shape \(x.shape)") }
        let mode = try inv.string("mode", default: "logits")
        guard mode == "logits" || mode == "probs" else { throw KernelError("random_categorical: mode '\(mode)' is not logits or probs") }
        let size = try inv.int("size", default: 1)
        guard size >= 0, size <= 1 << 24 else { throw KernelError("random_categorical: size \(size) must be in 0...\(1 << 24)") }
        var g = try generator(inv)
        let v = x.floats.map(Double.init)
        let rows = v.count / k
        var out = [Float](repeating: 0, count: rows * size)
        var cdf = [Double](repeating: 0, count: k)
        for r in 0..<rows {
            let row = v[(r * k)..<(r * k + k)]
            var w: [Double]
            if mode == "logits" {
                let m = row.max()!
                w = row.map { Foundation.exp($0 - m) }
            } else {
                w = row.map { Swift.max($0, 0) }
            }
            var acc = 0.0
            for i in 0..<k { acc += w[i]; cdf[i] = acc }
            for s in 0..<size {
                let u = unit(&g) * acc
                var c = 0
                while c < k - 1 && cdf[c] <= u { c += 1 }
                out[r * size + s] = Float(c)
            }
        }
        return [EW.floatResult(inv.outputDType(), Array(x.shape.dropLast()) + [size], out)]
    }
}
