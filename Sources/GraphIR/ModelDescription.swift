/// Core ML `ArrayFeatureType.ArrayDataType` of a model-description multi-array.
public enum ArrayDataType: Int32, Sendable, CaseIterable {
    case float32 = 65568
    case double = 65600
    case float16 = 65552
    case int32 = 131104
    case int8 = 131080

    /// The MIL dtype of the same element type.
    public var dtype: DType {
        switch self {
        case .float32: return .fp32
        case .double: return .fp64
        case .float16: return .fp16
        case .int32: return .int32
        case .int8: return .int8
        }
    }
}

/// How a multi-array's shape may vary (Core ML `ShapeFlexibility`).
public enum ShapeFlexibility: Hashable, Sendable {
    case none
    /// One `(lower, upper)` per dimension; `upper == nil` is unbounded (−1 in the file).
    case range([SizeRange])
    /// The listed shapes (file order: coremltools lists the default first).
    case enumerated([[Int]])
}

/// Core ML `SizeRange`.
public struct SizeRange: Hashable, Sendable {
    public var lower: Int
    public var upper: Int?
    public init(lower: Int, upper: Int?) {
        self.lower = lower
        self.upper = upper
    }
    public var isFixed: Bool { upper == lower }
}

/// A multi-array feature (also the wrapped type of a state).
public struct ArrayFeature: Hashable, Sendable {
    /// The default shape (`shape` field); may be empty (coremltools omits it for flexible outputs).
    public var shape: [Int]
    /// nil when the file has `INVALID_ARRAY_DATA_TYPE` (0) or an unknown code (kept raw).
    public var dataType: ArrayDataType?
    public var rawDataType: Int32
    public var flexibility: ShapeFlexibility
    public enum DefaultValue: Hashable, Sendable { case int(Int32), float(Float), double(Double) }
    public var defaultValue: DefaultValue?

    public init(shape: [Int], dataType: ArrayDataType, flexibility: ShapeFlexibility = .none, defaultValue: DefaultValue? = nil) {
        self.shape = shape
        self.dataType = dataType
        self.rawDataType = dataType.rawValue
        self.flexibility = flexibility
        self.defaultValue = defaultValue
    }

    public init(shape: [Int], rawDataType: Int32, flexibility: ShapeFlexibility, defaultValue: DefaultValue?) {
        self.shape = shape
        self.dataType = ArrayDataType(rawValue: rawDataType)
        self.rawDataType = rawDataType
        self.flexibility = flexibility
        self.defaultValue = defaultValue
    }

    /// The constraint on dimension `axis`, or nil when that dimension is fixed.
    public func constraint(axis: Int) -> DimConstraint? {
        switch flexibility {
        case .none:
            return nil
        case let .range(ranges):
            guard axis < ranges.count, !ranges[axis].isFixed else { return nil }
            return .range(lower: ranges[axis].lower, upper: ranges[axis].upper)
        case let .enumerated(shapes):
            var values: [Int] = []
            for s in shapes where axis < s.count && !values.contains(s[axis]) { values.append(s[axis]) }
            return values.count > 1 ? .enumerated(values) : nil
        }
    }

    /// Rank from the default shape, or from the flexibility information.
    public var rank: Int {
        if !shape.isEmpty { return shape.count }
        switch flexibility {
        case .none: return 0
        case let .range(r): return r.count
        case let .enumerated(s): return s.first?.count ?? 0
        }
    }
}

/// Core ML `ImageFeatureType`; `Interpreter.ImageInput` turns pixels into the function input.
public struct ImageFeature: Hashable, Sendable {
    public var width: Int64
    public var height: Int64
    public var colorSpace: Int32
    public struct ImageSize: Hashable, Sendable {
        public var width: UInt64
        public var height: UInt64
        public init(width: UInt64, height: UInt64) { self.width = width; self.height = height }
    }
    public var sizes: [ImageSize]?
    public var widthRange: SizeRange?
    public var heightRange: SizeRange?

    /// `ImageFeatureType.ColorSpace` in words: `grayscale` (10), `RGB` (20), `BGR` (30),
    /// `grayscale fp16` (40), else `color space N`.
    public var colorSpaceName: String {
        [10: "grayscale", 20: "RGB", 30: "BGR", 40: "grayscale fp16"][colorSpace] ?? "color space \(colorSpace)"
    }

    public init(width: Int64, height: Int64, colorSpace: Int32, sizes: [ImageSize]? = nil, widthRange: SizeRange? = nil, heightRange: SizeRange? = nil) {
        self.width = width
        self.height = height
        self.colorSpace = colorSpace
        self.sizes = sizes
        self.widthRange = widthRange
        self.heightRange = heightRange
    }
}

/// A Core ML `FeatureType`.
public enum FeatureKind: Hashable, Sendable {
    case multiArray(ArrayFeature)
    case state(ArrayFeature)
    case int64
    case double
    case string
    case image(ImageFeature)
    /// `dictionaryType`; `stringKeys` false means int64 keys.
    case dictionary(stringKeys: Bool)
    /// `sequenceType`; `stringElements` false means int64 elements.
    case sequence(stringElements: Bool, sizeRange: SizeRange?)
    /// No type set in the file.
    case unset
}

/// A Core ML `FeatureDescription`: an input, output or state of the model.
public struct FeatureDescription: Hashable, Sendable {
    public var name: String
    public var shortDescription: String
    public var kind: FeatureKind
    public var isOptional: Bool

    public init(name: String, shortDescription: String = "", kind: FeatureKind, isOptional: Bool = false) {
        self.name = name
        self.shortDescription = shortDescription
        self.kind = kind
        self.isOptional = isOptional
    }

    /// The array feature of a multi-array or state, else nil.
    public var array: ArrayFeature? {
        switch kind {
        case let .multiArray(a), let .state(a): return a
        default: return nil
        }
    }
}

/// The description of one function of a multi-function model (`FunctionDescription`).
public struct FunctionDescription: Hashable, Sendable {
    public var name: String
    public var inputs: [FeatureDescription]
    public var outputs: [FeatureDescription]
    public var states: [FeatureDescription]
    public var predictedFeatureName: String
    public var predictedProbabilitiesName: String

    public init(name: String, inputs: [FeatureDescription], outputs: [FeatureDescription], states: [FeatureDescription], predictedFeatureName: String = "", predictedProbabilitiesName: String = "") {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.states = states
        self.predictedFeatureName = predictedFeatureName
        self.predictedProbabilitiesName = predictedProbabilitiesName
    }
}

/// Core ML `Metadata`.
public struct ModelMetadata: Hashable, Sendable {
    public var shortDescription = ""
    public var versionString = ""
    public var author = ""
    public var license = ""
    /// `userDefined`, in file order.
    public var userDefined: [(key: String, value: String)] = []

    public init() {}

    public static func == (a: ModelMetadata, b: ModelMetadata) -> Bool {
        a.shortDescription == b.shortDescription && a.versionString == b.versionString && a.author == b.author
            && a.license == b.license && a.userDefined.map(\.key) == b.userDefined.map(\.key)
            && a.userDefined.map(\.value) == b.userDefined.map(\.value)
    }
    public func hash(into h: inout Hasher) { h.combine(author); h.combine(shortDescription) }
}

/// Core ML `ModelDescription`.
public struct ModelDescription: Hashable, Sendable {
    public var inputs: [FeatureDescription] = []
    public var outputs: [FeatureDescription] = []
    public var states: [FeatureDescription] = []
    public var predictedFeatureName = ""
    public var predictedProbabilitiesName = ""
    public var trainingInputs: [FeatureDescription] = []
    /// Non-empty for multi-function models (top-level inputs/outputs then empty).
    public var functions: [FunctionDescription] = []
    public var defaultFunctionName = ""
    public var metadata = ModelMetadata()

    public init() {}

    /// The interface of function `name`: its `FunctionDescription`, or the top-level
    /// inputs/outputs/states for a single-function model.
    public func interface(of name: String) -> FunctionDescription {
        if let f = functions.first(where: { $0.name == name }) { return f }
        return FunctionDescription(name: name, inputs: inputs, outputs: outputs, states: states,
                                   predictedFeatureName: predictedFeatureName,
                                   predictedProbabilitiesName: predictedProbabilitiesName)
    }
}
