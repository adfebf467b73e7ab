import Foundation
import GraphIR
import XCTest

/// `forge-ir diagnose`: exit status, human and JSON output.
extension CLITests {
    func testDiagnoseCleanModelExitsZero() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_int8.mlpackage"), "--seq", "1,16,64"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stdout.contains("symbol input_ids_1 = input_ids[1] = causal_mask[2] = position_ids[1] : RangeDim(1..64)"), r.stdout)
        XCTAssertTrue(r.stdout.contains("input_ids_1=1 ok · input_ids_1=16 ok · input_ids_1=64 ok"), r.stdout)
        XCTAssertTrue(r.stdout.hasSuffix("0 errors, 0 warnings, 5 notes\n"), r.stdout)
    }

    func testDiagnoseDynamicEndExitsOneWithJSON() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_dynamic_end.mlpackage"), "--json"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "")
        let j = try JSONValue.parse(r.stdout)
        let codes = j["findings"]?.arrayValue?.compactMap { $0["code"]?.stringValue } ?? []
        XCTAssertEqual(codes.filter { $0 != "fp16_square_in_norm" }, Array(repeating: "state_write_runtime_end", count: 4))
        XCTAssertEqual(j["summary"]?["errors"]?.intValue, 4)
    }

    func testDiagnoseUsageErrors() throws {
        let r = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--seq", "1,x"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("--seq takes comma-separated non-negative integers"), r.stderr)
        let f = try run(["diagnose", try fixture("tiny_llama_fp16.mlpackage"), "--function", "nope"])
        XCTAssertEqual(f.status, 1)
        XCTAssertTrue(f.stderr.contains("no function 'nope'"), f.stderr)
    }
}
