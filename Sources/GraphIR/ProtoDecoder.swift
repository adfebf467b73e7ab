import CoreMLProto

/// Converts an unpacked protobuf-c `CoreML.Specification.Model` tree into the IR.
/// Internal to the loader; the caller owns and frees the C tree.
struct ProtoDecoder {
    typealias PModel = CoreML__Specification__Model
    typealias PValue = CoreML__Specification__MILSpec__Value
    typealias PValueType = CoreML__Specification__MILSpec__ValueType
    typealias PBlock = CoreML__Specification__MILSpec__Block
    typealias PNamedValueType = CoreML__Specification__MILSpec__NamedValueType
    typealias PFeature = CoreML__Specification__FeatureDescription
    typealias PArray = CoreML__Specification__ArrayFeatureType

    /// Path of the `model.mlmodel` (for errors).
    let specPath: String
    /// Folder that `@model_path` resolves to.
    let modelDir: String
    /// Weight files opened so far, by resolved path.
    var weightFiles: [String: WeightFile] = [:]
    /// Distinct record offsets referenced per weight file (checked against the header's count).
    var referencedRecords: [String: Set<UInt64>] = [:]
    /// Deepest nesting of types/values/blocks accepted (guards against hostile files).
    let maxDepth = 64

    init(specPath: String, modelDir: String) {
        self.specPath = specPath
        self.modelDir = modelDir
    }

    func invalid(_ context: String, _ reason: String) -> ModelError {
        .invalidProgram(path: specPath, context: context, reason: reason)
    }

    // MARK: - strings and arrays

    static func str(_ p: UnsafeMutablePointer<CChar>?) -> String {
        guard let p else { return "" }
        return String(cString: p)
    }

    static func array<T>(_ p: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ n: Int) -> [UnsafeMutablePointer<T>] {
        guard let p, n > 0 else { return [] }
        var out: [UnsafeMutablePointer<T>] = []
        out.reserveCapacity(n)
        for i in 0..<n { if let e = p[i] { out.append(e) } }
        return out
    }

    static func scalars<T>(_ p: UnsafeMutablePointer<T>?, _ n: Int) -> [T] {
        guard let p, n > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: p, count: n))
    }

    // MARK: - model

    mutating func model(_ m: UnsafeMutablePointer<PModel>) throws -> Model {
        let spec = m.pointee
        guard spec.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM, let prog = spec.mlprogram else {
            throw ModelError.notMLProgram(path: specPath, kind: ProtoDecoder.modelKindName(spec.type_case.rawValue))
        }
        let desc = try description(spec.description)
        let program = try self.program(prog, description: desc)
        return Model(specificationVersion: spec.specificationversion, description: desc,
                     isUpdatable: spec.isupdatable != 0, program: program, sourcePath: nil,
                     weightFiles: weightFiles)
    }

    /// The proto field name of a `Model.Type` oneof case (e.g. `neuralNetwork`).
    static func modelKindName(_ code: UInt32) -> String {
        let names: [UInt32: String] = [
            0: "none (no model type set)", 200: "pipelineClassifier", 201: "pipelineRegressor", 202: "pipeline",
            300: "glmRegressor", 301: "supportVectorRegressor", 302: "treeEnsembleRegressor",
            303: "neuralNetworkRegressor", 304: "bayesianProbitRegressor", 400: "glmClassifier",
            401: "supportVectorClassifier", 402: "treeEnsembleClassifier", 403: "neuralNetworkClassifier",
            404: "kNearestNeighborsClassifier", 500: "neuralNetwork", 501: "itemSimilarityRecommender",
            502: "mlProgram", 555: "customModel", 556: "linkedModel", 560: "classConfidenceThresholding",
            600: "oneHotEncoder", 601: "imputer", 602: "featureVectorizer", 603: "dictVectorizer",
            604: "scaler", 606: "categoricalMapping", 607: "normalizer", 609: "arrayFeatureExtractor",
            610: "nonMaximumSuppression", 900: "identity", 2000: "textClassifier", 2001: "wordTagger",
            2002: "visionFeaturePrint", 2003: "soundAnalysisPreprocessing", 2004: "gazetteer",
            2005: "wordEmbedding", 2006: "audioFeaturePrint", 3000: "serializedModel",
        ]
        return names[code] ?? "unknown model type \(code)"
    }

    // MARK: - description

    func description(_ p: UnsafeMutablePointer<CoreML__Specification__ModelDescription>?) throws -> ModelDescription {
        var d = ModelDescription()
        guard let p else { return d }
        let s = p.pointee
        d.inputs = try ProtoDecoder.array(s.input, s.n_input).map { try feature($0, "input") }
        d.outputs = try ProtoDecoder.array(s.output, s.n_output).map { try feature($0, "output") }
        d.states = try ProtoDecoder.array(s.state, s.n_state).map { try feature($0, "state") }
        d.trainingInputs = try ProtoDecoder.array(s.traininginput, s.n_traininginput).map { try feature($0, "training input") }
        d.predictedFeatureName = ProtoDecoder.str(s.predictedfeaturename)
        d.predictedProbabilitiesName = ProtoDecoder.str(s.predictedprobabilitiesname)
        d.defaultFunctionName = ProtoDecoder.str(s.defaultfunctionname)
        d.functions = try ProtoDecoder.array(s.functions, s.n_functions).map { f in
            let fd = f.pointee
            return FunctionDescription(
                name: ProtoDecoder.str(fd.name),
                inputs: try ProtoDecoder.array(fd.input, fd.n_input).map { try feature($0, "input") },
                outputs: try ProtoDecoder.array(fd.output, fd.n_output).map { try feature($0, "output") },
                states: try ProtoDecoder.array(fd.state, fd.n_state).map { try feature($0, "state") },
                predictedFeatureName: ProtoDecoder.str(fd.predictedfeaturename),
                predictedProbabilitiesName: ProtoDecoder.str(fd.predictedprobabilitiesname))
        }
        if let md = s.metadata {
            var meta = ModelMetadata()
            meta.shortDescription = ProtoDecoder.str(md.pointee.shortdescription)
            meta.versionString = ProtoDecoder.str(md.pointee.versionstring)
            meta.author = ProtoDecoder.str(md.pointee.author)
            meta.license = ProtoDecoder.str(md.pointee.license)
            meta.userDefined = ProtoDecoder.array(md.pointee.userdefined, md.pointee.n_userdefined).map {
                (key: ProtoDecoder.str($0.pointee.key), value: ProtoDecoder.str($0.pointee.value))
            }
            d.metadata = meta
        }
        return d
    }

    func sizeRange(_ p: UnsafeMutablePointer<CoreML__Specification__SizeRange>?) -> SizeRange? {
        guard let p else { return nil }
        let lower = p.pointee.lowerbound > UInt64(Int.max) ? Int.max : Int(p.pointee.lowerbound)
        let upper = p.pointee.upperbound < 0 ? nil : Int(p.pointee.upperbound)
        return SizeRange(lower: lower, upper: upper)
    }

    func arrayFeature(_ p: UnsafeMutablePointer<PArray>, _ context: String) throws -> ArrayFeature {
        let a = p.pointee
        let shape = ProtoDecoder.scalars(a.shape, a.n_shape).map { Int($0) }
        var flex = ShapeFlexibility.none
        switch a.shape_flexibility_case {
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_ENUMERATED_SHAPES:
            let shapes = a.enumeratedshapes.map { ProtoDecoder.array($0.pointee.shapes, $0.pointee.n_shapes) } ?? []
            flex = .enumerated(shapes.map { ProtoDecoder.scalars($0.pointee.shape, $0.pointee.n_shape).map { Int($0) } })
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_SHAPE_RANGE:
            let ranges = a.shaperange.map { ProtoDecoder.array($0.pointee.sizeranges, $0.pointee.n_sizeranges) } ?? []
            flex = .range(ranges.compactMap { sizeRange($0) })
        default:
            break
        }
        var def: ArrayFeature.DefaultValue?
        switch a.default_optional_value_case {
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_INT_DEFAULT_VALUE: def = .int(a.intdefaultvalue)
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_FLOAT_DEFAULT_VALUE: def = .float(a.floatdefaultvalue)
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_DOUBLE_DEFAULT_VALUE: def = .double(a.doubledefaultvalue)
        default: break
        }
        let raw = Int32(bitPattern: a.datatype.rawValue)
        if raw != 0 && ArrayDataType(rawValue: raw) == nil {
            throw ModelError.unknownDType(path: specPath, context: "\(context): multiArray dataType", code: raw)
        }
        return ArrayFeature(shape: shape, rawDataType: raw, flexibility: flex, defaultValue: def)
    }

    func feature(_ p: UnsafeMutablePointer<PFeature>, _ role: String) throws -> FeatureDescription {
        let f = p.pointee
        let name = ProtoDecoder.str(f.name)
        let context = "description \(role) '\(name)'"
        var kind = FeatureKind.unset
        var optional = false
        if let t = f.type {
            optional = t.pointee.isoptional != 0
            switch t.pointee.type_case {
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE:
                if let a = t.pointee.multiarraytype { kind = .multiArray(try arrayFeature(a, context)) }
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE:
                if let s = t.pointee.statetype, let a = s.pointee.arraytype { kind = .state(try arrayFeature(a, context)) }
                else { throw invalid(context, "state feature without an arrayType") }
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE: kind = .int64
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE: kind = .double
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE: kind = .string
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_IMAGE_TYPE:
                if let i = t.pointee.imagetype?.pointee {
                    var img = ImageFeature(width: i.width, height: i.height, colorSpace: Int32(bitPattern: i.colorspace.rawValue))
                    switch i.size_flexibility_case {
                    case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_ENUMERATED_SIZES:
                        img.sizes = i.enumeratedsizes.map { e in
                            ProtoDecoder.array(e.pointee.sizes, e.pointee.n_sizes).map { ImageFeature.ImageSize(width: $0.pointee.width, height: $0.pointee.height) }
                        }
                    case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_IMAGE_SIZE_RANGE:
                        img.widthRange = sizeRange(i.imagesizerange?.pointee.widthrange)
                        img.heightRange = sizeRange(i.imagesizerange?.pointee.heightrange)
                    default: break
                    }
                    kind = .image(img)
                }
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE:
                let keyCase = t.pointee.dictionarytype?.pointee.key_type_case
                kind = .dictionary(stringKeys: keyCase == CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE)
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_SEQUENCE_TYPE:
                let s = t.pointee.sequencetype?.pointee
                kind = .sequence(stringElements: s?.type_case == CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_STRING_TYPE,
                                 sizeRange: sizeRange(s?.sizerange))
            default:
                break
            }
        }
        return FeatureDescription(name: name, shortDescription: ProtoDecoder.str(f.shortdescription), kind: kind, isOptional: optional)
    }
}
