import CKernels
import GraphIR

/// How fp16-typed values are computed.
///
/// - `fp32` (default): as Core ML's CPU path. fp16 weights and inputs are widened, every float
///   intermediate is held and computed in fp32; only a value stored into an fp16 state or
///   returned as an fp16 output is rounded to fp16.
/// - `fp16`: as the GPU / Neural Engine. Every fp16-typed op output is rounded to fp16 (kernels
///   still accumulate in fp32 inside one op), so overflow to ±inf and underflow appear where a
///   device would hit them.
public enum Precision: String, Sendable, CaseIterable {
    case fp32, fp16
}

/// Rounding to the storage precision of a dtype.
public enum Rounding {
    /// Rounds every element to the nearest fp16 (ties to even; overflow → ±inf).
    public static func toHalf(_ a: inout [Float]) {
        a.withUnsafeMutableBufferPointer { toHalf($0) }
    }

    /// Rounds in place through CKernels' binary16 conversions (`fk_float_to_half` then
    /// `fk_half_to_float`: F16C `vcvtps2ph` / `vcvtph2ps` where the CPU has them, else the portable
    /// bodies), 1024 values at a time through a stack buffer: round to nearest even, overflow
    /// → ±inf, a NaN stays a NaN. (An fp16 model's logits, 151,936 a token for the seed's vocab,
    /// took ~2 M instructions a step through the scalar loop this replaces.)
    @inline(__always)
    public static func toHalf(_ p: UnsafeMutableBufferPointer<Float>) {
        guard let base = p.baseAddress else { return }
        withUnsafeTemporaryAllocation(of: UInt16.self, capacity: 1024) { tmp in
            var i = 0
            while i < p.count {
                let n = min(1024, p.count - i)
                fk_float_to_half(base + i, tmp.baseAddress!, n)
                fk_half_to_float(tmp.baseAddress!, base + i, n)
                i += n
            }
        }
    }

    /// Rounds to bf16 (round to nearest even on the upper 16 bits).
    public static func toBFloat16(_ a: inout [Float]) {
        for i in a.indices {
            let x = a[i].bitPattern
            if a[i].isNaN { continue }
            let r = (x &+ 0x7FFF &+ ((x >> 16) & 1)) & 0xFFFF_0000
            a[i] = Float(bitPattern: r)
        }
    }

    /// Rounds a tensor's values to what its dtype can hold (fp16 / bf16); other dtypes unchanged.
    public static func toStorage(_ t: inout Tensor) {
        guard case var .float(a) = t.data, t.dtype == .fp16 || t.dtype == .bf16 else { return }
        t.data = .int([])  // drop the tensor's reference so `a` is unique: rounded in place, no copy
        if t.dtype == .fp16 { toHalf(&a) } else { toBFloat16(&a) }
        t.data = .float(a)
    }
}
