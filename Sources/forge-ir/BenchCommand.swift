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

/// `forge-ir bench MODEL [-p 128] [-n 128] [-d 0] [-r 3] [--precision fp32|fp16] [--activations fp32|int16|int8]
/// [--json | --markdown]`
///
/// Like llama-bench: one warm-up, then `-r` repetitions of (fresh states → timed prefill of P
/// random token ids → timed decode of N tokens, one S=1 call each), reported as tokens/s mean ±
/// sample standard deviation per test (`ppP`, `tgN`).
enum BenchCommand: Command {
    static let spec = CommandSpec(
        name: "bench", reads: .llm,
        about: """
        Measure prefill and decode tokens/s of a stateful LLM package (like llama-bench).

        Each repetition starts from fresh (zeroed) states (then, with -d D, D random token ids
        are prefilled untimed, so both tests run at context depth D): the prefill of P random token ids
        (fixed seed) in the widest calls the graph allows is timed as ppP, then N decode calls of
        one token each (positions P … P+N−1) are timed as tgN. Sampling is not timed (there is
        none: the decoded ids are random too). One untimed warm-up repetition comes first.
        t/s is the mean over repetitions of tokens/seconds, ± the sample standard deviation.
        The decode bound: the read bandwidth of all cores summing a buffer twice the CPU's
        largest cache, at least 256 MiB (so it streams from memory; best of 3 plain and 3
        software-prefetched passes, measured after
        the runs; a second line gives the same probe over a buffer of the bytes one token
        reads, the bound of a model the cache holds) divided by the bytes a decoded token reads — the decode
        function's weights as stored (an embedding table gathered from: one row) plus the KV
        cache live at the middle decode position; the last line gives tgN as a fraction of it.
        P + N must fit the model's context length. Progress goes to stderr when it is a terminal.
        """,
        options: [
            .int("p", "Prompt tokens prefilled per repetition (default 128; 0 = no prefill test).", range: 0...Int.max),
            .int("n", "Tokens decoded per repetition, one S=1 call each (default 128; 0 = no decode test).", range: 0...Int.max),
            .int("d", "Context depth: tokens prefilled (untimed) before each test, as llama-bench -d (default 0).", range: 0...Int.max),
            .int("r", "Repetitions after the warm-up (default 3).", range: 1...Int.max),
            CommonOptions.function,
            .flag("json", "Print the results as JSON (prefill_tok_s, decode_tok_s, their sds, samples, size, peak RSS, decode-phase RSS)."),
            .flag("markdown", "Print the table as markdown."),
        ],
        groups: [.kernels, .contract]
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

    /// What to measure (the options of one `bench` call).
    struct Config {
        let path: String
        let p: Int, n: Int, depth: Int, reps: Int
        let precision: Precision
        let activations: ActivationQuantization
        let json: Bool, markdown: Bool

        init(_ args: ParsedArguments) throws {
            path = args.positionals[0]
            p = args.int("p", default: 128)
            n = args.int("n", default: 128)
            depth = args.int("d", default: 0)
            reps = args.int("r", default: 3)
            // (Not p + n: that overflows for -n near Int.max; checkFits reports such sizes.)
            guard p > 0 || n > 0 else { throw UsageError(message: "nothing to measure: -p and -n are both 0") }
            precision = args.precision
            activations = try args.activations()
            json = args.flag("json")
            markdown = args.flag("markdown")
            guard !(json && markdown) else { throw UsageError(message: "give at most one of --json, --markdown") }
        }
    }

    /// The figures of one `bench` call.
    struct Results {
        var pp = Stats(samples: []), tg = Stats(samples: [])
        var loadSeconds = 0.0
        var contextLength = 0
        /// Read bandwidth (bytes/s) of the probe's buffer.
        var bandwidth = 0.0
        /// The bandwidth probe's buffer and the largest CPU cache it was sized from.
        var probeBytes = 0, largestCache = 0
        var weightBytes = 0, kvBytes = 0
        /// Read bandwidth (bytes/s) of a buffer the size of one token's reads.
        var workingSetBandwidth = 0.0
        /// The decode bound a read bandwidth (bytes/s) gives: tokens/s over the bytes one token
        /// reads, and tg's mean as a fraction of it (0 and 0 without a measured bandwidth).
        func bound(at bandwidth: Double) -> (tokS: Double, fraction: Double) {
            let tokS = bandwidth > 0 ? bandwidth / Double(weightBytes + kvBytes) : 0
            return (tokS, tokS > 0 ? tg.mean / tokS : 0)
        }
        /// Resident bytes before the model was loaded (the binary and the Swift runtime).
        var baselineRSS = 0
        var peakRSS = 0
        /// The largest resident size read during decoding (`/proc/self/statm` after each decode
        /// step): the issue's "peak RSS during decode", without the prefill's transient buffers.
        var decodeRSS = 0
        var size = 0
        var params = 0
        var contract = ""
    }

    /// Packages smaller than this get no peak-RSS-to-package ratio: the process's own resident
    /// memory (binary, runtime, ~15–25 MiB) would dominate it.
    static let minBytesForRSSRatio = 64 << 20

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let cfg = try Config(args)
        let progress = isatty(2) != 0
        func say(_ s: String) { if progress { Console.err(s) } }

        var res = Results()
        res.baselineRSS = currentResidentBytes()
        let t0 = DispatchTime.now().uptimeNanoseconds
        let model = try ModelLoader.load(path: cfg.path)
        let generator = try ContractOption.generator(args, model: model, precision: cfg.precision)
        res.loadSeconds = seconds(since: t0)
        res.contextLength = generator.contract.contextLength
        try checkFits(cfg, contextLength: res.contextLength)
        let (depthIDs, prompt, decodeIDs) = try randomIDs(cfg, generator: generator, model: model)
        try measure(cfg, generator: generator, depthIDs: depthIDs, prompt: prompt, decodeIDs: decodeIDs, into: &res, say: say)
        // Peak RSS of the runs, read before the bandwidth probe maps its own buffer (≥ 256 MiB).
        res.peakRSS = peakResidentBytes()
        // The bandwidth bound of decoding, measured now (same machine load as the runs above).
        res.largestCache = DecodeBound.largestCacheBytes()
        res.probeBytes = DecodeBound.probeBytes(largestCache: res.largestCache)
        let threads = ProcessInfo.processInfo.activeProcessorCount
        res.bandwidth = cfg.n > 0 ? DecodeBound.measureReadBandwidth(bytes: res.probeBytes, threads: threads) : 0
        res.weightBytes = DecodeBound.weightBytesPerToken(model, function: generator.contract.decodeFunction)
        // Decoding runs after the depth and the prompt: its N steps read D + P + 1 … D + P + N
        // slots, on average D + P + (N + 1) / 2 (checkFits has bounded D + P + N by the context).
        res.kvBytes = generator.contract.liveKVBytes(in: model, live: cfg.depth + cfg.p + (cfg.n + 1) / 2)
        // The same probe over the bytes one token reads: what a buffer of that size can be read
        // at here (from the cache as far as it holds it) — the bound of a model the cache holds.
        res.workingSetBandwidth = cfg.n > 0 ? DecodeBound.measureReadBandwidth(bytes: max(res.weightBytes + res.kvBytes, 1 << 20), threads: threads) : 0
        res.size = packageBytes(cfg.path)
        res.params = ModelSummary(model).parameterCount
        res.contract = generator.contract.recipeName
        if cfg.json {
            Console.out(jsonReport(cfg, res).render(pretty: true) + "\n")
        } else {
            Console.out(textReport(cfg, res))
        }
        return ExitCode.ok
    }

    /// - Throws: `UsageError` naming the sizes the user gave that do not fit, with sizes that do.
    static func checkFits(_ cfg: Config, contextLength ctx: Int) throws {
        let fitting = "e.g. -p \(max(1, ctx / 2)) -n \(max(1, ctx / 4)) fit"
        if cfg.depth == 0, cfg.p > ctx {
            throw UsageError(message: "-p \(cfg.p) exceeds the model's context length \(ctx) (\(fitting))")
        }
        let (pn, o1) = cfg.p.addingReportingOverflow(cfg.n)
        let (all, o2) = cfg.depth.addingReportingOverflow(pn)
        let (sum, overflow) = (all, o1 || o2)
        if overflow || sum > ctx {
            let terms = cfg.depth > 0 ? "-d \(cfg.depth) + -p \(cfg.p) + -n \(cfg.n)" : "-p \(cfg.p) + -n \(cfg.n)"
            throw UsageError(message: "\(terms) = \(overflow ? "more" : String(sum)) tokens exceed the model's context length \(ctx) (decode runs after the prefill; \(fitting))")
        }
    }

    /// Random ids below the vocabulary size (from the logits type, else from one probe call),
    /// fixed seed: (depth prefill, prompt, decode ids).
    static func randomIDs(_ cfg: Config, generator: Generator, model: Model) throws -> ([Int32], [Int32], [Int32]) {
        var vocab = generator.contract.vocabularySize(in: model)
        if vocab == nil {
            generator.reset()
            vocab = try generator.prefill([0]).count
        }
        var rng = SplitMix64(seed: 0x5EED_F0A6_E1B3)
        let ids = (0..<(cfg.p + cfg.n)).map { _ in Int32(truncatingIfNeeded: rng.next() % UInt64(max(vocab ?? 1, 1))) }
        let depthIDs = (0..<cfg.depth).map { _ in Int32(truncatingIfNeeded: rng.next() % UInt64(max(vocab ?? 1, 1))) }
        return (depthIDs, Array(ids[0..<cfg.p]), Array(ids[cfg.p...]))
    }

    /// One warm-up repetition, then `cfg.reps` timed ones (tokens/s samples into `res`).
    static func measure(_ cfg: Config, generator: Generator, depthIDs: [Int32], prompt: [Int32], decodeIDs: [Int32],
                        into res: inout Results, say: (String) -> Void) throws {
        /// One repetition: (prefill seconds, decode seconds).
        func repetition(decodeCount: Int) throws -> (Double, Double) {
            generator.reset()
            if !depthIDs.isEmpty { _ = try generator.prefill(depthIDs) }
            var t = DispatchTime.now().uptimeNanoseconds
            if !prompt.isEmpty { _ = try generator.prefill(prompt) }
            let pre = seconds(since: t)
            var decodeSeconds = 0.0
            for id in decodeIDs.prefix(decodeCount) {
                t = DispatchTime.now().uptimeNanoseconds
                _ = try generator.prefill([id])
                decodeSeconds += seconds(since: t)
                // Outside the timed span: one read of /proc/self/statm a step.
                res.decodeRSS = max(res.decodeRSS, currentResidentBytes())
            }
            return (pre, decodeSeconds)
        }
        let (p, n) = (cfg.p, cfg.n)
        say("warm-up (pp\(p) + tg\(min(n, 16)))…\n")
        _ = try repetition(decodeCount: min(n, 16))
        for r in 0..<cfg.reps {
            let (pre, dec) = try repetition(decodeCount: n)
            if p > 0 { res.pp.samples.append(Double(p) / pre) }
            if n > 0 { res.tg.samples.append(Double(n) / dec) }
            var line = "repetition \(r + 1)/\(cfg.reps):"
            if p > 0 { line += String(format: " pp%d %.2f t/s", p, res.pp.samples.last!) }
            if n > 0 { line += String(format: " tg%d %.2f t/s", n, res.tg.samples.last!) }
            say(line + "\n")
        }
    }

    /// Peak RSS over the package size, or nil for a package too small for the ratio to mean
    /// anything (see ``minBytesForRSSRatio``).
    static func rssRatio(_ res: Results) -> Double? {
        res.size >= minBytesForRSSRatio ? Double(res.peakRSS) / Double(res.size) : nil
    }

    /// What decoding holds above the process's own resident memory before loading (binary,
    /// Swift runtime), over the package size: mapped weights + live KV + the plan's buffers.
    /// Nil without decode steps or for a package under ``minBytesForRSSRatio``.
    static func decodeModelRSSRatio(_ res: Results) -> Double? {
        guard res.decodeRSS > 0, res.size >= minBytesForRSSRatio else { return nil }
        return Double(res.decodeRSS - res.baselineRSS) / Double(res.size)
    }

    static func jsonReport(_ cfg: Config, _ res: Results) -> JSONValue {
        func stat(_ s: Stats, _ on: Bool) -> (JSONValue, JSONValue, JSONValue) {
            on ? (.double(s.mean), .double(s.sd), .array(s.samples.map { .double($0) })) : (.null, .null, .array([]))
        }
        /// A bound's three figures; `tag` says which bound ("" the probe's, "working_set_").
        func bound(_ bandwidth: Double, _ tag: String) -> [String: JSONValue] {
            let b = res.bound(at: bandwidth)
            return ["read_bandwidth_\(tag)bytes_s": .double(bandwidth), "decode_bound_\(tag)tok_s": .double(b.tokS),
                    "decode_fraction_of_\(tag)bound": .double(b.fraction)]
        }
        let (ppm, ppsd, pps) = stat(res.pp, cfg.p > 0), (tgm, tgsd, tgs) = stat(res.tg, cfg.n > 0)
        var obj: [String: JSONValue] = [
            "engine": .string("forge-ir"),
            "model": .string(cfg.path),
            "model_name": .string(modelName(cfg.path)),
            "model_size_bytes": .int(res.size),
            "params": .int(res.params),
            "precision": .string(cfg.precision.rawValue),
            "threads": .int(GEMM.cores),
            "context_length": .int(res.contextLength),
            "n_prompt": .int(cfg.p),
            "n_gen": .int(cfg.n),
            "n_depth": .int(cfg.depth),
            "int8_activations": .bool(cfg.activations == .int8),
            "activations": .string(cfg.activations.rawValue),
            "simd_level": .int(KernelISA.level),
            "kernel_isa": .object(KernelISA.report().mapValues { .string($0) }),
            "repetitions": .int(cfg.reps),
            "prefill_tok_s": ppm, "prefill_tok_s_sd": ppsd, "prefill_samples_tok_s": pps,
            "decode_tok_s": tgm, "decode_tok_s_sd": tgsd, "decode_samples_tok_s": tgs,
            "peak_rss_bytes": .int(res.peakRSS),
            "baseline_rss_bytes": .int(res.baselineRSS),
            "peak_rss_to_package": rssRatio(res).map { .double($0) } ?? .null,
            "decode_rss_bytes": res.decodeRSS > 0 ? .int(res.decodeRSS) : .null,
            "decode_model_rss_to_package": decodeModelRSSRatio(res).map { .double($0) } ?? .null,
            "load_seconds": .double(res.loadSeconds),
            "contract": .string(res.contract),
            "bandwidth_probe_bytes": .int(res.probeBytes),
            "largest_cache_bytes": .int(res.largestCache),
            "decode_weight_bytes_per_token": .int(res.weightBytes),
            "decode_kv_bytes_per_token": .int(res.kvBytes),
        ]
        obj.merge(bound(res.bandwidth, "")) { a, _ in a }
        obj.merge(bound(res.workingSetBandwidth, "working_set_")) { a, _ in a }
        return .object(obj)
    }

    static func textReport(_ cfg: Config, _ res: Results) -> String {
        let header = ["model", "size", "params", "backend", "threads", "test", "t/s"]
        let rightAligned: Set<Int> = [1, 2, 4, 5, 6]
        var rows: [[String]] = []
        let common = [modelName(cfg.path), String(format: "%.2f MiB", Double(res.size) / 1_048_576), humanCount(res.params),
                      "CPU \(cfg.precision.rawValue)\(cfg.activations == .exact ? "" : " \(cfg.activations.rawValue)-act")", String(GEMM.cores)]
        let at = cfg.depth > 0 ? " @ d\(cfg.depth)" : ""
        if cfg.p > 0 { rows.append(common + ["pp\(cfg.p)\(at)", String(format: "%.2f ± %.2f", res.pp.mean, res.pp.sd)]) }
        if cfg.n > 0 { rows.append(common + ["tg\(cfg.n)\(at)", String(format: "%.2f ± %.2f", res.tg.mean, res.tg.sd)]) }
        var out = table(header: header, rows: rows, rightAligned: rightAligned, markdown: cfg.markdown)
        let mib = { (b: Int) in String(format: "%.1f MiB", Double(b) / 1_048_576) }
        let ratio = rssRatio(res).map { String(format: "%.2f× the package", $0) }
            ?? "\(mib(res.peakRSS - res.baselineRSS)) above the \(mib(res.baselineRSS)) before loading; no ratio for a package under \(minBytesForRSSRatio >> 20) MiB"
        out += "\n\(cfg.reps) repetition\(cfg.reps == 1 ? "" : "s") after one warm-up · peak RSS \(mib(res.peakRSS)) (\(ratio)) · "
            + String(format: "load %.2f s\n", res.loadSeconds)
        if let r = decodeModelRSSRatio(res) {
            out += "during decode: RSS \(mib(res.decodeRSS)), \(mib(res.decodeRSS - res.baselineRSS)) above the \(mib(res.baselineRSS)) before loading = "
                + String(format: "%.2f× the package\n", r)
        }
        if cfg.n > 0 {
            let probe = res.bound(at: res.bandwidth), workingSet = res.bound(at: res.workingSetBandwidth)
            out += "contract: \(res.contract) · " + String(format: "decode bound: %.2f GB/s read (%.0f MiB probe) ÷ (%.2f MB weights + %.2f MB live KV) per token = %.1f t/s · tg%d at %.0f%% of it\n",
                                                         res.bandwidth / 1e9, Double(res.probeBytes) / 1_048_576, Double(res.weightBytes) / 1e6, Double(res.kvBytes) / 1e6,
                                                         probe.tokS, cfg.n, probe.fraction * 100)
                + String(format: "working-set bound (the probe over those %.2f MB): %.2f GB/s = %.1f t/s · tg%d at %.0f%% of it\n",
                         Double(res.weightBytes + res.kvBytes) / 1e6, res.workingSetBandwidth / 1e9, workingSet.tokS, cfg.n, workingSet.fraction * 100)
        }
        return out
    }

    static func modelName(_ path: String) -> String { URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent }

    /// Resident bytes of this process now (`/proc/self/statm`; 0 where it does not exist).
    static func currentResidentBytes() -> Int {
        guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = s.split(separator: " ")
        guard fields.count >= 2, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
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
