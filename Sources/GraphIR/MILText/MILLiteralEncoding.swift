/// Turns the element spellings of a MIL text tensor literal into `TensorStorage`, in the
/// protobuf field coremltools 9 uses for each dtype (facts sheet §3.5), so that a parsed
/// constant equals the one the `.mlpackage` loader builds:
///
/// | dtype | storage |
/// |---|---|
/// | fp32 | `floats` |
/// | fp64 | `doubles` |
/// | int32, int16, uint16 | `ints` |
/// | int64, uint64 | `longInts` (uint64 as its bit pattern) |
/// | bool | `bools` |
/// | string | `strings` |
/// | fp16, bf16, fp8e4m3fn, fp8e5m2, int8, uint8, uint32 | `bytes`, little-endian |
/// | int4, uint1, uint2, uint3, uint4, uint6 | `bytes`, bit-packed LSB first (§5.5) |
///
/// Floats accept decimal and C99 hexadecimal spellings (`0x1p-1`, `-0x1.8p+3`), `inf`, `-inf`,
/// `nan`; fp16/bf16/fp8 values are rounded to nearest (exact for every value the printer
/// writes, fp16 subnormals such as `0x1p-24` included). Integers accept decimal or `0x` hex
/// and must fit the dtype's range.
enum MILLiteralEncoding {
    struct Failure: Error {
        var message: String
        var location: MILSourceLocation
    }

    static func storage(_ elements: [MILToken], dtype: DType) throws -> TensorStorage {
        switch dtype {
        case .string:
            return .strings(try elements.map { t in
                guard t.kind == .string else { throw Failure(message: "expected a string element, found \(t.quoted)", location: t.location) }
                return t.text
            })
        case .bool:
            return .bools(try elements.map(bool))
        case .fp32:
            return .floats(try elements.map { try float($0, dtype) })
        case .fp64:
            return .doubles(try elements.map { try double($0, dtype) })
        case .fp16:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(elements.count * 2)
            for e in elements {
                let h = Half.fromFloat(try float(e, dtype))
                bytes.append(UInt8(h & 0xFF)); bytes.append(UInt8(h >> 8))
            }
            return .bytes(bytes)
        case .bf16:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(elements.count * 2)
            for e in elements {
                let h = bfloat16(try float(e, dtype))
                bytes.append(UInt8(h & 0xFF)); bytes.append(UInt8(h >> 8))
            }
            return .bytes(bytes)
        case .fp8e4m3fn, .fp8e5m2:
            return .bytes(try elements.map { fp8(try float($0, dtype), dtype) })
        case .int32, .int16, .uint16:
            return .ints(try elements.map { Int32(truncatingIfNeeded: try integer($0, dtype)) })
        case .int64:
            return .longInts(try elements.map { Int64(truncatingIfNeeded: try integer($0, dtype)) })
        case .uint64:
            return .longInts(try elements.map { t in
                Int64(bitPattern: try unsigned64(t))
            })
        case .int8, .uint8:
            return .bytes(try elements.map { UInt8(truncatingIfNeeded: try integer($0, dtype)) })
        case .uint32:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(elements.count * 4)
            for e in elements {
                let v = UInt32(truncatingIfNeeded: try integer(e, dtype))
                for k in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(k)))) }
            }
            return .bytes(bytes)
        case .int4, .uint1, .uint2, .uint3, .uint4, .uint6:
            let n = dtype.bitWidth
            var bytes = [UInt8](repeating: 0, count: dtype.byteCount(elements: elements.count))
            for (i, e) in elements.enumerated() {
                let v = UInt32(truncatingIfNeeded: try integer(e, dtype)) & ((1 << UInt32(n)) - 1)
                for b in 0..<n where v & (1 << UInt32(b)) != 0 {
                    let bit = i * n + b
                    bytes[bit >> 3] |= 1 << UInt8(bit & 7)
                }
            }
            return .bytes(bytes)
        }
    }

    static func bool(_ t: MILToken) throws -> Bool {
        if t.isIdentifier("true") { return true }
        if t.isIdentifier("false") { return false }
        if t.kind == .number, t.text == "1" || t.text == "0" { return t.text == "1" }
        throw Failure(message: "expected true or false, found \(t.quoted)", location: t.location)
    }

    static func double(_ t: MILToken, _ dtype: DType) throws -> Double {
        if t.kind == .identifier, t.text == "inf" { return .infinity }
        if t.kind == .identifier, t.text == "nan" { return .nan }
        guard t.kind == .number else {
            throw Failure(message: "expected a number for \(dtype.rawValue), found \(t.quoted)", location: t.location)
        }
        let text = t.text.hasPrefix("+") ? String(t.text.dropFirst()) : t.text
        if text == "nan" || text == "-nan" { return text.hasPrefix("-") ? -Double.nan : .nan }
        guard let v = Double(text) else {
            throw Failure(message: "'\(t.text)' is not a valid \(dtype.rawValue) number", location: t.location)
        }
        return v
    }

    /// fp32 directly from the text (no double rounding through fp64).
    static func float(_ t: MILToken, _ dtype: DType) throws -> Float {
        if t.kind == .number {
            let text = t.text.hasPrefix("+") ? String(t.text.dropFirst()) : t.text
            if !text.hasSuffix("nan"), let v = Float(text) { return v }
        }
        return Float(try double(t, dtype))
    }

    /// A signed integer in the range of `dtype`.
    static func integer(_ t: MILToken, _ dtype: DType) throws -> Int64 {
        guard t.kind == .number else {
            throw Failure(message: "expected an integer for \(dtype.rawValue), found \(t.quoted)", location: t.location)
        }
        var text = Substring(t.text)
        var negative = false
        if let s = text.first, s == "-" || s == "+" { negative = s == "-"; text = text.dropFirst() }
        var radix = 10
        if text.hasPrefix("0x") || text.hasPrefix("0X") { radix = 16; text = text.dropFirst(2) }
        guard let magnitude = UInt64(text, radix: radix) else {
            throw Failure(message: "'\(t.text)' is not an integer (\(dtype.rawValue) takes no fraction or exponent)", location: t.location)
        }
        let (lo, hi) = range(dtype)
        let ok: Bool
        let value: Int64
        if negative {
            let limit = UInt64(Int64.max) + 1
            value = magnitude >= limit ? Int64.min : -Int64(magnitude)
            ok = magnitude <= limit && value >= lo
        } else {
            ok = magnitude <= UInt64(Int64.max) && Int64(magnitude) <= hi
            value = Int64(truncatingIfNeeded: magnitude)
        }
        guard ok else {
            throw Failure(message: "\(t.text) is out of range for \(dtype.rawValue) [\(lo), \(hi)]", location: t.location)
        }
        return value
    }

    static func unsigned64(_ t: MILToken) throws -> UInt64 {
        guard t.kind == .number else {
            throw Failure(message: "expected an integer for uint64, found \(t.quoted)", location: t.location)
        }
        var text = Substring(t.text)
        if text.first == "+" { text = text.dropFirst() }
        var radix = 10
        if text.hasPrefix("0x") || text.hasPrefix("0X") { radix = 16; text = text.dropFirst(2) }
        guard let v = UInt64(text, radix: radix) else {
            throw Failure(message: "'\(t.text)' is not a uint64 (0…18446744073709551615)", location: t.location)
        }
        return v
    }

    /// Inclusive range of an integer dtype (uint64 is handled by `unsigned64`).
    static func range(_ dtype: DType) -> (Int64, Int64) {
        switch dtype {
        case .int4: return (-8, 7)
        case .int8: return (-128, 127)
        case .int16: return (-32768, 32767)
        case .int32: return (Int64(Int32.min), Int64(Int32.max))
        case .int64: return (Int64.min, Int64.max)
        case .uint1, .uint2, .uint3, .uint4, .uint6: return (0, (1 << Int64(dtype.bitWidth)) - 1)
        case .uint8: return (0, 255)
        case .uint16: return (0, 65535)
        case .uint32: return (0, Int64(UInt32.max))
        default: return (Int64.min, Int64.max)
        }
    }

    /// Float → bfloat16 bits, round to nearest even (NaN kept quiet).
    static func bfloat16(_ f: Float) -> UInt16 {
        let x = f.bitPattern
        if f.isNaN { return UInt16(x >> 16) | 0x40 }
        let rounding = UInt32(0x7FFF) + ((x >> 16) & 1)
        return UInt16(truncatingIfNeeded: (x &+ rounding) >> 16)
    }

    /// Float → nearest fp8 code (exact codes found first; NaN → the format's NaN).
    static func fp8(_ f: Float, _ dtype: DType) -> UInt8 {
        let decode: (UInt8) -> Float = dtype == .fp8e4m3fn ? FP8.e4m3fnToFloat : FP8.e5m2ToFloat
        if f.isNaN { return dtype == .fp8e4m3fn ? 0x7F : 0x7E }
        if f.isInfinite {
            // e5m2 has infinities; e4m3fn has none (its only non-finite code is NaN).
            if dtype == .fp8e5m2 { return f < 0 ? 0xFC : 0x7C }
            return f < 0 ? 0xFF : 0x7F
        }
        var best: UInt8 = 0
        var bestError = Float.infinity
        for code in 0...255 {
            let c = UInt8(code)
            let v = decode(c)
            if v.isNaN { continue }
            if v == f && v.sign == f.sign { return c }
            let e = abs(v - f)
            if e < bestError { bestError = e; best = c }
        }
        return best
    }
}
