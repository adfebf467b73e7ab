import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Unusual inputs for ``RowwiseFusion``: every case compares the fused plan's bits with the ops
/// run one by one, and with the op definitions evaluated in Double.
final class RowwiseFusionEdgeTests: XCTestCase {
    func vals(_ n: Int, seed: UInt64) -> [Float] {
        var g = KVCacheFusionTests.Rand(state: seed)
        return g.array(n)
    }

    func both(_ f: Function, _ feeds: [String: Tensor], out: String = "y") throws -> (fused: [Float], unfused: [Float], plan: ExecutionPlan) {
        let plan = try ExecutionPlan(function: f)
        let fused = try XCTUnwrap(plan.run(inputs: feeds)[out]).floats
        let unfused = try XCTUnwrap(ExecutionPlan(function: f, observing: .all).run(inputs: feeds)[out]).floats
        XCTAssertEqual(fused.map(\.bitPattern), unfused.map(\.bitPattern), "fused vs unfused bits")
        return (fused, unfused, plan)
    }

    func tt(_ dt: DType, _ s: [Int]) -> MILType { .tensor(dt, s) }

    /// Leading-dim broadcasting [2, 1, D] with [1, 3, D], a rank-0 scalar and a [1, 1, 1]-per-all
    /// value; relu of the sum.
    func testLeadingBroadcastAndScalars() throws {
        let d = 5
        let b = ProgramBuilder()
        let x = b.input("x", tt(.fp32, [2, 1, d])), z = b.input("z", tt(.fp32, [1, 3, d]))
        let s = b.input("s", tt(.fp32, [])), o = b.input("o", tt(.fp32, [1, 1, 1]))
        let a = b.apply("add", ["x": x, "y": z], tt(.fp32, [2, 3, d]))
        let m = b.apply("mul", ["x": s, "y": a], tt(.fp32, [2, 3, d]))
        let y = b.apply("relu", ["x": b.apply("sub", ["x": m, "y": o], tt(.fp32, [2, 3, d]))], tt(.fp32, [2, 3, d]), name: "y")
        let f = b.function(outputs: [y])
        let (xv, zv) = (vals(2 * d, seed: 1), vals(3 * d, seed: 2))
        let feeds = ["x": Tensor(.fp32, shape: [2, 1, d], floats: xv), "z": Tensor(.fp32, shape: [1, 3, d], floats: zv),
                     "s": Tensor(.fp32, shape: [], floats: [1.5]), "o": Tensor(.fp32, shape: [1, 1, 1], floats: [0.25])]
        let (fused, _, plan) = try both(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(fused.count, 2 * 3 * d)
        for i in 0..<2 { for j in 0..<3 { for k in 0..<d {
            let e = max(0, 1.5 * (Double(xv[i * d + k]) + Double(zv[j * d + k])) - 0.25)
            XCTAssertEqual(Double(fused[(i * 3 + j) * d + k]), e, accuracy: 1e-6)
        } } }
    }

    /// An operand of higher rank than a row operand ([1, 1, 1, D] against [1, S, D]) and one
    /// value a row ([1, S, 1]).
    func testHigherRankVectorAndPerRowValue() throws {
        let (s, d) = (3, 4)
        for sRun in [s, 1] {
            let b = ProgramBuilder()
            let x = b.input("x", tt(.fp32, [1, sRun, d])), w = b.input("w", tt(.fp32, [1, 1, 1, d]))
            let r = b.input("r", tt(.fp32, [1, sRun, 1]))
            let a = b.apply("mul", ["x": x, "y": w], tt(.fp32, [1, 1, sRun, d]))
            let y = b.apply("real_div", ["x": a, "y": r], tt(.fp32, [1, 1, sRun, d]), name: "y")
            let f = b.function(outputs: [y])
            let (xv, wv, rv) = (vals(sRun * d, seed: 3), vals(d, seed: 4), vals(sRun, seed: 5))
            let feeds = ["x": Tensor(.fp32, shape: [1, sRun, d], floats: xv), "w": Tensor(.fp32, shape: [1, 1, 1, d], floats: wv),
                         "r": Tensor(.fp32, shape: [1, sRun, 1], floats: rv)]
            let (fused, _, _) = try both(f, feeds)
            XCTAssertEqual(fused.count, sRun * d)
            for i in 0..<sRun { for k in 0..<d {
                XCTAssertEqual(Double(fused[i * d + k]), Double(Float(xv[i * d + k] * wv[k])) / Double(rv[i]), accuracy: 1e-5)
            } }
        }
    }

    /// fp16-declared values: rsqrt / inverse without epsilon on an fp16 x use the MIL default
    /// rounded to fp16 (rsqrt's 1e-12 is 0 there: rsqrt(0) = inf).
    func testFP16DeclaredDefaultEpsilon() throws {
        let (s, d) = (2, 4)
        let b = ProgramBuilder()
        let row = tt(.fp16, [1, s, d]), one = tt(.fp16, [1, s, 1])
        let x = b.input("x", row)
        let ms = b.apply("reduce_mean", ["x": b.apply("mul", ["x": x, "y": x], row), "axes": b.const("ax", ints: [-1], shape: [1]),
                                         "keep_dims": b.const("kd", bools: [true], shape: [])], one)
        let r = b.apply("rsqrt", ["x": ms], one)
        let iv = b.apply("inverse", ["x": x], row)
        let y = b.apply("add", ["x": b.apply("mul", ["x": x, "y": r], row), "y": iv], row, name: "y")
        let f = b.function(outputs: [y])
        var xv = vals(s * d, seed: 6).map { Half.toFloat(Half.fromFloat($0)) }
        for k in 0..<d { xv[k] = 0 }
        let feeds = ["x": Tensor(.fp16, shape: [1, s, d], floats: xv)]
        let (fused, _, plan) = try both(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        let e16 = Double(Half.toFloat(Half.fromFloat(1e-4)))
        // Row 0: x = 0, mean 0, rsqrt(0 + 0) = inf, 0 · inf = NaN.
        for k in 0..<d { XCTAssertTrue(fused[k].isNaN) }
        for k in 0..<d {
            let row = xv[d..<(2 * d)].map(Double.init)
            let ms = row.reduce(0) { $0 + $1 * $1 } / Double(d)
            let e = Double(xv[d + k]) / ms.squareRoot() + 1 / (Double(xv[d + k]) + e16)
            XCTAssertEqual(Double(fused[d + k]), e, accuracy: 1e-3 * max(1, abs(e)))  // the fp16 output's rounding
        }
    }

    /// Slices that must not fuse as a row slice or must be right: stride 2, a non-last axis,
    /// negative begin / end with masks.
    func testOddSlices() throws {
        let (s, d) = (3, 8)
        let x4 = vals(s * d, seed: 7)
        func run(begin: [Int32], end: [Int32], stride: [Int32]?, bm: [Bool]?, em: [Bool]?, outShape: [Int],
                 ref: (Int, Int) -> Float) throws {
            let b = ProgramBuilder()
            let x = b.input("x", tt(.fp32, [1, s, d]))
            var ins: [String: Value] = ["x": b.apply("abs", ["x": x], tt(.fp32, [1, s, d])),
                                        "begin": b.const("b", ints: begin, shape: [3]), "end": b.const("e", ints: end, shape: [3])]
            if let stride { ins["stride"] = b.const("st", ints: stride, shape: [3]) }
            if let bm { ins["begin_mask"] = b.const("bm", bools: bm, shape: [3]) }
            if let em { ins["end_mask"] = b.const("em", bools: em, shape: [3]) }
            let sl = b.apply("slice_by_index", ins, tt(.fp32, outShape))
            let y = b.apply("mul", ["x": sl, "y": b.const("two", floats: [2], shape: [])], tt(.fp32, outShape), name: "y")
            let f = b.function(outputs: [y])
            let (fused, _, _) = try both(f, ["x": Tensor(.fp32, shape: [1, s, d], floats: x4)])
            XCTAssertEqual(fused.count, outShape.reduce(1, *))
            let w = outShape[2]
            for i in 0..<outShape[1] { for k in 0..<w { XCTAssertEqual(fused[i * w + k], ref(i, k), "\(begin) \(end) \(i) \(k)") } }
        }
        // Stride 2 on the last axis: x[..., 1::2].
        try run(begin: [0, 0, 1], end: [1, 3, 8], stride: [1, 1, 2], bm: nil, em: [true, true, true], outShape: [1, s, d / 2]) { i, k in
            2 * abs(x4[i * d + 1 + 2 * k]) }
        // Rows 1..<3 (a non-last axis).
        try run(begin: [0, 1, 0], end: [1, 3, 8], stride: nil, bm: nil, em: nil, outShape: [1, 2, d]) { i, k in
            2 * abs(x4[(i + 1) * d + k]) }
        // x[..., -5:-1].
        try run(begin: [0, 0, -5], end: [1, 3, -1], stride: nil, bm: [true, true, false], em: [true, true, false], outShape: [1, s, 4]) { i, k in
            2 * abs(x4[i * d + 3 + k]) }
        // x[..., :-6] with begin masked (the begin value ignored).
        try run(begin: [5, 7, 7], end: [0, 0, -6], stride: nil, bm: [true, true, true], em: [true, true, false], outShape: [1, s, 2]) { i, k in
            2 * abs(x4[i * d + k]) }
    }

    /// concat interleaved or on another axis: not a row concat.
    func testOddConcats() throws {
        let (s, d) = (2, 3)
        let (av, bv) = (vals(s * d, seed: 8), vals(s * d, seed: 9))
        for (axis, interleave) in [(2, true), (1, false), (-2, false)] {
            let b = ProgramBuilder()
            let x = b.input("a", tt(.fp32, [1, s, d])), z = b.input("b", tt(.fp32, [1, s, d]))
            let outShape = axis == 2 ? [1, s, 2 * d] : [1, 2 * s, d]
            let c = b.apply("concat", ["axis": b.const("ax", ints: [Int32(axis)], shape: []), "interleave": b.const("il", bools: [interleave], shape: [])],
                            tt(.fp32, outShape), variadic: ["values": [b.apply("abs", ["x": x], tt(.fp32, [1, s, d])), z]])
            let y = b.apply("square", ["x": c], tt(.fp32, outShape), name: "y")
            let f = b.function(outputs: [y])
            let (fused, _, _) = try both(f, ["a": Tensor(.fp32, shape: [1, s, d], floats: av), "b": Tensor(.fp32, shape: [1, s, d], floats: bv)])
            XCTAssertEqual(fused.count, 2 * s * d)
            var ref: [Float] = []
            if axis == 2 {
                for i in 0..<s { for k in 0..<d { ref += [abs(av[i * d + k]), bv[i * d + k]] } }
            } else {
                ref = av.map { abs($0) } + bv
            }
            XCTAssertEqual(fused, ref.map { $0 * $0 }, "axis \(axis) interleave \(interleave)")
        }
    }

    /// An intermediate that is also a function output is not swallowed; NaN / inf; mul(x, x).
    func testIntermediateOutputAndSelfProduct() throws {
        let (s, d) = (2, 4)
        let b = ProgramBuilder()
        let row = tt(.fp32, [1, s, d])
        let x = b.input("x", row)
        let sq = b.apply("mul", ["x": x, "y": x], row, name: "sq")
        let y = b.apply("sqrt", ["x": b.apply("add", ["x": sq, "y": sq], row)], row, name: "y")
        let f = b.function(outputs: [y, sq])
        var xv = vals(s * d, seed: 10)
        xv[0] = .nan; xv[1] = .infinity; xv[2] = -.infinity
        let feeds = ["x": Tensor(.fp32, shape: [1, s, d], floats: xv)]
        let plan = try ExecutionPlan(function: f)
        let out = try plan.run(inputs: feeds)
        let ref = try ExecutionPlan(function: f, observing: .all).run(inputs: feeds)
        XCTAssertEqual(out["sq"]?.floats.map(\.bitPattern), ref["sq"]?.floats.map(\.bitPattern))
        XCTAssertEqual(out["y"]?.floats.map(\.bitPattern), ref["y"]?.floats.map(\.bitPattern))
        let yv = try XCTUnwrap(out["y"]).floats
        XCTAssertTrue(yv[0].isNaN)
        XCTAssertEqual(yv[1], .infinity); XCTAssertEqual(yv[2], .infinity)
        for k in 3..<(s * d) { XCTAssertEqual(Double(yv[k]), (2 * Double(Float(xv[k] * xv[k]))).squareRoot(), accuracy: 1e-6) }
    }

    /// Flexible leading dims: one plan run with different row counts one after another (the
    /// scratch buffer kept between calls), including zero rows.
    func testFlexibleRowsAcrossRuns() throws {
        let d = 6
        let b = ProgramBuilder()
        let row: MILType = .tensor(TensorType(.fp32, [.fixed(1), .unknown, .fixed(d)]))
        let one: MILType = .tensor(TensorType(.fp32, [.fixed(1), .unknown, .fixed(1)]))
        let x = b.input("x", row)
        let m = b.apply("reduce_sum", ["x": x, "axes": b.const("ax", ints: [2], shape: [1]), "keep_dims": b.const("kd", bools: [true], shape: [])], one)
        let y = b.apply("sub", ["x": x, "y": b.apply("sigmoid", ["x": m], one)], row, name: "y")
        let f = b.function(outputs: [y])
        let plan = try ExecutionPlan(function: f)
        let unfused = try ExecutionPlan(function: f, observing: .all)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        for (k, rows) in [5, 1, 0, 9, 2].enumerated() {
            let xv = vals(rows * d, seed: 20 + UInt64(k))
            let feeds = ["x": Tensor(.fp32, shape: [1, rows, d], floats: xv)]
            let a = try XCTUnwrap(plan.run(inputs: feeds)["y"]), r = try XCTUnwrap(unfused.run(inputs: feeds)["y"])
            XCTAssertEqual(a.shape, [1, rows, d])
            XCTAssertEqual(a.floats.map(\.bitPattern), r.floats.map(\.bitPattern), "rows \(rows)")
            for i in 0..<rows {
                let sum = xv[(i * d)..<((i + 1) * d)].reduce(0.0) { $0 + Double($1) }
                for j in 0..<d { XCTAssertEqual(Double(a.floats[i * d + j]), Double(xv[i * d + j]) - 1 / (1 + Foundation.exp(-sum)), accuracy: 1e-5) }
            }
        }
    }

    /// Integer inputs feeding float ops: an int32 x added to an fp32 value.
    func testIntegerOperand() throws {
        let (s, d) = (2, 3)
        let b = ProgramBuilder()
        let row = tt(.fp32, [1, s, d])
        let n = b.input("n", tt(.int32, [1, s, d])), x = b.input("x", row)
        let y = b.apply("abs", ["x": b.apply("add", ["x": n, "y": x], row)], row, name: "y")
        let f = b.function(outputs: [y])
        let xv = vals(s * d, seed: 30)
        let nv: [Int32] = [-3, 0, 7, 100000, -1, 2]
        let (fused, _, _) = try both(f, ["x": Tensor(.fp32, shape: [1, s, d], floats: xv), "n": Tensor(.int32, shape: [1, s, d], ints: nv)])
        for i in 0..<(s * d) { XCTAssertEqual(fused[i], abs(Float(nv[i]) + xv[i])) }
    }

    /// A row concat whose operands' leading dims differ at run time ([1, 1, D] beside [1, S, D]
    /// with S = 3, flexible S): the concat op rejects it, so the fused step must not broadcast
    /// the short operand but report the same error.
    func testConcatOfMismatchedRowsIsAnError() throws {
        let d = 2
        for bothWays in [false, true] {
            let b = ProgramBuilder()
            let row: MILType = .tensor(TensorType(.fp32, [.fixed(1), .unknown, .fixed(d)]))
            let wide: MILType = .tensor(TensorType(.fp32, [.fixed(1), .unknown, .fixed(2 * d)]))
            let x = b.input("x", row), w = b.input("w", tt(.fp32, [1, 1, d]))
            // Either the short operand itself, or a value computed from it (a local).
            let short = bothWays ? b.apply("abs", ["x": w], tt(.fp32, [1, 1, d])) : w
            let c = b.apply("concat", ["axis": b.const("ax", ints: [-1], shape: []), "interleave": b.const("il", bools: [false], shape: [])],
                            wide, variadic: ["values": [b.apply("abs", ["x": x], row), short]])
            let y = b.apply("square", ["x": c], wide, name: "y")
            let f = b.function(outputs: [y])
            let feeds = ["x": Tensor(.fp32, shape: [1, 3, d], floats: vals(3 * d, seed: 40)), "w": Tensor(.fp32, shape: [1, 1, d], floats: [1, 2])]
            XCTAssertThrowsError(try ExecutionPlan(function: f, observing: .all).run(inputs: feeds), "the ops reject it")
            let plan = try ExecutionPlan(function: f)
            XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
            XCTAssertThrowsError(try plan.run(inputs: feeds), "the fused step rejects it too (local operand: \(bothWays))")
            // S = 1 is a valid concat: fused.
            let ok = ["x": Tensor(.fp32, shape: [1, 1, d], floats: [3, -4]), "w": Tensor(.fp32, shape: [1, 1, d], floats: [1, -2])]
            XCTAssertEqual(try plan.run(inputs: ok)["y"]?.floats, [9, 16, 1, 4])
        }
    }

    /// A concat operand of a lower rank ([D] beside [1, 1, D]): the op rejects it; so must the
    /// fused plan.
    func testConcatOfAnotherRankIsAnError() throws {
        let d = 2
        let b = ProgramBuilder()
        let x = b.input("x", tt(.fp32, [1, 1, d])), w = b.input("w", tt(.fp32, [d]))
        let c = b.apply("concat", ["axis": b.const("ax", ints: [-1], shape: []), "interleave": b.const("il", bools: [false], shape: [])],
                        tt(.fp32, [1, 1, 2 * d]), variadic: ["values": [b.apply("abs", ["x": x], tt(.fp32, [1, 1, d])), w]])
        let y = b.apply("square", ["x": c], tt(.fp32, [1, 1, 2 * d]), name: "y")
        let f = b.function(outputs: [y])
        let feeds = ["x": Tensor(.fp32, shape: [1, 1, d], floats: [3, -4]), "w": Tensor(.fp32, shape: [d], floats: [1, 2])]
        XCTAssertThrowsError(try ExecutionPlan(function: f, observing: .all).run(inputs: feeds), "the ops reject it")
        XCTAssertThrowsError(try ExecutionPlan(function: f).run(inputs: feeds), "and the fused plan")
    }

    /// An intermediate read by a non-row op (a reshape) stays a value of its own; the rest fuses.
    func testIntermediateReadOutsideTheRegion() throws {
        let (s, d) = (2, 4)
        let b = ProgramBuilder()
        let row = tt(.fp32, [1, s, d])
        let x = b.input("x", row)
        let a = b.apply("abs", ["x": x], row)
        let m = b.apply("mul", ["x": a, "y": b.const("k", floats: [3], shape: [])], row)
        let r = b.apply("reshape", ["x": a, "shape": b.const("sh", ints: [1, Int32(s), Int32(d)], shape: [3])], row)
        let y = b.apply("sub", ["x": b.apply("sqrt", ["x": m], row), "y": r], row, name: "y")
        let f = b.function(outputs: [y])
        let xv = vals(s * d, seed: 50)
        let (fused, _, _) = try both(f, ["x": Tensor(.fp32, shape: [1, s, d], floats: xv)])
        for i in 0..<(s * d) { XCTAssertEqual(fused[i], (abs(xv[i]) * 3).squareRoot() - abs(xv[i])) }
    }

    /// A slice whose x has a lower rank than its begin / end ([D] with three-value begin / end):
    /// the op rejects it; so must the fused plan.
    func testSliceOfAnotherRankIsAnError() throws {
        let d = 4
        let b = ProgramBuilder()
        let w = b.input("w", tt(.fp32, [d]))
        let sl = b.apply("slice_by_index", ["x": w, "begin": b.const("b", ints: [0, 0, 1], shape: [3]), "end": b.const("e", ints: [1, 1, 3], shape: [3]),
                                            "end_mask": b.const("em", bools: [true, true, false], shape: [3])], tt(.fp32, [1, 1, 2]))
        let y = b.apply("mul", ["x": sl, "y": b.input("x", tt(.fp32, [1, 1, 2]))], tt(.fp32, [1, 1, 2]), name: "y")
        let f = b.function(outputs: [y])
        let feeds = ["w": Tensor(.fp32, shape: [d], floats: [1, 2, 3, 4]), "x": Tensor(.fp32, shape: [1, 1, 2], floats: [5, 6])]
        XCTAssertThrowsError(try ExecutionPlan(function: f, observing: .all).run(inputs: feeds), "the ops reject it")
        XCTAssertThrowsError(try ExecutionPlan(function: f).run(inputs: feeds), "and the fused plan")
    }
}
