import GraphIR

/// Which op outputs an ``ExecutionPlan`` reports to its ``ExecutionPlan/valueObserver``
/// (Polygraphy's `--onnx-outputs mark all`, coremltools' `MLModelInspector`).
///
/// Fusions: the plan's execution-level fusions (``AttentionFusion``: the `matmul` → `mul` →
/// `add` → `softmax` → `matmul` chain and its `tile`/`reshape` of the KV heads;
/// ``StateUpdateFusion``: `read_state` → `scatter`/`slice_update` → `write_state`) remove
/// intermediate values. A plan built to observe a value never applies a fusion that would
/// remove it: `.all` disables both fusions (so observing everything runs the unfused graph,
/// with the same numbers, slower), `.values` disables only the chains that produce a named
/// value, `.none` keeps every fusion (the decode hot path is unchanged).
public enum ObservedValues: Equatable {
    /// Nothing is reported (the default).
    case none
    /// Every output of every op that is not a constant (`const`, `constexpr_*` and ops whose
    /// inputs are all constants are left out: they are weights, not computations).
    case all
    /// The op outputs with these names (as `forge-ir dump` prints them), constants included
    /// (reported on the run that first evaluates them).
    case values(Set<String>)

    public func contains(_ name: String) -> Bool {
        switch self {
        case .none: return false
        case .all: return true
        case let .values(s): return s.contains(name)
        }
    }
}

extension ExecutionPlan {
    /// Slots of the values named by ``observing`` (called while `slotOf` is still filled).
    func protectedSlots() -> Set<Int> {
        guard case let .values(names) = observing else { return [] }
        var out = Set<Int>()
        function.body.walk { op in
            for v in op.outputs where names.contains(v.name) {
                if let s = slotOf[ObjectIdentifier(v)] { out.insert(s) }
            }
        }
        observedSlots = out
        return out
    }

    /// Hands the observed outputs of `step` to `body`.
    func report(_ step: Step, slots: [RuntimeValue?], to body: (String, Tensor) -> Void) {
        switch observing {
        case .none: return
        case .all: if step.isConstant { return }
        case .values: if !step.outputSlots.contains(where: observedSlots.contains) { return }
        }
        for (i, s) in step.outputSlots.enumerated() where i < step.op.outputs.count {
            if case .values = observing, !observedSlots.contains(s) { continue }
            guard let v = slots[s] ?? constantOpCache[s] else { continue }
            let t: Tensor
            switch v {
            case let .tensor(x): t = x
            case .quantized, .int8Blob, .halfBlob:
                guard let d = try? v.dense() else { continue }
                t = d
            case .state, .list, .tuple: continue
            }
            body(step.op.outputs[i].name, t)
        }
    }
}
