/// A JSON object: string keys in the order they were first set (as Python's `dict` and the text
/// they were parsed from), looked up by hash. Equality ignores the order, as JSON's does.
public struct JSONObject: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String] = []
    private var storage: [String: JSONValue] = [:]

    public init() {}

    /// The entries of a dictionary, keys sorted (a dictionary has no order of its own).
    public init(_ dictionary: [String: JSONValue]) {
        keys = dictionary.keys.sorted()
        storage = dictionary
    }

    /// Entries in the given order; a repeated key keeps its first place and its last value.
    public init<S: Sequence>(entries: S) where S.Element == (String, JSONValue) {
        for (k, v) in entries { self[k] = v }
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(entries: elements) }

    public subscript(key: String) -> JSONValue? {
        get { storage[key] }
        set {
            if let newValue {
                if storage.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if storage.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }
    public var dictionary: [String: JSONValue] { storage }

    /// The entries in key order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> {
        keys.map { (key: $0, value: storage[$0]!) }.makeIterator()
    }

    public static func == (a: JSONObject, b: JSONObject) -> Bool { a.storage == b.storage }
    public func hash(into h: inout Hasher) { h.combine(storage) }
}
