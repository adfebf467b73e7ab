import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// `specialize_sequence`: each static function computes exactly what the flexible function
/// computes at its size — logits and states over a prefill and decode calls sharing one state.
final class SpecializeSequenceTests: XCTestCase {
    override func tearDown() { PassOptions.values = [:] }

    func specialise(_ path: String, sizes: String?) throws -> Model {
        if let sizes { PassOptions.values["specialize_sequence.sizes"] = sizes }
        let model = try ModelLoader.load(path: path)
        try PassManager(passes: [SpecializeSequence.self] + Pipelines.cleanup).run(on: model)
        try Verifier.verify(model)
        // Written and read back: a multifunction package.
        let dir = try Fixtures.tempDir(self)
        try ModelWriter.writePackage(model, to: dir + "/s.mlpackage")
        return try ModelLoader.load(path: dir + "/s.mlpackage")
    }

    /// Every value of every function has a fixed shape (nothing symbolic, nothing unknown).
    func assertStatic(_ model: Model, file: StaticString = #filePath, line: UInt = #line) {
        for f in model.program.functions {
            for v in f.inputs { XCTAssertNotNil(v.type.tensorType?.fixedShape ?? v.type.stateWrappedTensor?.fixedShape, "\(f.name) \(v)", file: file, line: line) }
            f.body.walk { op in
                for v in op.outputs where v.type.tensorType != nil {
                    XCTAssertNotNil(v.type.tensorType?.fixedShape, "\(f.name): \(op.type) \(v)", file: file, line: line)
                }
            }
        }
    }

    func testSeedContractFunctionsMatchTheFlexibleOne() throws {
        let path = Fixtures.path("tiny_llama_fp16.mlpackage")
        let s = try specialise(path, sizes: "1,16")
        XCTAssertEqual(s.program.functions.map(\.name), ["main_s1", "main_s16"])
        XCTAssertEqual(s.description.defaultFunctionName, "main_s1")
        assertStatic(s)
        // diagnose: no RangeDim + state finding left.
        let d = Diagnoser.diagnose(s)
        XCTAssertFalse(d.findings.contains { ["state_range_int_input", "state_mixed_flexibility"].contains($0.code) }, d.text(modelPath: "s"))
        let flexible = try Session(model: try ModelLoader.load(path: path))
        let p16 = try ExecutionPlan(function: try XCTUnwrap(s.program.function(named: "main_s16")))
        let p1 = try ExecutionPlan(function: try XCTUnwrap(s.program.function(named: "main_s1")))
        let shared = try StateStore(function: try XCTUnwrap(s.program.function(named: "main_s1")))
        let prompt: [Int32] = (0..<16).map { Int32(($0 * 37 + 5) % 256) }
        var calls: [([Int32], Int, ExecutionPlan)] = [(prompt, 0, p16)]
        calls += [([17], 16, p1), ([201], 17, p1)]
        for (ids, offset, plan) in calls {
            let inputs = LLMInputs.make(ids: ids, offset: offset, ctx: 64)
            let want = try flexible.predict(inputs)
            let got = try plan.run(inputs: inputs, states: shared.buffers)
            XCTAssertEqual(got["logits"]?.shape, want["logits"]?.shape)
            XCTAssertEqual(got["logits"]?.floats, want["logits"]?.floats, "call at offset \(offset)")
            for name in shared.names {
                XCTAssertEqual(shared.buffers[name]?.tensor().floats, flexible.states.buffers[name]?.tensor().floats, "\(name) at offset \(offset)")
            }
        }
    }

    /// Apple's recipe package: S specialised to 5 (the prefill) and 1; END stays a RangeDim.
    func testAppleRecipeFunctionsMatchTheFlexibleOne() throws {
        let path = Fixtures.path("diag/apple_recipe_llama.mlpackage")
        let s = try specialise(path, sizes: "1,5")
        XCTAssertEqual(s.program.functions.map(\.name), ["main_s1", "main_s5"])
        let r = try NPZ.read(path: Fixtures.path("diag/apple_recipe_llama.refs.npz"))
        let flexible = try Session(model: try ModelLoader.load(path: path))
        let plans = ["main_s5": try ExecutionPlan(function: try XCTUnwrap(s.program.function(named: "main_s5"))),
                     "main_s1": try ExecutionPlan(function: try XCTUnwrap(s.program.function(named: "main_s1")))]
        let shared = try StateStore(function: try XCTUnwrap(s.program.function(named: "main_s1")))
        for call in 0..<3 {
            let inputs = ["inputIds": try XCTUnwrap(r["call\(call).inputIds"]), "causalMask": try XCTUnwrap(r["call\(call).causalMask"])]
            let want = try flexible.predict(inputs)
            let got = try XCTUnwrap(plans[call == 0 ? "main_s5" : "main_s1"]).run(inputs: inputs, states: shared.buffers)
            XCTAssertEqual(got["logits"]?.floats, want["logits"]?.floats, "call \(call)")
            XCTAssertEqual(shared.buffers["keyCache"]?.tensor().floats, flexible.states.buffers["keyCache"]?.tensor().floats, "call \(call)")
        }
    }

    func testDefaultSizesAreClampedToTheRange() {
        XCTAssertEqual(SpecializeSequence.sizes(lower: 1, upper: 2048, enumerated: nil), [1, 64])
        XCTAssertEqual(SpecializeSequence.sizes(lower: 1, upper: 16, enumerated: nil), [1, 16])
        XCTAssertEqual(SpecializeSequence.sizes(lower: 4, upper: 16, enumerated: nil), [4, 16])
    }
}
