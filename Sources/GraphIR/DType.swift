/// A MIL element data type: every dtype of the MIL spec (`MIL.proto` `DataType`).
///
/// `rawValue` is the MIL text spelling (`fp16`, `int4`, `uint1`, `bool`, `string`…), as it
/// appears in `tensor<fp16, [1, 2]>` in a compiled model's `model.mil`.
public enum DType: String, CaseIterable, Hashable, Sendable {
    case bool, string
    case fp16, fp32, fp64, bf16
    case fp8e4m3fn, fp8e5m2
    case int4, int8, int16, int32, int64
    case uint1, uint2, uint3, uint4, uint6, uint8, uint16, uint32, uint64

    /// Bits per element (string: 0, as its size is not fixed).
    public var bitWidth: Int {
        switch self {
        case .bool: return 8
        case .string: return 0
        case .fp16, .bf16, .int16, .uint16: return 16
        case .fp32, .int32, .uint32: return 32
        case .fp64, .int64, .uint64: return 64
        case .fp8e4m3fn, .fp8e5m2, .int8, .uint8: return 8
        case .int4, .uint4: return 4
        case .uint1: return 1
        case .uint2: return 2
        case .uint3: return 3
        case .uint6: return 6
        }
    }

    public var isFloat: Bool {
        switch self {
        case .fp16, .fp32, .fp64, .bf16, .fp8e4m3fn, .fp8e5m2: return true
        default: return false
        }
    }

    public var isInteger: Bool { !isFloat && self != .bool && self != .string }

    public var isSigned: Bool {
        switch self {
        case .int4, .int8, .int16, .int32, .int64: return true
        default: return isFloat
        }
    }

    /// Sub-byte types are stored bit-packed, LSB first.
    public var isSubByte: Bool { bitWidth > 0 && bitWidth < 8 }

    /// Bytes needed for `count` elements (sub-byte types packed; string: 0).
    /// Saturates at `Int.max` instead of overflowing.
    public func byteCount(elements count: Int) -> Int {
        let (bits, o1) = count.multipliedReportingOverflow(by: bitWidth)
        let (rounded, o2) = bits.addingReportingOverflow(7)
        return o1 || o2 ? Int.max : rounded / 8
    }

    /// `MIL.proto` `DataType` enum value.
    public var protoCode: Int32 {
        switch self {
        case .bool: return 1
        case .string: return 2
        case .fp16: return 10
        case .fp32: return 11
        case .fp64: return 12
        case .bf16: return 13
        case .int8: return 21
        case .int16: return 22
        case .int32: return 23
        case .int64: return 24
        case .int4: return 25
        case .uint8: return 31
        case .uint16: return 32
        case .uint32: return 33
        case .uint64: return 34
        case .uint4: return 35
        case .uint2: return 36
        case .uint1: return 37
        case .uint6: return 38
        case .uint3: return 39
        case .fp8e4m3fn: return 40
        case .fp8e5m2: return 41
        }
    }

    public init?(protoCode: Int32) {
        guard let t = DType.allCases.first(where: { $0.protoCode == protoCode }) else { return nil }
        self = t
    }

    /// The blob storage v2 `mil_dtype` code of a `weight.bin` record (not the proto numbering);
    /// nil for dtypes that cannot be stored in a blob.
    public var blobCode: UInt32? {
        switch self {
        case .fp16: return 1
        case .fp32: return 2
        case .uint8: return 3
        case .int8: return 4
        case .bf16: return 5
        case .int16: return 6
        case .uint16: return 7
        case .int4: return 8
        case .uint1: return 9
        case .uint2: return 10
        case .uint4: return 11
        case .uint3: return 12
        case .uint6: return 13
        case .int32: return 14
        case .uint32: return 15
        case .fp8e4m3fn: return 16
        case .fp8e5m2: return 17
        default: return nil
        }
    }

    public init?(blobCode: UInt32) {
        guard let t = DType.allCases.first(where: { $0.blobCode == blobCode }) else { return nil }
        self = t
    }
}
