import GraphIR

/// `cond` and `while_loop` (MIL iOS15 control flow), run as nested block plans.
enum ControlFlow {
    static func run(_ step: ExecutionPlan.Step, plan: ExecutionPlan, slots: inout [RuntimeValue?]) throws -> [RuntimeValue] {
        func inputs(_ name: String) throws -> [RuntimeValue] {
            guard let refs = step.inputs.first(where: { $0.name == name })?.refs else { throw KernelError("missing input '\(name)'") }
            return try refs.map { try plan.resolve($0, slots: slots) }
        }
        switch step.op.type {
        case "cond":
            guard step.blocks.count == 2 else { throw KernelError("cond needs 2 blocks, has \(step.blocks.count)") }
            let pred = try inputs("pred").first?.dense()
            guard let p = pred, p.count == 1 else { throw KernelError("cond predicate must be a scalar") }
            let branch = p.bools[0] ? step.blocks[0] : step.blocks[1]
            try plan.execute(branch, slots: &slots)
            return try branch.outputRefs.map { try plan.resolve($0, slots: slots) }
        case "while_loop":
            guard step.blocks.count == 2 else { throw KernelError("while_loop needs 2 blocks (cond, body), has \(step.blocks.count)") }
            var vars = try inputs("loop_vars")
            let condBlock = step.blocks[0], body = step.blocks[1]
            var iterations = 0
            while true {
                for (s, v) in zip(condBlock.inputSlots, vars) { slots[s] = v }
                try plan.execute(condBlock, slots: &slots)
                guard let c = try condBlock.outputRefs.first.map({ try plan.resolve($0, slots: slots).dense() }), c.count == 1 else {
                    throw KernelError("while_loop condition must return a scalar bool")
                }
                if !c.bools[0] { break }
                for (s, v) in zip(body.inputSlots, vars) { slots[s] = v }
                try plan.execute(body, slots: &slots)
                vars = try body.outputRefs.map { try plan.resolve($0, slots: slots) }
                iterations += 1
                if iterations > 10_000_000 { throw KernelError("while_loop ran more than 10^7 iterations") }
            }
            return vars
        default:
            throw KernelError("unknown control-flow op")
        }
    }
}
