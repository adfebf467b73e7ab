import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Tensor transformation / tensor operation kernels (``ShapeKernels``, ``IndexKernels``).
/// Vectors: `tools/opvectors_transform.py` (numpy / torch).
final class TransformKernelTests: XCTestCase {
    /// The numpy/torch vectors without string inputs, through the shared harness.
    func testOpVectors() throws {
        try OpVectors.run(family: "transform")
    }

    /// The vectors with string inputs (`pad.mode`, `scatter*.mode`, `topk.output_indices_dtype`):
    /// `transform_modes.json` adds `"strings": {input: value}` to the harness format (an `.npz`
    /// cannot hold strings); arrays come from `transform.npz`.
    func testModeVectors() throws {
        try OpVectors.run(family: "transform_modes", arrays: "transform")
    }

    /// The `expect_error` vectors fail for their own reason (a refused operand), not because
    /// an input is missing or misnamed.
    func testErrorVectorsFailForTheirReason() throws {
        struct Case: Decodable { var id: String; var op: String; var inputs: [String: String]?; var variadic: [String: [String]]?
                                 var strings: [String: String]?; var expect_error: Bool? }
        struct File: Decodable { var cases: [Case] }
        let arrays = try NPZ.read(path: OpVectors.dir + "transform.npz")
        var checked = 0
        for file in ["transform.json", "transform_modes.json"] {
            let cases = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: OpVectors.dir + file))).cases
            for c in cases where c.expect_error == true {
                var values: [String: [RuntimeValue]] = [:]
                for (name, key) in c.inputs ?? [:] { values[name] = [.tensor(try XCTUnwrap(arrays[key]))] }
                for (name, keys) in c.variadic ?? [:] { values[name] = try keys.map { .tensor(try XCTUnwrap(arrays[$0])) } }
                for (name, s) in c.strings ?? [:] { values[name] = [.tensor(Tensor(dtype: .string, shape: [], data: .string([s])))] }
                let op = Op(type: c.op, outputs: [Value(name: "o", type: .tensor(.fp32, []))])
                XCTAssertThrowsError(try KernelRegistry.kernel(for: c.op)!(KernelInvocation(op: op, precision: .fp32, values: values))) { e in
                    let reason = (e as? KernelError)?.reason ?? "\(e)"
                    XCTAssertFalse(reason.contains("missing input"), "\(c.id): \(reason)")
                    if ProcessInfo.processInfo.environment["FORGE_PRINT_ERRORS"] != nil { print("\(c.id): \(reason)") }
                }
                checked += 1
            }
        }
        XCTAssertGreaterThan(checked, 20)
    }

    // MARK: - structural

    static func invoke(_ op: String, _ inputs: [String: Tensor], outputs: [DType] = [.fp32]) throws -> [Tensor] {
        let kernel = try XCTUnwrap(KernelRegistry.kernel(for: op))
        let o = Op(type: op, outputs: outputs.enumerated().map { Value(name: "o\($0.offset)", type: .tensor(TensorType($0.element, []))) })
        return try kernel(KernelInvocation(op: o, precision: .fp32, values: inputs.mapValues { [.tensor($0)] })).map { try $0.dense() }
    }

    static func ints(_ v: [Int]) -> Tensor { Tensor(.int32, shape: [v.count], ints: v.map(Int32.init)) }

    /// Naive reference of a strided view (coordinate by coordinate).
    static func naiveView(_ a: [Float], shape: [Int], offset: Int, strides: [Int]) -> [Float] {
        let n = shape.reduce(1, *)
        var out = [Float](repeating: 0, count: n)
        let outStrides = contiguousStrides(shape)
        for i in 0..<n {
            var rem = i, src = offset
            for d in 0..<shape.count { src += (rem / outStrides[d]) * strides[d]; rem %= outStrides[d] }
            out[i] = a[src]
        }
        return out
    }

    /// Every permutation of rank-4 tensors with odd sizes (block copies, the tiled transpose
    /// path with partial tiles, size-1 dims; a decode step's [1, 1, H, D], where moving only the
    /// size-1 axes shares the storage) against the naive index math, on all storages.
    func testTransposeAllPermutationsMatchNaive() throws {
        for shape in [[3, 1, 37, 45], [1, 1, 9, 8]] { try transposeAllPermutations(shape) }
    }

    func transposeAllPermutations(_ shape: [Int]) throws {
        let n = shape.reduce(1, *)
        let a = (0..<n).map { Float($0) }
        let strides = contiguousStrides(shape)
        func perms(_ xs: [Int]) -> [[Int]] { xs.count <= 1 ? [xs] : xs.indices.flatMap { i in perms(Array(xs[..<i] + xs[(i + 1)...])).map { [xs[i]] + $0 } } }
        for p in perms([0, 1, 2, 3]) {
            let want = Self.naiveView(a, shape: p.map { shape[$0] }, offset: 0, strides: p.map { strides[$0] })
            let f = try Self.invoke("transpose", ["x": Tensor(.fp32, shape: shape, floats: a), "perm": Self.ints(p)])[0]
            XCTAssertEqual(f.shape, p.map { shape[$0] })
            XCTAssertEqual(f.floats, want, "perm \(p)")
            let i = try Self.invoke("transpose", ["x": Tensor(.int32, shape: shape, ints: a.map { Int32($0) }), "perm": Self.ints(p)])[0]
            XCTAssertEqual(i.ints, want.map { Int32($0) }, "int perm \(p)")
            let b = try Self.invoke("transpose", ["x": Tensor(shape: shape, bools: a.map { Int($0) % 3 == 0 }), "perm": Self.ints(p)])[0]
            XCTAssertEqual(b.bools, want.map { Int($0) % 3 == 0 }, "bool perm \(p)")
        }
    }

    /// String tensors move through the copy engine too (non-trivial element type).
    func testStringTensorsMove() throws {
        let x = Tensor(dtype: .string, shape: [2, 3], data: .string(["a", "b", "c", "d", "e", "f"]))
        let t = try Self.invoke("transpose", ["x": x, "perm": Self.ints([1, 0])], outputs: [.string])[0]
        guard case let .string(s) = t.data else { return XCTFail("not strings") }
        XCTAssertEqual(s, ["a", "d", "b", "e", "c", "f"])
        let c = try Self.invoke("tile", ["x": x, "reps": Self.ints([1, 2])], outputs: [.string])[0]
        guard case let .string(s2) = c.data else { return XCTFail("not strings") }
        XCTAssertEqual(s2, ["a", "b", "c", "a", "b", "c", "d", "e", "f", "d", "e", "f"])
    }

    /// iOS16 `reshape_like`: tuple inputs (one scalar per reference tensor), the MIL doc example.
    func testReshapeLikeDocExample() throws {
        let x = Tensor(.fp32, shape: [180], floats: (0..<180).map(Float.init))
        let refs: [RuntimeValue] = [.tensor(.zeros(.fp32, shape: [2, 3, 4])), .tensor(.zeros(.int32, shape: [1, 5, 6]))]
        let values: [String: [RuntimeValue]] = [
            "x": [.tensor(x)], "ref_tensors": refs,
            "begins": [.tensor(.scalar(Int32(0))), .tensor(.scalar(Int32(1)))],
            "ends": [.tensor(.scalar(Int32(2))), .tensor(.scalar(Int32(0)))],
            "end_masks": [.tensor(Tensor(shape: [], bools: [false])), .tensor(Tensor(shape: [], bools: [true]))],
        ]
        let op = Op(type: "reshape_like", outputs: [Value(name: "o", type: .tensor(.fp32, []))])
        let out = try KernelRegistry.kernel(for: "reshape_like")!(KernelInvocation(op: op, precision: .fp32, values: values))[0].dense()
        XCTAssertEqual(out.shape, [2, 3, 5, 6])
        XCTAssertEqual(out.floats, x.floats)
    }

    /// Out-of-range indices throw an error naming the index, the axis and its size.
    func testIndexErrorsNameIndexAndDimension() throws {
        let x = Tensor(.fp32, shape: [5, 3], floats: [Float](repeating: 1, count: 15))
        XCTAssertThrowsError(try Self.invoke("gather", ["x": x, "indices": Self.ints([0, 7])])) { e in
            let r = (e as? KernelError)?.reason ?? ""
            XCTAssertTrue(r.contains("index 7") && r.contains("axis 0") && r.contains("size 5"), r)
        }
        XCTAssertThrowsError(try Self.invoke("gather", ["x": x, "indices": Self.ints([-4]), "axis": .scalar(Int32(1))])) { e in
            let r = (e as? KernelError)?.reason ?? ""
            XCTAssertTrue(r.contains("index -4") && r.contains("axis 1") && r.contains("size 3"), r)
        }
        XCTAssertThrowsError(try Self.invoke("scatter_nd", ["data": x, "indices": Tensor(.int32, shape: [1, 2], ints: [4, 3]),
                                                           "updates": Tensor(.fp32, shape: [1], floats: [0])])) { e in
            let r = (e as? KernelError)?.reason ?? ""
            XCTAssertTrue(r.contains("index 3") && r.contains("axis 1") && r.contains("size 3"), r)
        }
    }

    /// iOS17 scatter ops (they carry `validate_indices`) accept indices in [0, D) only
    /// (coremltools `iOS17.scatter_gather`: "negative values are considered out-of-bound",
    /// "Expected indices between [0, D)"): the out-of-range error states that range, not the
    /// [-D, D) of the iOS15 ops, which keep theirs.
    func testIOS17ScatterOutOfRangeStatesTheAcceptedRange() throws {
        let data = Tensor(.fp32, shape: [8, 2], floats: [Float](repeating: 0, count: 16))
        let validate = Tensor(shape: [], bools: [true])
        func reason(_ op: String, _ inputs: [String: Tensor]) -> String {
            do { _ = try Self.invoke(op, inputs); return "no error" } catch { return (error as? KernelError)?.reason ?? "\(error)" }
        }
        let scatter: [String: Tensor] = ["data": data, "indices": Self.ints([8]), "updates": Tensor(.fp32, shape: [1, 2], floats: [1, 1])]
        var r = reason("scatter", scatter.merging(["validate_indices": validate]) { a, _ in a })
        XCTAssertTrue(r.contains("index 8") && r.contains("size 8") && r.contains("valid: 0...7"), r)
        r = reason("scatter", scatter)
        XCTAssertTrue(r.contains("valid: -8...7"), r)
        r = reason("scatter_along_axis", ["data": data, "indices": Tensor(.int32, shape: [1, 2], ints: [0, 9]),
                                          "updates": Tensor(.fp32, shape: [1, 2], floats: [1, 1]), "validate_indices": validate])
        XCTAssertTrue(r.contains("index 9") && r.contains("valid: 0...7"), r)
        r = reason("scatter_nd", ["data": data, "indices": Tensor(.int32, shape: [1, 2], ints: [0, 2]),
                                  "updates": Tensor(.fp32, shape: [1], floats: [1]), "validate_indices": validate])
        XCTAssertTrue(r.contains("index 2") && r.contains("axis 1") && r.contains("valid: 0...1"), r)
    }

    /// split / topk / concat / pad through an ExecutionPlan: multiple outputs, declared dtypes,
    /// constant operands (a string `mode` included), fp16 input.
    func testPlanWithMultiOutputOps() throws {
        func c(_ v: [Int32]) -> Operand { .constant(ConstValue(type: .tensor(.int32, [v.count]), payload: .tensor(.ints(v)))) }
        func op(_ type: String, _ inputs: [(String, [Operand])], _ outs: [Value]) -> Op {
            Op(type: type, inputs: inputs.map { OpInput(name: $0.0, operands: $0.1) }, outputs: outs,
               attributes: [Attribute(name: "name", value: .string(outs[0].name))])
        }
        let x = Value(name: "x", type: .tensor(.fp16, [2, 6]))
        let a = Value(name: "a", type: .tensor(.fp16, [2, 2])), b = Value(name: "b", type: .tensor(.fp16, [2, 4]))
        let v = Value(name: "v", type: .tensor(.fp16, [2, 2])), i = Value(name: "i", type: .tensor(.int32, [2, 2]))
        let cat = Value(name: "cat", type: .tensor(.fp16, [2, 4]))
        let padded = Value(name: "padded", type: .tensor(.fp16, [2, 7]))
        let ops = [
            op("split", [("x", [.value(x)]), ("split_sizes", [c([2, 4])]), ("axis", [.constant(.int32(1))])], [a, b]),
            op("topk", [("x", [.value(b)]), ("k", [.constant(.int32(2))])], [v, i]),
            op("concat", [("values", [.value(a), .value(v)]), ("axis", [.constant(.int32(-1))]), ("interleave", [.constant(.bool(false))])], [cat]),
            op("pad", [("x", [.value(cat)]), ("pad", [c([1, 2])]), ("mode", [.constant(.string("reflect"))])], [padded]),
        ]
        let f = Function(name: "main", inputs: [x], opset: "CoreML8", body: Block(operations: ops, outputs: [padded, i]))
        let plan = try ExecutionPlan(function: f)
        let input = Tensor(.fp16, shape: [2, 6], floats: [0, 1, 5, 3, 9, 4, 6, 7, 2, 8, 1, 8])
        let out = try plan.run(inputs: ["x": input])
        let idx = try XCTUnwrap(out["i"]), p = try XCTUnwrap(out["padded"])
        XCTAssertEqual(idx.dtype, .int32)
        XCTAssertEqual(idx.ints, [2, 0, 1, 3])  // row 1: ties 8/8 keep the lower index first
        XCTAssertEqual(p.dtype, .fp16)
        XCTAssertEqual(p.shape, [2, 7])
        // cat rows: [0, 1, 9, 5] and [6, 7, 8, 8]; reflect pad 1 before, 2 after
        XCTAssertEqual(p.floats, [1, 0, 1, 9, 5, 9, 1, 7, 6, 7, 8, 8, 8, 7])
    }

    /// LLM-sized activations: transpose, concat and slice of [1, S, 3072] (S = 256, or
    /// `FORGE_LARGE_S`, e.g. 2048 in a release build) run as block copies; checks a few values.
    func testLargeActivations() throws {
        let seq = Int(ProcessInfo.processInfo.environment["FORGE_LARGE_S"] ?? "") ?? 256
        let shape = [1, seq, 3072]
        let n = shape.reduce(1, *)
        let x = Tensor(.fp32, shape: shape, floats: (0..<n).map { Float($0 % 65_521) })
        let start = Date()
        let t = try Self.invoke("transpose", ["x": x, "perm": Self.ints([0, 2, 1])])[0]
        XCTAssertEqual(t.shape, [1, 3072, seq])
        XCTAssertEqual(t.floats[5 * seq + 7], x.floats[7 * 3072 + 5])
        let tDone = Date()
        let cat = try KernelRegistry.kernel(for: "concat")!(KernelInvocation(
            op: Op(type: "concat", outputs: [Value(name: "o", type: .tensor(.fp32, []))]), precision: .fp32,
            values: ["values": [.tensor(x), .tensor(x)], "axis": [.tensor(.scalar(Int32(1)))]]))[0].dense()
        XCTAssertEqual(cat.shape, [1, 2 * seq, 3072])
        XCTAssertEqual(cat.floats[(seq + 3) * 3072 + 11], x.floats[3 * 3072 + 11])
        let cDone = Date()
        let s = try Self.invoke("slice_by_index", ["x": x, "begin": Self.ints([0, 0, 1536]), "end": Self.ints([1, seq, 3072])])[0]
        XCTAssertEqual(s.shape, [1, seq, 1536])
        XCTAssertEqual(s.floats[10 * 1536 + 4], x.floats[10 * 3072 + 1540])
        let end = Date()
        print("[1, \(seq), 3072]: transpose \(tDone.timeIntervalSince(start)) s, concat \(cDone.timeIntervalSince(tDone)) s, slice \(end.timeIntervalSince(cDone)) s")
    }
}
