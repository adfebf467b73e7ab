/// The table of MIL ops forge-ir knows (``OpSchema`` per op). The verifier, the printer,
/// the passes and the interpreter all read this one table.
public enum OpRegistry {
    public static func schema(_ op: String) -> OpSchema? { table[op] }
    public static var allOps: [String] { table.keys.sorted() }
    /// Names declared more than once (the later declaration would win): must stay empty.
    public static var duplicateNames: [String] { built.duplicates }

    /// Ops without a shape rule: shape inference keeps the type the file declares for their
    /// outputs, and the reason. The coverage test fails on a schema with neither.
    public static var declaredTypeOnly: [String: String] { built.declaredTypeOnly }

    static var table: [String: OpSchema] { built.schemas }
    static func shapeRule(_ op: String) -> ShapeRule? { built.rules[op] }

    /// Declared family by family in `OpDefs/` (schemas and shape rules side by side).
    private static let built = OpDefs.build()
}
