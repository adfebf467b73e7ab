import GraphIR

/// What a kernel sees: its op, the runtime values bound to each input, and the run settings.
///
/// The values are held flat — input `names[i]` owns `flat[bounds[i] ..< bounds[i + 1]]` — and
/// found by a linear scan of the few input names (no dictionary, no string hashing per op).
public struct KernelInvocation {
    public let op: Op
    public let precision: Precision
    /// Whether products with int8 block-quantized weights quantize their activations per block
    /// of 32 (``ActivationQuantization``, ``QuantizedGEMM``): opt-in, ``ActivationQuantization/exact``
    /// by default (Core ML's CPU path keeps fp32 activations).
    public let activations: ActivationQuantization
    let names: [String]
    let bounds: [Int]
    let flat: [RuntimeValue]
    /// The op's output dtypes, precomputed by the plan (``ExecutionPlan/Step/outputDTypes``;
    /// empty: read from the op).
    let outputDTypes: [DType?]

    public init(op: Op, precision: Precision, values: [String: [RuntimeValue]]) {
        var names: [String] = [], bounds = [0], flat: [RuntimeValue] = []
        for (k, v) in values {
            names.append(k)
            flat += v
            bounds.append(flat.count)
        }
        self.init(op: op, precision: precision, names: names, bounds: bounds, flat: flat)
    }

    init(op: Op, precision: Precision, activations: ActivationQuantization = .exact, names: [String], bounds: [Int], flat: [RuntimeValue],
         outputDTypes: [DType?] = []) {
        self.op = op
        self.outputDTypes = outputDTypes
        self.precision = precision
        self.activations = activations
        self.names = names
        self.bounds = bounds
        self.flat = flat
    }

    /// The same invocation with input `name` bound to `value` alone (added when absent): how a
    /// wrapping kernel hands its inner kernel a dense, sliced or widened input.
    func replacing(_ name: String, with value: RuntimeValue) -> KernelInvocation {
        var names: [String] = [], bounds = [0], flat: [RuntimeValue] = []
        for (i, n) in self.names.enumerated() where n != name {
            names.append(n)
            flat += self.flat[self.bounds[i]..<self.bounds[i + 1]]
            bounds.append(flat.count)
        }
        names.append(name)
        flat.append(value)
        bounds.append(flat.count)
        return KernelInvocation(op: op, precision: precision, activations: activations, names: names, bounds: bounds, flat: flat,
                                outputDTypes: outputDTypes)
    }

    @inline(__always)
    func slice(_ name: String) -> ArraySlice<RuntimeValue>? {
        for i in 0..<names.count where names[i] == name { return flat[bounds[i]..<bounds[i + 1]] }
        return nil
    }

    public func has(_ name: String) -> Bool { slice(name) != nil }

    /// The runtime value bound to input `name`.
    public func value(_ name: String) throws -> RuntimeValue {
        guard let v = slice(name), v.count == 1 else {
            throw KernelError(slice(name) == nil ? "missing input '\(name)'" : "input '\(name)' has \(slice(name)!.count) values, expected 1")
        }
        return v[v.startIndex]
    }

    /// Every value bound to the variadic input `name` (e.g. `concat.values`), or nil.
    func all(_ name: String) -> [RuntimeValue]? { slice(name).map(Array.init) }

    /// Input `name` as a dense tensor.
    public func tensor(_ name: String) throws -> Tensor { try value(name).dense() }
    public func optionalTensor(_ name: String) throws -> Tensor? { has(name) ? try tensor(name) : nil }

    /// Variadic input `name` (e.g. `concat.values`) as dense tensors.
    public func tensors(_ name: String) throws -> [Tensor] {
        guard let v = slice(name) else { throw KernelError("missing input '\(name)'") }
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
        if i >= 0, i < outputDTypes.count { return outputDTypes[i] ?? .fp32 }
        return op.outputs[i].type.tensorType?.dtype ?? .fp32
    }
}

/// A kernel: computes an op's outputs from its inputs.
public typealias Kernel = (KernelInvocation) throws -> [RuntimeValue]

/// The kernels, keyed by MIL op type. Kernel files register themselves in ``KernelRegistry/builtins``.
public enum KernelRegistry {
    nonisolated(unsafe) private static var extra: [String: Kernel] = [:]

    /// Adds or replaces a kernel (used by other modules).
    public static func register(_ op: String, _ kernel: @escaping Kernel) { extra[op] = kernel }

    public static func kernel(for op: String) -> Kernel? { extra[op] ?? builtins[op] }

    public static var supportedOps: [String] { Set(builtins.keys).union(extra.keys).sorted() }

    /// Op names that two kernel families both register (the later would win): must stay empty.
    public static var duplicateNames: [String] { built.duplicates }

    /// Ops of the op table that have no kernel, and why. The coverage test fails on a schema
    /// with neither a kernel nor an entry here, and on an entry that has a kernel after all.
    public static let withoutKernel: [String: String] = [
        "const": "a value, not a computation: the plan binds it directly",
        "cond": "control flow: the plan runs its blocks (ControlFlow.swift)",
        "while_loop": "control flow: the plan runs its blocks (ControlFlow.swift)",
    ]

    /// Every built-in kernel. Each family contributes a table.
    static var builtins: [String: Kernel] { built.table }

    private static let built: (table: [String: Kernel], duplicates: [String]) = {
        var t: [String: Kernel] = [:]
        var duplicates: [String] = []
        for family in KernelFamilies.all {
            for (k, v) in family {
                if t[k] != nil { duplicates.append(k) }
                t[k] = v
            }
        }
        return (t, duplicates.sorted())
    }()
}
