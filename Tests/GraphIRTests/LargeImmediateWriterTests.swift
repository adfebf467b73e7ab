import Foundation
import GraphIR
import TestSupport
import XCTest

/// `ModelWriter.PackageOptions.largeImmediatesAsBlobs` (default on): immediate tensors that
/// coremltools 9 would store in `weight.bin` (facts §5.6) are written there.
final class LargeImmediateWriterTests: XCTestCase {
    typealias W = WriterTests

    func imm(_ type: MILType, _ storage: TensorStorage) -> ConstValue { ConstValue(type: type, payload: .tensor(storage)) }

    /// A model with one mapped blob and immediates on both sides of the rule.
    func model(spec: Int32, dir: String) throws -> Model {
        let mapped = W.floatsBytes((0..<12).map { Float($0) })
        let (file, offs) = try W.makeWeightFile(dir + "/src.bin", [(.fp32, mapped, 0)])
        let fp32x10 = imm(.tensor(.fp32, [10]), .floats((0..<10).map { Float($0) + 0.25 }))
        let fp16x9 = imm(.tensor(.fp16, [9]), .bytes([UInt8](repeating: 0x3C, count: 18)))
        let int32x12 = imm(.tensor(.int32, [12]), .ints((0..<12).map { Int32($0) - 6 }))
        let int16x12 = imm(.tensor(.int16, [3, 4]), .ints((0..<12).map { Int32($0) * -100 }))
        let bools = imm(.tensor(.bool, [12]), .bools([Bool](repeating: true, count: 12)))
        let int4x21 = imm(.tensor(.int4, [21]), .bytes((0..<11).map { UInt8($0 * 17 & 0xFF) }))
        let data = imm(.tensor(.int8, [4, 4]), .bytes((0..<16).map { UInt8(bitPattern: Int8($0 - 8)) }))
        let scale = imm(.tensor(.fp16, [4, 1]), .bytes([0x00, 0x3C, 0x00, 0x3C, 0x00, 0x3C, 0x00, 0x3C]))
        let q = Op(type: "constexpr_blockwise_shift_scale",
                   inputs: [OpInput(name: "data", operands: [.constant(data)]), OpInput(name: "scale", operands: [.constant(scale)])],
                   outputs: [Value(name: "q", type: .tensor(.fp16, [4, 4]))], attributes: [Attribute(name: "name", value: .string("q"))])
        let ops = [
            W.constOp("m", try W.blob(file, offs[0], .tensor(.fp32, [12]))),
            W.constOp("a", fp32x10), W.constOp("a_again", fp32x10), W.constOp("h9", fp16x9), W.constOp("i32", int32x12),
            W.constOp("i16", int16x12), W.constOp("b", bools), W.constOp("i4", int4x21), q,
        ]
        let fn = Function(name: "main", inputs: [], opset: spec >= 9 ? "CoreML8" : "CoreML7",
                          body: Block(operations: ops, outputs: ops.map { $0.outputs[0] }))
        return Model(specificationVersion: spec, description: ModelDescription(), program: Program(functions: [fn]))
    }

    func payloads(_ m: Model) -> [String: ConstValue] {
        var out: [String: ConstValue] = [:]
        for op in m.program.functions[0].body.operations {
            if let v = op.constValue { out[op.name] = v }
            for i in op.inputs { if let c = i.operands.first?.constant { out[op.name + "." + i.name] = c } }
        }
        return out
    }

    func isBlob(_ c: ConstValue?) -> Bool { c?.blob != nil }

    func testLargeImmediatesMoveToWeightFile() throws {
        let dir = try Fixtures.tempDir(self)
        let original = try model(spec: 9, dir: dir)
        let pkg = dir + "/out.mlpackage"
        try ModelWriter.writePackage(original, to: pkg)
        let loaded = try ModelLoader.load(path: pkg)
        let p = payloads(loaded), o = payloads(original)
        for name in ["m", "a", "a_again", "i32", "i16", "i4", "q.data"] { XCTAssertTrue(isBlob(p[name]), name) }
        for name in ["h9", "b", "q.scale"] { XCTAssertFalse(isBlob(p[name]), name) }
        // Same values and types; the original model is untouched.
        for (name, v) in o {
            XCTAssertEqual(p[name]?.type, v.type, name)
            XCTAssertEqual(p[name]?.doubles(), v.doubles(), name)
        }
        XCTAssertFalse(isBlob(o["a"]))
        // The mapped blob keeps the first record; identical immediates share one.
        XCTAssertEqual(p["m"]?.blob?.offset, 64)
        XCTAssertEqual(p["a"]?.blob?.offset, p["a_again"]?.blob?.offset)
        let file = try WeightFile(path: pkg + Fixtures.weightSubpath)
        XCTAssertEqual(file.headerCount, 6)
        let i4 = try file.record(at: p["i4"]!.blob!.offset)
        XCTAssertEqual(i4.dtypeCode, DType.int4.blobCode)
        XCTAssertEqual(i4.sizeInBytes, 11)
        XCTAssertEqual(i4.paddingBits, 4)
        XCTAssertEqual(try file.record(at: p["i32"]!.blob!.offset).dtypeCode, 14)
        XCTAssertEqual(try file.record(at: p["i16"]!.blob!.offset).dtypeCode, 6)
        // Writing the reloaded model again gives the same files.
        let pkg2 = dir + "/out2.mlpackage"
        try ModelWriter.writePackage(loaded, to: pkg2)
        for sub in [Fixtures.specSubpath, Fixtures.weightSubpath] {
            XCTAssertEqual(FileManager.default.contents(atPath: pkg + sub), FileManager.default.contents(atPath: pkg2 + sub), sub)
        }
    }

    func testIntegerImmediatesStayInlineBeforeIOS18() throws {
        let dir = try Fixtures.tempDir(self)
        let original = try model(spec: 8, dir: dir)
        let pkg = dir + "/out.mlpackage"
        try ModelWriter.writePackage(original, to: pkg)
        let p = payloads(try ModelLoader.load(path: pkg))
        for name in ["a", "i4", "q.data"] { XCTAssertTrue(isBlob(p[name]), name) }
        for name in ["i32", "i16", "h9", "b"] { XCTAssertFalse(isBlob(p[name]), name) }
    }

    func testOptionOffKeepsImmediatesInline() throws {
        let dir = try Fixtures.tempDir(self)
        let original = try model(spec: 9, dir: dir)
        let pkg = dir + "/out.mlpackage"
        try ModelWriter.writePackage(original, to: pkg, options: ModelWriter.PackageOptions(largeImmediatesAsBlobs: false))
        let loaded = try ModelLoader.load(path: pkg)
        XCTAssertEqual(IREquivalence.differences(original, loaded), [])
        XCTAssertEqual(try WeightFile(path: pkg + Fixtures.weightSubpath).headerCount, 1)
    }
}
