import GraphIR

/// Named pass pipelines: plain ordered lists. The comment on each entry says why it stands where
/// it does.
public enum Pipelines {
    public static let names = ["default", "cleanup", "empty"]

    public static func pipeline(named name: String) -> [Pass.Type]? {
        switch name {
        case "default": return defaultPipeline
        case "cleanup": return cleanup
        case "empty": return []
        default: return nil
        }
    }

    /// Graph fixes first, then the cleanup they leave work for.
    public static let defaultPipeline: [Pass.Type] = [
        LowerSliceUpdate.self,               // before folding: it reads the begin/end construction as built
        FuseDequant.self,                    // before folding: const_elimination would expand dequantize(const) into a dense weight
    ] + cleanup

    /// Simplification without changing what the graph computes.
    public static let cleanup: [Pass.Type] = [
        ConstElimination.self,               // first: folding exposes no-ops (x + 0) and duplicates
        NoopElimination.self,                // after folding, so constant operands are visible as consts
        ConstDeduplication.self,             // before CSE: merged consts make more ops identical
        CommonSubexpressionElimination.self,
        DeadCodeElimination.self,            // after every pass above that orphans ops
        TopologicalReorder.self,             // last: order only, on the final op set
    ]
}
