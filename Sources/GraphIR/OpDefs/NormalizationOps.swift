/// Normalizations (MIL `normalization`): every output has x's type. Kernels:
/// `Interpreter/NormKernels.swift`.
extension OpDefs {
    static func declareNormalization(_ b: inout OpTableBuilder) {
        b.family = .normalization
        b.add(OpSchema("layer_norm", [x(.float), opt("axes", .integer), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]), rule: sameAsX)
        b.add(OpSchema("instance_norm", [x(.float), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]), rule: sameAsX)
        b.add(OpSchema("batch_norm", [x(.float), req("mean", .float), req("variance", .float), opt("gamma", .float), opt("beta", .float), opt("epsilon", .float)]), rule: sameAsX)
        b.add(OpSchema("l2_norm", [x(.float), opt("axes", .integer), opt("epsilon", .float)]), rule: sameAsX)
        b.add(OpSchema("local_response_norm", [x(.float), req("size", .integer), opt("alpha", .float), opt("beta", .float), opt("k", .float)]), rule: sameAsX)
    }
}
