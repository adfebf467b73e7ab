/// The rule of symbolic shape inference for one op: the output types from the operands' types
/// and tracked integer values (``OpContext``). It throws ``ShapeFailure`` through `ctx.fail` for
/// a graph that cannot run, and an internal `Unsupported` when it cannot tell (the declared type
/// is then kept).
typealias ShapeRule = (inout OpContext) throws -> [SymType]

/// Collects the op table. Each family file of `OpDefs/` declares its ops through ``add(_:rule:)``
/// (a schema with its shape rule) or ``add(_:declaredTypeOnly:)`` (a schema whose outputs keep
/// the type the file declares, with the reason).
struct OpTableBuilder {
    private(set) var schemas: [String: OpSchema] = [:]
    private(set) var rules: [String: ShapeRule] = [:]
    private(set) var declaredTypeOnly: [String: String] = [:]
    /// Names declared more than once (the later declaration wins).
    private(set) var duplicates: [String] = []
    /// The family of the ops added next (``OpSchema/family``).
    var family: OpFamily = .constant

    /// Declares an op and its shape rule. With no rule, the coverage test
    /// (`OpCoverageTests`) fails until one is given or ``add(_:declaredTypeOnly:)`` is used.
    mutating func add(_ schema: OpSchema, rule: ShapeRule? = nil) {
        var s = schema
        s.family = family
        if schemas[s.name] != nil { duplicates.append(s.name) }
        schemas[s.name] = s
        rules[s.name] = rule
        declaredTypeOnly[s.name] = nil
    }

    /// Declares an op without a shape rule: shape inference keeps its declared output types.
    mutating func add(_ schema: OpSchema, declaredTypeOnly reason: String) {
        add(schema)
        declaredTypeOnly[schema.name] = reason
    }
}

/// The MIL op definitions: one file per op family (as coremltools' `mil/ops/defs`), each op's
/// schema next to its shape rule. ``OpRegistry`` is built from them once.
enum OpDefs {
    static func build() -> OpTableBuilder {
        var b = OpTableBuilder()
        declareConstants(&b)
        declareElementwise(&b)
        declareActivations(&b)
        declareReductions(&b)
        declareLinalg(&b)
        declareNormalization(&b)
        declareTransforms(&b)
        declareIndexing(&b)
        declareConvolution(&b)
        declareQuantization(&b)
        declareStateOps(&b)
        declareRecurrent(&b)
        declareImageResizing(&b)
        declareRandom(&b)
        declareLists(&b)
        declareControlFlow(&b)
        return b
    }

    // Input declarations of the schemas.
    static func x(_ d: TypeDomain = .any) -> InputSpec { InputSpec("x", d) }
    static func opt(_ n: String, _ d: TypeDomain = .any) -> InputSpec { InputSpec(n, d, optional: true) }
    static func req(_ n: String, _ d: TypeDomain = .any) -> InputSpec { InputSpec(n, d) }

    /// The rule of ops whose only output has x's type (unary, activations, normalizations).
    static let sameAsX: ShapeRule = { ctx in [.tensor(try ctx.tensor("x"))] }
}
