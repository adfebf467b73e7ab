/// Activation quantization (MIL iOS17 `quantize` / `dequantize`). Kernels:
/// `Interpreter/QuantizationKernels.swift`.
extension OpDefs {
    static func declareQuantization(_ b: inout OpTableBuilder) {
        b.family = .quantization
        b.add(OpSchema("dequantize", [req("input", .integer), req("scale", .float), opt("zero_point"), opt("axis", .integer)])) { ctx in
            let s = try ctx.shape("input")
            let dt = (try? ctx.tensor("scale"))?.dtype ?? .fp32
            return [t(dt, s)]
        }
        b.add(OpSchema("quantize", [req("input", .float), req("scale", .float), opt("zero_point"), opt("axis", .integer), req("output_dtype", .string)])) { ctx in
            let s = try ctx.shape("input")
            guard let dt = ctx.string("output_dtype").flatMap({ DType(rawValue: $0) }) else { throw Unsupported() }
            return [t(dt, s)]
        }
    }
}
