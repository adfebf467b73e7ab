/// A tensor type: element dtype and shape. A scalar is a rank-0 tensor (`shape == []`).
public struct TensorType: Hashable, Sendable, CustomStringConvertible {
    public var dtype: DType
    public var shape: [Dim]

    public init(_ dtype: DType, _ shape: [Dim]) {
        self.dtype = dtype
        self.shape = shape
    }

    public init(_ dtype: DType, fixed shape: [Int]) {
        self.init(dtype, shape.map { .fixed($0) })
    }

    public var rank: Int { shape.count }
    public var isScalar: Bool { shape.isEmpty }
    /// True when every dimension is fixed.
    public var isStatic: Bool { shape.allSatisfy(\.isFixed) }
    /// The fixed sizes, or nil when a dimension is flexible.
    public var fixedShape: [Int]? {
        var out: [Int] = []
        out.reserveCapacity(shape.count)
        for d in shape { guard let v = d.fixedValue else { return nil }; out.append(v) }
        return out
    }
    /// Element count when static (overflow-safe: nil on overflow).
    public var elementCount: Int? {
        guard let s = fixedShape else { return nil }
        var n = 1
        for d in s {
            let (m, o) = n.multipliedReportingOverflow(by: d)
            if o { return nil }
            n = m
        }
        return n
    }

    /// MIL text: `tensor<fp16, [1, ?, 64]>`; a scalar prints as its dtype (`int32`).
    public var description: String {
        if shape.isEmpty { return dtype.rawValue }
        return "tensor<\(dtype.rawValue), [\(shape.map(\.description).joined(separator: ", "))]>"
    }
}

/// Every MIL value type: tensor (and scalar), `state<…>`, list, tuple, dict.
public indirect enum MILType: Hashable, Sendable, CustomStringConvertible {
    case tensor(TensorType)
    /// `state<tensor<…>>`: a buffer that lives across calls (iOS18).
    case state(MILType)
    /// `list<T, length>`.
    case list(MILType, length: Dim)
    case tuple([MILType])
    /// `dict<K, V>`.
    case dict(key: MILType, value: MILType)

    public static func tensor(_ dtype: DType, _ shape: [Int]) -> MILType {
        .tensor(TensorType(dtype, fixed: shape))
    }
    public static func scalar(_ dtype: DType) -> MILType { .tensor(TensorType(dtype, [])) }

    public var tensorType: TensorType? { if case let .tensor(t) = self { return t } else { return nil } }
    /// The wrapped tensor of a `state<…>`.
    public var stateWrappedTensor: TensorType? {
        if case let .state(inner) = self { return inner.tensorType }
        return nil
    }
    public var isState: Bool { if case .state = self { return true } else { return false } }

    public var description: String {
        switch self {
        case let .tensor(t):
            return t.description
        case let .state(inner):
            return "state<\(inner.fullTensorSpelling)>"
        case let .list(t, length):
            return "list<\(t.fullTensorSpelling), \(length)>"
        case let .tuple(ts):
            return "tuple<\(ts.map(\.fullTensorSpelling).joined(separator: ", "))>"
        case let .dict(k, v):
            return "dict<\(k.fullTensorSpelling), \(v.fullTensorSpelling)>"
        }
    }

    /// Like `description`, but a scalar nested in another type keeps the short spelling too.
    var fullTensorSpelling: String { description }
}
