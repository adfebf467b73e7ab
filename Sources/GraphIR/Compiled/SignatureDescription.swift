/// A model description rebuilt from the MIL program alone, for a compiled model whose
/// `coremldata.bin` and `metadata.json` are both unreadable.
///
/// Per function: inputs from the signature (state inputs become states), flexible dims from
/// its `FlexibleShapeInformation` (default shape, RangeDims, EnumeratedShapes); outputs from
/// the body's returned values (shape only when static, as coremltools writes it). A
/// single-function program fills the top-level inputs/outputs/states; several functions fill
/// `functions` and `defaultFunctionName` (`main` if present, else the first), as
/// `save_multifunction` does. Unknown from the text: metadata, short descriptions,
/// `isOptional`, a flexible input's bounds when the attribute is absent (then each `?` is taken
/// as `RangeDim(1..inf)` with default 1).
enum SignatureDescription {
    static func build(_ program: Program, flexible: [String: FlexibleShapeInformation], notes: inout [String]) -> ModelDescription {
        var d = ModelDescription()
        var functions: [FunctionDescription] = []
        for f in program.functions {
            let fsi = flexible[f.name]
            var inputs: [FeatureDescription] = [], states: [FeatureDescription] = []
            for v in f.inputs {
                if let t = v.type.stateWrappedTensor {
                    states.append(FeatureDescription(name: v.name, kind: .state(array(t, name: v.name, notes: &notes))))
                    continue
                }
                guard let t = v.type.tensorType else {
                    notes.append("function '\(f.name)' input '\(v.name)' of type \(v.type) has no Core ML feature type")
                    inputs.append(FeatureDescription(name: v.name, kind: .unset))
                    continue
                }
                var a = array(t, name: v.name, notes: &notes)
                if let info = fsi?.input(v.name) {
                    a.flexibility = info.flexibility
                    if let s = info.defaultShape { a.shape = s }
                } else if !t.isStatic {
                    notes.append("function '\(f.name)' input '\(v.name)' has flexible dims but no FlexibleShapeInformation: taken as RangeDim(1..inf), default 1")
                    a.shape = t.shape.map { $0.fixedValue ?? 1 }
                    a.flexibility = .range(t.shape.map { $0.fixedValue.map { SizeRange(lower: $0, upper: $0) } ?? SizeRange(lower: 1, upper: nil) })
                }
                inputs.append(FeatureDescription(name: v.name, kind: .multiArray(a)))
            }
            var outputs: [FeatureDescription] = []
            for v in f.outputs {
                guard let t = v.type.tensorType else {
                    outputs.append(FeatureDescription(name: v.name, kind: .unset))
                    continue
                }
                var a = array(t, name: v.name, notes: &notes)
                if !t.isStatic { a.shape = [] }
                outputs.append(FeatureDescription(name: v.name, kind: .multiArray(a)))
            }
            functions.append(FunctionDescription(name: f.name, inputs: inputs, outputs: outputs, states: states))
        }
        if functions.count == 1 {
            d.inputs = functions[0].inputs
            d.outputs = functions[0].outputs
            d.states = functions[0].states
        } else {
            d.functions = functions
            d.defaultFunctionName = program.function(named: "main") != nil ? "main" : (program.functions.first?.name ?? "")
        }
        return d
    }

    static func array(_ t: TensorType, name: String, notes: inout [String]) -> ArrayFeature {
        let shape = t.fixedShape ?? t.shape.map { $0.fixedValue ?? 1 }
        if let dt = ArrayDataType.allCases.first(where: { $0.dtype == t.dtype }) {
            return ArrayFeature(shape: shape, dataType: dt)
        }
        notes.append("'\(name)' has dtype \(t.dtype.rawValue), which no Core ML array data type names")
        return ArrayFeature(shape: shape, rawDataType: 0, flexibility: .none, defaultValue: nil)
    }
}
