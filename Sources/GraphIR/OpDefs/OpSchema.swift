/// The element types an op input accepts.
public enum TypeDomain: Sendable, Equatable {
    /// Any tensor dtype.
    case any
    /// fp16 / fp32 (the MIL op reference's `T ∈ {fp16, fp32}`).
    case float
    /// int8/16/32/64 and unsigned integers.
    case integer
    case bool
    case string
    /// fp16, fp32, int32 (and the other arithmetic types).
    case numeric
    /// A `state<tensor<…>>`.
    case state

    public func admits(_ type: MILType) -> Bool {
        if self == .state { return type.isState }
        guard let t = type.tensorType else { return self == .any }
        switch self {
        case .any: return true
        case .float: return t.dtype.isFloat
        case .integer: return t.dtype.isInteger
        case .bool: return t.dtype == .bool
        case .string: return t.dtype == .string
        case .numeric: return t.dtype.isFloat || t.dtype.isInteger
        case .state: return false
        }
    }
}

/// One named input of an op.
public struct InputSpec: Sendable {
    public var name: String
    public var domain: TypeDomain
    public var optional: Bool
    /// Takes a tuple of values (`concat.values`).
    public var variadic: Bool

    public init(_ name: String, _ domain: TypeDomain = .any, optional: Bool = false, variadic: Bool = false) {
        self.name = name
        self.domain = domain
        self.optional = optional
        self.variadic = variadic
    }
}

/// The op families of the MIL op reference (`coremltools.converters.mil.mil.ops.defs.iOS15`
/// module names). Kernel files, shape-rule sections and test vectors are organised by family.
public enum OpFamily: String, Sendable, CaseIterable {
    case constant, elementwise, activation, reduction, linalg, normalization, transform
    case indexing, convolution, image, recurrent, quantization, compression, state, controlFlow, list, random
}

/// How an op touches a `state<tensor<…>>` input.
public enum StateAccess: Sendable, Equatable {
    case none
    /// Reads the state (`read_state`): never merged with another read, never folded.
    case read
    /// Writes the state (`write_state`, `coreml_update_state`): a side effect.
    case write
}

/// The declaration of a MIL op: its inputs (iOS15–iOS18 opsets, union of the versions),
/// whether its parameters live in attributes (iOS16 constexpr ops) and its traits.
/// Source: the MIL op reference of coremltools (`coremltools.converters.mil.mil.ops.defs`).
public struct OpSchema: Sendable {
    public var name: String
    public var inputs: [InputSpec]
    public var family: OpFamily
    /// iOS16 constexpr ops keep their parameters as attributes (inputs empty).
    public var parametersInAttributes: Bool
    /// Has an effect beyond its outputs (state writes): never removed as dead code.
    public var hasSideEffects: Bool
    /// Evaluated at compile time from constants (`const`, `constexpr_*`).
    public var isConstant: Bool
    /// Carries nested blocks (`cond`, `while_loop`) and takes inputs not listed here.
    public var isControlFlow: Bool
    public var stateAccess: StateAccess
    /// Inputs whose kernel computes directly on a compressed weight (int8/int4 blocks with their
    /// scales, read in place from `weight.bin`) instead of a dense copy: `linear.weight`,
    /// `matmul.y`, `gather.x`.
    public var compressedInputs: Set<String>
    /// Inputs whose fp16 constants the kernel reads in place as binary16 (never widened).
    public var halfViewInputs: Set<String>
    /// The shape rule of symbolic shape inference; nil: the op keeps the type the file declares
    /// (it is then listed in ``OpRegistry/declaredTypeOnly``).
    var shapeRule: ShapeRule? { OpRegistry.shapeRule(name) }
    public var hasShapeRule: Bool { shapeRule != nil }

    public init(_ name: String, _ inputs: [InputSpec], family: OpFamily = .elementwise, parametersInAttributes: Bool = false,
                hasSideEffects: Bool = false, isConstant: Bool = false, isControlFlow: Bool = false,
                stateAccess: StateAccess = .none, compressedInputs: Set<String> = [], halfViewInputs: Set<String> = []) {
        self.name = name
        self.inputs = inputs
        self.family = family
        self.parametersInAttributes = parametersInAttributes
        self.hasSideEffects = hasSideEffects
        self.isConstant = isConstant
        self.isControlFlow = isControlFlow
        self.stateAccess = stateAccess
        self.compressedInputs = compressedInputs
        self.halfViewInputs = halfViewInputs
    }

    public func input(_ name: String) -> InputSpec? { inputs.first { $0.name == name } }
}
