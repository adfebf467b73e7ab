import GraphIR

/// A weight kept compressed: `scale * (data - offset)` per block (MIL iOS18
/// `constexpr_blockwise_shift_scale`, also iOS16 `constexpr_affine_dequantize`). Kernels that
/// understand it (`linear`, `matmul`, `gather`) compute on the int8 data directly; anything else
/// gets the dense tensor through ``RuntimeValue/dense()``.
public final class QuantizedTensor {
    /// Per-block scales: fp32 values, or the model's fp16 values read in place.
    public enum Scales {
        case float([Float])
        case half(HalfBuffer)
    }

    /// Output dtype (fp16/fp32) and shape.
    public let dtype: DType
    public let shape: [Int]
    /// Quantized values as Int8 (uint4 unpacked; uint8 shifted by −128 into the offset). A view
    /// into the mapped weight file when the data is an int8 blob, or an int4 blob kept packed
    /// two a byte (``Int8Buffer/isPackedInt4``; no copy).
    public let data: Int8Buffer
    /// Scale per block, `scaleShape` = shape / block sizes (row-major).
    public let scales: Scales
    public let scaleShape: [Int]
    /// Zero point per block (same shape as scale), or nil.
    public let offset: [Float]?

    public convenience init(dtype: DType, shape: [Int], data: [Int8], scale: [Float], scaleShape: [Int], offset: [Float]?) {
        self.init(dtype: dtype, shape: shape, buffer: Int8Buffer(data), scales: .float(scale), scaleShape: scaleShape, offset: offset)
    }

    public convenience init(dtype: DType, shape: [Int], buffer data: Int8Buffer, scale: [Float], scaleShape: [Int], offset: [Float]?) {
        self.init(dtype: dtype, shape: shape, buffer: data, scales: .float(scale), scaleShape: scaleShape, offset: offset)
    }

    public init(dtype: DType, shape: [Int], buffer data: Int8Buffer, scales: Scales, scaleShape: [Int], offset: [Float]?) {
        self.dtype = dtype
        self.shape = shape
        self.data = data
        self.scales = scales
        self.scaleShape = scaleShape
        self.offset = offset
    }

    /// Number of scales.
    public var scaleCount: Int {
        switch scales {
        case let .float(a): return a.count
        case let .half(h): return h.count
        }
    }

    /// Scale of block `i` (row-major over `scaleShape`).
    @inline(__always)
    public func scale(at i: Int) -> Float {
        switch scales {
        case let .float(a): return a[i]
        case let .half(h): return h[i]
        }
    }

    /// Every scale as Float (a copy when they are fp16).
    public var scale: [Float] {
        switch scales {
        case let .float(a): return a
        case let .half(h): return h.floats
        }
    }

    /// Block size along each axis.
    public var blockSizes: [Int] { zip(shape, scaleShape).map { $0 / max($1, 1) } }

    /// The dense values `scale * (q - offset)`, rounded to `dtype`.
    public func dequantize() -> Tensor {
        let n = shape.reduce(1, *)
        var out = [Float](repeating: 0, count: n)
        let strides = contiguousStrides(shape)
        let sstrides = contiguousStrides(scaleShape)
        let blocks = blockSizes
        for i in 0..<n {
            var rem = i, si = 0
            for a in 0..<shape.count {
                let idx = rem / strides[a]
                rem %= strides[a]
                si += (idx / blocks[a]) * sstrides[a]
            }
            let q = Float(data[i]) - (offset?[si] ?? 0)
            out[i] = scale(at: si) * q
        }
        var t = Tensor(dtype, shape: shape, floats: out)
        out = []
        Rounding.toStorage(&t)
        return t
    }
}

/// A value during execution.
public enum RuntimeValue {
    case tensor(Tensor)
    /// An int8 constant kept as a view of its mapped blob (shape, bytes), or an int4 one kept
    /// packed (``Int8Buffer/isPackedInt4``); `dense()` widens it.
    case int8Blob([Int], Int8Buffer)
    /// An fp16 constant kept as a view of its mapped blob (shape, values); `dense()` widens it.
    /// Made only for constants whose every reader takes it (the `scale` of
    /// `constexpr_blockwise_shift_scale`).
    case halfBlob([Int], HalfBuffer)
    case quantized(QuantizedTensor)
    case state(StateBuffer)
    case list([RuntimeValue])
    case tuple([RuntimeValue])

    /// The value as a dense tensor (dequantizing if needed).
    public func dense() throws -> Tensor {
        switch self {
        case let .tensor(t): return t
        case let .quantized(q): return q.dequantize()
        case let .int8Blob(shape, b): return Tensor(b.isPackedInt4 ? .int4 : .int8, shape: shape, ints: b.map { Int32($0) })
        case let .halfBlob(shape, h): return Tensor(.fp16, shape: shape, floats: h.floats)
        case let .state(s): throw KernelError("state '\(s.name)' used where a tensor is expected")
        case .list, .tuple: throw KernelError("list/tuple used where a tensor is expected")
        }
    }

    public var tensor: Tensor? { if case let .tensor(t) = self { return t } else { return nil } }
}

/// Which op inputs compute on a ``QuantizedTensor`` directly (no dense copy). The plan keeps
/// a constexpr result compressed only when every consumer is listed here.
public enum QuantizedConsumers {
    /// Whether `op`'s kernel computes on a compressed `input` in place (the op table's
    /// ``OpSchema/compressedInputs``).
    public static func handles(op: String, input: String) -> Bool {
        OpRegistry.schema(op)?.compressedInputs.contains(input) ?? false
    }
}
