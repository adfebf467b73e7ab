import GraphIR

/// Computing one row of an output instead of all of them: a generation driver needs only the
/// logits of the last prompt token, but an LLM graph computes `logits` `[1, S, vocab]` for every
/// row of the chunk (for SmolLM2-135M with S = 128 that final `linear` is a fifth of the
/// prefill's work, and its 25 MB result is thrown away). llama.cpp does the same: it computes
/// only the rows whose logits are asked for.
///
/// Applies to a function output produced by `linear` (each output row depends on its own input
/// row only) and read by nothing else in the function.
extension ExecutionPlan {
    /// Whether output `name` can be limited to one row with ``selectRow(_:of:)``.
    public func canSelectRow(of name: String) -> Bool { rowSelectable.contains(name) }

    /// From the next run on, computes only row `row` (0-based, along axis −2) of output `name`,
    /// which is then returned with that axis of size 1 (e.g. `[1, 1, vocab]`); `nil` restores the
    /// full output.
    /// - Throws: `InterpreterError.unsupported` when the output cannot be limited
    ///   (``canSelectRow(of:)``); a run whose output has fewer rows than `row + 1` fails with
    ///   `InterpreterError.opFailed`.
    public func selectRow(_ row: Int?, of name: String) throws {
        guard canSelectRow(of: name) else {
            throw InterpreterError.unsupported("output '\(name)' of function '\(function.name)' is not produced by a row-wise op (linear) read only as an output; its rows cannot be selected")
        }
        if let row, row < 0 { throw InterpreterError.unsupported("row \(row) of output '\(name)': rows count from 0") }
        selectedRows[name] = row
    }

    /// Wraps the producers of row-selectable outputs (called once the plan's steps are final).
    func installRowSelection(useCount: [Int: Int]) {
        var producer: [Int: Int] = [:]
        for (i, st) in root.steps.enumerated() { for s in st.outputSlots { producer[s] = i } }
        for (v, ref) in zip(function.outputs, root.outputRefs) {
            guard case let .slot(s) = ref, useCount[s] == 1, let i = producer[s] else { continue }
            let st = root.steps[i]
            guard st.op.type == "linear", st.outputSlots == [s], let base = st.kernel else { continue }
            let name = v.name
            rowSelectable.insert(name)
            let wrapped: Kernel = { [unowned self] inv in
                guard let row = self.selectedRows[name] else { return try base(inv) }
                let x = try inv.tensor("x")
                guard x.rank >= 2, row < x.shape[x.rank - 2] else {
                    throw KernelError("row \(row) selected of '\(name)', but x has shape \(x.shape)")
                }
                return try base(inv.replacing("x", with: .tensor(ExecutionPlan.row(row, of: x))))
            }
            root.steps[i] = Step(op: st.op, kernel: wrapped, inputs: st.inputs, outputSlots: st.outputSlots, release: st.release,
                                 isConstant: st.isConstant, blocks: st.blocks, fusedStateWrite: st.fusedStateWrite)
        }
    }

    /// `x[..., row:row+1, :]`.
    static func row(_ row: Int, of x: Tensor) -> Tensor {
        let s = x.shape[x.rank - 2], k = x.shape[x.rank - 1]
        let batch = x.shape.dropLast(2).reduce(1, *)
        var shape = x.shape
        shape[x.rank - 2] = 1
        func pick<T>(_ a: [T]) -> [T] {
            a.withUnsafeBufferPointer { src in
                BufferPool.build(batch * k) { d in
                    for b in 0..<batch { (d + b * k).initialize(from: src.baseAddress! + (b * s + row) * k, count: k) }
                }
            }
        }
        switch x.data {
        case let .float(a): return Tensor(dtype: x.dtype, shape: shape, data: .float(pick(a)))
        case let .int(a): return Tensor(dtype: x.dtype, shape: shape, data: .int(pick(a)))
        case let .bool(a): return Tensor(dtype: x.dtype, shape: shape, data: .bool(pick(a)))
        case let .string(a): return Tensor(dtype: x.dtype, shape: shape, data: .string(pick(a)))
        }
    }
}
