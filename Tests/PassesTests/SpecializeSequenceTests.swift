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

    /// `cleanup: false` for the exact comparisons: const_elimination folds float ops whose
    /// inputs became constant at a static size (rotary cos/sin of fixed positions) into fp16
    /// constants, which rounds what a run keeps in fp32.
    func specialise(_ path: String, sizes: String?, cleanup: Bool = true) throws -> Model {
        if let sizes { PassOptions.values["specialize_sequence.sizes"] = sizes }
        let model = try ModelLoader.load(path: path)
        try PassManager(passes: [SpecializeSequence.self] + (cleanup ? Pipelines.cleanup : [DeadCodeElimination.self])).run(on: model)
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

    /// nil when bit-identical; else where and what differs (short, for the failure message).
    static func firstDifference(_ a: [Float]?, _ b: [Float]?) -> String? {
        guard let a, let b else { return "missing" }
        guard a.count == b.count else { return "\(a.count) vs \(b.count) elements" }
        guard let i = a.indices.first(where: { a[$0].bitPattern != b[$0].bitPattern }) else { return nil }
        return "first difference at \(i): \(a[i]) vs \(b[i]) (\(a.indices.filter { a[$0].bitPattern != b[$0].bitPattern }.count) differ)"
    }

    /// Apple's recipe's inputs for one call: `S` token ids after `past` cached ones, and the
    /// additive causal mask [1, 1, S, END = past + S] (0 attend, −inf masked).
    static func appleInputs(_ ids: [Int32], past: Int) -> [String: Tensor] {
        let s = ids.count, end = past + s
        var mask = [Float](repeating: 0, count: s * end)
        for r in 0..<s { for c in 0..<end where c > past + r { mask[r * end + c] = -.infinity } }
        return ["inputIds": Tensor(.int32, shape: [1, s], ints: ids), "causalMask": Tensor(.fp16, shape: [1, 1, s, end], floats: mask)]
    }

    /// Specialises an Apple-recipe package at (S, END) points and checks each static function
    /// against the flexible one over a prefill and two decode calls sharing one state.
    func checkAppleRecipe(_ rel: String, prompt: [Int32], decode: [Int32], file: StaticString = #filePath, line: UInt = #line) throws {
        let path = Fixtures.path(rel)
        let n = prompt.count
        let points = ["\(n):\(n)"] + decode.indices.map { "1:\(n + 1 + $0)" }
        let s = try specialise(path, sizes: points.joined(separator: ","), cleanup: false)
        let names = decode.indices.map { "main_s1_end\(n + 1 + $0)" } + ["main_s\(n)_end\(n)"]
        XCTAssertEqual(s.program.functions.map(\.name), names, file: file, line: line)
        XCTAssertEqual(s.description.defaultFunctionName, names[0], file: file, line: line)
        // Every function fully static: inputs, description (no RangeDim), every value.
        assertStatic(s, file: file, line: line)
        for fd in s.description.functions {
            for i in fd.inputs { XCTAssertEqual(i.array?.flexibility, ShapeFlexibility.none, "\(fd.name) \(i.name)", file: file, line: line) }
        }
        let d = Diagnoser.diagnose(s)
        XCTAssertEqual(d.findings.filter { $0.severity != .info }.map(\.code), [], d.text(modelPath: rel), file: file, line: line)
        let flexible = try Session(model: try ModelLoader.load(path: path))
        let shared = try StateStore(function: try XCTUnwrap(s.program.functions.first))
        var calls: [([Int32], Int, String)] = [(prompt, 0, "main_s\(n)_end\(n)")]
        for (i, t) in decode.enumerated() { calls.append(([t], n + i, "main_s1_end\(n + 1 + i)")) }
        for (ids, past, fn) in calls {
            let inputs = Self.appleInputs(ids, past: past)
            let want = try flexible.predict(inputs)
            let got = try ExecutionPlan(function: try XCTUnwrap(s.program.function(named: fn))).run(inputs: inputs, states: shared.buffers)
            XCTAssertEqual(got["logits"]?.shape, want["logits"]?.shape, fn, file: file, line: line)
            XCTAssertNil(Self.firstDifference(got["logits"]?.floats, want["logits"]?.floats), "\(rel) \(fn) logits", file: file, line: line)
            for state in ["keyCache", "valueCache"] {
                XCTAssertNil(Self.firstDifference(shared.buffers[state]?.tensor().floats, flexible.states.buffers[state]?.tensor().floats),
                             "\(rel) \(fn) \(state)", file: file, line: line)
            }
        }
    }

    /// The committed recipe fixtures (tools/make_recipe_fixtures.py, Apple's Llama 3.1 article):
    /// prefill of the recorded prompt, then two decode steps with the recorded greedy ids.
    func testAppleRecipeFixturesFunctionsMatchTheFlexibleOne() throws {
        for name in ["apple_llama31_fp16", "apple_llama31_int4"] {
            let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("recipes/\(name).json")))) as? [String: Any]
            let prompt = try XCTUnwrap(json?["prompt_ids"] as? [Int]).map(Int32.init)
            let greedy = try XCTUnwrap(json?["greedy_ids"] as? [Int]).map(Int32.init)
            try checkAppleRecipe("recipes/\(name).mlpackage", prompt: prompt, decode: Array(greedy.prefix(2)))
        }
        try checkAppleRecipe("diag/apple_recipe_llama.mlpackage", prompt: [3, 9, 27, 17, 40], decode: [11, 2])
    }

    /// The default sizes on a growing mask: END = S (a prefill of an empty cache); END < S is
    /// refused (a negative count of cached tokens).
    func testGrowingMaskPoints() throws {
        XCTAssertEqual(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: .range(lower: 1, upper: 64)).map(\.suffix), ["_s1_end1", "_s64_end64"])
        PassOptions.values["specialize_sequence.sizes"] = "8:3"
        XCTAssertThrowsError(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: .range(lower: 1, upper: 64)))
        PassOptions.values["specialize_sequence.sizes"] = "1:100,4"
        XCTAssertEqual(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: .range(lower: 1, upper: 64)).map(\.suffix), ["_s1_end64", "_s4_end4"])
        XCTAssertEqual(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: nil).map(\.suffix), ["_s1", "_s4"])
    }

    func testDefaultSizesAreClampedToTheRange() {
        XCTAssertEqual(SpecializeSequence.sizes(lower: 1, upper: 2048, enumerated: nil), [1, 64])
        XCTAssertEqual(SpecializeSequence.sizes(lower: 1, upper: 16, enumerated: nil), [1, 16])
        XCTAssertEqual(SpecializeSequence.sizes(lower: 4, upper: 16, enumerated: nil), [4, 16])
    }

    /// `sizes` that are not S or S:END of whole numbers ≥ 1 are a `PassError` naming the entry
    /// (they were dropped, and a list of nothing but such entries removed the function: an
    /// empty program, then an index trap).
    func testSizesThatAreNotWholeNumbersAreAPassErrorNotACrash() throws {
        for bad in ["abc", "", "0", "-4", "1,,2", "1:2:3", "99999999999999999999", "1:x", "4:0"] {
            PassOptions.values["specialize_sequence.sizes"] = bad
            XCTAssertThrowsError(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: nil), bad) { e in
                XCTAssertTrue("\(e)".contains("sizes: entry"), "\(bad): \(e)")
            }
        }
        PassOptions.values["specialize_sequence.sizes"] = (1...65).map(String.init).joined(separator: ",")
        XCTAssertThrowsError(try SpecializeSequence.points(lower: 1, upper: 64, enumerated: nil, key: nil)) { e in
            XCTAssertTrue("\(e)".contains("at most 64"), "\(e)")
        }
        PassOptions.values["specialize_sequence.sizes"] = "abc"
        let model = try ModelLoader.load(path: Fixtures.path("tiny_llama_fp16.mlpackage"))
        XCTAssertThrowsError(try PassManager(passes: [SpecializeSequence.self]).run(on: model))
        XCTAssertFalse(model.program.functions.isEmpty)
    }
}
