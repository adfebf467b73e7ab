import Foundation
import GraphIR
@testable import Interpreter
import XCTest
import CKernels

/// `fk_qgemm_nt_q8` and `fk_qgemm_nt_q16` (int8 / int16 activations × int8 weights, the opt-in
/// `--activations int8|int16` routes) at every SIMD level the CPU has (AVX-512 VNNI, AVX2,
/// portable) against a scalar Swift reference written from the definition (per block of 32,
/// d = max|x| / qmax with qmax = 127 — llama.cpp's Q8_0 — or 32767, q = round-to-nearest-even(x / d);
/// Σ q_x·q_w per block in integers, scaled by s_w·d), and their fallbacks to the exact fp32 route.
final class Q8ActivationTests: XCTestCase {
    typealias Route = (Int, Int, Int, UnsafePointer<Float>?, Int, UnsafePointer<fk_qmatrix>?, Int,
                       UnsafeMutablePointer<Float>?, Int, UnsafePointer<Float>?, Int32) -> Int32
    /// (qmax, the C entry point, the Swift mode): the two integer routes.
    static let routes: [(qmax: Float, fn: Route, mode: ActivationQuantization)] = [
        (127, fk_qgemm_nt_q8, .int8), (32767, fk_qgemm_nt_q16, .int16),
    ]

    override func tearDown() {
        GEMM.simdLevel = -1
        super.tearDown()
    }

    /// Reference of the Q8 (qmax 127) or Q16 (qmax 32767) route: Σ_b Float(Σ q_x·q_w) · (s_w · d)
    /// in Double, − offset terms.
    static func reference(m: Int, a: [Float], lda: Int, q: QuantizedTensor, bias: [Float]?, qmax: Float) -> [Float] {
        let n = q.shape[0], k = q.shape[1], nb = k / 32, blocks = q.blockSizes
        var out = [Float](repeating: 0, count: m * n)
        for i in 0..<m {
            var xq = [Int32](repeating: 0, count: k), xd = [Float](repeating: 0, count: nb)
            for b in 0..<nb {
                let amax = (0..<32).map { abs(a[i * lda + b * 32 + $0]) }.max()!
                let d = amax / qmax, id: Float = amax != 0 ? qmax / amax : 0
                xd[b] = d
                for t in 0..<32 { xq[b * 32 + t] = Int32((a[i * lda + b * 32 + t] * id).rounded(.toNearestOrEven)) }
            }
            for j in 0..<n {
                var s = 0.0
                for b in 0..<nb {
                    var dot: Int32 = 0, qsum: Int32 = 0
                    for t in b * 32..<(b + 1) * 32 {
                        dot += xq[t] * Int32(q.data[j * k + t])
                        qsum += xq[t]
                    }
                    let si = (j / blocks[0]) * q.scaleShape[1] + (b * 32) / blocks[1]
                    let sc = q.scale(at: si) * xd[b]
                    s += Double(Float(dot)) * Double(sc)
                    if let o = q.offset { s -= Double(sc) * Double(o[si]) * Double(qsum) }
                }
                if let bias { s += Double(bias[j]) }
                out[i * n + j] = Float(s)
            }
        }
        return out
    }

    /// (n, k, scale shape): input-axis blocks of 32 and 64, per-channel (one block of K),
    /// output-axis blocks; K from 32 to 1088.
    static let layouts: [(Int, Int, [Int])] = [
        (40, 64, [40, 2]), (37, 96, [37, 3]), (70, 576, [70, 18]), (33, 1088, [33, 17]), (9, 32, [9, 1]),
        (21, 160, [21, 1]), (12, 256, [3, 8]), (5, 1536, [5, 48]),
    ]

    func testMatchesReferenceAtEveryLevel() throws {
        var rng = MMRandom(seed: 81)
        let levels = MatmulKernelTests.levels
        for level in levels {
          GEMM.simdLevel = level
          for route in Self.routes {
            for (n, k, ss) in Self.layouts {
                for withOffset in [false, true] {
                    let r = rng.quantized(shape: [n, k], scaleShape: ss, offset: withOffset)
                    var data = (0..<(n * k)).map { r.data[$0] }
                    data[0] = -128  // the int8 minimum takes part (the AVX2 sign trick must keep it)
                    data[33] = -128
                    let q = QuantizedTensor(dtype: .fp32, shape: [n, k], data: data, scale: r.scale, scaleShape: ss, offset: r.offset)
                    for m in [1, 2, 5] {
                        let lda = k + m % 3
                        var a = rng.floats(m * lda)
                        a[0] = 3.5  // a block max landing exactly on ±qmax
                        a[1] = -3.5
                        let bias: [Float]? = m == 2 ? rng.floats(n) : nil
                        for half in [false, true] {
                            var got = [Float](repeating: 0, count: m * n)
                            var taken: Int32 = -1
                            try MatmulKernelTests.withQMatrix(q, half: half) { w in
                                a.withUnsafeBufferPointer { ap in
                                    got.withUnsafeMutableBufferPointer { cp in
                                        if let bias {
                                            bias.withUnsafeBufferPointer { bp in
                                                taken = route.fn(m, n, k, ap.baseAddress!, lda, w, 0, cp.baseAddress!, n, bp.baseAddress!, 0)
                                            }
                                        } else {
                                            taken = route.fn(m, n, k, ap.baseAddress!, lda, w, 0, cp.baseAddress!, n, nil, 0)
                                        }
                                    }
                                }
                            }
                            XCTAssertEqual(taken, 1, "level \(level) \(route.mode) \(n)x\(k) \(ss): the integer route should be taken")
                            let want = Self.reference(m: m, a: a, lda: lda, q: q, bias: bias, qmax: route.qmax)
                            // fp32 totals summed in another order (8 lanes, then across): a few ulps per block.
                            let tol = 4e-6 * Float(k / 32)
                            for i in 0..<want.count where !(abs(got[i] - want[i]) <= tol * max(1, abs(want[i]))) {
                                XCTFail("level \(level) \(route.mode) \(n)x\(k) scale \(ss) offset \(withOffset) m \(m) fp16 \(half): element \(i) is \(got[i]), expected \(want[i])")
                                break
                            }
                        }
                    }
                }
            }
          }
        }
    }

    /// Each integer route stays close to the exact fp32 product: per block the activation error
    /// is at most d/2 per element, so |Δ| ≤ Σ_b s_w·(d_b/2)·Σ|q_w| (checked against that bound,
    /// plus fp32 rounding for int16, whose bound is ~256× tighter).
    func testErrorWithinQuantizationBound() throws {
      for route in Self.routes {
        var rng = MMRandom(seed: 82)
        let (n, k) = (64, 576)
        let q = rng.quantized(shape: [n, k], scaleShape: [n, k / 32], offset: false)
        let a = rng.floats(k)
        var exact = [Float](repeating: 0, count: n), got = exact
        a.withUnsafeBufferPointer { ap in
            exact.withUnsafeMutableBufferPointer { QuantizedGEMM.referenceNT(m: 1, a: ap.baseAddress!, lda: k, weight: q, c: $0.baseAddress!, ldc: n) }
        }
        try QuantizedGEMM.nt(m: 1, a: a, lda: k, weight: q, c: &got, ldc: n, activations: route.mode)
        var maxRel = 0.0
        for j in 0..<n {
            var bound = 0.0, magnitude = 0.0
            for b in 0..<(k / 32) {
                let d = Double((0..<32).map { abs(a[b * 32 + $0]) }.max()!) / Double(route.qmax)
                let sw = Double(q.scale(at: j * (k / 32) + b))
                bound += sw * d / 2 * (0..<32).map { Double(abs(Int(q.data[j * k + b * 32 + $0]))) }.reduce(0, +)
                magnitude += sw * (0..<32).map { Double(abs(a[b * 32 + $0]) * abs(Float(q.data[j * k + b * 32 + $0]))) }.reduce(0, +)
            }
            // fp32 sums: a few ulps of Σ|terms| on top of the quantization bound.
            XCTAssertLessThanOrEqual(abs(Double(got[j]) - Double(exact[j])), bound * 1.001 + magnitude * 1e-6 + 1e-6,
                                     "\(route.mode) output \(j)")
            maxRel = max(maxRel, abs(Double(got[j]) - Double(exact[j])) / max(1e-3, abs(Double(exact[j]))))
        }
        XCTAssertGreaterThan(maxRel, 0, "the \(route.mode) route should differ from the fp32 one somewhere (else it was not taken)")
      }
    }

    /// Shapes the int8 route does not take (K or the input-axis blocks not multiples of 32), and
    /// a non-finite activation, run the exact fp32 route: same bits as `fk_qgemm_nt`.
    func testFallbacksAreTheExactRoute() throws {
        var rng = MMRandom(seed: 83)
        for level in MatmulKernelTests.levels {
          GEMM.simdLevel = level
          for route in Self.routes {
            for (n, k, ss, poison) in [(10, 48, [10, 3], false), (7, 70, [7, 1], false), (8, 64, [8, 8], false), (9, 64, [9, 2], true)] {
                let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: false)
                var a = rng.floats(k)
                if poison { a[40] = .infinity }
                var got = [Float](repeating: 0, count: n), want = got
                var taken: Int32 = -1
                try MatmulKernelTests.withQMatrix(q, half: true) { w in
                    a.withUnsafeBufferPointer { ap in
                        got.withUnsafeMutableBufferPointer { taken = route.fn(1, n, k, ap.baseAddress!, k, w, 0, $0.baseAddress!, n, nil, 0) }
                        want.withUnsafeMutableBufferPointer { fk_qgemm_nt(1, n, k, ap.baseAddress!, k, w, 0, $0.baseAddress!, n, nil, 0) }
                    }
                }
                XCTAssertEqual(taken, 0, "level \(level) \(route.mode) \(n)x\(k) \(ss) inf \(poison): expected the fp32 fallback")
                XCTAssertEqual(got.map(\.bitPattern), want.map(\.bitPattern), "level \(level) \(route.mode) \(n)x\(k) \(ss) inf \(poison)")
            }
          }
        }
    }
}
