import Foundation
import GraphIR
import TestSupport
import XCTest

/// `forge-ir optimize` through the binary.
extension CLITests {
    func tempDir() throws -> String {
        let d = NSTemporaryDirectory() + "forge-ir-opt-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: d) }
        return d
    }

    func testOptimizeLowersRunTimeEndWrites() throws {
        let out = try tempDir() + "/opt.mlpackage"
        let r = try run(["optimize", "models-ir/tiny_llama_dynamic_end.mlpackage", "-o", out])
        XCTAssertEqual(r.status, 0, r.stderr)
        // onnxsim-style table: op, before, after.
        let row = r.stdout.split(separator: "\n").first { $0.hasPrefix("slice_update ") }.map(String.init) ?? ""
        XCTAssertEqual(row.split(separator: " ").map(String.init), ["slice_update", "4", "0"], r.stdout)
        XCTAssertTrue(r.stdout.contains("lower_slice_update: slice writes lowered 4"), r.stdout)
        let model = try ModelLoader.load(path: out)
        var types: [String: Int] = [:]
        model.program.functions[0].body.walk { types[$0.type, default: 0] += 1 }
        XCTAssertNil(types["slice_update"])
        XCTAssertEqual(types["scatter"], 4)
    }

    func testOptimizeInstrumentationAndJSON() throws {
        let dir = try tempDir()
        var r = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/a.mlpackage", "--passes", "dead_code_elimination,noop_elimination",
                         "--print-ir-after-all", "--time-passes"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("// ----- IR after dead_code_elimination"), r.stderr)
        XCTAssertTrue(r.stderr.contains("// ----- IR after noop_elimination"), r.stderr)
        XCTAssertTrue(r.stderr.contains("pass execution timing"), r.stderr)
        r = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/b.mlpackage", "--pipeline", "cleanup", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONValue.parse(r.stdout)
        XCTAssertNotNil(json["op_counts_before"]?["const"])
        XCTAssertEqual(json["passes"]?.arrayValue?.count, 6)
    }

    func testOptimizeUsageErrors() throws {
        var r = try run(["optimize", "models-ir/tiny_inline.mlmodel"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("missing -o"), r.stderr)
        let dir = try tempDir()
        r = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/x.mlpackage", "--passes", "no_such_pass"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("no_such_pass") && r.stderr.contains("lower_slice_update"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/x.mlpackage"))
        r = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/y.mlpackage", "--pipeline", "nope"])
        XCTAssertEqual(r.status, 64)
        r = try run(["optimize", "--list-passes", "x"])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.contains("fuse_dequant") && r.stdout.contains("default"), r.stdout)
    }
}
