import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// The catalogue of known failure patterns: one fixture per pattern (tools/make_diag_fixtures.py,
/// `CATALOGUE_EXPECTED`) reports exactly its finding; each fix pass clears it and computes what
/// the numpy / torch reference recorded next to the fixture (`<name>.refs.npz`) says.
final class CatalogueTests: XCTestCase {
    func load(_ name: String) throws -> Model { try ModelLoader.load(path: Fixtures.path("diag/\(name).mlpackage")) }
    func refs(_ name: String) throws -> [String: Tensor] { try NPZ.read(path: Fixtures.path("diag/\(name).refs.npz")) }

    /// Catalogue codes found, without the state-width note unless `keep` names it.
    func catalogueCodes(_ d: Diagnosis, keep: String = "") -> [String] {
        d.findings.map(\.code).filter { Catalogue.pattern($0) != nil && ($0 != "state_dim_not_multiple_of_32" || $0 == keep) }
    }

    static let expected: [String: String] = [
        "cat_state_mixed_flexibility": "state_mixed_flexibility",
        "cat_state_range_int_input": "state_range_int_input",
        "cat_enumerated_combinations": "enumerated_shapes_combinations",
        "cat_gather_index_narrowed": "gather_index_narrowed",
        "cat_narrowing_cast": "narrowing_cast_on_input",
        "cat_gather_table_uint16": "gather_table_over_uint16",
        "cat_quant_scale_zero": "quantization_scale_invalid",
        "cat_rmsnorm_eps_scaled": "rmsnorm_eps_scaled",
        "cat_state_dim_32": "state_dim_not_multiple_of_32",
        "cat_log_softmax": "fp16_log_softmax",
        "cat_slice_update_short": "slice_update_rank",
        "cat_state_write_5d": "state_write_runtime_end",
        "cat_rank0_expand_dims": "rank0_expand_dims_swap",
        "state_output_alias": "state_output_alias",
        "enumerated_stateful": "enumerated_shapes_with_state",
        "cat_unsupported_op": "unsupported_op",
    ]

    func testEachCatalogueFixtureReportsExactlyItsFinding() throws {
        for (name, code) in Self.expected.sorted(by: { $0.key < $1.key }) {
            let d = Diagnoser.diagnose(try load(name))
            let text = d.text(modelPath: name)
            XCTAssertEqual(catalogueCodes(d, keep: code), [code], "\(name): \(text)")
            let significant = d.findings.filter { $0.severity != .info }.map(\.code)
            XCTAssertTrue(significant.allSatisfy { $0 == code }, "\(name): \(significant)")
            let p = try XCTUnwrap(Catalogue.pattern(code), code)
            let f = try XCTUnwrap(d.findings.first { $0.code == code })
            XCTAssertEqual(f.fixPass, p.fixPass, name)
        }
        // Every pattern has a fixture here (the code is the table's).
        XCTAssertEqual(Set(Self.expected.values), Set(Catalogue.patterns.map(\.code)))
    }

    /// `unsupported_op` (a coremltools "torch" dialect op edited into the spec,
    /// tools/make_diag_fixtures.py): diagnose and run name the same op.
    func testUnsupportedOpDiagnoseAndRunAgree() throws {
        let model = try load("cat_unsupported_op")
        let f = try XCTUnwrap(Diagnoser.diagnose(model).findings.first { $0.code == "unsupported_op" })
        XCTAssertEqual(f.op?.type, "torch_upsample_nearest_neighbor")
        XCTAssertEqual(f.op?.name, "up")
        XCTAssertThrowsError(try Session(model: model).predict(["x": Tensor(.fp16, shape: [1, 1, 4, 4], floats: Array(repeating: 1, count: 16))])) { e in
            XCTAssertTrue("\(e)".contains("torch_upsample_nearest_neighbor"), "\(e)")
        }
    }

    func testCatalogueDetailsOnTheFixtures() throws {
        let q = Diagnoser.diagnose(try load("cat_quant_scale_zero")).findings.first { $0.code == "quantization_scale_invalid" }
        XCTAssertTrue(q?.message.contains("1 zero (channel 2)") ?? false, q?.message ?? "")
        XCTAssertTrue(q?.message.contains("1 NaN (channel 5)") ?? false, q?.message ?? "")
        let g = Diagnoser.diagnose(try load("cat_gather_index_narrowed")).findings[0]
        XCTAssertEqual(g.severity, .error)
        XCTAssertTrue(g.message.contains("40000 rows"), g.message)
        let mixed = Diagnoser.diagnose(try load("cat_state_mixed_flexibility")).findings.first { $0.code == "state_mixed_flexibility" }
        XCTAssertEqual(mixed?.severity, .warning)   // fixed + RangeDim (an EnumeratedShapes input would make it an error)
    }

    /// The clean fixtures report no catalogue pattern but the ones of the seed's own contract
    /// (RangeDim token ids and a fixed cache_offset next to states: #2500, #2548) and the
    /// state-width note.
    func testCleanFixturesReportNoCataloguePattern() throws {
        let seed: Set<String> = ["state_range_int_input", "state_mixed_flexibility"]
        for name in ["tiny_llama_fp16", "tiny_llama_int8", "smollm2_twin_int8", "multifunction", "enumerated_shapes", "mixed_dtypes"] {
            let d = Diagnoser.diagnose(try ModelLoader.load(path: Fixtures.path("\(name).mlpackage")))
            XCTAssertEqual(catalogueCodes(d).filter { !seed.contains($0) }, [], "\(name): \(d.text(modelPath: name))")
        }
        let seedFindings = Diagnoser.diagnose(try ModelLoader.load(path: Fixtures.path("tiny_llama_int8.mlpackage"))).findings
        XCTAssertEqual(Set(seedFindings.map(\.code)).intersection(seed), seed)
        XCTAssertTrue(seedFindings.filter { seed.contains($0.code) }.allSatisfy { $0.fixPass == "specialize_sequence" })
    }

    // MARK: - fix passes

    /// Runs `pass` then the cleanup pipeline, verifies, and checks the finding is gone.
    func fixed(_ name: String, _ pass: Pass.Type, clears code: String) throws -> Model {
        let model = try load(name)
        let manager = PassManager(passes: [pass] + Pipelines.cleanup)
        try manager.run(on: model)
        try Verifier.verify(model)
        let d = Diagnoser.diagnose(model)
        XCTAssertFalse(d.findings.contains { $0.code == code }, "\(name) after \(pass.name): \(d.text(modelPath: name))")
        return model
    }

    func testWidenGatherIndex() throws {
        let r = try refs("cat_gather_index_narrowed")
        let inputs = ["input_ids": try XCTUnwrap(r["input_ids"])]
        // Before: ids 32768 and 39999 wrap (int16) and gather other rows, or fail.
        let before = try? Session(model: try load("cat_gather_index_narrowed")).predict(inputs)["emb"]?.floats
        XCTAssertNotEqual(before, r["emb"]?.floats)
        let model = try fixed("cat_gather_index_narrowed", WidenGatherIndex.self, clears: "gather_index_narrowed")
        let out = try Session(model: model).predict(inputs)
        XCTAssertEqual(out["emb"]?.floats, r["emb"]?.floats)
    }

    func testExactRMSNorm() throws {
        let r = try refs("cat_rmsnorm_eps_scaled")
        let inputs = ["x": try XCTUnwrap(r["x"])]
        let want = try XCTUnwrap(r["out"]?.floats)
        func maxDiff(_ a: [Float]) -> Float { zip(a, want).map { abs($0 - $1) }.max() ?? .infinity }
        let before = try XCTUnwrap(try Session(model: try load("cat_rmsnorm_eps_scaled")).predict(inputs)["out"]?.floats)
        XCTAssertGreaterThan(maxDiff(before), 0.05)   // eps·max² with eps = 0.1
        let model = try fixed("cat_rmsnorm_eps_scaled", ExactRMSNorm.self, clears: "rmsnorm_eps_scaled")
        let after = try XCTUnwrap(try Session(model: model).predict(inputs)["out"]?.floats)
        XCTAssertLessThan(maxDiff(after), 1e-5)
        // Still divides by the row max before squaring (no fp16 overflow note).
        XCTAssertFalse(Diagnoser.diagnose(model).findings.contains { $0.code == "fp16_square_in_norm" })
    }

    func testLogSoftmaxStable() throws {
        let r = try refs("cat_log_softmax")
        let inputs = ["x": try XCTUnwrap(r["x"])]
        let want = try XCTUnwrap(r["logp"]?.floats)
        // Before, in fp16 as the device computes: the -40 logit's probability underflows and its
        // log is -inf (log's 1e-45 epsilon is 0 in fp16).
        let before = try XCTUnwrap(try Session(model: try load("cat_log_softmax"), precision: .fp16).predict(inputs)["logp"]?.floats)
        XCTAssertEqual(before[1], -.infinity)
        let model = try fixed("cat_log_softmax", LogSoftmaxStable.self, clears: "fp16_log_softmax")
        for precision in [Precision.fp32, .fp16] {
            let after = try XCTUnwrap(try Session(model: model, precision: precision).predict(inputs)["logp"]?.floats)
            for (a, w) in zip(after, want) { XCTAssertEqual(a, w, accuracy: 0.05 + 0.002 * abs(w), "\(precision)") }
        }
    }

    func testPadSliceUpdate() throws {
        let r = try refs("cat_slice_update_short")
        let inputs = ["x": try XCTUnwrap(r["x"]), "u": try XCTUnwrap(r["u"])]
        let model = try fixed("cat_slice_update_short", PadSliceUpdate.self, clears: "slice_update_rank")
        XCTAssertEqual(try Session(model: model).predict(inputs)["out"]?.floats, r["out"]?.floats)
    }

    /// #2325: the 5-D cache [2, 1, 4, 16, 8] written at [1, :, :2, pos:pos+1, :], two calls.
    func testLowerSliceUpdateFiveDimensional() throws {
        let r = try refs("cat_state_write_5d")
        let model = try fixed("cat_state_write_5d", LowerSliceUpdate.self, clears: "state_write_runtime_end")
        var types: [String] = []
        model.program.functions[0].body.walk { types.append($0.type) }
        XCTAssertTrue(types.contains("scatter"))
        let s = try Session(model: model)
        for call in 0..<2 {
            let out = try s.predict(["k": try XCTUnwrap(r["call\(call).k"]), "pos": try XCTUnwrap(r["call\(call).pos"])])
            XCTAssertEqual(out["out"]?.floats, r["call\(call).out"]?.floats, "call \(call)")
            XCTAssertEqual(s.states.buffers["cache"]?.tensor().floats, r["call\(call).cache"]?.floats, "call \(call)")
        }
    }

    func testSplitRank0ExpandDims() throws {
        let r = try refs("cat_rank0_expand_dims")
        let model = try fixed("cat_rank0_expand_dims", SplitRank0ExpandDims.self, clears: "rank0_expand_dims_swap")
        let out = try Session(model: model).predict(["x": try XCTUnwrap(r["x"])])
        XCTAssertEqual(out["out"]?.shape, r["out"]?.shape)
        XCTAssertEqual(out["out"]?.floats, r["out"]?.floats)
    }

    /// Apple's Llama 3.1 recipe package: lower_slice_update lowers its four 5-D writes
    /// (squeezed layer index, run-time past..END) and the logits and caches over a prefill of 5
    /// and two decode calls stay those of the torch module (fp16 package vs fp32 torch).
    func testLowerSliceUpdateOnTheAppleRecipe() throws {
        let r = try refs("apple_recipe_llama")
        let original = try load("apple_recipe_llama")
        let model = try fixed("apple_recipe_llama", LowerSliceUpdate.self, clears: "state_write_runtime_end")
        let a = try Session(model: original), b = try Session(model: model)
        for call in 0..<3 {
            let inputs = ["inputIds": try XCTUnwrap(r["call\(call).inputIds"]), "causalMask": try XCTUnwrap(r["call\(call).causalMask"])]
            let la = try XCTUnwrap(try a.predict(inputs)["logits"]?.floats), lb = try XCTUnwrap(try b.predict(inputs)["logits"]?.floats)
            XCTAssertEqual(la, lb, "call \(call): lowering changed the logits")
            let want = try XCTUnwrap(r["call\(call).logits"]?.floats)
            XCTAssertEqual(lb.count, want.count)
            let diff = zip(lb, want).map { abs($0 - $1) }.max() ?? .infinity
            XCTAssertLessThan(diff, 0.05, "call \(call)")
            let k = try XCTUnwrap(b.states.buffers["keyCache"]?.tensor().floats), kw = try XCTUnwrap(r["call\(call).keyCache"]?.floats)
            XCTAssertLessThan(zip(k, kw).map { abs($0 - $1) }.max() ?? .infinity, 0.01, "call \(call) keyCache")
        }
    }
}

extension CatalogueTests {
    /// The README's catalogue table is `Catalogue.markdownTable`.
    func testREADMEHasTheCatalogueTable() throws {
        let readme = try String(contentsOfFile: Fixtures.path("../README.md"), encoding: .utf8)
        XCTAssertTrue(readme.contains(Catalogue.markdownTable), "README lacks the table:\n" + Catalogue.markdownTable)
    }
}
