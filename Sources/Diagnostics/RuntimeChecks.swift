import Foundation
import GraphIR
import Interpreter
import Passes

/// Calls to make for a runtime check: run in order on fresh (zeroed) states. The caller builds
/// them (from `--inputs`, or with Generation's `GenerationContract.inputs(ids:position:function:)`), so that this
/// module needs no knowledge of input contracts.
public struct RuntimeScenario {
    public var calls: [[String: Tensor]]
    /// What the calls are, for the report (e.g. "prefill of 16 random token ids (seed 0)").
    public var label: String
    /// Output → input names whose value each call hands to the next (KV caches that are
    /// plain inputs and outputs, without states); the next call's own value is replaced.
    public var carry: [String: String]
    /// Constant inputs bound once to the check's plan (mapped tables, `--static-input`).
    public var bound: [String: MappedArray]
    public init(calls: [[String: Tensor]], label: String, carry: [String: String] = [:], bound: [String: MappedArray] = [:]) {
        self.calls = calls
        self.label = label
        self.carry = carry
        self.bound = bound
    }

    /// Binds ``bound`` to `plan`.
    func bind(to plan: ExecutionPlan) throws {
        for (n, a) in bound.sorted(by: { $0.key < $1.key }) { try plan.bind(n, to: a) }
    }

    /// Call `i`'s inputs with the values carried from the previous call's `outputs`.
    func inputs(_ i: Int, after outputs: [String: Tensor]?) -> [String: Tensor] {
        var x = calls[i]
        if let outputs { for (o, inp) in carry { if let t = outputs[o] { x[inp] = t } } }
        return x
    }
}

/// Checks that run the function in the interpreter, watching every op through
/// `ExecutionPlan.observer`.
public enum RuntimeChecks {
    /// Per-value summary of a run.
    struct Stats {
        var shape: [Int]
        var dtype: DType?
        var maxAbs: Float = 0      // over finite elements
        var infs = 0
        var negativeInfs = 0
        var nans = 0
        var count = 0
        var nonFinite: Bool { infs > 0 || nans > 0 }

        init(shape: [Int]) { self.shape = shape }

        init?(_ r: RuntimeValue) {
            guard case let .tensor(t) = r, case let .float(a) = t.data else { return nil }
            self.init(shape: t.shape)
            dtype = t.dtype
            count = a.count
            var m: Float = 0, inf = 0, neg = 0, nan = 0
            a.withUnsafeBufferPointer { p in
                for x in p {
                    if x.isFinite { let y = Swift.abs(x); if y > m { m = y } } else if x.isNaN { nan += 1 } else { inf += 1; if x < 0 { neg += 1 } }
                }
            }
            maxAbs = m
            infs = inf
            negativeInfs = neg
            nans = nan
        }

        init?(_ c: ConstValue) {
            guard let t = c.type.tensorType, t.dtype.isFloat, let n = t.elementCount, n <= 1 << 22, let d = c.doubles() else { return nil }
            self.init(shape: t.fixedShape ?? [])
            dtype = t.dtype
            count = n
            for x in d {
                if x.isFinite { maxAbs = Swift.max(maxAbs, Float(Swift.min(Swift.abs(x), Double(Float.greatestFiniteMagnitude)))) } else if x.isNaN { nans += 1 } else { infs += 1; if x < 0 { negativeInfs += 1 } }
            }
        }

        var magnitude: String {
            var s = format(maxAbs)
            if infs > 0 { s += " (\(infs) inf)" }
            if nans > 0 { s += " (\(nans) NaN)" }
            return s
        }
    }

    static func format(_ x: Float) -> String {
        if x == 0 { return "0" }
        if Swift.abs(x) >= 1e5 || Swift.abs(x) < 1e-3 { return String(format: "%.3g", Double(x)) }
        return String(format: "%.6g", Double(x))
    }

    static func freshStates(_ f: Function) throws -> [String: StateBuffer] {
        var states: [String: StateBuffer] = [:]
        for v in f.stateInputs {
            guard let t = v.type.stateWrappedTensor else { continue }
            states[v.name] = try StateBuffer(name: v.name, type: t)
        }
        return states
    }

    static func isConstantOp(_ op: Op) -> Bool { op.type == "const" || op.type.hasPrefix("constexpr_") }

    // MARK: - S = 1 against S = N

    /// Runs the function twice from fresh states — `split` (e.g. a prefill of N−1 tokens, then
    /// one token at S = 1) and `whole` (one call of N tokens) — in fp32 and compares the last row
    /// of `output` of the two last calls. Every op result whose shapes differ only on one axis
    /// (1 in the S = 1 call, N in the other) is compared on its last row along that axis; the
    /// first op (in program order) whose rows differ by more than `tolerance` · max|row| is
    /// named when the output differs (an fp16 output, rounded at the boundary, gets at least
    /// 4e-3 · max|row|: a few fp16 ulps).
    public static func sequenceConsistency(function f: Function, split: RuntimeScenario, whole: RuntimeScenario, output: String,
                                           binding: [String: Int]? = nil, tolerance: Float = 1e-3) throws -> (RuntimeRun, [Finding]) {
        let plan = try ExecutionPlan(function: f, precision: .fp32)
        try split.bind(to: plan)
        guard !split.calls.isEmpty, !whole.calls.isEmpty else {
            throw InterpreterError.unsupported("sequence check needs at least one call per scenario")
        }
        /// Runs every call but the last; returns the last call's inputs.
        func runHead(_ sc: RuntimeScenario, _ states: [String: StateBuffer]) throws -> [String: Tensor] {
            var previous: [String: Tensor]?
            for i in sc.calls.indices.dropLast() { previous = try plan.run(inputs: sc.inputs(i, after: previous), states: states) }
            return sc.inputs(sc.calls.count - 1, after: previous)
        }
        // 1. split: record every float result of the last call.
        var recorded: [ObjectIdentifier: Tensor] = [:]
        var states = try freshStates(f)
        let lastSplit = try runHead(split, states)
        plan.observer = { op, results in
            guard results.count == op.outputs.count else { return }
            for (v, r) in zip(op.outputs, results) {
                if case let .tensor(t) = r, case .float = t.data, t.count <= 1 << 22 { recorded[ObjectIdentifier(v)] = t }
            }
        }
        let outSplit = try plan.run(inputs: lastSplit, states: states)
        plan.observer = nil
        // 2. whole: compare as results come.
        states = try freshStates(f)
        let lastWhole = try runHead(whole, states)
        var compared = 0
        var firstDiff: (op: Op, value: Value, delta: Float, scale: Float, shape: [Int])?
        plan.observer = { op, results in
            guard results.count == op.outputs.count, !isConstantOp(op) else { return }
            for (v, r) in zip(op.outputs, results) {
                guard let a = recorded[ObjectIdentifier(v)], case let .tensor(b) = r, case .float = b.data,
                      let (delta, scale) = lastRowDifference(a, b) else { continue }
                compared += 1
                if firstDiff == nil, !(delta <= tolerance * Swift.max(scale, 1e-3)) {
                    firstDiff = (op, v, delta, scale, b.shape)
                }
            }
        }
        let outWhole = try plan.run(inputs: lastWhole, states: states)
        plan.observer = nil
        guard let a = outSplit[output], let b = outWhole[output], let (delta, scale) = lastRowDifference(a, b) ?? sameShapeDifference(lastRow(a), lastRow(b)) else {
            throw InterpreterError.unsupported("output '\(output)' has no comparable last row (shapes differ beyond the sequence axis)")
        }
        let argA = argmax(lastRow(a)), argB = argmax(lastRow(b))
        let n = b.rank >= 2 ? b.shape[b.rank - 2] : 1
        let diffText = "max |Δ| \(format(delta)) (max |value| \(format(scale)), argmax \(argA) vs \(argB))"
        // An fp16 output is rounded at the function boundary: allow a few fp16 ulps (2^-10 of the
        // largest value each) for sums taken in another order at S=1.
        let outputTolerance = b.dtype == .fp16 ? Swift.max(tolerance, 4e-3) : tolerance
        if delta <= outputTolerance * Swift.max(scale, 1e-3) {
            let run = RuntimeRun(check: "s1_mismatch", function: f.name, precision: "fp32", inputs: "\(split.label) | \(whole.label)", ok: true,
                                 summary: "last row of '\(output)' matches: \(diffText); \(compared) op results compared")
            return (run, [])
        }
        var message = "the last row of '\(output)' differs between S=1 (\(split.label)) and S=\(n) (\(whole.label)) on the same tokens: \(diffText)"
        var ref: Finding.OpRef?
        var shapes = [ShapeNote(output, dtype: b.dtype, shape: b.shape)]
        if let d = firstDiff {
            ref = OpIndex(f).ref(d.op)
            message += "; first op whose last row differs: \(d.op.type) '\(d.op.name)' (value '\(d.value.name)', max |Δ| \(format(d.delta)) of max |value| \(format(d.scale)))"
            shapes.insert(ShapeNote(d.value.name, dtype: d.value.type.tensorType?.dtype, shape: d.shape), at: 0)
        } else {
            message += "; no intermediate result with a sequence axis differs (\(compared) compared): look at state writes and reads"
        }
        let finding = Finding(.error, "s1_mismatch", function: f.name, op: ref, binding: binding, shapes: shapes, message: message,
                              fix: "Something in the graph depends on the call's length instead of cache_offset/position_ids (positions from range(S), a mask built for offset 0, a state window written at a fixed place): derive it from the position inputs.")
        let run = RuntimeRun(check: "s1_mismatch", function: f.name, precision: "fp32", inputs: "\(split.label) | \(whole.label)", ok: false,
                             summary: "last row of '\(output)' differs: \(diffText)")
        return (run, [finding])
    }

    /// (max |a − b_last|, max |b_last|) where `a` has 1 and `b` has N on exactly one axis and the
    /// other dimensions agree; b_last is `b`'s last index on that axis. nil when not comparable.
    static func lastRowDifference(_ a: Tensor, _ b: Tensor) -> (Float, Float)? {
        guard a.rank == b.rank, a.rank > 0 else { return nil }
        let differing = (0..<a.rank).filter { a.shape[$0] != b.shape[$0] }
        guard differing.count == 1, let k = differing.first, a.shape[k] == 1, b.shape[k] > 1 else { return nil }
        let outer = a.shape[..<k].reduce(1, *), inner = a.shape[(k + 1)...].reduce(1, *), n = b.shape[k]
        let fa = a.floats, fb = b.floats
        var delta: Float = 0, scale: Float = 0
        for o in 0..<outer {
            for j in 0..<inner {
                let x = fa[o * inner + j], y = fb[(o * n + n - 1) * inner + j]
                if x.isNaN != y.isNaN || (x.isInfinite || y.isInfinite) && x != y { delta = .infinity; continue }
                if x.isFinite && y.isFinite {
                    delta = Swift.max(delta, Swift.abs(x - y))
                    scale = Swift.max(scale, Swift.abs(y))
                }
            }
        }
        return (delta, scale)
    }

    /// (max |a − b|, max |b|) for tensors of one shape, else nil.
    static func sameShapeDifference(_ a: Tensor, _ b: Tensor) -> (Float, Float)? {
        guard a.shape == b.shape else { return nil }
        var delta: Float = 0, scale: Float = 0
        for (x, y) in zip(a.floats, b.floats) {
            if x.isFinite && y.isFinite {
                delta = Swift.max(delta, Swift.abs(x - y))
                scale = Swift.max(scale, Swift.abs(y))
            } else if !(x == y) {
                delta = .infinity
            }
        }
        return (delta, scale)
    }

    /// The last row along the second-to-last axis ([1, S, V] → [1, 1, V]).
    static func lastRow(_ t: Tensor) -> Tensor {
        guard t.rank >= 2 else { return t }
        let k = t.rank - 2, n = t.shape[k]
        guard n > 1 else { return t }
        let outer = t.shape[..<k].reduce(1, *), inner = t.shape[(k + 1)...].reduce(1, *)
        let f = t.floats
        var out: [Float] = []
        out.reserveCapacity(outer * inner)
        for o in 0..<outer { out += f[((o * n + n - 1) * inner)..<((o * n + n) * inner)] }
        var shape = t.shape
        shape[k] = 1
        return Tensor(t.dtype, shape: shape, floats: out)
    }

    static func argmax(_ t: Tensor) -> Int {
        let f = t.floats
        var best = 0
        for i in f.indices where f[i] > f[best] { best = i }
        return best
    }
}
