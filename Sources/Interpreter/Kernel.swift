import GraphIR

/// What a kernel sees: its op, the runtime values bound to each input, and the run settings.
public struct KernelInvocation {
    public let op: Op
    public let precision: Precision
    var values: [String: [RuntimeValue]]

    public init(op: Op, precision: Precision, values: [String: [RuntimeValue]]) {
        self.op = op
        self.precision = precision
        self.values = values
    }

    public func has(_ name: String) -> Bool { values[name] != nil }

    /// The runtime value bound to input `name`.
    public func value(_ name: String) throws -> RuntimeValue {
        guard let v = values[name], v.count == 1 else {
            throw KernelError(values[name] == nil ? "missing input '\(name)'" : "input '\(name)' has \(values[name]!.count) values, expected 1")
        }
        return v[0]
    }

    /// Input `name` as a dense tensor.
    public func tensor(_ name: String) throws -> Tensor { try value(name).dense() }
    public func optionalTensor(_ name: String) throws -> Tensor? { has(name) ? try tensor(name) : nil }

    /// Variadic input `name` (e.g. `concat.values`) as dense tensors.
    public func tensors(_ name: String) throws -> [Tensor] {
        guard let v = values[name] else { throw KernelError("missing input '\(name)'") }
        return try v.map { try $0.dense() }
    }

    public func int(_ name: String) throws -> Int {
        let t = try tensor(name)
        guard t.count == 1 else { throw KernelError("input '\(name)' must be a scalar, has shape \(t.shape)") }
        return Int(t.ints[0])
    }
    public func int(_ name: String, default d: Int) throws -> Int { has(name) ? try int(name) : d }
    public func ints(_ name: String) throws -> [Int] { try tensor(name).ints.map(Int.init) }
    public func bool(_ name: String, default d: Bool) throws -> Bool {
        guard has(name) else { return d }
        let t = try tensor(name)
        guard t.count == 1 else { throw KernelError("input '\(name)' must be a scalar") }
        return t.bools[0]
    }
    public func bools(_ name: String) throws -> [Bool] { try tensor(name).bools }
    public func float(_ name: String) throws -> Float {
        let t = try tensor(name)
        guard t.count == 1 else { throw KernelError("input '\(name)' must be a scalar, has shape \(t.shape)") }
        return t.floats[0]
    }
    public func float(_ name: String, default d: Float) throws -> Float { has(name) ? try float(name) : d }
    public func string(_ name: String) throws -> String {
        guard case let .string(s) = try tensor(name).data, s.count == 1 else { throw KernelError("input '\(name)' must be a string") }
        return s[0]
    }
    public func string(_ name: String, default d: String) throws -> String { has(name) ? try string(name) : d }

    /// The dtype the graph declares for output `i`.
    public func outputDType(_ i: Int = 0) -> DType {
        op.outputs[i].type.tensorType?.dtype ?? .fp32
    }
}

/// A kernel: computes an op's outputs from its inputs.
public typealias Kernel = (KernelInvocation) throws -> [RuntimeValue]

/// The kernels, keyed by MIL op type. Kernel files register themselves in ``KernelRegistry/builtins``.
public enum KernelRegistry {
    nonisolated(unsafe) private static var extra: [String: Kernel] = [:]

    /// Adds or replaces a kernel (used by other modules, e.g. StateOps).
    public static func register(_ op: String, _ kernel: @escaping Kernel) { extra[op] = kernel }

    public static func kernel(for op: String) -> Kernel? { extra[op] ?? builtins[op] }

    public static var supportedOps: [String] { Set(builtins.keys).union(extra.keys).sorted() }

    /// Every built-in kernel. Each family contributes a table.
    static let builtins: [String: Kernel] = {
        var t: [String: Kernel] = [:]
        for family in KernelFamilies.all {
            for (k, v) in family { t[k] = v }
        }
        return t
    }()
}
