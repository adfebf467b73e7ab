import GraphIR

/// What to check.
public struct DiagnoseOptions: Sendable {
    /// Sizes of the sequence dimension to evaluate (`--seq`); nil: 1, the bounds, the default
    /// and every enumerated size.
    public var seq: [Int]?
    /// Functions to check (nil: all).
    public var functions: [String]?
    public init(seq: [Int]? = nil, functions: [String]? = nil) {
        self.seq = seq
        self.functions = functions
    }
}

/// The result of one binding's evaluation.
public struct BindingResult: Sendable {
    public var binding: [String: Int]
    /// nil when every op inferred clean.
    public var error: String?
    public var opsEvaluated: Int
}

/// What diagnose found in one function.
public struct FunctionDiagnosis {
    public var name: String
    public var symbols: [SymbolClass]
    /// The symbol `--seq` binds, if any.
    public var sequenceSymbol: String?
    public var results: [BindingResult]
    /// Bindings not evaluated: no call the model's contract allows has those sizes
    /// (``ContractBindings``).
    public var skipped: [SkippedBinding] = []
}

/// Everything diagnose found in a model.
public struct Diagnosis {
    public var functions: [FunctionDiagnosis] = []
    public var findings: [Finding] = []
    /// Runtime checks that ran (`--precision fp16`, `--dynamic`), in order.
    public var runs: [RuntimeRun] = []
    /// One-line reminders printed before the summary (text only), e.g. the run-time checks a
    /// stateful LLM was not given.
    public var hints: [String] = []
    public var errorCount: Int { findings.filter { $0.severity == .error }.count }
    public var warningCount: Int { findings.filter { $0.severity == .warning }.count }
    public var infoCount: Int { findings.filter { $0.severity == .info }.count }
}

/// Static diagnosis of why a model fails at some sequence length: shape inference at every
/// interesting binding of the flexible dimensions, plus the state and flexible-shape patterns
/// Core ML is known to reject. Reads the IR; never changes it.
public enum Diagnoser {
    public static func diagnose(_ model: Model, options: DiagnoseOptions = DiagnoseOptions()) -> Diagnosis {
        var d = Diagnosis()
        for f in model.program.functions {
            if let only = options.functions, !only.contains(f.name) { continue }
            let iface = model.description.interface(of: f.name)
            let (fd, findings) = diagnose(function: f, interface: iface, options: options)
            d.functions.append(fd)
            d.findings += findings
        }
        d.findings = stableSort(d.findings)
        return d
    }

    static func stableSort(_ f: [Finding]) -> [Finding] {
        f.enumerated().sorted { a, b in
            if a.element.severity != b.element.severity { return a.element.severity < b.element.severity }
            return a.offset < b.offset
        }.map(\.element)
    }

    public static func diagnose(function f: Function, interface: FunctionDescription, options: DiagnoseOptions) -> (FunctionDiagnosis, [Finding]) {
        let inference = ShapeInference(function: f, interface: interface)
        var findings: [Finding] = []
        let seqSymbol = sequenceSymbol(inference)

        // Flexible-shape declarations.
        findings += FlexibleShapeChecks.run(function: f, interface: interface, inference: inference)
        // State patterns.
        findings += StateChecks.run(function: f, interface: interface, inference: inference)
        // fp16 idioms visible without running anything.
        findings += NumericChecks.run(function: f, inference: inference)
        // The catalogue's graph patterns.
        findings += PatternChecks.run(function: f, interface: interface)

        // Symbolic run: errors at every binding, and warnings.
        for issue in inference.symbolic.issues {
            findings.append(finding(issue, function: f, binding: nil))
        }

        // Concrete runs.
        var results: [BindingResult] = []
        let (candidates, rejected) = bindingsToEvaluate(inference, seqSymbol: seqSymbol, seq: options.seq)
        let (bindings, skipped) = ContractBindings.filter(candidates, offsets: ContractBindings.writeOffsets(f, inference),
                                                          aligned: ContractBindings.alignedSymbols(inference))
        for (b, why) in rejected {
            findings.append(Finding(.error, "binding_out_of_range", function: f.name, binding: b,
                                    message: why, fix: "Export with a wider RangeDim / more EnumeratedShapes, or use shorter queries."))
        }
        if options.seq != nil, seqSymbol == nil, let fixed = fixedSequence(f) {
            let longer = options.seq!.filter { $0 != fixed.size }
            if !longer.isEmpty {
                findings.append(Finding(.error, "sequence_fixed", function: f.name,
                                        shapes: [ShapeNote(fixed.input, fixed.type)],
                                        message: "the sequence dimension of '\(fixed.input)' is fixed to \(fixed.size); a query of length \(longer.map(String.init).joined(separator: ", ")) cannot be fed to function '\(f.name)' (a warm-up or prefill at that length fails)",
                                        fix: "Feed it \(fixed.size) token(s) at a time, use a prefill function with a RangeDim sequence, or re-export with ct.RangeDim for the sequence."))
            }
        }
        var merged: [String: Int] = [:]
        for b in bindings {
            let r = inference.infer(binding: b)
            if let e = r.firstError {
                results.append(BindingResult(binding: b, error: e.description, opsEvaluated: r.opsEvaluated))
                let key = "\(e.kind.rawValue)|\(e.opName)"
                if let i = merged[key] {
                    findings[i].bindings.append(b)
                } else if let i = findings.firstIndex(where: { $0.code == e.kind.rawValue && $0.op?.name == e.opName && $0.binding == nil }) {
                    // Already reported as failing at every binding.
                    findings[i].bindings.append(b)
                    merged[key] = i
                } else {
                    merged[key] = findings.count
                    findings.append(finding(e, function: f, binding: b))
                }
            } else {
                results.append(BindingResult(binding: b, error: nil, opsEvaluated: r.opsEvaluated))
            }
        }
        // Window and cast overflows grow with the size: find where they start.
        for i in findings.indices where ["index_out_of_range", "cast_overflow"].contains(findings[i].code) {
            guard let b = findings[i].binding, b.count == 1, let (name, bad) = b.first,
                  let good = results.filter({ $0.error == nil }).compactMap({ $0.binding[name] }).filter({ $0 < bad }).max() else { continue }
            var lo = good, hi = bad   // lo passes, hi fails
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2
                if inference.infer(binding: [name: mid]).firstError == nil { lo = mid } else { hi = mid }
            }
            findings[i].message += " (fails from \(name)=\(hi); \(name)=\(lo) is the largest size that infers clean)"
        }
        return (FunctionDiagnosis(name: f.name, symbols: inference.symbols, sequenceSymbol: seqSymbol, results: results, skipped: skipped), findings)
    }

    static func finding(_ issue: ShapeIssue, function f: Function, binding: [String: Int]?) -> Finding {
        let function = f.name
        let severity: Finding.Severity
        var fix = ""
        var pass: String?
        switch issue.kind {
        case .shapeError, .zeroDimension, .castOverflow, .indexOutOfRange, .sliceUpdateRank: severity = .error
        case .squeezeFlexible, .broadcastSize1, .declaredTypeMismatch: severity = .warning
        case .shapeUnknown: severity = .info
        }
        switch issue.kind {
        case .shapeError: fix = "Make the shapes agree at this size: check reshape targets, broadcast operands and the export's flexible dimensions."
        case .zeroDimension: fix = "Core ML does not run zero-sized tensors: raise the RangeDim lower bound or guard the slice."
        case .castOverflow: fix = "Cast lengths and positions to int32, not a 16- or 8-bit type."
        case .indexOutOfRange: fix = "The write window must fit the state: bound the sequence dimension by the state length, or grow the state."
        case .sliceUpdateRank:
            fix = "Give slice_update one begin/end entry per axis of the state."
            pass = PadSliceUpdate.name
        case .squeezeFlexible: fix = "Give squeeze explicit axes."
        case .broadcastSize1: fix = "Use the same flexible dimension on both operands (or an explicit tile/expand)."
        case .declaredTypeMismatch: fix = "The file's declared type is stale; re-run type inference (or report a forge-ir rule bug)."
        case .shapeUnknown: fix = "Nothing to do for Core ML; shapes after this op are checked only where the file declares them."
        }
        return Finding(severity, issue.kind.rawValue, function: function,
                       op: Finding.OpRef(name: issue.opName, type: issue.opType, index: issue.opIndex),
                       binding: binding, shapes: ShapeNote.notes(issue, in: f), message: issue.message, fixPass: pass, fix: fix)
    }

    /// The flexible dimension `--seq` sets: the one `input_ids` (or `tokens`) carries, else
    /// the only one.
    static func sequenceSymbol(_ inference: ShapeInference) -> String? {
        for c in inference.symbols where c.members.contains(where: { ["input_ids", "inputIds", "tokens", "input_tokens", "ids"].contains($0.input) }) {
            return c.name
        }
        return inference.symbols.count == 1 ? inference.symbols[0].name : nil
    }

    /// A token input whose sequence axis is fixed (the decode function of a multifunction model).
    static func fixedSequence(_ f: Function) -> (input: String, size: Int, type: TensorType)? {
        for v in f.inputs where ["input_ids", "inputIds", "tokens", "input_tokens", "ids"].contains(v.name) {
            if let t = v.type.tensorType, t.rank == 2, let s = t.shape[1].fixedValue { return (v.name, s, t) }
        }
        return nil
    }

    /// The bindings to evaluate, and requested ones the declarations reject.
    static func bindingsToEvaluate(_ inference: ShapeInference, seqSymbol: String?, seq: [Int]?) -> ([[String: Int]], [([String: Int], String)]) {
        var candidates: [(String, [Int], Int)] = []   // name, values, default
        var rejected: [([String: Int], String)] = []
        for c in inference.symbols {
            var values: [Int] = []
            var def = c.defaultSize ?? 1
            if let seq, c.name == seqSymbol {
                for v in seq {
                    if c.admits(v) { values.append(v) } else {
                        rejected.append(([c.name: v], "\(c.name)=\(v) is outside \(c.constraintText) (\(c.members.map(\.description).joined(separator: ", "))): Core ML rejects inputs of this size"))
                    }
                }
                if values.isEmpty { return ([], rejected) }
                def = values[0]
            } else {
                switch c.constraint {
                case let .range(lo, hi)?:
                    values = [lo]
                    if lo <= 1, 1 <= (hi ?? Int.max) { values.append(1) }
                    if let h = hi { values.append(h) }
                    if let d = c.defaultSize { values.append(d) }
                    values.sort()
                case let .enumerated(v)?: values = v
                case .unconstrained?: values = [1] + (c.defaultSize.map { [$0] } ?? [])
                case nil: values = c.defaultSize.map { [$0] } ?? [1]
                }
                values = values.filter { $0 >= 0 }
                var seen = Set<Int>()
                values = values.filter { seen.insert($0).inserted }
                if !values.contains(def) { def = values.first ?? 1 }
            }
            candidates.append((c.name, values, def))
        }
        if candidates.isEmpty { return ([[:]], rejected) }
        let product = candidates.reduce(1) { $0 * $1.1.count }
        var out: [[String: Int]] = []
        if product <= 64 {
            out = [[:]]
            for (name, values, _) in candidates {
                out = out.flatMap { b in values.map { v in var x = b; x[name] = v; return x } }
            }
        } else {
            let base = Dictionary(uniqueKeysWithValues: candidates.map { ($0.0, $0.2) })
            out.append(base)
            for (name, values, def) in candidates {
                for v in values where v != def { var x = base; x[name] = v; out.append(x) }
            }
        }
        return (out, rejected)
    }
}
