/// A JSON value with a deterministic encoder (sorted keys, 2-space indent, integers stay
/// integers) and a small strict parser, so that machine-readable output never depends on
/// Foundation's number bridging.
public indirect enum JSONValue: Hashable, Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case let .object(o) = self { return o[key] }
        return nil
    }

    public var arrayValue: [JSONValue]? { if case let .array(a) = self { return a } else { return nil } }
    public var stringValue: String? { if case let .string(s) = self { return s } else { return nil } }
    public var intValue: Int? { if case let .int(i) = self { return i } else { return nil } }

    public var description: String { render() }

    /// JSON text. `pretty`: 2-space indentation, `"key": value`; keys are always sorted.
    public func render(pretty: Bool = true) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(i): out += String(i)
        case let .double(d):
            if d.isFinite {
                if d == d.rounded(), abs(d) < 1e15 { out += String(Int64(d)) + ".0" } else { out += "\(d)" }
            } else {
                out += "null" // JSON has no inf/nan
            }
        case let .string(s): out += JSONValue.quote(s)
        case let .array(a):
            if a.isEmpty { out += "[]"; return }
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: " ", count: indent + 2) }
                v.write(into: &out, pretty: pretty, indent: indent + 2)
            }
            if pretty { out += "\n" + String(repeating: " ", count: indent) }
            out += "]"
        case let .object(o):
            if o.isEmpty { out += "{}"; return }
            out += "{"
            for (i, k) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: " ", count: indent + 2) }
                out += JSONValue.quote(k) + (pretty ? ": " : ":")
                o[k]!.write(into: &out, pretty: pretty, indent: indent + 2)
            }
            if pretty { out += "\n" + String(repeating: " ", count: indent) }
            out += "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let h = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }

    // MARK: - parsing

    public struct ParseError: Error, CustomStringConvertible {
        public var offset: Int
        public var reason: String
        public var description: String { "JSON parse error at byte \(offset): \(reason)" }
    }

    /// Parses JSON text. Numbers without fraction or exponent that fit an `Int` become `.int`.
    public static func parse(_ text: String) throws -> JSONValue {
        var p = Parser(bytes: Array(text.utf8))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw ParseError(offset: p.i, reason: "trailing characters") }
        return v
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[i]) { i += 1 }
        }

        func fail(_ reason: String) -> ParseError { ParseError(offset: i, reason: reason) }

        mutating func expect(_ literal: String) throws {
            let l = Array(literal.utf8)
            guard i + l.count <= bytes.count, Array(bytes[i..<(i + l.count)]) == l else { throw fail("expected \(literal)") }
            i += l.count
        }

        mutating func value(depth: Int) throws -> JSONValue {
            guard depth < 512 else { throw fail("nesting too deep") }
            guard i < bytes.count else { throw fail("unexpected end") }
            switch bytes[i] {
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                i += 1
                var a: [JSONValue] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
                while true {
                    skipSpace()
                    a.append(try value(depth: depth + 1))
                    skipSpace()
                    guard i < bytes.count else { throw fail("unterminated array") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
                    throw fail("expected , or ]")
                }
            case UInt8(ascii: "{"):
                i += 1
                var o: [String: JSONValue] = [:]
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
                while true {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected key") }
                    let k = try string()
                    skipSpace()
                    try expect(":")
                    skipSpace()
                    o[k] = try value(depth: depth + 1)
                    skipSpace()
                    guard i < bytes.count else { throw fail("unterminated object") }
                    if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                    if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
                    throw fail("expected , or }")
                }
            default:
                return try number()
            }
        }

        mutating func number() throws -> JSONValue {
            let start = i
            var isInt = true
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            while i < bytes.count {
                let c = bytes[i]
                if c >= 0x30 && c <= 0x39 { i += 1; continue }
                if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") {
                    isInt = false; i += 1; continue
                }
                break
            }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            if isInt, let v = Int(text) { return .int(v) }
            guard let d = Double(text) else { i = start; throw fail("bad number '\(text)'") }
            return .double(d)
        }

        mutating func hex4() throws -> UInt32 {
            guard i + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[i..<(i + 4)], as: UTF8.self), radix: 16) else {
                throw fail("bad \\u escape")
            }
            i += 4
            return v
        }

        mutating func string() throws -> String {
            i += 1 // opening quote
            var run = i
            var out = ""
            func flush(_ end: Int) { out += String(decoding: bytes[run..<end], as: UTF8.self) }
            while i < bytes.count {
                let c = bytes[i]
                if c == UInt8(ascii: "\"") {
                    flush(i)
                    i += 1
                    return out
                }
                if c == UInt8(ascii: "\\") {
                    flush(i)
                    i += 1
                    guard i < bytes.count else { break }
                    let e = bytes[i]
                    i += 1
                    switch e {
                    case UInt8(ascii: "\""): out += "\""
                    case UInt8(ascii: "\\"): out += "\\"
                    case UInt8(ascii: "/"): out += "/"
                    case UInt8(ascii: "b"): out += "\u{8}"
                    case UInt8(ascii: "f"): out += "\u{C}"
                    case UInt8(ascii: "n"): out += "\n"
                    case UInt8(ascii: "r"): out += "\r"
                    case UInt8(ascii: "t"): out += "\t"
                    case UInt8(ascii: "u"):
                        var v = try hex4()
                        if v >= 0xD800 && v < 0xDC00, i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") {
                            i += 2
                            let lo = try hex4()
                            v = 0x10000 + ((v - 0xD800) << 10) + (lo &- 0xDC00)
                        }
                        out.unicodeScalars.append(Unicode.Scalar(v) ?? "\u{FFFD}")
                    default: throw fail("bad escape")
                    }
                    run = i
                    continue
                }
                i += 1
            }
            throw fail("unterminated string")
        }
    }
}
