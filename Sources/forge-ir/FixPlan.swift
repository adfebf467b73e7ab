import GraphIR
import Passes

/// What `optimize --fix` applies: the fix passes of a diagnosis, in an order where each one
/// sees the graph as the next expects it (bounds padded before writes are lowered, writes
/// lowered before the rank-0 split, norms made exact before they are made fp16-safe).
enum FixPlan {
    static let order = [
        "pad_slice_update", "lower_slice_update", "split_rank0_expand_dims", "widen_gather_index",
        "exact_rms_norm", "fp16_safe_rms_norm", "log_softmax_stable", "insert_state_output_copy",
        "clamp_fp16_constants", "specialize_sequence",
    ]

    /// The distinct fix passes the findings name, in ``order`` (unknown names last).
    static func passes(for d: Diagnosis) -> [String] {
        let names = Set(d.findings.compactMap(\.fixPass))
        return order.filter { names.contains($0) } + names.subtracting(order).sorted()
    }

    /// The lines `optimize --fix` prints: each pass applied, the findings it was for, and
    /// what is left (findings whose pass is not available, or that the pass did not clear).
    static func report(before: Diagnosis, after: Diagnosis, applied: [String], fixedFor: [String: [String]], manager: PassManager) -> String {
        var out = "fixed:\n"
        if applied.isEmpty { out += "  nothing: no finding has a fix pass\n" }
        for name in applied {
            let codes = fixedFor[name] ?? []
            let n = before.findings.filter { $0.fixPass == name }.count
            let left = after.findings.filter { codes.contains($0.code) }.count
            let stats = manager.records.filter { $0.name == name }.flatMap { $0.result.statistics.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" } }
            out += "  \(name): \(n) finding\(n == 1 ? "" : "s") (\(codes.joined(separator: ", ")))"
            out += stats.isEmpty ? "" : " — " + stats.joined(separator: ", ")
            out += left == 0 ? "\n" : "; \(left) left\n"
        }
        let unavailable = before.findings.filter { f in f.fixPass.map { PassRegistry.pass(named: $0) == nil } ?? false }
        if !unavailable.isEmpty {
            let codes = Array(Set(unavailable.map { "\($0.code) (\($0.fixPass!))" })).sorted()
            out += "not fixed (pass not available yet): " + codes.joined(separator: ", ") + "\n"
        }
        out += "after: \(after.errorCount) error\(after.errorCount == 1 ? "" : "s"), \(after.warningCount) warning\(after.warningCount == 1 ? "" : "s"), \(after.infoCount) note\(after.infoCount == 1 ? "" : "s") (forge-ir diagnose OUT for details)"
        return out
    }
}
