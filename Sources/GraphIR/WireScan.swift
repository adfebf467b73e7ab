/// A scan of protobuf wire format that bounds message nesting before protobuf-c unpacks it.
///
/// protobuf-c's unpacker recurses once per nested message, so a `.mlmodel` with blocks or list
/// types nested thousands deep overflows the stack before any check of the decoder runs. The
/// scan walks the bytes without a schema: every length-delimited field whose payload parses as
/// well-formed fields (valid tags, varints and lengths that fit) is treated as a nested
/// message — a string or bytes payload that happens to parse only makes the estimate
/// conservative. Recursion is bounded by ``maxDepth``, each byte is visited at most
/// ``maxDepth`` times, and the scan allocates nothing.
///
/// A real model nests about 15 levels plus 2 per nested block (`Block → Operation → Block`) or
/// list type; the decoder itself refuses blocks and types nested deeper than 64.
public enum WireScan {
    /// Deepest message nesting accepted.
    public static let maxDepth = 200

    /// True when `bytes` holds a message nested deeper than ``maxDepth``.
    public static func exceedsDepth(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
        var tooDeep = false
        _ = scan(base, 0, bytes.count, depth: 0, tooDeep: &tooDeep)
        return tooDeep
    }

    /// True when `[start, end)` is a sequence of well-formed fields. Sets `tooDeep` when a
    /// well-formed message lies deeper than ``maxDepth``.
    static func scan(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, depth: Int, tooDeep: inout Bool) -> Bool {
        var i = start
        while i < end {
            guard let tag = varint(p, &i, end) else { return false }
            let fieldNumber = tag >> 3
            guard fieldNumber != 0, fieldNumber <= 0x1FFF_FFFF else { return false }
            switch tag & 7 {
            case 0:
                guard varint(p, &i, end) != nil else { return false }
            case 1:
                guard end - i >= 8 else { return false }
                i += 8
            case 5:
                guard end - i >= 4 else { return false }
                i += 4
            case 2:
                guard let len = varint(p, &i, end), len <= UInt64(end - i) else { return false }
                let childEnd = i + Int(len)
                if len > 0 && !tooDeep {
                    if depth + 1 > maxDepth {
                        // Deeper than the limit: a well-formed payload here is a message too deep.
                        if scanShallow(p, i, childEnd) { tooDeep = true }
                    } else {
                        _ = scan(p, i, childEnd, depth: depth + 1, tooDeep: &tooDeep)
                    }
                }
                i = childEnd
            default:
                return false   // groups (3, 4) and reserved types: protobuf-c refuses them too
            }
        }
        return true
    }

    /// Well-formedness of one level only (no recursion).
    static func scanShallow(_ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        var i = start
        while i < end {
            guard let tag = varint(p, &i, end), tag >> 3 != 0 else { return false }
            switch tag & 7 {
            case 0: guard varint(p, &i, end) != nil else { return false }
            case 1: guard end - i >= 8 else { return false }; i += 8
            case 5: guard end - i >= 4 else { return false }; i += 4
            case 2:
                guard let len = varint(p, &i, end), len <= UInt64(end - i) else { return false }
                i += Int(len)
            default: return false
            }
        }
        return true
    }

    @inline(__always)
    static func varint(_ p: UnsafePointer<UInt8>, _ i: inout Int, _ end: Int) -> UInt64? {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while i < end && shift < 64 {
            let b = p[i]
            i += 1
            v |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return v }
            shift += 7
        }
        return nil
    }
}
