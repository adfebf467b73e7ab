import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// Row-wise regions (``RowwiseFusion``): the expected values are the MIL op definitions
/// evaluated in Double in the test (torch's RMSNorm formula, rotate-half RoPE), not the
/// kernels'; the fused plan must also give the unfused plan's bits (`observing: .all` runs
/// every op on its own).
final class RowwiseFusionTests: XCTestCase {
    let (s, d) = (3, 8)

    func inputs(_ f: Function, seed: UInt64) -> [String: Tensor] {
        var g = KVCacheFusionTests.Rand(state: seed)
        var out: [String: Tensor] = [:]
        for v in f.inputs {
            let t = v.type.tensorType!
            let shape = t.shape.map { $0.fixedValue! }
            out[v.name] = Tensor(t.dtype, shape: shape, floats: g.array(shape.reduce(1, *)))
        }
        return out
    }

    /// Fused and unfused outputs of `f` (output "y"), and the fused plan.
    func runBoth(_ f: Function, _ feeds: [String: Tensor]) throws -> (fused: [Float], unfused: [Float], plan: ExecutionPlan) {
        let plan = try ExecutionPlan(function: f)
        let fused = try XCTUnwrap(plan.run(inputs: feeds)["y"]).floats
        let unfused = try XCTUnwrap(ExecutionPlan(function: f, observing: .all).run(inputs: feeds)["y"]).floats
        return (fused, unfused, plan)
    }

    /// torch's `LlamaRMSNorm`: x · rsqrt(mean(x²) + eps) · w, then a residual add.
    func testTorchRMSNormIsOneStepAndMatchesTheFormula() throws {
        let b = ProgramBuilder()
        let row: MILType = .tensor(.fp32, [1, s, d]), one: MILType = .tensor(.fp32, [1, s, 1])
        let x = b.input("x", row)
        let w = b.const("w", floats: (0..<d).map { 0.5 + Float($0) / 8 }, shape: [d])
        let sq = b.apply("mul", ["x": x, "y": x], row)
        let ms = b.apply("reduce_mean", ["x": sq, "axes": b.const("ax", ints: [-1], shape: [1]), "keep_dims": b.const("kd", bools: [true], shape: [])], one)
        let me = b.apply("add", ["x": ms, "y": b.const("eps", floats: [1e-5], shape: [])], one)
        let r = b.apply("rsqrt", ["x": me], one)
        let n = b.apply("mul", ["x": x, "y": r], row)
        let y = b.apply("mul", ["x": n, "y": w], row, name: "y")
        let f = b.function(outputs: [y])
        let feeds = inputs(f, seed: 7)
        let (fused, unfused, plan) = try runBoth(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(plan.root.steps.filter { !$0.isConstant }.count, 1, "the six ops run as one step")
        XCTAssertEqual(fused, unfused, "bit-identical to the ops run one by one")
        let xv = feeds["x"]!.floats
        for i in 0..<s {
            let row = xv[(i * d)..<((i + 1) * d)].map(Double.init)
            let inv = 1 / ((row.reduce(0) { $0 + $1 * $1 } / Double(d)) + 1e-5).squareRoot()
            for j in 0..<d {
                XCTAssertEqual(Double(fused[i * d + j]), row[j] * inv * (0.5 + Double(j) / 8), accuracy: 1e-6)
            }
        }
    }

    /// The fp16-safe form (scaled by max|x|: abs, reduce_max, clip, real_div, inverse), the
    /// value every unary op of the table touches; and a rotate-half RoPE's `x·cos + r·sin`
    /// over query heads with cos / sin broadcast from one head.
    func testScaledRMSNormAndBroadcastHeads() throws {
        let b = ProgramBuilder()
        let row: MILType = .tensor(.fp32, [1, s, d]), one: MILType = .tensor(.fp32, [1, s, 1])
        let x = b.input("x", row)
        let ax = b.const("ax", ints: [-1], shape: [1]), kd = b.const("kd", bools: [true], shape: [])
        let m = b.apply("reduce_max", ["x": b.apply("abs", ["x": x], row), "axes": ax, "keep_dims": kd], one)
        let c = b.apply("clip", ["x": m, "alpha": b.const("lo", floats: [1e-4], shape: []), "beta": b.const("hi", floats: [.infinity], shape: [])], one)
        let yv = b.apply("real_div", ["x": x, "y": c], row)
        let ms = b.apply("reduce_mean", ["x": b.apply("square", ["x": yv], row), "axes": ax, "keep_dims": kd], one)
        let e = b.apply("real_div", ["x": b.apply("inverse", ["x": c, "epsilon": b.const("ie", floats: [1e-6], shape: [])], one), "y": c], one)
        let r = b.apply("rsqrt", ["x": b.apply("add", ["x": ms, "y": e], one)], one)
        let y = b.apply("sqrt", ["x": b.apply("abs", ["x": b.apply("mul", ["x": yv, "y": r], row)], row)], row, name: "y")
        let f = b.function(outputs: [y])
        let feeds = inputs(f, seed: 11)
        let (fused, unfused, plan) = try runBoth(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(fused, unfused)
        let xv = feeds["x"]!.floats.map(Double.init)
        for i in 0..<s {
            let rowv = Array(xv[(i * d)..<((i + 1) * d)])
            let cm = max(rowv.map(abs).max()!, Double(Float(1e-4)))
            let yr = rowv.map { $0 / cm }
            let ms = yr.reduce(0) { $0 + $1 * $1 } / Double(d)
            let rr = 1 / (ms + (1 / (cm + Double(Float(1e-6)))) / cm + Double(Float(1e-12))).squareRoot()
            for j in 0..<d { XCTAssertEqual(Double(fused[i * d + j]), abs(yr[j] * rr).squareRoot(), accuracy: 1e-6) }
        }

        // RoPE: q [1, 2, S, D] · cos [1, 1, S, D] + rot [1, 2, S, D] · sin [1, 1, S, D].
        let h = 2
        let b2 = ProgramBuilder()
        let qt: MILType = .tensor(.fp32, [1, h, s, d]), ct: MILType = .tensor(.fp32, [1, 1, s, d])
        let q = b2.input("q", qt), rot = b2.input("rot", qt), cos = b2.input("cos", ct), sin = b2.input("sin", ct)
        let out = b2.apply("add", ["x": b2.apply("mul", ["x": q, "y": cos], qt), "y": b2.apply("mul", ["x": rot, "y": sin], qt)], qt, name: "y")
        let f2 = b2.function(outputs: [out])
        let feeds2 = inputs(f2, seed: 5)
        let (fused2, unfused2, plan2) = try runBoth(f2, feeds2)
        XCTAssertEqual(plan2.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(fused2, unfused2)
        let (qv, rv, cv, sv) = (feeds2["q"]!.floats, feeds2["rot"]!.floats, feeds2["cos"]!.floats, feeds2["sin"]!.floats)
        for hh in 0..<h {
            for i in 0..<(s * d) {
                let k = hh * s * d + i
                XCTAssertEqual(Double(fused2[k]), Double(qv[k]) * Double(cv[i]) + Double(rv[k]) * Double(sv[i]), accuracy: 1e-6)
            }
        }
        XCTAssertEqual(plan2.fusionSites.first { $0.kind == RowwiseFusion.kind }?.fusedCalls, 1)
    }

    /// transformers' rotate-half RoPE as coremltools writes it: `x[..., D/2:]` and `x[..., :D/2]`
    /// by `slice_by_index` (masks, a negative begin), the first negated (`mul` by −1), `concat` on
    /// the last axis, then `x·cos + rot·sin` with cos / sin of one head for every query head:
    /// one step.
    func testRotateHalfRoPEIsOneStep() throws {
        let h = 2, half = d / 2
        let b = ProgramBuilder()
        let qt: MILType = .tensor(.fp32, [1, h, s, d]), ht: MILType = .tensor(.fp32, [1, h, s, half]), ct: MILType = .tensor(.fp32, [1, 1, s, d])
        let q = b.input("q", qt), cos = b.input("cos", ct), sin = b.input("sin", ct)
        let hi = b.apply("slice_by_index", ["x": q, "begin": b.const("b1", ints: [0, 0, 0, -Int32(half)], shape: [4]),
                                            "end": b.const("e1", ints: [1, Int32(h), 0, 0], shape: [4]),
                                            "end_mask": b.const("m1", bools: [true, true, true, true], shape: [4])], ht)
        let lo = b.apply("slice_by_index", ["x": q, "begin": b.const("b2", ints: [0, 0, 0, 0], shape: [4]),
                                            "end": b.const("e2", ints: [1, Int32(h), 0, Int32(half)], shape: [4]),
                                            "end_mask": b.const("m2", bools: [true, true, true, false], shape: [4])], ht)
        let neg = b.apply("mul", ["x": hi, "y": b.const("m", floats: [-1], shape: [])], ht)
        let rot = b.apply("concat", ["axis": b.const("ax", ints: [-1], shape: []), "interleave": b.const("il", bools: [false], shape: [])],
                          qt, variadic: ["values": [neg, lo]])
        let y = b.apply("add", ["x": b.apply("mul", ["x": q, "y": cos], qt), "y": b.apply("mul", ["x": rot, "y": sin], qt)], qt, name: "y")
        let f = b.function(outputs: [y])
        let feeds = inputs(f, seed: 13)
        let (fused, unfused, plan) = try runBoth(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(plan.root.steps.filter { !$0.isConstant }.count, 1, "slices, negation, concat and the products: one step")
        XCTAssertEqual(fused, unfused)
        let (qv, cv, sv) = (feeds["q"]!.floats.map(Double.init), feeds["cos"]!.floats.map(Double.init), feeds["sin"]!.floats.map(Double.init))
        for hh in 0..<h {
            for i in 0..<s {
                for j in 0..<d {
                    let base = (hh * s + i) * d
                    let r = j < half ? -qv[base + j + half] : qv[base + j - half]
                    XCTAssertEqual(Double(fused[base + j]), qv[base + j] * cv[i * d + j] + r * sv[i * d + j], accuracy: 1e-6)
                }
            }
        }
    }

    /// No rows (a zero-length sequence) and NaN / ±inf values: the same outputs as the ops run
    /// one by one (an empty tensor of the graph's shape; NaN through `clip`, `maximum` and the
    /// row max as the kernels propagate it).
    func testEmptyRowsAndNonFiniteValues() throws {
        for rows in [0, 2] {
            let b = ProgramBuilder()
            let row: MILType = .tensor(.fp32, [1, rows, d]), one: MILType = .tensor(.fp32, [1, rows, 1])
            let x = b.input("x", row)
            let m = b.apply("reduce_max", ["x": x, "axes": b.const("ax", ints: [-1], shape: [1]), "keep_dims": b.const("kd", bools: [true], shape: [])], one)
            let c = b.apply("clip", ["x": x, "alpha": b.const("lo", floats: [-1], shape: []), "beta": b.const("hi", floats: [1], shape: [])], row)
            let y = b.apply("maximum", ["x": b.apply("sub", ["x": c, "y": m], row), "y": b.const("z", floats: [-0.5], shape: [])], row, name: "y")
            let f = b.function(outputs: [y])
            var xv = (0..<(rows * d)).map { Float($0) / 3 - 2 }
            if rows > 0 { xv[1] = .nan; xv[d + 2] = .infinity; xv[d + 3] = -.infinity }
            let feeds = ["x": Tensor(.fp32, shape: [1, rows, d], floats: xv)]
            let (fused, unfused, plan) = try runBoth(f, feeds)
            XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
            XCTAssertEqual(fused.count, rows * d)
            XCTAssertEqual(fused.map(\.bitPattern), unfused.map(\.bitPattern), "rows \(rows)")
            if rows > 0 {
                XCTAssertTrue(fused[0].isNaN, "a NaN in the row makes its max NaN")
                // Row 1: max is +inf, so clip(x) − inf = −inf, and maximum(−inf, −0.5) = −0.5.
                XCTAssertEqual(fused[d], -0.5)
            }
        }
    }

    /// SwiGLU's `silu(gate) · up` (two ops): one step, through the activation kernels' own
    /// eight-lane `silu` (a row of 8 + 3 values: the padded tail too); x·σ(x) in Double.
    func testSwiGLUIsOneStep() throws {
        let w = 11
        let b = ProgramBuilder()
        let row: MILType = .tensor(.fp32, [1, s, w])
        let gate = b.input("gate", row), up = b.input("up", row)
        let y = b.apply("mul", ["x": b.apply("silu", ["x": gate], row), "y": up], row, name: "y")
        let f = b.function(outputs: [y])
        let feeds = inputs(f, seed: 17)
        let (fused, unfused, plan) = try runBoth(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(fused, unfused)
        let (g, u) = (feeds["gate"]!.floats.map(Double.init), feeds["up"]!.floats.map(Double.init))
        for i in 0..<(s * w) { XCTAssertEqual(Double(fused[i]), g[i] / (1 + Foundation.exp(-g[i])) * u[i], accuracy: 1e-5) }
    }

    /// An operand that is neither rows of the output, a vector, one value a row nor a scalar
    /// ([S, D] against [1, 1, S, D] rows: a rank the program does not index) runs the original
    /// ops, and `--profile` counts the fallback.
    func testOperandOfAnotherRankFallsBackToTheOps() throws {
        let b = ProgramBuilder()
        let row: MILType = .tensor(.fp32, [1, 1, s, d])
        let x = b.input("x", row), z = b.input("z", .tensor(.fp32, [s, d]))
        let a = b.apply("mul", ["x": x, "y": z], row)
        let y = b.apply("sub", ["x": b.apply("abs", ["x": a], row), "y": z], row, name: "y")
        let f = b.function(outputs: [y])
        let feeds = inputs(f, seed: 9)
        let (fused, unfused, plan) = try runBoth(f, feeds)
        XCTAssertEqual(plan.fusions[RowwiseFusion.kind], 1)
        XCTAssertEqual(fused, unfused)
        let (xv, zv) = (feeds["x"]!.floats, feeds["z"]!.floats)
        for i in 0..<(s * d) { XCTAssertEqual(fused[i], abs(xv[i] * zv[i]) - zv[i]) }
        let site = try XCTUnwrap(plan.fusionSites.first { $0.kind == RowwiseFusion.kind })
        XCTAssertEqual(site.fusedCalls, 0)
        XCTAssertEqual(site.fallbacks.values.reduce(0, +), 1)
    }
}
