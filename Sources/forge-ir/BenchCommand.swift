import Dispatch
import Foundation
import Generation
import GraphIR
import Interpreter
import JSON
import Tokenizers
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `forge-ir bench MODEL [-p 128] [-n 128] [-d 0] [-r 3] [--precision fp32|fp16] [--int8-activations]
/// [--json | --markdown]`
///
/// Like llama-bench: one warm-up, then `-r` repetitions of (fresh states → timed prefill of P
/// random token ids → timed decode of N tokens, one S=1 call each), reported as tokens/s mean ±
/// sample standard deviation per test (`ppP`, `tgN`).
enum BenchCommand: Command {
    static let spec = CommandSpec(
        name: "bench",
        summary: "Measure prefill and decode tokens/s of a stateful LLM package (like llama-bench).",
        positionals: [PositionalSpec(name: "model", help: ".mlpackage or .mlmodelc of an LLM (its generation contract is detected; see dump --summary).")],
        options: [
            .int("p", "Prompt tokens prefilled per repetition (default 128; 0 = no prefill test).", range: 0...Int.max),
            .int("n", "Tokens decoded per repetition, one S=1 call each (default 128; 0 = no decode test).", range: 0...Int.max),
            .int("d", "Context depth: tokens prefilled (untimed) before each test, as llama-bench -d (default 0).", range: 0...Int.max),
            .int("r", "Repetitions after the warm-up (default 3).", range: 1...Int.max),
            CommonOptions.precision,
            CommonOptions.int8Activations,
            CommonOptions.function,
            ContractOption.option,
            CommonOptions.threads,
            .flag("json", "Print the results as JSON (prefill_tok_s, decode_tok_s, their sds, samples, size, peak RSS)."),
            .flag("markdown", "Print the table as markdown."),
            CommonOptions.maxMemory,
        ],
        discussion: """
        Each repetition starts from fresh (zeroed) states (then, with -d D, D random token ids
        are prefilled untimed, so both tests run at context depth D): the prefill of P random token ids
        (fixed seed) in the widest calls the graph allows is timed as ppP, then N decode calls of
        one token each (positions P … P+N−1) are timed as tgN. Sampling is not timed (there is
        none: the decoded ids are random too). One untimed warm-up repetition comes first.
        t/s is the mean over repetitions of tokens/seconds, ± the sample standard deviation.
        The decode bound: the read bandwidth of all cores summing a 256 MiB buffer (best of 3,
        measured after the runs) divided by the bytes a decoded token reads — the decode
        function's weights as stored (an embedding table gathered from: one row) plus the KV
        cache live at the middle decode position; the last line gives tgN as a fraction of it.
        P + N must fit the model's context length. Progress goes to stderr when it is a terminal.
        """
    )

    struct Stats {
        var samples: [Double]
        var mean: Double { samples.isEmpty ? 0 : samples.reduce(0, +) / Double(samples.count) }
        /// Sample standard deviation (n − 1), 0 for a single sample (as llama-bench).
        var sd: Double {
            guard samples.count > 1 else { return 0 }
            let m = mean
            return (samples.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(samples.count - 1)).squareRoot()
        }
    }

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let path = args.positionals[0]
        let p = args.int("p", default: 128)
        let n = args.int("n", default: 128)
        let depth = args.int("d", default: 0)
        let reps = args.int("r", default: 3)
        guard p + n > 0 else { throw UsageError(message: "nothing to measure: -p and -n are both 0") }
        let precision = args.precision
        let json = args.flag("json"), markdown = args.flag("markdown")
        guard !(json && markdown) else { throw UsageError(message: "give at most one of --json, --markdown") }

        let progress = isatty(2) != 0
        func say(_ s: String) { if progress { Console.err(s) } }

        let t0 = DispatchTime.now().uptimeNanoseconds
        let model = try ModelLoader.load(path: path)
        let generator = try ContractOption.generator(args, model: model, precision: precision)
        let loadSeconds = seconds(since: t0)
        let ctx = generator.contract.contextLength
        if p > ctx {
            throw UsageError(message: "-p \(p) exceeds the model's context length \(ctx)")
        }
        if depth + p + n > ctx {
            throw UsageError(message: "-d \(depth) + -p \(p) + -n \(n) = \(depth + p + n) tokens exceed the model's context length \(ctx) (decode runs after the prefill)")
        }

        // Random ids below the vocabulary size (from the logits type, else from one probe call).
        var vocab = generator.contract.vocabularySize(in: model)
        if vocab == nil {
            generator.reset()
            vocab = try generator.prefill([0]).count
        }
        var rng = SplitMix64(seed: 0x5EED_F0A6_E1B3)
        let ids = (0..<(p + n)).map { _ in Int32(truncatingIfNeeded: rng.next() % UInt64(max(vocab ?? 1, 1))) }
        let prompt = Array(ids[0..<p]), decodeIDs = Array(ids[p...])
        let depthIDs = (0..<depth).map { _ in Int32(truncatingIfNeeded: rng.next() % UInt64(max(vocab ?? 1, 1))) }

        /// One repetition: (prefill seconds, decode seconds).
        func repetition(decodeCount: Int) throws -> (Double, Double) {
            generator.reset()
            if !depthIDs.isEmpty { _ = try generator.prefill(depthIDs) }
            var t = DispatchTime.now().uptimeNanoseconds
            if !prompt.isEmpty { _ = try generator.prefill(prompt) }
            let pre = seconds(since: t)
            t = DispatchTime.now().uptimeNanoseconds
            for id in decodeIDs.prefix(decodeCount) { _ = try generator.prefill([id]) }
            return (pre, seconds(since: t))
        }

        say("warm-up (pp\(p) + tg\(min(n, 16)))…\n")
        _ = try repetition(decodeCount: min(n, 16))
        var pp = Stats(samples: []), tg = Stats(samples: [])
        for r in 0..<reps {
            let (pre, dec) = try repetition(decodeCount: n)
            if p > 0 { pp.samples.append(Double(p) / pre) }
            if n > 0 { tg.samples.append(Double(n) / dec) }
            var line = "repetition \(r + 1)/\(reps):"
            if p > 0 { line += String(format: " pp%d %.2f t/s", p, pp.samples.last!) }
            if n > 0 { line += String(format: " tg%d %.2f t/s", n, tg.samples.last!) }
            say(line + "\n")
        }
        // The bandwidth bound of decoding, measured now (same machine load as the runs above).
        let bandwidth = n > 0 ? DecodeBound.measureReadBandwidth(threads: ProcessInfo.processInfo.activeProcessorCount) : 0
        let weightBytes = DecodeBound.weightBytesPerToken(model, function: generator.contract.decodeFunction)
        let kvBytes = generator.contract.liveKVBytes(in: model, live: p + n / 2)
        let boundTokS = bandwidth > 0 ? bandwidth / Double(weightBytes + kvBytes) : 0
        let fraction = boundTokS > 0 ? tg.mean / boundTokS : 0
        let peak = peakResidentBytes()
        let size = packageBytes(path)
        let params = ModelSummary(model).parameterCount
        let threads = GEMM.cores
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent

        if json {
            func stat(_ s: Stats, _ on: Bool) -> (JSONValue, JSONValue, JSONValue) {
                on ? (.double(s.mean), .double(s.sd), .array(s.samples.map { .double($0) })) : (.null, .null, .array([]))
            }
            let (ppm, ppsd, pps) = stat(pp, p > 0), (tgm, tgsd, tgs) = stat(tg, n > 0)
            let obj: [String: JSONValue] = [
                "engine": .string("forge-ir"),
                "model": .string(path),
                "model_name": .string(name),
                "model_size_bytes": .int(size),
                "params": .int(params),
                "precision": .string(precision.rawValue),
                "threads": .int(threads),
                "context_length": .int(ctx),
                "n_prompt": .int(p),
                "n_gen": .int(n),
                "n_depth": .int(depth),
                "int8_activations": .bool(args.flag("int8-activations")),
                "simd_level": .int(KernelISA.level),
                "kernel_isa": .object(KernelISA.report().mapValues { .string($0) }),
                "repetitions": .int(reps),
                "prefill_tok_s": ppm, "prefill_tok_s_sd": ppsd, "prefill_samples_tok_s": pps,
                "decode_tok_s": tgm, "decode_tok_s_sd": tgsd, "decode_samples_tok_s": tgs,
                "peak_rss_bytes": .int(peak),
                "load_seconds": .double(loadSeconds),
                "contract": .string(generator.contract.recipeName),
                "read_bandwidth_bytes_s": .double(bandwidth),
                "decode_weight_bytes_per_token": .int(weightBytes),
                "decode_kv_bytes_per_token": .int(kvBytes),
                "decode_bound_tok_s": .double(boundTokS),
                "decode_fraction_of_bound": .double(fraction),
            ]
            Console.out(JSONValue.object(obj).render(pretty: true) + "\n")
            return ExitCode.ok
        }

        let header = ["model", "size", "params", "backend", "threads", "test", "t/s"]
        let rightAligned: Set<Int> = [1, 2, 4, 5, 6]
        var rows: [[String]] = []
        let common = [name, String(format: "%.2f MiB", Double(size) / 1_048_576), humanCount(params),
                      "CPU \(precision.rawValue)\(args.flag("int8-activations") ? " int8-act" : "")", String(threads)]
        let at = depth > 0 ? " @ d\(depth)" : ""
        if p > 0 { rows.append(common + ["pp\(p)\(at)", String(format: "%.2f ± %.2f", pp.mean, pp.sd)]) }
        if n > 0 { rows.append(common + ["tg\(n)\(at)", String(format: "%.2f ± %.2f", tg.mean, tg.sd)]) }
        Console.out(table(header: header, rows: rows, rightAligned: rightAligned, markdown: markdown))
        Console.out("\n\(reps) repetition\(reps == 1 ? "" : "s") after one warm-up · " + String(format: "peak RSS %.1f MiB (%.2f× the package) · load %.2f s\n",
                           Double(peak) / 1_048_576, Double(peak) / Double(max(size, 1)), loadSeconds))
        if n > 0 {
            Console.out("contract: \(generator.contract.recipeName) · " + String(format: "decode bound: %.2f GB/s read ÷ (%.2f MB weights + %.2f MB live KV) per token = %.1f t/s · tg%d at %.0f%% of it\n",
                               bandwidth / 1e9, Double(weightBytes) / 1e6, Double(kvBytes) / 1e6,
                               boundTokS, n, fraction * 100))
        }
        return ExitCode.ok
    }

    static func seconds(since t: UInt64) -> Double { Double(DispatchTime.now().uptimeNanoseconds - t) / 1e9 }

    /// Bytes on disk: a file's size, or every file under a package directory.
    static func packageBytes(_ path: String) -> Int {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: path, isDirectory: &isDir) else { return 0 }
        if !isDir.boolValue { return ((try? fm.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0 }
        var total = 0
        if let e = fm.enumerator(atPath: path) {
            for case let rel as String in e {
                let attrs = try? fm.attributesOfItem(atPath: path + "/" + rel)
                if attrs?[.type] as? FileAttributeType == .typeRegular {
                    total += (attrs?[.size] as? NSNumber)?.intValue ?? 0
                }
            }
        }
        return total
    }

    static func humanCount(_ n: Int) -> String {
        switch n {
        case 1_000_000_000...: return String(format: "%.2f B", Double(n) / 1e9)
        case 1_000_000...: return String(format: "%.2f M", Double(n) / 1e6)
        case 1_000...: return String(format: "%.2f K", Double(n) / 1e3)
        default: return String(n)
        }
    }

    /// A llama-bench style table: aligned columns, or markdown with `---:` for numbers.
    static func table(header: [String], rows: [[String]], rightAligned: Set<Int>, markdown: Bool) -> String {
        var widths = header.map(\.count)
        for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
        func pad(_ s: String, _ i: Int) -> String {
            let fill = String(repeating: " ", count: widths[i] - s.count)
            return rightAligned.contains(i) ? fill + s : s + fill
        }
        var out = ""
        if markdown {
            out += "| " + header.indices.map { pad(header[$0], $0) }.joined(separator: " | ") + " |\n"
            out += "| " + header.indices.map { i in
                rightAligned.contains(i) ? String(repeating: "-", count: max(widths[i] - 1, 1)) + ":" : String(repeating: "-", count: widths[i])
            }.joined(separator: " | ") + " |\n"
            for r in rows { out += "| " + r.indices.map { pad(r[$0], $0) }.joined(separator: " | ") + " |\n" }
        } else {
            out += header.indices.map { pad(header[$0], $0) }.joined(separator: "  ") + "\n"
            for r in rows { out += r.indices.map { pad(r[$0], $0) }.joined(separator: "  ") + "\n" }
        }
        return out
    }
}
