extension ExecutionPlan {
    /// `--profile` text: per fusion kind (`attention`, `scaled_dot_product_attention`,
    /// `state_write`), how many sites fused and how many of their calls ran fused or fell back
    /// to the original ops (with why), and for the sites that did not fuse, why (one short
    /// reason each, counted). Empty when the plan has no candidate.
    public func fusionReport() -> String {
        guard !fusionSites.isEmpty else { return "" }
        var kinds: [String] = []
        for s in fusionSites where !kinds.contains(s.kind) { kinds.append(s.kind) }
        let width = max(30, (kinds.map(\.count).max() ?? 0) + 2)
        var out = "fusion" + String(repeating: " ", count: width - 6) + "sites fused · calls fused / ran the original ops\n"
        for kind in kinds {
            let sites = fusionSites.filter { $0.kind == kind }
            let fused = sites.filter { $0.reason == nil }
            let calls = fused.reduce(0) { $0 + $1.fusedCalls }
            var fallbacks: [String: Int] = [:]
            for s in fused { for (r, n) in s.fallbacks { fallbacks[r, default: 0] += n } }
            let fell = fallbacks.values.reduce(0, +)
            out += kind + String(repeating: " ", count: max(1, width - kind.count))
                + "\(fused.count) of \(sites.count) · \(calls) / \(fell)\n"
            for (r, n) in fallbacks.sorted(by: { $0.value > $1.value }) { out += "    ran unfused \(n)×: \(r)\n" }
            var reasons: [String: Int] = [:]
            for s in sites { if let r = s.reason { reasons[r, default: 0] += 1 } }
            for (r, n) in reasons.sorted(by: { $0.value > $1.value }) { out += "    not fused, \(n) site\(n == 1 ? "" : "s"): \(r)\n" }
        }
        return out
    }
}
