import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Whole stateful models against torch: the fixtures' `*_run.npz` hold the inputs of a prefill
/// (S=7) and five S=1 decode calls and the logits the same torch module produced in fp32
/// (tools/tiny_llama.py). The fp16 package rounds weights, states and outputs to fp16, so a
/// small error remains; the issue bounds it at 1e-2 on logits of magnitude ~10.
final class StatefulModelTests: XCTestCase {

    func runReference(_ name: String, tolerance: Float, file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + name + ".mlpackage")
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/" + name + "_run.npz")
        let session = try Session(model: model)
        var worst: Float = 0
        for k in 0..<6 {
            let out = try session.predict(try LLMInputs.recorded(ref, call: k))
            let logits = try XCTUnwrap(out["logits"])
            let want = try XCTUnwrap(ref["call\(k)_logits"])
            XCTAssertEqual(logits.shape, want.shape, file: file, line: line)
            let err = zip(logits.floats, want.floats).map { abs($0 - $1) }.max() ?? .nan
            worst = max(worst, err)
            XCTAssertLessThanOrEqual(err, tolerance, "\(name) call \(k): max abs logit error \(err)", file: file, line: line)
        }
        print("\(name): max abs logit error over prefill + 5 decode steps: \(worst)")
        // The cache after the last call matches torch's buffers (rounded to the fp16 state).
        for (stateName, buffer) in session.states.buffers {
            guard let want = ref["final_" + stateName] else { continue }
            let err = zip(buffer.tensor().floats, want.floats).map { abs($0 - $1) }.max() ?? .nan
            XCTAssertLessThanOrEqual(err, 1e-2, "state \(stateName) differs by \(err)", file: file, line: line)
        }
    }

    func testTinyLlamaFP16MatchesTorch() throws {
        try runReference("tiny_llama_fp16", tolerance: 1e-2)
    }

    func testTinyLlamaInt8MatchesTorch() throws {
        try runReference("tiny_llama_int8", tolerance: 1e-2)
    }

    func testTinyLlamaDynamicEndMatchesTorch() throws {
        try runReference("tiny_llama_dynamic_end", tolerance: 1e-2)
    }

    /// A prefill of N tokens and N single-token calls over the same cache give the same logits
    /// for the last position.
    func testPrefillEqualsTokenByToken() throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/tiny_llama_fp16_run.npz")
        let ids = try XCTUnwrap(ref["call0_input_ids"]).ints
        let n = ids.count, ctx = 64
        let prefill = try Session(model: model)
        let full = try prefill.predict(LLMInputs.make(ids: ids, offset: 0, ctx: ctx))
        let stepwise = try Session(model: model)
        var last: Tensor?
        for (i, id) in ids.enumerated() {
            last = try stepwise.predict(LLMInputs.make(ids: [id], offset: i, ctx: ctx))["logits"]
        }
        let a = Array(try XCTUnwrap(full["logits"]).floats.suffix(256)), b = try XCTUnwrap(last).floats
        let err = zip(a, b).map { abs($0 - $1) }.max()!
        print("prefill(\(n)) vs \(n)×S=1, last row max abs diff: \(err)")
        XCTAssertLessThanOrEqual(err, 1e-2)
    }

    /// The KV writes run in place and attention reads the caches without tiled copies; fp16
    /// precision keeps the unfused ops (per-op rounding).
    func testExecutionFusionsApply() throws {
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_fp16.mlpackage")
        let f = try XCTUnwrap(model.defaultFunction)
        let plan = try ExecutionPlan(function: f)
        XCTAssertEqual(plan.fusions["state_write"], 4)
        XCTAssertEqual(plan.fusions["attention"], 2)
        let fp16 = try ExecutionPlan(function: f, precision: .fp16)
        XCTAssertNil(fp16.fusions["attention"])
    }

    func testInt8NeverHoldsDenseWeights() throws {
        // The int8 package's quantized weights reach `linear`/`gather` as QuantizedTensor; only
        // these consumers may see them, so no dense fp32 copy of a weight matrix is made.
        let model = try ModelLoader.load(path: Fixtures.modelsDir + "tiny_llama_int8.mlpackage")
        let f = try XCTUnwrap(model.defaultFunction)
        var consumers = Set<String>()
        f.body.walk { op in
            for input in op.inputs {
                for v in input.operands.compactMap(\.value) where v.producer?.type == "constexpr_blockwise_shift_scale" {
                    consumers.insert("\(op.type).\(input.name)")
                }
            }
        }
        XCTAssertEqual(consumers, ["linear.weight", "gather.x"])
        XCTAssertTrue(QuantizedConsumers.handles(op: "linear", input: "weight"))
        XCTAssertTrue(QuantizedConsumers.handles(op: "gather", input: "x"))

        // At run time every quantized weight is a view of weight.bin: int8 data and fp16 scales
        // read in place (no fp32 copy of the scales either).
        let session = try Session(model: model)
        let ref = try NPZ.read(path: Fixtures.modelsDir + "reference/tiny_llama_int8_run.npz")
        _ = try session.predict(try LLMInputs.recorded(ref, call: 0))
        var quantized = 0
        for v in session.plan.constantOpCache.compactMap({ $0 }) {
            guard case let .quantized(q) = v else { continue }
            quantized += 1
            XCTAssertTrue(q.data.isMapped)
            guard case .half = q.scales else { XCTFail("scales of a \(q.shape) weight were widened to fp32"); continue }
        }
        XCTAssertEqual(quantized, 16)
    }
}
