import GraphIR

/// Every pass forge-ir has, in one place. `forge-ir optimize --passes a,b,c` takes these names.
public enum PassRegistry {
    public static let all: [Pass.Type] = [
        DeadCodeElimination.self,
        ConstElimination.self,
        NoopElimination.self,
        ConstDeduplication.self,
        CommonSubexpressionElimination.self,
        TopologicalReorder.self,
        LowerSliceUpdate.self,
        FuseDequant.self,
        InsertStateOutputCopy.self,
        FP16SafeRMSNorm.self,
        ClampFP16Constants.self,
        WidenGatherIndex.self,
        ExactRMSNorm.self,
        LogSoftmaxStable.self,
        PadSliceUpdate.self,
        SplitRank0ExpandDims.self,
        SpecializeSequence.self,
    ]

    public static func pass(named name: String) -> Pass.Type? {
        all.first { $0.name == name }
    }

    /// Resolves a comma-separated list of pass names.
    /// - Throws: `PassError` naming the unknown pass and listing the known ones.
    public static func passes(_ names: [String]) throws -> [Pass.Type] {
        try names.map { n in
            guard let p = pass(named: n) else {
                throw PassError(pass: n, "unknown pass; known passes: \(all.map { $0.name }.joined(separator: ", "))")
            }
            return p
        }
    }
}
