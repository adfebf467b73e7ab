import Dispatch
import GraphIR
import Interpreter

/// One compared value: a function output or an op output both sides have.
public struct ValueComparison {
    public var name: String
    /// Producing op in the candidate (nil for a function input).
    public var op: String?
    public var opType: String?
    /// Position of the value in the candidate's run (op order), from 0.
    public var index: Int
    public var dtype: String
    public var shape: [Int]
    /// Reference shape when it differs (then `metrics` is nil).
    public var referenceShape: [Int]?
    public var metrics: ErrorMetrics?
    /// For string values (a classifier's label): whether both sides hold the same strings
    /// (then `metrics` is nil); nil for numeric values.
    public var stringsEqual: Bool? = nil
    public var ok: Bool
}

/// The first value (in the candidate's op order) beyond the tolerance, with its op's inputs.
public struct Divergence {
    public struct InputStat {
        /// The op's input name (`x`, `values[1]`, …) and the value bound to it.
        public var input: String
        public var value: String
        public var reference: TensorStats?
        public var candidate: TensorStats?
        public var metrics: ErrorMetrics?
    }
    public var call: Int
    public var value: ValueComparison
    public var inputs: [InputStat]
    /// The op run alone on the reference's values of its inputs (``OpIsolation``), compared
    /// with the reference's output: failing means the op itself computes differently; passing
    /// means the error came in through its inputs. nil when it could not be isolated
    /// (``isolationNote`` says why).
    public var isolated: ErrorMetrics?
    public var isolatedOK: Bool?
    /// The last compared value before this one that passed (name, op-order index): with a
    /// sparse reference (a few recorded layer outputs) the break lies in the ops between.
    public var after: (name: String, index: Int)?
    public var isolationNote: String?
}

/// The comparison of one call.
public struct CallComparison {
    public var call: Int
    public var label: String
    /// The function outputs, in the candidate's output order.
    public var outputs: [ValueComparison]
    /// Every op output both sides have, in the candidate's op order.
    public var ops: [ValueComparison]
    public var firstDivergence: Divergence?
    /// The first op beyond the tolerance even when run alone on the reference's values of its
    /// inputs (``Divergence/isolated``): the op that breaks the numbers, rather than one that
    /// carries an error it was given. nil when every failing op passes alone (the error is an
    /// accumulation, e.g. of fp16 rounding) or none could be isolated.
    public var firstLocalDivergence: Divergence?
    /// Values of the reference left unrecorded because of the byte budget.
    public var unrecorded: Int
    /// Values the candidate produced that the reference does not have (other op names).
    public var candidateOnly: Int
}

/// One side of a comparison that runs: a session built to observe every op output.
public final class ComparisonRunner {
    public let label: String
    public let session: Session
    /// Producing op of each value name, and the op order of the function.
    let producers: [String: Op]
    public let opCount: Int

    /// - Throws: `InterpreterError` (unsupported ops, bad function name, states).
    public init(model: Model, function: String?, precision: Precision, label: String) throws {
        self.label = label
        session = try Session(model: model, function: function, precision: precision, observing: .all)
        var p: [String: Op] = [:], n = 0
        session.function.body.walk { op in
            for v in op.outputs { p[v.name] = op }
            if op.type != "const" && !op.type.hasPrefix("constexpr_") { n += 1 }
        }
        producers = p
        opCount = n
    }

    /// The value of constant `name` (a `const`, or a `constexpr_*` of constants such as a
    /// dequantized weight) as a tensor of up to 2^22 elements, else nil.
    public func constant(_ name: String) -> Tensor? {
        if let t = constants[name] { return t }
        guard let op = producers[name], let v = op.outputs.first(where: { $0.name == name }) else { return nil }
        let t = OpIsolation.constant(v, opset: session.function.opset)
        constants[name] = t
        return t
    }
    private var constants: [String: Tensor?] = [:]

    /// Runs one call (states carried), handing every observed value to `body` in op order.
    public func run(_ inputs: [String: Tensor], _ body: @escaping (String, Tensor) -> Void) throws -> [String: Tensor] {
        session.plan.valueObserver = body
        defer { session.plan.valueObserver = nil }
        return try session.predict(inputs)
    }
}

/// `forge-ir compare`: runs the candidate on each call and compares every value it produces
/// with the reference's value of the same name — a second run (another package, or the same
/// package in another precision) or recorded arrays (`--reference`).
public enum ValueComparator {
    /// Where the reference values come from.
    public enum Reference {
        case run(ComparisonRunner)
        /// Per call: the recorded arrays by value name.
        case recorded([[String: Tensor]])
    }

    /// Progress: (call, calls, values seen in this call, ops of the function).
    public typealias Progress = (Int, Int, Int, Int) -> Void

    /// Compares call by call.
    /// - Parameters:
    ///   - maxBytes: budget for the reference values held in memory per call (float values
    ///     count 4 bytes an element); values beyond it are not compared (``CallComparison/unrecorded``).
    ///   - maxIsolations: failing ops run alone, at most, per call, looking for
    ///     ``CallComparison/firstLocalDivergence``.
    ///   - carry: output name → input name: from the second call on, each side's output of the
    ///     previous call replaces that input of the call (explicit KV caches, as the Generator
    ///     feeds them back); a reference run carries its own outputs, recorded values carry nothing
    ///     into the reference (their inputs are as recorded) but the candidate still carries its own.
    /// - Throws: `InterpreterError` from either run; `ComparisonError` when a carried output is missing.
    public static func compare(reference: Reference, candidate: ComparisonRunner, calls: [(inputs: [String: Tensor], label: String)],
                               tolerance: Tolerance, maxBytes: Int = 4 << 30, maxIsolations: Int = 256,
                               carry: [String: String] = [:], progress: Progress? = nil) throws -> [CallComparison] {
        var result: [CallComparison] = []
        var refCarried: [String: Tensor] = [:], candCarried: [String: Tensor] = [:]
        for (k, call) in calls.enumerated() {
            var walk = CallWalk(index: k, inputs: call.inputs.merging(candCarried) { _, c in c }, reference: reference, candidate: candidate, tolerance: tolerance)
            walk.refInputs = call.inputs.merging(refCarried) { _, c in c }
            try walk.recordReference(maxBytes: maxBytes)
            let outputs = try walk.runCandidate { index in progress?(k, calls.count, index, candidate.opCount) }
            for (output, input) in carry {
                guard let c = outputs[output] else { throw ComparisonError("call \(k): the candidate returned no '\(output)' to carry into '\(input)'") }
                candCarried[input] = c
                if case .run = reference {
                    guard let r = walk.refOutputs[output] else { throw ComparisonError("call \(k): the reference returned no '\(output)' to carry into '\(input)'") }
                    refCarried[input] = r
                }
            }
            let outs = walk.compareOutputs(outputs)
            let first = walk.divergence.map { walk.describe($0.0, $0.1) }
            let local = walk.firstLocalDivergence(after: first, maxIsolations: maxIsolations)
            result.append(CallComparison(call: k, label: call.label, outputs: outs, ops: walk.ops, firstDivergence: first,
                                         firstLocalDivergence: local, unrecorded: walk.unrecorded, candidateOnly: walk.candidateOnly))
        }
        return result
    }

    /// One call of ``compare``: the reference's values, then the candidate's compared as they come.
    struct CallWalk {
        let index: Int
        let inputs: [String: Tensor]
        /// The reference run's inputs (``inputs`` unless the reference carries its own caches).
        var refInputs: [String: Tensor]
        let reference: Reference
        let candidate: ComparisonRunner
        let tolerance: Tolerance
        var ref: [String: Tensor] = [:]
        var refOutputs: [String: Tensor] = [:]
        var unrecorded = 0
        var ops: [ValueComparison] = []
        var candStats: [String: TensorStats] = [:]
        var metricsByName: [String: ErrorMetrics] = [:]
        var candidateOnly = 0
        /// The first value beyond the tolerance, and its op.
        var divergence: (ValueComparison, Op)?

        init(index: Int, inputs: [String: Tensor], reference: Reference, candidate: ComparisonRunner, tolerance: Tolerance) {
            self.index = index
            self.inputs = inputs
            self.refInputs = inputs
            self.reference = reference
            self.candidate = candidate
            self.tolerance = tolerance
        }

        /// 1. The reference values of this call (a run within `maxBytes`, or the recorded ones).
        mutating func recordReference(maxBytes: Int) throws {
            switch reference {
            case let .run(r):
                var bytes = 0, ref: [String: Tensor] = [:], unrecorded = 0
                refOutputs = try r.run(refInputs) { name, t in
                    let n = t.count * 4
                    guard bytes + n <= maxBytes else { unrecorded += 1; return }
                    bytes += n
                    ref[name] = t
                }
                self.ref = ref
                self.unrecorded = unrecorded
            case let .recorded(list):
                ref = index < list.count ? list[index] : [:]
                refOutputs = ref
            }
        }

        /// 2. The candidate's run, each value compared as it is produced; `tick(valuesSeen)` at
        /// most every 200 ms.
        mutating func runCandidate(tick: @escaping (Int) -> Void) throws -> [String: Tensor] {
            var seen = 0
            var lastReport = DispatchTime.now().uptimeNanoseconds
            let producers = candidate.producers
            var walk = self
            let outputs = try candidate.run(inputs) { name, t in
                defer { seen += 1 }
                let now = DispatchTime.now().uptimeNanoseconds
                if now - lastReport > 200_000_000 { lastReport = now; tick(seen) }
                guard let r = walk.ref[name] else { walk.candidateOnly += 1; return }
                let op = producers[name]
                let vc = walk.comparison(name: name, op: op, index: seen, candidate: t, reference: r, remember: true)
                walk.candStats[name] = TensorStats(t)
                walk.ops.append(vc)
                if walk.divergence == nil, !vc.ok, let op { walk.divergence = (vc, op) }
            }
            self = walk
            return outputs
        }

        /// One value against the reference (metrics, or the differing shape).
        mutating func comparison(name: String, op: Op?, index: Int, candidate t: Tensor, reference r: Tensor, remember: Bool) -> ValueComparison {
            var vc = ValueComparison(name: name, op: op?.name, opType: op?.type, index: index, dtype: t.dtype.rawValue,
                                     shape: t.shape, referenceShape: nil, metrics: nil, ok: false)
            if case let .string(a) = t.data, case let .string(b) = r.data {
                vc.stringsEqual = a == b && t.shape.reduce(1, *) == r.shape.reduce(1, *)
                vc.ok = vc.stringsEqual!
                return vc
            }
            if let m = ErrorMetrics(candidate: t, reference: r, tolerance: tolerance) {
                vc.metrics = m
                vc.ok = m.passes(tolerance)
                if remember { metricsByName[name] = m }
            } else {
                vc.referenceShape = r.shape
            }
            return vc
        }

        /// 3. The function's outputs.
        mutating func compareOutputs(_ outputs: [String: Tensor]) -> [ValueComparison] {
            var outs: [ValueComparison] = []
            let producers = candidate.producers
            for (i, v) in candidate.session.function.outputs.enumerated() {
                guard let c = outputs[v.name], let r = refOutputs[v.name] else { continue }
                outs.append(comparison(name: v.name, op: producers[v.name], index: i, candidate: c, reference: r, remember: false))
            }
            return outs
        }

        /// A divergent value with the statistics of its op's inputs and the op run alone.
        func describe(_ vc: ValueComparison, _ op: Op) -> Divergence {
            var stats: [Divergence.InputStat] = []
            for input in op.inputs {
                for (j, operand) in input.operands.enumerated() {
                    guard let v = operand.value, !v.type.isState else { continue }
                    let label = input.operands.count > 1 ? "\(input.name)[\(j)]" : input.name
                    stats.append(inputStat(label: label, value: v.name))
                }
            }
            var d = Divergence(call: index, value: vc, inputs: stats)
            if let prev = ops.last(where: { $0.index < vc.index && $0.ok }) { d.after = (prev.name, prev.index) }
            (d.isolated, d.isolationNote) = isolate(vc, op)
            d.isolatedOK = d.isolated.map { $0.passes(tolerance) }
            return d
        }

        /// One input of a divergent op on both sides (a computed value, a call input or a constant).
        func inputStat(label: String, value name: String) -> Divergence.InputStat {
            var refConst: Tensor?
            if case let .run(r) = reference { refConst = r.constant(name) }
            let candConst = candidate.constant(name)
            let inRef = ref[name] ?? refInputs[name] ?? refConst
            let inCand = candStats[name] ?? (inputs[name] ?? candConst).map(TensorStats.init)
            let m = metricsByName[name] ?? {
                guard let a = inputs[name] ?? candConst, let b = inRef else { return nil }
                return ErrorMetrics(candidate: a, reference: b, tolerance: tolerance)
            }()
            return .init(input: label, value: name, reference: inRef.map(TensorStats.init), candidate: inCand, metrics: m)
        }

        /// The op alone on the reference's inputs, against the reference's output.
        func isolate(_ vc: ValueComparison, _ op: Op) -> (ErrorMetrics?, String?) {
            guard let r = ref[vc.name] else { return (nil, "the reference lacks its output") }
            var values = ref
            for (name, t) in refInputs { values[name] = t }
            do {
                if let outs = try OpIsolation.run(op, opset: candidate.session.function.opset, values: values,
                                                  precision: candidate.session.plan.precision),
                   let o = outs[vc.name], let m = ErrorMetrics(candidate: o, reference: r, tolerance: tolerance) {
                    return (m, nil)
                }
                return (nil, op.operandValues.contains(where: \.type.isState) || op.type == "read_state"
                    ? "it reads a state" : op.blocks.isEmpty ? "the reference lacks one of its inputs" : "it holds nested blocks")
            } catch {
                return (nil, "run alone, it failed: \(error)")
            }
        }

        /// The first op that is beyond the tolerance even when run alone on the reference's
        /// inputs (at most `maxIsolations` failing ops tried, in op order).
        func firstLocalDivergence(after first: Divergence?, maxIsolations: Int) -> Divergence? {
            if let f = first, f.isolatedOK == false { return f }
            var tried = 0
            let producers = candidate.producers
            for vc in ops where !vc.ok && vc.name != first?.value.name {
                guard tried < maxIsolations, let op = producers[vc.name] else { break }
                tried += 1
                if let m = isolate(vc, op).0, !m.passes(tolerance) { return describe(vc, op) }
            }
            return nil
        }
    }
}
