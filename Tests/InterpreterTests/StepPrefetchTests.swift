import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The run loop's prefetch table (``ExecutionPlan/buildStepPrefetch(_:)``): built once the
/// running steps are known, one row per running step holding that step's own record, and the
/// slot entries of exactly its non-constant slot operands; the model still matches torch on the
/// calls that issue the hints.
final class StepPrefetchTests: XCTestCase {
    func testTableFollowsTheRunningStepsAndLogitsMatchTorch() throws {
        guard ExecutionPlan.stepPrefetch else { throw XCTSkip("FORGE_STEP_PREFETCH=0") }
        let name = "tiny_llama_int8"
        let model = try ModelLoader.load(path: Fixtures.modelsDir + name + ".mlpackage")
        let session = try Session(model: model)
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/" + name + "_run.npz")
        XCTAssertNil(session.plan.root.prefetch, "no table before the first run")
        for call in 0..<3 {
            let got = try XCTUnwrap(try session.predict(LLMInputs.recorded(ref, call: call))["logits"])
            let want = try XCTUnwrap(ref["call\(call)_logits"])
            let err = zip(got.floats, want.floats).map { abs($0 - $1) }.max() ?? .nan
            XCTAssertLessThanOrEqual(err, 1e-2, "call \(call): max abs error \(err) vs torch")
        }
        let root = session.plan.root
        let running = try XCTUnwrap(root.running)
        let table = try XCTUnwrap(root.prefetch)
        XCTAssertEqual(table.bounds.count, running.count + 1)
        XCTAssertEqual(table.slotBounds.count, running.count + 1)
        XCTAssertLessThan(running.count, root.steps.count, "constant steps are not walked")
        for (i, st) in running.enumerated() {
            let row = table.addrs[table.bounds[i]..<table.bounds[i + 1]]
            XCTAssertEqual(row.first, UInt(bitPattern: Unmanaged.passUnretained(st).toOpaque()), "\(st.op.name): its own record first")
            XCTAssertFalse(row.contains(0), "\(st.op.name): a null address")
            let want = st.operands.compactMap { r -> Int? in
                guard case let .slot(s) = r, s >= 0, session.plan.constantOpCache[s] == nil else { return nil }
                return s
            }
            XCTAssertEqual(Array(table.slots[table.slotBounds[i]..<table.slotBounds[i + 1]]), want, st.op.name)
        }
    }
}
