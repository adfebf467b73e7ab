/// Element count and bytes of constant payloads of one dtype.
public struct ParameterStats: Hashable, Sendable {
    public var count: Int
    public var bytes: Int
    public init(count: Int = 0, bytes: Int = 0) {
        self.count = count
        self.bytes = bytes
    }
}

/// The parameter totals a ``FunctionSummary`` and the ``ModelSummary`` both report (the
/// model's count each blob once across its functions), with the totals derived from them.
public protocol ParameterTotals {
    /// Constant tensor payloads by dtype: `const` values, inline constant operands and the
    /// non-`name` attributes of `constexpr_*` ops; immediate and blob, each distinct blob once.
    var parameters: [DType: ParameterStats] { get }
    /// The parameters as a model card counts them: ``WeightCount``.
    var parameterCount: Int { get }
    /// Distinct blobs referenced.
    var blobCount: Int { get }
    /// Bytes of the payloads that live in weight files (distinct blobs).
    var blobBytes: Int { get }
}

extension ParameterTotals {
    /// Every stored constant value (int8 data, their scales, small integer constants…).
    public var storedValueCount: Int { parameters.values.reduce(0) { $0 + $1.count } }
    public var parameterBytes: Int { parameters.values.reduce(0) { $0 + $1.bytes } }
}

/// Counts of one function: operations, constant parameters, states.
public struct FunctionSummary: ParameterTotals, Sendable {
    public var name: String
    /// Proto opset string, e.g. `CoreML8`.
    public var opset: String
    /// Operations by type, nested blocks included (`const` counted too).
    public var opCounts: [String: Int]
    public var opTotal: Int { opCounts.values.reduce(0, +) }
    public var parameters: [DType: ParameterStats]
    public var parameterCount: Int
    public var blobBytes: Int
    public var blobCount: Int
    /// State inputs: name, wrapped tensor type, bytes (nil when the shape is not static).
    public var states: [(name: String, type: TensorType, bytes: Int?)]
    public var stateCount: Int { states.count }
    public var stateBytes: Int { states.reduce(0) { $0 + ($1.bytes ?? 0) } }
}

/// What `forge-ir dump --summary` shows: per function op counts, parameters and states, plus
/// model-wide parameter totals (each blob counted once even when several functions share it)
/// and the weight file size.
public struct ModelSummary: ParameterTotals, Sendable {
    public var functions: [FunctionSummary]
    /// Model-wide parameters (distinct blobs once across all functions).
    public var parameters: [DType: ParameterStats]
    /// The model's parameters as a model card counts them: ``WeightCount``, each blob once.
    public var parameterCount: Int
    public var blobCount: Int
    public var blobBytes: Int
    /// Total size of the mapped weight files (0 when none).
    public var weightFileBytes: Int

    public init(_ model: Model) {
        var collector = ParameterCollector()
        var weights = WeightCount()
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
            var localWeights = WeightCount()
            localWeights.add(f)
            weights.add(f)
            fs.append(FunctionSummary(name: f.name, opset: f.opset, opCounts: counts, parameters: local.stats,
                                      parameterCount: localWeights.total,
                                      blobBytes: local.blobBytes, blobCount: local.blobs.count, states: states))
        }
        functions = fs
        parameters = collector.stats
        parameterCount = weights.total
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

/// Parameters as a model card counts them (and as `bench` reports them): the dense element
/// count of each `constexpr_*` result (an int8 weight counts its values, not its scales) plus
/// every float `const` tensor that is not an operand of a constexpr op. A blob referenced by
/// several functions counts once.
public struct WeightCount {
    public private(set) var total = 0
    private var blobs = Set<BlobRef>()
    private var seen = Set<ObjectIdentifier>()

    public init() {}

    public mutating func add(_ f: Function) {
        var feedsConstexpr = Set<ObjectIdentifier>()
        f.body.walk { op in
            if op.type.hasPrefix("constexpr_") { for v in op.operandValues { feedsConstexpr.insert(ObjectIdentifier(v)) } }
        }
        f.body.walk { op in
            guard let out = op.outputs.first, let t = out.type.tensorType, seen.insert(ObjectIdentifier(out)).inserted else { return }
            let counts: Bool
            if op.type.hasPrefix("constexpr_") {
                counts = true
            } else if op.type == "const", t.dtype.isFloat, !feedsConstexpr.contains(ObjectIdentifier(out)) {
                counts = true
            } else {
                counts = false
            }
            guard counts else { return }
            if let ref = Self.firstBlob(op), !blobs.insert(ref).inserted { return }
            total += t.elementCount ?? 0
        }
    }

    /// The weight-file blob an op's value comes from (its `val`, or a constexpr's first blob).
    static func firstBlob(_ op: Op) -> BlobRef? {
        func blob(_ c: ConstValue) -> BlobRef? { if case let .blob(r) = c.payload { return r } else { return nil } }
        if let v = op.attribute("val") { return blob(v) }
        for input in op.inputs {
            for operand in input.operands {
                switch operand {
                case let .constant(c): if let r = blob(c) { return r }
                case let .value(v): if let p = v.producer, let c = p.attribute("val"), let r = blob(c) { return r }
                }
            }
        }
        for a in op.attributes where a.name != "name" { if let r = blob(a.value) { return r } }
        return nil
    }
}
