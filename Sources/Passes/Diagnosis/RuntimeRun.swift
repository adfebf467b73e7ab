import GraphIR

/// A runtime check diagnose ran, and its outcome (reported next to the findings).
public struct RuntimeRun: Sendable {
    /// `fp16_overflow` or `s1_mismatch`: the finding code the check can produce.
    public var check: String
    public var function: String
    /// `fp16` or `fp32`.
    public var precision: String
    /// The calls, in words.
    public var inputs: String
    public var ok: Bool
    /// One line: what was measured.
    public var summary: String
    public init(check: String, function: String, precision: String, inputs: String, ok: Bool, summary: String) {
        self.check = check
        self.function = function
        self.precision = precision
        self.inputs = inputs
        self.ok = ok
        self.summary = summary
    }
}

extension Diagnosis {
    /// Adds a runtime check's outcome and findings (findings stay sorted: errors first).
    public mutating func add(_ run: RuntimeRun, findings more: [Finding]) {
        runs.append(run)
        findings = Diagnoser.stableSort(findings + more)
    }
}
