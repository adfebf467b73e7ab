/// Rewrites a string scalar by scalar through a table of escapes, and a rule for the scalars the
/// table does not name: the one loop behind JSON string literals (``JSONValue/quote(_:ensureASCII:)``),
/// MIL text literals, Python's `repr` and HTML escaping (the chat templates' `escape` filter).
public struct ScalarEscaper: Sendable {
    public let table: [Unicode.Scalar: String]
    /// The escape of a scalar the table does not name, or nil to keep it as it is.
    public let other: @Sendable (Unicode.Scalar) -> String?

    public init(_ table: [Unicode.Scalar: String], other: @escaping @Sendable (Unicode.Scalar) -> String? = { _ in nil }) {
        self.table = table
        self.other = other
    }

    public func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            if let e = table[u] ?? other(u) { out += e } else { out.unicodeScalars.append(u) }
        }
        return out
    }

    /// `\uXXXX` (lowercase hex), and a UTF-16 surrogate pair above 0xFFFF, as JSON writes it.
    public static func unicodeEscape(_ u: Unicode.Scalar) -> String {
        func hex4(_ v: UInt32) -> String {
            let h = String(v, radix: 16)
            return "\\u" + String(repeating: "0", count: max(0, 4 - h.count)) + h
        }
        guard u.value > 0xFFFF else { return hex4(u.value) }
        let v = u.value - 0x10000
        return hex4(0xD800 + (v >> 10)) + hex4(0xDC00 + (v & 0x3FF))
    }

    /// `\xNN` (lowercase hex), as MIL text and Python write a control character.
    public static func hexEscape(_ u: Unicode.Scalar) -> String {
        let h = String(u.value, radix: 16)
        return "\\x" + (h.count < 2 ? "0" : "") + h
    }
}
