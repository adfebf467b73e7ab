import GraphIR
import Interpreter

/// Human-readable model description lines, shared by the verbs.
enum DescriptionText {
    /// `input_ids: int32 [1, RangeDim(1..2048)]`,
    /// `input_ids: int32 EnumeratedShapes([1,16],[1,1],[1,32]) default [1,16]`,
    /// `key_cache_0: fp16 [1, 2, 64, 16] (state, 4096 bytes)`, `logits: fp16 [1, ?, 8]`
    /// (a description without shape shows the MIL value's type, `?` for unknown dims).
    static func feature(_ f: FeatureDescription, milType: MILType?) -> String {
        var line = "\(f.name): "
        let tensor = milType.flatMap { $0.tensorType ?? $0.stateWrappedTensor }
        switch f.kind {
        case let .multiArray(a):
            line += arrayText(a, tensor: tensor)
        case let .state(a):
            line += arrayText(a, tensor: tensor)
            let shape = a.shape.isEmpty ? (tensor?.fixedShape ?? []) : a.shape
            let dtype = a.dataType?.dtype ?? tensor?.dtype
            if let dtype, !shape.isEmpty || tensor?.isScalar == true {
                line += " (state, \(dtype.byteCount(elements: shape.reduce(1, *))) bytes)"
            } else {
                line += " (state)"
            }
        case .int64: line += "int64"
        case .double: line += "double"
        case .string: line += "string"
        case let .image(img): line += "image " + ImageInput.text(img)
        case let .dictionary(stringKeys): line += "dictionary<\(stringKeys ? "string" : "int64"), double>"
        case let .sequence(stringElements, _): line += "sequence<\(stringElements ? "string" : "int64")>"
        case .unset: line += "(no type)"
        }
        if f.isOptional { line += " (optional)" }
        return line
    }

    static func arrayText(_ a: ArrayFeature, tensor: TensorType?) -> String {
        let dtype = a.dataType?.dtype.rawValue ?? tensor?.dtype.rawValue ?? "array(data type \(a.rawDataType))"
        switch a.flexibility {
        case let .enumerated(shapes):
            var s = "\(dtype) EnumeratedShapes(" + shapes.map(compact).joined(separator: ",") + ")"
            if !a.shape.isEmpty { s += " default \(compact(a.shape))" }
            return s
        case let .range(ranges):
            let dims = ranges.map { r -> String in
                r.isFixed ? String(r.lower) : DimSymbol(name: "", constraint: .range(lower: r.lower, upper: r.upper)).description
            }
            return "\(dtype) [\(dims.joined(separator: ", "))]"
        case .none:
            if !a.shape.isEmpty { return "\(dtype) [\(a.shape.map(String.init).joined(separator: ", "))]" }
            if let tensor { return "\(dtype) [\(tensor.shape.map(\.description).joined(separator: ", "))]" }
            return "\(dtype) (shape not given)"
        }
    }

    /// `[1,16]`
    static func compact(_ s: [Int]) -> String { "[" + s.map(String.init).joined(separator: ",") + "]" }

    /// The interface block of one function: inputs / outputs / states, indented.
    static func interface(_ i: FunctionDescription, function: Function?, indent: String = "  ") -> String {
        func type(_ name: String, _ values: [Value]?) -> MILType? { values?.first { $0.name == name }?.type }
        var out = ""
        out += "\(indent)inputs:\n"
        if i.inputs.isEmpty { out += "\(indent)  (none)\n" }
        for f in i.inputs { out += "\(indent)  " + feature(f, milType: type(f.name, function?.inputs)) + "\n" }
        out += "\(indent)outputs:\n"
        if i.outputs.isEmpty { out += "\(indent)  (none)\n" }
        for f in i.outputs { out += "\(indent)  " + feature(f, milType: type(f.name, function?.outputs)) + "\n" }
        if !i.states.isEmpty {
            out += "\(indent)states:\n"
            for f in i.states { out += "\(indent)  " + feature(f, milType: type(f.name, function?.inputs)) + "\n" }
        }
        return out
    }

    /// Model header, metadata and the interface of each function (or only `only`).
    static func model(_ model: Model, path: String, only: String?) -> String {
        var out = "model: \(path)\n"
        let tags = Set(model.program.functions.map(\.opsetTag)).sorted()
        out += "specification version: \(model.specificationVersion)"
        if !tags.isEmpty { out += " (\(tags.joined(separator: ", ")))" }
        out += ", mlProgram\n"
        if let c = model.compiled {
            out += "compiled model (model.mil \(c.milVersion)): description from \(c.descriptionSource.rawValue), specification version from \(c.specificationVersionSource)\n"
            for n in c.notes { out += "  note: \(n)\n" }
        }
        let names = model.program.functions.map(\.name)
        if names.count > 1 {
            out += "functions: \(names.joined(separator: ", ")) (default: \(model.defaultFunctionName))\n"
        }
        let md = model.description.metadata
        for (label, value) in [("author", md.author), ("description", md.shortDescription), ("version", md.versionString), ("license", md.license)] where !value.isEmpty {
            out += "\(label): \(value)\n"
        }
        if !md.userDefined.isEmpty {
            out += "user-defined metadata:\n"
            for (k, v) in md.userDefined { out += "  \(k): \(v)\n" }
        }
        let blobs = ModelSummary.distinctBlobs(model.program).count
        // Weight files relative to the model (a package's Data/com.apple.CoreML/weights/weight.bin).
        let files = model.weightFiles.keys.sorted().map { $0.hasPrefix(path + "/") ? String($0.dropFirst(path.count + 1)) : $0 }
        if files.isEmpty {
            out += "weights: none\n"
        } else {
            let bytes = model.weightFiles.values.reduce(0) { $0 + $1.size }
            out += "weights: \(blobs) blob\(blobs == 1 ? "" : "s") in \(files.joined(separator: ", ")) (\(bytes) bytes)\n"
        }
        for f in model.program.functions where only == nil || f.name == only {
            out += "\nfunction \(f.name) (\(f.opsetTag)):\n"
            out += interface(model.description.interface(of: f.name), function: f)
        }
        return out
    }
}
