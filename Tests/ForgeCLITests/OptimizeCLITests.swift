import Foundation
import GraphIR
import JSON
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

    /// `-o` naming the input model itself (directly, with a trailing slash, through `..` or a
    /// symbolic link) is refused by optimize, extract and reduce, and the input is left as it was.
    func testOutputThatIsTheInputIsRefused() throws {
        let dir = try tempDir()
        let model = dir + "/m.mlpackage"
        try FileManager.default.copyItem(atPath: "models-ir/tiny_llama_int8.mlpackage", toPath: model)
        try FileManager.default.createSymbolicLink(atPath: dir + "/link.mlpackage", withDestinationPath: model)
        let before = try packageBytes(model)
        for o in [model, model + "/", dir + "/../" + (dir as NSString).lastPathComponent + "/m.mlpackage", dir + "/link.mlpackage"] {
            for args in [["optimize", model, "-o", o], ["extract", model, "--to", "logits", "-o", o],
                         ["reduce", model, "--check", "test -e {model}", "-o", o]] {
                let r = try run(args)
                XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
                XCTAssertTrue(r.stderr.contains("is the input model itself"), "\(args): \(r.stderr)")
            }
        }
        XCTAssertEqual(try packageBytes(model), before, "the input package changed")
    }

    /// Every file of a package with its bytes (to tell whether it was touched).
    func packageBytes(_ path: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let e = FileManager.default.enumerator(atPath: path)
        while let f = e?.nextObject() as? String {
            var dir: ObjCBool = false
            if FileManager.default.fileExists(atPath: path + "/" + f, isDirectory: &dir), !dir.boolValue {
                out[f] = try Data(contentsOf: URL(fileURLWithPath: path + "/" + f))
            }
        }
        return out
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

    /// Apple's recipe, specialised at S:END points: every function static (no RangeDim in dump).
    func testOptimizeSpecializesAppleRecipeAtSEndPoints() throws {
        let dir = try Fixtures.tempDir(self)
        let r = try run(["optimize", try fixture("recipes/apple_llama31_fp16.mlpackage"), "-o", dir + "/s.mlpackage",
                         "--passes", "specialize_sequence", "--pass-option", "specialize_sequence.sizes=7:7,1:8"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("functions at one cache position (mask END fixed) 2"), r.stdout)
        let d = try run(["dump", dir + "/s.mlpackage"])
        XCTAssertTrue(d.stdout.contains("functions: main_s1_end8, main_s7_end7 (default: main_s1_end8)"), d.stdout)
        XCTAssertTrue(d.stdout.contains("causalMask: fp16 [1, 1, 7, 7]"), d.stdout)
        XCTAssertFalse(d.stdout.contains("RangeDim"), d.stdout)
        let g = try run(["diagnose", dir + "/s.mlpackage"])
        XCTAssertEqual(g.status, 0, g.stdout)
        XCTAssertTrue(g.stdout.hasSuffix("0 errors, 0 warnings, 10 notes\n"), g.stdout)
        // END < S is refused with a usage-level error naming the pass.
        let bad = try run(["optimize", try fixture("recipes/apple_llama31_fp16.mlpackage"), "-o", dir + "/b.mlpackage",
                           "--passes", "specialize_sequence", "--pass-option", "specialize_sequence.sizes=8:3"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("forge-ir: error: ") && bad.stderr.contains("END = 3 is less than S = 8") && bad.stderr.contains("specialize_sequence"), bad.stderr)
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

    /// `--fix`: diagnose's fix passes, then cleanup; what was fixed is printed and the written
    /// package diagnoses clean of those findings.
    func testOptimizeFixAppliesTheProposedPasses() throws {
        let dir = try tempDir()
        let out = dir + "/fixed.mlpackage"
        let r = try run(["optimize", "models-ir/coremltools_crash_end_index.mlpackage", "-o", out, "--fix"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("fixed:\n  lower_slice_update: 2 findings (state_write_runtime_end) — slice writes lowered 2\n"
            + "  split_rank0_expand_dims: 1 finding (rank0_expand_dims_swap) — rank-0 expand_dims users split 1\n"), r.stdout)
        XCTAssertTrue(r.stdout.contains("after: 0 errors, 0 warnings"), r.stdout)
        XCTAssertTrue(r.stdout.contains("dead_code_elimination: ops removed"), r.stdout)   // cleanup ran
        let d = try run(["diagnose", out, "--json"])
        XCTAssertEqual(d.status, 0, d.stdout)
        // The seed contract: writes lowered, norms made fp16-safe, S specialised (1 and 64 clamped to
        // RangeDim(1..64)): two static functions, nothing above a note left.
        let seed = try run(["optimize", "models-ir/tiny_llama_dynamic_end.mlpackage", "-o", dir + "/seed.mlpackage", "--fix"])
        XCTAssertEqual(seed.status, 0, seed.stderr)
        XCTAssertTrue(seed.stdout.contains("  specialize_sequence: 2 findings (state_mixed_flexibility, state_range_int_input) — flexible functions specialised 1, functions written 2"), seed.stdout)
        XCTAssertTrue(seed.stdout.contains("after: 0 errors, 0 warnings"), seed.stdout)
        let dump = try run(["dump", dir + "/seed.mlpackage"])
        XCTAssertTrue(dump.stdout.contains("functions: main_s1, main_s64 (default: main_s1)"), dump.stdout)
        XCTAssertFalse(dump.stdout.contains("RangeDim"), dump.stdout)
        let bad = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/e.mlpackage", "--pass-option", "nope.sizes=1"])
        XCTAssertEqual(bad.status, 64)
    }

    func testOptimizePassesAndPipelineCombine() throws {
        let dir = try tempDir()
        let r = try run(["optimize", "models-ir/tiny_llama_dynamic_end.mlpackage", "-o", dir + "/c.mlpackage",
                         "--passes", "lower_slice_update", "--pipeline", "cleanup", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let names = try JSONValue.parse(r.stdout)["passes"]?.arrayValue?.compactMap { $0["pass"]?.stringValue } ?? []
        XCTAssertEqual(names, ["lower_slice_update", "const_elimination", "noop_elimination", "const_deduplication",
                               "common_subexpression_elimination", "dead_code_elimination", "topological_reorder"])
        // --passes alone runs exactly those.
        let only = try run(["optimize", "models-ir/tiny_inline.mlmodel", "-o", dir + "/d.mlpackage", "--passes", "noop_elimination", "--json"])
        XCTAssertEqual(try JSONValue.parse(only.stdout)["passes"]?.arrayValue?.count, 1)
    }
}
