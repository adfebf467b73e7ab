import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// `lower_slice_update` on the dynamic-end-index fixture (a torch slice assignment
/// `cache[:, :, off:off+S, :] = k` converted by coremltools 9).
final class LowerSliceUpdateTests: XCTestCase {
    func load() throws -> Model { try ModelLoader.load(path: Fixtures.path("tiny_llama_dynamic_end.mlpackage")) }

    func count(_ model: Model, _ type: String) -> Int {
        var n = 0
        model.program.functions[0].body.walk { if $0.type == type { n += 1 } }
        return n
    }

    func testRewritesEveryRunTimeEndWrite() throws {
        let model = try load()
        XCTAssertEqual(count(model, "slice_update"), 4)
        let r = try LowerSliceUpdate().run(on: model)
        try Verifier.verify(model)
        XCTAssertEqual(r.statistics["slice writes lowered"], 4)
        XCTAssertEqual(count(model, "slice_update"), 0)
        XCTAssertEqual(count(model, "scatter"), 4)
        // The state shapes and the signature do not change.
        let original = try load()
        XCTAssertEqual(model.program.functions[0].inputs.map(\.type), original.program.functions[0].inputs.map(\.type))
        XCTAssertEqual(model.program.functions[0].outputs.map(\.type), original.program.functions[0].outputs.map(\.type))
        try FileCheck.check(MILPrinter.print(model), """
        CHECK: = shape(x = new_1_cast_fp16)
        CHECK: = range_1d(
        CHECK: key_cache_0_internal_tensor_assign_1_cast_fp16 = scatter(axis = key_cache_0_internal_tensor_assign_1_cast_fp16_axis, data = read_state_0
        CHECK-NEXT: write_state(data = key_cache_0_internal_tensor_assign_1_cast_fp16, input = key_cache_0)
        """)
    }

    func testStaticWritesAreLeftAlone() throws {
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        XCTAssertFalse(try LowerSliceUpdate().run(on: model).changed)
    }

    /// Outputs and states are identical to the original over a prefill and ten S=1 decode steps.
    func testNumericallyIdentical() throws {
        let original = try load()
        let lowered = try load()
        try PassManager(passes: Pipelines.defaultPipeline).run(on: lowered)
        XCTAssertEqual(count(lowered, "slice_update"), 0)
        let a = try Session(model: original), b = try Session(model: lowered)
        let prompt: [Int32] = [5, 77, 130, 9, 250, 31, 64]
        var steps: [[Int32]] = [prompt]
        for i in 0..<10 { steps.append([Int32(11 + 17 * i)]) }
        var offset = 0
        for ids in steps {
            let inputs = LLMInputs.make(ids: ids, offset: offset, ctx: 64)
            let oa = try a.predict(inputs), ob = try b.predict(inputs)
            XCTAssertEqual(oa["logits"]!.floats, ob["logits"]!.floats, "logits differ at offset \(offset)")
            offset += ids.count
        }
        for (name, buf) in a.states.buffers {
            XCTAssertEqual(buf.tensor().floats, b.states.buffers[name]!.tensor().floats, "state \(name) differs")
        }
    }
}
