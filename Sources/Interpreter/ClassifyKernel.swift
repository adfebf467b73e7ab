import GraphIR

/// MIL iOS15 `classify`: the op coremltools' `ClassifierConfig` appends, whose outputs are the
/// model's classifier outputs (`predictedFeatureName` / `predictedProbabilitiesName`). Source:
/// the MIL op reference (`coremltools/converters/mil/mil/ops/defs/iOS15/classify.py`).
///
/// - `probabilities`: fp32 tensor of any shape whose element count is the number of classes
///   (coremltools checks `prod(shape) == len(classes)`), read flat in row-major order.
/// - `classes`: a constant list of string scalars (or int64 scalars), one per class.
/// - Outputs: the class label of the largest value (the first on ties) — a string scalar
///   (shape `[]`), or an int64 scalar for int classes — and the dictionary class → value. The
///   interpreter holds the dictionary as its values, fp64 [N] in class order; its keys are the
///   `classes` list (``ClassifierLabels`` reads them from the function).
/// - Throws: `KernelError` when the counts differ, the list is empty, or an element of
///   `classes` is not a scalar.
enum ClassifyKernels {
    static let table: [String: Kernel] = ["classify": classify]

    static func classify(_ inv: KernelInvocation) throws -> [RuntimeValue] {
        let p = try inv.tensor("probabilities")
        guard case let .list(items) = try inv.value("classes") else {
            throw KernelError("classify: 'classes' is not a list")
        }
        let classes = try items.map { item -> Tensor in
            let t = try item.dense()
            guard t.count == 1 else { throw KernelError("classify: a class of 'classes' has \(t.count) elements, expected a scalar") }
            return t
        }
        let values = p.floats
        guard !classes.isEmpty else { throw KernelError("classify: 'classes' is empty") }
        guard values.count == classes.count else {
            throw KernelError("classify: 'probabilities' \(p.shape) holds \(values.count) values for \(classes.count) classes")
        }
        var best = 0
        for i in 1..<values.count where values[i] > values[best] || (values[best].isNaN && !values[i].isNaN) { best = i }
        let label = Tensor(dtype: classes[best].dtype, shape: [], data: classes[best].data)
        return [.tensor(label), .tensor(Tensor(.fp64, shape: [values.count], floats: values))]
    }
}

/// The class labels of a function's classifier output: the `classes` list of the `classify` op
/// that produces its dictionary output, as text (int64 classes in decimal).
public enum ClassifierLabels {
    /// - Returns: output name of the dictionary → its keys in class order; empty when the
    ///   function has no `classify` op.
    public static func of(_ function: Function) -> [String: [String]] {
        var out: [String: [String]] = [:]
        let outputs = Set(function.outputs.map(\.name))
        for op in function.body.operations where op.type == "classify" && op.outputs.count == 2 {
            guard outputs.contains(op.outputs[1].name), let labels = labels(op, in: function) else { continue }
            out[op.outputs[1].name] = labels
        }
        return out
    }

    static func labels(_ op: Op, in function: Function) -> [String]? {
        guard let operand = op.operand("classes") else { return nil }
        let c = operand.constant ?? operand.value?.producer?.constValue
        guard let list = c, case let .list(items) = list.payload else { return nil }
        return items.compactMap { item in
            guard let t = try? ConstConversion.tensor(item), t.count == 1 else { return nil }
            switch t.data {
            case let .string(s): return s[0]
            default: return t.ints.first.map { String($0) }
            }
        }
    }
}
