import Foundation
import JSON

/// A value in the Jinja subset (`JinjaTemplate`), with Python's semantics where Jinja2 inherits
/// them: strings are sequences of Unicode scalars (Python `str` code points), integers and floats
/// are distinct, objects keep insertion order (Python `dict`), `none` is Python `None`, and
/// `undefined` is Jinja's `Undefined` (empty when printed, false, iterates as empty, an error when
/// used in arithmetic or when one of its attributes is read).
public indirect enum JinjaValue: Sendable {
    case undefined(String)
    case none
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    /// A Python list (or tuple: the subset does not distinguish them).
    case array([JinjaValue])
    /// A Python dict with string keys, in insertion order.
    case object(JinjaObject)
    /// `namespace(...)`: the one mutable object (`{% set ns.x = … %}`).
    case namespace(JinjaNamespace)
    /// A macro, a global function or a bound method.
    case callable(JinjaCallable)

    public static func from(_ s: String) -> JinjaValue { .string(s) }

    /// Parses JSON text, keeping object keys in order (what `tojson` and printing show).
    /// - Throws: `JinjaError.syntax` naming the line.
    public static func parseJSON(_ text: String) throws -> JinjaValue { try JinjaJSON.parse(text) }

    /// Converts a parsed JSON value; objects keep their keys' order.
    public static func fromJSON(_ json: JSONValue) -> JinjaValue {
        switch json {
        case .null: return .none
        case let .bool(b): return .bool(b)
        case let .int(i): return .int(i)
        case let .double(d): return .double(d)
        case let .string(s): return .string(s)
        case let .array(a): return .array(a.map(fromJSON))
        case let .object(o): return .object(JinjaObject(o.map { ($0.key, fromJSON($0.value)) }))
        }
    }

    var isUndefined: Bool { if case .undefined = self { return true } else { return false } }
    var isNone: Bool { if case .none = self { return true } else { return false } }

    /// Python truthiness.
    var truthy: Bool {
        switch self {
        case .undefined, .none: return false
        case let .bool(b): return b
        case let .int(i): return i != 0
        case let .double(d): return d != 0
        case let .string(s): return !s.unicodeScalars.isEmpty
        case let .array(a): return !a.isEmpty
        case let .object(o): return !o.entries.isEmpty
        case .namespace, .callable: return true
        }
    }

    /// The Python type name, for error messages.
    var typeName: String {
        switch self {
        case .undefined: return "undefined"
        case .none: return "NoneType"
        case .bool: return "bool"
        case .int: return "int"
        case .double: return "float"
        case .string: return "str"
        case .array: return "list"
        case .object: return "dict"
        case .namespace: return "Namespace"
        case .callable: return "function"
        }
    }
}

/// An insertion-ordered dictionary with string keys (Python `dict` as JSON gives it).
public struct JinjaObject: Sendable {
    public private(set) var entries: [(String, JinjaValue)]
    private var index: [String: Int]

    public init(_ entries: [(String, JinjaValue)] = []) {
        self.entries = []
        self.index = [:]
        for (k, v) in entries { self[k] = v }
    }

    public subscript(key: String) -> JinjaValue? {
        get { index[key].map { entries[$0].1 } }
        set {
            if let i = index[key] {
                if let v = newValue { entries[i].1 = v } else {
                    entries.remove(at: i)
                    index = [:]
                    for (j, e) in entries.enumerated() { index[e.0] = j }
                }
            } else if let v = newValue {
                index[key] = entries.count
                entries.append((key, v))
            }
        }
    }

    public var keys: [String] { entries.map { $0.0 } }
}

/// The mutable object `namespace()` returns.
public final class JinjaNamespace: @unchecked Sendable {
    var attributes: JinjaObject
    init(_ attributes: JinjaObject) { self.attributes = attributes }
}

/// Something a template can call: positional and keyword arguments in, a value out.
public final class JinjaCallable: @unchecked Sendable {
    let name: String
    let body: (_ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue
    init(_ name: String, _ body: @escaping (_ args: [JinjaValue], _ kwargs: [(String, JinjaValue)], _ line: Int) throws -> JinjaValue) {
        self.name = name
        self.body = body
    }
}

// MARK: - equality and ordering (Python's)

extension JinjaValue {
    /// Python `==`: numbers across int/float/bool, strings by code point, lists and dicts
    /// element-wise; `undefined` equals only `undefined`.
    func pyEquals(_ other: JinjaValue) -> Bool {
        switch (self, other) {
        case (.undefined, .undefined), (.none, .none): return true
        case let (.string(a), .string(b)): return a.unicodeScalars.elementsEqual(b.unicodeScalars)
        case let (.array(a), .array(b)): return a.count == b.count && zip(a, b).allSatisfy { $0.pyEquals($1) }
        case let (.object(a), .object(b)):
            guard a.entries.count == b.entries.count else { return false }
            return a.entries.allSatisfy { k, v in b[k].map { v.pyEquals($0) } ?? false }
        case let (.namespace(a), .namespace(b)): return a === b
        case let (.callable(a), .callable(b)): return a === b
        default:
            if let x = numeric, let y = other.numeric { return x == y }
            return false
        }
    }

    /// int, float and bool as a Double (Python compares them numerically).
    var numeric: Double? {
        switch self {
        case let .int(i): return Double(i)
        case let .double(d): return d
        case let .bool(b): return b ? 1 : 0
        default: return nil
        }
    }

    /// Python `<`: numbers, strings (code point order), lists lexicographically.
    /// - Throws: `JinjaError` for other types (Python's TypeError).
    func pyLess(_ other: JinjaValue, line: Int) throws -> Bool {
        switch (self, other) {
        case let (.string(a), .string(b)):
            return a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars) { $0.value < $1.value }
        case let (.array(a), .array(b)):
            for (x, y) in zip(a, b) where !x.pyEquals(y) { return try x.pyLess(y, line: line) }
            return a.count < b.count
        case let (.int(a), .int(b)): return a < b
        default:
            if let x = numeric, let y = other.numeric { return x < y }
            throw JinjaError.runtime(line: line, message: "'<' not supported between instances of '\(typeName)' and '\(other.typeName)'")
        }
    }
}
