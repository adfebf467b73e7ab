import JSON

/// The machine-readable model description of `forge-ir dump --json`.
///
/// Schema (compared key by key with reference JSON recorded from coremltools):
/// ```
/// { "specification_version": 9, "model_type": "mlProgram", "default_function": "main",
///   "inputs": [FEATURE], "outputs": [FEATURE], "states": [FEATURE],   // of the default function
///   "functions": [{"name", "opset", "inputs", "outputs", "states", "op_counts": {"const": 12, …}}],  // sorted by name
///   "metadata": {"author", "short_description", "version_string", "license", "user_defined": {…}},
///   "blob_count": N, "weight_file_bytes": N,
///   "compiled": {"description_source": "coremldata.bin" | "metadata.json" | "function signatures",
///                "specification_version_source", "mil_version": "1.3", "notes": ["…"]} }  // .mlmodelc only
/// FEATURE = {"name", "dtype", "shape": [1, null], "shape_range": [[l, u], …] | null,
///            "enumerated_shapes": [[…], …] | null, "default_shape": […] | null}
/// ```
/// * `dtype`: the description's array data type (fp16/fp32/fp64/int32/int8); non-array
///   features: int64, fp64 (double), string, else null — an image adds `"image": {"width",
///   "height", "color_space": "RGB" | "BGR" | "grayscale" | …}`, a dictionary (a classifier's
///   scores) `"dictionary": {"key_type": "string" | "int64", "value_type": "fp64"}`.
/// * `shape`: per dimension an integer, or null where the description makes it flexible (range
///   lower ≠ upper, or the enumerated shapes differ there). When the description has no shape
///   (coremltools omits it for flexible outputs) the dims come from the MIL value's type
///   (fixed → integer, else null).
/// * `shape_range`: upper −1 when unbounded. `enumerated_shapes`: in file order.
/// * `default_shape`: the description's shape, null when it is empty.
/// * `blob_count`: distinct `BLOBFILE` references (file, offset) in the program;
///   `weight_file_bytes`: total size of the weight files.
public enum DescriptionJSON {
    /// The description object; `function` limits `functions` to that one; `summary` adds a
    /// `summary` object (see `summaryJSON`).
    public static func json(_ model: Model, function: String? = nil, summary: Bool = false) -> JSONValue {
        let defaultName = model.defaultFunctionName
        let defaultFunction = model.program.function(named: defaultName) ?? model.defaultFunction
        let top = interfaceJSON(model.description.interface(of: defaultName), function: defaultFunction)

        var functions: [JSONValue] = []
        for f in model.program.functions.sorted(by: { $0.name < $1.name }) where function == nil || f.name == function {
            var o = interfaceJSON(model.description.interface(of: f.name), function: f)
            o["name"] = .string(f.name)
            o["opset"] = .string(f.opset)
            o["op_counts"] = .object(ModelSummary.opCounts(f).mapValues { .int($0) })
            functions.append(.object(o))
        }

        let md = model.description.metadata
        var userDefined: [String: JSONValue] = [:]
        for (k, v) in md.userDefined { userDefined[k] = .string(v) }

        var root: [String: JSONValue] = [
            "specification_version": .int(Int(model.specificationVersion)),
            "model_type": .string("mlProgram"),
            "default_function": .string(defaultName),
            "inputs": top["inputs"]!,
            "outputs": top["outputs"]!,
            "states": top["states"]!,
            "functions": .array(functions),
            "metadata": .object([
                "author": .string(md.author),
                "short_description": .string(md.shortDescription),
                "version_string": .string(md.versionString),
                "license": .string(md.license),
                "user_defined": .object(userDefined),
            ]),
            "blob_count": .int(ModelSummary.distinctBlobs(model.program).count),
            "weight_file_bytes": .int(model.weightFiles.values.reduce(0) { $0 + $1.size }),
        ]
        if let c = model.compiled {
            root["compiled"] = .object([
                "description_source": .string(c.descriptionSource.rawValue),
                "specification_version_source": .string(c.specificationVersionSource),
                "mil_version": .string(c.milVersion),
                "notes": .array(c.notes.map { .string($0) }),
            ])
        }
        if summary { root["summary"] = summaryJSON(ModelSummary(model), function: function) }
        return .object(root)
    }

    /// `inputs` / `outputs` / `states` of one function interface.
    static func interfaceJSON(_ interface: FunctionDescription, function: Function?) -> [String: JSONValue] {
        func milType(_ name: String, in values: [Value]?) -> MILType? {
            values?.first { $0.name == name }?.type
        }
        return [
            "inputs": .array(interface.inputs.map { feature($0, milType: milType($0.name, in: function?.inputs)) }),
            "outputs": .array(interface.outputs.map { feature($0, milType: milType($0.name, in: function?.outputs)) }),
            "states": .array(interface.states.map { feature($0, milType: milType($0.name, in: function?.inputs)) }),
        ]
    }

    /// One FEATURE object. `milType` is the MIL value of the same name (used when the
    /// description has no shape).
    public static func feature(_ f: FeatureDescription, milType: MILType?) -> JSONValue {
        var o: [String: JSONValue] = ["name": .string(f.name)]
        let tensor: TensorType? = milType.flatMap { $0.tensorType ?? $0.stateWrappedTensor }
        guard let a = f.array else {
            switch f.kind {
            case .int64: o["dtype"] = .string("int64")
            case .double: o["dtype"] = .string("fp64")
            case .string: o["dtype"] = .string("string")
            case let .image(img):
                o["dtype"] = .null
                o["image"] = .object(["width": .int(Int(img.width)), "height": .int(Int(img.height)), "color_space": .string(img.colorSpaceName)])
            case let .dictionary(stringKeys):
                o["dtype"] = .null
                o["dictionary"] = .object(["key_type": .string(stringKeys ? "string" : "int64"), "value_type": .string("fp64")])
            default: o["dtype"] = .null
            }
            o["shape"] = .array([])
            o["shape_range"] = .null
            o["enumerated_shapes"] = .null
            o["default_shape"] = .null
            return .object(o)
        }
        o["dtype"] = a.dataType.map { .string($0.dtype.rawValue) } ?? tensor.map { .string($0.dtype.rawValue) } ?? .null
        o["shape"] = .array(shapeDims(a, tensor: tensor).map { $0.map(JSONValue.int) ?? .null })
        switch a.flexibility {
        case let .range(r):
            o["shape_range"] = .array(r.map { .array([.int($0.lower), .int($0.upper ?? -1)]) })
            o["enumerated_shapes"] = .null
        case let .enumerated(shapes):
            o["shape_range"] = .null
            o["enumerated_shapes"] = .array(shapes.map { .array($0.map(JSONValue.int)) })
        case .none:
            o["shape_range"] = .null
            o["enumerated_shapes"] = .null
        }
        o["default_shape"] = a.shape.isEmpty ? .null : .array(a.shape.map(JSONValue.int))
        return .object(o)
    }

    /// Per dimension the fixed size, or nil where it is flexible.
    public static func shapeDims(_ a: ArrayFeature, tensor: TensorType?) -> [Int?] {
        if !a.shape.isEmpty {
            return a.shape.indices.map { a.constraint(axis: $0) == nil ? a.shape[$0] : nil }
        }
        if let tensor { return tensor.shape.map(\.fixedValue) }
        switch a.flexibility {
        case .none:
            return []
        case let .range(r):
            return r.map { $0.isFixed ? $0.lower : nil }
        case let .enumerated(shapes):
            guard let first = shapes.first else { return [] }
            return first.indices.map { a.constraint(axis: $0) == nil ? first[$0] : nil }
        }
    }

    /// The `summary` object of `dump --summary --json`:
    /// `{"functions": [{"name", "opset", "op_counts", "op_total", "parameters": {"fp16": {"count", "bytes"}},
    ///   "parameter_count", "stored_value_count", "parameter_bytes", "blob_count", "blob_bytes", "state_count",
    ///   "state_bytes", "states": [{"name", "dtype", "shape", "bytes"}]}], "parameters", "parameter_count",
    ///   "stored_value_count", "parameter_bytes", "blob_count", "blob_bytes", "weight_file_bytes"}`
    /// `parameter_count` is ``WeightCount`` (what `bench` reports); `parameters` and
    /// `stored_value_count` are every stored constant value by dtype.
    /// (model-wide totals count a blob shared by several functions once).
    public static func summaryJSON(_ s: ModelSummary, function: String? = nil) -> JSONValue {
        func params(_ p: [DType: ParameterStats]) -> JSONValue {
            .object(Dictionary(uniqueKeysWithValues: p.map { ($0.key.rawValue, JSONValue.object(["count": .int($0.value.count), "bytes": .int($0.value.bytes)])) }))
        }
        func totals(_ t: ParameterTotals, _ more: [String: JSONValue]) -> JSONValue {
            .object(more.merging([
                "parameters": params(t.parameters),
                "parameter_count": .int(t.parameterCount),
                "stored_value_count": .int(t.storedValueCount),
                "parameter_bytes": .int(t.parameterBytes),
                "blob_count": .int(t.blobCount),
                "blob_bytes": .int(t.blobBytes),
            ]) { own, _ in own })
        }
        let fs: [JSONValue] = s.functions.sorted { $0.name < $1.name }.filter { function == nil || $0.name == function }.map { f in
            totals(f, [
                "name": .string(f.name),
                "opset": .string(f.opset),
                "op_counts": .object(f.opCounts.mapValues { .int($0) }),
                "op_total": .int(f.opTotal),
                "state_count": .int(f.stateCount),
                "state_bytes": .int(f.stateBytes),
                "states": .array(f.states.map { st in
                    .object([
                        "name": .string(st.name),
                        "dtype": .string(st.type.dtype.rawValue),
                        "shape": .array(st.type.shape.map { $0.fixedValue.map(JSONValue.int) ?? .null }),
                        "bytes": st.bytes.map(JSONValue.int) ?? .null,
                    ])
                }),
            ])
        }
        return totals(s, ["functions": .array(fs), "weight_file_bytes": .int(s.weightFileBytes)])
    }
}
