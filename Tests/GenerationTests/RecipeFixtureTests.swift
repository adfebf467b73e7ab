import Foundation
import Generation
import GraphIR
import Interpreter
import JSON
import TestSupport
import XCTest

/// The packages of the public recipes (tools/make_recipe_fixtures.py, models-ir/recipes/):
/// the contract is detected from signature and graph, and the generator reproduces torch's
/// greedy ids (fp32 compute, prefill + 16 decode steps) and its logits.
final class RecipeFixtureTests: XCTestCase {
    struct Reference {
        var prompt: [Int32]
        var greedy: [Int32]
        var logits: Tensor
    }

    static let names = ["apple_llama31_fp16", "apple_llama31_int4", "prefill_decode", "sdpa_seed", "explicit_kv"]

    static func path(_ name: String) -> String { Fixtures.path("recipes/" + name + ".mlpackage") }

    func reference(_ name: String) throws -> Reference {
        let data = try XCTUnwrap(FileManager.default.contents(atPath: Fixtures.path("recipes/" + name + ".json")))
        let json = try JSONValue.parse(String(decoding: data, as: UTF8.self))
        func ids(_ key: String) throws -> [Int32] { try XCTUnwrap(json[key]?.arrayValue).map { Int32(try XCTUnwrap($0.intValue)) } }
        return Reference(prompt: try ids("prompt_ids"), greedy: try ids("greedy_ids"),
                         logits: try NPY.read(path: Fixtures.path("recipes/" + name + "_logits.npy")))
    }

    func contract(_ name: String) throws -> GenerationContract {
        try GenerationContract.detect(model: try ModelLoader.load(path: Self.path(name)))
    }

    func testContractsAreDetected() throws {
        let apple = try contract("apple_llama31_fp16")
        XCTAssertEqual(apple.tokenIDs, "inputIds")
        XCTAssertEqual(apple.mask, .init(name: "causalMask", dtype: .fp16, window: .growing, maskedValue: -.infinity))
        XCTAssertEqual(apple.writeOffset, .fromMaskShape)
        XCTAssertEqual(apple.positions, .fromMaskEnd)
        XCTAssertEqual(apple.kv, .stackedStates(["keyCache", "valueCache"]))
        XCTAssertEqual(apple.functions, .single("main", .range(lower: 1, upper: 64)))
        XCTAssertEqual(apple.contextLength, 64)
        XCTAssertEqual(try contract("apple_llama31_int4"), apple)

        let pair = try contract("prefill_decode")
        XCTAssertEqual(pair.functions, .prefillDecode(prefill: "prefill", prefillWidth: .fixed(8), decode: "decode"))
        XCTAssertEqual(pair.writeOffset, .input("current_pos"))
        XCTAssertEqual(pair.positions, .input("position_ids"))
        XCTAssertEqual(pair.mask?.window, .fixed)

        let sdpa = try contract("sdpa_seed")
        XCTAssertEqual(sdpa.kv, .perLayerStates(["key_cache_0", "value_cache_0", "key_cache_1", "value_cache_1"]))
        XCTAssertEqual(sdpa.writeOffset, .input("cache_offset"))

        let explicit = try contract("explicit_kv")
        XCTAssertEqual(explicit.kv, .explicit([.init(input: "key_cache", output: "key_cache_out"),
                                               .init(input: "value_cache", output: "value_cache_out")]))
        XCTAssertEqual(explicit.logits, "logits")
        XCTAssertEqual(explicit.staticInputs, [])
    }

    /// Greedy ids equal torch's; each call's last-row logits within 0.05 of torch's (fp16
    /// weights and KV states in the package, fp32 cache in torch; the smallest top-1/top-2
    /// margin of the references is 0.29).
    func testGreedyIdsAndLogitsMatchTorch() throws {
        for name in Self.names {
            let ref = try reference(name)
            let model = try ModelLoader.load(path: Self.path(name))
            let c = try GenerationContract.detect(model: model)
            let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
            g.reset()
            var ids: [Int32] = [], maxDiff: Float = 0
            let vocab = ref.logits.shape[1]
            var row = try g.prefill(ref.prompt)
            for k in 0..<ref.greedy.count {
                let want = Array(ref.logits.floats[(k * vocab)..<((k + 1) * vocab)])
                XCTAssertEqual(row.count, vocab, name)
                maxDiff = max(maxDiff, zip(row, want).map { abs($0 - $1) }.max() ?? .infinity)
                let next = Int32(row.indices.max { row[$0] < row[$1] }!)
                ids.append(next)
                if k + 1 < ref.greedy.count { row = try g.prefill([next]) }
            }
            XCTAssertEqual(ids, ref.greedy, name)
            XCTAssertLessThan(maxDiff, 0.05, name)
            XCTAssertEqual(g.position, ref.prompt.count + ref.greedy.count - 1, name)
        }
    }

    /// The same through `generate` (greedy sampling, stop at max tokens).
    func testGenerateReproducesTorch() throws {
        for name in Self.names {
            let ref = try reference(name)
            let model = try ModelLoader.load(path: Self.path(name))
            let c = try GenerationContract.detect(model: model)
            let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
            let r = try g.generate(prompt: ref.prompt, maxTokens: ref.greedy.count)
            XCTAssertEqual(r.tokenIDs, ref.greedy, name)
        }
    }

    /// A prompt longer than the prefill function's 8 tokens: prefill chunks of 8, then the rest
    /// padded (or by decode calls) — the same ids as token-by-token prefill through `decode`.
    func testPrefillDecodePairChunksAgreeWithTokenByToken() throws {
        let model = try ModelLoader.load(path: Self.path("prefill_decode"))
        let c = try GenerationContract.detect(model: model)
        let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
        XCTAssertTrue(g.prefillSession !== g.session)
        XCTAssertTrue(g.prefillSession.states === g.session.states)
        let prompt: [Int32] = (0..<19).map { Int32(($0 * 37 + 11) % 512) }
        let chunked = try g.generate(prompt: prompt, maxTokens: 8).tokenIDs
        g.prefillChunk = 1
        let single = try g.generate(prompt: prompt, maxTokens: 8).tokenIDs
        XCTAssertEqual(chunked, single)
    }

    /// `--contract` JSON: the file's roles override detection; unknown keys and wrong names are
    /// refused naming the key.
    func testContractFile() throws {
        let model = try ModelLoader.load(path: Self.path("sdpa_seed"))
        let c = try GenerationContract(json: try JSONValue.parse(#"{"mask": {"input": "causal_mask", "masked_value": "-inf"}, "context_length": 32}"#), model: model)
        XCTAssertEqual(c.mask?.maskedValue, -.infinity)
        XCTAssertEqual(c.contextLength, 32)
        XCTAssertEqual(c.tokenIDs, "input_ids")
        XCTAssertTrue(c.source.hasPrefix("file"))
        // The detected contract round-trips through its own JSON.
        let detected = try GenerationContract.detect(model: model)
        var again = try GenerationContract(json: Self.schemaOnly(detected.json), model: model)
        again.source = detected.source
        XCTAssertEqual(again, detected)
        XCTAssertThrowsError(try GenerationContract(json: try JSONValue.parse(#"{"token_id": "x"}"#), model: model)) { e in
            XCTAssertTrue("\(e)".contains("unknown key \"token_id\""), "\(e)")
        }
        XCTAssertThrowsError(try GenerationContract(json: try JSONValue.parse(#"{"token_ids": "ids"}"#), model: model)) { e in
            XCTAssertTrue("\(e)".contains("has no input 'ids'"), "\(e)")
        }
    }

    /// `json` minus the keys that are descriptions, not schema (source, recipe, width, dtype, layout).
    static func schemaOnly(_ j: JSONValue) -> JSONValue {
        guard case var .object(o) = j else { return j }
        for k in ["source", "recipe", "width"] { o[k] = nil }
        if case var .object(m)? = o["mask"] { m["dtype"] = nil; o["mask"] = .object(m) }
        if case var .object(k)? = o["kv"] { k["layout"] = nil; o["kv"] = .object(k) }
        return .object(o)
    }
}
