import Foundation
import GraphIR
import Interpreter
import JSON
import TestSupport
import XCTest

/// `forge-ir run` end to end through the binary.
extension CLITests {
    /// Every fixture runs with the inputs in `models-ir/inputs/` and `--json` reports each
    /// output the model declares (names from the coremltools reference JSON).
    func testRunJSONOnEveryFixture() throws {
        let dir = Self.repoRoot + "/models-ir/inputs"
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".npz") }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 8)
        for file in files {
            let stem = String(file.dropLast(4))
            let parts = stem.split(separator: ".").map(String.init)
            let fixture = parts[0]
            let ext = FileManager.default.fileExists(atPath: Self.repoRoot + "/models-ir/\(fixture).mlpackage") ? ".mlpackage" : ".mlmodel"
            var args = ["run", "models-ir/\(fixture)\(ext)", "--inputs", "models-ir/inputs/\(file)", "--json"]
            if parts.count > 1 { args += ["--function", parts[1]] }
            let r = try run(args)
            XCTAssertEqual(r.status, 0, "\(stem): \(r.stderr)")
            let json = try JSONValue.parse(r.stdout)
            let outputs = json["outputs"]?.arrayValue ?? []
            let refText = try String(contentsOfFile: Self.repoRoot + "/models-ir/reference/\(fixture).json", encoding: .utf8)
            let ref = try JSONValue.parse(refText)
            let fn = parts.count > 1 ? parts[1] : (ref["default_function"]?.stringValue ?? "main")
            let refFunction = ref["functions"]?.arrayValue?.first { $0["name"]?.stringValue == fn }
            let expectedNames = refFunction?["outputs"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
            XCTAssertEqual(outputs.compactMap { $0["name"]?.stringValue }, expectedNames, stem)
            for o in outputs {
                guard case let .double(c)? = o["checksum"] else {
                    if case .int? = o["checksum"] { continue }
                    XCTFail("\(stem): no checksum in \(o)"); continue
                }
                XCTAssertTrue(c.isFinite, "\(stem): output checksum \(c)")
            }
        }
    }

    /// Prefill then decode through files: `--state-out` of the first call feeds `--state-in` of
    /// the second, and the decode logits equal torch's (tiny_llama_fp16 reference, call 1).
    func testRunChainsStatesThroughFiles() throws {
        let ref = try NPZ.read(path: Self.repoRoot + "/models-ir/reference/tiny_llama_fp16_run.npz")
        let tmp = NSTemporaryDirectory() + "forge-ir-run-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        func inputs(_ k: Int) throws -> [String] {
            var args: [String] = []
            for name in ["input_ids", "causal_mask", "position_ids", "cache_offset"] {
                let path = "\(tmp)/call\(k)_\(name).npy"
                try NPY.write(ref["call\(k)_\(name)"]!, path: path)
                args += ["--input", "\(name)=\(path)"]
            }
            return args
        }
        let model = "models-ir/tiny_llama_fp16.mlpackage"
        let r0 = try run(["run", model] + inputs(0) + ["--state-out", "\(tmp)/kv", "--out", "\(tmp)/o0"])
        XCTAssertEqual(r0.status, 0, r0.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(tmp)/kv/key_cache_0.npy"))
        let r1 = try run(["run", model] + inputs(1) + ["--state-in", "\(tmp)/kv", "--out", "\(tmp)/o1"])
        XCTAssertEqual(r1.status, 0, r1.stderr)
        let logits = try NPY.read(path: "\(tmp)/o1/logits.npy")
        XCTAssertEqual(logits.dtype, .fp16)
        let want = ref["call1_logits"]!.floats
        let err = zip(logits.floats, want).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(err, 1e-2)
        // Without the state, the decode step sees an empty cache and differs.
        let r2 = try run(["run", model] + inputs(1) + ["--out", "\(tmp)/o2"])
        XCTAssertEqual(r2.status, 0)
        let cold = try NPY.read(path: "\(tmp)/o2/logits.npy").floats
        XCTAssertGreaterThan(zip(cold, want).map { abs($0 - $1) }.max()!, 0.1)
    }

    func testRunInputErrorsAreOneLine() throws {
        let model = "models-ir/tiny_llama_fp16.mlpackage"
        let tmp = NSTemporaryDirectory() + "forge-ir-run-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        // Missing inputs.
        var r = try run(["run", model])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("missing input 'input_ids'"), r.stderr)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
        // Sequence longer than the RangeDim allows.
        try NPY.write(Tensor(.int32, shape: [1, 65], ints: [Int32](repeating: 1, count: 65)), path: "\(tmp)/ids.npy")
        r = try run(["run", model, "--inputs", "models-ir/inputs/tiny_llama_fp16.npz", "--input", "input_ids=\(tmp)/ids.npy"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("input 'input_ids'") && r.stderr.contains("RangeDim(1..64)"), r.stderr)
        // An input the model does not take.
        r = try run(["run", model, "--inputs", "models-ir/inputs/tiny_llama_fp16.npz", "--input", "bogus=\(tmp)/ids.npy"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("unexpected input 'bogus'"), r.stderr)
        // Wrong dtype.
        try NPY.write(Tensor(.fp32, shape: [1, 4], floats: [1, 2, 3, 4]), path: "\(tmp)/f.npy")
        r = try run(["run", model, "--inputs", "models-ir/inputs/tiny_llama_fp16.npz", "--input", "input_ids=\(tmp)/f.npy"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("dtype fp32, expected int32"), r.stderr)
        // Usage errors exit 64.
        r = try run(["run", model, "--precision", "fp8"])
        XCTAssertEqual(r.status, 64)
        r = try run(["run", model, "--input", "noequals"])
        XCTAssertEqual(r.status, 64)
    }
}
