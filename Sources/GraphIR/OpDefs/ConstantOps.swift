/// `const` and the compressed constants (`constexpr_*`, iOS16 with parameters as attributes, iOS18
/// with parameters as inputs): evaluated once when a plan is built. A constexpr op's output is a
/// constant whose type the file states exactly.
extension OpDefs {
    static func declareConstants(_ b: inout OpTableBuilder) {
        b.add(OpSchema("const", [], isConstant: true)) { ctx in
            guard let c = ctx.op.attribute("val") else { throw Unsupported() }
            let ty = ctx.state.symType(c.type, valueName: ctx.op.outputs.first?.name ?? "const")
            ctx.setValue(ContextHelpers.intValue(c))
            return [ty]
        }

        b.family = .compression
        b.add(OpSchema("constexpr_blockwise_shift_scale", [req("data"), req("scale", .float), opt("offset")], isConstant: true, halfViewInputs: ["scale"]),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_lut_to_dense", [opt("indices"), opt("lut"), opt("vector_axis", .integer), opt("shape", .integer)], isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_sparse_to_dense", [opt("nonzero_data"), opt("mask"), opt("shape", .integer)], isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_affine_dequantize", [opt("quantized_data"), opt("zero_point"), opt("scale"), opt("axis", .integer)],
                     parametersInAttributes: true, isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_cast", [opt("source_val"), opt("output_dtype", .string)], isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_lut_to_sparse", [req("indices_mask"), req("indices_nonzero_data"), req("lut"), opt("vector_axis", .integer)], isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
        b.add(OpSchema("constexpr_sparse_blockwise_shift_scale", [req("data_mask"), req("nonzero_data"), req("scale", .float), opt("offset")], isConstant: true),
              declaredTypeOnly: "a constant: its declared type is exact")
    }
}
