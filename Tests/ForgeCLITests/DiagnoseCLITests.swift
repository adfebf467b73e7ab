import Foundation
import GraphIR
import JSON
import TestSupport
import XCTest

/// `forge-ir diagnose`: exit status, human and JSON output.
extension CLITests {
    /// The text and JSON of Apple's recipe package: every shape in one format (ShapeNote), the
    /// bindings its contract never produces listed as not evaluated, no error.
    func testDiagnoseAppleRecipeSnapshots() throws {
        let model = try fixture("recipes/apple_llama31_fp16.mlpackage")
        let r = try run(["diagnose", model])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        try assertSnapshot(r.stdout, "diagnose-apple_llama31_fp16.txt")
        let j = try run(["diagnose", model, "--json"])
        XCTAssertEqual(j.status, 0, j.stderr)
        try assertSnapshot(j.stdout, "diagnose-apple_llama31_fp16.json")
        let doc = try JSONValue.parse(j.stdout)
        let write = try XCTUnwrap(doc["findings"]?.arrayValue?.first { $0["code"]?.stringValue == "state_write_runtime_end" })
        XCTAssertEqual(write["shapes"]?.arrayValue?.last?["shape"], .array([.int(1), .int(2), .null, .int(32)]))
        XCTAssertEqual(write["shapes"]?.arrayValue?.last?["dtype"], .string("fp16"))
    }

    func testDiagnoseCleanModelExitsZero() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_int8.mlpackage"), "--seq", "1,16,64"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("symbol input_ids_1 = input_ids[1] = causal_mask[2] = position_ids[1] : RangeDim(1..64)"), r.stdout)
        XCTAssertTrue(r.stdout.contains("input_ids_1=1 ok · input_ids_1=16 ok · input_ids_1=64 ok"), r.stdout)
        // The seed contract's own catalogue warnings (#2548, #2500), grouped notes, the reminder.
        XCTAssertTrue(r.stdout.contains("warning[state_range_int_input] main\n"), r.stdout)
        XCTAssertTrue(r.stdout.contains("info[fp16_square_in_norm] main: 5× on ops 'op_105_cast_fp16' (mul, #31), "), r.stdout)
        XCTAssertTrue(r.stdout.contains("(first of 5; --json lists each)"), r.stdout)
        XCTAssertTrue(r.stdout.hasSuffix("hint: stateful LLM: add --dynamic (S=1 after a prefill against one call) and --precision fp16 (fp16 overflow) to check it at run time\n0 errors, 2 warnings, 9 notes\n"), r.stdout)
        // --json keeps every op.
        let j = try JSONValue.parse(try run(["diagnose", try fixture("tiny_llama_int8.mlpackage"), "--json"]).stdout)
        XCTAssertEqual(j["findings"]?.arrayValue?.filter { $0["code"]?.stringValue == "fp16_square_in_norm" }.count, 5)
        // No reminder once the run-time checks ran.
        let rt = try run(["diagnose", try fixture("tiny_llama_int8.mlpackage"), "--dynamic"])
        XCTAssertFalse(rt.stdout.contains("hint:"), rt.stdout)
    }

    /// The run-time-indexed writes are warnings (Apple's recipe runs them on the GPU): exit 0.
    func testDiagnoseDynamicEndWarnsWithJSON() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_dynamic_end.mlpackage"), "--json"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "")
        let j = try JSONValue.parse(r.stdout)
        let codes = j["findings"]?.arrayValue?.compactMap { $0["code"]?.stringValue } ?? []
        let contract: Set<String> = ["fp16_square_in_norm", "state_range_int_input", "state_mixed_flexibility", "state_dim_not_multiple_of_32"]
        XCTAssertEqual(codes.filter { !contract.contains($0) }, Array(repeating: "state_write_runtime_end", count: 4))
        XCTAssertEqual(j["summary"]?["errors"]?.intValue, 0)
        let writes = j["findings"]?.arrayValue?.filter { $0["code"]?.stringValue == "state_write_runtime_end" } ?? []
        XCTAssertEqual(writes.compactMap { $0["severity"]?.stringValue }, Array(repeating: "warning", count: 4))
    }

    func testDiagnoseFP16RunNamesTheOverflowingNorm() throws {
        let r = try run(["diagnose", try fixture("diag/fp16_rmsnorm_overflow.mlpackage"), "--precision", "fp16", "--json"])
        XCTAssertEqual(r.status, 1, r.stderr)
        let j = try JSONValue.parse(r.stdout)
        let findings = j["findings"]?.arrayValue ?? []
        XCTAssertEqual(findings.compactMap { $0["code"]?.stringValue }, ["fp16_overflow", "state_mixed_flexibility", "state_range_int_input", "fp16_square_in_norm", "state_dim_not_multiple_of_32"])
        XCTAssertEqual(findings.first?["op"]?["name"]?.stringValue, "norm_sq")
        XCTAssertEqual(findings.first?["fix"]?["pass"]?.stringValue, "fp16_safe_rms_norm")
        XCTAssertEqual(findings.first?["fix"]?["available"], .bool(true))
        let run = try XCTUnwrap(j["runs"]?.arrayValue?.first)
        XCTAssertEqual(run["check"]?.stringValue, "fp16_overflow")
        XCTAssertEqual(run["ok"], .bool(false))
        XCTAssertEqual(run["inputs"]?.stringValue, "prefill of 16 random token ids (seed 0)")
    }

    func testDiagnoseFixedNormRunsCleanAndDynamicFindsS1() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("diag-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixed = dir + "/fixed.mlpackage"
        let o = try run(["optimize", try fixture("diag/fp16_rmsnorm_overflow.mlpackage"), "-o", fixed, "--passes", "fp16_safe_rms_norm"])
        XCTAssertEqual(o.status, 0, o.stderr)
        let r = try run(["diagnose", fixed, "--precision", "fp16", "--dynamic"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("fp16_overflow main (fp16; prefill of 16 random token ids (seed 0)): ok — no op overflows in fp16"), r.stdout)
        XCTAssertTrue(r.stdout.hasSuffix("0 errors, 2 warnings, 1 note\n"), r.stdout)   // #2548, #2500; state width
        let s1 = try run(["diagnose", try fixture("diag/s1_position_range.mlpackage"), "--dynamic", "--prompt-ids", "3,1,4,1,5,9"])
        XCTAssertEqual(s1.status, 1)
        XCTAssertTrue(s1.stdout.contains("error[s1_mismatch] main: op 'pos_emb_rows' (gather, #18)"), s1.stdout)
        XCTAssertTrue(s1.stdout.contains("S=6 (one call of 6 given token ids)"), s1.stdout)
    }

    func testDiagnoseRuntimeInputsAndErrors() throws {
        let ok = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--precision", "fp16", "--inputs", try fixture("inputs/tiny_llama_fp16.npz")])
        XCTAssertEqual(ok.status, 0, ok.stderr)
        XCTAssertTrue(ok.stdout.contains("(fp16; inputs from "), ok.stdout)
        let noPrecision = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--inputs", try fixture("inputs/tiny_llama_fp16.npz")])
        XCTAssertEqual(noPrecision.status, 64)
        XCTAssertTrue(noPrecision.stderr.contains("--inputs is for the fp16 run"), noPrecision.stderr)
        let notLLM = try run(["diagnose", try fixture("diag/mask_beyond_fp16.mlpackage"), "--precision", "fp16"])
        XCTAssertEqual(notLLM.status, 1)
        XCTAssertTrue(notLLM.stderr.contains("needs --inputs F.npz"), notLLM.stderr)
        let bad = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--precision", "fp8"])
        XCTAssertEqual(bad.status, 64)
        // --dynamic on a model that is not a stateful LLM: the check is reported as skipped and
        // the static findings still come out as JSON.
        let dyn = try run(["diagnose", try fixture("diag/mask_beyond_fp16.mlpackage"), "--dynamic", "--json"])
        let json = try JSONValue.parse(dyn.stdout)
        let summary = json["runs"]?.arrayValue?.first?["summary"]?.stringValue ?? ""
        XCTAssertTrue(summary.hasPrefix("skipped: ") && summary.contains("fits no known generation recipe") && summary.contains("--contract"), dyn.stdout)
        XCTAssertNotNil(json["findings"]?.arrayValue, dyn.stdout)
    }

    func testDiagnoseUsageErrors() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--seq", "1,x"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("--seq takes comma-separated whole numbers ≥ 0, got '1,x'"), r.stderr)
        let f = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--function", "nope"])
        XCTAssertEqual(f.status, 1)
        XCTAssertTrue(f.stderr.contains("no function 'nope'"), f.stderr)
    }
}
