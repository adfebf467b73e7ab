import GraphIR
import Interpreter

/// Runs one op alone on given input values — the reference's — to tell an op that computes
/// wrongly from one that only passes on an error it was given (Polygraphy's habit of feeding
/// reference intermediates to a subgraph).
///
/// The op is copied into a function of its own: every operand computed at run time becomes a
/// function input with the shape of the given tensor (in `fp32` precision an fp16-typed value
/// becomes an fp32 input, so it is not rounded on the way in); operands that are constants (`const`,
/// and `constexpr_*` ops of constants, i.e. weights) are copied with it. The original function
/// is not touched.
public enum OpIsolation {
    /// The value of a constant (a `const` op's output, or a `constexpr_*` op of constants such
    /// as a dequantized int8 weight) as a dense tensor of at most `maxElements`, else nil.
    public static func constant(_ v: Value, opset: String, maxElements: Int = 1 << 22) -> Tensor? {
        guard let p = v.producer, p.type == "const" || OpRegistry.schema(p.type)?.isConstant == true,
              let n = v.type.tensorType?.elementCount, n <= maxElements else { return nil }
        if let c = p.constValue, let t = c.type.tensorType, let shape = t.fixedShape, let d = c.doubles() {
            return Tensor(t.dtype.isFloat ? t.dtype : .fp32, shape: shape, floats: d.map { Float($0) })
        }
        // A constexpr op: evaluate its cone in a plan of its own.
        guard let outs = try? run(p, opset: opset, values: [:], precision: .fp32) else { return nil }
        return outs[v.name]
    }

    /// The op's outputs (by name), computed alone in `precision` (values as held, not rounded at the
    /// function boundary), or nil when it cannot be isolated: it has nested blocks, reads a
    /// state, or an operand computed at run time is missing from `values`.
    /// - Throws: `InterpreterError` when the op fails on these values.
    public static func run(_ op: Op, opset: String, values: [String: Tensor], precision: Precision) throws -> [String: Tensor]? {
        guard op.blocks.isEmpty, !op.operandValues.contains(where: \.type.isState), op.type != "read_state" else { return nil }
        var inputs: [Value] = []
        var ops: [Op] = []
        var copies: [ObjectIdentifier: Value] = [:]
        var feed: [String: Tensor] = [:]

        func isConstantCone(_ v: Value) -> Bool {
            guard let p = v.producer else { return false }
            if p.type == "const" { return true }
            guard OpRegistry.schema(p.type)?.isConstant == true, p.blocks.isEmpty else { return false }
            return p.operandValues.allSatisfy(isConstantCone)
        }
        func copy(_ v: Value) -> Value? {
            if let c = copies[ObjectIdentifier(v)] { return c }
            if isConstantCone(v), let p = v.producer {
                guard let q = clone(p) else { return nil }
                ops.append(q)
                return copies[ObjectIdentifier(v)]
            }
            guard let t = values[v.name], var dt = v.type.tensorType?.dtype else { return nil }
            // fp32 precision holds fp16-typed intermediates in fp32: a model input typed fp16
            // would be rounded on the way in (as Core ML rounds fp16 inputs), so it is typed fp32.
            if precision == .fp32 && dt == .fp16 { dt = .fp32 }
            let nv = Value(name: v.name, type: .tensor(TensorType(dt, fixed: t.shape)))
            inputs.append(nv)
            feed[v.name] = t
            copies[ObjectIdentifier(v)] = nv
            return nv
        }
        func clone(_ p: Op) -> Op? {
            var ins: [OpInput] = []
            for input in p.inputs {
                var operands: [Operand] = []
                for o in input.operands {
                    switch o {
                    case let .value(v):
                        guard let c = copy(v) else { return nil }
                        operands.append(.value(c))
                    case .constant: operands.append(o)
                    }
                }
                ins.append(OpInput(name: input.name, operands: operands))
            }
            let outs = p.outputs.map { Value(name: $0.name, type: $0.type) }
            for (a, b) in zip(p.outputs, outs) { copies[ObjectIdentifier(a)] = b }
            return Op(type: p.type, inputs: ins, outputs: outs, attributes: p.attributes)
        }
        guard let alone = clone(op) else { return nil }
        ops.append(alone)
        let f = Function(name: "isolated", inputs: inputs, opset: opset,
                         body: Block(operations: ops, outputs: alone.outputs))
        let names = Set(alone.outputs.map(\.name))
        let plan = try ExecutionPlan(function: f, precision: precision, observing: .values(names))
        var out: [String: Tensor] = [:]
        plan.valueObserver = { name, t in out[name] = t }
        _ = try plan.run(inputs: feed)
        return out
    }
}
