import Foundation
import GraphIR
import Interpreter
import JSON
import Generation
import TestSupport
import XCTest

/// The fused paths fire on every public-recipe package (tools/make_recipe_fixtures.py), not
/// only on our own conversion: each attention (the MIL `scaled_dot_product_attention` op or the
/// softmax · matmul chain, GQA through whatever `tile` / `reshape` / `transpose` the converter
/// wrote) runs as one in-place kernel, each KV write updates its state in place (Apple's
/// stacked 5-D cache included, every layer), no call falls back to the original ops, and no
/// `tile` or `read_state` copy of a cache is left — while the greedy ids still equal torch's.
final class RecipeFusionTests: XCTestCase {
    struct Expect {
        let name: String
        let attentionKind: String
        let stateWrites: Int
    }

    static let expected: [Expect] = [
        .init(name: "apple_llama31_fp16", attentionKind: "scaled_dot_product_attention", stateWrites: 4),
        .init(name: "apple_llama31_int4", attentionKind: "scaled_dot_product_attention", stateWrites: 4),
        .init(name: "prefill_decode", attentionKind: "attention", stateWrites: 4),
        .init(name: "sdpa_seed", attentionKind: "scaled_dot_product_attention", stateWrites: 4),
        .init(name: "explicit_kv", attentionKind: "attention", stateWrites: 4),
    ]

    func testFusedPathsFireOnEveryRecipe() throws {
        for e in Self.expected {
            let data = try XCTUnwrap(FileManager.default.contents(atPath: Fixtures.path("recipes/\(e.name).json")))
            let json = try JSONValue.parse(String(decoding: data, as: UTF8.self))
            let prompt = try XCTUnwrap(json["prompt_ids"]?.arrayValue).map { Int32(try XCTUnwrap($0.intValue)) }
            let greedy = try XCTUnwrap(json["greedy_ids"]?.arrayValue).map { Int32(try XCTUnwrap($0.intValue)) }
            let model = try ModelLoader.load(path: RecipeFixtureTests.path(e.name))
            let c = try GenerationContract.detect(model: model)
            let g = try Generator(session: Session(model: model, function: c.decodeFunction), contract: c)
            for s in g.sessions { s.plan.profile = [:] }
            XCTAssertEqual(try g.generate(prompt: prompt, maxTokens: greedy.count).tokenIDs, greedy, e.name)
            for s in g.sessions {
                let label = "\(e.name) \(s.function.name)"
                let sites = s.plan.fusionSites
                let attention = sites.filter { $0.kind == e.attentionKind }
                XCTAssertEqual(attention.count, 2, "\(label): one attention site per layer")
                let writes = sites.filter { $0.kind == "state_write" }
                XCTAssertEqual(writes.count, e.stateWrites, label)
                for site in attention + writes {
                    XCTAssertNil(site.reason, "\(label) \(site.op)")
                    XCTAssertEqual(site.fallbacks, [:], "\(label) \(site.op)")
                    XCTAssertGreaterThan(site.fusedCalls, 0, "\(label) \(site.op)")
                }
                let profile = try XCTUnwrap(s.plan.profile)
                for op in ["tile", "read_state", "write_state", "softmax"] {
                    XCTAssertNil(profile[op], "\(label): \(op) still runs")
                }
                XCTAssertTrue(s.plan.fusionReport().contains("\(e.attentionKind)"), label)
            }
        }
    }
}
