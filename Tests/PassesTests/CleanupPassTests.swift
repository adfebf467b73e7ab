import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// Structural and golden-text tests of the cleanup passes on programs built in Swift.
final class CleanupPassTests: XCTestCase {
    func run(_ pass: Pass.Type, _ model: Model) throws -> PassResult {
        let r = try pass.init().run(on: model)
        try Verifier.verify(model)
        return r
    }

    func ops(_ model: Model) -> [String] { model.program.functions[0].body.operations.map(\.type) }

    func testDeadCodeKeepsStateWrites() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp16, [1, 4]))
        let s = b.input("s", .state(.tensor(.fp16, [1, 4])))
        let unused = b.apply("relu", ["x": x], .tensor(.fp16, [1, 4]), name: "unused")
        _ = b.apply("sigmoid", ["x": unused], .tensor(.fp16, [1, 4]), name: "unused2")
        b.op("write_state", ["input": s, "data": x], nil, name: "w")
        let y = b.apply("mul", ["x": x, "y": x], .tensor(.fp16, [1, 4]), name: "y")
        let m = b.model(outputs: [y])
        let r = try run(DeadCodeElimination.self, m)
        XCTAssertEqual(ops(m), ["write_state", "mul"])
        XCTAssertEqual(r.statistics["ops removed"], 2)
        XCTAssertFalse(try run(DeadCodeElimination.self, m).changed)
    }

    func testConstEliminationFoldsAndKeepsDtype() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [2]))
        let a = b.const("a", ConstValue(type: .tensor(.fp16, [2]), payload: .tensor(.bytes([0x00, 0x3C, 0x00, 0x40]))))  // [1, 2]
        let c = b.const("c", ConstValue(type: .tensor(.fp16, [2]), payload: .tensor(.bytes([0x00, 0x42, 0x00, 0x44]))))  // [3, 4]
        let sum = b.apply("add", ["x": a, "y": c], .tensor(.fp16, [2]), name: "sum")
        let cast = b.apply("cast", ["x": sum, "dtype": b.const("dt", .init(type: .scalar(.string), payload: .tensor(.strings(["fp32"]))))],
                           .tensor(.fp32, [2]), name: "sum32")
        let y = b.apply("add", ["x": x, "y": cast], .tensor(.fp32, [2]), name: "y")
        let m = b.model(outputs: [y])
        let r = try run(ConstElimination.self, m)
        XCTAssertEqual(r.statistics["ops folded"], 2)
        let f = m.program.functions[0]
        let folded = try XCTUnwrap(f.body.operations.first { $0.outputs.first?.name == "sum" })
        XCTAssertEqual(folded.type, "const")
        XCTAssertEqual(folded.constValue?.type, .tensor(.fp16, [2]))
        XCTAssertEqual(folded.constValue?.doubles(), [4, 6])
        let folded32 = try XCTUnwrap(f.body.operations.first { $0.outputs.first?.name == "sum32" })
        XCTAssertEqual(folded32.constValue?.type, .tensor(.fp32, [2]))
        try FileCheck.check(MILPrinter.print(m), """
        CHECK: tensor<fp16, [2]> sum = const()
        CHECK: tensor<fp32, [2]> sum32 = const()
        CHECK: y = add(x = x, y = sum32)
        """)
    }

    func testConstEliminationNeverInflates() throws {
        let b = ProgramBuilder()
        let small = b.const("small", floats: [1, 2], shape: [1, 2])
        let reps = b.const("reps", ints: [4096, 1], shape: [2])
        let big = b.apply("tile", ["x": small, "reps": reps], .tensor(.fp32, [4096, 2]), name: "big")
        let m = b.model(outputs: [big])
        let r = try run(ConstElimination.self, m)
        XCTAssertFalse(r.changed)
        XCTAssertEqual(ops(m).last, "tile")
    }

    func testConstEliminationLeavesCompressedWeights() throws {
        let b = ProgramBuilder()
        let data = ConstValue(type: .tensor(.int8, [2, 32]), payload: .tensor(.bytes([UInt8](repeating: 1, count: 64))))
        let scale = ConstValue(type: .tensor(.fp16, [2, 1]), payload: .tensor(.bytes([0, 0x3C, 0, 0x3C])))
        let w = b.apply("constexpr_blockwise_shift_scale", [:], .tensor(.fp16, [2, 32]), name: "w")
        b.ops.last!.inputs = [OpInput(name: "data", operands: [.constant(data)]), OpInput(name: "scale", operands: [.constant(scale)])]
        let m = b.model(outputs: [w])
        XCTAssertFalse(try run(ConstElimination.self, m).changed)
        XCTAssertEqual(ops(m), ["constexpr_blockwise_shift_scale"])
    }

    func testNoopElimination() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [2, 3]))
        let zero = b.const("zero", floats: [0], shape: [])
        let a = b.apply("add", ["x": x, "y": zero], .tensor(.fp32, [2, 3]), name: "a")
        let perm = b.const("perm", ints: [0, 1], shape: [2])
        let t = b.apply("transpose", ["x": a, "perm": perm], .tensor(.fp32, [2, 3]), name: "t")
        let shape = b.const("shape", ints: [2, 3], shape: [2])
        let r = b.apply("reshape", ["x": t, "shape": shape], .tensor(.fp32, [2, 3]), name: "r")
        let y = b.apply("relu", ["x": r], .tensor(.fp32, [2, 3]), name: "y")
        // A no-op whose result is returned keeps its name visible: it stays.
        let one = b.const("one", floats: [1], shape: [])
        let out = b.apply("mul", ["x": y, "y": one], .tensor(.fp32, [2, 3]), name: "out")
        let m = b.model(outputs: [out])
        let res = try run(NoopElimination.self, m)
        XCTAssertEqual(res.statistics["ops removed"], 3)
        try FileCheck.check(MILPrinter.print(m), """
        CHECK-NOT: add(
        CHECK-NOT: transpose(
        CHECK-NOT: reshape(
        CHECK: y = relu(x = x)
        CHECK: out = mul(x = y, y = one)
        """)
    }

    func testBroadcastingAddIsNotANoop() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [1, 3]))
        let zeros = b.const("zeros", floats: [0, 0, 0, 0, 0, 0], shape: [2, 3])
        let a = b.apply("add", ["x": x, "y": zeros], .tensor(.fp32, [2, 3]), name: "a")
        let y = b.apply("relu", ["x": a], .tensor(.fp32, [2, 3]), name: "y")
        let m = b.model(outputs: [y])
        XCTAssertFalse(try run(NoopElimination.self, m).changed)
    }

    func testConstDeduplication() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [3]))
        let c1 = b.const("c1", floats: [1, 2, 3], shape: [3])
        let c2 = b.const("c2", floats: [1, 2, 3], shape: [3])
        let c3 = b.const("c3", floats: [1, 2, 4], shape: [3])
        let a = b.apply("add", ["x": x, "y": c1], .tensor(.fp32, [3]), name: "a")
        let m2 = b.apply("mul", ["x": a, "y": c2], .tensor(.fp32, [3]), name: "m")
        let s = b.apply("sub", ["x": m2, "y": c3], .tensor(.fp32, [3]), name: "s")
        let m = b.model(outputs: [s])
        let r = try run(ConstDeduplication.self, m)
        XCTAssertEqual(r.statistics["constants merged"], 1)
        try FileCheck.check(MILPrinter.print(m), """
        CHECK-COUNT-2: = const()
        CHECK: m = mul(x = a, y = c1)
        CHECK: s = sub(x = m, y = c3)
        """)
    }

    func testCSEMergesPureOpsButNotStateReads() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [1, 4]))
        let s = b.input("s", .state(.tensor(.fp32, [1, 4])))
        let r1 = b.apply("read_state", ["input": s], .tensor(.fp32, [1, 4]), name: "r1")
        b.op("write_state", ["input": s, "data": x], nil, name: "w")
        let r2 = b.apply("read_state", ["input": s], .tensor(.fp32, [1, 4]), name: "r2")
        let m1 = b.apply("mul", ["x": r1, "y": r2], .tensor(.fp32, [1, 4]), name: "m1")
        let m2 = b.apply("mul", ["x": r1, "y": r2], .tensor(.fp32, [1, 4]), name: "m2")
        let y = b.apply("add", ["x": m1, "y": m2], .tensor(.fp32, [1, 4]), name: "y")
        let m = b.model(outputs: [y])
        let r = try run(CommonSubexpressionElimination.self, m)
        XCTAssertEqual(r.statistics["ops merged"], 1)
        try FileCheck.check(MILPrinter.print(m), """
        CHECK: r1 = read_state
        CHECK: write_state
        CHECK: r2 = read_state
        CHECK: m1 = mul(x = r1, y = r2)
        CHECK-NOT: m2 = mul
        CHECK: y = add(x = m1, y = m1)
        """)
    }

    func testTopologicalReorderMovesConstantsOnly() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [2]))
        let s = b.input("s", .state(.tensor(.fp32, [2])))
        let w = b.const("w", floats: [1, 2], shape: [2])
        let r = b.apply("read_state", ["input": s], .tensor(.fp32, [2]), name: "r")
        let a = b.apply("relu", ["x": x], .tensor(.fp32, [2]), name: "a")
        let y = b.apply("add", ["x": a, "y": w], .tensor(.fp32, [2]), name: "y")
        let z = b.apply("add", ["x": y, "y": r], .tensor(.fp32, [2]), name: "z")
        let m = b.model(outputs: [z])
        XCTAssertTrue(try run(TopologicalReorder.self, m).changed)
        XCTAssertEqual(m.program.functions[0].body.operations.map(\.name), ["r", "a", "w", "y", "z"])
    }

    func testPipelinesKeepFixturesValidAndLoadable() throws {
        for name in ["tiny_llama_fp16", "tiny_llama_int8", "tiny_llama_dynamic_end", "multifunction", "enumerated_shapes", "mixed_dtypes"] {
            let model = try ModelLoader.load(path: Fixtures.path(name + ".mlpackage"))
            let manager = PassManager(passes: Pipelines.defaultPipeline)
            try manager.run(on: model)
            let dir = NSTemporaryDirectory() + "forge-ir-opt-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            try ModelWriter.writePackage(model, to: dir + "/out.mlpackage")
            let back = try ModelLoader.load(path: dir + "/out.mlpackage")
            XCTAssertEqual(IREquivalence.differences(model, back), [], name)
        }
    }
}

