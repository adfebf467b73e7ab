import GraphIR

/// The original steps a fused step replaced, kept so the fused kernel can run them op by op
/// when a run-time check fails (a `tile` whose reps only the run shows, a slice that is not a
/// strided view…): the result is then exactly the unfused graph's.
///
/// Operands the steps take from outside are the fused step's own inputs (`externals`, in
/// order), so the plan keeps them alive until the fused step; values made inside stay local.
struct FusedFallback {
    enum Ref {
        case external(Int)
        case local(Int)
    }

    struct LocalStep {
        let op: Op
        let kernel: Kernel
        let inputs: [(name: String, refs: [Ref])]
        let outputs: [Int]
    }

    let steps: [LocalStep]
    /// The local value the fused step returns (the last step's first output).
    let result: Int
    /// Plan refs of the external operands, in order (the fused step's inputs).
    let externals: [ExecutionPlan.Ref]

    /// Builds the fallback of `steps` (in plan order; the last one is the fused op). The
    /// `leading` refs become externals 0..<leading.count, in that order (the fused kernel's
    /// own operands). Returns nil when a step has no kernel or has nested blocks.
    init?(_ steps: [ExecutionPlan.Step], leading: [ExecutionPlan.Ref] = []) {
        var local: [Int: Int] = [:]
        var ext = leading
        func extIndex(_ r: ExecutionPlan.Ref) -> Int {
            if let i = ext.firstIndex(where: { FusedFallback.same($0, r) }) { return i }
            ext.append(r)
            return ext.count - 1
        }
        var out: [LocalStep] = []
        for st in steps {
            guard let k = st.kernel, st.blocks.isEmpty else { return nil }
            let ins = st.inputs.map { (name, refs) in
                (name: name, refs: refs.map { r -> Ref in
                    if case let .slot(s) = r, let l = local[s] { return .local(l) }
                    return .external(extIndex(r))
                })
            }
            var outs: [Int] = []
            for s in st.outputSlots {
                let l = local.count
                local[s] = l
                outs.append(l)
            }
            out.append(LocalStep(op: st.op, kernel: k, inputs: ins, outputs: outs))
        }
        guard let last = out.last?.outputs.first else { return nil }
        self.steps = out
        self.result = last
        self.externals = ext
    }

    /// Ops that take a state operand as a state.
    static let stateOps: Set<String> = ["read_state", "write_state", "coreml_update_state"]

    static func same(_ a: ExecutionPlan.Ref, _ b: ExecutionPlan.Ref) -> Bool {
        switch (a, b) {
        case let (.slot(x), .slot(y)): return x == y
        case let (.constant(x), .constant(y)): return x == y
        default: return false
        }
    }

    /// Runs the steps on the external values (`values[i]` for `externals[i]`), with the
    /// plan's output typing (each result takes its op's declared dtype; fp16 outputs rounded in
    /// `fp16` precision).
    /// - Throws: `InterpreterError.opFailed` naming the op of the chain that failed.
    func run(_ values: [RuntimeValue], precision: Precision, activations: ActivationQuantization) throws -> RuntimeValue {
        var local = [RuntimeValue?](repeating: nil, count: steps.reduce(0) { $0 + $1.outputs.count })
        for st in steps {
            var names: [String] = [], bounds = [0], flat: [RuntimeValue] = []
            for (name, refs) in st.inputs {
                names.append(name)
                for r in refs {
                    switch r {
                    case let .external(i):
                        // A layer view of a carried cache (``CarriedCacheFusion``) read by a data op: its values.
                        if case let .state(s) = values[i], !FusedFallback.stateOps.contains(st.op.type) {
                            flat.append(.tensor(s.tensor()))
                        } else {
                            flat.append(values[i])
                        }
                    case let .local(l):
                        guard let v = local[l] else { throw KernelError("fused fallback: value read before it was made") }
                        flat.append(v)
                    }
                }
                bounds.append(flat.count)
            }
            let inv = KernelInvocation(op: st.op, precision: precision, activations: activations,
                                       names: names, bounds: bounds, flat: flat)
            // An op that fails here is named itself (e.g. the mask `add` of shapes that do not
            // broadcast), not the fused step that stands for the chain (its last op).
            let results: [RuntimeValue]
            do { results = try st.kernel(inv) } catch let e as KernelError {
                throw InterpreterError.opFailed(op: st.op.name, type: st.op.type, reason: e.reason + ExecutionPlan.origin(of: st.op, reason: e.reason))
            }
            guard results.count == st.outputs.count else {
                throw KernelError("fused fallback: \(st.op.type) gave \(results.count) results, declares \(st.outputs.count)")
            }
            for (i, (r, l)) in zip(results, st.outputs).enumerated() {
                var r = r
                if case let .quantized(q) = r { r = .tensor(q.dequantize()) }
                if case var .tensor(t) = r, let dt = st.op.outputs[i].type.tensorType?.dtype {
                    t.dtype = dt
                    if precision == .fp16 { Rounding.toStorage(&t) }
                    r = .tensor(t)
                }
                local[l] = r
            }
        }
        guard let v = local[result] else { throw KernelError("fused fallback: no result") }
        if let pool = BufferPool.current { FusedFallback.recycle(local, result: v, operands: values, into: pool) }
        return v
    }

    /// Gives the storage of the intermediate values back to the plan's pool, as the plan does
    /// for released slots: without it each fallback call took buffers from the pool and freed
    /// them, so the next ops of that size allocated (and page-faulted) fresh ones (the BERT
    /// encoder's attention: 4 scores-sized buffers per layer and call). Storage shared with the
    /// result or an operand stays out; a buffer is given back once. A recycled buffer still
    /// referenced elsewhere is copied on write by whoever takes it (never shared writes).
    static func recycle(_ local: [RuntimeValue?], result: RuntimeValue, operands: [RuntimeValue], into pool: BufferPool) {
        var skip = Set<UnsafeRawPointer>()
        for x in operands + [result] {
            if case let .tensor(t) = x, let b = BufferPool.base(t.data) { skip.insert(b) }
        }
        for case let .tensor(t)? in local {
            guard let b = BufferPool.base(t.data), skip.insert(b).inserted else { continue }
            pool.recycle(t.data)
        }
    }
}

/// What became of one fusion candidate, for `--profile` (``ExecutionPlan/fusionReport()``).
public final class FusionSite {
    /// `attention` (softmax · matmul chain), `scaled_dot_product_attention`, `state_write`.
    public let kind: String
    /// The op the site is named after (the attention's output op, the `write_state`).
    public let op: String
    /// Nil when fused; else why not (one short reason).
    public let reason: String?
    /// Calls of the fused step, and how many of them ran the original ops (with why).
    public internal(set) var fusedCalls = 0
    public internal(set) var fallbacks: [String: Int] = [:]

    init(kind: String, op: String, reason: String?) {
        self.kind = kind
        self.op = op
        self.reason = reason
    }
}
