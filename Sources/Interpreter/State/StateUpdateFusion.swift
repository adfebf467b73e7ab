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
    /// is `protected` (an observed value) is left unfused.
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int], protected: Set<Int> = []) {
        var producer: [Int: Int] = [:]
        for (i, st) in plan.steps.enumerated() { for s in st.outputSlots { producer[s] = i } }
        var remove = Set<Int>()
        var replace: [Int: ExecutionPlan.Step] = [:]
        for (iw, w) in plan.steps.enumerated() where w.op.type == "write_state" {
            guard let stateRef = w.inputs.first(where: { $0.name == "input" })?.refs.first,
                  case let .slot(stateSlot) = stateRef,
                  let dataRef = w.inputs.first(where: { $0.name == "data" })?.refs.first,
                  case let .slot(v) = dataRef, useCount[v] == 1,
                  let ix = producer[v], !remove.contains(ix) else { continue }
            let x = plan.steps[ix]
            let dataName: String
            switch x.op.type {
            case "scatter": dataName = "data"
            case "slice_update": dataName = "x"
            default: continue
            }
            guard let rRef = x.inputs.first(where: { $0.name == dataName })?.refs.first, case let .slot(r) = rRef,
                  useCount[r] == 1, let ir = producer[r], plan.steps[ir].op.type == "read_state",
                  plan.steps[ir].inputs.first?.refs.first.map({ if case let .slot(s) = $0 { return s == stateSlot } else { return false } }) == true
            else { continue }
            // Nothing else takes the same state between the read and the write: the fused step
            // writes at the scatter's place, so any reader up to the write_state (a read_state,
            // a fused attention reading the state in place, an op in a nested block) would see
            // the new rows.
            if takes(stateSlot, in: plan.steps[(ir + 1)..<iw], except: ix) { continue }
            if !protected.isEmpty, (x.outputSlots + plan.steps[ir].outputSlots).contains(where: protected.contains) { continue }
            var inputs = x.inputs.filter { $0.name != dataName }
            inputs.append((name: "state", refs: [.slot(stateSlot)]))
            let kernel: Kernel = x.op.type == "scatter" ? inPlaceScatter(fallback: x.kernel) : inPlaceSliceUpdate
            replace[ix] = ExecutionPlan.Step(op: x.op, kernel: kernel, inputs: inputs, outputSlots: [], release: [],
                                             isConstant: false, blocks: [], fusedStateWrite: true)
            remove.insert(ir)
            remove.insert(iw)
        }
        guard !replace.isEmpty else { return }
        plan.steps = plan.steps.enumerated().compactMap { i, st in
            if remove.contains(i) { return nil }
            return replace[i] ?? st
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
            let updates = try inv.tensor("updates")
            let shape = s.shape
            var axis = try inv.int("axis", default: 0)
            if axis < 0 { axis += shape.count }
            guard axis >= 0, axis < shape.count else { throw KernelError("axis out of range for state shape \(shape)") }
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
            guard inner > 0 else { return [] }
            let u = updates.floats
            try u.withUnsafeBufferPointer { up in
                for (j, row) in rows.enumerated() {
                    for o in 0..<outer {
                        try s.store(up.baseAddress! + (o * rows.count + j) * inner, count: inner, at: (o * n + row) * inner)
                    }
                }
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
        let region = try SliceRegion(shape: s.shape, begin: try inv.ints("begin"), end: try inv.ints("end"),
                                     stride: inv.has("stride") ? try inv.ints("stride") : nil,
                                     beginMask: inv.has("begin_mask") ? try inv.bools("begin_mask") : nil,
                                     endMask: inv.has("end_mask") ? try inv.bools("end_mask") : nil,
                                     squeezeMask: inv.has("squeeze_mask") ? try inv.bools("squeeze_mask") : nil)
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
