@testable import GraphIR
import JSON
import TestSupport
import XCTest

/// Exact-text tests of the MIL printer, the summary and the JSON description on programs
/// built in memory.
final class PrinterTests: XCTestCase {
    // MARK: helpers

    func t(_ dtype: DType, _ shape: [Int]) -> MILType { .tensor(dtype, shape) }

    func const(_ name: String, _ value: ConstValue) -> GraphIR.Op {
        GraphIR.Op(type: "const", outputs: [Value(name: name, type: value.type)],
                  attributes: [Attribute(name: "name", value: .string(name)), Attribute(name: "val", value: value)])
    }

    func op(_ type: String, _ inputs: [(String, [Operand])], outputs: [Value], name: String, blocks: [Block] = [], attributes: [Attribute] = []) -> GraphIR.Op {
        GraphIR.Op(type: type, inputs: inputs.map { OpInput(name: $0.0, operands: $0.1) }, outputs: outputs, blocks: blocks,
                  attributes: [Attribute(name: "name", value: .string(name))] + attributes)
    }

    func line(_ o: GraphIR.Op) -> String { MILPrinter.print(o) }

    func blob(_ dtype: DType, _ shape: [Int], offset: UInt64) -> ConstValue {
        ConstValue(type: t(dtype, shape), payload: .blob(BlobRef(fileName: "@model_path/weights/weight.bin", offset: offset)))
    }

    // MARK: literals

    func testHexFloat() {
        XCTAssertEqual(MILPrinter.hexFloat(0.5), "0x1p-1")
        XCTAssertEqual(MILPrinter.hexFloat(1.0), "0x1p+0")
        XCTAssertEqual(MILPrinter.hexFloat(1.5), "0x1.8p+0")
        XCTAssertEqual(MILPrinter.hexFloat(-10), "-0x1.4p+3")
        XCTAssertEqual(MILPrinter.hexFloat(0), "0x0p+0")
        XCTAssertEqual(MILPrinter.hexFloat(-0.0), "-0x0p+0")
        XCTAssertEqual(MILPrinter.hexFloat(-.infinity), "-inf")
        XCTAssertEqual(MILPrinter.hexFloat(.infinity), "inf")
        XCTAssertEqual(MILPrinter.hexFloat(.nan), "nan")
        XCTAssertEqual(MILPrinter.hexFloat(0.1), "0x1.999999999999ap-4")
        XCTAssertEqual(MILPrinter.hexFloat(Double(Float(0.1))), "0x1.99999ap-4")
        XCTAssertEqual(MILPrinter.hexFloat(Double.leastNonzeroMagnitude), "0x1p-1074")
        XCTAssertEqual(MILPrinter.hexFloat(65504), "0x1.ffcp+15")
        XCTAssertEqual(MILPrinter.hexFloat(Double(Float.leastNonzeroMagnitude)), "0x1p-149")
    }

    func testScalarLiterals() {
        XCTAssertEqual(MILPrinter.literal(.int32(0)), "int32(0)")
        XCTAssertEqual(MILPrinter.literal(.fp32(0.5)), "fp32(0x1p-1)")
        XCTAssertEqual(MILPrinter.literal(.fp32(-.infinity)), "fp32(-inf)")
        XCTAssertEqual(MILPrinter.literal(.bool(true)), "bool(true)")
        XCTAssertEqual(MILPrinter.literal(.string("fp16")), "string(\"fp16\")")
        // fp16 immediates are raw little-endian bytes: 1.5 = 0x3E00.
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: .scalar(.fp16), payload: .tensor(.bytes([0x00, 0x3E])))), "fp16(0x1.8p+0)")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: .scalar(.uint64), payload: .tensor(.longInts([-1])))), "uint64(18446744073709551615)")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: .scalar(.int8), payload: .tensor(.bytes([0xFF])))), "int8(-1)")
    }

    func testStringEscaping() {
        XCTAssertEqual(MILPrinter.literal(.string("a\"b\\c\nd\te\r\u{1}é")), #"string("a\"b\\c\nd\te\r\x01é")"#)
    }

    func testTensorLiterals() {
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.int32, [2]), payload: .tensor(.ints([1, 1])))), "tensor<int32, [2]>([1, 1])")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.fp32, [2, 2]), payload: .tensor(.floats([1, 2, 3, 4])))),
                       "tensor<fp32, [2, 2]>([[0x1p+0, 0x1p+1], [0x1.8p+1, 0x1p+2]])")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.bool, [3]), payload: .tensor(.bools([true, false, true])))),
                       "tensor<bool, [3]>([true, false, true])")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.fp16, [2]), payload: .tensor(.bytes([0x00, 0x3E, 0x00, 0xBC])))),
                       "tensor<fp16, [2]>([0x1.8p+0, -0x1p+0])")
        // int4 bit-packed LSB first: 0x7F → [-1, 7]
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.int4, [2]), payload: .tensor(.bytes([0x7F])))),
                       "tensor<int4, [2]>([-1, 7])")
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.string, [2]), payload: .tensor(.strings(["a", "b"])))),
                       #"tensor<string, [2]>(["a", "b"])"#)
        XCTAssertEqual(MILPrinter.literal(ConstValue(type: t(.int32, [0]), payload: .tensor(.ints([])))), "tensor<int32, [0]>([])")
    }

    func testLargeImmediateIsElided() {
        let big = ConstValue(type: t(.fp32, [1000]), payload: .tensor(.floats([Float](repeating: 1, count: 1000))))
        XCTAssertEqual(line(const("c", big)), #"tensor<fp32, [1000]> c = const()[name = string("c"), val = tensor<fp32, [1000]>(<1000 values>)]"#)
        let edge = ConstValue(type: t(.int32, [64]), payload: .tensor(.ints([Int32](repeating: 0, count: 64))))
        XCTAssertFalse(MILPrinter.literal(edge).contains("values>"))
    }

    func testDictAndTupleLiterals() {
        let dictType = MILType.dict(key: .scalar(.string), value: .scalar(.string))
        let d = ConstValue(type: dictType, payload: .dict([
            .init(key: .string("coremltools-version"), value: .string("9.0")),
            .init(key: .string("coremltools-component-milinternal"), value: .string("")),
        ]))
        XCTAssertEqual(MILPrinter.literal(d),
                       #"dict<string, string>({{"coremltools-component-milinternal", ""}, {"coremltools-version", "9.0"}})"#)
    }

    // MARK: operations

    func testConstImmediateScalarAndTensor() {
        XCTAssertEqual(line(const("axis", .int32(-1))), #"int32 axis = const()[name = string("axis"), val = int32(-1)]"#)
        let shape = ConstValue(type: t(.int32, [2]), payload: .tensor(.ints([1, 1])))
        XCTAssertEqual(line(const("shape", shape)), #"tensor<int32, [2]> shape = const()[name = string("shape"), val = tensor<int32, [2]>([1, 1])]"#)
    }

    func testBlobConst() {
        XCTAssertEqual(line(const("w", blob(.fp16, [64, 32], offset: 64))),
                       #"tensor<fp16, [64, 32]> w = const()[name = string("w"), val = tensor<fp16, [64, 32]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(64)))]"#)
    }

    func testInputsAlphabeticalAndVariadic() {
        let a = Value(name: "a", type: t(.fp16, [1, 2])), b = Value(name: "b", type: t(.fp16, [1, 2]))
        let axis = Value(name: "axis", type: .scalar(.int32)), il = Value(name: "il", type: .scalar(.bool))
        let c = Value(name: "c", type: t(.fp16, [1, 6]))
        let o = op("concat", [("values", [.value(a), .value(b), .value(a)]), ("interleave", [.value(il)]), ("axis", [.value(axis)])], outputs: [c], name: "c")
        XCTAssertEqual(line(o), #"tensor<fp16, [1, 6]> c = concat(axis = axis, interleave = il, values = (a, b, a))[name = string("c")]"#)
    }

    func testAttributesNameFirstThenAlphabetical() {
        let x = Value(name: "x", type: t(.fp32, [4]))
        let y = Value(name: "y", type: t(.fp32, [4]))
        let o = GraphIR.Op(type: "constexpr_affine_dequantize", outputs: [y], attributes: [
            Attribute(name: "zero_point", value: ConstValue(type: .scalar(.int8), payload: .tensor(.bytes([0xFF])))),
            Attribute(name: "axis", value: .int32(0)),
            Attribute(name: "name", value: .string("y")),
            Attribute(name: "scale", value: .fp32(0.5)),
        ])
        XCTAssertEqual(line(o), #"tensor<fp32, [4]> y = constexpr_affine_dequantize()[name = string("y"), axis = int32(0), scale = fp32(0x1p-1), zero_point = int8(-1)]"#)
        // No attributes: no brackets.
        let add = GraphIR.Op(type: "add", inputs: [OpInput(name: "y", operands: [.value(x)]), OpInput(name: "x", operands: [.value(x)])],
                            outputs: [Value(name: "s", type: t(.fp32, [4]))])
        XCTAssertEqual(line(add), "tensor<fp32, [4]> s = add(x = x, y = x)")
    }

    func testInlineConstantOperand() {
        let out = Value(name: "w_q", type: t(.fp16, [64, 64]))
        let o = op("constexpr_blockwise_shift_scale", [
            ("scale", [.constant(blob(.fp16, [64, 2], offset: 4288))]),
            ("data", [.constant(blob(.int8, [64, 64], offset: 64))]),
        ], outputs: [out], name: "w_q")
        XCTAssertEqual(line(o), #"tensor<fp16, [64, 64]> w_q = constexpr_blockwise_shift_scale(data = tensor<int8, [64, 64]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(64))), scale = tensor<fp16, [64, 2]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(4288))))[name = string("w_q")]"#)
    }

    func testOpWithoutOutputs() {
        let s = Value(name: "key_cache_0", type: .state(t(.fp16, [1, 2, 64, 16])))
        let v = Value(name: "v", type: t(.fp16, [1, 2, 64, 16]))
        let o = op("write_state", [("input", [.value(s)]), ("data", [.value(v)])], outputs: [], name: "w0")
        XCTAssertEqual(line(o), #"write_state(data = v, input = key_cache_0)[name = string("w0")]"#)
    }

    func testMultiOutputOp() {
        let x = Value(name: "x", type: t(.fp16, [2, 8]))
        let a = Value(name: "a", type: t(.fp16, [2, 4])), b = Value(name: "b", type: t(.fp16, [2, 4]))
        let o = op("split", [("x", [.value(x)]), ("num_splits", [.constant(.int32(2))]), ("axis", [.constant(.int32(1))])], outputs: [a, b], name: "split_0")
        XCTAssertEqual(line(o), #"tensor<fp16, [2, 4]> a, tensor<fp16, [2, 4]> b = split(axis = int32(1), num_splits = int32(2), x = x)[name = string("split_0")]"#)
    }

    // MARK: functions and programs

    func testNestedBlocks() {
        let p = Value(name: "p", type: .scalar(.bool))
        let x = Value(name: "x", type: t(.fp32, [2]))
        let t1 = Value(name: "t", type: t(.fp32, [2]))
        let e1 = Value(name: "e", type: t(.fp32, [2]))
        let thenBlock = Block(operations: [op("relu", [("x", [.value(x)])], outputs: [t1], name: "t")], outputs: [t1])
        let elseBlock = Block(operations: [op("sigmoid", [("x", [.value(x)])], outputs: [e1], name: "e")], outputs: [e1])
        let r = Value(name: "r", type: t(.fp32, [2]))
        let cond = op("cond", [("pred", [.value(p)])], outputs: [r], name: "r", blocks: [thenBlock, elseBlock])
        // while_loop with block inputs
        let i0 = Value(name: "i0", type: .scalar(.int32))
        let i = Value(name: "i", type: .scalar(.int32)), j = Value(name: "j", type: .scalar(.int32))
        let lt = Value(name: "lt", type: .scalar(.bool)), inc = Value(name: "inc", type: .scalar(.int32))
        let condB = Block(inputs: [i], operations: [op("less", [("x", [.value(i)]), ("y", [.constant(.int32(10))])], outputs: [lt], name: "lt")], outputs: [lt])
        let bodyB = Block(inputs: [j], operations: [op("add", [("x", [.value(j)]), ("y", [.constant(.int32(1))])], outputs: [inc], name: "inc")], outputs: [inc])
        let loopOut = Value(name: "n", type: .scalar(.int32))
        let loop = op("while_loop", [("loop_vars", [.value(i0)])], outputs: [loopOut], name: "n", blocks: [condB, bodyB])
        let f = Function(name: "main", inputs: [p, x, i0], opset: "CoreML8", body: Block(operations: [cond, loop], outputs: [r, loopOut]))
        let text = MILPrinter.print(f)
        let expected = """
            func main<ios18>(bool p, tensor<fp32, [2]> x, int32 i0) {
                    tensor<fp32, [2]> r = cond(pred = p)[name = string("r")]
                        () {
                                tensor<fp32, [2]> t = relu(x = x)[name = string("t")];
                            } -> (t)
                        () {
                                tensor<fp32, [2]> e = sigmoid(x = x)[name = string("e")];
                            } -> (e);
                    int32 n = while_loop(loop_vars = i0)[name = string("n")]
                        (int32 i) {
                                bool lt = less(x = i, y = int32(10))[name = string("lt")];
                            } -> (lt)
                        (int32 j) {
                                int32 inc = add(x = j, y = int32(1))[name = string("inc")];
                            } -> (inc);
                } -> (r, n);

        """
        XCTAssertEqual(text, expected)
    }

    /// A stateful model with a RangeDim input, built in memory.
    func statefulModel(flexibility: ShapeFlexibility, defaultShape: [Int]) -> Model {
        let ids = Value(name: "input_ids", type: .tensor(TensorType(.int32, [.fixed(1), .unknown])))
        let cache = Value(name: "key_cache_0", type: .state(t(.fp16, [1, 2, 64, 16])))
        let w = Value(name: "w", type: t(.fp16, [64, 32]))
        let w2 = Value(name: "w2", type: t(.fp16, [64, 32]))
        let axis = Value(name: "axis", type: .scalar(.int32))
        let read = Value(name: "r", type: t(.fp16, [1, 2, 64, 16]))
        let y = Value(name: "y", type: .tensor(TensorType(.fp16, [.fixed(1), .unknown, .fixed(32)])))
        let ops: [GraphIR.Op] = [
            const("w", blob(.fp16, [64, 32], offset: 64)),
            const("w2", blob(.fp16, [64, 32], offset: 64)), // same blob: counted once
            const("axis", .int32(-1)),
            op("read_state", [("input", [.value(cache)])], outputs: [read], name: "r"),
            op("write_state", [("input", [.value(cache)]), ("data", [.value(read)])], outputs: [], name: "w0"),
            op("gather", [("x", [.value(w)]), ("indices", [.value(ids)]), ("axis", [.value(axis)])], outputs: [y], name: "y"),
        ]
        _ = w2
        let f = Function(name: "main", inputs: [ids, cache], opset: "CoreML8", body: Block(operations: ops, outputs: [y]))
        let buildInfo = ConstValue(type: .dict(key: .scalar(.string), value: .scalar(.string)), payload: .dict([
            .init(key: .string("coremltools-version"), value: .string("9.0")),
        ]))
        let program = Program(functions: [f], attributes: [Attribute(name: "buildInfo", value: buildInfo)])
        var d = ModelDescription()
        d.inputs = [FeatureDescription(name: "input_ids", kind: .multiArray(ArrayFeature(shape: defaultShape, dataType: .int32, flexibility: flexibility)))]
        d.outputs = [FeatureDescription(name: "y", kind: .multiArray(ArrayFeature(shape: [], dataType: .float16)))]
        d.states = [FeatureDescription(name: "key_cache_0", kind: .state(ArrayFeature(shape: [1, 2, 64, 16], dataType: .float16)))]
        d.metadata.author = "me"
        d.metadata.userDefined = [("com.github.apple.coremltools.version", "9.0")]
        return Model(specificationVersion: 9, description: d, program: program)
    }

    func testProgramWithRangeDimAndState() {
        let m = statefulModel(flexibility: .range([SizeRange(lower: 1, upper: 1), SizeRange(lower: 1, upper: 2048)]), defaultShape: [1, 8])
        let lines = MILPrinter.print(m).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines[0], "program(1.3)")
        XCTAssertEqual(lines[1], #"[buildInfo = dict<string, string>({{"coremltools-version", "9.0"}})]"#)
        XCTAssertEqual(lines[2], "{")
        XCTAssertEqual(lines[3], #"    func main<ios18>(tensor<int32, [1, ?]> input_ids, state<tensor<fp16, [1, 2, 64, 16]>> key_cache_0) [FlexibleShapeInformation = tuple<tuple<string, dict<string, tensor<int32, [?]>>>, tuple<string, dict<string, list<tensor<int32, [2]>, ?>>>>((("DefaultShapes", {{"input_ids", [1, 8]}}), ("RangeDims", {{"input_ids", [[1, 1], [1, 2048]]}})))] {"#)
        XCTAssertEqual(lines[4], #"            tensor<fp16, [64, 32]> w = const()[name = string("w"), val = tensor<fp16, [64, 32]>(BLOBFILE(path = string("@model_path/weights/weight.bin"), offset = uint64(64)))];"#)
        XCTAssertEqual(lines[6], #"            int32 axis = const()[name = string("axis"), val = int32(-1)];"#)
        XCTAssertEqual(lines[7], #"            tensor<fp16, [1, 2, 64, 16]> r = read_state(input = key_cache_0)[name = string("r")];"#)
        XCTAssertEqual(lines[8], #"            write_state(data = r, input = key_cache_0)[name = string("w0")];"#)
        XCTAssertEqual(lines[9], #"            tensor<fp16, [1, ?, 32]> y = gather(axis = axis, indices = input_ids, x = w)[name = string("y")];"#)
        XCTAssertEqual(lines[10], "        } -> (y);")
        XCTAssertEqual(lines[11], "}")
        XCTAssertEqual(lines[12], "")
        XCTAssertEqual(lines.count, 13)
    }

    func testEnumeratedShapesInformation() {
        let m = statefulModel(flexibility: .enumerated([[1, 16], [1, 1], [1, 32]]), defaultShape: [1, 16])
        let header = MILPrinter.print(m).split(separator: "\n")[3]
        let k = [[1, 16], [1, 1], [1, 32]].map { MILPrinter.fnv1a32Hex("input_ids:\($0[0]),\($0[1])") }
        for key in k { XCTAssertEqual(key.count, 8) }
        let entries = zip(k, ["[1, 16]", "[1, 1]", "[1, 32]"]).map { "{\"\($0)\", {{\"input_ids\", \($1)}}}" }.sorted()
        XCTAssertEqual(String(header), #"    func main<ios18>(tensor<int32, [1, ?]> input_ids, state<tensor<fp16, [1, 2, 64, 16]>> key_cache_0) [FlexibleShapeInformation = tuple<tuple<string, dict<string, tensor<int32, [?]>>>, tuple<string, dict<string, dict<string, tensor<int32, [?]>>>>>((("DefaultShapes", {{"input_ids", [1, 16]}}), ("EnumeratedShapes", {"# + entries.joined(separator: ", ") + "})))] {")
    }

    func testMultiFunctionProgramAndFunctionFilter() {
        let x = Value(name: "x", type: t(.fp32, [4]))
        let y = Value(name: "y", type: t(.fp32, [4]))
        let f1 = Function(name: "first", inputs: [x], opset: "CoreML8", body: Block(operations: [op("relu", [("x", [.value(x)])], outputs: [y], name: "y")], outputs: [y]))
        let x2 = Value(name: "x", type: t(.fp32, [4]))
        let f2 = Function(name: "second", inputs: [x2], opset: "CoreML7", body: Block(operations: [], outputs: [x2]))
        let m = Model(specificationVersion: 9, description: ModelDescription(), program: Program(functions: [f1, f2]))
        XCTAssertEqual(MILPrinter.print(m), """
        program(1.3)
        {
            func first<ios18>(tensor<fp32, [4]> x) {
                    tensor<fp32, [4]> y = relu(x = x)[name = string("y")];
                } -> (y);
            func second<ios17>(tensor<fp32, [4]> x) {
                } -> (x);
        }

        """)
        XCTAssertEqual(MILPrinter.print(m, function: "second"), """
        program(1.3)
        {
            func second<ios17>(tensor<fp32, [4]> x) {
                } -> (x);
        }

        """)
    }

    // MARK: summary and JSON

    func testSummary() {
        let m = statefulModel(flexibility: .none, defaultShape: [1, 8])
        // A nested block op to check recursive counting.
        let p = Value(name: "p", type: .scalar(.bool))
        let c = Value(name: "c", type: .scalar(.int32))
        let inner = Block(operations: [const("c", .int32(3))], outputs: [c])
        let cv = Value(name: "cv", type: .scalar(.int32))
        m.program.functions[0].body.append(op("cond", [("pred", [.value(p)])], outputs: [cv], name: "cv", blocks: [inner, Block(outputs: [c])]))
        let s = ModelSummary(m)
        let f = s.functions[0]
        XCTAssertEqual(f.opCounts, ["const": 4, "read_state": 1, "write_state": 1, "gather": 1, "cond": 1])
        XCTAssertEqual(f.opTotal, 8)
        XCTAssertEqual(f.parameters[.fp16], ParameterStats(count: 2048, bytes: 4096))
        XCTAssertEqual(f.parameters[.int32], ParameterStats(count: 2, bytes: 8))
        XCTAssertEqual(f.blobCount, 1)
        XCTAssertEqual(f.stateCount, 1)
        XCTAssertEqual(f.stateBytes, 1 * 2 * 64 * 16 * 2)
        XCTAssertEqual(s.weightFileBytes, 0)
    }

    func testDescriptionJSON() throws {
        let m = statefulModel(flexibility: .range([SizeRange(lower: 1, upper: 1), SizeRange(lower: 1, upper: nil)]), defaultShape: [1, 8])
        let json = DescriptionJSON.json(m)
        let text = json.render()
        XCTAssertEqual(try JSONValue.parse(text), json)
        XCTAssertEqual(json["specification_version"], .int(9))
        XCTAssertEqual(json["default_function"], .string("main"))
        XCTAssertEqual(json["blob_count"], .int(1))
        XCTAssertEqual(json["inputs"], .array([.object([
            "name": .string("input_ids"), "dtype": .string("int32"), "shape": .array([.int(1), .null]),
            "shape_range": .array([.array([.int(1), .int(1)]), .array([.int(1), .int(-1)])]),
            "enumerated_shapes": .null, "default_shape": .array([.int(1), .int(8)]),
        ])]))
        // Output without a description shape: dims from the MIL type.
        XCTAssertEqual(json["outputs"]?.arrayValue?.first?["shape"], .array([.int(1), .null, .int(32)]))
        XCTAssertEqual(json["outputs"]?.arrayValue?.first?["default_shape"], .null)
        XCTAssertEqual(json["states"]?.arrayValue?.first?["shape"], .array([.int(1), .int(2), .int(64), .int(16)]))
        let fn = json["functions"]?.arrayValue?.first
        XCTAssertEqual(fn?["opset"], .string("CoreML8"))
        XCTAssertEqual(fn?["op_counts"], .object(["const": .int(3), "read_state": .int(1), "write_state": .int(1), "gather": .int(1)]))
        XCTAssertEqual(json["metadata"]?["user_defined"], .object(["com.github.apple.coremltools.version": .string("9.0")]))
        XCTAssertTrue(text.contains("\"blob_count\": 1,\n"))
        XCTAssertNil(json["summary"])
        // Parameters: the 2048-value float table; stored values also count the int32 constant.
        XCTAssertEqual(DescriptionJSON.json(m, summary: true)["summary"]?["parameter_count"], .int(2048))
        XCTAssertEqual(DescriptionJSON.json(m, summary: true)["summary"]?["stored_value_count"], .int(2049))
    }

    func testEnumeratedJSONShape() {
        let m = statefulModel(flexibility: .enumerated([[1, 16], [1, 1], [1, 32]]), defaultShape: [1, 16])
        let input = DescriptionJSON.json(m)["inputs"]?.arrayValue?.first
        XCTAssertEqual(input?["shape"], .array([.int(1), .null]))
        XCTAssertEqual(input?["enumerated_shapes"], .array([[1, 16], [1, 1], [1, 32]].map { .array($0.map(JSONValue.int)) }))
        XCTAssertEqual(input?["shape_range"], .null)
    }

    func testJSONParser() throws {
        let v = try JSONValue.parse(#"{"a": [1, -2, 3.5, 1e3, true, null, "x\"\u00e9\ud83d\ude00"], "b": {}}"#)
        XCTAssertEqual(v, .object(["a": .array([.int(1), .int(-2), .double(3.5), .double(1000), .bool(true), .null, .string("x\"é😀")]), "b": .object([:])]))
        XCTAssertThrowsError(try JSONValue.parse("[1,"))
        XCTAssertThrowsError(try JSONValue.parse("{} x"))
    }

    // MARK: fixtures

    /// `DescriptionJSON` of every loadable fixture equals the reference recorded from coremltools
    /// (the CLI test checks the same through the binary).
    func testDescriptionJSONMatchesReferenceFixtures() throws {
        let names = Fixtures.programFixtures
        if names.isEmpty { throw XCTSkip("no fixtures") }
        for name in names {
            let base = (name as NSString).deletingPathExtension
            let ref = Fixtures.repoRoot + "/models-ir/reference/" + base + ".json"
            guard let text = try? String(contentsOfFile: ref, encoding: .utf8) else { XCTFail("no reference for \(name)"); continue }
            let model = try ModelLoader.load(path: Fixtures.path(name))
            let got = DescriptionJSON.json(model)
            let expected = try JSONValue.parse(text)
            XCTAssertEqual(got, expected, "\(name): \(got.render(pretty: false).prefix(400))")
            // Printing never fails and ends the program.
            XCTAssertTrue(MILPrinter.print(model).hasSuffix("\n}\n"))
        }
    }
}
