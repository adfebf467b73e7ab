/// Element count and bytes of constant payloads of one dtype.
public struct ParameterStats: Hashable, Sendable {
    public var count: Int
    public var bytes: Int
    public init(count: Int = 0, bytes: Int = 0) {
        self.count = count
        self.bytes = bytes
    }
}

/// Counts of one function: operations, constant parameters, states.
public struct FunctionSummary: Sendable {
    public var name: String
    /// Proto opset string, e.g. `CoreML8`.
    public var opset: String
    /// Operations by type, nested blocks included (`const` counted too).
    public var opCounts: [String: Int]
    public var opTotal: Int { opCounts.values.reduce(0, +) }
    /// Constant tensor payloads by dtype: `const` values, inline constant operands and the
    /// non-`name` attributes of `constexpr_*` ops; immediate and blob, each distinct blob once.
    public var parameters: [DType: ParameterStats]
    public var parameterCount: Int { parameters.values.reduce(0) { $0 + $1.count } }
    public var parameterBytes: Int { parameters.values.reduce(0) { $0 + $1.bytes } }
    /// Bytes of the payloads that live in weight files (distinct blobs).
    public var blobBytes: Int
    /// Distinct blobs referenced.
    public var blobCount: Int
    /// State inputs: name, wrapped tensor type, bytes (nil when the shape is not static).
    public var states: [(name: String, type: TensorType, bytes: Int?)]
    public var stateCount: Int { states.count }
    public var stateBytes: Int { states.reduce(0) { $0 + ($1.bytes ?? 0) } }
}

/// What `forge-ir dump --summary` shows: per function op counts, parameters and states, plus
/// model-wide parameter totals (each blob counted once even when several functions share it)
/// and the weight file size.
public struct ModelSummary: Sendable {
    public var functions: [FunctionSummary]
    /// Model-wide parameters (distinct blobs once across all functions).
    public var parameters: [DType: ParameterStats]
    public var parameterCount: Int { parameters.values.reduce(0) { $0 + $1.count } }
    public var parameterBytes: Int { parameters.values.reduce(0) { $0 + $1.bytes } }
    public var blobCount: Int
    public var blobBytes: Int
    /// Total size of the mapped weight files (0 when none).
    public var weightFileBytes: Int

    public init(_ model: Model) {
        var collector = ParameterCollector()
        var fs: [FunctionSummary] = []
        for f in model.program.functions {
            var local = ParameterCollector()
            var counts: [String: Int] = [:]
            f.body.walk { op in
                counts[op.type, default: 0] += 1
                local.add(op)
                collector.add(op)
            }
            let states = f.stateInputs.compactMap { v -> (name: String, type: TensorType, bytes: Int?)? in
                guard let t = v.type.stateWrappedTensor else { return nil }
                return (v.name, t, t.elementCount.map { t.dtype.byteCount(elements: $0) })
            }
            fs.append(FunctionSummary(name: f.name, opset: f.opset, opCounts: counts, parameters: local.stats,
                                      blobBytes: local.blobBytes, blobCount: local.blobs.count, states: states))
        }
        functions = fs
        parameters = collector.stats
        blobCount = collector.blobs.count
        blobBytes = collector.blobBytes
        weightFileBytes = model.weightFiles.values.reduce(0) { $0 + $1.size }
    }

    /// Recursive op counts of one function (nested blocks included).
    public static func opCounts(_ function: Function) -> [String: Int] {
        var counts: [String: Int] = [:]
        function.body.walk { counts[$0.type, default: 0] += 1 }
        return counts
    }

    /// The distinct blob references of a program.
    public static func distinctBlobs(_ program: Program) -> Set<BlobRef> {
        var c = ParameterCollector()
        for f in program.functions { f.body.walk { c.add($0) } }
        return c.blobs
    }
}

/// Accumulates constant tensor payloads, each distinct blob once.
struct ParameterCollector {
    var stats: [DType: ParameterStats] = [:]
    var blobs: Set<BlobRef> = []
    var blobBytes = 0

    mutating func add(_ op: Op) {
        if op.type == "const" {
            if let v = op.attribute("val") { add(v) }
        } else if op.type.hasPrefix("constexpr_") {
            for a in op.attributes where a.name != "name" { add(a.value) }
        }
        for input in op.inputs {
            for case let .constant(c) in input.operands { add(c) }
        }
    }

    mutating func add(_ value: ConstValue) {
        switch value.payload {
        case let .tuple(items), let .list(items):
            for i in items { add(i) }
        case let .dict(entries):
            for e in entries { add(e.key); add(e.value) }
        case let .blob(ref):
            guard let t = value.type.tensorType, blobs.insert(ref).inserted else { return }
            let n = t.elementCount ?? 0
            let bytes = t.dtype.byteCount(elements: n)
            stats[t.dtype, default: ParameterStats()].count += n
            stats[t.dtype, default: ParameterStats()].bytes += bytes
            blobBytes += bytes
        case let .tensor(storage):
            guard let t = value.type.tensorType, t.dtype != .string else { return }
            let n = t.elementCount ?? MILPrinter.storedElementCount(storage, dtype: t.dtype)
            stats[t.dtype, default: ParameterStats()].count += n
            stats[t.dtype, default: ParameterStats()].bytes += t.dtype.byteCount(elements: n)
        }
    }
}
