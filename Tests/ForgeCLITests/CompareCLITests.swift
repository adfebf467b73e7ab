import Comparison
import Foundation
import GraphIR
import Interpreter
import JSON
import XCTest

/// `forge-ir run --outputs`, `compare`, `extract` and `reduce` end to end through the binary.
/// Expected values: models-ir/compare/expected.json and twin_fp16_walk.json (tools/
/// make_compare_fixtures.py, tools/compare_walk_twin.py: a numpy walk), torch logits in
/// models-ir/reference/tiny_llama_*_run.npz.
extension CLITests {
    func expected(_ file: String) throws -> JSONValue {
        try JSONValue.parse(String(contentsOfFile: Self.repoRoot + "/models-ir/compare/" + file, encoding: .utf8))
    }

    /// fp32 against fp16 on the SmolLM2 twin: the same first diverging value as the numpy walk
    /// over `run --outputs all` of both precisions.
    func testCompareTwinPrecisionsMatchesNumpyWalk() throws {
        let walk = try expected("twin_fp16_walk.json")
        let r = try run(["compare", "models-ir/smollm2_twin_int8.mlpackage", "--precision", "fp32,fp16",
                         "--inputs", "models-ir/inputs/smollm2_twin_int8.npz", "--json"])
        XCTAssertEqual(r.status, 1, r.stderr)   // the fp16 logits are beyond 1e-3
        let json = try JSONValue.parse(r.stdout)
        XCTAssertEqual(json["first_divergence"]?["value"]?["name"]?.stringValue, walk["first_divergence"]?.stringValue)
        XCTAssertEqual(json["first_divergence"]?["value"]?["op_type"]?.stringValue, walk["op_type"]?.stringValue)
        XCTAssertEqual(r.stderr, "")            // no progress on a pipe
    }

    /// An fp32 program under `--precision fp32,fp16`: nothing is typed fp16, so both sides are
    /// the same; compare passes and says why instead of reporting a silent zero.
    func testComparePrecisionsOnAnFP32ProgramSaysNothingIsRounded() throws {
        let r = try run(["compare", "models-ir/compare/mlp_good.mlpackage", "--precision", "fp32,fp16",
                         "--inputs", "models-ir/compare/mlp.npz"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertTrue(r.stderr.contains("types no value fp16, so --precision fp16 rounds nothing"), r.stderr)
    }

    /// Two packages, one with a corrupted weight row: the op reading it is named, its weight
    /// input shows the error, the exit status is 1.
    func testCompareNamesTheOpReadingACorruptedWeight() throws {
        let exp = try expected("expected.json")
        let r = try run(["compare", "models-ir/compare/mlp_good.mlpackage", "models-ir/compare/mlp_corrupt.mlpackage",
                         "--inputs", "models-ir/compare/mlp.npz", "--json"])
        XCTAssertEqual(r.status, 1, r.stderr)
        let d = try JSONValue.parse(r.stdout)["first_divergence"]
        XCTAssertEqual(d?["value"]?["op"]?.stringValue, exp["corrupt_reader"]?.stringValue)
        let weight = d?["inputs"]?.arrayValue?.first { $0["input"]?.stringValue == "weight" }
        guard case let .double(err)? = weight?["metrics"]?["max_abs"] else { return XCTFail("no weight error in \(String(describing: d))") }
        XCTAssertEqual(err, 1, accuracy: 1e-6)   // the row was shifted by +1.0
        // Run alone on the reference's inputs it is still wrong: it is the op that breaks the numbers.
        XCTAssertEqual(d?["isolated"]?["ok"], .bool(false))
        let local = try JSONValue.parse(r.stdout)["first_local_divergence"]
        XCTAssertEqual(local?["value"]?["op"]?.stringValue, exp["corrupt_reader"]?.stringValue)
        let same = try run(["compare", "models-ir/compare/mlp_good.mlpackage", "models-ir/compare/mlp_good.mlpackage",
                            "--inputs", "models-ir/compare/mlp.npz"])
        XCTAssertEqual(same.status, 0, same.stdout)
    }

    /// Against torch logits over a prefill and five decode calls (states carried): small errors
    /// and exit 0; a tolerance tighter than those errors: exit 1.
    func testCompareAgainstTorchReference() throws {
        let args = ["compare", "models-ir/tiny_llama_fp16.mlpackage", "--reference", "models-ir/reference/tiny_llama_fp16_run.npz", "--json"]
        let ok = try run(args + ["--atol", "0.02", "--rtol", "0"])
        XCTAssertEqual(ok.status, 0, ok.stdout + ok.stderr)
        let calls = try JSONValue.parse(ok.stdout)["calls"]?.arrayValue ?? []
        XCTAssertEqual(calls.count, 6)
        for c in calls {
            let logits = c["outputs"]?.arrayValue?.first { $0["name"]?.stringValue == "logits" }
            guard case let .double(e)? = logits?["metrics"]?["max_abs"], case let .double(snr)? = logits?["metrics"]?["snr_db"],
                  case let .double(top1)? = logits?["metrics"]?["top1_agreement"] else { return XCTFail("no metrics in \(c)") }
            XCTAssertLessThan(e, 0.01)
            XCTAssertGreaterThan(snr, 60)
            XCTAssertEqual(top1, 1)
        }
        let tight = try run(args + ["--atol", "1e-4", "--rtol", "0"])
        XCTAssertEqual(tight.status, 1)
    }

    /// Two packages over a generated prefill and decode calls, states carried: one comparison
    /// per call, the same generated inputs on both sides (the int8 weights make them differ).
    func testCompareOverDecodeSteps() throws {
        let r = try run(["compare", "models-ir/tiny_llama_fp16.mlpackage", "models-ir/tiny_llama_int8.mlpackage",
                         "--prompt-length", "4", "--decode-steps", "2", "--json"])
        XCTAssertEqual(r.status, 1, r.stderr)
        let calls = try JSONValue.parse(r.stdout)["calls"]?.arrayValue ?? []
        XCTAssertEqual(calls.map { $0["label"]?.stringValue?.hasPrefix("decode step") ?? false }, [false, true, true])
        for (i, c) in calls.enumerated() {
            XCTAssertEqual(c["outputs"]?.arrayValue?.first?["shape"], .array([.int(1), .int(i == 0 ? 4 : 1), .int(256)]))
        }
        // The first divergence is a value computed from an int8 weight.
        let op = try JSONValue.parse(r.stdout)["first_divergence"]?["value"]?["op_type"]?.stringValue
        XCTAssertTrue(["linear", "matmul", "gather"].contains(op ?? ""), String(describing: op))
    }

    /// `run --outputs` names, the byte budget, and `extract`: the extracted package reproduces
    /// the full run's intermediate. The sub-package's fp16 input rounds what it is given to fp16,
    /// as Core ML does; a full run in fp32 precision holds that intermediate unrounded, so the
    /// reference is the full run with `--precision fp16`.
    func testRunOutputsAndExtract() throws {
        let tmp = try tempDir()
        let model = "models-ir/smollm2_twin_int8.mlpackage", inputs = "models-ir/inputs/smollm2_twin_int8.npz"
        // fp16 precision: every intermediate is fp16-rounded, as the extracted package's fp16
        // input will be (a model input of type fp16 is rounded on the way in, as Core ML does).
        let r = try run(["run", model, "--inputs", inputs, "--precision", "fp16", "--out", tmp + "/full",
                         "--outputs", "input_1_cast_fp16,linear_0_cast_fp16"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let capped = try run(["run", model, "--inputs", inputs, "--out", tmp + "/cap", "--outputs", "all", "--max-output-bytes", "64K"])
        XCTAssertEqual(capped.status, 1)
        XCTAssertTrue(capped.stderr.contains("--max-output-bytes budget of 65536 bytes"), capped.stderr)
        let unknown = try run(["run", model, "--inputs", inputs, "--out", tmp + "/u", "--outputs", "no_such_value"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("'no_such_value'"), unknown.stderr)

        let sub = tmp + "/sub.mlpackage"
        let e = try run(["extract", model, "--from", "input_1_cast_fp16", "--to", "linear_0_cast_fp16", "-o", sub])
        XCTAssertEqual(e.status, 0, e.stderr)
        let d = try run(["dump", sub, "--json"])
        let desc = try JSONValue.parse(d.stdout)
        XCTAssertEqual(desc["inputs"]?.arrayValue?.first?["shape_range"], .array([.array([.int(1), .int(1)]), .array([.int(1), .int(256)]), .array([.int(576), .int(576)])]))
        // Fed the full run's intermediate, the extracted package computes the full run's value
        // exactly: inside the plan and at its fp16 output.
        let c = try run(["compare", sub, "--reference", tmp + "/full", "--precision", "fp16", "--atol", "0", "--rtol", "0", "--json"])
        XCTAssertEqual(c.status, 0, c.stdout + c.stderr)
        let call = try JSONValue.parse(c.stdout)["calls"]?.arrayValue?.first
        for list in ["ops", "outputs"] {
            let v = call?[list]?.arrayValue?.first { $0["name"]?.stringValue == "linear_0_cast_fp16" }
            XCTAssertEqual(v?["metrics"]?["max_abs"], .double(0), list)
            XCTAssertEqual(v?["metrics"]?["count"], .int(4 * 576), list)
        }
        let s = try run(["run", sub, "--input", "input_1_cast_fp16=\(tmp)/full/input_1_cast_fp16.npy", "--out", tmp + "/sub"])
        XCTAssertEqual(s.status, 0, s.stderr)
        let got = try NPY.read(path: tmp + "/sub/linear_0_cast_fp16.npy"), want = try NPY.read(path: tmp + "/full/linear_0_cast_fp16.npy")
        XCTAssertEqual(got.dtype, .fp16)
        XCTAssertEqual(got.shape, want.shape)
        // fp32 compute of the same fp16 inputs, rounded at the output: within one fp16 ulp.
        for (a, b) in zip(got.floats, want.floats) { XCTAssertLessThanOrEqual(abs(a - b), max(abs(b), 6.1e-5) / 1024) }
    }

    /// `reduce` finds the planted NaN op of a 300-op chain in at most 12 checks.
    func testReduceFindsPlantedOp() throws {
        guard let bin = Self.binary else { throw XCTSkip("no binary") }
        let exp = try expected("expected.json")
        let tmp = try tempDir()
        let check = "! '\(bin)' run {model} --inputs models-ir/compare/chain300.npz --json | grep -q null"
        let r = try run(["reduce", "models-ir/compare/chain300.mlpackage", "--check", check, "-o", tmp + "/min.mlpackage", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONValue.parse(r.stdout)
        XCTAssertEqual(json["op"]?["name"]?.stringValue, exp["planted"]?.stringValue)
        XCTAssertLessThanOrEqual(json["checks_run"]?.intValue ?? 99, 12)
        XCTAssertTrue(FileManager.default.fileExists(atPath: tmp + "/min.mlpackage/Manifest.json"))
        XCTAssertEqual(r.stderr, "")   // no progress on a pipe, check output discarded
    }

    /// Golden workflow: `run --save-inputs G --out G --outputs …` once, `compare --reference G` later.
    func testGoldenFolderRoundTrip() throws {
        let tmp = try tempDir()
        let g = tmp + "/golden"
        let r = try run(["run", "models-ir/compare/mlp_good.mlpackage", "--inputs", "models-ir/compare/mlp.npz",
                         "--save-inputs", g, "--out", g, "--outputs", "fc1,fc2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let same = try run(["compare", "models-ir/compare/mlp_good.mlpackage", "--reference", g, "--atol", "0", "--rtol", "0"])
        XCTAssertEqual(same.status, 0, same.stdout + same.stderr)
        let bad = try run(["compare", "models-ir/compare/mlp_corrupt.mlpackage", "--reference", g, "--json"])
        XCTAssertEqual(bad.status, 1)
        let d = try JSONValue.parse(bad.stdout)["first_divergence"]
        XCTAssertEqual(d?["value"]?["name"]?.stringValue, "fc2")
        XCTAssertEqual(d?["after"]?["name"]?.stringValue, "fc1")   // the last recorded value that passed
    }

    /// A package and its compiled form (models-ir/compiled, tools/make_mlmodelc_fixtures.py)
    /// compute the same values, op by op.
    func testComparePackageWithCompiledModel() throws {
        let r = try run(["compare", "models-ir/tiny_llama_fp16.mlpackage", "models-ir/compiled/tiny_llama_fp16.mlmodelc",
                         "--atol", "0", "--rtol", "0", "--json"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        let ops = try JSONValue.parse(r.stdout)["calls"]?.arrayValue?.first?["ops"]?.arrayValue ?? []
        XCTAssertGreaterThan(ops.count, 100)
        XCTAssertTrue(ops.allSatisfy { $0["ok"] == .bool(true) })
    }

    /// Usage mistakes exit 64, bad names and references 1, each with one line naming the problem.
    func testCompareExtractReduceMistakes() throws {
        let m = "models-ir/compare/mlp_good.mlpackage"
        let cases: [([String], Int32, String)] = [
            (["compare", m], 64, "compare needs a second package"),
            (["compare", m, "--precision", "fp8"], 64, "'fp8'"),
            (["compare", m, m, "--reference", "x.npz"], 64, "not both"),
            (["compare", m, "--reference", "models-ir/compare/mlp.npz"], 1, "no array names a value"),
            (["extract", m, "--to", "nope", "-o", NSTemporaryDirectory() + "x.mlpackage"], 1, "no value 'nope'"),
            (["extract", m, "--from", "relu1", "--to", "relu0", "-o", NSTemporaryDirectory() + "x.mlpackage"], 1, "not read by anything"),
            // An op's name where a value's is wanted (diagnose prints op names), and a typo.
            (["extract", "models-ir/tiny_llama_int8.mlpackage", "--to", "op_68_shape", "-o", NSTemporaryDirectory() + "x.mlpackage"], 1,
             "'op_68_shape' is an op (shape), not a value; its output is 'var_68_shape'"),
            (["extract", "models-ir/tiny_llama_int8.mlpackage", "--to", "var_68_shap", "-o", NSTemporaryDirectory() + "x.mlpackage"], 1,
             "(did you mean 'var_68_shape'?)"),
            (["reduce", m, "--check", "true"], 64, "must contain {model}"),
            (["reduce", m, "--check", "true {model}"], 1, "the check passes on the whole model"),
            (["run", m, "--inputs", "models-ir/compare/mlp.npz", "--outputs", "all"], 64, "--outputs needs --out"),
        ]
        for (args, status, text) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, status, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.hasPrefix("forge-ir: error: ") && r.stderr.contains(text), "\(args): \(r.stderr)")
        }
    }

    /// When the first divergent op could not be run alone, the summary does not claim that no op
    /// diverges on its own (the fixed seed model: its rmsnorm's scaled input is new in the fix).
    func testUnisolatedDivergenceIsNotCalledAccumulated() throws {
        let out = try tempDir() + "/fix.mlpackage"
        var r = try run(["optimize", "models-ir/tiny_llama_dynamic_end.mlpackage", "-o", out, "--fix"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try run(["compare", "models-ir/tiny_llama_dynamic_end.mlpackage", out])
        XCTAssertTrue(r.stdout.contains("not run alone: "), r.stdout)
        XCTAssertTrue(r.stdout.contains("could not be (above), so whether it computes differently is not known"), r.stdout)
        XCTAssertFalse(r.stdout.contains("the difference accumulates"), r.stdout)
    }

    func testValueFileNames() {
        XCTAssertEqual(ValueFiles.fileName(for: "var_42"), "var_42.npy")
        let odd = ValueFiles.fileName(for: "layers/0/q")
        XCTAssertTrue(odd.hasPrefix("layers_0_q-") && odd.hasSuffix(".npy"), odd)
        XCTAssertNotEqual(odd, ValueFiles.fileName(for: "layers_0_q"))
        XCTAssertNotEqual(ValueFiles.fileName(for: "a/b"), ValueFiles.fileName(for: "a:b"))
        XCTAssertFalse(ValueFiles.fileName(for: "../x").contains("/"))
        XCTAssertFalse(ValueFiles.fileName(for: ".hidden").hasPrefix("."))
    }
}
