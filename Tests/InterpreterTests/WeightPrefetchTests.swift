import CKernels
import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The decode plan's weight prefetch hints (``ExecutionPlan/installWeightPrefetch()``): on the
/// int8 tiny Llama, exactly the `linear` steps whose next `linear` comes after other ops carry
/// that next linear's weight, and the model still matches torch with the hints issued.
final class WeightPrefetchTests: XCTestCase {
    func testHintsNameTheNextLinearWeight() throws {
        guard fk_parallel_width() > 1 else { throw XCTSkip("one thread: no pool worker to prefetch") }
        let name = "tiny_llama_int8"
        let model = try ModelLoader.load(path: Fixtures.modelsDir + name + ".mlpackage")
        let session = try Session(model: model)
        let steps = session.plan.root.steps
        let linears = steps.indices.filter { steps[$0].op.type == "linear" }
        XCTAssertGreaterThan(linears.count, 4)
        var marked = 0
        for (a, b) in zip(linears, linears.dropFirst()) {
            let st = steps[a], next = steps[b]
            guard b > a + 1 else {
                XCTAssertNil(st.prefetchAfter, "\(st.op.name): the next linear follows at once")
                continue
            }
            let w = try XCTUnwrap(next.inputNames.firstIndex(of: "weight"))
            guard case let .slot(want)? = Optional(next.operands[next.inputBounds[w]]),
                  case let .slot(got)? = st.prefetchAfter else {
                XCTFail("\(st.op.name): no slot hint for \(next.op.name)'s weight")
                continue
            }
            XCTAssertEqual(got, want, "\(st.op.name) -> \(next.op.name)")
            marked += 1
        }
        XCTAssertNil(steps[try XCTUnwrap(linears.last)].prefetchAfter)
        XCTAssertGreaterThan(marked, 0)
        for i in steps.indices where steps[i].op.type != "linear" { XCTAssertNil(steps[i].prefetchAfter) }

        // With the hints issued, the logits still match torch.
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/" + name + "_run.npz")
        let got = try XCTUnwrap(try session.predict(LLMInputs.recorded(ref, call: 0))["logits"])
        let want = try XCTUnwrap(ref["call0_logits"])
        let err = zip(got.floats, want.floats).map { abs($0 - $1) }.max() ?? .nan
        XCTAssertLessThanOrEqual(err, 1e-2, "max abs error \(err) vs torch")
    }
}
