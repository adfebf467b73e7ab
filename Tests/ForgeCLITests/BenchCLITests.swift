import Foundation
import GraphIR
import JSON
import TestSupport
import XCTest

/// `forge-ir bench` end to end through the binary, on the committed 2-layer SmolLM2 twin
/// (CTX 256). No timing assertions: only that the figures exist and are positive.
extension CLITests {
    func testBenchJSONHasTheFigures() throws {
        let model = try fixture("smollm2_twin_int8.mlpackage")
        let r = try run(["bench", model, "-p", "8", "-n", "4", "-r", "2", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        // Progress goes to stderr only on a terminal; here stderr is a file.
        XCTAssertEqual(r.stderr, "")
        let json = try JSONValue.parse(r.stdout)
        func number(_ key: String) -> Double? {
            switch json[key] {
            case let .double(d)?: return d
            case let .int(i)?: return Double(i)
            default: return nil
            }
        }
        for key in ["prefill_tok_s", "decode_tok_s", "model_size_bytes", "peak_rss_bytes", "params"] {
            guard let v = number(key) else { XCTFail("no number '\(key)' in \(r.stdout)"); continue }
            XCTAssertGreaterThan(v, 0, key)
        }
        for key in ["prefill_tok_s_sd", "decode_tok_s_sd"] {
            guard let v = number(key) else { XCTFail("no number '\(key)' in \(r.stdout)"); continue }
            XCTAssertGreaterThanOrEqual(v, 0, key)
        }
        XCTAssertEqual(json["repetitions"]?.intValue, 2)
        XCTAssertEqual(json["n_prompt"]?.intValue, 8)
        XCTAssertEqual(json["n_gen"]?.intValue, 4)
        XCTAssertEqual(json["context_length"]?.intValue, 256)
        XCTAssertEqual(json["prefill_samples_tok_s"]?.arrayValue?.count, 2)
        XCTAssertEqual(json["decode_samples_tok_s"]?.arrayValue?.count, 2)
        // The package on disk: model.mlmodel + weight.bin + Manifest.json.
        XCTAssertGreaterThan(number("model_size_bytes") ?? 0, 10_000_000)
        // The bandwidth probe streams twice the largest cache (at least 256 MiB), read here
        // from sysfs independently of the binary.
        var cache = 0
        let root = "/sys/devices/system/cpu/cpu0/cache"
        for e in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where e.hasPrefix("index") {
            guard let raw = try? String(contentsOfFile: "\(root)/\(e)/size", encoding: .utf8) else { continue }
            let t = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            let mult = t.hasSuffix("K") ? 1024 : t.hasSuffix("M") ? 1 << 20 : 1
            cache = max(cache, (Int(t.trimmingCharacters(in: CharacterSet(charactersIn: "KM"))) ?? 0) * mult)
        }
        XCTAssertEqual(json["largest_cache_bytes"]?.intValue, cache)
        XCTAssertEqual(json["bandwidth_probe_bytes"]?.intValue, min(max(256 << 20, 2 * cache), 4 << 30))
        XCTAssertGreaterThan(number("read_bandwidth_bytes_s") ?? 0, 0)
        // The working-set bound: its bandwidth over the same bytes per token.
        let ws = number("read_bandwidth_working_set_bytes_s") ?? 0, perToken = (number("decode_weight_bytes_per_token") ?? 0) + (number("decode_kv_bytes_per_token") ?? 0)
        XCTAssertGreaterThan(ws, 0)
        XCTAssertEqual(number("decode_bound_working_set_tok_s") ?? 0, ws / perToken, accuracy: 1e-6 * ws / perToken)
    }

    /// The decode bound counts the KV slots live while decoding: after -d D and -p P the N steps
    /// read D + P + 1 … D + P + N, on average D + P + (N + 1) / 2 (the depth was left out once, so
    /// a d1024 bound read as if at d0; and -n 1 from an empty cache counted no slot).
    func testBenchDecodeBoundCountsTheDepthsKV() throws {
        let model = try fixture("smollm2_twin_int8.mlpackage")
        func kvBytes(depth: Int) throws -> Int {
            let r = try run(["bench", model, "-d", "\(depth)", "-p", "4", "-n", "2", "-r", "1", "--json"])
            XCTAssertEqual(r.status, 0, r.stderr)
            return try JSONValue.parse(r.stdout)["decode_kv_bytes_per_token"]?.intValue ?? -1
        }
        let d0 = try kvBytes(depth: 0), d8 = try kvBytes(depth: 8)
        XCTAssertGreaterThan(d0, 0)
        // 4 + 3/2 = 5 slots at d0, 8 + 4 + 1 = 13 at d8.
        XCTAssertEqual(d8 * 5, d0 * 13, "d0 \(d0) B, d8 \(d8) B")
        // One decode step from an empty cache reads its own slot: as many bytes as one slot of d0's 5.
        let r = try run(["bench", model, "-p", "0", "-n", "1", "-r", "1", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual((try JSONValue.parse(r.stdout)["decode_kv_bytes_per_token"]?.intValue ?? -1) * 5, d0)
    }

    /// `--activations int16` runs (and says so in the JSON, with the ISA of its route);
    /// `--int8-activations` is `--activations int8`, and contradicting it is a usage error.
    func testBenchActivationModes() throws {
        let model = try fixture("smollm2_twin_int8.mlpackage")
        let r = try run(["bench", model, "-p", "4", "-n", "2", "-r", "1", "--activations", "int16", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONValue.parse(r.stdout)
        XCTAssertEqual(json["activations"]?.stringValue, "int16", r.stdout)
        XCTAssertNotNil(json["kernel_isa"]?["int8_q16"]?.stringValue, r.stdout)
        let old = try run(["bench", model, "-p", "4", "-n", "0", "-r", "1", "--int8-activations", "--json"])
        XCTAssertEqual(old.status, 0, old.stderr)
        XCTAssertEqual(try JSONValue.parse(old.stdout)["activations"]?.stringValue, "int8", old.stdout)
        let both = try run(["bench", model, "-p", "4", "-n", "0", "--int8-activations", "--activations", "int16"])
        XCTAssertEqual(both.status, 64, both.stderr)
        XCTAssertTrue(both.stderr.contains("--activations int8"), both.stderr)
        XCTAssertTrue(both.stderr.hasPrefix("forge-ir: error: --int8-activations means"), both.stderr)
    }

    func testBenchTableAndMarkdown() throws {
        let model = try fixture("smollm2_twin_int8.mlpackage")
        let plain = try run(["bench", model, "-p", "4", "-n", "2", "-r", "1"])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        let lines = plain.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.hasPrefix("model") ?? false, plain.stdout)
        for column in ["size", "params", "backend", "threads", "test", "t/s"] {
            XCTAssertTrue(lines[0].contains(column), "header lacks \(column): \(lines[0])")
        }
        XCTAssertTrue(lines.contains { $0.contains("pp4") && $0.contains("±") && $0.contains("smollm2_twin_int8") }, plain.stdout)
        XCTAssertTrue(lines.contains { $0.contains("tg2") && $0.contains("±") }, plain.stdout)

        let md = try run(["bench", model, "-p", "4", "-n", "0", "-r", "1", "--markdown"])
        XCTAssertEqual(md.status, 0, md.stderr)
        let rows = md.stdout.split(separator: "\n").filter { $0.hasPrefix("|") }
        XCTAssertEqual(rows.count, 3, md.stdout) // header, alignment, pp4 (no tg test with -n 0)
        XCTAssertTrue(rows[1].contains("---:"), md.stdout)
        XCTAssertTrue(rows[2].contains("pp4"), md.stdout)
    }

    func testBenchUsageErrorsExit64() throws {
        let model = try fixture("smollm2_twin_int8.mlpackage")
        let cases: [([String], String)] = [
            (["bench"], "missing argument <model>"),
            (["bench", model, "-p", "x"], "-p takes a whole number"),
            (["bench", model, "-n", "-3"], "-n takes a whole number"),
            (["bench", model, "-r", "0"], "-r takes a whole number ≥ 1"),
            (["bench", model, "-p", "0", "-n", "0"], "nothing to measure"),
            (["bench", model, "--precision", "int4"], "--precision must be one of fp32, fp16, not 'int4'"),
            (["bench", model, "--json", "--markdown"], "at most one of --json, --markdown"),
            (["bench", model, "-q", "1"], "unknown option '-q'"),
            // Context length 256: P alone, and P + N (the decode runs after the prefill).
            (["bench", model, "-p", "300", "-n", "0"], "-p 300 exceeds the model's context length 256"),
            (["bench", model, "-p", "250", "-n", "10"], "-p 250 + -n 10 = 260 tokens exceed the model's context length 256"),
            // A depth too deep is named even when the default -p alone would not fit either.
            (["bench", model, "-d", "999999"], "-d 999999 + -p 128 + -n 128 = 1000255 tokens exceed the model's context length 256"),
            (["bench", model, "-d", "9223372036854775807"], "-d 9223372036854775807 + -p 128 + -n 128 = more tokens exceed"),
            (["bench", model, "-p", "300", "-n", "0"], "e.g. -p 128 -n 64 fit"),
            // Sizes whose sum overflows Int: reported, not a crash (it was a trap once).
            (["bench", model, "-p", "1", "-n", "9223372036854775807"], "-p 1 + -n 9223372036854775807 = more tokens exceed"),
            (["bench", model, "-d", "1", "-p", "9223372036854775807", "-n", "1"], "= more tokens exceed"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertEqual(r.stdout, "", "\(args)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("forge-ir bench --help"), "\(args): \(r.stderr)")
        }
    }

    func testBenchRefusesAModelWithoutTheContract() throws {
        let model = try fixture("enumerated_shapes.mlpackage")
        let r = try run(["bench", model, "-p", "4", "-n", "2", "-r", "1"])
        XCTAssertEqual(r.status, 1, r.stderr)
        // One line: the roles found, those missing, the --contract hint.
        XCTAssertTrue(r.stderr.contains("fits no known generation recipe: found token ids 'input_ids'"), r.stderr)
        XCTAssertTrue(r.stderr.contains("missing write offset"), r.stderr)
        XCTAssertTrue(r.stderr.contains("--contract FILE.json"), r.stderr)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
    }

    func testBenchHelp() throws {
        let r = try run(["bench", "--help"])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.contains("USAGE: forge-ir bench <model> [-p <n>] [-n <n>] [-d <n>] [-r <n>]"), r.stdout)
    }
}
