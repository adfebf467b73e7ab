import GraphIR

/// Element storage of a runtime tensor. Every float dtype (fp16, fp32, bf16, fp64) is held as
/// `Float`: Core ML's CPU path computes fp16 graphs in fp32 (see ``Precision``). Every integer
/// dtype up to 32 bits is held as `Int32`; bools as `Bool`.
public enum TensorData {
    case float([Float])
    case int([Int32])
    case bool([Bool])
    case string([String])

    public var count: Int {
        switch self {
        case let .float(a): return a.count
        case let .int(a): return a.count
        case let .bool(a): return a.count
        case let .string(a): return a.count
        }
    }
}

/// A runtime tensor: its MIL dtype (what the graph says it is), a static shape, and row-major data.
public struct Tensor: CustomStringConvertible {
    public var dtype: DType
    public var shape: [Int]
    public var data: TensorData

    public init(dtype: DType, shape: [Int], data: TensorData) {
        self.dtype = dtype
        self.shape = shape
        self.data = data
    }

    /// A float tensor (any float dtype; values are held as Float).
    public init(_ dtype: DType = .fp32, shape: [Int], floats: [Float]) {
        self.init(dtype: dtype, shape: shape, data: .float(floats))
    }
    public init(_ dtype: DType = .int32, shape: [Int], ints: [Int32]) {
        self.init(dtype: dtype, shape: shape, data: .int(ints))
    }
    public init(shape: [Int], bools: [Bool]) {
        self.init(dtype: .bool, shape: shape, data: .bool(bools))
    }
    public static func scalar(_ v: Float, _ dtype: DType = .fp32) -> Tensor { Tensor(dtype, shape: [], floats: [v]) }
    public static func scalar(_ v: Int32) -> Tensor { Tensor(.int32, shape: [], ints: [v]) }

    /// A zero-filled tensor of `dtype` (storage chosen by dtype class).
    public static func zeros(_ dtype: DType, shape: [Int]) -> Tensor {
        let n = shape.reduce(1, *)
        return Tensor(dtype: dtype, shape: shape, data: Tensor.zeroData(dtype, count: n))
    }

    static func zeroData(_ dtype: DType, count n: Int) -> TensorData {
        if dtype.isFloat { return .float([Float](repeating: 0, count: n)) }
        if dtype == .bool { return .bool([Bool](repeating: false, count: n)) }
        if dtype == .string { return .string([String](repeating: "", count: n)) }
        return .int([Int32](repeating: 0, count: n))
    }

    public var count: Int { data.count }
    public var rank: Int { shape.count }

    /// Values as Float (ints and bools converted).
    public var floats: [Float] {
        switch data {
        case let .float(a): return a
        case let .int(a): return a.map(Float.init)
        case let .bool(a): return a.map { $0 ? 1 : 0 }
        case .string: return []
        }
    }

    /// Values as Int32 (floats truncated toward zero, bools 0/1).
    public var ints: [Int32] {
        switch data {
        case let .int(a): return a
        case let .float(a): return a.map { $0.isFinite ? Int32(clamping: Int64($0)) : 0 }
        case let .bool(a): return a.map { $0 ? 1 : 0 }
        case .string: return []
        }
    }

    public var bools: [Bool] {
        switch data {
        case let .bool(a): return a
        case let .float(a): return a.map { $0 != 0 }
        case let .int(a): return a.map { $0 != 0 }
        case .string: return []
        }
    }

    public var description: String { "tensor<\(dtype.rawValue), \(shape)>" }
}

/// Row-major strides of a shape.
@inline(__always)
public func contiguousStrides(_ shape: [Int]) -> [Int] {
    var s = [Int](repeating: 1, count: shape.count)
    var acc = 1
    for i in stride(from: shape.count - 1, through: 0, by: -1) {
        s[i] = acc
        acc *= shape[i]
    }
    return s
}
