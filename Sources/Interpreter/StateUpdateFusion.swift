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
    /// block outputs included).
    static func apply(_ plan: ExecutionPlan.BlockPlan, useCount: [Int: Int]) {
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
            // No other state op on the same state between the read and the write.
            let between = plan.steps[(ir + 1)..<iw].contains { st in
                ["write_state", "coreml_update_state", "read_state"].contains(st.op.type)
                    && st.inputs.contains { $0.refs.contains { if case let .slot(s) = $0 { return s == stateSlot } else { return false } } }
            }
            if between { continue }
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

    static func stateBuffer(_ inv: KernelInvocation) throws -> StateBuffer {
        guard case let .state(s) = try inv.value("state") else { throw KernelError("fused state write without a state") }
        return s
    }

    /// Writes `rows` into the state's float storage in place; `body` gets the mutable buffer.
    static func mutate(_ s: StateBuffer, _ body: (UnsafeMutableBufferPointer<Float>) throws -> Void) throws {
        guard case var .float(a) = s.value.data else { throw KernelError("state '\(s.name)' does not hold floats") }
        s.value.data = .int([])  // drop the second reference so `a` is unique: no copy-on-write
        defer { s.value.data = .float(a) }
        try a.withUnsafeMutableBufferPointer { try body($0) }
    }

    static func round(_ p: UnsafeMutableBufferPointer<Float>, _ dtype: DType) {
        if dtype == .fp16 { Rounding.toHalf(p) }
    }

    /// `scatter` with mode `update` into the state in place; other modes run the dense kernel.
    static func inPlaceScatter(fallback: Kernel?) -> Kernel {
        return { inv in
            let s = try stateBuffer(inv)
            let mode = try inv.string("mode", default: "add")
            let updates = try inv.tensor("updates")
            guard mode == "update", s.type.dtype.isFloat else {
                guard let fallback else { throw KernelError("no scatter kernel") }
                var values: [String: [RuntimeValue]] = [:]
                for name in ["indices", "updates", "axis", "mode", "validate_indices"] where inv.has(name) { values[name] = [try inv.value(name)] }
                values["data"] = [.tensor(s.value)]
                let r = try fallback(KernelInvocation(op: inv.op, precision: inv.precision, values: values))
                try s.write(try r[0].dense())
                return []
            }
            let shape = s.value.shape
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
            let u = updates.floats
            try mutate(s) { dst in
                for (j, raw) in indices.enumerated() {
                    var row = Int(raw)
                    if row < 0 { row += n }
                    guard row >= 0, row < n else { throw KernelError("index \(raw) out of range for axis \(axis) of size \(n)") }
                    for o in 0..<outer {
                        let d = (o * n + row) * inner, src = (o * indices.count + j) * inner
                        for k in 0..<inner { dst[d + k] = u[src + k] }
                        round(UnsafeMutableBufferPointer(rebasing: dst[d..<(d + inner)]), s.type.dtype)
                    }
                }
            }
            return []
        }
    }

    /// `slice_update` into the state in place.
    static func inPlaceSliceUpdate(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let s = try stateBuffer(inv)
        let update = try inv.tensor("update")
        let region = try SliceRegion(shape: s.value.shape, begin: try inv.ints("begin"), end: try inv.ints("end"),
                                     stride: inv.has("stride") ? try inv.ints("stride") : nil,
                                     beginMask: inv.has("begin_mask") ? try inv.bools("begin_mask") : nil,
                                     endMask: inv.has("end_mask") ? try inv.bools("end_mask") : nil,
                                     squeezeMask: inv.has("squeeze_mask") ? try inv.bools("squeeze_mask") : nil)
        guard update.count == region.count, update.shape.filter({ $0 != 1 }) == region.resultShape.filter({ $0 != 1 }) else {
            throw KernelError("update has shape \(update.shape), the slice selects \(region.resultShape) of the state \(s.value.shape)")
        }
        var u = update.floats
        if s.type.dtype == .fp16 { Rounding.toHalf(&u) }
        let offsets = region.sourceOffsets()
        try mutate(s) { dst in for (i, o) in offsets.enumerated() { dst[o] = u[i] } }
        return []
    }
}
