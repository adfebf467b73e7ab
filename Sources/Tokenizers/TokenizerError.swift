import Foundation

/// Why a `tokenizer.json` could not be used. Every case names the file.
public enum TokenizerError: Error, Equatable, CustomStringConvertible {
    /// The file could not be read, or is not JSON.
    case unreadable(file: String, reason: String)
    /// The JSON does not have the shape of a Hugging Face `tokenizer.json` (`path` is a JSON path
    /// such as `model.merges[12]`).
    case malformed(file: String, path: String, reason: String)
    /// A component this implementation does not support (a model type, a pre-tokenizer, a
    /// normalizer, a decoder, a post-processor, an option value).
    case unsupported(file: String, path: String, what: String)
    /// A token string (a chat template's stop token, a template's special token) that the
    /// tokenizer does not have.
    case unknownToken(file: String, token: String)

    public var description: String {
        switch self {
        case let .unreadable(file, reason):
            return "\(file): cannot read tokenizer: \(reason)"
        case let .malformed(file, path, reason):
            return "\(file): malformed tokenizer.json at \(path.isEmpty ? "top level" : path): \(reason)"
        case let .unsupported(file, path, what):
            return "\(file): unsupported \(what)\(path.isEmpty ? "" : " (at \(path))")"
        case let .unknownToken(file, token):
            return "\(file): token \(String(reflecting: token)) is not in the vocabulary"
        }
    }
}

/// Read-only view of a `JSONSerialization` value that remembers its path for error messages.
struct JSONNode {
    let value: Any?
    let path: String
    let file: String

    init(_ value: Any?, path: String = "", file: String) {
        self.value = value
        self.path = path
        self.file = file
    }

    var exists: Bool { value != nil && !(value is NSNull) }

    subscript(key: String) -> JSONNode {
        let p = path.isEmpty ? key : path + "." + key
        guard let dict = value as? [String: Any] else { return JSONNode(nil, path: p, file: file) }
        return JSONNode(dict[key], path: p, file: file)
    }

    func malformed(_ reason: String) -> TokenizerError {
        .malformed(file: file, path: path, reason: reason)
    }

    func unsupported(_ what: String) -> TokenizerError {
        .unsupported(file: file, path: path, what: what)
    }

    func string() throws -> String {
        guard let s = value as? String else { throw malformed(exists ? "expected a string" : "missing string") }
        return s
    }

    func optionalString() throws -> String? {
        guard exists else { return nil }
        return try string()
    }

    func bool(default d: Bool) throws -> Bool {
        guard exists else { return d }
        if let b = value as? Bool { return b }
        if let n = value as? NSNumber { return n.boolValue }
        throw malformed("expected true or false")
    }

    func int() throws -> Int {
        if let i = value as? Int { return i }
        if let n = value as? NSNumber, !(value is Bool) { return n.intValue }
        throw malformed(exists ? "expected an integer" : "missing integer")
    }

    func double() throws -> Double? {
        guard exists else { return nil }
        if let d = value as? Double { return d }
        if let n = value as? NSNumber { return n.doubleValue }
        throw malformed("expected a number")
    }

    func array() throws -> [JSONNode] {
        guard let a = value as? [Any] else { throw malformed(exists ? "expected an array" : "missing array") }
        return a.enumerated().map { JSONNode($0.element, path: "\(path)[\($0.offset)]", file: file) }
    }

    func objectKeys() throws -> [String] {
        guard let d = value as? [String: Any] else { throw malformed(exists ? "expected an object" : "missing object") }
        return Array(d.keys)
    }

    func rawObject() throws -> [String: Any] {
        guard let d = value as? [String: Any] else { throw malformed(exists ? "expected an object" : "missing object") }
        return d
    }
}
