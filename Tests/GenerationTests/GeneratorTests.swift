import Foundation
import GraphIR
@testable import Interpreter
@testable import Generation
import Tokenizers
import TestSupport
import XCTest

/// The generation driver on graphs whose calls take a fixed number of tokens (padded chunks).
final class GeneratorTests: XCTestCase {
    /// The tiny llama with S fixed to `width` (the graph itself computes shapes at run time).
    func fixedWidthSession(_ width: Int) throws -> Session {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")
        let f = try XCTUnwrap(model.program.function(named: model.defaultFunctionName))
        for v in f.inputs {
            guard let t = v.type.tensorType else { continue }
            switch v.name {
            case "input_ids", "position_ids": v.type = .tensor(TensorType(t.dtype, fixed: [1, width]))
            case "causal_mask": v.type = .tensor(TensorType(t.dtype, fixed: [1, 1, width, 64]))
            default: break
            }
        }
        return try Session(model: model)
    }

    /// Near the end of the context a padded call no longer fits and the graph takes no narrower
    /// one: generation stops with `context_full` (it used to run a 1-token call the graph
    /// refuses: "input 'input_ids': dimension 1 is 1, expected 4").
    func testFixedWidthStopsAtContextEnd() throws {
        let g = try Generator(session: try fixedWidthSession(4))
        XCTAssertEqual(g.contract.prefill.width, .fixed(4))
        let prompt = (0..<61).map { Int32($0 % 200 + 1) }
        let r = try g.generate(prompt: prompt, maxTokens: 10)
        XCTAssertEqual(r.stopReason, "context_full")
        XCTAssertEqual(r.tokenIDs.count, 1, "the prefill's token; no 4-wide call fits at position 61 of 64")
        XCTAssertEqual(g.position, 61)

        // Padded calls give the same tokens as the flexible graph while they fit.
        let flexible = try Generator(session: Session(model: try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")))
        let short = Array(prompt.prefix(7))
        let a = try g.generate(prompt: short, maxTokens: 12), b = try flexible.generate(prompt: short, maxTokens: 12)
        XCTAssertEqual(a.tokenIDs, b.tokenIDs)
        XCTAssertEqual(a.stopReason, "max_tokens")
    }
}
