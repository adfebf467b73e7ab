import GraphIR

/// `insert_state_output_copy`: a function output that is also the value written to a state
/// (`write_state(data = v)` and `return v`) crashes Core ML at run time; return an `identity`
/// copy instead. The copy takes the output's name (the description refers to it); the written
/// value is renamed.
///
/// Before:
/// ```
/// tensor<fp16, [1, 4]> new_acc = add(x = old, y = x)
/// write_state(data = new_acc, input = acc)
/// } -> (new_acc);
/// ```
/// After:
/// ```
/// tensor<fp16, [1, 4]> new_acc_state = add(x = old, y = x)
/// write_state(data = new_acc_state, input = acc)
/// tensor<fp16, [1, 4]> new_acc = identity(x = new_acc_state)
/// } -> (new_acc);
/// ```
public struct InsertStateOutputCopy: FunctionPass {
    public static let info = PassInfo("insert_state_output_copy", "Return an identity copy of an output that is also written to a state (a Core ML runtime crash).")
    public init() {}

    public func run(on function: Function, in model: Model) throws -> PassResult {
        var result = PassResult()
        var written = Set<ObjectIdentifier>()
        function.body.walk { op in
            if op.type == "write_state", let v = op.operand("data")?.value { written.insert(ObjectIdentifier(v)) }
        }
        guard !written.isEmpty else { return result }
        var names = NameGenerator(function)
        var outputs = function.body.outputs
        for (i, v) in outputs.enumerated() where written.contains(ObjectIdentifier(v)) {
            let outputName = v.name
            v.name = names.fresh(outputName + "_state")
            let copy = Value(name: outputName, type: v.type)
            let op = Op(type: "identity", inputs: [OpInput(name: "x", operands: [.value(v)])], outputs: [copy],
                        attributes: [Attribute(name: "name", value: .string(names.fresh(outputName + "_copy")))])
            function.body.append(op)
            outputs[i] = copy
            result.count("output copies inserted")
        }
        function.body.outputs = outputs
        return result
    }
}
