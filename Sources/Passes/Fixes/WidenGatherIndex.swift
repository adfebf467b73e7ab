import GraphIR

/// `widen_gather_index`: removes an integer cast that narrows the indices of a `gather` below
/// the size of its table (coremltools#2222: int32 token ids cast to int16 before an embedding
/// lookup of more than 32 767 rows wrap to negative ids). The gather reads the uncast int32
/// indices; the cast is left for `dead_code_elimination`.
///
/// ```
/// before:
///   tensor<int16, [1, ?]> ids16 = cast(x = input_ids, dtype = "int16")
///   tensor<fp16, [1, ?, 64]> h = gather(x = table /* [40000, 64] */, indices = ids16, axis = 0)
/// after:
///   tensor<fp16, [1, ?, 64]> h = gather(x = table, indices = input_ids, axis = 0)
/// ```
/// Casts whose table fits the narrow type (coremltools' own `add_int16_cast` form) are kept.
public struct WidenGatherIndex: OpRewritePass {
    public static let info = PassInfo("widen_gather_index", "Drop an int16/int8 cast of gather indices when the table has more rows than the narrow type holds (#2222).")
    public init() {}

    public static func isAnchor(_ op: Op) -> Bool { op.type == "gather" }

    public func rewrite(_ g: Op, in site: RewriteSite) {
        guard let cast = g.producer(of: "indices", type: "cast"),
              let dtName = cast.operand("dtype")?.constValue?.stringValue,
              let dt = DType(rawValue: dtName), let limit = PatternChecks.narrow[dt],
              let x = cast.operand("x")?.value, let xt = x.type.tensorType, xt.dtype == .int32,
              let rows = PatternChecks.tableRows(g), rows > limit + 1 else { return }
        g.setInput("indices", .value(x))
        site.count("gather index casts removed")
    }
}
