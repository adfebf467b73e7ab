/// The payload of an immediate (inline) tensor value, kept in the same encoding as the
/// protobuf `TensorValue` oneof so that a model round-trips byte for byte.
///
/// Which field carries which dtype (coremltools 9 writer): fp32 → `floats`; fp64 → `doubles`;
/// int32, int16, uint16 → `ints`; int64, uint64 → `longInts`; bool → `bools`;
/// string → `strings`; fp16, bf16, int8, uint8, uint32 and every sub-byte type → `bytes`
/// (raw little-endian; sub-byte types bit-packed LSB first). A reader accepts any field.
public enum TensorStorage: Hashable, Sendable {
    case floats([Float])
    case doubles([Double])
    case ints([Int32])
    case longInts([Int64])
    case bools([Bool])
    case strings([String])
    case bytes([UInt8])

    /// Number of stored entries (bytes: byte count).
    public var storedCount: Int {
        switch self {
        case let .floats(v): return v.count
        case let .doubles(v): return v.count
        case let .ints(v): return v.count
        case let .longInts(v): return v.count
        case let .bools(v): return v.count
        case let .strings(v): return v.count
        case let .bytes(v): return v.count
        }
    }
}

/// Decoding an immediate or blob payload into numbers.
public enum ElementDecoding {
    /// Decodes `count` elements of `dtype` from little-endian raw bytes into Doubles
    /// (integers exactly up to 2^53; fp16/bf16/fp8 widened). Returns nil if `raw` is too short.
    public static func doubles(raw: UnsafeRawBufferPointer, dtype: DType, count: Int) -> [Double]? {
        guard dtype != .string, raw.count >= dtype.byteCount(elements: count) else { return nil }
        var out = [Double](repeating: 0, count: count)
        if dtype.isSubByte {
            let n = dtype.bitWidth
            for i in 0..<count {
                var v: UInt32 = 0
                for b in 0..<n {
                    let bit = i * n + b
                    if raw[bit >> 3] & (1 << UInt8(bit & 7)) != 0 { v |= 1 << UInt32(b) }
                }
                if dtype == .int4, v & 0x8 != 0 { out[i] = Double(Int32(v) - 16) } else { out[i] = Double(v) }
            }
            return out
        }
        for i in 0..<count {
            switch dtype {
            case .bool, .uint8: out[i] = Double(raw[i])
            case .int8: out[i] = Double(Int8(bitPattern: raw[i]))
            case .fp8e4m3fn: out[i] = Double(FP8.e4m3fnToFloat(raw[i]))
            case .fp8e5m2: out[i] = Double(FP8.e5m2ToFloat(raw[i]))
            case .fp16: out[i] = Double(Half.toFloat(raw.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self)))
            case .bf16: out[i] = Double(Float(bitPattern: UInt32(raw.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self)) << 16))
            case .int16: out[i] = Double(raw.loadUnaligned(fromByteOffset: 2 * i, as: Int16.self))
            case .uint16: out[i] = Double(raw.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self))
            case .fp32: out[i] = Double(raw.loadUnaligned(fromByteOffset: 4 * i, as: Float.self))
            case .int32: out[i] = Double(raw.loadUnaligned(fromByteOffset: 4 * i, as: Int32.self))
            case .uint32: out[i] = Double(raw.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self))
            case .fp64: out[i] = raw.loadUnaligned(fromByteOffset: 8 * i, as: Double.self)
            case .int64: out[i] = Double(raw.loadUnaligned(fromByteOffset: 8 * i, as: Int64.self))
            case .uint64: out[i] = Double(raw.loadUnaligned(fromByteOffset: 8 * i, as: UInt64.self))
            default: return nil
            }
        }
        return out
    }
}

/// IEEE 754 binary16 conversions on bit patterns (portable: no `Float16` needed).
public enum Half {
    /// binary16 bits → Float (exact).
    @inline(__always)
    public static func toFloat(_ h: UInt16) -> Float {
        let sign = UInt32(h & 0x8000) << 16
        let exp = Int((h >> 10) & 0x1F)
        let mant = UInt32(h & 0x3FF)
        if exp == 0 {
            if mant == 0 { return Float(bitPattern: sign) }
            // subnormal: mant * 2^-24
            let v = Float(mant) * (1.0 / 16_777_216.0)
            return sign != 0 ? -v : v
        }
        if exp == 31 {
            return Float(bitPattern: sign | 0x7F80_0000 | (mant << 13))
        }
        return Float(bitPattern: sign | UInt32(exp - 15 + 127) << 23 | (mant << 13))
    }

    /// Float → binary16 bits, round to nearest even; overflow → ±inf; NaN stays NaN.
    @inline(__always)
    public static func fromFloat(_ f: Float) -> UInt16 {
        let x = f.bitPattern
        let sign = UInt16((x >> 16) & 0x8000)
        let exp = Int((x >> 23) & 0xFF)
        var mant = x & 0x7F_FFFF
        if exp == 0xFF { return sign | 0x7C00 | (mant != 0 ? 0x200 | UInt16(mant >> 13) : 0) }
        let e = exp - 127 + 15
        if e >= 31 { return sign | 0x7C00 }
        if e <= 0 {
            if e < -10 { return sign }
            mant |= 0x80_0000
            let shift = UInt32(14 - e)
            let half = UInt32(1) << (shift - 1)
            var r = mant >> shift
            let rem = mant & ((UInt32(1) << shift) - 1)
            if rem > half || (rem == half && (r & 1) != 0) { r += 1 }
            return sign | UInt16(r)
        }
        var r = UInt32(e) << 10 | (mant >> 13)
        let rem = mant & 0x1FFF
        if rem > 0x1000 || (rem == 0x1000 && (r & 1) != 0) { r += 1 }
        return sign | UInt16(truncatingIfNeeded: r)
    }
}

/// 8-bit float decoders (OCP FP8 E4M3FN and E5M2).
public enum FP8 {
    public static func e4m3fnToFloat(_ b: UInt8) -> Float {
        let sign: Float = b & 0x80 != 0 ? -1 : 1
        let e = Int((b >> 3) & 0xF), m = Int(b & 0x7)
        if e == 0xF && m == 0x7 { return .nan }
        if e == 0 { return sign * Float(m) / 8 * Float(sign: .plus, exponent: -6, significand: 1) }
        return sign * (1 + Float(m) / 8) * Float(sign: .plus, exponent: e - 7, significand: 1)
    }
    public static func e5m2ToFloat(_ b: UInt8) -> Float {
        Half.toFloat(UInt16(b) << 8)
    }
}
