import Foundation

/// Python's text forms of values: `json.dumps` (what transformers' `tojson` filter calls, with
/// `ensure_ascii=False` by default), `repr` and `str`.
enum JinjaJSON {
    /// `json.dumps(v, ensure_ascii=, indent=, separators=, sort_keys=)`.
    /// - Throws: `JinjaError.runtime` for values JSON cannot hold (undefined, macros).
    static func dumps(_ v: JinjaValue, ensureASCII: Bool = false, indent: String? = nil,
                      separators: (String, String)? = nil, sortKeys: Bool = false, line: Int) throws -> String {
        let (itemSep, keySep) = separators ?? (indent == nil ? (", ", ": ") : (",", ": "))
        var out = ""
        func write(_ v: JinjaValue, _ level: Int) throws {
            switch v {
            case .none: out += "null"
            case let .bool(b): out += b ? "true" : "false"
            case let .int(i): out += String(i)
            case let .double(d): out += d.isNaN ? "NaN" : d.isInfinite ? (d < 0 ? "-Infinity" : "Infinity") : pythonFloat(d)
            case let .string(s): out += quoted(s, ensureASCII: ensureASCII)
            case let .array(a):
                if a.isEmpty { out += "[]"; return }
                out += "["
                for (k, x) in a.enumerated() {
                    if k > 0 { out += itemSep }
                    if let indent { out += "\n" + String(repeating: indent, count: level + 1) }
                    try write(x, level + 1)
                }
                if let indent { out += "\n" + String(repeating: indent, count: level) }
                out += "]"
            case .object, .namespace:
                var entries: [(String, JinjaValue)]
                if case let .object(o) = v { entries = o.entries } else if case let .namespace(n) = v { entries = n.attributes.entries } else { entries = [] }
                if entries.isEmpty { out += "{}"; return }
                if sortKeys { entries.sort { $0.0.unicodeScalars.lexicographicallyPrecedes($1.0.unicodeScalars) { $0.value < $1.value } } }
                out += "{"
                for (k, (key, x)) in entries.enumerated() {
                    if k > 0 { out += itemSep }
                    if let indent { out += "\n" + String(repeating: indent, count: level + 1) }
                    out += quoted(key, ensureASCII: ensureASCII) + keySep
                    try write(x, level + 1)
                }
                if let indent { out += "\n" + String(repeating: indent, count: level) }
                out += "}"
            case .undefined:
                throw JinjaError.runtime(line: line, message: "Object of type Undefined is not JSON serializable")
            case .callable:
                throw JinjaError.runtime(line: line, message: "Object of type function is not JSON serializable")
            }
        }
        try write(v, 0)
        return out
    }

    /// A JSON string literal as Python's encoder writes it.
    static func quoted(_ s: String, ensureASCII: Bool) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if u.value < 0x20 || (ensureASCII && u.value > 0x7E) {
                    if u.value > 0xFFFF {
                        let v = u.value - 0x10000
                        out += String(format: "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
                    } else {
                        out += String(format: "\\u%04x", u.value)
                    }
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }

    /// Python's `repr(float)`: the shortest text that reads back the same, with `.0` for whole
    /// numbers and an exponent below 1e-4 or from 1e16.
    static func pythonFloat(_ d: Double) -> String {
        if d.isNaN { return "nan" }
        if d.isInfinite { return d < 0 ? "-inf" : "inf" }
        if d == 0 { return d.sign == .minus ? "-0.0" : "0.0" }
        let a = abs(d)
        if a >= 1e-4 && a < 1e16 {
            var s = "\(d)"  // Swift's shortest representation
            if s.contains("e") { s = String(format: "%.17g", d) }
            if !s.contains(".") { s += ".0" }
            return s
        }
        // exponent form: mantissa digits from Swift's shortest form
        var s = "\(d)"
        if !s.contains("e") {
            s = String(format: "%.16e", d)
            if let v = Double(s) {
                for p in 1...17 {
                    let t = String(format: "%.\(p - 1)e", d)
                    if Double(t) == v { s = t; break }
                }
            }
        }
        // Python: 1e-05, 1.5e+16 (at least two exponent digits, explicit sign)
        let parts = s.split(separator: "e", maxSplits: 1).map(String.init)
        var mant = parts[0]
        if mant.hasSuffix(".0") { mant.removeLast(2) }
        var exp = parts.count > 1 ? parts[1] : "0"
        var sign = "+"
        if exp.hasPrefix("-") { sign = "-"; exp.removeFirst() } else if exp.hasPrefix("+") { exp.removeFirst() }
        while exp.count > 1 && exp.hasPrefix("0") { exp.removeFirst() }
        if exp.count < 2 { exp = "0" + exp }
        return mant + "e" + sign + exp
    }

    /// Python's `repr(str)`.
    static func pythonRepr(_ s: String) -> String {
        let hasSingle = s.unicodeScalars.contains("'"), hasDouble = s.unicodeScalars.contains("\"")
        let q: Unicode.Scalar = hasSingle && !hasDouble ? "\"" : "'"
        var out = String(Character(q))
        for u in s.unicodeScalars {
            switch u {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u == q { out += "\\" + String(Character(q)) } else if u.value < 0x20 || u.value == 0x7F {
                    out += String(format: "\\x%02x", u.value)
                } else { out.unicodeScalars.append(u) }
            }
        }
        return out + String(Character(q))
    }

    /// Python's `repr(v)` (strings quoted), as inside a printed list or dict.
    static func pythonReprValue(_ v: JinjaValue) -> String {
        if case let .string(s) = v { return pythonRepr(s) }
        return pythonStr(v)
    }

    /// Python's `str(v)` (what `{{ v }}` prints; undefined is handled by the caller).
    static func pythonStr(_ v: JinjaValue) -> String {
        switch v {
        case .undefined: return ""
        case .none: return "None"
        case let .bool(b): return b ? "True" : "False"
        case let .int(i): return String(i)
        case let .double(d): return pythonFloat(d)
        case let .string(s): return s
        case let .array(a): return "[" + a.map(pythonReprValue).joined(separator: ", ") + "]"
        case let .object(o): return "{" + o.entries.map { pythonRepr($0.0) + ": " + pythonReprValue($0.1) }.joined(separator: ", ") + "}"
        case let .namespace(n): return "<Namespace " + pythonStr(.object(n.attributes)) + ">"
        case let .callable(c): return "<function \(c.name)>"
        }
    }

    /// Parses JSON text into a value, keeping object keys in their order (as Python's
    /// `json.loads` does; `JSONSerialization` does not).
    /// - Throws: `JinjaError.syntax` with the line of the error.
    static func parse(_ text: String) throws -> JinjaValue {
        var p = Parser(Array(text.unicodeScalars))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.s.count else { throw p.fail("unexpected text after the JSON value") }
        return v
    }

    private struct Parser {
        let s: [Unicode.Scalar]
        var i = 0
        init(_ s: [Unicode.Scalar]) { self.s = s }

        func fail(_ m: String) -> JinjaError {
            .syntax(line: s[..<min(i, s.count)].filter { $0 == "\n" }.count + 1, message: "invalid JSON: " + m)
        }

        mutating func skipSpace() { while i < s.count, [" ", "\t", "\n", "\r"].contains(s[i]) { i += 1 } }

        mutating func literal(_ w: String, _ v: JinjaValue) throws -> JinjaValue {
            let u = Array(w.unicodeScalars)
            guard i + u.count <= s.count, Array(s[i..<(i + u.count)]) == u else { throw fail("unexpected character") }
            i += u.count
            return v
        }

        mutating func value(depth: Int) throws -> JinjaValue {
            guard depth < 512 else { throw fail("nested too deeply") }
            guard i < s.count else { throw fail("unexpected end") }
            switch s[i] {
            case "{":
                i += 1
                var o = JinjaObject()
                skipSpace()
                if i < s.count, s[i] == "}" { i += 1; return .object(o) }
                while true {
                    skipSpace()
                    guard i < s.count, s[i] == "\"" else { throw fail("expected a string key") }
                    let k = try string()
                    skipSpace()
                    guard i < s.count, s[i] == ":" else { throw fail("expected ':'") }
                    i += 1
                    skipSpace()
                    o[k] = try value(depth: depth + 1)
                    skipSpace()
                    guard i < s.count else { throw fail("unexpected end") }
                    if s[i] == "," { i += 1; continue }
                    if s[i] == "}" { i += 1; return .object(o) }
                    throw fail("expected ',' or '}'")
                }
            case "[":
                i += 1
                var a: [JinjaValue] = []
                skipSpace()
                if i < s.count, s[i] == "]" { i += 1; return .array(a) }
                while true {
                    skipSpace()
                    a.append(try value(depth: depth + 1))
                    skipSpace()
                    guard i < s.count else { throw fail("unexpected end") }
                    if s[i] == "," { i += 1; continue }
                    if s[i] == "]" { i += 1; return .array(a) }
                    throw fail("expected ',' or ']'")
                }
            case "\"": return .string(try string())
            case "t": return try literal("true", .bool(true))
            case "f": return try literal("false", .bool(false))
            case "n": return try literal("null", .none)
            default:
                let start = i
                if s[i] == "-" { i += 1 }
                var isFloat = false
                while i < s.count, ("0"..."9").contains(s[i]) || [".", "e", "E", "+", "-"].contains(s[i]) {
                    if [".", "e", "E"].contains(s[i]) { isFloat = true }
                    i += 1
                }
                let t = String(String.UnicodeScalarView(s[start..<i]))
                if !isFloat, let n = Int(t) { return .int(n) }
                guard let d = Double(t), !t.isEmpty else { throw fail("unexpected character") }
                return .double(d)
            }
        }

        mutating func string() throws -> String {
            i += 1
            var out = String.UnicodeScalarView()
            while i < s.count {
                let c = s[i]
                i += 1
                if c == "\"" { return String(out) }
                guard c == "\\" else { out.append(c); continue }
                guard i < s.count else { break }
                let e = s[i]
                i += 1
                switch e {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "b": out.append("\u{08}")
                case "f": out.append("\u{0C}")
                case "/": out.append("/")
                case "\\": out.append("\\")
                case "\"": out.append("\"")
                case "u":
                    func hex() throws -> UInt32 {
                        guard i + 4 <= s.count, let v = UInt32(String(String.UnicodeScalarView(s[i..<(i + 4)])), radix: 16) else {
                            throw fail("bad \\u escape")
                        }
                        i += 4
                        return v
                    }
                    var v = try hex()
                    if (0xD800..<0xDC00).contains(v), i + 1 < s.count, s[i] == "\\", s[i + 1] == "u" {
                        i += 2
                        let lo = try hex()
                        v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00)
                    }
                    out.append(Unicode.Scalar(v) ?? "\u{FFFD}")
                default: throw fail("bad escape")
                }
            }
            throw fail("unterminated string")
        }
    }
}
