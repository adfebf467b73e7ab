import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// `models-ir/coremltools_crash_end_index.mlpackage` (tools/make_crash_fixture.py): the end
/// index `end_1 = add(off, 1)` of two state writes feeds both an `expand_dims` (→ `concat`) and a
/// `stack`; coremltools 9's default pipeline fails on it in `rank0_expand_dims_swap` with
/// "Cannot delete op 'end_1' …" (tools/NOTES.md). `lower_slice_update` must lower both writes,
/// the one whose end comes through `stack` included.
final class CoremltoolsCrashFixtureTests: XCTestCase {
    func load() throws -> Model { try ModelLoader.load(path: Fixtures.path("coremltools_crash_end_index.mlpackage")) }

    func count(_ model: Model, _ type: String) -> Int {
        var n = 0
        model.program.functions[0].body.walk { if $0.type == type { n += 1 } }
        return n
    }

    func testBothWritesAreLowered() throws {
        let model = try load()
        XCTAssertEqual(count(model, "slice_update"), 2)
        XCTAssertEqual(count(model, "stack"), 2)
        let r = try LowerSliceUpdate().run(on: model)
        try Verifier.verify(model)
        XCTAssertEqual(r.statistics["slice writes lowered"], 2)
        XCTAssertEqual(count(model, "slice_update"), 0)
        try FileCheck.check(MILPrinter.print(model), """
        CHECK: key_cache_new = scatter(
        CHECK: value_cache_new = scatter(
        """)
        // After the cleanup, nothing of the end-index construction is left.
        try PassManager(passes: Pipelines.cleanup).run(on: model)
        XCTAssertEqual(count(model, "stack"), 0)
        XCTAssertEqual(count(model, "concat"), 0)
        XCTAssertFalse(model.program.functions[0].body.operations.contains { $0.name == "end_1" })
    }

    /// Outputs and states are identical to the original at every offset of the cache.
    func testNumericallyIdentical() throws {
        let original = try load(), optimized = try load()
        try PassManager(passes: Pipelines.defaultPipeline).run(on: optimized)
        let a = try Session(model: original), b = try Session(model: optimized)
        for offset in 0..<8 {
            let k = Tensor(.fp16, shape: [1, 2, 1, 4], floats: (0..<8).map { Float($0 + offset) * 0.5 })
            let v = Tensor(.fp16, shape: [1, 2, 1, 4], floats: (0..<8).map { Float(offset) - Float($0) * 0.25 })
            let inputs = ["k": k, "v": v, "cache_offset": Tensor(.int32, shape: [1], ints: [Int32(offset)])]
            XCTAssertEqual(try a.predict(inputs)["out"]?.floats, try b.predict(inputs)["out"]?.floats, "offset \(offset)")
        }
        for (name, buf) in a.states.buffers {
            XCTAssertEqual(buf.tensor().floats, b.states.buffers[name]?.tensor().floats, name)
        }
    }
}
