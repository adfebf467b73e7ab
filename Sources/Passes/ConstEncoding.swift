import GraphIR
import Interpreter

/// Stores a runtime tensor as an immediate constant in the encoding coremltools uses for its
/// dtype (fp32 → floats, fp16 → raw bytes, int32/int16/uint16 → ints, int8/uint8 → bytes,
/// bool → bools, string → strings).
enum ConstEncoding {
    static func constValue(_ t: Tensor, type: TensorType) -> ConstValue? {
        let storage: TensorStorage
        switch type.dtype {
        case .fp32: storage = .floats(t.floats)
        case .fp64: storage = .doubles(t.floats.map(Double.init))
        case .fp16:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(t.count * 2)
            for v in t.floats { let h = Half.fromFloat(v); bytes.append(UInt8(h & 0xFF)); bytes.append(UInt8(h >> 8)) }
            storage = .bytes(bytes)
        case .int32, .int16, .uint16: storage = .ints(t.ints)
        case .int64, .uint64: storage = .longInts(t.ints.map(Int64.init))
        case .int8: storage = .bytes(t.ints.map { UInt8(bitPattern: Int8(clamping: $0)) })
        case .uint8: storage = .bytes(t.ints.map { UInt8(clamping: $0) })
        case .uint32:
            var bytes: [UInt8] = []
            for v in t.ints { withUnsafeBytes(of: UInt32(bitPattern: v).littleEndian) { bytes += $0 } }
            storage = .bytes(bytes)
        case .bool: storage = .bools(t.bools)
        case .string:
            guard case let .string(s) = t.data else { return nil }
            storage = .strings(s)
        default: return nil
        }
        return ConstValue(type: .tensor(type), payload: .tensor(storage))
    }
}
