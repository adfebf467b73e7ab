/// GPT-2's reversible byte ↔ unicode map: printable Latin-1 bytes stand for themselves, the 68
/// others (controls, space, 0x7F–0xA0, 0xAD) are shifted to U+0100…U+0143, so that every byte
/// string is a string of visible characters (" " is "Ġ", "\n" is "Ċ").
enum ByteLevelTable {
    /// byte → the scalar that stands for it.
    static let byteToScalar: [Unicode.Scalar] = {
        var table = [Unicode.Scalar](repeating: "\0", count: 256)
        var n: UInt32 = 0
        for b in 0..<256 {
            if (0x21...0x7E).contains(b) || (0xA1...0xAC).contains(b) || (0xAE...0xFF).contains(b) {
                table[b] = Unicode.Scalar(UInt32(b))!
            } else {
                table[b] = Unicode.Scalar(256 + n)!
                n += 1
            }
        }
        return table
    }()

    /// scalar value (< 0x144) → byte, or -1 for scalars that stand for no byte.
    static let scalarToByte: [Int16] = {
        var table = [Int16](repeating: -1, count: 0x144)
        for (b, s) in byteToScalar.enumerated() { table[Int(s.value)] = Int16(b) }
        return table
    }()

    /// The bytes a byte-level token string stands for, or nil when one of its characters is
    /// outside the table (then the byte-level decoder keeps the token's own UTF-8).
    static func bytes(of token: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(token.utf8.count)
        for s in token.unicodeScalars {
            let v = Int(s.value)
            guard v < scalarToByte.count, scalarToByte[v] >= 0 else { return nil }
            out.append(UInt8(scalarToByte[v]))
        }
        return out
    }

    /// The byte-level string of some bytes.
    static func string(of bytes: [UInt8]) -> String {
        var s = String.UnicodeScalarView()
        for b in bytes { s.append(byteToScalar[Int(b)]) }
        return String(s)
    }
}
