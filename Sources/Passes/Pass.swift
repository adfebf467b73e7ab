import GraphIR

/// What a pass did: whether it changed the program and counters such as "ops removed".
public struct PassResult {
    public var changed: Bool
    /// Named counters, e.g. `["ops removed": 12]`.
    public var statistics: [String: Int]

    public init(changed: Bool = false, statistics: [String: Int] = [:]) {
        self.changed = changed
        self.statistics = statistics
    }

    public static let unchanged = PassResult()

    public mutating func count(_ key: String, _ n: Int = 1) {
        guard n != 0 else { return }
        statistics[key, default: 0] += n
        changed = true
    }
}

/// What a pass says of itself: a stable snake_case `name` (coremltools' where one exists; what
/// `--passes` and the pipelines name it by) and a one-line `summary` (`--list-passes`).
public struct PassInfo: Sendable {
    public var name: String
    public var summary: String
    public init(_ name: String, _ summary: String) {
        self.name = name
        self.summary = summary
    }
}

/// A transformation of a model's program.
///
/// A pass declares its ``PassInfo`` once (`static let info = PassInfo("name", "summary")`);
/// ``PassRegistry`` lists them all. A pass mutates the model in place and must leave it valid
/// for ``Verifier``.
public protocol Pass {
    static var info: PassInfo { get }
    init()
    /// Runs on every function of `model`.
    func run(on model: Model) throws -> PassResult
}

extension Pass {
    public static var name: String { info.name }
    public static var summary: String { info.summary }
}

/// A pass that works one function at a time.
public protocol FunctionPass: Pass {
    func run(on function: Function, in model: Model) throws -> PassResult
}

extension FunctionPass {
    public func run(on model: Model) throws -> PassResult {
        var total = PassResult()
        for f in model.program.functions {
            let r = try run(on: f, in: model)
            total.changed = total.changed || r.changed
            for (k, v) in r.statistics { total.statistics[k, default: 0] += v }
        }
        return total
    }
}

/// Errors passes throw: name the pass and what went wrong.
public struct PassError: Error, CustomStringConvertible {
    public var pass: String
    public var reason: String
    public init(pass: String, _ reason: String) { self.pass = pass; self.reason = reason }
    public var description: String { "pass '\(pass)': \(reason)" }
}
