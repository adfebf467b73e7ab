import GraphIR
import Interpreter
import XCTest

/// `ExecutionPlan(observing:)`: fusions stay on when nothing is observed, observed values a
/// fusion would remove are still reported, and observing changes no output.
final class ValueObservationTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    func testFusionsOnlyGiveWayToObservedValues() throws {
        let model = try ModelLoader.load(path: Self.root + "/models-ir/tiny_llama_fp16.mlpackage")
        let f = model.program.function(named: model.defaultFunctionName)!
        let plain = try ExecutionPlan(function: f)
        XCTAssertGreaterThan(plain.fusions["attention"] ?? 0, 0)
        XCTAssertGreaterThan(plain.fusions["state_write"] ?? 0, 0)
        XCTAssertEqual(try ExecutionPlan(function: f, observing: .all).fusions, [:])
        // A softmax output inside the first attention chain.
        var softmax: String?
        f.body.walk { if softmax == nil, $0.type == "softmax" { softmax = $0.outputs[0].name } }
        let one = try ExecutionPlan(function: f, observing: .values([softmax!]))
        XCTAssertEqual(one.fusions["attention"], plain.fusions["attention"]! - 1)
        XCTAssertEqual(one.fusions["state_write"], plain.fusions["state_write"])

        let inputs = try NPZ.read(path: Self.root + "/models-ir/inputs/tiny_llama_fp16.npz")
        var seen: [String: Tensor] = [:]
        one.valueObserver = { name, t in seen[name] = t }
        let a = try one.run(inputs: inputs, states: try Self.states(f))
        XCTAssertEqual(Array(seen.keys), [softmax!])
        let p = seen[softmax!]!
        // Softmax rows sum to 1.
        let k = p.shape.last!
        for row in 0..<(p.count / k) { XCTAssertEqual(p.floats[(row * k)..<((row + 1) * k)].reduce(0, +), 1, accuracy: 1e-4) }
        let b = try plain.run(inputs: inputs, states: try Self.states(f))
        XCTAssertEqual(a["logits"]!.floats.count, b["logits"]!.floats.count)
        // The logits are fp16: the unfused chain (softmax op) and the fused kernel round their
        // exps differently in the last fp32 bits, which may move a logit by one fp16 step.
        for (x, y) in zip(a["logits"]!.floats, b["logits"]!.floats) { XCTAssertEqual(x, y, accuracy: 1e-4 + abs(y) * 0x1p-10) }
    }

    static func states(_ f: Function) throws -> [String: StateBuffer] {
        try StateStore(function: f).buffers
    }
}
