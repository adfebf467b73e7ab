import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// The kernels added for the whole MIL opset: recurrent, image resizing, run-time quantization,
/// space/batch, reverse_sequence, random (degenerate distributions), iOS18 sparse compression.
/// Vectors: `tools/opvectors_opset.py` (torch / numpy, fp32 and fp16, edge cases).
final class OpsetKernelTests: XCTestCase {
    func testOpVectors() throws {
        try OpVectors.run(family: "opset")
    }

    /// Ops of coremltools' MIL registry that have no kernel, each with the reason (kept in
    /// README.md's conformance section).
    static let withoutKernel: [String: String] = [
        "const": "a value, not a computation (the plan binds it once)",
        "cond": "run by the execution plan as nested blocks (ControlFlow.swift)",
        "while_loop": "run by the execution plan as nested blocks (ControlFlow.swift)",
        "conv_quantized": "experimental, lowered only by coremltools' neuralnetwork backend; an ML Program never holds it",
    ]

    /// Every core op coremltools 9 registers for iOS15…iOS18 (`models-ir/opvectors/mil_ops.json`,
    /// `tools/mil_op_list.py`) has a kernel, or is listed above with the reason.
    func testEveryOpHasAKernel() throws {
        struct File: Decodable { var ops: [String: [String]] }
        let file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: OpVectors.dir + "mil_ops.json")))
        let modern = file.ops.filter { !Set($0.value).isDisjoint(with: ["iOS15", "iOS16", "iOS17", "iOS18"]) }.keys.sorted()
        XCTAssertGreaterThan(modern.count, 150)
        let missing = modern.filter { KernelRegistry.kernel(for: $0) == nil && Self.withoutKernel[$0] == nil }
        XCTAssertEqual(missing, [], "MIL ops without a kernel")
        for op in Self.withoutKernel.keys where op != "const" && op != "cond" && op != "while_loop" {
            XCTAssertNil(KernelRegistry.kernel(for: op), "\(op) has a kernel now: drop it from the list")
        }
    }

    /// Ops forge-ir declares that coremltools' core registry does not hold, each with the reason.
    static let notInCoreRegistry: [String: String] = [
        "write_state": "what a saved program holds for a state write: coremltools' backend (backend/mil/load.py) writes coreml_update_state as write_state + read_state",
        "coreml_update_state": "coremltools' coreml dialect op (SSAOpRegistry.dialect_ops), kept for programs built before the backend lowers it",
    ]

    /// The converse: every op of forge-ir's table is a core op coremltools 9 registers
    /// (`mil_ops.json`), or is listed above with the reason. An op name of our own invention
    /// (there were `acosh` and `asinh`, which no opset defines) fails here.
    func testEveryDeclaredOpIsAMILOp() throws {
        struct File: Decodable { var ops: [String: [String]] }
        let file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: OpVectors.dir + "mil_ops.json")))
        let invented = OpRegistry.allOps.filter { file.ops[$0] == nil && Self.notInCoreRegistry[$0] == nil }
        XCTAssertEqual(invented, [], "declared ops that are not MIL ops")
        for op in Self.notInCoreRegistry.keys {
            XCTAssertNotNil(OpRegistry.schema(op), "\(op) is no longer declared: drop it from the list")
            XCTAssertNil(file.ops[op], "\(op) is in coremltools' registry: drop it from the list")
        }
    }

    /// Seeded draws repeat; their statistics match the distribution (10 000 draws, bounds of
    /// more than 5 standard errors, so the test is deterministic and cannot flake).
    func testRandomStatistics() throws {
        func draw(_ op: String, _ inputs: [String: Tensor], strings: [String: String] = [:]) throws -> [Float] {
            var values: [String: [RuntimeValue]] = inputs.mapValues { [.tensor($0)] }
            for (k, v) in strings { values[k] = [.tensor(Tensor(dtype: .string, shape: [], data: .string([v])))] }
            let out = Value(name: "out", type: .tensor(TensorType(.fp32, [])))
            let o = Op(type: op, inputs: [], outputs: [out], attributes: [Attribute(name: "name", value: .string(op))])
            let k = try XCTUnwrap(KernelRegistry.kernel(for: op))
            return try k(KernelInvocation(op: o, precision: .fp32, values: values))[0].dense().floats
        }
        let shape = Tensor(.int32, shape: [1], ints: [10_000])
        let seed = Tensor.scalar(Int32(42))
        let u = try draw("random_uniform", ["shape": shape, "low": .scalar(-1), "high": .scalar(3), "seed": seed])
        XCTAssertEqual(u, try draw("random_uniform", ["shape": shape, "low": .scalar(-1), "high": .scalar(3), "seed": seed]))
        XCTAssertTrue(u.allSatisfy { $0 >= -1 && $0 < 3 })
        XCTAssertEqual(Double(u.reduce(0, +)) / 1e4, 1, accuracy: 0.06)        // sd of the mean 0.0115
        let n = try draw("random_normal", ["shape": shape, "mean": .scalar(2), "stddev": .scalar(0.5), "seed": seed])
        let mean = Double(n.reduce(0, +)) / 1e4
        let sd = (n.map { (Double($0) - mean) * (Double($0) - mean) }.reduce(0, +) / 1e4).squareRoot()
        XCTAssertEqual(mean, 2, accuracy: 0.03)                                  // sd of the mean 0.005
        XCTAssertEqual(sd, 0.5, accuracy: 0.025)
        let b = try draw("random_bernoulli", ["shape": shape, "prob": .scalar(0.3), "seed": seed])
        XCTAssertEqual(Double(b.reduce(0, +)) / 1e4, 0.3, accuracy: 0.025)       // sd 0.0046
        let logits = Tensor(.fp32, shape: [1, 3], floats: [0, Float(log(2.0)), Float(log(7.0))])   // p = 0.1, 0.2, 0.7
        let c = try draw("random_categorical", ["x": logits, "size": .scalar(Int32(10_000)), "seed": seed])
        for (k, p) in [(0, 0.1), (1, 0.2), (2, 0.7)] {
            XCTAssertEqual(Double(c.filter { $0 == Float(k) }.count) / 1e4, p, accuracy: 0.025)
        }
        XCTAssertNotEqual(u, try draw("random_uniform", ["shape": shape, "low": .scalar(-1), "high": .scalar(3), "seed": .scalar(Int32(43))]))
    }
}
