import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// An encoder's attention as coremltools converts a Hugging Face BERT: K and V come from
/// `linear` → `reshape [1, S, H, D]` → `transpose` (the key with the negative perm
/// `[0, 2, -1, -3]`), so their rows are not D-contiguous. The fused step packs them once and
/// runs the fused attention; the outputs stay within 1e-5 of torch (the recorded
/// `hf_bert_encoder_torch.npz`, built by `tools/make_foreign_fixtures.py`).
final class EncoderAttentionTests: XCTestCase {
    func testExportersBertAttentionFusesAndMatchesTorch() throws {
        let model = try ModelLoader.load(path: Fixtures.path("foreign/hf_bert_encoder.mlpackage"))
        let ref = try NPZ.read(path: Fixtures.path("foreign/hf_bert_encoder_torch.npz"))
        let plan = try ExecutionPlan(function: try XCTUnwrap(model.program.function(named: "main")))
        let out = try plan.run(inputs: ["input_ids": try XCTUnwrap(ref["input_ids"]),
                                        "attention_mask": try XCTUnwrap(ref["attention_mask"])])
        let sites = plan.fusionSites.filter { $0.kind == "attention" }
        XCTAssertEqual(sites.count, 2)
        for s in sites {
            XCTAssertNil(s.reason, s.op)
            XCTAssertEqual(s.fusedCalls, 1, "\(s.op): \(s.fallbacks)")
            XCTAssertEqual(s.fallbacks, [:], s.op)
        }
        let got = try XCTUnwrap(out["last_hidden_state"]), want = try XCTUnwrap(ref["last_hidden_state"])
        XCTAssertEqual(got.shape, want.shape)
        let diff = zip(got.floats, want.floats).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThan(diff, 1e-5)
    }

    /// `transpose` with perm entries counted from the end reads as the kernel does; the packed
    /// view is the transposed array element by element (index arithmetic, not the view code).
    func testNegativePermViewGathersTheTransposedArray() throws {
        let shape = [1, 3, 2, 4]  // [1, S, H, D]
        let src = (0..<24).map(Float.init)
        var view = LayoutView(shape: shape)
        try view.transpose([0, 2, -1, -3])  // → [1, H, D, S]
        XCTAssertEqual(view.shape, [1, 2, 4, 3])
        let got = try view.gather(.tensor(Tensor(.fp32, shape: shape, floats: src)))
        var want: [Float] = []
        for h in 0..<2 { for d in 0..<4 { for s in 0..<3 { want.append(src[(s * 2 + h) * 4 + d]) } } }
        XCTAssertEqual(got, want)
        XCTAssertThrowsError(try view.transpose([0, 1, 2, -5]))
    }

    /// A mask that does not broadcast against the scores ([1, 4] for 5 tokens): the fused step
    /// runs the original ops, and the error names the op that fails (the mask `add`) as the
    /// op-by-op plan (`observing: .all`, no fusion) names it — not the fused step's last op
    /// (it said `op 'context_layer_1' (matmul)`).
    func testMaskThatDoesNotBroadcastNamesTheFailingOp() throws {
        let model = try ModelLoader.load(path: Fixtures.path("foreign/hf_bert_encoder.mlpackage"))
        let f = try XCTUnwrap(model.program.function(named: "main"))
        let inputs = ["input_ids": Tensor(.int32, shape: [1, 5], ints: [1, 2, 3, 4, 5]),
                      "attention_mask": Tensor(.int32, shape: [1, 4], ints: [1, 1, 1, 1])]
        func message(_ plan: ExecutionPlan) -> String {
            do { _ = try plan.run(inputs: inputs); return "no error" } catch { return "\(error)" }
        }
        let plain = message(try ExecutionPlan(function: f, observing: .all))
        XCTAssertTrue(plain.contains("(add): shapes"), plain)
        let fused = try ExecutionPlan(function: f)
        XCTAssertEqual(fused.fusionSites.filter { $0.kind == "attention" && $0.reason == nil }.count, 2)
        XCTAssertEqual(message(fused), plain)
    }
}
