import Foundation
import GraphIR

/// MIL iOS17 run-time quantization (`quantization_ops`): affine per-tensor or per-axis.
///
/// - `quantize(input, scale, zero_point?, axis?, output_dtype)`:
///   `clip(round(input / scale) + zero_point)` to the range of `output_dtype` (`int8` −128…127,
///   `uint8` 0…255); round half to even (torch's `quantize_per_tensor`/`per_channel`, which the
///   MIL op tests use as the reference).
/// - `dequantize(input, scale, zero_point?, axis?)`: `(input − zero_point) · scale`.
///
/// `scale` / `zero_point` are scalars, or vectors of `input.shape[axis]` values (`axis` may be
/// negative; required with a vector). fp16 `input`/`scale` compute in fp32 (the output is rounded
/// to its dtype where it is stored, like every other op).
enum QuantizationKernels {
    static let table: [String: Kernel] = [
        "quantize": quantize,
        "dequantize": dequantize,
    ]

    /// Per-element parameter index: 0 for a scalar parameter, else the coordinate along `axis`.
    static func parameterIndex(_ inv: KernelInvocation, shape: [Int], count: Int, name: String) throws -> (axisLen: Int, inner: Int) {
        guard inv.has("axis") else {
            throw KernelError("\(inv.op.type): \(name) has \(count) values but no axis is given")
        }
        let a = try ShapeKernels.axis(try inv.int("axis"), count: shape.count)
        guard shape[a] == count else {
            throw KernelError("\(inv.op.type): \(name) has \(count) values, input.shape[\(a)] is \(shape[a])")
        }
        return (shape[a], shape[(a + 1)...].reduce(1, *))
    }

    static func params(_ inv: KernelInvocation, shape: [Int]) throws -> (scale: [Float], zp: [Float], layout: (axisLen: Int, inner: Int)?) {
        let scale = try inv.tensor("scale").floats
        let zp = try inv.optionalTensor("zero_point")?.floats ?? [0]
        guard !scale.isEmpty, !zp.isEmpty else { throw KernelError("\(inv.op.type): scale and zero_point must not be empty") }
        let n = Swift.max(scale.count, zp.count)
        if scale.count != 1 && zp.count != 1 && scale.count != zp.count {
            throw KernelError("\(inv.op.type): scale has \(scale.count) values, zero_point \(zp.count)")
        }
        let layout = n == 1 ? nil : try parameterIndex(inv, shape: shape, count: n, name: scale.count > 1 ? "scale" : "zero_point")
        return (scale, zp, layout)
    }

    @inline(__always)
    static func channel(_ i: Int, _ layout: (axisLen: Int, inner: Int)?) -> Int {
        guard let l = layout else { return 0 }
        return (i / l.inner) % l.axisLen
    }

    static func quantize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("input")
        let dtName = try inv.string("output_dtype")
        let (lo, hi): (Float, Float)
        let dt: DType
        switch dtName {
        case "int8": (lo, hi, dt) = (-128, 127, .int8)
        case "uint8": (lo, hi, dt) = (0, 255, .uint8)
        default: throw KernelError("quantize: output_dtype '\(dtName)' is not int8 or uint8")
        }
        let (scale, zp, layout) = try params(inv, shape: x.shape)
        let v = x.floats
        var out = [Int32](repeating: 0, count: v.count)
        for i in 0..<v.count {
            let c = channel(i, layout)
            let s = scale.count == 1 ? scale[0] : scale[c]
            let z = zp.count == 1 ? zp[0] : zp[c]
            let q = (v[i] / s).rounded(.toNearestOrEven) + z
            out[i] = Int32(q.isNaN ? z : Swift.min(Swift.max(q, lo), hi))
        }
        return [.tensor(Tensor(dt, shape: x.shape, ints: out))]
    }

    static func dequantize(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let x = try inv.tensor("input")
        let (scale, zp, layout) = try params(inv, shape: x.shape)
        let v = x.floats
        var out = [Float](repeating: 0, count: v.count)
        for i in 0..<v.count {
            let c = channel(i, layout)
            out[i] = (v[i] - (zp.count == 1 ? zp[0] : zp[c])) * (scale.count == 1 ? scale[0] : scale[c])
        }
        return [EW.floatResult(inv.outputDType(), x.shape, out)]
    }
}
