/// Structural checks on a program (run after loading and after every pass in tests):
/// - every value is defined once, before it is used (no cycles, no dangling references);
/// - block and function outputs exist;
/// - states are used only by `read_state` / `write_state` / `coreml_update_state`;
/// - ops the ``OpRegistry`` knows have their required inputs, no unknown inputs, one
///   binding per non-variadic input, and operand types their op allows;
/// - a `const` has a `val` and one output of the same dtype;
/// - the model-level checks of ``verifyModel(_:path:)`` (functions, outputs, description
///   shapes, known op types).
public enum Verifier {
    /// - Throws: `ModelError.invalidProgram` naming the function, op and input at fault.
    public static func verify(_ model: Model, path: String? = nil) throws {
        let p = path ?? model.sourcePath ?? "<memory>"
        try verifyModel(model, path: p)
        for f in model.program.functions { try verify(f, path: p) }
    }

    public static func verify(_ function: Function, path: String) throws {
        var defined = Set<ObjectIdentifier>()
        var names = Set<String>()
        let context = "function '\(function.name)'"
        for v in function.inputs {
            guard names.insert(v.name).inserted else {
                throw ModelError.invalidProgram(path: path, context: context, reason: "input '\(v.name)' defined twice")
            }
            defined.insert(ObjectIdentifier(v))
        }
        try verify(function.body, defined: &defined, names: &names, context: context, path: path)
        for (_, b) in function.otherSpecializations {
            var d2 = Set(function.inputs.map { ObjectIdentifier($0) })
            var n2 = Set(function.inputs.map(\.name))
            try verify(b, defined: &d2, names: &n2, context: context, path: path)
        }
    }

    static func verify(_ block: Block, defined: inout Set<ObjectIdentifier>, names: inout Set<String>, context: String, path: String) throws {
        var local = defined
        var localNames = names
        for v in block.inputs {
            local.insert(ObjectIdentifier(v))
            localNames.insert(v.name)
        }
        for op in block.operations {
            let opContext = "\(context) op '\(op.name)' (\(op.type))"
            func fail(_ reason: String) -> ModelError { .invalidProgram(path: path, context: opContext, reason: reason) }
            guard isKnownOpType(op.type) else {
                throw fail("unknown op type '\(op.type)' (not a MIL op of coremltools 9 or forge-ir)")
            }
            for input in op.inputs {
                for operand in input.operands {
                    guard let v = operand.value else { continue }
                    guard local.contains(ObjectIdentifier(v)) else {
                        throw fail("input '\(input.name)' uses '\(v.name)', which is not defined before this op")
                    }
                    if v.type.isState && !StateRules.mayTakeState(op: op.type, input: input.name) {
                        throw fail("input '\(input.name)' takes state '\(v.name)'; only read_state, write_state and coreml_update_state take states")
                    }
                }
            }
            try checkSchema(op, fail: fail)
            for b in op.blocks {
                var inner = local
                var innerNames = localNames
                try verify(b, defined: &inner, names: &innerNames, context: opContext, path: path)
            }
            for v in op.outputs {
                guard localNames.insert(v.name).inserted else { throw fail("output '\(v.name)' is already defined") }
                local.insert(ObjectIdentifier(v))
            }
        }
        for v in block.outputs where !local.contains(ObjectIdentifier(v)) {
            throw ModelError.invalidProgram(path: path, context: context, reason: "returns '\(v.name)', which is not defined")
        }
        defined = local
        names = localNames
    }

    static func checkSchema(_ op: Op, fail: (String) -> ModelError) throws {
        if op.type == "const" {
            guard let val = op.attribute("val") else { throw fail("const without a 'val' attribute") }
            guard op.outputs.count == 1 else { throw fail("const has \(op.outputs.count) outputs, expected 1") }
            if let a = val.type.tensorType, let b = op.outputs[0].type.tensorType, a.dtype != b.dtype {
                throw fail("val is \(a.dtype), output '\(op.outputs[0].name)' is \(b.dtype)")
            }
            return
        }
        guard let schema = OpRegistry.schema(op.type), !schema.isControlFlow else { return }
        for input in op.inputs {
            guard let spec = schema.input(input.name) else {
                let known = schema.inputs.map(\.name).joined(separator: ", ")
                throw fail("unknown input '\(input.name)' (\(op.type) takes: \(known))")
            }
            if !spec.variadic && input.operands.count != 1 {
                throw fail("input '\(input.name)' has \(input.operands.count) bindings, expected 1")
            }
            for operand in input.operands where !spec.domain.admits(operand.type) {
                throw fail("input '\(input.name)' is \(operand.type), expected \(spec.domain)")
            }
        }
        let parametersElsewhere = op.inputs.isEmpty && !op.attributes.filter({ $0.name != "name" }).isEmpty
        if !parametersElsewhere {
            for spec in schema.inputs where !spec.optional && op.input(spec.name) == nil {
                throw fail("missing required input '\(spec.name)'")
            }
        }
    }
}
