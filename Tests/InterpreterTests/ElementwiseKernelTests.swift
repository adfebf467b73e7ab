import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import CKernels
import XCTest

/// Elementwise, activation, reduction and normalization kernels: the numpy/torch vectors of
/// `tools/opvectors_elementwise.py`, plus the broadcasting fast paths against the scalar reference.
final class ElementwiseKernelTests: XCTestCase {
    func testElementwiseVectors() throws { try OpVectors.run(family: "elementwise") }
    func testReductionVectors() throws { try OpVectors.run(family: "reduction") }
    func testNormVectors() throws { try OpVectors.run(family: "norm") }

    /// Cases with a string input (`gelu` mode, `cast` dtype, `output_dtype`), which the .npz
    /// cannot hold: the JSON adds `"strings": {name: value}`.
    func testStringInputVectors() throws { try OpVectors.run(family: "elementwise_strings") }

    /// Every op of OpRegistry's elementwise / activation / reduction / normalization sections
    /// (and `select`) has a kernel.
    func testEveryOpOfTheFamilyHasAKernel() {
        let ops = [
            "add", "sub", "mul", "real_div", "pow", "maximum", "minimum", "floor_div", "mod",
            "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
            "logical_and", "logical_or", "logical_xor", "logical_not",
            "abs", "acos", "asin", "atan", "atanh", "ceil", "cos", "cosh", "erf", "exp", "exp2",
            "floor", "round", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh",
            "rsqrt", "inverse", "log", "clip", "threshold", "cast", "identity", "select",
            "relu", "relu6", "sigmoid", "silu", "softplus", "softsign", "gelu", "elu", "leaky_relu",
            "thresholded_relu", "prelu", "clamped_relu", "sigmoid_hard", "scaled_tanh", "linear_activation",
            "softplus_parametric", "softmax",
            "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1_norm",
            "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square", "reduce_argmax", "reduce_argmin",
            "layer_norm", "instance_norm", "batch_norm", "l2_norm", "local_response_norm",
        ]
        for op in ops {
            XCTAssertNotNil(OpRegistry.schema(op), "\(op) is not in OpRegistry")
            XCTAssertNotNil(KernelRegistry.kernel(for: op), "no kernel for \(op)")
        }
    }

    /// The vectorized exp against Double-precision exp over the whole Float range: relative error
    /// ≤ 3e-7 (a few ulp) for normal results, absolute ≤ 2e-38 where the result is subnormal.
    func testFastExpAccuracy() {
        var worstRel = 0.0, worstAt: Float = 0
        var x: Float = -110
        while x < 90 {
            let got = Double(FastExp.exp(x)), want = Foundation.exp(Double(x))
            if want > Double(Float.greatestFiniteMagnitude) {
                XCTAssertEqual(got, .infinity, "exp(\(x))")
            } else if want < Double(Float.leastNormalMagnitude) {
                XCTAssertLessThanOrEqual(abs(got - want), 2e-38, "exp(\(x))")
            } else {
                let rel = abs(got - want) / want
                if rel > worstRel { worstRel = rel; worstAt = x }
            }
            x += 0.001_731
        }
        XCTAssertLessThanOrEqual(worstRel, 3e-7, "worst at \(worstAt)")
        XCTAssertEqual(FastExp.exp(0), 1)
        XCTAssertEqual(FastExp.exp(-.infinity), 0)
        XCTAssertEqual(FastExp.exp(.infinity), .infinity)
        XCTAssertTrue(FastExp.exp(.nan).isNaN)
        // tanh: relative error against Double tanh.
        var worstTanh = 0.0
        x = -12
        while x < 12 {
            let got = Double(FastExp.tanh8(SIMD8(repeating: x))[0]), want = Foundation.tanh(Double(x))
            if want != 0 { worstTanh = max(worstTanh, abs(got - want) / abs(want)) }
            x += 0.000_913
        }
        XCTAssertLessThanOrEqual(worstTanh, 3e-7)
        let t = FastExp.tanh8(SIMD8(.nan, .infinity, -.infinity, 0, -0.0, 1e-30, 100, -100))
        XCTAssertTrue(t[0].isNaN)
        XCTAssertEqual(Array(t.indices.dropFirst()).map { t[$0] }, [1, -1, 0, 0, 1e-30, 1, -1])
        // Lanes are independent: the SIMD and tail paths agree.
        let v = (0..<19).map { Float($0) * 0.37 - 3 }
        XCTAssertEqual(FastExp.map(v) { FastExp.exp8($0) }, v.map { FastExp.exp($0) })
    }

    /// The gelu EXACT kernel (fk_gelu_erf, at every SIMD level) against Double-precision
    /// `0.5·x·(1 + erf(x/√2))` (libm): error ≤ 4e-7·max(|x|, 1) in absolute terms, and on the
    /// negative tail (1 + erf computed as erfc, no cancellation; `1 + Float(erf)` is all
    /// cancellation below x ≈ −5.5) relative error ≤ 3e-7·(1 + x²) (the rounding of x²/2 in
    /// e^{−x²/2}), down to x = −12.
    func testGeluExactAccuracy() {
        let xs = stride(from: Float(-12), to: 12, by: 0.000_917).map { $0 }
        func check(_ got: [Float], _ what: String) {
            var worstAbs = 0.0, worstTail = 0.0
            for (x, g) in zip(xs, got) {
                let want = 0.5 * Double(x) * Foundation.erfc(-Double(x) / 2.0.squareRoot())
                worstAbs = max(worstAbs, abs(Double(g) - want) / max(1, abs(Double(x))))
                if x < -1 && abs(want) > 1e-30 { worstTail = max(worstTail, abs(Double(g) - want) / abs(want) / (1 + Double(x * x))) }
            }
            XCTAssertLessThanOrEqual(worstAbs, 4e-7, what)
            XCTAssertLessThanOrEqual(worstTail, 3e-7, what)
        }
        defer { fk_set_simd_level(-1) }
        for level in [0, 1, 2] {
            fk_set_simd_level(Int32(level))
            var out = [Float](repeating: 0, count: xs.count)
            xs.withUnsafeBufferPointer { s in out.withUnsafeMutableBufferPointer { fk_gelu_erf(s.baseAddress, $0.baseAddress, xs.count) } }
            check(out, "fk_gelu_erf at level \(fk_simd_level())")
            var special: [Float] = [.nan, .infinity, 0, -0.0, 100, -100, 1]
            special.withUnsafeMutableBufferPointer { fk_gelu_erf($0.baseAddress, $0.baseAddress, 7) }  // in place, a tail
            XCTAssertTrue(special[0].isNaN)
            XCTAssertEqual(Array(special[1...5]), [.infinity, 0, 0, 100, 0])
            XCTAssertEqual(Double(special[6]), 0.5 * (1 + Foundation.erf(1 / 2.0.squareRoot())), accuracy: 1e-7)
        }
    }

    /// fk_softmax_rows at every SIMD level (16 lanes at level 2, 8 below) against Double
    /// `exp(x − max) / Σ` within 4e-6 relative + 1e-6 (a few ulp of exp plus the fp32 row sum):
    /// row lengths around the vector widths, the largest value in the tail, a row of all −inf
    /// (NaN, as torch), a NaN in a row (the whole row NaN), rows `ld` apart with the gap untouched.
    func testSoftmaxRowsEveryLevelMatchesDouble() {
        defer { fk_set_simd_level(-1) }
        for level in [0, 1, 2] {
            fk_set_simd_level(Int32(level))
            for n in [1, 7, 8, 15, 16, 17, 33, 128, 131] {
                let (rows, ld) = (4, n + 3)
                var x = [Float](repeating: 42, count: rows * ld)
                for r in 0..<rows { for c in 0..<n { x[r * ld + c] = Float(sin(Double(r * 31 + c) * 0.7) * 9) } }
                x[ld + n - 1] = 30  // row 1: the largest value last (in the tail when n % 8 != 0)
                for c in 0..<n { x[2 * ld + c] = -.infinity }  // row 2: all −inf
                x[3 * ld + n / 2] = .nan  // row 3: a NaN
                let src = x
                x.withUnsafeMutableBufferPointer { fk_softmax_rows($0.baseAddress, rows, n, ld) }
                for r in [0, 1] {
                    let row = (0..<n).map { Double(src[r * ld + $0]) }
                    let m = row.max()!
                    let e = row.map { Foundation.exp($0 - m) }
                    let total = e.reduce(0, +)
                    for c in 0..<n {
                        XCTAssertEqual(Double(x[r * ld + c]), e[c] / total, accuracy: 4e-6 * e[c] / total + 1e-6, "level \(level) n \(n) row \(r) col \(c)")
                    }
                }
                XCTAssertTrue((0..<n).allSatisfy { x[2 * ld + $0].isNaN }, "level \(level) n \(n): all −inf row")
                XCTAssertTrue((0..<n).allSatisfy { x[3 * ld + $0].isNaN }, "level \(level) n \(n): NaN row")
                for r in 0..<rows { for c in n..<ld { XCTAssertEqual(x[r * ld + c], 42, "level \(level) n \(n): the gap") } }
            }
        }
    }

    /// The gelu (EXACT) and softmax ops split large inputs across cores (chunks of elements,
    /// chunks of rows): tensors big enough to be split give the Double-precision references
    /// (gelu: 0.5·x·erfc(−x/√2) within 4e-7·max(|x|, 1); softmax: exp(x − max) / Σ within
    /// 4e-6 relative + 4e-12: a few ulp of exp plus the fp32 row sum), every chunk boundary
    /// included.
    func testLargeGeluAndSoftmaxSplitAcrossCores() throws {
        let n = 196_613  // not a multiple of the chunk alignment
        let xs = (0..<n).map { Float(sin(Double($0) * 0.37) * 6) }
        let g = try TransformKernelTests.invoke("gelu", ["x": Tensor(.fp32, shape: [n], floats: xs)])[0].floats
        var worst = 0.0
        for (x, y) in zip(xs, g) {
            let want = 0.5 * Double(x) * Foundation.erfc(-Double(x) / 2.0.squareRoot())
            worst = max(worst, abs(Double(y) - want) / max(1, abs(Double(x))))
        }
        XCTAssertLessThanOrEqual(worst, 4e-7)
        let (rows, cols) = (301, 515)
        let ss = (0..<rows * cols).map { Float(sin(Double($0) * 0.11) * 8) }
        let sm = try TransformKernelTests.invoke("softmax", ["x": Tensor(.fp32, shape: [rows, cols], floats: ss)])[0].floats
        var worstRel = 0.0
        for r in 0..<rows {
            let row = ss[(r * cols)..<((r + 1) * cols)].map(Double.init)
            let m = row.max()!
            let e = row.map { Foundation.exp($0 - m) }
            let total = e.reduce(0, +)
            for c in 0..<cols {
                let want = e[c] / total
                worstRel = max(worstRel, abs(Double(sm[r * cols + c]) - want) / (want + 1e-6))
            }
        }
        XCTAssertLessThanOrEqual(worstRel, 4e-6)
    }

    /// layer_norm over the encoder's rows ([300, 384], the last axis, with gamma and beta)
    /// against Double (x − mean)/√(var + eps)·γ + β within 2e-6 (relative to max(|want|, 1)).
    func testEncoderWidthLayerNormMatchesDouble() throws {
        let (rows, n) = (300, 384)
        let xs = (0..<rows * n).map { Float(sin(Double($0) * 0.013) * 3 + Double($0 % 7)) }
        let gamma = (0..<n).map { Float(1 + 0.01 * Double($0 % 13)) }, beta = (0..<n).map { Float(0.1 * Double($0 % 5) - 0.2) }
        let got = try runKernel("layer_norm", ["x": Tensor(.fp32, shape: [rows, n], floats: xs), "axes": Tensor(.int32, shape: [1], ints: [-1]),
                                               "gamma": Tensor(.fp32, shape: [n], floats: gamma), "beta": Tensor(.fp32, shape: [n], floats: beta),
                                               "epsilon": .scalar(1e-5)], out: .fp32).floats
        var worst = 0.0
        for r in 0..<rows {
            let row = xs[(r * n)..<((r + 1) * n)].map(Double.init)
            let mean = row.reduce(0, +) / Double(n)
            let v = row.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(n)
            for i in 0..<n {
                let want = (row[i] - mean) / (v + 1e-5).squareRoot() * Double(gamma[i]) + Double(beta[i])
                worst = max(worst, abs(Double(got[r * n + i]) - want) / max(1, abs(want)))
            }
        }
        XCTAssertLessThanOrEqual(worst, 2e-6)
    }

    // MARK: - broadcasting

    func testBroadcastShapes() throws {
        XCTAssertEqual(try Broadcast.shape([2, 3, 4], [4]), [2, 3, 4])
        XCTAssertEqual(try Broadcast.shape([3, 1], [2, 1, 4]), [2, 3, 4])
        XCTAssertEqual(try Broadcast.shape([], [5]), [5])
        XCTAssertEqual(try Broadcast.shape([2, 0, 3], [1, 3]), [2, 0, 3])
        XCTAssertEqual(try Broadcast.shape([[1], [3, 1], [2, 1, 4]]), [2, 3, 4])
        XCTAssertThrowsError(try Broadcast.shape([2, 3], [4]))
        XCTAssertThrowsError(try Broadcast.shape([0], [2]))
        let plan = BroadcastPlan(out: [2, 8, 5, 16], inputs: [[2, 8, 5, 16], [2, 1, 5, 16]])
        XCTAssertEqual(plan.dims, [2, 8, 80])
        XCTAssertEqual(plan.strides, [[640, 80, 1], [80, 0, 1]])
    }

    /// The fast paths (same shape, scalar, merged-dimension runs) agree exactly with the
    /// per-element reference on random broadcastable shapes, including 0- and 1-sized dims.
    func testBroadcastFastPathsMatchReference() throws {
        var rng = SplitMix64(seed: 42)
        for trial in 0..<600 {
            let (out, shapes) = randomBroadcast(&rng, inputs: 3)
            let sa = shapes[0], sb = shapes[1], sc = shapes[2]
            let a = (0..<sa.reduce(1, *)).map { _ in Float(Int(rng.next() % 2001) - 1000) / 8 }
            let b = (0..<sb.reduce(1, *)).map { _ in Int32(Int(rng.next() % 201) - 100) }
            let c = (0..<sc.reduce(1, *)).map { _ in rng.next() % 2 == 0 }

            let fast = try Broadcast.binary(a, sa, b, sb) { $0 * 3 - Float($1) }
            let ref = try Broadcast.referenceBinary(a, sa, b, sb) { $0 * 3 - Float($1) }
            XCTAssertEqual(fast.shape, ref.shape, "trial \(trial): \(sa) ⊕ \(sb)")
            XCTAssertEqual(fast.data, ref.data, "trial \(trial): \(sa) ⊕ \(sb)")
            XCTAssertEqual(try Broadcast.shape(sa, sb), fast.shape)

            let bf = b.map(Float.init)
            let f2 = try Broadcast.binary(bf, sb, a, sa) { $0 - $1 }
            let r2 = try Broadcast.referenceBinary(bf, sb, a, sa) { $0 - $1 }
            XCTAssertEqual(f2.data, r2.data, "trial \(trial): \(sb) ⊕ \(sa)")

            let f3 = try Broadcast.ternary(c, sc, a, sa, bf, sb) { $0 ? $1 : $2 }
            let r3 = try Broadcast.referenceTernary(c, sc, a, sa, bf, sb) { $0 ? $1 : $2 }
            XCTAssertEqual(f3.shape, out)
            XCTAssertEqual(f3.data, r3.data, "trial \(trial): select \(sc) \(sa) \(sb)")
        }
    }

    /// The `add` / `select` kernels on random shapes against the reference (int32 and float).
    func testKernelsOnRandomShapesMatchReference() throws {
        var rng = SplitMix64(seed: 7)
        for trial in 0..<200 {
            let (_, shapes) = randomBroadcast(&rng, inputs: 2)
            let x = Tensor(.int32, shape: shapes[0], ints: (0..<shapes[0].reduce(1, *)).map { _ in Int32(rng.next() % 100) })
            let y = Tensor(.fp32, shape: shapes[1], floats: (0..<shapes[1].reduce(1, *)).map { _ in Float(rng.next() % 100) / 4 })
            let got = try runKernel("sub", ["x": x, "y": y], out: .fp32)
            let want = try Broadcast.referenceBinary(x.floats, x.shape, y.floats, y.shape) { $0 - $1 }
            XCTAssertEqual(got.shape, want.shape, "trial \(trial)")
            XCTAssertEqual(got.floats, want.data, "trial \(trial)")
            let xi = Tensor(.int32, shape: shapes[1], ints: y.floats.map { Int32($0) })
            let gi = try runKernel("mul", ["x": x, "y": xi], out: .int32)
            XCTAssertEqual(gi.ints, try Broadcast.referenceBinary(x.ints, x.shape, xi.ints, xi.shape) { $0 &* $1 }.data)
        }
    }

    /// Reductions over every axis subset of random shapes: contiguous (in place), non-contiguous
    /// (permuted) and keep_dims layouts agree with a naive Double reference.
    func testReductionLayoutsMatchNaiveReference() throws {
        var rng = SplitMix64(seed: 3)
        for trial in 0..<150 {
            let rank = Int(rng.next() % 4) + 1
            let shape = (0..<rank).map { _ in Int(rng.next() % 4) + 1 }
            let n = shape.reduce(1, *)
            let x = Tensor(.fp32, shape: shape, floats: (0..<n).map { _ in Float(Int(rng.next() % 200) - 100) / 16 })
            let mask = Int(rng.next() % UInt64(1 << rank))
            let axes = (0..<rank).filter { mask & (1 << $0) != 0 }
            let keep = rng.next() % 2 == 0
            let axesT = Tensor(.int32, shape: [axes.count], ints: axes.map { Int32($0 - (rng.next() % 2 == 0 ? rank : 0)) })
            let got = try runKernel("reduce_sum", ["x": x, "axes": axesT, "keep_dims": Tensor(shape: [], bools: [keep])], out: .fp32)
            // Naive: accumulate each element into its output cell.
            let outShape = ReductionKernels.reducedShape(shape, axes, keepDims: true)
            var want = [Double](repeating: 0, count: outShape.reduce(1, *))
            let xs = contiguousStrides(shape), os = contiguousStrides(outShape)
            for i in 0..<n {
                var rem = i, o = 0
                for d in 0..<rank {
                    let c = rem / xs[d]
                    rem %= xs[d]
                    if !axes.contains(d) { o += c * os[d] }
                }
                want[o] += Double(x.floats[i])
            }
            XCTAssertEqual(got.shape, ReductionKernels.reducedShape(shape, axes, keepDims: keep), "trial \(trial)")
            XCTAssertEqual(got.floats, want.map(Float.init), "trial \(trial): \(shape) axes \(axes)")
            let ln = try runKernel("layer_norm", ["x": x, "axes": Tensor(.int32, shape: [axes.count], ints: axes.map(Int32.init)),
                                                  "epsilon": .scalar(1e-5)], out: .fp32)
            XCTAssertEqual(ln.shape, shape)
            XCTAssertFalse(ln.floats.contains { $0.isNaN }, "trial \(trial)")
        }
    }

    // MARK: - helpers

    func runKernel(_ op: String, _ inputs: [String: Tensor], out: DType) throws -> Tensor {
        var values: [String: [RuntimeValue]] = [:]
        var opInputs: [OpInput] = []
        for (name, t) in inputs {
            values[name] = [.tensor(t)]
            opInputs.append(OpInput(name: name, operands: [.value(Value(name: name, type: .tensor(TensorType(t.dtype, fixed: t.shape))))]))
        }
        let o = Op(type: op, inputs: opInputs, outputs: [Value(name: "out", type: .tensor(TensorType(out, [])))])
        let kernel = try XCTUnwrap(KernelRegistry.kernel(for: op))
        return try kernel(KernelInvocation(op: o, precision: .fp32, values: values))[0].dense()
    }

    /// A random output shape (rank 0–4, dims 0–4) and input shapes that broadcast to it.
    func randomBroadcast(_ rng: inout SplitMix64, inputs: Int) -> ([Int], [[Int]]) {
        let rank = Int(rng.next() % 5)
        let out = (0..<rank).map { _ -> Int in
            let r = rng.next() % 10
            return r == 0 ? 0 : (r < 3 ? 1 : Int(rng.next() % 4) + 2)
        }
        var shapes: [[Int]] = []
        for _ in 0..<inputs {
            let drop = rank == 0 ? 0 : Int(rng.next() % UInt64(rank + 1))
            var s = Array(out[drop...])
            for i in s.indices where rng.next() % 3 == 0 { s[i] = 1 }
            shapes.append(s)
        }
        // The broadcast of the inputs may be smaller than `out` where every input has a 1.
        let actual = (try? Broadcast.shape(shapes)) ?? out
        return (actual, shapes)
    }
}


