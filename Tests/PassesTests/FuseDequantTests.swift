import Foundation
import GraphIR
import Interpreter
@testable import Passes
import TestSupport
import XCTest

/// `fuse_dequant` on programs built in Swift: structure, golden text, and the interpreter's
/// outputs before and after (fp32 precision; bit-identical).
final class FuseDequantTests: XCTestCase {
    // MARK: Helpers

    func run(_ model: Model) throws -> PassResult {
        let r = try FuseDequant().run(on: model)
        try Verifier.verify(model)
        return r
    }

    func ops(_ model: Model) -> [String] { model.program.functions[0].body.operations.map(\.type) }
    func op(_ model: Model, _ type: String) -> Op? { model.program.functions[0].body.operations.first { $0.type == type } }

    func outputs(_ model: Model, _ inputs: [String: Tensor]) throws -> [String: Tensor] {
        try Session(model: model).predict(inputs)
    }

    func assertSameOutputs(_ a: Model, _ b: Model, _ inputs: [String: Tensor], file: StaticString = #filePath, line: UInt = #line) throws {
        let oa = try outputs(a, inputs), ob = try outputs(b, inputs)
        XCTAssertEqual(Set(oa.keys), Set(ob.keys), file: file, line: line)
        for (k, t) in oa {
            XCTAssertEqual(t.shape, ob[k]?.shape, k, file: file, line: line)
            XCTAssertEqual(t.floats.map(\.bitPattern), ob[k]?.floats.map(\.bitPattern), k, file: file, line: line)
        }
    }

    static func int8(_ v: [Int], _ shape: [Int]) -> ConstValue {
        ConstValue(type: .tensor(.int8, shape), payload: .tensor(.bytes(v.map { UInt8(bitPattern: Int8($0)) })))
    }
    static func uint8(_ v: [Int], _ shape: [Int]) -> ConstValue {
        ConstValue(type: .tensor(.uint8, shape), payload: .tensor(.bytes(v.map { UInt8($0) })))
    }
    static func fp16(_ v: [Float], _ shape: [Int]) -> ConstValue { Consts.encode(v, type: TensorType(.fp16, fixed: shape))! }
    static func fp32(_ v: [Float], _ shape: [Int]) -> ConstValue {
        ConstValue(type: .tensor(.fp32, shape), payload: .tensor(.floats(v)))
    }

    /// A constexpr op with inline operands (the iOS18 form).
    @discardableResult
    static func constexpr(_ b: ProgramBuilder, _ type: String, _ inputs: [(String, ConstValue)], _ out: MILType, name: String) -> Value {
        let v = b.apply(type, [:], out, name: name)
        b.ops.last!.inputs = inputs.map { OpInput(name: $0.0, operands: [.constant($0.1)]) }
        return v
    }

    static func input(_ shape: [Int], seed: Int) -> Tensor {
        let n = shape.reduce(1, *)
        return Tensor(.fp32, shape: shape, floats: (0..<n).map { Float(($0 * 7 + seed) % 13) * 0.125 - 0.75 })
    }

    /// Deterministic small integers in `range`.
    static func ints(_ n: Int, _ range: ClosedRange<Int>, seed: Int = 3) -> [Int] {
        (0..<n).map { range.lowerBound + ($0 * 5 + seed * 11 + $0 * $0) % (range.count) }
    }

    // MARK: 1. dequantize(const)

    /// `x + dequantize(w)` with per-row (axis 0) scales and zero points.
    func dequantizeModel(opset: String = "CoreML8", zeroPoint: Bool = true, axis: Bool = true) -> (Model, dense: [Float]) {
        let q = Self.ints(32, -100...100)
        let zp = [3, -2, 0, 7], scale: [Float] = [0.5, 0.25, 0.125, 2]
        let b = ProgramBuilder(opset: opset)
        let x = b.input("x", .tensor(.fp32, [4, 8]))
        let data = b.const("w_q", Self.int8(q, [4, 8]))
        let s = b.const("w_scale", Self.fp32(scale, [4]))
        var ins = ["input": data, "scale": s]
        if zeroPoint { ins["zero_point"] = b.const("w_zp", Self.int8(zp, [4])) }
        if axis { ins["axis"] = b.const("w_axis", .int32(0)) }
        let w = b.apply("dequantize", ins, .tensor(.fp32, [4, 8]), name: "w")
        let y = b.apply("add", ["x": x, "y": w], .tensor(.fp32, [4, 8]), name: "y")
        let dense = (0..<32).map { i in Float(q[i] - (zeroPoint ? zp[i / 8] : 0)) * scale[i / 8] }
        return (b.model(outputs: [y]), dense)
    }

    func testDequantizeBecomesBlockwise() throws {
        let (m, dense) = dequantizeModel()
        let r = try run(m)
        XCTAssertEqual(r.statistics["dequantize fused"], 1)
        XCTAssertFalse(ops(m).contains("dequantize"))
        let bw = try XCTUnwrap(op(m, "constexpr_blockwise_shift_scale"))
        XCTAssertEqual(bw.name, "w")
        XCTAssertEqual(bw.outputs[0].name, "w")
        XCTAssertEqual(Consts.value(bw, "data")?.type, .tensor(.int8, [4, 8]))
        XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [4, 1]))
        XCTAssertEqual(Consts.value(bw, "offset")?.type, .tensor(.int8, [4, 1]))
        try FileCheck.check(MILPrinter.print(m), """
        CHECK-NOT: dequantize(
        CHECK: tensor<fp32, [4, 8]> w = constexpr_blockwise_shift_scale(data = tensor<int8, [4, 8]>
        CHECK: y = add(x = x, y = w)
        """)
        // Numerically: x + the dense weight computed by hand.
        let x = Self.input([4, 8], seed: 1)
        let y = try outputs(m, ["x": x])["y"]!
        XCTAssertEqual(y.floats, zip(x.floats, dense).map { $0 + $1 })
        // Dead consts are left for dead_code_elimination.
        try PassManager(passes: [DeadCodeElimination.self]).run(on: m)
        XCTAssertEqual(ops(m), ["constexpr_blockwise_shift_scale", "add"])
    }

    func testAllZeroZeroPointIsDroppedAndAxisIsInferred() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [3, 8]))
        let data = b.const("q", Self.uint8(Self.ints(24, 0...255), [3, 8]))
        let s = b.const("s", Self.fp32([0.5, 1, 2], [3]))          // length 3: only axis 0 fits
        let zp = b.const("zp", Self.uint8([0, 0, 0], [3]))
        let w = b.apply("dequantize", ["input": data, "scale": s, "zero_point": zp], .tensor(.fp32, [3, 8]), name: "w")
        let y = b.apply("mul", ["x": x, "y": w], .tensor(.fp32, [3, 8]), name: "y")
        let m = b.model(outputs: [y])
        XCTAssertTrue(try run(m).changed)
        let bw = try XCTUnwrap(op(m, "constexpr_blockwise_shift_scale"))
        XCTAssertNil(bw.input("offset"))
        XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [3, 1]))
        let q = Self.ints(24, 0...255), sc: [Float] = [0.5, 1, 2]
        let xin = Self.input([3, 8], seed: 2)
        XCTAssertEqual(try outputs(m, ["x": xin])["y"]!.floats, (0..<24).map { xin.floats[$0] * (Float(q[$0]) * sc[$0 / 8]) })
    }

    func testScalarScaleWithVectorZeroPoint() throws {
        let q = Self.ints(12, -20...20), zp = [1, -3, 5]
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [3, 4]))
        let data = b.const("q", Self.int8(q, [3, 4]))
        let s = b.const("s", Self.fp32([0.5], []))
        let z = b.const("zp", Self.int8(zp, [3]))
        let ax = b.const("ax", .int32(-2))
        let w = b.apply("dequantize", ["input": data, "scale": s, "zero_point": z, "axis": ax], .tensor(.fp32, [3, 4]), name: "w")
        let y = b.apply("add", ["x": x, "y": w], .tensor(.fp32, [3, 4]), name: "y")
        let m = b.model(outputs: [y])
        XCTAssertTrue(try run(m).changed)
        let bw = try XCTUnwrap(op(m, "constexpr_blockwise_shift_scale"))
        XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [3, 1]))
        XCTAssertEqual(Consts.value(bw, "scale")?.doubles(), [0.5, 0.5, 0.5])
        XCTAssertEqual(Consts.value(bw, "offset")?.type, .tensor(.int8, [3, 1]))
        let xin = Self.input([3, 4], seed: 11)
        XCTAssertEqual(try outputs(m, ["x": xin])["y"]!.floats, (0..<12).map { xin.floats[$0] + Float(q[$0] - zp[$0 / 4]) * 0.5 })
    }

    func testAmbiguousAxisIsLeftAlone() throws {
        let b = ProgramBuilder()
        let data = b.const("q", Self.int8(Self.ints(16, -8...8), [4, 4]))
        let s = b.const("s", Self.fp32([1, 2, 3, 4], [4]))  // rows or columns? no axis given
        let w = b.apply("dequantize", ["input": data, "scale": s], .tensor(.fp32, [4, 4]), name: "w")
        let m = b.model(outputs: [w])
        XCTAssertFalse(try run(m).changed)
        XCTAssertEqual(ops(m).last, "dequantize")
    }

    func testRuntimeDequantizeIsLeftAlone() throws {
        let b = ProgramBuilder()
        let s = b.const("s", Self.fp32([0.5], []))
        let q = b.input("q", .tensor(.int8, [4]))
        let w = b.apply("dequantize", ["input": q, "scale": s], .tensor(.fp32, [4]), name: "w")
        let m = b.model(outputs: [w])
        XCTAssertFalse(try run(m).changed)
    }

    func testDequantizeBeforeIOS18BecomesAffine() throws {
        let (m, dense) = dequantizeModel(opset: "CoreML7")
        XCTAssertEqual(try run(m).statistics["dequantize fused"], 1)
        let affine = try XCTUnwrap(op(m, "constexpr_affine_dequantize"))
        XCTAssertTrue(affine.inputs.isEmpty, "iOS16 constexpr parameters are attributes")
        XCTAssertEqual(affine.attribute("axis"), .int32(0))
        XCTAssertEqual(affine.attribute("scale")?.type, .tensor(.fp32, [4]))
        try FileCheck.check(MILPrinter.print(m), """
        CHECK: tensor<fp32, [4, 8]> w = constexpr_affine_dequantize()[name = string("w"), axis = int32(0), quantized_data = tensor<int8, [4, 8]>
        CHECK: y = add(x = x, y = w)
        """)
        let x = Self.input([4, 8], seed: 4)
        XCTAssertEqual(try outputs(m, ["x": x])["y"]!.floats, zip(x.floats, dense).map { $0 + $1 })
        // Without a zero point: a zero scalar of the data's dtype.
        let (m2, dense2) = dequantizeModel(opset: "CoreML7", zeroPoint: false)
        XCTAssertTrue(try run(m2).changed)
        XCTAssertEqual(op(m2, "constexpr_affine_dequantize")?.attribute("zero_point")?.type, .scalar(.int8))
        XCTAssertEqual(try outputs(m2, ["x": x])["y"]!.floats, zip(x.floats, dense2).map { $0 + $1 })
    }

    /// The data blob is re-used as is (same reference, no copy); the scale only changes type.
    func testBlobDataIsNotCopied() throws {
        let (m, _) = dequantizeModel()
        let dir = NSTemporaryDirectory() + "forge-ir-fuse-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try ModelWriter.writePackage(m, to: dir + "/in.mlpackage")   // int8 [4, 8] → weight.bin
        let loaded = try ModelLoader.load(path: dir + "/in.mlpackage")
        let ref = try XCTUnwrap(loaded.program.functions[0].body.operations.first { $0.name == "w_q" }?.constValue?.blob)
        XCTAssertTrue(try run(loaded).changed)
        let bw = try XCTUnwrap(op(loaded, "constexpr_blockwise_shift_scale"))
        XCTAssertEqual(Consts.value(bw, "data")?.blob, ref)
        try ModelWriter.writePackage(loaded, to: dir + "/out.mlpackage")
        let back = try ModelLoader.load(path: dir + "/out.mlpackage")
        let x = Self.input([4, 8], seed: 5)
        try assertSameOutputs(loaded, back, ["x": x])
    }

    // MARK: 2. constexpr_affine_dequantize → blockwise (iOS18)

    func affineModel(zp: ConstValue, scale: ConstValue, axis: Int32) -> Model {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [4, 6]))
        let w = b.apply("constexpr_affine_dequantize", [:], .tensor(scale.type.tensorType!.dtype, [4, 6]), name: "w")
        b.ops.last!.attributes += [Attribute(name: "quantized_data", value: Self.uint8(Self.ints(24, 0...255), [4, 6])),
                                   Attribute(name: "zero_point", value: zp), Attribute(name: "scale", value: scale),
                                   Attribute(name: "axis", value: .int32(axis))]
        var wf = w
        if scale.type.tensorType!.dtype == .fp16 {
            let dt = b.const("dt", ConstValue(type: .scalar(.string), payload: .tensor(.strings(["fp32"]))))
            wf = b.apply("cast", ["x": w, "dtype": dt], .tensor(.fp32, [4, 6]), name: "w32")
        }
        let y = b.apply("add", ["x": x, "y": wf], .tensor(.fp32, [4, 6]), name: "y")
        return b.model(outputs: [y])
    }

    func testAffineBecomesBlockwise() throws {
        let cases: [(ConstValue, ConstValue, Int32, [Int]?)] = [
            (Self.uint8([128, 120, 130, 127, 1, 255], [6]), Self.fp16([0.5, 0.25, 1, 2, 0.125, 4], [6]), 1, [1, 6]),  // vector along axis 1
            (Self.uint8([128], []), Self.fp32([0.5, 0.25, 1, 2], [4]), 0, [4, 1]),                                  // scalar zp, vector scale
            (Self.uint8([0, 0, 0, 0], [4]), Self.fp32([0.03125], []), 0, nil),                                     // zero zp dropped
            (ConstValue(type: .tensor(.fp32, [4]), payload: .tensor(.floats([1.5, 0, -2, 3]))), Self.fp16([1, 2, 4, 8], [4]), 0, [4, 1]),  // float zp
        ]
        for (i, (zp, scale, axis, offsetShape)) in cases.enumerated() {
            let before = affineModel(zp: zp, scale: scale, axis: axis), after = affineModel(zp: zp, scale: scale, axis: axis)
            XCTAssertEqual(try run(after).statistics["affine dequantize converted"], 1, "case \(i)")
            XCTAssertNil(op(after, "constexpr_affine_dequantize"), "case \(i)")
            let bw = try XCTUnwrap(op(after, "constexpr_blockwise_shift_scale"), "case \(i)")
            XCTAssertEqual(bw.attributes.map(\.name), ["name"], "case \(i)")
            XCTAssertEqual(Consts.value(bw, "offset")?.type.tensorType?.fixedShape, offsetShape, "case \(i)")
            if let o = Consts.value(bw, "offset"), zp.type.tensorType?.dtype == .uint8 { XCTAssertEqual(o.type.tensorType?.dtype, .uint8) }
            try assertSameOutputs(before, after, ["x": Self.input([4, 6], seed: i)])
        }
    }

    func testAffineStaysBeforeIOS18() throws {
        let b = ProgramBuilder(opset: "CoreML7")
        let w = b.apply("constexpr_affine_dequantize", [:], .tensor(.fp32, [2, 2]), name: "w")
        b.ops.last!.attributes += [Attribute(name: "quantized_data", value: Self.int8([1, 2, 3, 4], [2, 2])),
                                   Attribute(name: "zero_point", value: Self.int8([0], [])), Attribute(name: "scale", value: Self.fp32([2], [])),
                                   Attribute(name: "axis", value: .int32(0))]
        let m = b.model(outputs: [w])
        XCTAssertFalse(try run(m).changed)
    }

    // MARK: 3. constexpr_cast chains

    func testCastOfBlockwiseBecomesOneOp() throws {
        func build() -> Model {
            let b = ProgramBuilder()
            let x = b.input("x", .tensor(.fp32, [4, 8]))
            let w16 = Self.constexpr(b, "constexpr_blockwise_shift_scale",
                                     [("data", Self.int8(Self.ints(32, -60...60), [4, 8])), ("scale", Self.fp16([0.5, 0.25, 0.125, 1, 2, 4, 0.5, 8], [4, 2])),
                                      ("offset", Self.int8([1, 0, -1, 2, 0, 0, 3, -3], [4, 2]))], .tensor(.fp16, [4, 8]), name: "w16")
            let w = b.apply("constexpr_cast", ["source_val": w16], .tensor(.fp32, [4, 8]), name: "w")
            b.ops.last!.inputs.append(OpInput(name: "output_dtype", operands: [.constant(ConstValue(type: .scalar(.string), payload: .tensor(.strings(["fp32"]))))]))
            let y = b.apply("add", ["x": x, "y": w], .tensor(.fp32, [4, 8]), name: "y")
            return b.model(outputs: [y])
        }
        let before = build(), after = build()
        XCTAssertEqual(try run(after).statistics["casts fused"], 1)
        XCTAssertEqual(ops(after), ["constexpr_blockwise_shift_scale", "add"])
        let bw = try XCTUnwrap(op(after, "constexpr_blockwise_shift_scale"))
        XCTAssertEqual(bw.outputs[0].type, .tensor(.fp32, [4, 8]))
        XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [4, 2]))
        try FileCheck.check(MILPrinter.print(after), """
        CHECK-NOT: constexpr_cast
        CHECK: tensor<fp32, [4, 8]> w = constexpr_blockwise_shift_scale(
        CHECK-NEXT: y = add(x = x, y = w)
        """)
        // Products of small integers and powers of two are exact in fp16 and fp32.
        try assertSameOutputs(before, after, ["x": Self.input([4, 8], seed: 3)])
    }

    func testCastOfLutBecomesOneOp() throws {
        func build() -> Model {
            let b = ProgramBuilder()
            let x = b.input("x", .tensor(.fp32, [2, 8]))
            // uint2 indices [2, 8], packed LSB first; one 4-entry table per row.
            let idx = ConstValue(type: .tensor(.uint2, [2, 8]), payload: .tensor(.bytes([0b1110_0100, 0b0001_1011, 0b1111_0000, 0b0101_1010])))
            let w16 = Self.constexpr(b, "constexpr_lut_to_dense", [("indices", idx), ("lut", Self.fp16([-1, 0.5, 2, 3.25, 0, 1, -4, 0.75], [2, 1, 4, 1]))],
                                     .tensor(.fp16, [2, 8]), name: "w16")
            let w = b.apply("constexpr_cast", ["source_val": w16], .tensor(.fp32, [2, 8]), name: "w")
            let y = b.apply("mul", ["x": x, "y": w], .tensor(.fp32, [2, 8]), name: "y")
            return b.model(outputs: [y])
        }
        let before = build(), after = build()
        XCTAssertEqual(try run(after).statistics["casts fused"], 1)
        XCTAssertEqual(ops(after), ["constexpr_lut_to_dense", "mul"])
        XCTAssertEqual(Consts.value(op(after, "constexpr_lut_to_dense")!, "lut")?.type, .tensor(.fp32, [2, 1, 4, 1]))
        try assertSameOutputs(before, after, ["x": Self.input([2, 8], seed: 6)])
    }

    // MARK: 4. transpose

    /// blockwise(data [8, 6], scale [4, 3] = blocks 2×2, offset) → transpose → add.
    func transposeModel(dtype: DType = .int8, otherUse: Bool = false) -> Model {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [6, 8]))
        let q = Self.ints(48, dtype == .int4 ? -8...7 : -128...127)
        let data: ConstValue
        if dtype == .int4 {
            data = ConstValue(type: .tensor(.int4, [8, 6]), payload: .tensor(.bytes(Consts.pack(q.map { UInt32($0 & 0xF) }, .int4))))
        } else {
            data = Self.int8(q, [8, 6])
        }
        let offset = dtype == .int4
            ? ConstValue(type: .tensor(.int4, [4, 3]), payload: .tensor(.bytes(Consts.pack([1, 15, 0, 2, 3, 14, 0, 0, 1, 7, 8, 2], .int4))))
            : Self.int8([1, -1, 0, 2, 3, -2, 0, 0, 1, 7, -8, 2], [4, 3])
        let w = Self.constexpr(b, "constexpr_blockwise_shift_scale",
                               [("data", data), ("scale", Self.fp32((0..<12).map { Float($0 % 5 + 1) * 0.25 }, [4, 3])), ("offset", offset)],
                               .tensor(.fp32, [8, 6]), name: "w")
        let perm = b.const("perm", ints: [1, 0], shape: [2])
        let wt = b.apply("transpose", ["x": w, "perm": perm], .tensor(.fp32, [6, 8]), name: "wt")
        let y = b.apply("add", ["x": x, "y": wt], .tensor(.fp32, [6, 8]), name: "y")
        var outs = [y]
        if otherUse { outs.append(b.apply("relu", ["x": w], .tensor(.fp32, [8, 6]), name: "r")) }
        return b.model(outputs: outs)
    }

    func testTransposeIsFoldedIntoTheWeight() throws {
        for dtype in [DType.int8, .int4] {
            let before = transposeModel(dtype: dtype), after = transposeModel(dtype: dtype)
            XCTAssertEqual(try run(after).statistics["transposes folded"], 1, "\(dtype)")
            XCTAssertEqual(ops(after), ["const", "constexpr_blockwise_shift_scale", "add"], "\(dtype)")
            let bw = try XCTUnwrap(op(after, "constexpr_blockwise_shift_scale"))
            XCTAssertEqual(bw.outputs[0].name, "wt")
            XCTAssertEqual(Consts.value(bw, "data")?.type, .tensor(dtype, [6, 8]))
            XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [3, 4]))
            XCTAssertEqual(Consts.value(bw, "offset")?.type, .tensor(dtype, [3, 4]))
            try FileCheck.check(MILPrinter.print(after), """
            CHECK-NOT: transpose(
            CHECK: tensor<fp32, [6, 8]> wt = constexpr_blockwise_shift_scale(data = tensor<\(dtype.rawValue), [6, 8]>
            CHECK-NEXT: y = add(x = x, y = wt)
            """)
            try assertSameOutputs(before, after, ["x": Self.input([6, 8], seed: 7)])
        }
    }

    func testTransposeIsNotFoldedWhenTheWeightWouldBeStoredTwice() throws {
        let m = transposeModel(otherUse: true)
        XCTAssertFalse(try run(m).changed)
        XCTAssertTrue(ops(m).contains("transpose"))
    }

    func testOrderKeepingTransposeIsATypeChange() throws {
        // [1, 8] → [8, 1]: same element order; folded even though the original stays in use.
        func build() -> Model {
            let b = ProgramBuilder()
            let x = b.input("x", .tensor(.fp32, [8, 1]))
            let w = Self.constexpr(b, "constexpr_blockwise_shift_scale", [("data", Self.int8(Self.ints(8, -9...9), [1, 8])), ("scale", Self.fp32([0.5, 2], [1, 2]))],
                                   .tensor(.fp32, [1, 8]), name: "w")
            let perm = b.const("perm", ints: [1, 0], shape: [2])
            let wt = b.apply("transpose", ["x": w, "perm": perm], .tensor(.fp32, [8, 1]), name: "wt")
            let y = b.apply("add", ["x": x, "y": wt], .tensor(.fp32, [8, 1]), name: "y")
            return b.model(outputs: [y, w])
        }
        let before = build(), after = build()
        XCTAssertTrue(try run(after).changed)
        let folded = try XCTUnwrap(after.program.functions[0].body.operations.first { $0.name == "wt" })
        XCTAssertEqual(folded.type, "constexpr_blockwise_shift_scale")
        XCTAssertEqual(Consts.value(folded, "scale")?.type, .tensor(.fp32, [2, 1]))
        XCTAssertEqual(Consts.value(folded, "data")?.payload, Self.int8(Self.ints(8, -9...9), [1, 8]).payload)
        try assertSameOutputs(before, after, ["x": Self.input([8, 1], seed: 8)])
    }

    // MARK: 5. reshape

    func testReshapeScaleShapes() {
        let f = FuseDequant.reshapedScaleShape
        // Per-row blocks of 3 in [8, 6].
        XCTAssertEqual(f([8, 6], [8, 2], [2, 4, 6]), [2, 4, 2])     // split the row axis
        XCTAssertEqual(f([8, 6], [8, 2], [48]), [16])               // merge
        XCTAssertEqual(f([8, 6], [8, 2], [8, 2, 3]), [8, 2, 1])     // split the blocked axis at a block edge
        XCTAssertEqual(f([8, 6], [8, 2], [4, 12]), [4, 4])          // merge then split, blocks stay whole
        XCTAssertEqual(f([8, 6], [8, 2], [1, 8, 1, 6]), [1, 8, 1, 2]) // unit axes
        XCTAssertEqual(f([1, 8, 6], [1, 8, 2], [8, 6]), [8, 2])
        XCTAssertEqual(f([8, 6], [4, 2], [2, 4, 6]), [2, 2, 2])     // blocks of 2 rows: row 4a+b is in block 2a+b/2
        XCTAssertEqual(f([8, 6], [1, 1], [48]), [1])                // per-tensor
        // Blocks would be cut.
        XCTAssertNil(f([8, 6], [4, 2], [48]))                       // 2×3 blocks are not contiguous
        XCTAssertNil(f([6, 4], [6, 1], [4, 6]))                     // a block of 4 straddles rows of 6
        XCTAssertNil(f([8, 6], [8, 2], [8, 3, 2]))                  // splits a block of 3 into 2 + 1
    }

    func reshapeModel(_ newShape: [Int], op: String = "reshape") -> Model {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, newShape))
        let w = Self.constexpr(b, "constexpr_blockwise_shift_scale",
                               [("data", Self.uint8(Self.ints(48, 0...255), [8, 6])), ("scale", Self.fp16((0..<16).map { Float($0 % 4 + 1) * 0.5 }, [8, 2])),
                                ("offset", Self.uint8((0..<16).map { 120 + $0 }, [8, 2]))],
                               .tensor(.fp16, [8, 6]), name: "w")
        let r: Value
        if op == "reshape" {
            let shape = b.const("shape", ints: newShape.map(Int32.init), shape: [newShape.count])
            r = b.apply("reshape", ["x": w, "shape": shape], .tensor(.fp16, newShape), name: "r")
        } else {
            let axes = b.const("axes", ints: [0], shape: [1])
            r = b.apply(op, ["x": w, "axes": axes], .tensor(.fp16, newShape), name: "r")
        }
        let dt = b.const("dt", ConstValue(type: .scalar(.string), payload: .tensor(.strings(["fp32"]))))
        let r32 = b.apply("cast", ["x": r, "dtype": dt], .tensor(.fp32, newShape), name: "r32")
        let y = b.apply("add", ["x": x, "y": r32], .tensor(.fp32, newShape), name: "y")
        return b.model(outputs: [y])
    }

    func testReshapeIsFoldedWithoutCopying() throws {
        for (shape, op) in [([2, 4, 6], "reshape"), ([48], "reshape"), ([8, 2, 3], "reshape"), ([1, 8, 6], "expand_dims")] {
            let before = reshapeModel(shape, op: op), after = reshapeModel(shape, op: op)
            let original = try XCTUnwrap(self.op(after, "constexpr_blockwise_shift_scale"))
            let dataPayload = Consts.value(original, "data")?.payload, scalePayload = Consts.value(original, "scale")?.payload
            XCTAssertEqual(try run(after).statistics["reshapes folded"], 1, "\(shape)")
            XCTAssertFalse(ops(after).contains(op), "\(shape)")
            let bw = try XCTUnwrap(self.op(after, "constexpr_blockwise_shift_scale"))
            XCTAssertEqual(bw.outputs[0].name, "r")
            XCTAssertEqual(Consts.value(bw, "data")?.type, .tensor(.uint8, shape))
            XCTAssertEqual(Consts.value(bw, "data")?.payload, dataPayload, "same bytes")
            XCTAssertEqual(Consts.value(bw, "scale")?.payload, scalePayload, "same bytes")
            try assertSameOutputs(before, after, ["x": Self.input(shape, seed: shape.count)])
        }
        // A reshape that would cut blocks stays.
        let m = reshapeModel([8, 3, 2])
        XCTAssertFalse(try run(m).changed)
        XCTAssertTrue(ops(m).contains("reshape"))
    }

    /// dequantize → transpose → reshape: one op at the end.
    func testChainsReachAFixedPoint() throws {
        let b = ProgramBuilder()
        let x = b.input("x", .tensor(.fp32, [1, 8, 4]))
        let data = b.const("q", Self.int8(Self.ints(32, -50...50), [4, 8]))
        let s = b.const("s", Self.fp32([0.5, 0.25, 1, 2], [4]))
        let ax = b.const("ax", .int32(0))
        let w = b.apply("dequantize", ["input": data, "scale": s, "axis": ax], .tensor(.fp32, [4, 8]), name: "w")
        let perm = b.const("perm", ints: [1, 0], shape: [2])
        let wt = b.apply("transpose", ["x": w, "perm": perm], .tensor(.fp32, [8, 4]), name: "wt")
        let shape = b.const("shape", ints: [1, 8, 4], shape: [3])
        let wr = b.apply("reshape", ["x": wt, "shape": shape], .tensor(.fp32, [1, 8, 4]), name: "wr")
        let y = b.apply("add", ["x": x, "y": wr], .tensor(.fp32, [1, 8, 4]), name: "y")
        let m = b.model(outputs: [y])
        let r = try run(m)
        XCTAssertEqual(r.statistics, ["dequantize fused": 1, "transposes folded": 1, "reshapes folded": 1])
        try PassManager(passes: [DeadCodeElimination.self]).run(on: m)
        XCTAssertEqual(ops(m), ["constexpr_blockwise_shift_scale", "add"])
        let bw = try XCTUnwrap(op(m, "constexpr_blockwise_shift_scale"))
        XCTAssertEqual(bw.outputs[0].name, "wr")
        XCTAssertEqual(Consts.value(bw, "scale")?.type, .tensor(.fp32, [1, 1, 4]))
        let q = Self.ints(32, -50...50), sc: [Float] = [0.5, 0.25, 1, 2]
        let xin = Self.input([1, 8, 4], seed: 9)
        // wr[0, j, i] = w[i, j]
        let expected = (0..<32).map { k -> Float in let j = k / 4, i = k % 4; return xin.floats[k] + Float(q[i * 8 + j]) * sc[i] }
        XCTAssertEqual(try outputs(m, ["x": xin])["y"]!.floats, expected)
    }

    // MARK: Report

    func testZeroAndNaNScalesAreReported() throws {
        let b = ProgramBuilder()
        let w = Self.constexpr(b, "constexpr_blockwise_shift_scale",
                               [("data", Self.int8([1, 2, 3, 4, 5, 6, 7, 8], [4, 2])), ("scale", Self.fp32([0.5, 0, .nan, 0], [4, 1]))],
                               .tensor(.fp32, [4, 2]), name: "w")
        let m = b.model(outputs: [w])
        let r = try run(m)
        XCTAssertFalse(r.changed)
        XCTAssertEqual(r.statistics, ["zero scales": 2, "NaN scales": 1])
        let manager = PassManager(passes: [FuseDequant.self])
        try manager.run(on: m)
        XCTAssertEqual(manager.statisticsReport(), "fuse_dequant: NaN scales 1, zero scales 2\n")
    }

    // MARK: Pipeline and fixtures

    func testRegisteredAndInTheDefaultPipeline() {
        XCTAssertEqual(PassRegistry.pass(named: "fuse_dequant").map { ObjectIdentifier($0) }, ObjectIdentifier(FuseDequant.self))
        let names = Pipelines.defaultPipeline.map { $0.name }
        XCTAssertLessThan(names.firstIndex(of: "fuse_dequant")!, names.firstIndex(of: "const_elimination")!)
    }

    /// coremltools' own compressed packages are already in the fused form: nothing to do, and the
    /// default pipeline keeps every weight compressed.
    func testLLMFixturesStayCompressed() throws {
        for name in ["tiny_llama_int8", "mixed_dtypes"] {
            let model = try ModelLoader.load(path: Fixtures.path(name + ".mlpackage"))
            func count(_ t: String) -> Int { var n = 0; model.program.functions[0].body.walk { if $0.type == t { n += 1 } }; return n }
            let compressed = count("constexpr_blockwise_shift_scale") + count("constexpr_lut_to_dense")
            let r = try FuseDequant().run(on: model)
            XCTAssertFalse(r.changed, name)
            try PassManager(passes: Pipelines.defaultPipeline).run(on: model)
            XCTAssertEqual(count("constexpr_blockwise_shift_scale") + count("constexpr_lut_to_dense"), compressed, name)
        }
    }
}
