import Foundation
import Generation
import GraphIR
import Interpreter
import JSON
import TestSupport
import XCTest

/// A causal LM without a KV cache, as Hugging Face `exporters` converts one (`input_ids` +
/// `attention_mask` int32 [1, RangeDim(1, 64)] → `logits`; models-ir/foreign/hf_causal_lm, by
/// tools/make_foreign_fixtures.py): the contract is detected as `kv: none`, and the generator,
/// feeding the whole sequence every step, reproduces torch's greedy run of the same module
/// (`hf_causal_lm_greedy.npz`: ids and every step's logits row).
final class RecomputeContractTests: XCTestCase {
    static let path = Fixtures.path("foreign/hf_causal_lm.mlpackage")

    func testContractIsDetectedAsNoCache() throws {
        let c = try GenerationContract.detect(model: try ModelLoader.load(path: Self.path))
        XCTAssertEqual(c.kv, .none)
        XCTAssertEqual(c.writeOffset, .none)
        XCTAssertEqual(c.tokenIDs, "input_ids")
        XCTAssertEqual(c.mask, .init(name: "attention_mask", dtype: .int32, window: .padding, maskedValue: 0))
        XCTAssertEqual(c.positions, .fromWriteOffset)
        XCTAssertEqual(c.contextLength, 64)
        XCTAssertEqual(c.functions, .single("main", .range(lower: 1, upper: 64)))
        XCTAssertEqual(c.staticInputs, [])
        XCTAssertTrue(c.summaryLines.contains("  KV: none (every call recomputes the sequence from position 0)"), "\(c.summaryLines)")
        // The JSON form (less dump's own keys) reads back as the same contract.
        guard case var .object(o) = c.json else { return XCTFail("contract JSON is not an object") }
        for k in ["source", "recipe", "width"] { o[k] = nil }
        var back = try GenerationContract(json: .object(o), model: try ModelLoader.load(path: Self.path))
        back.source = c.source
        XCTAssertEqual(back, c)
    }

    /// An encoder (BERT: input_ids, attention_mask, token_type_ids → last_hidden_state) is no
    /// generation contract: its float output is not over the embedding table's rows.
    func testEncoderIsNotTakenForACacheLessLM() throws {
        let model = try ModelLoader.load(path: Fixtures.path("foreign/hf_bert_encoder.mlpackage"))
        XCTAssertThrowsError(try GenerationContract.detect(model: model))
    }

    func testGreedyRunMatchesTorch() throws {
        let ref = try NPZ.read(path: Fixtures.path("foreign/hf_causal_lm_greedy.npz"))
        let prompt = try XCTUnwrap(ref["prompt_ids"]).ints
        let greedy = try XCTUnwrap(ref["greedy_ids"]).ints
        let rows = try XCTUnwrap(ref["step_logits"])
        let vocab = rows.shape[1]
        let model = try ModelLoader.load(path: Self.path)
        let g = try Generator(session: Session(model: model, function: "main"))
        g.reset()
        var row = try g.prefill(prompt)
        var ids: [Int32] = [], maxDiff: Float = 0
        for k in 0..<greedy.count {
            let want = Array(rows.floats[(k * vocab)..<((k + 1) * vocab)])
            XCTAssertEqual(row.count, vocab)
            maxDiff = max(maxDiff, zip(row, want).map { abs($0 - $1) }.max() ?? .infinity)
            let next = Int32(row.indices.max { row[$0] < row[$1] }!)
            ids.append(next)
            if k + 1 < greedy.count { row = try g.prefill([next]) }
        }
        XCTAssertEqual(ids, greedy)
        // fp32 package against torch fp32 (the smallest top-1/top-2 margin is 0.03).
        XCTAssertLessThan(maxDiff, 1e-4)
        XCTAssertEqual(g.position, prompt.count + greedy.count - 1)
        XCTAssertEqual(try g.generate(prompt: prompt, maxTokens: greedy.count).tokenIDs, greedy)
    }

    /// The context is the token input's widest S: a 64-token sequence is the last call.
    func testStopsAtTheWidestCall() throws {
        let g = try Generator(session: Session(model: try ModelLoader.load(path: Self.path), function: "main"))
        let r = try g.generate(prompt: [Int32](repeating: 5, count: 60), maxTokens: 10)
        XCTAssertEqual(r.stopReason, "context_full")
        XCTAssertEqual(r.tokenIDs.count, 5)
        XCTAssertEqual(g.position, 64)
    }

    /// A contract file can say it: `"kv": "none"`, `"write_offset": "none"`, a padding mask;
    /// a rank-2 mask called "fixed" is refused with the rank.
    func testContractFileNamesNoCache() throws {
        let model = try ModelLoader.load(path: Self.path)
        let c = try GenerationContract(json: try JSONValue.parse(#"{"kv": "none", "write_offset": "none", "mask": {"input": "attention_mask"}}"#), model: model)
        XCTAssertEqual(c.kv, .none)
        XCTAssertEqual(c.mask?.window, .padding)
        XCTAssertThrowsError(try GenerationContract(json: try JSONValue.parse(#"{"mask": {"input": "attention_mask", "window": "fixed"}}"#), model: model)) { e in
            XCTAssertTrue("\(e)".contains("has rank 2; a fixed mask has rank 4"), "\(e)")
        }
    }
}
