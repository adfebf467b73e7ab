import Foundation
import JSON

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
            case let .string(s): out += JSONValue.quote(s, ensureASCII: ensureASCII)
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
                    out += JSONValue.quote(key, ensureASCII: ensureASCII) + keySep
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
        let double = hasSingle && !hasDouble
        return (double ? "\"" : "'") + (double ? reprEscaperDouble : reprEscaperSingle).escape(s) + (double ? "\"" : "'")
    }

    static func reprEscaper(quote: Unicode.Scalar) -> ScalarEscaper {
        ScalarEscaper(["\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", quote: "\\" + String(Character(quote))]) {
            $0.value < 0x20 || $0.value == 0x7F ? ScalarEscaper.hexEscape($0) : nil
        }
    }
    static let reprEscaperSingle = reprEscaper(quote: "'")
    static let reprEscaperDouble = reprEscaper(quote: "\"")

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
    /// `json.loads` does).
    /// - Throws: `JinjaError.syntax` with the line of the error.
    static func parse(_ text: String) throws -> JinjaValue {
        do {
            return JinjaValue.fromJSON(try JSONValue.parse(text))
        } catch let e as JSONValue.ParseError {
            throw JinjaError.syntax(line: e.line, message: "invalid JSON: " + e.reason)
        }
    }
}
