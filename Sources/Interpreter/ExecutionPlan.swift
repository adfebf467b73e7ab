import Dispatch
import Foundation
import GraphIR

/// A function resolved for execution: every op bound to its kernel once, values numbered into
/// slots, each slot released after its last use, constants (and `constexpr_*` ops) evaluated
/// once on first use and kept for the life of the plan.
///
/// Tensor storage is recycled through the plan's ``BufferPool``: a released value's array goes
/// back to the pool and the next kernel output of the same type and size reuses it, so calling
/// the plan again with the same shapes allocates no tensor storage per op.
///
/// Control flow (`cond`, `while_loop`) runs nested plans of its blocks.
///
/// A plan may be run from several threads; the runs take turns.
public final class ExecutionPlan {
    public let function: Function
    public let precision: Precision
    /// Whether int8-weight products quantize their activations (see ``ActivationQuantization``;
    /// only in `fp32` precision, else ``ActivationQuantization/exact``).
    public let activations: ActivationQuantization
    /// Recycled kernel output buffers (see ``BufferPool``); `pool.stats` counts hits and misses.
    public let pool = BufferPool()
    /// Held for the whole of ``run(inputs:states:)`` and ``recycle(_:)``: the pool and the
    /// constant caches are changed by every run, so runs of one plan from several threads take
    /// turns (each run's kernels still use every core).
    private let runLock = NSLock()

    /// One op bound to its kernel (a class: the run loop hands steps around by reference, not
    /// by copying their arrays and closure).
    final class Step {
        let op: Op
        let kernel: Kernel?
        /// Per input: (name, slot or constant index per operand).
        let inputs: [(name: String, refs: [Ref])]
        let outputSlots: [Int]
        /// Slots whose last use is this step (freed after it runs).
        let release: [Int]
        /// Constant-only op: evaluated once and cached.
        let isConstant: Bool
        /// Nested block plans (control flow).
        let blocks: [BlockPlan]
        /// A KV write fused by ``StateUpdateFusion`` (no outputs; updates a state in place).
        let fusedStateWrite: Bool
        /// Input names and the offsets of their operands in a flat list (``KernelInvocation``).
        let inputNames: [String]
        let inputBounds: [Int]
        /// Precomputed for the run loop: a `const` op, and the dtype of each output.
        let isConstOp: Bool
        let outputDTypes: [DType?]
        /// Every operand of every input, flat, in ``inputNames`` order (the run loop resolves
        /// these into the invocation's values without walking the nested input lists).
        let operands: [Ref]
        /// `--profile` accumulators of this step (folded into ``ExecutionPlan/profile`` by
        /// op type at the end of each run: no dictionary update per op).
        @exclusivity(unchecked) var profileNanos: UInt64 = 0
        @exclusivity(unchecked) var profileCalls = 0
        /// The weight of the next `linear`, to prefetch once this step is done
        /// (``ExecutionPlan/installWeightPrefetch()``).
        var prefetchAfter: Ref?

        init(op: Op, kernel: Kernel?, inputs: [(name: String, refs: [Ref])], outputSlots: [Int], release: [Int],
             isConstant: Bool, blocks: [BlockPlan], fusedStateWrite: Bool = false) {
            self.op = op
            self.kernel = kernel
            self.inputs = inputs
            self.outputSlots = outputSlots
            self.release = release
            self.isConstant = isConstant
            self.blocks = blocks
            self.fusedStateWrite = fusedStateWrite
            isConstOp = op.type == "const"
            outputDTypes = op.outputs.map { $0.type.tensorType?.dtype }
            operands = inputs.flatMap(\.refs)
            var b = [0]
            for (_, refs) in inputs { b.append(b[b.count - 1] + refs.count) }
            (inputNames, inputBounds) = Step.interned(inputs.map(\.name), b)
        }

        /// Thousands of steps share a few dozen name lists: one stored copy of each.
        private static let internLock = NSLock()
        nonisolated(unsafe) private static var namesTable: [[String]: [String]] = [:]
        nonisolated(unsafe) private static var boundsTable: [[Int]: [Int]] = [:]
        private static func interned(_ names: [String], _ bounds: [Int]) -> ([String], [Int]) {
            internLock.lock()
            defer { internLock.unlock() }
            let n = namesTable[names] ?? names
            namesTable[names] = n
            let b = boundsTable[bounds] ?? bounds
            boundsTable[bounds] = b
            return (n, b)
        }
    }

    enum Ref {
        case slot(Int)
        case constant(Int)
    }

    final class BlockPlan {
        var steps: [Step] = []
        /// ``steps`` without the constant-only ones whose outputs are cached (set after the
        /// first run that cached them all): a decode step then walks its ~800 running steps, not
        /// also the ~2,000 `const` ops it skips (each a Step, its output list and a cache entry
        /// to load, out of cache since the last token's weights went through).
        var running: [Step]?
        /// The records of each running step to prefetch (``ExecutionPlan/buildStepPrefetch(_:)``).
        var prefetch: StepPrefetchTable?
        var inputSlots: [Int] = []
        var outputRefs: [Ref] = []
    }

    var slotOf: [ObjectIdentifier: Int] = [:]
    var slotCount = 0
    @exclusivity(unchecked) var constants: [ConstValue] = []
    @exclusivity(unchecked) var constantCache: [RuntimeValue?] = []
    /// Cached outputs of constant-only ops, by output slot.
    @exclusivity(unchecked) var constantOpCache: [RuntimeValue?] = []
    let root = BlockPlan()
    var inputSlots: [Int] = []
    /// Inputs bound once for the plan's life (``bind(_:to:)``, StaticInputBinding.swift).
    var boundInputs: [String: RuntimeValue] = [:]
    /// Const outputs kept as fp16 views of the weight file (see ``findHalfViewConstants()``).
    @exclusivity(unchecked) var halfViewSlots = Set<Int>()
    /// Operand constants that are the `scale` of `constexpr_blockwise_shift_scale` or the `x` of
    /// `gather` (kept as views when they are fp16 blobs).
    @exclusivity(unchecked) var halfViewConstants = Set<Int>()
    /// Outputs whose rows can be selected (``canSelectRow(of:)``), and the selected row of each.
    var rowSelectable = Set<String>()
    var selectedRows: [String: Int] = [:]
    /// Slots read by at least one consumer that cannot take a ``QuantizedTensor``.
    var needsDense = Set<Int>()
    /// ``needsDense`` by slot (built once the plan is complete; read by the run loop).
    @exclusivity(unchecked) var needsDenseSlot: [Bool] = []

    /// Steps fused at plan time, by kind (`attention`, `state_write`), for tests and `--profile`.
    public var fusions: [String: Int] {
        var out: [String: Int] = [:]
        func walk(_ p: BlockPlan) {
            for st in p.steps {
                if st.fusedStateWrite { out["state_write", default: 0] += 1 }
                if AttentionFusion.isFused(st) { out["attention", default: 0] += 1 }
                if RowwiseFusion.isFused(st) { out[RowwiseFusion.kind, default: 0] += 1 }
                for b in st.blocks { walk(b) }
            }
        }
        walk(root)
        return out
    }

    /// Explicit KV caches run in place (input name → output name, ``CarriedCacheFusion``): the
    /// input's buffer comes in `states` of ``run(inputs:states:)`` and the output is not returned.
    public private(set) var carried: [String: String] = [:]
    private var carriedOutputs = Set<String>()

    /// Every fusion candidate of the top-level block: fused (with its run-time calls and
    /// fallbacks) or why not (see ``fusionReport()``).
    public private(set) var fusionSites: [FusionSite] = []

    /// When set, time spent per op type (seconds, calls) is accumulated here.
    @exclusivity(unchecked) public var profile: [String: (seconds: Double, calls: Int)]? {
        didSet { if profile?.isEmpty ?? true { profileRunSeconds = 0 } }
    }
    /// While ``profile`` is set: wall time of whole ``run(inputs:states:)`` calls (input checks,
    /// step bookkeeping, output conversion and the kernels), so the report can show the share
    /// spent outside the kernels.
    public private(set) var profileRunSeconds: Double = 0

    /// When set, called after every executed step with its op and results (as stored: fp16-rounded
    /// in `fp16` precision). A fused step reports the op whose outputs it produces; constant ops
    /// are reported on the run that first evaluates them. Used by `forge-ir diagnose`.
    @exclusivity(unchecked) public var observer: ((Op, [RuntimeValue]) -> Void)?

    /// When set, called with the name and value of every op output the plan was built to observe
    /// (``init(function:precision:observing:)``), right after the op runs. The tensor is the
    /// plan's own buffer, not a copy: an observer that keeps it shares the storage, and the
    /// plan's buffer pool then copies before reusing it (copy-on-write), so a kept tensor never
    /// changes. Float values are as held: fp16-typed values are fp16-rounded in `fp16`
    /// precision, fp32 in `fp32` precision (Core ML's CPU path). Compressed constants (results
    /// of `constexpr_*` ops named explicitly) are reported dequantized (a copy). Nil by default:
    /// a plan without it runs exactly as before (one nil check per op).
    @exclusivity(unchecked) public var valueObserver: ((_ name: String, _ value: Tensor) -> Void)?
    /// What the plan was built to observe (see ``ObservedValues``).
    public let observing: ObservedValues
    /// Output slots of observed values (``observing`` as slots; empty for `.all` and `.none`).
    var observedSlots = Set<Int>()

    /// `--profile` text: op types by total time.
    public func profileReport() -> String {
        guard let profile else { return "" }
        let total = profile.values.reduce(0) { $0 + $1.seconds }
        func pad(_ s: String, _ w: Int, left: Bool = false) -> String {
            let fill = String(repeating: " ", count: max(0, w - s.count))
            return left ? s + fill : fill + s
        }
        let width = max(36, (profile.keys.map(\.count).max() ?? 0) + 1)
        var out = pad("op", width, left: true) + pad("seconds", 10) + pad("calls", 9) + pad("share", 8) + "\n"
        for (op, v) in profile.sorted(by: { $0.value.seconds > $1.value.seconds }) {
            out += pad(op, width, left: true) + pad(String(format: "%.4f", v.seconds), 10) + pad("\(v.calls)", 9)
                + pad(String(format: "%.1f%%", total > 0 ? v.seconds / total * 100 : 0), 8) + "\n"
        }
        if profileRunSeconds > 0 {
            let outside = max(0, profileRunSeconds - total)
            out += String(format: "run calls %.4f s: kernels %.4f s, outside kernels (interpreter) %.4f s = %.1f%%\n",
                          profileRunSeconds, total, outside, outside / profileRunSeconds * 100)
        }
        return out + fusionReport()
    }

    /// Builds the plan.
    /// - Parameters:
    ///   - observing: the op outputs ``valueObserver`` will see. Execution-level
    ///     fusions (fused attention, in-place KV writes) remove intermediate values; a fusion
    ///     that would remove an observed value is not applied, so every observed value is
    ///     reported (`.all` disables those fusions; `.none`, the default, keeps them all).
    ///   - activations: (fp32 precision only; ignored in fp16) lets the products with int8
    ///     block-quantized weights quantize their activation rows per block of 32 to int8
    ///     (llama.cpp's Q8_0 × Q8_0) or int16 (``ActivationQuantization``; not Core ML's numerics).
    ///   - carrying: explicit KV caches the caller carries from call to call (input name →
    ///     the output it feeds back, as ``Generation/Generator`` does): the pairs whose graph
    ///     matches ``CarriedCacheFusion`` are run in place on a buffer the caller passes in
    ///     `states` under the input's name (the input's shape; fp32 storage keeps the results
    ///     bit-identical to the unfused graph) and their output is not returned (see
    ///     ``carried``). Other pairs run as before. A call that fails leaves the buffer with
    ///     the layers written so far.
    /// - Throws: `InterpreterError.unsupportedOps` listing every op type without a kernel.
    public init(function: Function, precision: Precision = .fp32, observing: ObservedValues = .none,
                activations: ActivationQuantization = .exact, carrying: [String: String] = [:]) throws {
        self.function = function
        self.precision = precision
        self.observing = observing
        self.activations = precision == .fp32 ? activations : .exact
        var missing = Set<String>()
        inputSlots = function.inputs.map { newSlot($0) }
        try build(function.body, into: root, missing: &missing)
        guard missing.isEmpty else {
            throw InterpreterError.unsupportedOps(function: function.name, ops: missing.sorted())
        }
        let protected = protectedSlots()
        if observing != .all {
            let consts = constants
            fusionSites += AttentionFusion.apply(root, useCount: useCounts(root), protected: protected,
                                                 constant: { consts.indices.contains($0) ? consts[$0] : nil },
                                                 refuse: precision == .fp32 ? nil : "fp16 precision keeps the per-op rounding")
            fusionSites += StateUpdateFusion.apply(root, useCount: useCounts(root), protected: protected)
            if precision == .fp32 && ExecutionPlan.rowwiseFusion {
                let consts = constants
                fusionSites += RowwiseFusion.apply(root, useCount: useCounts(root), protected: protected,
                                                   constant: { consts.indices.contains($0) ? consts[$0] : nil })
            }
            if !carrying.isEmpty {
                let consts = constants
                let r = CarriedCacheFusion.apply(root, function: function, inputSlots: inputSlots, carrying: carrying,
                                                 useCount: useCounts(root), protected: protected,
                                                 constant: { consts.indices.contains($0) ? consts[$0] : nil }, precision: precision)
                fusionSites += r.sites
                carried = r.fused
                carriedOutputs = Set(r.fused.values)
            }
        }
        computeReleases(root, keep: Set(root.outputRefs.compactMap { if case let .slot(s) = $0 { return s } else { return nil } }))
        installRowSelection(useCount: useCounts(root))
        installWeightPrefetch()
        findHalfViewConstants()
        constantCache = Array(repeating: nil, count: constants.count)
        constantOpCache = Array(repeating: nil, count: slotCount)
        needsDenseSlot = (0..<slotCount).map { needsDense.contains($0) }
        slotOf = [:]  // only needed while building
        constantSlots = []
    }

    /// fp16 blob constants read only as the `scale` of `constexpr_blockwise_shift_scale` or as
    /// the table of a `gather` (e.g. RoPE cos/sin tables) stay views of the mapped weight file
    /// (``RuntimeValue/halfBlob``) instead of fp32 copies (const ops here; operand constants are
    /// marked in ``build(_:into:missing:)``).
    func findHalfViewConstants() {
        var readers: [Int: [String]] = [:]
        func walk(_ p: BlockPlan) {
            for st in p.steps {
                for (name, refs) in st.inputs {
                    for r in refs { if case let .slot(s) = r { readers[s, default: []].append(st.op.type + "." + name) } }
                }
                for b in st.blocks { walk(b) }
            }
            for r in p.outputRefs { if case let .slot(s) = r { readers[s, default: []].append("output") } }
        }
        walk(root)
        for st in root.steps where st.op.type == "const" && st.outputSlots.count == 1 {
            guard let val = st.op.attribute("val"), case .blob = val.payload, val.type.tensorType?.dtype == .fp16,
                  let r = readers[st.outputSlots[0]], !r.isEmpty,
                  r.allSatisfy({ $0 == "constexpr_blockwise_shift_scale.scale" || $0 == "gather.x" || $0 == "linear.weight" }) else { continue }
            halfViewSlots.insert(st.outputSlots[0])
        }
    }

    /// How many times each slot is read (operands in every block, and block outputs).
    func useCounts(_ plan: BlockPlan) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for s in slotsRead(plan) { counts[s, default: 0] += 1 }
        return counts
    }

    func newSlot(_ v: Value) -> Int {
        let s = slotCount
        slotCount += 1
        slotOf[ObjectIdentifier(v)] = s
        return s
    }

    private var constantSlots = Set<Int>()

    func build(_ block: Block, into plan: BlockPlan, missing: inout Set<String>) throws {
        plan.inputSlots = block.inputs.map { newSlot($0) }
        var steps: [Step] = []
        for op in block.operations {
            let isControl = OpRegistry.schema(op.type)?.isControlFlow ?? false
            var kernel = KernelRegistry.kernel(for: op.type)
            if op.type == "gather", let base = kernel { kernel = QuantizedOps.gatherWrapping(base) }
            if kernel == nil && op.type != "const" && !isControl { missing.insert(op.type) }
            var inputs: [(String, [Ref])] = []
            var allConstant = op.type != "const"
            for input in op.inputs {
                var refs: [Ref] = []
                for operand in input.operands {
                    switch operand {
                    case let .value(v):
                        guard let s = slotOf[ObjectIdentifier(v)] else {
                            throw InterpreterError.opFailed(op: op.name, type: op.type, reason: "input '\(input.name)' uses '\(v.name)' before it is defined")
                        }
                        refs.append(.slot(s))
                        if !QuantizedConsumers.handles(op: op.type, input: input.name) { needsDense.insert(s) }
                        if !constantSlots.contains(s) { allConstant = false }
                    case let .constant(c):
                        constants.append(c)
                        refs.append(.constant(constants.count - 1))
                        if OpRegistry.schema(op.type)?.halfViewInputs.contains(input.name) == true {
                            halfViewConstants.insert(constants.count - 1)
                        }
                    }
                }
                inputs.append((input.name, refs))
            }
            // iOS16 constexpr ops carry their parameters as attributes.
            if OpRegistry.schema(op.type)?.isConstant == true && op.type != "const" {
                for a in op.attributes where a.name != "name" {
                    constants.append(a.value)
                    inputs.append((a.name, [.constant(constants.count - 1)]))
                }
            }
            var nested: [BlockPlan] = []
            for b in op.blocks {
                let bp = BlockPlan()
                try build(b, into: bp, missing: &missing)
                nested.append(bp)
            }
            if !op.blocks.isEmpty { allConstant = false }
            let isConst = op.type == "const" || (allConstant && (OpRegistry.schema(op.type)?.isConstant ?? false))
            let outs = op.outputs.map { newSlot($0) }
            if isConst { for s in outs { constantSlots.insert(s) } }
            steps.append(Step(op: op, kernel: kernel, inputs: inputs, outputSlots: outs, release: [], isConstant: isConst, blocks: nested))
        }
        plan.steps = steps
        plan.outputRefs = block.outputs.map { v in
            if let s = slotOf[ObjectIdentifier(v)] { return .slot(s) }
            return .slot(-1)
        }
    }

    /// Marks, for each step, the slots whose last reader it is (function inputs, constants and
    /// block outputs are kept).
    func computeReleases(_ plan: BlockPlan, keep: Set<Int>) {
        var lastUse: [Int: Int] = [:]
        for (i, step) in plan.steps.enumerated() {
            for (_, refs) in step.inputs { for r in refs { if case let .slot(s) = r { lastUse[s] = i } } }
            // Values read inside nested blocks count as used by the enclosing op.
            for bp in step.blocks { for s in slotsRead(bp) { lastUse[s] = i } }
        }
        var release = [[Int]](repeating: [], count: plan.steps.count)
        for (s, i) in lastUse where !keep.contains(s) && !constantSlots.contains(s) && !inputSlots.contains(s) {
            release[i].append(s)
        }
        plan.steps = plan.steps.enumerated().map { i, st in
            Step(op: st.op, kernel: st.kernel, inputs: st.inputs, outputSlots: st.outputSlots, release: release[i],
                 isConstant: st.isConstant, blocks: st.blocks, fusedStateWrite: st.fusedStateWrite)
        }
    }

    func slotsRead(_ plan: BlockPlan) -> [Int] {
        var out: [Int] = []
        for st in plan.steps {
            for (_, refs) in st.inputs { for r in refs { if case let .slot(s) = r { out.append(s) } } }
            for b in st.blocks { out += slotsRead(b) }
        }
        for r in plan.outputRefs { if case let .slot(s) = r { out.append(s) } }
        return out
    }

    // MARK: - running

    /// Runs the function.
    /// - Parameters:
    ///   - inputs: one tensor per non-state input, by name.
    ///   - states: one buffer per state input, by name (updated in place).
    /// - Returns: the function outputs by name; fp16 outputs are rounded to fp16.
    /// - Throws: `InterpreterError` for missing/unexpected/ill-shaped inputs or states, or an op failure.
    public func run(inputs: [String: Tensor], states: [String: StateBuffer] = [:]) throws -> [String: Tensor] {
        runLock.lock()
        defer { runLock.unlock() }
        let runStart = profile != nil ? DispatchTime.now().uptimeNanoseconds : 0
        defer { if profile != nil { profileRunSeconds += Double(DispatchTime.now().uptimeNanoseconds - runStart) / 1e9 } }
        var slots = [RuntimeValue?](repeating: nil, count: slotCount)
        let known = function.inputs.map(\.name)
        for name in inputs.keys where !known.contains(name) {
            throw InterpreterError.unexpectedInput(function: function.name, name: name, known: known.filter { n in !function.stateInputs.contains { $0.name == n } })
        }
        for (v, slot) in zip(function.inputs, inputSlots) {
            if let st = v.type.stateWrappedTensor {
                guard let buf = states[v.name] else {
                    throw InterpreterError.badState(function: function.name, name: v.name, reason: "not provided (expected \(v.type))")
                }
                guard buf.type.dtype == st.dtype, let shape = st.fixedShape, buf.shape == shape else {
                    throw InterpreterError.badState(function: function.name, name: v.name, reason: "buffer is \(buf.type), function expects \(st)")
                }
                slots[slot] = .state(buf)
                continue
            }
            if carried[v.name] != nil {
                guard inputs[v.name] == nil, let buf = states[v.name] else {
                    throw InterpreterError.badState(function: function.name, name: v.name,
                                                    reason: "a carried cache: pass its buffer in states, not as an input")
                }
                guard buf.isMapped, buf.shape == v.type.tensorType?.fixedShape else {
                    throw InterpreterError.badState(function: function.name, name: v.name, reason: "buffer is \(buf.type), function expects \(v.type)")
                }
                slots[slot] = .state(buf)
                continue
            }
            if inputs[v.name] == nil, let b = boundInputs[v.name] {
                slots[slot] = b
                continue
            }
            guard let t = inputs[v.name] else {
                throw InterpreterError.missingInput(function: function.name, name: v.name, expected: "\(v.type)")
            }
            try InputCheck.check(t, against: v, function: function.name)
            var tt = t
            if let dt = v.type.tensorType?.dtype {
                // Float data for an fp16 input is rounded to fp16, as Core ML converts it.
                let round = dt == .fp16 && tt.dtype != .fp16
                tt.dtype = dt
                if round { Rounding.toStorage(&tt) }
            }
            slots[slot] = .tensor(tt)
            pool.pin(.tensor(tt), forRun: true)
        }
        defer { pool.endRun() }
        try pool.installed { try execute(root, slots: &slots) }
        if profile != nil { foldProfile(root) }
        var out: [String: Tensor] = [:]
        for (v, ref) in zip(function.outputs, root.outputRefs) where !carriedOutputs.contains(v.name) {
            var t = try resolve(ref, slots: slots).dense()
            if let dt = v.type.tensorType?.dtype { t.dtype = dt }
            Rounding.toStorage(&t)
            out[v.name] = t
        }
        return out
    }

    @inline(__always)
    func resolve(_ ref: Ref, slots: [RuntimeValue?]) throws -> RuntimeValue {
        switch ref {
        case let .slot(s):
            if s >= 0, let v = slots[s] { return v }
            if s >= 0, let v = constantOpCache[s] { return v }
            throw InterpreterError.unsupported("internal: value slot \(s) read before it was computed")
        case let .constant(i):
            if let v = constantCache[i] { return v }
            let v = try (halfViewConstants.contains(i) ? ConstConversion.halfView(constants[i]) : nil)
                ?? ConstConversion.runtimeValue(constants[i])
            constantCache[i] = v
            pool.pin(v, forRun: false)
            return v
        }
    }

    func execute(_ plan: BlockPlan, slots: inout [RuntimeValue?]) throws {
        // One operand list for every step (emptied, its storage kept, once the kernel is done).
        var flat: [RuntimeValue] = []
        flat.reserveCapacity(16)
        let profiling = profile != nil
        let roundAll = precision == .fp16
        let observer = self.observer, valueObserver = self.valueObserver
        let list = plan.running ?? plan.steps
        let prefetch = plan.running != nil ? plan.prefetch : nil
        for index in list.indices {
            let step = list[index]
            if let prefetch {
                let base = slots.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
                prefetch.issue(step: index + StepPrefetchTable.distance, slotBase: base)
            }
            if step.isConstant, step.outputSlots.isEmpty || constantOpCache[step.outputSlots[0]] != nil {
                continue
            }
            var results: [RuntimeValue]
            do {
                if step.isConstOp {
                    guard let val = step.op.attribute("val") else { throw KernelError("const without val") }
                    if halfViewSlots.contains(step.outputSlots[0]), let view = try ConstConversion.halfView(val) {
                        results = [view]
                    } else {
                        results = [try ConstConversion.runtimeValue(val)]
                    }
                } else if !step.blocks.isEmpty {
                    results = try ControlFlow.run(step, plan: self, slots: &slots)
                } else {
                    // A control-flow op that lost its blocks has neither blocks nor a kernel.
                    guard let kernel = step.kernel else {
                        throw KernelError(OpRegistry.schema(step.op.type)?.isControlFlow == true
                                          ? "\(step.op.type) has no nested blocks to run" : "no kernel for \(step.op.type)")
                    }
                    for r in step.operands { flat.append(try resolve(r, slots: slots)) }
                    // Emptied in place (`removeAll(keepingCapacity:)` goes through `replaceSubrange`).
                    defer { while flat.popLast() != nil {} }
                    if pool.tracking { pool.currentOp = step.op.type }
                    if profiling {
                        let t0 = DispatchTime.now().uptimeNanoseconds
                        results = try invoke(kernel, step, flat)
                        step.profileNanos &+= DispatchTime.now().uptimeNanoseconds &- t0
                        step.profileCalls &+= 1
                    } else {
                        results = try invoke(kernel, step, flat)
                    }
                    if step.prefetchAfter != nil { prefetchWeight(after: step, slots: slots) }
                }
            } catch let e as KernelError {
                throw InterpreterError.opFailed(op: step.op.name, type: step.op.type, reason: e.reason + ExecutionPlan.origin(of: step.op, reason: e.reason))
            }
            guard results.count == step.outputSlots.count else {
                throw InterpreterError.opFailed(op: step.op.name, type: step.op.type, reason: "kernel returned \(results.count) outputs, op declares \(step.outputSlots.count)")
            }
            for i in 0..<results.count {
                let s = step.outputSlots[i]
                // Moved out of the results (not copied), so rounding below writes in place.
                var r = RuntimeValue.list([])
                swap(&r, &results[i])
                if case let .quantized(q) = r, s < needsDenseSlot.count ? needsDenseSlot[s] : needsDense.contains(s) {
                    r = .tensor(q.dequantize())
                }
                if let dt = step.outputDTypes[i], case .tensor(var t) = r {
                    let round = roundAll || step.isConstant
                    if t.dtype != dt || round {
                        r = .list([])
                        t.dtype = dt
                        if round { Rounding.toStorage(&t) }
                        r = .tensor(t)
                    }
                }
                if step.isConstant { constantOpCache[s] = r; pool.pin(r, forRun: false) } else { pool.noteProduced(r, by: step.op.type); slots[s] = r }
            }
            if let observer { observer(step.op, step.outputSlots.compactMap { slots[$0] ?? constantOpCache[$0] }) }
            if let valueObserver { report(step, slots: slots, to: valueObserver) }
            for s in step.release {
                // Moved out of the slot (no copy, no extra retain/release pair).
                var v: RuntimeValue? = nil
                swap(&v, &slots[s])
                if let v { pool.release(v) }
            }
        }
        if plan.running == nil {
            plan.running = plan.steps.filter { !($0.isConstant && ($0.outputSlots.isEmpty || constantOpCache[$0.outputSlots[0]] != nil)) }
            buildStepPrefetch(plan)
        }
    }

    /// Runs `kernel` on the step's resolved operands (the invocation lives only inside this
    /// call, so `flat` is uniquely held again when it returns and is emptied in place).
    @inline(__always)
    private func invoke(_ kernel: Kernel, _ step: Step, _ flat: [RuntimeValue]) throws -> [RuntimeValue] {
        try kernel(KernelInvocation(op: step.op, precision: precision, activations: activations, names: step.inputNames,
                                    bounds: step.inputBounds, flat: flat, outputDTypes: step.outputDTypes))
    }

    /// Adds the steps' `--profile` accumulators into ``profile`` by op type and clears them.
    func foldProfile(_ plan: BlockPlan) {
        for st in plan.steps {
            if st.profileCalls > 0 {
                let old = profile?[st.op.type] ?? (0, 0)
                profile?[st.op.type] = (old.seconds + Double(st.profileNanos) / 1e9, old.calls + st.profileCalls)
                st.profileNanos = 0
                st.profileCalls = 0
            }
            for b in st.blocks { foldProfile(b) }
        }
    }

    /// Gives the storage of outputs returned by ``run(inputs:states:)`` back to the plan once
    /// the caller is done with them (optional: a driver that calls the plan in a loop, such as
    /// the generator, uses it so even the outputs are not allocated again).
    public func recycle(_ outputs: [String: Tensor]) {
        runLock.lock()
        defer { runLock.unlock() }
        for t in outputs.values { pool.recycle(t.data) }
    }
}

/// Checks a given input tensor against the function's declared input type: dtype, rank,
/// fixed dims, and flexible dims against their RangeDim bounds or EnumeratedShapes values.
public enum InputCheck {
    public static func check(_ t: Tensor, against v: Value, function: String) throws {
        try check(dtype: t.dtype, shape: t.shape, against: v, function: function)
    }

    /// The same check for data of `dtype` and `shape` (a mapped static input, before binding).
    public static func check(dtype: DType, shape: [Int], against v: Value, function: String) throws {
        guard let tt = v.type.tensorType else {
            throw InterpreterError.badInput(function: function, name: v.name, reason: "the function takes \(v.type), which cannot be given as a tensor")
        }
        func bad(_ r: String) -> InterpreterError { .badInput(function: function, name: v.name, reason: r) }
        let compatible: Bool
        if tt.dtype.isFloat { compatible = dtype.isFloat } else if tt.dtype == .bool { compatible = dtype == .bool } else { compatible = dtype.isInteger }
        guard compatible else { throw bad("dtype \(dtype.rawValue), expected \(tt.dtype.rawValue)") }
        guard shape.count == tt.rank else { throw bad("shape \(shape) has rank \(shape.count), expected \(tt) (rank \(tt.rank))") }
        for (axis, (n, d)) in zip(shape, tt.shape).enumerated() {
            switch d {
            case let .fixed(f):
                guard n == f else { throw bad("dimension \(axis) is \(n), expected \(f) (shape \(tt))") }
            case let .symbol(sym):
                switch sym.constraint {
                case let .range(lo, hi):
                    guard n >= lo, hi.map({ n <= $0 }) ?? true else {
                        throw bad("dimension \(axis) is \(n), outside \(sym) (shape \(shape))")
                    }
                case let .enumerated(values):
                    guard values.contains(n) else { throw bad("dimension \(axis) is \(n), not one of the enumerated sizes \(values)") }
                case .unconstrained: break
                }
            case .unknown, .variadic: break
            }
        }
    }
}

extension ExecutionPlan {
    /// For an index error (`index … out of range`), where the op's indices came from: the
    /// function inputs they derive from, through the model's own ops (the `cast` a converter
    /// inserts, its negative-index `select`…), e.g.
    /// ` (indices derive from input 'x' through cast 'ids')`; empty otherwise.
    static func origin(of op: Op, reason: String) -> String {
        guard reason.contains("out of range") else { return "" }
        for name in ["indices", "index", "x"] {
            guard let start = op.input(name)?.operands.first?.value else { continue }
            var inputs: [String] = [], casts: [String] = []
            var seen = Set<ObjectIdentifier>()
            var stack = [start]
            while let v = stack.popLast(), seen.count < 64 {
                guard seen.insert(ObjectIdentifier(v)).inserted else { continue }
                guard let p = v.producer else {
                    if !inputs.contains(v.name) { inputs.append(v.name) }
                    continue
                }
                if p.type == "const" { continue }
                if p.type == "cast" { casts.append("cast '\(p.name)'") }
                for i in p.inputs { for o in i.operands { if let u = o.value { stack.append(u) } } }
            }
            guard !inputs.isEmpty, !casts.isEmpty || start.producer != nil else { continue }
            let from = inputs.map { "'\($0)'" }.joined(separator: ", ")
            let via = casts.isEmpty ? "" : " through \(casts.joined(separator: ", "))"
            return " (\(name) derive from input\(inputs.count > 1 ? "s" : "") \(from)\(via))"
        }
        return ""
    }
}
