/// Activations (MIL `activation`): every output has x's type. Kernels:
/// `Interpreter/ActivationKernels.swift`.
extension OpDefs {
    static func declareActivations(_ b: inout OpTableBuilder) {
        b.family = .activation
        for op in ["relu", "relu6", "sigmoid", "silu", "softplus", "softsign"] { b.add(OpSchema(op, [x(.float)]), rule: sameAsX) }
        b.add(OpSchema("gelu", [x(.float), opt("mode", .string)]), rule: sameAsX)
        b.add(OpSchema("elu", [x(.float), opt("alpha", .float)]), rule: sameAsX)
        b.add(OpSchema("leaky_relu", [x(.float), opt("alpha", .float)]), rule: sameAsX)
        b.add(OpSchema("thresholded_relu", [x(.float), opt("alpha", .float)]), rule: sameAsX)
        b.add(OpSchema("prelu", [x(.float), req("alpha", .float)]), rule: sameAsX)
        b.add(OpSchema("clamped_relu", [x(.float), req("alpha", .float), req("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("sigmoid_hard", [x(.float), opt("alpha", .float), opt("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("scaled_tanh", [x(.float), opt("alpha", .float), opt("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("linear_activation", [x(.float), req("alpha", .float), opt("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("softplus_parametric", [x(.float), req("alpha", .float), req("beta", .float)]), rule: sameAsX)
        b.add(OpSchema("softmax", [x(.float), opt("axis", .integer)]), rule: sameAsX)
    }
}
