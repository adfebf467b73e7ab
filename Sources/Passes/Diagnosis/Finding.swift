import GraphIR

/// One thing `forge-ir diagnose` reports.
public struct Finding: Sendable {
    public enum Severity: String, Sendable, Comparable {
        case error, warning, info
        var rank: Int { self == .error ? 0 : self == .warning ? 1 : 2 }
        public static func < (a: Severity, b: Severity) -> Bool { a.rank < b.rank }
    }

    /// The op a finding is about: name, type and position in its function's body.
    public struct OpRef: Sendable, Equatable {
        public var name: String
        public var type: String
        /// Index in the function body (pre-order over nested blocks).
        public var index: Int
    }

    public var severity: Severity
    /// Stable snake_case kind, e.g. `shape_error`, `state_write_runtime_end`.
    public var code: String
    public var function: String?
    public var op: OpRef?
    /// The first binding of the flexible dimensions at which it goes wrong (nil: at every
    /// binding, or not about shapes).
    public var binding: [String: Int]?
    /// Every evaluated binding at which it goes wrong.
    public var bindings: [[String: Int]]
    /// Shapes involved, by operand (one format: ``ShapeNote``).
    public var shapes: [ShapeNote]
    /// What goes wrong.
    public var message: String
    /// The forge-ir pass that fixes it, if there is one.
    public var fixPass: String?
    /// How to fix it, in words.
    public var fix: String

    public init(_ severity: Severity, _ code: String, function: String?, op: OpRef? = nil, binding: [String: Int]? = nil,
                shapes: [ShapeNote] = [], message: String, fixPass: String? = nil, fix: String = "") {
        self.severity = severity
        self.code = code
        self.function = function
        self.op = op
        self.binding = binding
        self.bindings = binding.map { [$0] } ?? []
        self.shapes = shapes
        self.message = message
        self.fixPass = fixPass
        self.fix = fix
    }
}

/// `name=value` pairs of a binding, sorted by name.
public func describeBinding(_ b: [String: Int]) -> String {
    b.isEmpty ? "(static)" : b.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
}
