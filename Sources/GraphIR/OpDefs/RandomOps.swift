/// Random draws (MIL `random`). Kernels: `Interpreter/RandomKernels.swift` (what cannot match a
/// device bit for bit: README, Conformance).
extension OpDefs {
    static func declareRandom(_ b: inout OpTableBuilder) {
        b.family = .random
        // Random (iOS15).
        b.add(OpSchema("random_uniform", [req("shape", .integer), opt("low", .float), opt("high", .float), opt("seed", .integer)]),
              declaredTypeOnly: "a draw whose shape may come from a run-time tensor: the declared type is used")
        b.add(OpSchema("random_normal", [req("shape", .integer), opt("mean", .float), opt("stddev", .float), opt("seed", .integer)]),
              declaredTypeOnly: "a draw whose shape may come from a run-time tensor: the declared type is used")
        b.add(OpSchema("random_bernoulli", [req("shape", .integer), opt("prob", .float), opt("seed", .integer)]),
              declaredTypeOnly: "a draw whose shape may come from a run-time tensor: the declared type is used")
        b.add(OpSchema("random_categorical", [x(.float), opt("mode", .string), opt("size", .integer), opt("seed", .integer)]),
              declaredTypeOnly: "x.shape[:-1] + [size]: the declared type is used")
    }
}
