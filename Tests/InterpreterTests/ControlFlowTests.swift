import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// `cond` and `while_loop` (MIL iOS15 control flow) run their nested blocks.
final class ControlFlowTests: XCTestCase {
    func op(_ type: String, _ inputs: [String: Value], _ out: Value) -> Op {
        Op(type: type, inputs: inputs.sorted { $0.key < $1.key }.map { OpInput(name: $0.key, operands: [.value($0.value)]) },
           outputs: [out], attributes: [Attribute(name: "name", value: .string(out.name))])
    }

    /// y = p ? x + x : x * x
    func testCond() throws {
        let x = Value(name: "x", type: .tensor(.fp32, [3])), p = Value(name: "p", type: .scalar(.bool))
        let sum = Value(name: "sum", type: .tensor(.fp32, [3])), prod = Value(name: "prod", type: .tensor(.fp32, [3]))
        let thenBlock = Block(operations: [op("add", ["x": x, "y": x], sum)], outputs: [sum])
        let elseBlock = Block(operations: [op("mul", ["x": x, "y": x], prod)], outputs: [prod])
        let y = Value(name: "y", type: .tensor(.fp32, [3]))
        let cond = Op(type: "cond", inputs: [OpInput(name: "pred", operands: [.value(p)])], outputs: [y], blocks: [thenBlock, elseBlock])
        let f = Function(name: "main", inputs: [x, p], opset: "CoreML8", body: Block(operations: [cond], outputs: [y]))
        try Verifier.verify(f, path: "<test>")
        let plan = try ExecutionPlan(function: f)
        let xs = Tensor(.fp32, shape: [3], floats: [1, -2, 3])
        XCTAssertEqual(try plan.run(inputs: ["x": xs, "p": Tensor(shape: [], bools: [true])])["y"]?.floats, [2, -4, 6])
        XCTAssertEqual(try plan.run(inputs: ["x": xs, "p": Tensor(shape: [], bools: [false])])["y"]?.floats, [1, 4, 9])
    }

    /// A `cond` that lost its blocks (a mutated file; found by FuzzRun) is a typed error when it
    /// runs, never a trap.
    func testCondWithoutBlocksIsAnError() throws {
        let p = Value(name: "p", type: .scalar(.bool)), y = Value(name: "y", type: .tensor(.fp32, [3]))
        let cond = Op(type: "cond", inputs: [OpInput(name: "pred", operands: [.value(p)])], outputs: [y], blocks: [])
        let f = Function(name: "main", inputs: [p], opset: "CoreML8", body: Block(operations: [cond], outputs: [y]))
        guard let plan = try? ExecutionPlan(function: f) else { return }   // refused while planning: also fine
        XCTAssertThrowsError(try plan.run(inputs: ["p": Tensor(shape: [], bools: [true])])) { e in
            XCTAssertTrue("\(e)".contains("cond has no nested blocks"), "\(e)")
        }
    }

    /// (i, acc) = while i < 5: (i + 1, acc * 2)  → acc = x · 2^5
    func testWhileLoop() throws {
        let x = Value(name: "x", type: .tensor(.fp32, [2]))
        let zero = Value(name: "zero", type: .scalar(.int32)), five = Value(name: "five", type: .scalar(.int32))
        let one = Value(name: "one", type: .scalar(.int32)), two = Value(name: "two", type: .scalar(.fp32))
        let consts = [Op.const("zero", .int32(0)), Op.const("five", .int32(5)), Op.const("one", .int32(1)), Op.const("two", .fp32(2))]
        for (c, v) in zip(consts, [zero, five, one, two]) { c.setOutputs([v]) }
        let ci = Value(name: "ci", type: .scalar(.int32)), cacc = Value(name: "cacc", type: .tensor(.fp32, [2]))
        let more = Value(name: "more", type: .scalar(.bool))
        let condBlock = Block(inputs: [ci, cacc], operations: [op("less", ["x": ci, "y": five], more)], outputs: [more])
        let bi = Value(name: "bi", type: .scalar(.int32)), bacc = Value(name: "bacc", type: .tensor(.fp32, [2]))
        let ni = Value(name: "ni", type: .scalar(.int32)), nacc = Value(name: "nacc", type: .tensor(.fp32, [2]))
        let body = Block(inputs: [bi, bacc], operations: [op("add", ["x": bi, "y": one], ni), op("mul", ["x": bacc, "y": two], nacc)],
                         outputs: [ni, nacc])
        let outI = Value(name: "i_out", type: .scalar(.int32)), outAcc = Value(name: "acc_out", type: .tensor(.fp32, [2]))
        let loop = Op(type: "while_loop", inputs: [OpInput(name: "loop_vars", operands: [.value(zero), .value(x)])],
                      outputs: [outI, outAcc], blocks: [condBlock, body])
        let f = Function(name: "main", inputs: [x], opset: "CoreML8", body: Block(operations: consts + [loop], outputs: [outI, outAcc]))
        try Verifier.verify(f, path: "<test>")
        let out = try ExecutionPlan(function: f).run(inputs: ["x": Tensor(.fp32, shape: [2], floats: [1, -0.5])])
        XCTAssertEqual(out["i_out"]?.ints, [5])
        XCTAssertEqual(out["acc_out"]?.floats, [32, -16])
    }
}
