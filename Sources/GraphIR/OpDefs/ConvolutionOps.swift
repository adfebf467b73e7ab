/// Convolution and pooling (MIL `conv`, `pool`). Kernels: `Interpreter/ConvKernels.swift`.
extension OpDefs {
    static func declareConvolution(_ b: inout OpTableBuilder) {
        b.family = .convolution
        b.add(OpSchema("conv", [x(.float), req("weight", .float), opt("bias", .float), opt("strides", .integer), opt("pad_type", .string),
                              opt("pad", .integer), opt("dilations", .integer), opt("groups", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        b.add(OpSchema("conv_transpose", [x(.float), req("weight", .float), opt("bias", .float), opt("pad", .integer), opt("output_shape", .integer),
                                        opt("pad_type", .string), opt("strides", .integer), opt("dilations", .integer), opt("groups", .integer)]),
              declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        for op in ["avg_pool", "max_pool", "l2_pool"] {
            b.add(OpSchema(op, [x(.float), req("kernel_sizes", .integer), opt("strides", .integer), opt("pad_type", .string), opt("pad", .integer),
                              opt("exclude_padding_from_average", .bool), opt("ceil_mode", .bool)]),
                  declaredTypeOnly: "no symbolic rule yet: the declared type is used")
        }
    }
}
