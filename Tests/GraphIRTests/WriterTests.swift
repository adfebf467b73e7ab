import CoreMLProto
import Foundation
import TestSupport
import XCTest
@testable import GraphIR

/// ModelWriter: protobuf encoding, fresh weight.bin, package layout, atomicity, round trips.
final class WriterTests: XCTestCase {
    // MARK: Helpers

    /// A hand-made blob storage v2 file: one record per (dtype, payload) at 64-byte aligned
    /// offsets. Returns the mapped file and each record's metadata offset.
    static func makeWeightFile(_ path: String, _ blobs: [(DType, [UInt8], pad: UInt64)]) throws -> (WeightFile, [UInt64]) {
        var bytes = [UInt8](repeating: 0, count: 64)
        func put<T: FixedWidthInteger>(_ v: T, _ at: Int) {
            withUnsafeBytes(of: v.littleEndian) { for i in 0..<$0.count { bytes[at + i] = $0[i] } }
        }
        put(UInt32(blobs.count), 0)
        put(UInt32(2), 4)
        var offsets: [UInt64] = []
        for (i, (dtype, payload, pad)) in blobs.enumerated() {
            while bytes.count % 64 != 0 { bytes.append(0) }
            let meta = bytes.count
            offsets.append(UInt64(meta))
            bytes += [UInt8](repeating: 0, count: 64)
            put(UInt32(0xDEAD_BEEF), meta)
            put(dtype.blobCode!, meta + 4)
            put(UInt64(payload.count), meta + 8)
            put(UInt64(meta + 64), meta + 16)
            put(pad, meta + 24)
            // garbage in the reserved area of one record: must not be copied
            if i == 1 { bytes[meta + 40] = 0xAB }
            bytes += payload
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (try WeightFile(path: path), offsets)
    }

    static func blob(_ file: WeightFile, _ offset: UInt64, _ type: MILType) throws -> ConstValue {
        let ref = BlobRef(fileName: "@model_path/weights/weight.bin", offset: offset, file: file, record: try file.record(at: offset))
        return ConstValue(type: type, payload: .blob(ref))
    }

    static func floatsBytes(_ v: [Float]) -> [UInt8] { v.withUnsafeBytes { Array($0) } }

    static func constOp(_ name: String, _ val: ConstValue) -> Op {
        Op(type: "const", outputs: [Value(name: name, type: val.type)],
                  attributes: [Attribute(name: "name", value: .string(name)), Attribute(name: "val", value: val)])
    }

    struct Built {
        var model: Model
        var file: WeightFile
        var offsets: [UInt64]
        var payloads: [[UInt8]]
    }

    /// main(x: fp32[10]) with an immediate const, two consts sharing blob A, a nested blob use,
    /// an iOS18 constexpr with inline blob + immediate operands, a sub-byte blob, a variadic
    /// concat, and an unused record in the source file.
    /// `buildModel`'s fp32[10] immediate `c0` stays inline (the default moves it to weight.bin,
    /// see `testLargeImmediatesMoveToWeightFile`).
    static let keepImmediates = ModelWriter.PackageOptions(largeImmediatesAsBlobs: false)

    func buildModel(_ dir: String) throws -> Built {
        let a = Self.floatsBytes((0..<10).map { Float($0) * 0.5 })
        let b = (0..<16).flatMap { i -> [UInt8] in let h = Half.fromFloat(Float(i)); return [UInt8(h & 0xFF), UInt8(h >> 8)] }
        let c: [UInt8] = (0..<16).map { UInt8(bitPattern: Int8($0 - 8)) }
        let d: [UInt8] = [0x21, 0x43, 0x65, 0x07] // uint4 x7: 1..7
        let unused = Self.floatsBytes([9, 9])
        // The unused record comes first so that new offsets differ from the source ones.
        let (file, allOffs) = try Self.makeWeightFile(dir + "/src.bin", [(.fp32, unused, 0), (.fp32, a, 0), (.fp16, b, 0), (.int8, c, 0), (.uint4, d, 4)])
        let offs = Array(allOffs.dropFirst())

        let x = Value(name: "x", type: .tensor(.fp32, [10]))
        let imm = ConstValue(type: .tensor(.fp32, [10]), payload: .tensor(.floats((0..<10).map(Float.init))))
        let c0 = Self.constOp("c0", imm)
        let w = Self.constOp("w", try Self.blob(file, offs[0], .tensor(.fp32, [10])))
        let w2 = Self.constOp("größe/w2 🙂", try Self.blob(file, offs[0], .tensor(.fp32, [10])))
        func add(_ name: String, _ p: Value, _ q: Value) -> Op {
            Op(type: "add", inputs: [OpInput(name: "x", operands: [.value(p)]), OpInput(name: "y", operands: [.value(q)])],
                      outputs: [Value(name: name, type: .tensor(.fp32, [10]))],
                      attributes: [Attribute(name: "name", value: .string(name))])
        }
        let a0 = add("a0", x, c0.outputs[0])
        let a1 = add("a1", a0.outputs[0], w.outputs[0])
        let a2 = add("a2", a1.outputs[0], w2.outputs[0])
        let h = Self.constOp("h", try Self.blob(file, offs[1], .tensor(.fp16, [16])))
        let scaleBytes: [UInt8] = [0x00, 0x3C, 0x00, 0x3C, 0x00, 0x3C, 0x00, 0x3C]
        let q = Op(
            type: "constexpr_blockwise_shift_scale",
            inputs: [
                OpInput(name: "data", operands: [.constant(try Self.blob(file, offs[2], .tensor(.int8, [4, 4])))]),
                OpInput(name: "scale", operands: [.constant(ConstValue(type: .tensor(.fp16, [4, 1]), payload: .tensor(.bytes(scaleBytes))))]),
            ],
            outputs: [Value(name: "q", type: .tensor(.fp16, [4, 4]))],
            attributes: [Attribute(name: "name", value: .string("q"))])
        let idx = Self.constOp("idx", try Self.blob(file, offs[3], .tensor(.uint4, [7])))
        let cat = Op(
            type: "concat",
            inputs: [
                OpInput(name: "values", operands: [.value(a2.outputs[0]), .value(a1.outputs[0])]),
                OpInput(name: "axis", operands: [.constant(.int32(0))]),
                OpInput(name: "interleave", operands: [.constant(.bool(false))]),
            ],
            outputs: [Value(name: "cat", type: .tensor(.fp32, [20]))],
            attributes: [Attribute(name: "name", value: .string("cat"))])
        let body = Block(inputs: [], operations: [c0, w, w2, a0, a1, a2, h, q, idx, cat], outputs: [a2.outputs[0], cat.outputs[0]])
        let fn = Function(name: "main", inputs: [x], opset: "CoreML8", body: body)
        let buildInfo = ConstValue(
            type: .dict(key: .scalar(.string), value: .scalar(.string)),
            payload: .dict([ConstValue.DictEntry(key: .string("coremltools-version"), value: .string("9.0"))]))
        let program = Program(version: 1, functions: [fn], docString: "", attributes: [Attribute(name: "buildInfo", value: buildInfo)])

        var desc = ModelDescription()
        desc.inputs = [FeatureDescription(name: "x", shortDescription: "input ü", kind: .multiArray(ArrayFeature(
            shape: [10], dataType: .float32, flexibility: .range([SizeRange(lower: 1, upper: nil)]))))]
        desc.outputs = [
            FeatureDescription(name: "a2", kind: .multiArray(ArrayFeature(shape: [10], dataType: .float32))),
            FeatureDescription(name: "cat", kind: .multiArray(ArrayFeature(shape: [20], dataType: .float32))),
        ]
        desc.metadata.author = "forge-ir tests"
        desc.metadata.userDefined = [("com.github.apple.coremltools.version", "9.0"), ("clé", "välue")]
        let model = Model(specificationVersion: 9, description: desc, program: program)
        return Built(model: model, file: file, offsets: offs, payloads: [a, b, c, d])
    }

    /// Unpacks a model.mlmodel file with protobuf-c and runs `body` on it.
    func withSpec<R>(_ path: String, _ body: (UnsafeMutablePointer<CoreML__Specification__Model>) throws -> R) throws -> R {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard let m = bytes.withUnsafeBufferPointer({ core_ml__specification__model__unpack(nil, $0.count, $0.baseAddress) }) else {
            XCTFail("cannot unpack \(path)")
            throw ModelError.malformedProtobuf(path: path)
        }
        defer { core_ml__specification__model__free_unpacked(m, nil) }
        return try body(m)
    }

    static func str(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "<nil>" }

    typealias POp = UnsafeMutablePointer<CoreML__Specification__MILSpec__Operation>

    static func ops(_ m: UnsafeMutablePointer<CoreML__Specification__Model>) -> [POp] {
        let prog = m.pointee.mlprogram!
        let fn = prog.pointee.functions[0]!.pointee.value!
        let block = fn.pointee.block_specializations[0]!.pointee.value!
        return (0..<block.pointee.n_operations).map { block.pointee.operations[$0]! }
    }

    static func attr(_ op: POp, _ name: String) -> UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>? {
        for i in 0..<op.pointee.n_attributes where str(op.pointee.attributes[i]!.pointee.key) == name {
            return op.pointee.attributes[i]!.pointee.value
        }
        return nil
    }

    static func opName(_ op: POp) -> String {
        guard let v = attr(op, "name"), v.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE else { return "" }
        return str(v.pointee.immediatevalue.pointee.tensor.pointee.strings.pointee.values[0])
    }

    /// (fileName, offset) of a blob Value.
    static func blobRef(_ v: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>?) -> (String, UInt64)? {
        guard let v, v.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE else { return nil }
        return (str(v.pointee.blobfilevalue.pointee.filename), v.pointee.blobfilevalue.pointee.offset)
    }

    static func readU32(_ d: [UInt8], _ at: Int) -> UInt32 { d[at..<at + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
    static func readU64(_ d: [UInt8], _ at: Int) -> UInt64 { d[at..<at + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) } }

    func siblings(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
    }

    // MARK: Package contents

    func testWritePackageContents() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let pkg = dir + "/out.mlpackage"
        try ModelWriter.writePackage(built.model, to: pkg, options: Self.keepImmediates)

        XCTAssertEqual(siblings(dir), ["out.mlpackage", "src.bin"], "no temporary folders left behind")
        let weights = [UInt8](try Data(contentsOf: URL(fileURLWithPath: pkg + Fixtures.weightSubpath)))

        // Header: 4 distinct referenced blobs (A deduplicated, the unused record dropped), version 2.
        XCTAssertEqual(Self.readU32(weights, 0), 4)
        XCTAssertEqual(Self.readU32(weights, 4), 2)
        XCTAssertTrue(weights[8..<64].allSatisfy { $0 == 0 })

        func checkRecord(_ offset: UInt64, _ dtype: DType, _ payload: [UInt8], pad: UInt64 = 0, line: UInt = #line) {
            let o = Int(offset)
            XCTAssertEqual(o % 64, 0, line: line)
            XCTAssertEqual(Self.readU32(weights, o), 0xDEAD_BEEF, line: line)
            XCTAssertEqual(Self.readU32(weights, o + 4), dtype.blobCode, line: line)
            XCTAssertEqual(Self.readU64(weights, o + 8), UInt64(payload.count), line: line)
            XCTAssertEqual(Self.readU64(weights, o + 16), offset + 64, line: line)
            XCTAssertEqual(Self.readU64(weights, o + 24), pad, line: line)
            XCTAssertTrue(weights[(o + 32)..<(o + 64)].allSatisfy { $0 == 0 }, "reserved bytes zero", line: line)
            XCTAssertEqual(Array(weights[(o + 64)..<(o + 64 + payload.count)]), payload, line: line)
        }

        var lastEnd = 0
        try withSpec(pkg + Fixtures.specSubpath) { m in
            XCTAssertEqual(m.pointee.specificationversion, 9)
            XCTAssertEqual(m.pointee.type_case, CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM)
            let prog = m.pointee.mlprogram!
            XCTAssertEqual(prog.pointee.version, 1)
            XCTAssertEqual(prog.pointee.n_functions, 1)
            XCTAssertEqual(Self.str(prog.pointee.functions[0]!.pointee.key), "main")
            XCTAssertEqual(prog.pointee.n_attributes, 1)
            XCTAssertEqual(Self.str(prog.pointee.attributes[0]!.pointee.key), "buildInfo")
            let bi = prog.pointee.attributes[0]!.pointee.value!
            XCTAssertEqual(bi.pointee.type.pointee.type_case, CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_DICTIONARY_TYPE)
            XCTAssertEqual(bi.pointee.immediatevalue.pointee.dictionary.pointee.n_values, 1)

            let fn = prog.pointee.functions[0]!.pointee.value!
            XCTAssertEqual(Self.str(fn.pointee.opset), "CoreML8")
            XCTAssertEqual(fn.pointee.n_block_specializations, 1)
            XCTAssertEqual(Self.str(fn.pointee.block_specializations[0]!.pointee.key), "CoreML8")
            XCTAssertEqual(fn.pointee.n_inputs, 1)
            let xin = fn.pointee.inputs[0]!
            XCTAssertEqual(Self.str(xin.pointee.name), "x")
            let tt = xin.pointee.type.pointee.tensortype!
            XCTAssertEqual(tt.pointee.datatype, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32)
            XCTAssertEqual(tt.pointee.rank, 1)
            XCTAssertEqual(tt.pointee.dimensions[0]!.pointee.constant.pointee.size, 10)

            let block = fn.pointee.block_specializations[0]!.pointee.value!
            XCTAssertEqual((0..<block.pointee.n_outputs).map { Self.str(block.pointee.outputs[$0]) }, ["a2", "cat"])

            let ops = Self.ops(m)
            XCTAssertEqual(ops.map { Self.str($0.pointee.type) },
                           ["const", "const", "const", "add", "add", "add", "const", "constexpr_blockwise_shift_scale", "const", "concat"])
            XCTAssertEqual(ops.map(Self.opName), ["c0", "w", "größe/w2 🙂", "a0", "a1", "a2", "h", "q", "idx", "cat"])
            XCTAssertEqual(Self.str(ops[2].pointee.outputs[0]!.pointee.name), "größe/w2 🙂")

            // Immediate fp32 const keeps the floats field.
            let c0 = Self.attr(ops[0], "val")!
            XCTAssertEqual(c0.pointee.value_case, CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE)
            let fl = c0.pointee.immediatevalue.pointee.tensor.pointee
            XCTAssertEqual(fl.value_case, CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS)
            XCTAssertEqual(Array(UnsafeBufferPointer(start: fl.floats.pointee.values, count: fl.floats.pointee.n_values)), (0..<10).map(Float.init))

            // Blob consts: rewritten file name, new offsets, shared record for the duplicate.
            let (wName, wOff) = Self.blobRef(Self.attr(ops[1], "val"))!
            let (w2Name, w2Off) = Self.blobRef(Self.attr(ops[2], "val"))!
            XCTAssertEqual(wName, "@model_path/weights/weight.bin")
            XCTAssertEqual(w2Name, wName)
            XCTAssertEqual(wOff, 64)
            XCTAssertEqual(w2Off, wOff)
            checkRecord(wOff, .fp32, built.payloads[0])
            let (_, hOff) = Self.blobRef(Self.attr(ops[6], "val"))!
            checkRecord(hOff, .fp16, built.payloads[1])
            XCTAssertEqual(hOff, 192, "40-byte payload at 128 → next record at 192")

            // Inline operand constants (iOS18 constexpr): Binding.value, blob and immediate.
            let q = ops[7]
            XCTAssertEqual(q.pointee.n_inputs, 2)
            XCTAssertEqual(Self.str(q.pointee.inputs[0]!.pointee.key), "data")
            XCTAssertEqual(Self.str(q.pointee.inputs[1]!.pointee.key), "scale")
            let dataBinding = q.pointee.inputs[0]!.pointee.value.pointee.arguments[0]!
            XCTAssertEqual(dataBinding.pointee.binding_case, CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE)
            let (_, dOff) = Self.blobRef(dataBinding.pointee.value)!
            checkRecord(dOff, .int8, built.payloads[2])
            let scale = q.pointee.inputs[1]!.pointee.value.pointee.arguments[0]!.pointee.value!
            let sb = scale.pointee.immediatevalue.pointee.tensor.pointee
            XCTAssertEqual(sb.value_case, CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES)
            XCTAssertEqual(sb.bytes.pointee.values.len, 8)

            // Sub-byte blob keeps its padding bits; it is the last record (no trailing padding).
            let (_, iOff) = Self.blobRef(Self.attr(ops[8], "val"))!
            checkRecord(iOff, .uint4, built.payloads[3], pad: 4)
            lastEnd = Int(iOff) + 64 + built.payloads[3].count

            // Variadic input: one Argument with two name bindings, then inline scalars, in IR order.
            let cat = ops[9]
            XCTAssertEqual((0..<cat.pointee.n_inputs).map { Self.str(cat.pointee.inputs[$0]!.pointee.key) }, ["values", "axis", "interleave"])
            let values = cat.pointee.inputs[0]!.pointee.value!
            XCTAssertEqual(values.pointee.n_arguments, 2)
            XCTAssertEqual((0..<2).map { Self.str(values.pointee.arguments[$0]!.pointee.name) }, ["a2", "a1"])
            let axis = cat.pointee.inputs[1]!.pointee.value.pointee.arguments[0]!
            XCTAssertEqual(axis.pointee.binding_case, CORE_ML__SPECIFICATION__MILSPEC__ARGUMENT__BINDING__BINDING_VALUE)
            XCTAssertEqual(axis.pointee.value.pointee.immediatevalue.pointee.tensor.pointee.ints.pointee.values[0], 0)
            XCTAssertEqual(axis.pointee.value.pointee.type.pointee.tensortype.pointee.rank, 0)

            // Description.
            let d = m.pointee.description!
            XCTAssertEqual(d.pointee.n_input, 1)
            let xi = d.pointee.input[0]!
            XCTAssertEqual(Self.str(xi.pointee.shortdescription), "input ü")
            let arr = xi.pointee.type.pointee.multiarraytype!
            XCTAssertEqual(arr.pointee.datatype, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32)
            XCTAssertEqual(arr.pointee.n_shape, 1)
            XCTAssertEqual(arr.pointee.shape[0], 10)
            XCTAssertEqual(arr.pointee.shape_flexibility_case, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_SHAPE_RANGE)
            XCTAssertEqual(arr.pointee.shaperange.pointee.sizeranges[0]!.pointee.lowerbound, 1)
            XCTAssertEqual(arr.pointee.shaperange.pointee.sizeranges[0]!.pointee.upperbound, -1)
            XCTAssertEqual(d.pointee.n_output, 2)
            let md = d.pointee.metadata!
            XCTAssertEqual(Self.str(md.pointee.author), "forge-ir tests")
            XCTAssertEqual((0..<md.pointee.n_userdefined).map { Self.str(md.pointee.userdefined[$0]!.pointee.key) },
                           ["com.github.apple.coremltools.version", "clé"])
            XCTAssertEqual(Self.str(md.pointee.userdefined[1]!.pointee.value), "välue")
        }
        XCTAssertEqual(weights.count, lastEnd, "no padding after the last payload")

        // The caller's model is untouched.
        let wRef = built.model.program.functions[0].body.operations[1].constValue!.blob!
        XCTAssertEqual(wRef.offset, built.offsets[0])
        XCTAssertEqual(wRef.fileName, "@model_path/weights/weight.bin")
        XCTAssertTrue(wRef.file === built.file)

        // Manifest.
        let manifestText = try String(contentsOfFile: pkg + "/Manifest.json", encoding: .utf8)
        XCTAssertTrue(manifestText.hasPrefix("{\n    \"fileFormatVersion\": \"1.0.0\",\n"))
        XCTAssertTrue(manifestText.hasSuffix("}\n"))
        let manifest = try JSONSerialization.jsonObject(with: Data(manifestText.utf8)) as! [String: Any]
        XCTAssertEqual(manifest["fileFormatVersion"] as? String, "1.0.0")
        let root = try XCTUnwrap(manifest["rootModelIdentifier"] as? String)
        XCTAssertEqual(root, root.lowercased())
        XCTAssertNotNil(UUID(uuidString: root))
        let entries = try XCTUnwrap(manifest["itemInfoEntries"] as? [String: [String: String]])
        XCTAssertEqual(entries.count, 2)
        XCTAssertEqual(entries[root], ["author": "com.apple.CoreML", "description": "CoreML Model Specification",
                                       "name": "model.mlmodel", "path": "com.apple.CoreML/model.mlmodel"])
        let other = try XCTUnwrap(entries.first { $0.key != root })
        XCTAssertEqual(other.value, ["author": "com.apple.CoreML", "description": "CoreML Model Weights",
                                     "name": "weights", "path": "com.apple.CoreML/weights"])
        XCTAssertEqual(try ModelLoader.rootSpecPath(package: pkg), pkg + Fixtures.specSubpath)
    }

    func testWrittenPackageLoadsBackEquivalent() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let pkg = dir + "/rt.mlpackage"
        try ModelWriter.writePackage(built.model, to: pkg, options: Self.keepImmediates)
        let loaded = try ModelLoader.load(path: pkg)
        XCTAssertEqual(IREquivalence.differences(built.model, loaded), [])

        // Writing the reloaded model again gives byte-identical files.
        let pkg2 = dir + "/rt2.mlpackage"
        try ModelWriter.writePackage(loaded, to: pkg2, options: Self.keepImmediates)
        for sub in [Fixtures.specSubpath, Fixtures.weightSubpath] {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: pkg + sub)), try Data(contentsOf: URL(fileURLWithPath: pkg2 + sub)), sub)
        }
    }

    func testEquivalenceReportsDifferences() throws {
        let dir = try Fixtures.tempDir(self)
        for sub in ["one", "two", "b"] { try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true) }
        let one = try buildModel(dir + "/one")
        let other = try buildModel(dir + "/two") // same content, its own mapped file
        XCTAssertEqual(IREquivalence.differences(one.model, other.model), [])

        // Different blob bytes behind an identical reference.
        let (changed, offs) = try Self.makeWeightFile(dir + "/b/src.bin", [(.fp32, Self.floatsBytes((0..<10).map { Float($0) }), 0)])
        let ops = other.model.program.functions[0].body.operations
        ops[1].attributes[1].value = try Self.blob(changed, offs[0], .tensor(.fp32, [10]))
        ops[3].type = "sub"
        other.model.description.metadata.author = "someone"
        let diffs = IREquivalence.differences(one.model, other.model)
        XCTAssertEqual(diffs.count, 3, "\(diffs)")
        XCTAssertTrue(diffs.contains { $0.contains("'w'") && $0.contains("blob payloads differ") }, "\(diffs)")
        XCTAssertTrue(diffs.contains { $0.contains("'a0' type: add vs sub") }, "\(diffs)")
        XCTAssertTrue(diffs.contains { $0.contains("metadata author") }, "\(diffs)")
    }

    func testLargeBlobIsCopiedInChunks() throws {
        let dir = try Fixtures.tempDir(self)
        let n = 5_000_003 // > 2 chunks of 8 MiB, odd size
        var payload = [UInt8](repeating: 0, count: n * 4)
        for i in stride(from: 0, to: payload.count, by: 4097) { payload[i] = UInt8(truncatingIfNeeded: i / 4097 + 1) }
        let (file, offs) = try Self.makeWeightFile(dir + "/big.bin", [(.fp32, [1, 2, 3, 4], 0), (.fp32, payload, 0)])
        let small = Self.constOp("small", try Self.blob(file, offs[0], .tensor(.fp32, [1])))
        let big = Self.constOp("big", try Self.blob(file, offs[1], .tensor(.fp32, [n])))
        let fn = Function(name: "main", inputs: [], opset: "CoreML8",
                          body: Block(operations: [big, small], outputs: [big.outputs[0], small.outputs[0]]))
        let model = Model(specificationVersion: 9, description: ModelDescription(), program: Program(functions: [fn]))
        let pkg = dir + "/big.mlpackage"
        try ModelWriter.writePackage(model, to: pkg)
        let out = try WeightFile(path: pkg + Fixtures.weightSubpath)
        XCTAssertEqual(out.headerCount, 2)
        let r0 = try out.record(at: 64)
        XCTAssertEqual(r0.sizeInBytes, UInt64(payload.count))
        XCTAssertTrue(out.payload(r0).elementsEqual(payload))
        let r1 = try out.record(at: (64 + 64 + UInt64(payload.count) + 63) / 64 * 64)
        XCTAssertTrue(out.payload(r1).elementsEqual([1, 2, 3, 4]))
        XCTAssertEqual(out.size, Int(r1.dataOffset) + 4)
    }

    // MARK: Packages without weights, single .mlmodel files

    func tinyModel(name: String = "main") -> Model {
        let x = Value(name: "x", type: .tensor(.fp32, [2]))
        let r = Op(type: "relu", inputs: [OpInput(name: "x", operands: [.value(x)])],
                          outputs: [Value(name: "y", type: .tensor(.fp32, [2]))],
                          attributes: [Attribute(name: "name", value: .string("y"))])
        let fn = Function(name: name, inputs: [x], opset: "CoreML7", body: Block(operations: [r], outputs: r.outputs))
        var d = ModelDescription()
        d.inputs = [FeatureDescription(name: "x", kind: .multiArray(ArrayFeature(shape: [2], dataType: .float32)))]
        d.outputs = [FeatureDescription(name: "y", kind: .multiArray(ArrayFeature(shape: [2], dataType: .float32)))]
        return Model(specificationVersion: 8, description: d, program: Program(functions: [fn]))
    }

    func testPackageWithoutBlobsHasEmptyWeightsFolder() throws {
        let dir = try Fixtures.tempDir(self)
        let pkg = dir + "/tiny.mlpackage"
        try ModelWriter.writePackage(tinyModel(), to: pkg)
        // Like coremltools 9: the weights folder and its manifest entry exist, with no weight.bin.
        XCTAssertEqual(siblings(pkg + "/Data/com.apple.CoreML"), ["model.mlmodel", "weights"])
        XCTAssertEqual(siblings(pkg + "/Data/com.apple.CoreML/weights"), [])
        let loaded = try ModelLoader.load(path: pkg)
        XCTAssertEqual(IREquivalence.differences(tinyModel(), loaded), [])
    }

    func testWriteSpecFile() throws {
        let dir = try Fixtures.tempDir(self)
        let path = dir + "/tiny.mlmodel"
        try ModelWriter.writeSpecFile(tinyModel(), to: path)
        XCTAssertEqual(siblings(dir), ["tiny.mlmodel"])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(try ModelWriter.serializeSpec(tinyModel())))
        try withSpec(path) { m in
            XCTAssertEqual(Self.ops(m).map { Self.str($0.pointee.type) }, ["relu"])
        }
        let loaded = try ModelLoader.load(path: path)
        XCTAssertEqual(IREquivalence.differences(tinyModel(), loaded), [])
        // Replacing an existing file.
        try ModelWriter.writeSpecFile(tinyModel(name: "other"), to: path)
        XCTAssertEqual(try ModelLoader.load(path: path).program.functions.map(\.name), ["other"])
        XCTAssertEqual(siblings(dir), ["tiny.mlmodel"])
    }

    func testWriteSpecFileRefusesBlobs() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let path = dir + "/m.mlmodel"
        XCTAssertThrowsError(try ModelWriter.writeSpecFile(built.model, to: path)) { e in
            guard case let .writeFailed(p, reason)? = e as? ModelError else { return XCTFail("\(e)") }
            XCTAssertEqual(p, path)
            XCTAssertTrue(reason.contains(".mlpackage"), reason)
        }
        XCTAssertEqual(siblings(dir), ["src.bin"])
    }

    // MARK: Failures and atomicity

    func testMissingParentFolderThrowsAndLeavesNothing() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let path = dir + "/no/such/folder/out.mlpackage"
        XCTAssertThrowsError(try ModelWriter.writePackage(built.model, to: path)) { e in
            guard case let .writeFailed(p, reason)? = e as? ModelError else { return XCTFail("\(e)") }
            XCTAssertEqual(p, path)
            XCTAssertTrue(reason.contains("does not exist"), reason)
        }
        XCTAssertThrowsError(try ModelWriter.writeSpecFile(tinyModel(), to: dir + "/nope/x.mlmodel"))
        XCTAssertEqual(siblings(dir), ["src.bin"])
    }

    func testOverwriteReplacesExistingPackage() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let pkg = dir + "/m.mlpackage"
        try ModelWriter.writePackage(built.model, to: pkg, options: Self.keepImmediates)
        // A package forge-ir recognises is replaced (and says so).
        XCTAssertTrue(try ModelWriter.writePackage(built.model, to: pkg, options: Self.keepImmediates))
        // A stray file in the old package is a user's file: refused without force (issue #11),
        // and nothing is touched.
        _ = FileManager.default.createFile(atPath: pkg + "/stray.txt", contents: Data("x".utf8))
        XCTAssertThrowsError(try ModelWriter.writePackage(tinyModel(), to: pkg)) { e in
            XCTAssertTrue("\(e)".contains("stray.txt"), "\(e)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: pkg + "/stray.txt"))
        // Forced, it is replaced, the stray file with it.
        try ModelWriter.writePackage(tinyModel(), to: pkg, options: .init(force: true))
        XCTAssertEqual(siblings(dir), ["m.mlpackage", "src.bin"])
        XCTAssertEqual(siblings(pkg), ["Data", "Manifest.json"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: pkg + Fixtures.weightSubpath))
        XCTAssertEqual(IREquivalence.differences(tinyModel(), try ModelLoader.load(path: pkg)), [])

        // And back: the package the model was loaded from can be its own destination.
        try ModelWriter.writePackage(built.model, to: pkg, options: Self.keepImmediates)
        let loaded = try ModelLoader.load(path: pkg)
        try ModelWriter.writePackage(loaded, to: pkg, options: Self.keepImmediates)
        XCTAssertEqual(IREquivalence.differences(built.model, loaded), [])
        XCTAssertEqual(IREquivalence.differences(built.model, try ModelLoader.load(path: pkg)), [])
        XCTAssertEqual(siblings(dir), ["m.mlpackage", "src.bin"])
    }

    func testRefusesToReplaceNonPackageFolder() throws {
        let dir = try Fixtures.tempDir(self)
        let target = dir + "/important"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: target + "/keep.txt", contents: Data("keep".utf8))
        XCTAssertThrowsError(try ModelWriter.writePackage(tinyModel(), to: target)) { e in
            guard case let .writeFailed(_, reason)? = e as? ModelError else { return XCTFail("\(e)") }
            XCTAssertTrue(reason.contains("not a package forge-ir recognises"), reason)
        }
        XCTAssertEqual(siblings(target), ["keep.txt"])
        XCTAssertThrowsError(try ModelWriter.writeSpecFile(tinyModel(), to: target))
        XCTAssertEqual(siblings(dir), ["important"])
    }

    func testUnresolvedBlobThrowsAndLeavesNothing() throws {
        let dir = try Fixtures.tempDir(self)
        let orphan = Self.constOp("w", ConstValue(type: .tensor(.fp32, [10]),
                                                  payload: .blob(BlobRef(fileName: "@model_path/weights/weight.bin", offset: 64))))
        let fn = Function(name: "main", inputs: [], opset: "CoreML8", body: Block(operations: [orphan], outputs: orphan.outputs))
        let model = Model(specificationVersion: 9, description: ModelDescription(), program: Program(functions: [fn]))
        let pkg = dir + "/m.mlpackage"
        XCTAssertThrowsError(try ModelWriter.writePackage(model, to: pkg)) { e in
            guard case let .writeFailed(p, reason)? = e as? ModelError else { return XCTFail("\(e)") }
            XCTAssertEqual(p, pkg)
            XCTAssertTrue(reason.contains("op 'w'"), reason)
        }
        XCTAssertEqual(siblings(dir), [])
    }

    func testNulInNameIsRejected() throws {
        let m = tinyModel()
        m.program.functions[0].body.operations[0].outputs[0].name = "y\u{0}z"
        XCTAssertThrowsError(try ModelWriter.serializeSpec(m)) { e in
            guard case let .writeFailed(_, reason)? = e as? ModelError else { return XCTFail("\(e)") }
            XCTAssertTrue(reason.contains("NUL"), reason)
        }
    }

    func testEveryTypeAndFeatureKindEncodes() throws {
        // Types: scalar, unknown/symbol/variadic dims, list, tuple, dict, state.
        let sym = Dim.symbol(DimSymbol(name: "x_0", constraint: .range(lower: 1, upper: 8)))
        let types: [MILType] = [
            .scalar(.int64),
            .tensor(TensorType(.fp16, [sym, .unknown, .fixed(3)])),
            .tensor(TensorType(.int32, [.variadic])),
            .list(.tensor(.fp32, [2]), length: .unknown),
            .tuple([.scalar(.bool), .scalar(.string)]),
            .dict(key: .scalar(.string), value: .tensor(.fp32, [1])),
            .state(.tensor(.fp16, [1, 4])),
        ]
        let ins = types.enumerated().map { Value(name: "in\($0.offset)", type: $0.element) }
        let listVal = ConstValue(type: .list(.scalar(.int32), length: .fixed(2)), payload: .list([.int32(1), .int32(2)]))
        let tupleVal = ConstValue(type: .tuple([.scalar(.fp64), .scalar(.uint64)]),
                                  payload: .tuple([ConstValue(type: .scalar(.fp64), payload: .tensor(.doubles([2.5]))),
                                                   ConstValue(type: .scalar(.uint64), payload: .tensor(.longInts([7])), docString: "doc")]))
        let fn = Function(name: "f", inputs: ins, opset: "CoreML8", body: Block(outputs: [ins[1]]),
                          otherSpecializations: [(opset: "CoreML9", block: Block(outputs: [ins[1]]))],
                          attributes: [Attribute(name: "l", value: listVal), Attribute(name: "t", value: tupleVal)])
        var d = ModelDescription()
        d.functions = [FunctionDescription(name: "f", inputs: [
            FeatureDescription(name: "a", kind: .multiArray(ArrayFeature(shape: [1, 8], rawDataType: 65552,
                flexibility: .enumerated([[1, 8], [1, 16]]), defaultValue: .float(0.5))), isOptional: true),
            FeatureDescription(name: "b", kind: .int64),
            FeatureDescription(name: "c", kind: .double),
            FeatureDescription(name: "d", kind: .string),
            FeatureDescription(name: "e", kind: .image(ImageFeature(width: 4, height: 3, colorSpace: 20, sizes: nil,
                widthRange: SizeRange(lower: 1, upper: 8), heightRange: SizeRange(lower: 2, upper: nil)))),
            FeatureDescription(name: "f", kind: .dictionary(stringKeys: true)),
            FeatureDescription(name: "g", kind: .sequence(stringElements: false, sizeRange: SizeRange(lower: 0, upper: 5))),
            FeatureDescription(name: "h", kind: .unset),
        ], outputs: [], states: [FeatureDescription(name: "s", kind: .state(ArrayFeature(shape: [1, 4], dataType: .float16)))])]
        d.defaultFunctionName = "f"
        let model = Model(specificationVersion: 9, description: d, isUpdatable: true, program: Program(functions: [fn]))
        let bytes = try ModelWriter.serializeSpec(model)
        guard let m = bytes.withUnsafeBufferPointer({ core_ml__specification__model__unpack(nil, $0.count, $0.baseAddress) }) else {
            return XCTFail("unpack failed")
        }
        defer { core_ml__specification__model__free_unpacked(m, nil) }
        XCTAssertEqual(m.pointee.isupdatable, 1)
        let f = m.pointee.mlprogram.pointee.functions[0]!.pointee.value!
        XCTAssertEqual(f.pointee.n_block_specializations, 2)
        XCTAssertEqual(Self.str(f.pointee.block_specializations[1]!.pointee.key), "CoreML9")
        let vt = (0..<f.pointee.n_inputs).map { f.pointee.inputs[$0]!.pointee.type! }
        XCTAssertEqual(vt[0].pointee.tensortype.pointee.rank, 0)
        XCTAssertEqual(vt[0].pointee.tensortype.pointee.n_dimensions, 0)
        let dims = vt[1].pointee.tensortype.pointee.dimensions!
        XCTAssertEqual(dims[0]!.pointee.dimension_case, CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_UNKNOWN)
        XCTAssertEqual(dims[0]!.pointee.unknown.pointee.variadic, 0)
        XCTAssertEqual(dims[1]!.pointee.unknown.pointee.variadic, 0)
        XCTAssertEqual(dims[2]!.pointee.constant.pointee.size, 3)
        XCTAssertEqual(vt[2].pointee.tensortype.pointee.dimensions[0]!.pointee.unknown.pointee.variadic, 1)
        XCTAssertEqual(vt[3].pointee.type_case, CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_LIST_TYPE)
        XCTAssertEqual(vt[3].pointee.listtype.pointee.length.pointee.dimension_case, CORE_ML__SPECIFICATION__MILSPEC__DIMENSION__DIMENSION_UNKNOWN)
        XCTAssertEqual(vt[4].pointee.tupletype.pointee.n_types, 2)
        XCTAssertEqual(vt[5].pointee.dictionarytype.pointee.keytype.pointee.tensortype.pointee.datatype, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__STRING)
        XCTAssertEqual(vt[6].pointee.statetype.pointee.wrappedtype.pointee.tensortype.pointee.datatype, CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16)
        let attrs = (0..<f.pointee.n_attributes).map { f.pointee.attributes[$0]!.pointee }
        XCTAssertEqual(attrs.map { Self.str($0.key) }, ["l", "t"])
        XCTAssertEqual(attrs[0].value.pointee.immediatevalue.pointee.list.pointee.n_values, 2)
        let tv = attrs[1].value.pointee.immediatevalue.pointee.tuple.pointee
        XCTAssertEqual(tv.values[0]!.pointee.immediatevalue.pointee.tensor.pointee.doubles.pointee.values[0], 2.5)
        XCTAssertEqual(tv.values[1]!.pointee.immediatevalue.pointee.tensor.pointee.longints.pointee.values[0], 7)
        XCTAssertEqual(Self.str(tv.values[1]!.pointee.docstring), "doc")

        let desc = m.pointee.description!
        XCTAssertEqual(desc.pointee.n_input, 0)
        XCTAssertEqual(Self.str(desc.pointee.defaultfunctionname), "f")
        let fd = desc.pointee.functions[0]!
        let fin = (0..<fd.pointee.n_input).map { fd.pointee.input[$0]! }
        XCTAssertEqual(fin.count, 8)
        let a = fin[0].pointee.type!
        XCTAssertEqual(a.pointee.isoptional, 1)
        XCTAssertEqual(a.pointee.multiarraytype.pointee.datatype.rawValue, 65552)
        XCTAssertEqual(a.pointee.multiarraytype.pointee.enumeratedshapes.pointee.n_shapes, 2)
        XCTAssertEqual(a.pointee.multiarraytype.pointee.enumeratedshapes.pointee.shapes[1]!.pointee.shape[1], 16)
        XCTAssertEqual(a.pointee.multiarraytype.pointee.default_optional_value_case, CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_FLOAT_DEFAULT_VALUE)
        XCTAssertEqual(a.pointee.multiarraytype.pointee.floatdefaultvalue, 0.5)
        XCTAssertEqual(fin[1].pointee.type.pointee.type_case, CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE)
        XCTAssertEqual(fin[2].pointee.type.pointee.type_case, CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE)
        XCTAssertEqual(fin[3].pointee.type.pointee.type_case, CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE)
        let img = fin[4].pointee.type.pointee.imagetype!
        XCTAssertEqual(img.pointee.colorspace, CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__COLOR_SPACE__RGB)
        XCTAssertEqual(img.pointee.imagesizerange.pointee.heightrange.pointee.upperbound, -1)
        XCTAssertEqual(img.pointee.imagesizerange.pointee.widthrange.pointee.upperbound, 8)
        XCTAssertEqual(fin[5].pointee.type.pointee.dictionarytype.pointee.key_type_case, CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE)
        XCTAssertEqual(fin[6].pointee.type.pointee.sequencetype.pointee.type_case, CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_INT64_TYPE)
        XCTAssertEqual(fin[6].pointee.type.pointee.sequencetype.pointee.sizerange.pointee.upperbound, 5)
        XCTAssertNil(fin[7].pointee.type)
        let st = fd.pointee.state[0]!.pointee.type.pointee.statetype.pointee.arraytype!
        XCTAssertEqual(st.pointee.n_shape, 2)
    }

    func testRepeatedSerializationIsStable() throws {
        let dir = try Fixtures.tempDir(self)
        let built = try buildModel(dir)
        let layout = try ModelWriter.blobLayout(built.model)
        let first = try ModelWriter.serializeSpec(built.model, blobOffsets: layout)
        for _ in 0..<300 {
            XCTAssertEqual(try ModelWriter.serializeSpec(built.model, blobOffsets: layout), first)
        }
        // Without a layout, references keep their source offsets.
        let kept = try ModelWriter.serializeSpec(built.model)
        XCTAssertNotEqual(kept, first)
    }

    // MARK: Fixture round trips

    func testFixturesRoundTrip() throws {
        let fixtures = Fixtures.programFixtures
        if fixtures.isEmpty { throw XCTSkip("no fixtures in models-ir yet") }
        let dir = try Fixtures.tempDir(self)
        for name in fixtures {
            let original = try ModelLoader.load(path: Fixtures.path(name))
            let outName = name.hasSuffix(".mlmodel") && original.weightFiles.isEmpty && !hasBlobs(original)
                ? "w-" + name : "w-" + (name as NSString).deletingPathExtension + ".mlpackage"
            let out = dir + "/" + outName
            if outName.hasSuffix(".mlmodel") {
                try ModelWriter.writeSpecFile(original, to: out)
            } else {
                try ModelWriter.writePackage(original, to: out)
            }
            let reloaded = try ModelLoader.load(path: out)
            XCTAssertEqual(IREquivalence.differences(original, reloaded), [], name)

            // When the fresh weight layout happens to match the original one (coremltools also
            // writes blobs in first-use order), the spec must come out byte for byte identical.
            let layout = try ModelWriter.blobLayout(original)
            var sameLayout = true
            BlobWalker.forEachBlob(in: original.program) { ref, _, _ in
                if ref.fileName != ModelWriter.packageWeightReference || layout[BlobKey(ref, in: original)] != ref.offset { sameLayout = false }
            }
            let originalSpec = name.hasSuffix(".mlmodel") ? Fixtures.path(name) : Fixtures.path(name) + Fixtures.specSubpath
            let writtenSpec = outName.hasSuffix(".mlmodel") ? out : out + Fixtures.specSubpath
            if sameLayout {
                XCTAssertEqual(FileManager.default.contents(atPath: originalSpec), FileManager.default.contents(atPath: writtenSpec),
                               "\(name): spec bytes differ from the original")
            }

            // A second generation is byte-identical to the first.
            if outName.hasSuffix(".mlpackage") {
                let out2 = dir + "/2-" + outName
                try ModelWriter.writePackage(reloaded, to: out2)
                for sub in [Fixtures.specSubpath, Fixtures.weightSubpath] where FileManager.default.fileExists(atPath: out + sub) {
                    XCTAssertEqual(FileManager.default.contents(atPath: out + sub), FileManager.default.contents(atPath: out2 + sub), "\(name) \(sub)")
                }
            }
        }
    }

    func hasBlobs(_ m: Model) -> Bool {
        var any = false
        BlobWalker.forEachBlob(in: m.program) { _, _, _ in any = true }
        return any
    }
}
