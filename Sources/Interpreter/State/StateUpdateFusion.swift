import GraphIR

/// Execution-level fusion of a KV-cache write (never written back to a model):
///
/// ```
/// r = read_state(input = s)
/// v = scatter(data = r, indices, updates, axis, mode)      // or slice_update(x = r, update, …)
/// write_state(input = s, data = v)
/// ```
/// where `r` and `v` have no other readers, runs as one step that writes the `updates` rows into
/// the state buffer in place, rounding only the written elements to the state's dtype. Without
/// it every call copies and re-rounds the whole cache (1.5 MB per layer and per K/V for a
/// 2048-slot cache). Results are identical: the untouched elements were already rounded.
enum StateUpdateFusion {
    /// Rewrites `plan`'s steps; `useCount` counts every read of each slot (nested blocks and
    /// block outputs included). A write whose `read_state` or `scatter`/`slice_update` output
    /// is `protected` (an observed value) is left unfused. Returns one site per `write_state`
    /// (fused, or why not). Afterwards a `read_state` nothing reads any more is dropped.
    ///
    /// The `read_state` output may have other readers when all of them run before the update
    /// (Apple's stacked cache: layer l's write updates the value layer l − 1's attention read):
    /// they consume the value before the in-place store changes the state.
    @discardableResult
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], protected: Set<Int> = []) -> [FusionSite] {
        var producer: [Int: Int] = [:]
        for (i, st) in plan.steps.enumerated() { for s in st.outputSlots { producer[s] = i } }
        var remove = Set<Int>()
        var replace: [Int: ExecutionPlan.Step] = [:]
        var sites: [FusionSite] = []
        for (iw, w) in plan.steps.enumerated() where w.op.type == "write_state" || w.op.type == "coreml_update_state" {
            switch match(plan, iw, producer: producer, useCount: useCount, protected: protected, removed: remove) {
            case let .failure(f):
                sites.append(FusionSite(kind: "state_write", op: w.op.name, reason: f.reason))
            case let .success((ir, ix, stateSlot, dataName)):
                let x = plan.steps[ix]
                var inputs = x.inputs.filter { $0.name != dataName }
                inputs.append((name: "state", refs: [.slot(stateSlot)]))
                let inPlace: Kernel = x.op.type == "scatter" ? inPlaceScatter(fallback: x.kernel)
                    : x.op.type == "scatter_nd" ? inPlaceScatterND(fallback: x.kernel) : inPlaceSliceUpdate
                let site = FusionSite(kind: "state_write", op: w.op.name, reason: nil)
                // coreml_update_state also returns the stored value: the state itself when only
                // fused attention steps read it (as K / V) and nothing changes the state before
                // the last of them, else a copy (what the op returns).
                let result: ResultForm = w.op.type == "coreml_update_state"
                    ? updateResult(plan, iw, stateSlot: stateSlot, useCount: useCount, protected: protected) : .nothing
                let kernel: Kernel = { inv in
                    site.fusedCalls += 1
                    _ = try inPlace(inv)
                    switch result {
                    case .nothing: return []
                    case .state: return [try inv.value("state")]
                    case .copy: return [.tensor(try stateBuffer(inv).tensor())]
                    }
                }
                replace[ix] = ExecutionPlan.Step(op: x.op, kernel: kernel, inputs: inputs, outputSlots: result == .nothing ? [] : w.outputSlots,
                                                 release: [], isConstant: false, blocks: [], fusedStateWrite: true)
                if useCount[plan.steps[ir].outputSlots[0]] == 1 { remove.insert(ir) }
                remove.insert(iw)
                sites.append(site)
            }
        }
        guard !replace.isEmpty else { return sites }
        plan.steps = plan.steps.enumerated().compactMap { i, st in
            if remove.contains(i) { return nil }
            return replace[i] ?? st
        }
        dropUnreadStateReads(plan)
        return sites
    }

    /// What the fused step returns: nothing (`write_state`), or `coreml_update_state`'s value
    /// as the state read in place or as a copy.
    enum ResultForm { case nothing, state, copy }

    /// The form of `coreml_update_state` `iw`'s result: `.state` when every reader is a fused
    /// attention (or a `shape` of its chain) taking it as its K / V buffer and no step before
    /// the last reader changes the state; else `.copy`.
    static func updateResult(_ plan: ExecutionPlan.BlockPlan, _ iw: Int, stateSlot: Int, useCount: [Int: Int], protected: Set<Int>) -> ResultForm {
        guard let y = plan.steps[iw].outputSlots.first, !protected.contains(y) else { return .copy }
        func isY(_ r: ExecutionPlan.Ref) -> Bool { if case let .slot(s) = r { return s == y } else { return false } }
        let readers = plan.steps.indices.filter { plan.steps[$0].inputs.contains { $0.refs.contains(where: isY) } }
        let reads = readers.reduce(0) { n, i in n + plan.steps[i].inputs.reduce(0) { $0 + $1.refs.filter(isY).count } }
        guard reads == useCount[y] ?? 0, let last = readers.last, readers.allSatisfy({ $0 > iw }) else { return .copy }
        for i in readers {
            let st = plan.steps[i]
            guard AttentionFusion.readsInPlace(st) else { return .copy }
            let allowed: Set<Int> = AttentionFusion.isFused(st) ? [1, 2] : [0]
            let positions = st.inputs.enumerated().filter { $0.element.refs.contains(where: isY) }.map(\.offset)
            guard positions.allSatisfy(allowed.contains) else { return .copy }
        }
        return changes(stateSlot, in: plan.steps[(iw + 1)..<last]) ? .copy : .state
    }

    struct NoMatch: Error { let reason: String }
    static func attempt<T>(_ body: () throws -> T) -> Result<T, NoMatch> {
        do { return .success(try body()) } catch let e as NoMatch { return .failure(e) } catch { return .failure(NoMatch(reason: "\(error)")) }
    }

    /// write_state `iw` ← scatter/slice_update `ix` ← read_state `ir` of the same state:
    /// (ir, ix, state slot, name of the update's data input), or why not.
    static func match(_ plan: ExecutionPlan.BlockPlan, _ iw: Int, producer: [Int: Int], useCount: [Int: Int],
                      protected: Set<Int>, removed: Set<Int>) -> Result<(Int, Int, Int, String), NoMatch> {
        attempt {
            let w = plan.steps[iw]
            let (stateName, valueName) = w.op.type == "coreml_update_state" ? ("state", "value") : ("input", "data")
            guard case let .slot(stateSlot)? = w.inputs.first(where: { $0.name == stateName })?.refs.first,
                  case let .slot(v)? = w.inputs.first(where: { $0.name == valueName })?.refs.first,
                  let ix = producer[v], !removed.contains(ix) else { throw NoMatch(reason: "the written value is not computed here") }
            guard useCount[v] == 1 else { throw NoMatch(reason: "the updated cache has a second user") }
            let x = plan.steps[ix]
            guard let dataName = updatedInput(of: x.op.type) else {
                throw NoMatch(reason: "written by \(x.op.type), not scatter / scatter_nd / slice_update")
            }
            guard case let .slot(r)? = x.inputs.first(where: { $0.name == dataName })?.refs.first,
                  let ir = producer[r], plan.steps[ir].op.type == "read_state" else {
                throw NoMatch(reason: "the updated value is not a read_state")
            }
            guard case let .slot(rs)? = plan.steps[ir].inputs.first?.refs.first, rs == stateSlot else {
                throw NoMatch(reason: "the update reads another state")
            }
            // Other readers of the read value must all run before the update (in this block).
            let readers = plan.steps.indices.filter { i in i != ix && plan.steps[i].inputs.contains { $0.refs.contains { if case let .slot(s) = $0 { return s == r } else { return false } } } }
            guard readers.count + 1 == useCount[r] ?? 0 else { throw NoMatch(reason: "the state read is used in a nested block or output") }
            guard readers.allSatisfy({ $0 < ix }) else { throw NoMatch(reason: "the state read has a user after the update") }
            // The fused step stores at the update's place: nothing between the read and the
            // update may change the state, nothing between the update and the write may take it.
            if changes(stateSlot, in: plan.steps[(ir + 1)..<ix]) { throw NoMatch(reason: "the state changes between its read and the update") }
            if takes(stateSlot, in: plan.steps[(ix + 1)..<iw]) { throw NoMatch(reason: "the state is read between the update and the write") }
            if !protected.isEmpty, (x.outputSlots + plan.steps[ir].outputSlots).contains(where: protected.contains) {
                throw NoMatch(reason: "an intermediate value is observed")
            }
            return (ir, ix, stateSlot, dataName)
        }
    }

    /// Removes `read_state` steps whose output no step (nor a block output) reads.
    static func dropUnreadStateReads(_ plan: ExecutionPlan.BlockPlan) {
        var read = Set<Int>()
        func walk(_ p: ExecutionPlan.BlockPlan) {
            for st in p.steps {
                for (_, refs) in st.inputs { for r in refs { if case let .slot(s) = r { read.insert(s) } } }
                st.blocks.forEach(walk)
            }
            for r in p.outputRefs { if case let .slot(s) = r { read.insert(s) } }
        }
        walk(plan)
        plan.steps.removeAll { $0.op.type == "read_state" && $0.outputSlots.allSatisfy { !read.contains($0) } }
    }

    /// Whether a step of `steps` (nested blocks included) takes state `slot` other than to read
    /// it (`read_state`, a fused attention reading it in place): a write, or any op that could
    /// change it.
    static func changes(_ slot: Int, in steps: ArraySlice<ExecutionPlan.Step>) -> Bool {
        steps.contains { st in
            if st.op.type != "read_state" && !AttentionFusion.readsInPlace(st)
                && st.inputs.contains(where: { $0.refs.contains { if case let .slot(s) = $0 { return s == slot } else { return false } } }) {
                return true
            }
            return st.blocks.contains { changes(slot, in: $0.steps[...]) }
        }
    }

    /// Whether a step of `steps` other than `except` (nested blocks included) has state `slot`
    /// as an operand.
    static func takes(_ slot: Int, in steps: ArraySlice<ExecutionPlan.Step>, except: Int? = nil) -> Bool {
        zip(steps.indices, steps).contains { i, st in
            guard i != except else { return false }
            if st.inputs.contains(where: { $0.refs.contains { if case let .slot(s) = $0 { return s == slot } else { return false } } }) {
                return true
            }
            return st.blocks.contains { takes(slot, in: $0.steps[...]) }
        }
    }

    static func stateBuffer(_ inv: KernelInvocation) throws -> StateBuffer {
        guard case let .state(s) = try inv.value("state") else { throw KernelError("fused state write without a state") }
        return s
    }

    /// Runs the unfused op on a widened copy of the state and writes the result back (modes
    /// other than `update`, and states not kept in fp16 / fp32 storage).
    static func dense(_ inv: KernelInvocation, _ s: StateBuffer, kernel: Kernel, dataName: String) throws -> [RuntimeValue] {
        let r = try kernel(inv.replacing(dataName, with: .tensor(s.tensor())))
        guard r.count == 1 else { throw KernelError("fused state write: the dense kernel gave \(r.count) results") }
        try s.write(try r[0].dense())
        return []
    }

    /// `scatter` with mode `update` into the state in place: each updated row is rounded to the
    /// state's dtype and stored; nothing else is touched. Every index is checked before the
    /// first store. Other modes run the dense kernel.
    static func inPlaceScatter(fallback: Kernel?) -> Kernel {
        return { inv in
            let s = try stateBuffer(inv)
            let mode = try inv.string("mode", default: "add")
            guard mode == "update", s.isMapped else {
                guard let fallback else { throw KernelError("no scatter kernel") }
                return try dense(inv, s, kernel: fallback, dataName: "data")
            }
            let (runs, u) = try scatterRuns(inv, shape: s.shape)
            try u.withUnsafeBufferPointer { up in
                for r in runs where r.count > 0 { try s.store(up.baseAddress! + r.src, count: r.count, at: r.dst) }
            }
            return []
        }
    }

    /// `scatter_nd` with mode `update` into the state in place: each addressed slice of the
    /// updates is rounded to the state's dtype and stored (checked as the unfused kernel checks,
    /// every index before the first store). Other modes run the dense kernel.
    static func inPlaceScatterND(fallback: Kernel?) -> Kernel {
        return { inv in
            let s = try stateBuffer(inv)
            guard try inv.string("mode", default: "add") == "update", s.isMapped else {
                guard let fallback else { throw KernelError("no scatter_nd kernel") }
                return try dense(inv, s, kernel: fallback, dataName: "data")
            }
            let (runs, u) = try CarriedCacheFusion.scatterNDRuns(inv, shape: s.shape)
            try u.withUnsafeBufferPointer { up in
                for r in runs where r.count > 0 { try s.store(up.baseAddress! + r.src, count: r.count, at: r.dst) }
            }
            return []
        }
    }

    /// `slice_update` into the state in place: the selected elements are replaced by `update`
    /// rounded to the state's dtype (stored run by run of contiguous elements).
    static func inPlaceSliceUpdate(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let s = try stateBuffer(inv)
        guard s.isMapped else { return try dense(inv, s, kernel: StateKernels.sliceUpdate, dataName: "x") }
        let update = try inv.tensor("update")
        let region = try SliceRegion(inv, shape: s.shape)
        guard update.count == region.count, update.shape.filter({ $0 != 1 }) == region.resultShape.filter({ $0 != 1 }) else {
            throw KernelError("update has shape \(update.shape), the slice selects \(region.resultShape) of the state \(s.shape)")
        }
        let u = update.floats
        let offsets = region.sourceOffsets()
        try u.withUnsafeBufferPointer { up in
            var i = 0
            while i < offsets.count {
                var e = i + 1
                while e < offsets.count && offsets[e] == offsets[e - 1] + 1 { e += 1 }
                try s.store(up.baseAddress! + i, count: e - i, at: offsets[i])
                i = e
            }
        }
        return []
    }
}

extension StateUpdateFusion {
    /// The input a KV-cache write op updates (its other inputs say where and with what):
    /// `data` of `scatter` / `scatter_nd`, `x` of `slice_update`; nil for any other op.
    static func updatedInput(of type: String) -> String? {
        switch type {
        case "scatter", "scatter_nd": return "data"
        case "slice_update": return "x"
        default: return nil
        }
    }

    /// `scatter(mode = update)` into a buffer of `shape` as (updates offset, buffer offset, count)
    /// runs, outer index by outer index in the indices' order (a repeated index: the last one
    /// wins), and the updates as floats. Every index is checked before any run is returned.
    /// - Throws: `KernelError` for an axis or index out of range, or updates of the wrong shape.
    static func scatterRuns(_ inv: KernelInvocation, shape: [Int]) throws -> ([(src: Int, dst: Int, count: Int)], [Float]) {
        let updates = try inv.tensor("updates")
        var axis = try inv.int("axis", default: 0)
        if axis < 0 { axis += shape.count }
        guard axis >= 0, axis < shape.count else { throw KernelError("axis out of range for shape \(shape)") }
        let indices = try inv.tensor("indices").ints
        var expected = shape
        expected[axis] = indices.count
        guard updates.shape == expected else {
            throw KernelError("updates have shape \(updates.shape), expected \(expected) for \(indices.count) indices into \(shape)")
        }
        let outer = shape[..<axis].reduce(1, *), inner = shape[(axis + 1)...].reduce(1, *), n = shape[axis]
        let rows = try indices.map { raw -> Int in
            var row = Int(raw)
            if row < 0 { row += n }
            guard row >= 0, row < n else { throw KernelError("index \(raw) out of range for axis \(axis) of size \(n)") }
            return row
        }
        var runs: [(src: Int, dst: Int, count: Int)] = []
        runs.reserveCapacity(rows.count * outer)
        for o in 0..<outer {
            for (j, row) in rows.enumerated() { runs.append((src: (o * rows.count + j) * inner, dst: (o * n + row) * inner, count: inner)) }
        }
        return (runs, updates.floats)
    }
}
