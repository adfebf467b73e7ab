/// A constant value as stored in a model: an immediate tensor, a reference into a weight
/// blob file, or a tuple / list / dict of constants (MIL.proto `Value`).
public struct ConstValue: Hashable, Sendable {
    public indirect enum Payload: Hashable, Sendable {
        /// An inline tensor (`immediateValue.tensor`).
        case tensor(TensorStorage)
        /// A tensor stored in a blob file (`blobFileValue`); bytes are read lazily.
        case blob(BlobRef)
        case tuple([ConstValue])
        case list([ConstValue])
        case dict([DictEntry])
    }

    public struct DictEntry: Hashable, Sendable {
        public var key: ConstValue
        public var value: ConstValue
        public init(key: ConstValue, value: ConstValue) { self.key = key; self.value = value }
    }

    public var type: MILType
    public var payload: Payload
    public var docString: String

    public init(type: MILType, payload: Payload, docString: String = "") {
        self.type = type
        self.payload = payload
        self.docString = docString
    }

    /// A rank-0 string constant (how every op's `name` attribute is stored).
    public static func string(_ s: String) -> ConstValue {
        ConstValue(type: .scalar(.string), payload: .tensor(.strings([s])))
    }
    public static func int32(_ v: Int32) -> ConstValue {
        ConstValue(type: .scalar(.int32), payload: .tensor(.ints([v])))
    }
    public static func bool(_ v: Bool) -> ConstValue {
        ConstValue(type: .scalar(.bool), payload: .tensor(.bools([v])))
    }
    public static func fp32(_ v: Float) -> ConstValue {
        ConstValue(type: .scalar(.fp32), payload: .tensor(.floats([v])))
    }

    public var blob: BlobRef? { if case let .blob(b) = payload { return b } else { return nil } }
    public var tensorType: TensorType? { type.tensorType }

    /// The single string of a rank-0 string tensor, else nil.
    public var stringValue: String? {
        if case let .tensor(.strings(s)) = payload, s.count == 1 { return s[0] }
        return nil
    }

    /// The elements of a tensor constant as Doubles (immediate or blob), or nil for strings,
    /// non-tensors, a flexible shape, or storage that does not match the type.
    public func doubles() -> [Double]? {
        guard let t = type.tensorType, let n = t.elementCount else { return nil }
        switch payload {
        case let .tensor(storage):
            switch storage {
            case let .floats(v): return v.count == n ? v.map(Double.init) : nil
            case let .doubles(v): return v.count == n ? v : nil
            case let .ints(v): return v.count == n ? v.map(Double.init) : nil
            case let .longInts(v): return v.count == n ? v.map(Double.init) : nil
            case let .bools(v): return v.count == n ? v.map { $0 ? 1 : 0 } : nil
            case .strings: return nil
            case let .bytes(b):
                return b.withUnsafeBytes { ElementDecoding.doubles(raw: $0, dtype: t.dtype, count: n) }
            }
        case let .blob(ref):
            guard let raw = try? ref.bytes() else { return nil }
            return ElementDecoding.doubles(raw: raw, dtype: t.dtype, count: n)
        default:
            return nil
        }
    }

    /// Integer elements (e.g. axes, shapes), or nil.
    public func ints() -> [Int]? {
        guard let d = doubles() else { return nil }
        var out: [Int] = []
        out.reserveCapacity(d.count)
        for v in d {
            guard v.isFinite, v == v.rounded(), abs(v) < 9.0e15 else { return nil }
            out.append(Int(v))
        }
        return out
    }
}
