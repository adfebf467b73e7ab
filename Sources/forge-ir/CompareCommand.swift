import Comparison
import Foundation
import Generation
import GraphIR
import Interpreter

/// `forge-ir compare A [B]`: the same calls through two packages, one package in two
/// precisions, or one package against recorded reference values; per output and per common
/// op: error metrics, and the first op beyond the tolerance.
enum CompareCommand: Command {
    static let spec = CommandSpec(
        name: "compare", reads: .models([
            PositionalSpec(name: "model", help: "The candidate (with B: the reference)."),
            PositionalSpec(name: "B", help: "A second package: the candidate, compared with <model>.", optional: true),
        ]),
        about: """
        Compare two packages, two precisions or a package and reference values; name the first op that diverges.

        Every op output of the candidate is compared with the reference's value of the same name
        (values only one side has are skipped). The first op, in the candidate's op order, whose
        output is beyond the tolerance is named with its inputs' statistics. Exit status 1 when a
        checked value fails: the function outputs, or with --reference every recorded value.
        Progress is shown on a terminal (stderr), never on a pipe.
        """,
        options: [
            .option("function", value: "name", "Function to run on both sides (default: each model's default function)."),
            .option("precision", value: "p|p1,p2", "fp32 or fp16 for both sides, or reference,candidate (e.g. fp32,fp16)."),
            CommonOptions.threads,
            .option("reference", value: "ref.npz|dir", "Recorded values (an .npz or a run --out/--outputs folder; call<K>_<name> keys for several calls)."),
            .option("map", value: "ref=value", "A reference array name and the model value it is (repeatable)."),
            .option("inputs", value: "file.npz", "Inputs of one call (default: from the reference, else generated)."),
            .int("seed", "Seed of the generated inputs (default 0).", range: 0...Int.max),
            .int("prompt-length", "Tokens of the generated prefill for LLM packages (default 16).", range: 1...1_000_000),
            .int("decode-steps", "Decode calls after the prefill, states carried (default 0).", range: 0...1_000_000),
            .float("atol", value: "x", "Absolute tolerance (default 1e-3)."),
            .float("rtol", value: "x", "Relative tolerance (default 1e-3): |c - r| <= atol + rtol * |r|, as numpy.allclose."),
            .float("min-snr", value: "dB", "Also fail values whose SNR is below this."),
            .option("max-bytes", value: "n", "Budget for the reference values held per call (default 4G)."),
            .flag("ops", "Text output: list every compared op, not only the outputs and the first divergence."),
            CommonOptions.json,
        ]
    )

    /// Whether any input, state or op output of `f` (nested blocks included) is fp16: what
    /// `--precision fp16` rounds.
    static func typesFP16(_ f: Function) -> Bool {
        func fp16(_ t: MILType) -> Bool {
            if case let .state(inner) = t { return fp16(inner) }
            return t.tensorType?.dtype == .fp16
        }
        if f.inputs.contains(where: { fp16($0.type) }) { return true }
        var found = false
        f.body.walk { op in if !found, op.outputs.contains(where: { fp16($0.type) }) { found = true } }
        return found
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let pathA = args.positionals[0]
        let pathB = args.positionals.count > 1 ? args.positionals[1] : nil
        let precisions = try (args.value("precision") ?? "fp32").split(separator: ",").map { p -> Precision in
            guard let x = Precision(rawValue: String(p)) else { throw UsageError(message: "--precision takes fp32, fp16 or two of them (fp32,fp16), not '\(p)'") }
            return x
        }
        guard precisions.count == 1 || precisions.count == 2 else { throw UsageError(message: "--precision takes one or two precisions") }
        let refPrecision = precisions[0], candPrecision = precisions.last!
        let referencePath = args.value("reference")
        if referencePath != nil && pathB != nil { throw UsageError(message: "give either a second package or --reference, not both") }
        if referencePath == nil && pathB == nil && precisions.count == 1 {
            throw UsageError(message: "compare needs a second package, --precision REF,CANDIDATE (e.g. fp32,fp16) or --reference REF")
        }
        func number(_ name: String, _ d: Double) throws -> Double {
            guard let t = args.value(name) else { return d }
            guard let x = Double(t), x.isFinite else { throw UsageError(message: "--\(name) takes a number, not '\(t)'") }
            return x
        }
        func count(_ name: String, _ d: Int) throws -> Int {
            guard let t = args.value(name) else { return d }
            guard let x = Int(t), x >= 0 else { throw UsageError(message: "--\(name) takes a count, not '\(t)'") }
            return x
        }
        let tolerance = Tolerance(atol: try number("atol", 1e-3), rtol: try number("rtol", 1e-3),
                                  minSNR: args.value("min-snr") == nil ? nil : try number("min-snr", 0))
        let seed = UInt64(try count("seed", 0)), length = try count("prompt-length", 16), steps = try count("decode-steps", 0)
        guard length >= 1 else { throw UsageError(message: "--prompt-length must be at least 1") }
        let maxBytes = try RunCommand.byteCount(args.value("max-bytes") ?? "4G", option: "max-bytes")
        var map: [String: String] = [:]
        for item in args.values(of: "map") {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw UsageError(message: "--map takes REF=VALUE, got '\(item)'") }
            map[parts[0]] = parts[1]
        }

        let modelA = try ModelLoader.load(path: pathA)
        let function = args.value("function")
        let candidate: ComparisonRunner
        let reference: ValueComparator.Reference
        var refLabel: String
        var calls: [CompareInputs.Call]
        var recordedCalls = false
        if let pathB {
            let modelB = try ModelLoader.load(path: pathB)
            refLabel = "\(pathA) (\(refPrecision.rawValue))"
            let r = try ComparisonRunner(model: modelA, function: function, precision: refPrecision, label: refLabel)
            candidate = try ComparisonRunner(model: modelB, function: function, precision: candPrecision, label: "\(pathB) (\(candPrecision.rawValue))")
            reference = .run(r)
            calls = try calls_(args, candidate.session.function, seed: seed, length: length, steps: steps)
        } else if let referencePath {
            candidate = try ComparisonRunner(model: modelA, function: function, precision: candPrecision, label: "\(pathA) (\(candPrecision.rawValue))")
            let arrays = try ValueFiles.readArrays(referencePath)
            let rec = CompareInputs.recorded(arrays, function: candidate.session.function, map: map)
            if !rec.unmatched.isEmpty {
                Console.err("note: \(rec.unmatched.count) reference array(s) name no value of function '\(candidate.session.function.name)' and are not compared: \(rec.unmatched.prefix(6).joined(separator: ", "))\(rec.unmatched.count > 6 ? ", …" : "")\n")
            }
            guard rec.values.contains(where: { !$0.isEmpty }) else {
                throw CompareCLIError("\(referencePath): no array names a value of function '\(candidate.session.function.name)' (use --map REF=VALUE)")
            }
            refLabel = referencePath
            reference = .recorded(rec.values)
            if args.value("inputs") != nil || rec.calls.allSatisfy(\.isEmpty) {
                calls = try calls_(args, candidate.session.function, seed: seed, length: length, steps: steps)
                if args.value("inputs") == nil && rec.values.count > 1 {
                    throw CompareCLIError("\(referencePath) records \(rec.values.count) calls but no inputs for them; give them as call<K>_<input> arrays")
                }
                if args.value("inputs") == nil && !candidate.session.function.inputs.allSatisfy(\.type.isState) {
                    Console.err("note: \(referencePath) holds no inputs of function '\(candidate.session.function.name)': its values are compared with a run on generated inputs (\(calls.first?.label ?? "seed \(seed)")); store the inputs it was made from in it, or give --inputs\n")
                }
            } else {
                recordedCalls = true
                calls = rec.calls.enumerated().map { k, ins in (ins, rec.calls.count > 1 ? "call \(k) from \(referencePath)" : "inputs from \(referencePath)") }
            }
        } else {
            refLabel = "\(pathA) (\(refPrecision.rawValue))"
            let r = try ComparisonRunner(model: modelA, function: function, precision: refPrecision, label: refLabel)
            candidate = try ComparisonRunner(model: modelA, function: function, precision: candPrecision, label: "\(pathA) (\(candPrecision.rawValue))")
            reference = .run(r)
            calls = try calls_(args, candidate.session.function, seed: seed, length: length, steps: steps)
            if refPrecision != candPrecision && !typesFP16(candidate.session.function) {
                Console.err("note: function '\(candidate.session.function.name)' types no value fp16, so --precision fp16 rounds nothing and both sides compute the same; to see what fp16 does to this model, convert it with compute_precision=ct.precision.FLOAT16 (coremltools' default for ML programs) and compare the two packages\n")
            }
        }

        let progress = ProgressLine()
        // Generated LLM calls on explicit KV caches: each side's cache outputs feed its next call.
        let carry = recordedCalls || args.value("inputs") != nil ? [:] : CompareInputs.carry(candidate.session.function)
        let results = try ValueComparator.compare(reference: reference, candidate: candidate, calls: calls, tolerance: tolerance, maxBytes: maxBytes,
                                                  carry: carry) { k, n, i, ops in
            progress.show("compare: call \(k + 1)/\(n), value \(i) of ~\(ops) ops")
        }
        progress.clear()
        let checkAll: Bool = { if case .recorded = reference { return true } else { return false } }()
        let failed = results.contains { c in
            c.outputs.contains { !$0.ok } || (checkAll && c.ops.contains { !$0.ok })
        }
        if args.flag("json") {
            Console.out(CompareReport.json(results, reference: refLabel, candidate: candidate.label, tolerance: tolerance, ok: !failed).render(pretty: true) + "\n")
        } else {
            Console.out(CompareReport.text(results, reference: refLabel, candidate: candidate.label, tolerance: tolerance, ok: !failed, allOps: args.flag("ops")))
        }
        return failed ? ExitCode.failure : ExitCode.ok
    }

    static func calls_(_ args: ParsedArguments, _ f: Function, seed: UInt64, length: Int, steps: Int) throws -> [CompareInputs.Call] {
        try checkLLMOptions(args, f, length: length)
        if let path = args.value("inputs") {
            let inputs = try NPZ.read(path: path)
            return [(inputs, "inputs from \(path)")] + (0..<steps).map { (inputs, "inputs from \(path), call \($0 + 2)") }
        }
        return try CompareInputs.generated(f, seed: seed, length: length, decodeSteps: steps)
    }

    /// Refuses a `--prompt-length` beyond the context of an LLM function, and notes (stderr, one
    /// line) when `--prompt-length` / `--decode-steps` are given but the calls cannot follow them:
    /// with `--inputs`, or on a function that has no KV cache or takes static inputs, which get
    /// random arrays (``CompareInputs/generated(_:seed:length:decodeSteps:)``).
    /// - Throws: `UsageError` for `--prompt-length` > the contract's context length.
    static func checkLLMOptions(_ args: ParsedArguments, _ f: Function, length: Int) throws {
        let givenLength = args.value("prompt-length") != nil, givenSteps = args.value("decode-steps") != nil
        guard givenLength || givenSteps else { return }
        let c = try? GenerationContract.detect(function: f)
        if givenLength, let c, length > c.contextLength {
            throw UsageError(message: "--prompt-length \(length) exceeds the context of function '\(f.name)' (\(c.contextLength) tokens)")
        }
        if args.value("inputs") != nil {
            if givenLength { Console.err("note: --prompt-length is ignored with --inputs (the calls take the given inputs)\n") }
            return
        }
        guard let c else { return }
        let why: String
        if !c.staticInputs.isEmpty {
            why = "takes static inputs (\(c.staticInputs.joined(separator: ", ")))"
        } else if c.kv == .none {
            why = "has no KV cache"
        } else {
            return
        }
        let effect = givenSteps ? (givenLength ? "--prompt-length is ignored and --decode-steps repeats that call" : "--decode-steps repeats that call")
                                : "--prompt-length is ignored"
        Console.err("note: function '\(f.name)' \(why): it runs on random inputs at the smallest shapes its inputs take, so \(effect)\n")
    }
}
