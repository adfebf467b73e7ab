/// The one JSON value of forge-ir (RFC 8259): a deterministic encoder (2-space indent, integers
/// stay integers, keys sorted unless asked to keep their order) and a strict parser that keeps
/// object keys in their order and reports the byte offset and line of an error. Machine-readable
/// output, model metadata, generation contracts, `tokenizer.json` and the chat templates' JSON
/// all go through it, so no output depends on Foundation's number bridging.
public indirect enum JSONValue: Hashable, Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// An object from a dictionary (rendered with sorted keys).
    public static func object(_ dictionary: [String: JSONValue]) -> JSONValue { .object(JSONObject(dictionary)) }

    public subscript(key: String) -> JSONValue? {
        if case let .object(o) = self { return o[key] }
        return nil
    }

    public var objectValue: JSONObject? { if case let .object(o) = self { return o } else { return nil } }
    public var arrayValue: [JSONValue]? { if case let .array(a) = self { return a } else { return nil } }
    public var stringValue: String? { if case let .string(s) = self { return s } else { return nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { return b } else { return nil } }
    /// An integer, or a float with an integral value that fits `Int` (`2.0`).
    public var intValue: Int? {
        switch self {
        case let .int(i): return i
        case let .double(d) where d == d.rounded() && abs(d) < 9.2e18: return Int(d)
        default: return nil
        }
    }
    /// Any number as a `Double`.
    public var doubleValue: Double? {
        switch self {
        case let .int(i): return Double(i)
        case let .double(d): return d
        default: return nil
        }
    }
    public var isNull: Bool { self == .null }

    public var description: String { render() }

    /// JSON text. `pretty`: 2-space indentation, `"key": value`. `sortKeys`: object keys in
    /// sorted order (the default, for stable machine output); otherwise in their own order.
    public func render(pretty: Bool = true, sortKeys: Bool = true) -> String {
        var out = ""
        write(into: &out, pretty: pretty, sortKeys: sortKeys, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, sortKeys: Bool, indent: Int) {
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
                v.write(into: &out, pretty: pretty, sortKeys: sortKeys, indent: indent + 2)
            }
            if pretty { out += "\n" + String(repeating: " ", count: indent) }
            out += "]"
        case let .object(o):
            if o.isEmpty { out += "{}"; return }
            out += "{"
            for (i, k) in (sortKeys ? o.keys.sorted() : o.keys).enumerated() {
                if i > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: " ", count: indent + 2) }
                out += JSONValue.quote(k) + (pretty ? ": " : ":")
                o[k]!.write(into: &out, pretty: pretty, sortKeys: sortKeys, indent: indent + 2)
            }
            if pretty { out += "\n" + String(repeating: " ", count: indent) }
            out += "}"
        }
    }

    /// A JSON string literal: `"`, `\`, and the controls escaped as Python's `json.dumps`
    /// writes them (`\n`, `\b`, `\u001f`); `ensureASCII` also escapes every scalar above
    /// 0x7E (UTF-16 surrogate pairs above 0xFFFF), as `json.dumps(ensure_ascii=True)`.
    public static func quote(_ s: String, ensureASCII: Bool = false) -> String {
        "\"" + (ensureASCII ? asciiEscaper : utf8Escaper).escape(s) + "\""
    }

    static let escapes: [Unicode.Scalar: String] = [
        "\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\u{08}": "\\b", "\u{0C}": "\\f",
    ]
    static let utf8Escaper = ScalarEscaper(escapes) { $0.value < 0x20 ? ScalarEscaper.unicodeEscape($0) : nil }
    static let asciiEscaper = ScalarEscaper(escapes) { $0.value < 0x20 || $0.value > 0x7E ? ScalarEscaper.unicodeEscape($0) : nil }

    // MARK: - parsing

    public struct ParseError: Error, CustomStringConvertible {
        /// Byte offset of the error in the UTF-8 text.
        public var offset: Int
        /// 1-based line of the error.
        public var line: Int
        public var reason: String
        public var description: String { "JSON parse error at line \(line) (byte \(offset)): \(reason)" }
    }

    /// Parses JSON text; object keys keep their order. Numbers without fraction or exponent that
    /// fit an `Int` become `.int`. Nesting deeper than 512 levels is an error, never a crash.
    /// - Throws: ``ParseError``.
    public static func parse(_ text: String) throws -> JSONValue {
        try parse(bytes: Array(text.utf8))
    }

    /// Parses UTF-8 JSON bytes (a file's contents); see ``parse(_:)``.
    public static func parse<Bytes: Collection>(bytes: Bytes) throws -> JSONValue where Bytes.Element == UInt8 {
        var p = Parser(bytes: Array(bytes))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw p.fail("trailing characters") }
        return v
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0

        mutating func skipSpace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x0A, 0x0D, 0x09: i += 1
                default: return
                }
            }
        }

        func fail(_ reason: String) -> ParseError {
            let upTo = min(i, bytes.count)
            return ParseError(offset: i, line: bytes[..<upTo].lazy.filter { $0 == 0x0A }.count + 1, reason: reason)
        }

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
                var o = JSONObject()
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

        /// RFC 8259 numbers: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
        mutating func number() throws -> JSONValue {
            let start = i
            func isDigit() -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
            func digits() -> Int {
                let from = i
                while isDigit() { i += 1 }
                return i - from
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit() else { throw fail(i == start ? "expected a value" : "expected a digit after '-'") }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
                if isDigit() { throw fail("a number cannot have a leading zero") }
            } else {
                _ = digits()
            }
            var isInt = true
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                isInt = false
                guard digits() > 0 else { throw fail("expected a digit after '.'") }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                isInt = false
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { throw fail("expected a digit in the exponent") }
            }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            if isInt, let v = Int(text) { return .int(v) }
            guard let d = Double(text) else { i = start; throw fail("bad number '\(text)'") }
            return .double(d)
        }

        mutating func hex4() throws -> UInt32 {
            let isHex: (UInt8) -> Bool = { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }
            guard i + 4 <= bytes.count, bytes[i..<(i + 4)].allSatisfy(isHex),
                  let v = UInt32(String(decoding: bytes[i..<(i + 4)], as: UTF8.self), radix: 16) else {
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
                // RFC 8259 §7 (and Python's json.loads): control characters are escaped in strings.
                if c < 0x20 { throw fail("a raw control character (0x\(String(c, radix: 16))) in a string; write it as an escape") }
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
                        // A high surrogate joins a following low one; a lone one (or one before
                        // any other escape, which then stands alone) becomes U+FFFD.
                        if v >= 0xD800 && v < 0xDC00, i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") {
                            let afterHigh = i
                            i += 2
                            let lo = try hex4()
                            if lo >= 0xDC00 && lo < 0xE000 { v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00) } else { i = afterHigh }
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
