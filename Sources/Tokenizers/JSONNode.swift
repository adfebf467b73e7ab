import JSON

/// Read-only view of a parsed JSON value that remembers its path (`model.merges[12]`) for
/// the error messages of ``TokenizerError``.
struct JSONNode {
    let value: JSONValue?
    let path: String
    let file: String

    init(_ value: JSONValue?, path: String = "", file: String) {
        self.value = value
        self.path = path
        self.file = file
    }

    /// Parses a file's contents; the error names the file, the line and what was wrong.
    static func parse(_ bytes: [UInt8], file: String) throws -> JSONNode {
        do {
            return JSONNode(try JSONValue.parse(bytes: bytes), file: file)
        } catch let e as JSONValue.ParseError {
            throw TokenizerError.unreadable(file: file, reason: "not valid JSON (line \(e.line): \(e.reason))")
        }
    }

    var exists: Bool { value != nil && value != .null }

    subscript(key: String) -> JSONNode {
        JSONNode(value?.objectValue?[key], path: path.isEmpty ? key : path + "." + key, file: file)
    }

    func malformed(_ reason: String) -> TokenizerError {
        .malformed(file: file, path: path, reason: reason)
    }

    func unsupported(_ what: String) -> TokenizerError {
        .unsupported(file: file, path: path, what: what)
    }

    func string() throws -> String {
        guard let s = value?.stringValue else { throw malformed(exists ? "expected a string" : "missing string") }
        return s
    }

    func optionalString() throws -> String? {
        guard exists else { return nil }
        return try string()
    }

    /// `true`/`false`, or a number (non-zero is true), as Python's `bool()` of a JSON value.
    func bool(default d: Bool) throws -> Bool {
        guard exists else { return d }
        if let b = value?.boolValue { return b }
        if let n = value?.doubleValue { return n != 0 }
        throw malformed("expected true or false")
    }

    func int() throws -> Int {
        guard let i = value?.intValue else { throw malformed(exists ? "expected an integer" : "missing integer") }
        return i
    }

    /// Largest token id read: the id tables are dense arrays of `maxTokenID + 1` entries (the
    /// largest vocabularies in use have ~262k ids; 2^22 entries cost ~180 MB at most), so a
    /// hostile id cannot allocate gigabytes.
    static let maxTokenID = (1 << 22) - 1

    /// A token id: a whole number in `0...maxTokenID`.
    func tokenID() throws -> Int {
        let i = try int()
        guard i >= 0 && i <= JSONNode.maxTokenID else {
            throw malformed("token id \(i) out of range (0...\(JSONNode.maxTokenID))")
        }
        return i
    }

    func double() throws -> Double? {
        guard exists else { return nil }
        guard let d = value?.doubleValue else { throw malformed("expected a number") }
        return d
    }

    func array() throws -> [JSONNode] {
        guard let a = value?.arrayValue else { throw malformed(exists ? "expected an array" : "missing array") }
        return a.enumerated().map { JSONNode($0.element, path: "\(path)[\($0.offset)]", file: file) }
    }

    /// The keys in the file's order.
    func objectKeys() throws -> [String] { try object().keys }

    func object() throws -> JSONObject {
        guard let o = value?.objectValue else { throw malformed(exists ? "expected an object" : "missing object") }
        return o
    }
}
