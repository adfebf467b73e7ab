import Foundation
import GraphIR
import Interpreter
import JSON
import TestSupport
import XCTest

/// `--static-input` and contract providers through the binary, on the Gemma-style PLE fixtures
/// (models-ir/gemma/, tools/make_gemma_ple_fixtures.py).
extension CLITests {
    func gemmaReference(_ name: String) throws -> (prompt: String, greedy: [Int]) {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Self.repoRoot + "/models-ir/gemma/reference/" + name + ".json"))
        let j = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        let prompt = try XCTUnwrap(j["prompt_ids"]?.arrayValue).compactMap(\.intValue).map(String.init).joined(separator: ",")
        return (prompt, try XCTUnwrap(j["greedy_ids"]?.arrayValue).compactMap(\.intValue))
    }

    func generatedIDs(_ r: Result) throws -> [Int]? {
        try JSONValue.parse(r.stdout)["token_ids"]?.arrayValue?.compactMap(\.intValue)
    }

    /// Table mode with `--static-input` (an .npy and a raw `FILE:dtype:shape`), table mode from
    /// the contract file, provider mode from the contract file: torch's greedy ids.
    func testStaticInputsAndProviderGenerateTorchGreedyIds() throws {
        let g = "models-ir/gemma/"
        _ = try fixture("gemma/gemma_ple_table.mlpackage")
        let ref = try gemmaReference("gemma_ple_table")
        let n = String(ref.greedy.count)
        let dir = try Fixtures.tempDir(self)
        // The table as a raw file: the .npy's data bytes.
        let npy = try XCTUnwrap(FileManager.default.contents(atPath: Self.repoRoot + "/" + g + "ple_table.npy"))
        try npy.suffix(512 * 32).write(to: URL(fileURLWithPath: dir + "/ple_table.bin"))
        let bySpec = try run(["generate", g + "gemma_ple_table.mlpackage", "--static-input", "ple_table=\(dir)/ple_table.bin:int8:512,32",
                              "--static-input", "ple_scale=\(g)ple_scale.npy", "--prompt-ids", ref.prompt, "--max-tokens", n, "--json"])
        XCTAssertEqual(bySpec.status, 0, bySpec.stderr)
        XCTAssertEqual(try generatedIDs(bySpec), ref.greedy)
        let byContract = try run(["generate", g + "gemma_ple_table.mlpackage", "--contract", g + "gemma_ple_table.json",
                                  "--prompt-ids", ref.prompt, "--max-tokens", n, "--json"])
        XCTAssertEqual(byContract.status, 0, byContract.stderr)
        XCTAssertEqual(try generatedIDs(byContract), ref.greedy)
        let pref = try gemmaReference("gemma_ple_provider")
        let provider = try run(["generate", g + "gemma_ple_provider.mlpackage", "--contract", g + "gemma_ple_provider.json",
                                "--prompt-ids", pref.prompt, "--max-tokens", n, "--json"])
        XCTAssertEqual(provider.status, 0, provider.stderr)
        XCTAssertEqual(try generatedIDs(provider), pref.greedy)
        let bench = try run(["bench", g + "gemma_ple_table.mlpackage", "--contract", g + "gemma_ple_table.json", "-p", "4", "-n", "4", "-r", "1", "--json"])
        XCTAssertEqual(bench.status, 0, bench.stderr)
        let dump = try run(["dump", g + "gemma_ple_table.mlpackage", "--summary"])
        XCTAssertTrue(dump.stdout.contains("static inputs (bind once): ple_table, ple_scale"), dump.stdout)
    }

    /// Nothing feeds the table: one line naming it, its dtype and shape and the option.
    func testMissingStaticInputIsOneClearError() throws {
        let model = try fixture("gemma/gemma_ple_table.mlpackage")
        let r = try run(["generate", model, "--prompt-ids", "1,2", "--max-tokens", "2"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
        XCTAssertTrue(r.stderr.hasPrefix("forge-ir: error: function 'main' takes input 'ple_table' (int8 [512, 32]), a constant table nothing feeds: bind it with --static-input ple_table=FILE (.npy, or FILE:int8:512,32)"), r.stderr)
        let bad = try run(["generate", model, "--static-input", "ple_table", "--prompt-ids", "1"])
        XCTAssertEqual(bad.status, 64, bad.stderr)
    }

    /// `run` with the tables bound (mapped views) computes what it computes with them passed as
    /// ordinary `--input` arrays; a file of the wrong shape is a typed error, and `diagnose`
    /// reports it as `static_input_mismatch`.
    func testRunBindsStaticInputsAndDiagnoseChecksThem() throws {
        let g = "models-ir/gemma/"
        let model = try fixture("gemma/gemma_ple_table.mlpackage")
        let dir = try Fixtures.tempDir(self)
        var mask = [Float](repeating: -1e4, count: 32)
        mask[0] = 0
        let inputs: [String: Tensor] = ["input_ids": Tensor(.int32, shape: [1, 1], ints: [77]),
                                        "causal_mask": Tensor(.fp16, shape: [1, 1, 1, 32], floats: mask),
                                        "position_ids": Tensor(.int32, shape: [1, 1], ints: [0]),
                                        "cache_offset": Tensor(.int32, shape: [1], ints: [0])]
        var args: [String] = []
        for (n, t) in inputs { try NPY.write(t, path: "\(dir)/\(n).npy"); args += ["--input", "\(n)=\(dir)/\(n).npy"] }
        let bound = try run(["run", model] + args + ["--static-input", "ple_table=\(g)ple_table.npy", "--static-input", "ple_scale=\(g)ple_scale.npy", "--json"])
        XCTAssertEqual(bound.status, 0, bound.stderr)
        let passed = try run(["run", model] + args + ["--input", "ple_table=\(g)ple_table.npy", "--input", "ple_scale=\(g)ple_scale.npy", "--json"])
        XCTAssertEqual(passed.status, 0, passed.stderr)
        func checksum(_ r: Result) throws -> JSONValue? { try JSONValue.parse(r.stdout)["outputs"]?.arrayValue?.first?["checksum"] }
        XCTAssertNotNil(try checksum(bound))
        XCTAssertEqual(try checksum(bound), try checksum(passed))

        let wrong = try run(["run", model] + args + ["--static-input", "ple_table=\(g)ple_table_int4.bin:int8:512,16"])
        XCTAssertEqual(wrong.status, 1)
        XCTAssertTrue(wrong.stderr.contains("input 'ple_table': dimension 1 is 16, expected 32 (shape tensor<int8, [512, 32]>); the file \(g)ple_table_int4.bin holds int8 [512, 16]"), wrong.stderr)

        let d = try run(["diagnose", model, "--static-input", "ple_table=\(g)ple_table_int4.bin:int8:512,16", "--json"])
        XCTAssertEqual(d.status, 1, d.stderr)
        let findings = try XCTUnwrap(JSONValue.parse(d.stdout)["findings"]?.arrayValue)
        let f = try XCTUnwrap(findings.first { $0["code"]?.stringValue == "static_input_mismatch" }, d.stdout)
        XCTAssertEqual(f["severity"]?.stringValue, "error")
        XCTAssertTrue(f["message"]?.stringValue?.contains("declared tensor<int8, [512, 32]> but \(g)ple_table_int4.bin holds int8 [512, 16]") ?? false, d.stdout)
        let good = try run(["diagnose", model, "--static-input", "ple_table=\(g)ple_table.npy", "--static-input", "ple_scale=\(g)ple_scale.npy",
                            "--precision", "fp16"])
        XCTAssertEqual(good.status, 0, good.stdout + good.stderr)
        XCTAssertFalse(good.stdout.contains("static_input_mismatch"), good.stdout)
        // The runtime fp16 check runs with the tables bound; without them it says what to give.
        XCTAssertTrue(good.stdout.contains("fp16_overflow main (fp16; prefill of 1 random token id (seed 0)): ok"), good.stdout)
        let unbound = try run(["diagnose", model, "--precision", "fp16"])
        XCTAssertEqual(unbound.status, 1)
        XCTAssertTrue(unbound.stderr.contains("also takes 'ple_table', 'ple_scale', which diagnose cannot generate; bind them with --static-input NAME=FILE"), unbound.stderr)
    }

    /// The fixed S = 1 graph: a warm-up at 16 is reported; the iOS 18 build's whole-table
    /// int32 → int16 cast (coremltools' add_int16_cast) is flagged.
    func testDiagnoseFlagsFixedLengthAndTheNarrowedTable() throws {
        let table = try fixture("gemma/gemma_ple_table.mlpackage")
        let fixed = try run(["diagnose", table, "--seq", "1,16"])
        XCTAssertTrue(fixed.stdout.contains("error[sequence_fixed]"), fixed.stdout)
        XCTAssertFalse(fixed.stdout.contains("narrowing_cast_on_input"), fixed.stdout)
        let ios18 = try run(["diagnose", try fixture("gemma/gemma_ple_table_ios18.mlpackage")])
        XCTAssertTrue(ios18.stdout.contains("warning[narrowing_cast_on_input]"), ios18.stdout)
        XCTAssertTrue(ios18.stdout.contains("the int32 table input 'ple_table' tensor<int32, [512, 32]> is cast to int16 whole before gather"), ios18.stdout)
        XCTAssertTrue(ios18.stdout.contains("add_int16_cast"), ios18.stdout)
    }
}

extension CLITests {
    /// The same input given twice is a usage error (the second silently won).
    func testStaticInputGivenTwiceIsAUsageError() throws {
        let model = try fixture("gemma/gemma_ple_table.mlpackage")
        let g = Self.repoRoot + "/models-ir/gemma/"
        let r = try run(["generate", model, "--static-input", "ple_table=\(g)ple_table.npy", "--static-input", "ple_table=\(g)ple_table.npy",
                         "--static-input", "ple_scale=\(g)ple_scale.npy", "--prompt-ids", "1,2", "--max-tokens", "1"])
        XCTAssertEqual(r.status, 64, r.stderr)
        XCTAssertTrue(r.stderr.hasPrefix("forge-ir: error: --static-input ple_table is given twice (one file per input)\n"), r.stderr)
    }
}
