/// Control flow (MIL `control_flow`): `cond`, `while_loop`; their inputs vary and their nested
/// blocks are typed by the blocks' own ops. Kernels: `Interpreter/ControlFlow.swift`.
extension OpDefs {
    static func declareControlFlow(_ b: inout OpTableBuilder) {
        // Control flow: inputs vary.
        b.family = .controlFlow
        b.add(OpSchema("cond", [req("pred", .bool)], isControlFlow: true),
              declaredTypeOnly: "outputs are those of the taken branch; the declared types are used")
        b.add(OpSchema("while_loop", [InputSpec("loop_vars", variadic: true)], isControlFlow: true),
              declaredTypeOnly: "outputs are the loop variables; the declared types are used")
    }
}
