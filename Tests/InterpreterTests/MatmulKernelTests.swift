import Foundation
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest
import CKernels

/// linear / matmul / einsum / scaled_dot_product_attention / conv / conv_transpose / pools.
///
/// 1. Each fast kernel (CKernels, every SIMD level the CPU has — AVX-512, AVX2+FMA, portable —
///    single- and multi-threaded) against its scalar Swift reference on random shapes with odd
///    sizes, strides, bias, accumulation and quantized weights with and without offsets, with
///    fp32 and fp16 scales.
/// 2. Vectors from torch / numpy (`tools/opvectors_linalg.py`).
/// 3. `testBenchmarkLinear` prints GFLOP/s when `FORGE_BENCH=1` (not a timed test).
final class MatmulKernelTests: XCTestCase {
    override func tearDown() {
        GEMM.simdLevel = -1
        GEMM.parallelGrain = GEMM.defaultParallelGrain
        super.tearDown()
    }

    // MARK: - vectors

    func testLinalgVectors() throws { try OpVectors.run(family: "linalg") }

    /// Cases with `pad_type` / `equation` strings; arrays in `linalg.npz`.
    func testLinalgStringVectors() throws { try OpVectors.run(family: "linalg_strings", arrays: "linalg") }

    // MARK: - fp32 GEMM vs reference

    /// (m, n, k) with tails in every tile dimension.
    static let shapes: [(Int, Int, Int)] = [
        (1, 1, 1), (1, 7, 5), (1, 33, 70), (2, 9, 17), (3, 13, 8), (4, 3, 8), (5, 7, 9), (7, 11, 13),
        (13, 29, 31), (33, 65, 47), (64, 50, 100), (6, 17, 0), (9, 40, 3), (1, 100, 257),
        (17, 33, 16), (9, 64, 32), (20, 70, 530),
    ]

    /// The SIMD levels this CPU runs, best first (2 AVX-512, 1 AVX2+FMA+F16C, 0 portable).
    static let levels: [Int] = {
        GEMM.simdLevel = -1
        return Array((0...GEMM.simdLevel).reversed())
    }()

    /// Every CKernels level; and, for each, single-threaded and forced multi-threaded.
    func eachConfiguration(_ body: (String) throws -> Void) rethrows {
        for level in Self.levels {
            GEMM.simdLevel = level
            for grain in [Int.max, 1] {
                GEMM.parallelGrain = grain
                try body("level \(GEMM.simdLevel), grain \(grain)")
            }
        }
        GEMM.simdLevel = -1
        GEMM.parallelGrain = GEMM.defaultParallelGrain
    }

    func testSGEMMNTMatchesReference() {
        var rng = MMRandom(seed: 1)
        eachConfiguration { cfg in
            for (m, n, k) in Self.shapes {
                for (strided, withBias, acc) in [(false, false, false), (true, true, false), (true, false, true)] {
                    let lda = k + (strided ? 3 : 0), ldb = k + (strided ? 1 : 0), ldc = n + (strided ? 2 : 0)
                    let a = rng.floats(max(1, m * lda)), b = rng.floats(max(1, n * ldb))
                    let bias: [Float]? = withBias ? rng.floats(n) : nil
                    let c0 = rng.floats(m * ldc)
                    var got = c0, want = c0
                    a.withUnsafeBufferPointer { ap in
                        b.withUnsafeBufferPointer { bp in
                            MatmulKernels.withOptionalBase(bias) { biasp in
                                got.withUnsafeMutableBufferPointer { cp in
                                    GEMM.nt(m: m, n: n, k: k, a: ap.baseAddress!, lda: lda, b: bp.baseAddress!, ldb: ldb,
                                            c: cp.baseAddress!, ldc: ldc, bias: biasp, accumulate: acc)
                                }
                                want.withUnsafeMutableBufferPointer { cp in
                                    GEMM.referenceNT(m: m, n: n, k: k, a: ap.baseAddress!, lda: lda, b: bp.baseAddress!, ldb: ldb,
                                                     c: cp.baseAddress!, ldc: ldc, bias: biasp, accumulate: acc)
                                }
                            }
                        }
                    }
                    assertClose(got, want, tol: 1e-5 * Float(k + 2), "NT \(cfg) m\(m) n\(n) k\(k) strided \(strided) bias \(withBias) acc \(acc)")
                }
            }
        }
    }

    func testSGEMMNNMatchesReference() {
        var rng = MMRandom(seed: 2)
        eachConfiguration { cfg in
            for (m, n, k) in Self.shapes {
                for (strided, withBias, acc) in [(false, false, false), (true, true, false), (true, false, true)] {
                    let lda = k + (strided ? 3 : 0), ldb = n + (strided ? 5 : 0), ldc = n + (strided ? 2 : 0)
                    let a = rng.floats(max(1, m * lda)), b = rng.floats(max(1, k * ldb))
                    let bias: [Float]? = withBias ? rng.floats(n) : nil
                    let c0 = rng.floats(m * ldc)
                    var got = c0, want = c0
                    a.withUnsafeBufferPointer { ap in
                        b.withUnsafeBufferPointer { bp in
                            MatmulKernels.withOptionalBase(bias) { biasp in
                                got.withUnsafeMutableBufferPointer { cp in
                                    GEMM.nn(m: m, n: n, k: k, a: ap.baseAddress!, lda: lda, b: bp.baseAddress!, ldb: ldb,
                                            c: cp.baseAddress!, ldc: ldc, bias: biasp, accumulate: acc)
                                }
                                want.withUnsafeMutableBufferPointer { cp in
                                    GEMM.referenceNN(m: m, n: n, k: k, a: ap.baseAddress!, lda: lda, b: bp.baseAddress!, ldb: ldb,
                                                     c: cp.baseAddress!, ldc: ldc, bias: biasp, accumulate: acc)
                                }
                            }
                        }
                    }
                    assertClose(got, want, tol: 1e-5 * Float(k + 2), "NN \(cfg) m\(m) n\(n) k\(k) strided \(strided) bias \(withBias) acc \(acc)")
                }
            }
        }
    }

    // MARK: - quantized GEMM vs reference

    /// (rows, cols, scale shape) of quantized weights: blocks of 32/16/8/5 along the input
    /// axis, per-channel, per-tensor, blocks along the output axis, 2-D blocks.
    static let qLayouts: [(Int, Int, [Int])] = [
        (40, 64, [40, 2]), (37, 96, [37, 3]), (13, 48, [13, 3]), (11, 40, [11, 5]), (9, 35, [9, 7]),
        (21, 70, [21, 1]), (10, 24, [1, 1]), (12, 24, [3, 24]), (16, 32, [8, 4]), (50, 33, [50, 1]),
        (6, 1040, [6, 130]), (70, 576, [70, 18]), (33, 1088, [33, 17]), (9, 1600, [9, 50]), (19, 80, [19, 5]),
    ]

    func testQuantizedNTMatchesReference() throws {
        var rng = MMRandom(seed: 3)
        try eachConfiguration { cfg in
            for (n, k, ss) in Self.qLayouts {
                for withOffset in [false, true] {
                    let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: withOffset)
                    for m in [1, 2, 3, 4, 7, 30] {
                        let lda = k + (m % 2)
                        let a = rng.floats(m * lda)
                        let bias: [Float]? = m % 3 == 1 ? rng.floats(n) : nil
                        var got = [Float](repeating: 0, count: m * n), want = got
                        try a.withUnsafeBufferPointer { ap in
                            try MatmulKernels.withOptionalBase(bias) { bp in
                                try got.withUnsafeMutableBufferPointer { cp in
                                    try QuantizedGEMM.nt(m: m, a: ap.baseAddress!, lda: lda, weight: q, c: cp.baseAddress!, ldc: n, bias: bp)
                                }
                                want.withUnsafeMutableBufferPointer { cp in
                                    QuantizedGEMM.referenceNT(m: m, a: ap.baseAddress!, lda: lda, weight: q, c: cp.baseAddress!, ldc: n, bias: bp)
                                }
                            }
                        }
                        assertClose(got, want, tol: 2e-5 * Float(k), "qNT \(cfg) \(n)x\(k) scale \(ss) offset \(withOffset) m \(m)")
                    }
                }
            }
        }
    }

    func testQuantizedNNMatchesReference() throws {
        var rng = MMRandom(seed: 4)
        try eachConfiguration { cfg in
            for (k, n, ss) in Self.qLayouts {
                for withOffset in [false, true] {
                    let q = rng.quantized(shape: [k, n], scaleShape: ss, offset: withOffset)
                    for m in [1, 3, 8] {
                        let a = rng.floats(m * k)
                        var got = [Float](repeating: 0, count: m * n), want = got
                        try a.withUnsafeBufferPointer { ap in
                            try got.withUnsafeMutableBufferPointer { cp in
                                try QuantizedGEMM.nn(m: m, a: ap.baseAddress!, lda: k, weight: q, c: cp.baseAddress!, ldc: n)
                            }
                            want.withUnsafeMutableBufferPointer { cp in
                                QuantizedGEMM.referenceNN(m: m, a: ap.baseAddress!, lda: k, weight: q, c: cp.baseAddress!, ldc: n)
                            }
                        }
                        assertClose(got, want, tol: 2e-5 * Float(k), "qNN \(cfg) \(k)x\(n) scale \(ss) offset \(withOffset) m \(m)")
                    }
                }
            }
        }
    }

    // MARK: - C entry points with both scale forms

    /// The `fk_qmatrix` of `q` with fp32 scales, or with its scales as fp16 bits (`scale_h`;
    /// the test scales are fp16-exact, so both describe the same matrix).
    static func withQMatrix<R>(_ q: QuantizedTensor, half: Bool, _ body: (UnsafePointer<fk_qmatrix>) throws -> R) throws -> R {
        let l = try XCTUnwrap(QuantizedGEMM.layout(q))
        let bits = q.scale.map { Float16($0).bitPattern }
        XCTAssertEqual(bits.map { Float(Float16(bitPattern: $0)) }, q.scale, "test scales must be fp16-exact")
        return try q.data.withUnsafeBufferPointer { d in
            try q.scale.withUnsafeBufferPointer { s in
                try bits.withUnsafeBufferPointer { h in
                    try MatmulKernels.withOptionalBase(q.offset) { o in
                        var m = fk_qmatrix(data: d.baseAddress, ld: l.cols, scale: half ? nil : s.baseAddress, offset: o,
                                           block_rows: l.blockRows, block_cols: l.blockCols, scale_ld: l.scaleLD,
                                           scale_h: half ? h.baseAddress : nil)
                        return try body(&m)
                    }
                }
            }
        }
    }

    /// `fk_qgemm_nt` called directly (a row range `n0 ..< n` of W, strided A and C, bias,
    /// accumulation), fp32 and fp16 scales, M = 1 ... 9, at every level.
    func testQuantizedNTEntryPointBothScaleForms() throws {
        var rng = MMRandom(seed: 12)
        for level in Self.levels {
            GEMM.simdLevel = level
            for (n, k, ss) in Self.qLayouts {
                for withOffset in [false, true] {
                    let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: withOffset)
                    for m in [1, 2, 3, 4, 5, 6, 7, 9] {
                        let lda = k + m % 3, ldc = n + 1
                        let a = rng.floats(m * lda)
                        let bias = rng.floats(n)
                        let c0 = rng.floats(m * ldc)
                        var full = [Float](repeating: 0, count: m * n)
                        a.withUnsafeBufferPointer { ap in
                            full.withUnsafeMutableBufferPointer { cp in
                                QuantizedGEMM.referenceNT(m: m, a: ap.baseAddress!, lda: lda, weight: q, c: cp.baseAddress!, ldc: n)
                            }
                        }
                        for half in [false, true] {
                            let acc = (m + (half ? 1 : 0)) % 2 == 1
                            let n0 = m % 3 == 0 ? 0 : min(n - 1, 1 + m % 5)
                            let useBias = m % 2 == 0
                            var got = c0
                            try Self.withQMatrix(q, half: half) { w in
                                a.withUnsafeBufferPointer { ap in
                                    bias.withUnsafeBufferPointer { bp in
                                        got.withUnsafeMutableBufferPointer { cp in
                                            fk_qgemm_nt(m, n - n0, k, ap.baseAddress!, lda, w, n0, cp.baseAddress!, ldc,
                                                        useBias ? bp.baseAddress! + n0 : nil, acc ? 1 : 0)
                                        }
                                    }
                                }
                            }
                            var want = c0
                            for i in 0..<m {
                                for j in 0..<(n - n0) {
                                    let v = full[i * n + n0 + j] + (useBias ? bias[n0 + j] : 0)
                                    want[i * ldc + j] = acc ? c0[i * ldc + j] + v : v
                                }
                            }
                            assertClose(got, want, tol: 2e-5 * Float(k),
                                        "fk_qgemm_nt level \(GEMM.simdLevel) \(n)x\(k) scale \(ss) offset \(withOffset) m \(m) n0 \(n0) fp16 \(half) acc \(acc)")
                        }
                    }
                }
            }
        }
    }

    /// `fk_read_sum` (the bandwidth probe's prefetching read) is the wrapping sum of the words,
    /// whatever the length (a tail short of 8 words, none at all).
    func testReadSumIsTheWrappingSum() {
        var rng = MMRandom(seed: 16)
        for n in [0, 1, 7, 8, 9, 1000, 4099] {
            let words = (0..<n).map { _ in UInt64(bitPattern: Int64(rng.floats(1)[0] * 9.2e18)) }
            let want = words.reduce(0, &+)
            let got = words.withUnsafeBytes { fk_read_sum($0.baseAddress, $0.count) }
            XCTAssertEqual(got, want, "\(n) words")
        }
    }

    /// The prefill route (more activation rows than the decode routes take) gives the same bits
    /// at levels 1 and 2 where level 1 runs its panel route (block_cols and K multiples of 8):
    /// the same 32-row k-major panels and the same sums, so a prefill does not depend on
    /// whether the machine has AVX-512. Skipped below level 2.
    func testQuantizedNTPrefillSameBitsAtLevels1And2() throws {
        guard Self.levels.first ?? 0 >= 2 else { throw XCTSkip("no AVX-512 here") }
        defer { GEMM.simdLevel = -1 }
        var rng = MMRandom(seed: 15)
        var compared = 0
        for (n, k, ss) in Self.qLayouts where k % 8 == 0 && (k / ss[1]) % 8 == 0 {
            for withOffset in [false, true] {
                let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: withOffset)
                for m in [5, 7, 13] {
                    let a = rng.floats(m * k), bias = rng.floats(n), c0 = rng.floats(m * n)
                    var out: [[Float]] = []
                    for level in [1, 2] {
                        GEMM.simdLevel = level
                        var c = c0
                        try Self.withQMatrix(q, half: true) { w in
                            a.withUnsafeBufferPointer { ap in
                                bias.withUnsafeBufferPointer { bp in
                                    c.withUnsafeMutableBufferPointer { cp in
                                        fk_qgemm_nt(m, n, k, ap.baseAddress!, k, w, 0, cp.baseAddress!, n, bp.baseAddress!, 1)
                                    }
                                }
                            }
                        }
                        out.append(c)
                    }
                    XCTAssertEqual(out[0].map(\.bitPattern), out[1].map(\.bitPattern), "\(n)x\(k) scale \(ss) offset \(withOffset) m \(m)")
                    compared += 1
                }
            }
        }
        XCTAssertGreaterThan(compared, 20)
    }

    /// `fk_dequant` of sub-rectangles (aligned and not), fp32 and fp16 scales, every level:
    /// exactly `scale · (q − offset)`.
    func testDequantEntryPointBothScaleForms() throws {
        var rng = MMRandom(seed: 13)
        for level in Self.levels {
            GEMM.simdLevel = level
            for (n, k, ss) in Self.qLayouts {
                for withOffset in [false, true] {
                    let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: withOffset)
                    for (r0, c0) in [(0, 0), (1, 3), (n / 2, k / 2), (0, 32 % k)] {
                        let rows = n - r0, cols = k - c0, ldo = cols + 2
                        for half in [false, true] {
                            var got = [Float](repeating: -7777, count: rows * ldo)  // the gaps stay untouched
                            try Self.withQMatrix(q, half: half) { w in
                                got.withUnsafeMutableBufferPointer { o in fk_dequant(w, r0, rows, c0, cols, o.baseAddress!, ldo) }
                            }
                            var want = got
                            for i in 0..<rows { for c in 0..<cols { want[i * ldo + c] = QuantizedGEMM.referenceValue(q, r0 + i, c0 + c) } }
                            if let i = (0..<got.count).first(where: { got[$0] != want[$0] }) {
                                XCTFail("fk_dequant level \(GEMM.simdLevel) \(n)x\(k) scale \(ss) offset \(withOffset) at (\(r0), \(c0)) fp16 \(half): element \(i) is \(got[i]), expected \(want[i])")
                            }
                        }
                    }
                }
            }
        }
    }

    /// fp16 scale bits outside the usual range (subnormals, the largest half, ±0) widen exactly
    /// at every level (F16C, or the portable conversion at level 0).
    func testFP16ScaleEdgeValues() {
        let bits: [UInt16] = [0x0001, 0x03FF, 0x8200, 0xFBFF, 0x7BFF, 0x3C00, 0x0000, 0x8000, 0x0400, 0x3555, 0xC00F, 0x1234]
        let k = 16 * bits.count
        let data: [Int8] = (0..<k).map { Int8(truncatingIfNeeded: $0 * 37 + 11) }
        for level in Self.levels {
            GEMM.simdLevel = level
            var got = [Float](repeating: 0, count: k)
            data.withUnsafeBufferPointer { d in
                bits.withUnsafeBufferPointer { h in
                    var w = fk_qmatrix(data: d.baseAddress, ld: k, scale: nil, offset: nil, block_rows: 1, block_cols: 16,
                                       scale_ld: bits.count, scale_h: h.baseAddress)
                    got.withUnsafeMutableBufferPointer { o in fk_dequant(&w, 0, 1, 0, k, o.baseAddress!, k) }
                }
            }
            for c in 0..<k {
                let want = Float(data[c]) * Float(Float16(bitPattern: bits[c / 16]))
                XCTAssertEqual(got[c].bitPattern, want.bitPattern, "level \(GEMM.simdLevel) scale bits \(String(bits[c / 16], radix: 16)) q \(data[c])")
            }
        }
    }

    /// `QuantizedGEMM.nt` with `accumulate` (the decode and prefill routes, every level).
    func testQuantizedNTAccumulates() throws {
        var rng = MMRandom(seed: 14)
        try eachConfiguration { cfg in
            for (n, k, ss) in [(70, 576, [70, 18]), (37, 96, [37, 3])] {
                let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: false)
                for m in [1, 3, 4, 12] {
                    let a = rng.floats(m * k), c0 = rng.floats(m * n)
                    var got = c0, want = [Float](repeating: 0, count: m * n)
                    try a.withUnsafeBufferPointer { ap in
                        try got.withUnsafeMutableBufferPointer { cp in
                            try QuantizedGEMM.nt(m: m, a: ap.baseAddress!, lda: k, weight: q, c: cp.baseAddress!, ldc: n, accumulate: true)
                        }
                        want.withUnsafeMutableBufferPointer { cp in
                            QuantizedGEMM.referenceNT(m: m, a: ap.baseAddress!, lda: k, weight: q, c: cp.baseAddress!, ldc: n)
                        }
                    }
                    for i in 0..<want.count { want[i] += c0[i] }
                    assertClose(got, want, tol: 2e-5 * Float(k), "qNT accumulate \(cfg) \(n)x\(k) m \(m)")
                }
            }
        }
    }

    // MARK: - kernels with quantized operands

    /// `linear` on a quantized weight equals `linear` on its fp32 dequantization.
    func testLinearQuantizedWeightMatchesDense() throws {
        var rng = MMRandom(seed: 5)
        for (xShape, n, ss, off) in [([1, 1, 64], 48, [48, 2], false), ([1, 5, 96], 40, [40, 3], true),
                                     ([3, 70], 21, [21, 1], false), ([2, 24], 12, [3, 24], true), ([35], 9, [9, 7], false)] {
            let k = xShape.last!
            let q = rng.quantized(shape: [n, k], scaleShape: ss, offset: off)
            let x = Tensor(.fp32, shape: xShape, floats: rng.floats(xShape.reduce(1, *)))
            let bias = Tensor(.fp32, shape: [n], floats: rng.floats(n))
            let dense = Tensor(.fp32, shape: [n, k], floats: q.dequantize().floats)
            let got = try run("linear", ["x": .tensor(x), "weight": .quantized(q), "bias": .tensor(bias)])
            let want = try run("linear", ["x": .tensor(x), "weight": .tensor(dense), "bias": .tensor(bias)])
            XCTAssertEqual(got.shape, Array(xShape.dropLast()) + [n])
            assertClose(got.floats, want.floats, tol: 2e-5 * Float(k), "linear quantized \(xShape) \(ss)")
        }
    }

    /// `linear` with an fp16 weight read in place (``RuntimeValue/halfBlob``), at every row
    /// count: the GEMV route (≤ 8 rows) and the widened-panel route (more rows, 32 weight rows a
    /// panel, so 70 outputs leave a 6-row tail panel), on one thread and split across threads,
    /// at every SIMD level. Expected: x · Wᵀ + b in Double with W the fp16 values.
    func testLinearHalfWeightEveryRowCount() throws {
        var rng = MMRandom(seed: 77)
        let (n, k) = (70, 100)
        let w = rng.floats(n * k)
        let half = HalfBuffer(rounding: w)
        let wh = (0..<(n * k)).map { Double(half[$0]) }
        let bias = rng.floats(n)
        defer {
            GEMM.simdLevel = -1
            GEMM.parallelGrain = GEMM.defaultParallelGrain
        }
        for m in [1, 8, 9, 40, 130] {
            let xf = rng.floats(m * k), x = Tensor(.fp32, shape: [1, m, k], floats: xf)
            var want = [Float](repeating: 0, count: m * n)
            for i in 0..<m {
                for j in 0..<n {
                    var acc = Double(bias[j])
                    for p in 0..<k { acc += Double(xf[i * k + p]) * wh[j * k + p] }
                    want[i * n + j] = Float(acc)
                }
            }
            for level in Self.levels {
                for grain in [1, GEMM.defaultParallelGrain] {
                    GEMM.simdLevel = level
                    GEMM.parallelGrain = grain
                    let got = try run("linear", ["x": .tensor(x), "weight": .halfBlob([n, k], half), "bias": .tensor(Tensor(.fp32, shape: [n], floats: bias))])
                    XCTAssertEqual(got.shape, [1, m, n])
                    assertClose(got.floats, want, tol: 2e-5 * Float(k), "fp16-weight linear, \(m) rows, level \(level), grain \(grain)")
                }
            }
        }
    }

    /// `matmul` with a quantized `y`, transposed or not, equals the dense product.
    func testMatmulQuantizedYMatchesDense() throws {
        var rng = MMRandom(seed: 6)
        for ty in [false, true] {
            for (ss, off) in [([16, 1], true), ([1, 1], false), ([4, 2], true)] {
                let (k, n) = (32, 16)
                let yShape = ty ? [n, k] : [k, n]
                let scaleShape = ty ? [ss[1] == 1 ? 1 : 2, ss[0] == 1 ? 1 : 16] : ss
                let q = rng.quantized(shape: yShape, scaleShape: scaleShape, offset: off)
                let x = Tensor(.fp32, shape: [2, 3, k], floats: rng.floats(2 * 3 * k))
                let flags: [String: RuntimeValue] = ["transpose_y": .tensor(Tensor(shape: [], bools: [ty]))]
                let got = try run("matmul", ["x": .tensor(x), "y": .quantized(q)].merging(flags) { a, _ in a })
                let want = try run("matmul", ["x": .tensor(x), "y": .tensor(Tensor(.fp32, shape: yShape, floats: q.dequantize().floats))].merging(flags) { a, _ in a })
                XCTAssertEqual(got.shape, [2, 3, n])
                assertClose(got.floats, want.floats, tol: 1e-4, "matmul quantized y ty \(ty) scale \(scaleShape)")
            }
        }
    }

    /// A rank-3 quantized `y` is not a fused layout: it is dequantized, same result.
    func testMatmulQuantizedRank3FallsBack() throws {
        var rng = MMRandom(seed: 11)
        let q = rng.quantized(shape: [2, 8, 6], scaleShape: [2, 1, 3], offset: true)
        let x = Tensor(.fp32, shape: [2, 3, 8], floats: rng.floats(48))
        let got = try run("matmul", ["x": .tensor(x), "y": .quantized(q)])
        let want = try run("matmul", ["x": .tensor(x), "y": .tensor(Tensor(.fp32, shape: [2, 8, 6], floats: q.dequantize().floats))])
        XCTAssertEqual(got.shape, [2, 3, 6])
        assertClose(got.floats, want.floats, tol: 1e-5, "rank-3 quantized y")
    }

    // MARK: - batched kernels against plain loops (threaded paths)

    func testBatchedMatmulBroadcastThreaded() throws {
        var rng = MMRandom(seed: 7)
        for grain in [Int.max, 16] {
            GEMM.parallelGrain = grain
            let x = Tensor(.fp32, shape: [3, 1, 5, 9], floats: rng.floats(3 * 5 * 9))
            let y = Tensor(.fp32, shape: [4, 7, 9], floats: rng.floats(4 * 7 * 9))
            let got = try run("matmul", ["x": .tensor(x), "y": .tensor(y), "transpose_y": .tensor(Tensor(shape: [], bools: [true]))])
            XCTAssertEqual(got.shape, [3, 4, 5, 7])
            var want = [Float](repeating: 0, count: 3 * 4 * 5 * 7)
            let xs = x.floats, ys = y.floats
            for a in 0..<3 { for b in 0..<4 { for i in 0..<5 { for j in 0..<7 {
                var s: Float = 0
                for p in 0..<9 { s += xs[(a * 5 + i) * 9 + p] * ys[(b * 7 + j) * 9 + p] }
                want[((a * 4 + b) * 5 + i) * 7 + j] = s
            } } } }
            assertClose(got.floats, want, tol: 1e-4, "batched matmul grain \(grain)")
        }
    }

    func testAttentionAgainstPlainLoops() throws {
        var rng = MMRandom(seed: 8)
        for grain in [Int.max, 16] {
            GEMM.parallelGrain = grain
            let (b, h, l, s, e, ev) = (2, 3, 5, 19, 12, 7)
            let q = Tensor(.fp32, shape: [b, h, l, e], floats: rng.floats(b * h * l * e))
            let k = Tensor(.fp32, shape: [b, h, s, e], floats: rng.floats(b * h * s * e))
            let v = Tensor(.fp32, shape: [b, h, s, ev], floats: rng.floats(b * h * s * ev))
            // causal-style mask broadcast over batch and heads: row i sees keys 0...i+s-l
            var mask = [Bool](repeating: false, count: l * s)
            for i in 0..<l { for j in 0...(i + s - l) { mask[i * s + j] = true } }
            let got = try run("scaled_dot_product_attention", ["query": .tensor(q), "key": .tensor(k), "value": .tensor(v),
                                                               "attn_mask": .tensor(Tensor(shape: [l, s], bools: mask))])
            XCTAssertEqual(got.shape, [b, h, l, ev])
            var want = [Float](repeating: 0, count: b * h * l * ev)
            let qs = q.floats, ks = k.floats, vs = v.floats
            for bh in 0..<(b * h) {
                for i in 0..<l {
                    var w = [Double](repeating: 0, count: s)
                    for j in 0..<s {
                        var d = 0.0
                        for p in 0..<e { d += Double(qs[(bh * l + i) * e + p]) * Double(ks[(bh * s + j) * e + p]) }
                        w[j] = mask[i * s + j] ? d / Double(e).squareRoot() : -.infinity
                    }
                    let mx = w.max()!
                    let ex = w.map { Foundation.exp($0 - mx) }
                    let sum = ex.reduce(0, +)
                    for c in 0..<ev {
                        var o = 0.0
                        for j in 0..<s { o += ex[j] / sum * Double(vs[(bh * s + j) * ev + c]) }
                        want[(bh * l + i) * ev + c] = Float(o)
                    }
                }
            }
            assertClose(got.floats, want, tol: 1e-5, "sdpa grain \(grain)")
        }
    }

    /// 3-D convolution and pooling (rank-5 inputs) against direct loops.
    func testConv3DAgainstDirectLoops() throws {
        var rng = MMRandom(seed: 9)
        let x = Tensor(.fp32, shape: [1, 2, 4, 5, 6], floats: rng.floats(2 * 4 * 5 * 6))
        let w = Tensor(.fp32, shape: [3, 2, 2, 3, 2], floats: rng.floats(3 * 2 * 2 * 3 * 2))
        let ints = { (v: [Int32]) in RuntimeValue.tensor(Tensor(.int32, shape: [v.count], ints: v)) }
        let got = try run("conv", ["x": .tensor(x), "weight": .tensor(w), "strides": ints([1, 2, 1]),
                                   "pad": ints([1, 0, 0, 1, 1, 1]), "pad_type": .tensor(Tensor(dtype: .string, shape: [], data: .string(["custom"])))])
        // out: D (4+1-2)/1+1 = 4, H (5+1-3)/2+1 = 2, W (6+2-2)/1+1 = 7
        XCTAssertEqual(got.shape, [1, 3, 4, 2, 7])
        let xs = x.floats, ws = w.floats
        var want = [Float](repeating: 0, count: 3 * 4 * 2 * 7)
        for co in 0..<3 { for od in 0..<4 { for oh in 0..<2 { for ow in 0..<7 {
            var s: Float = 0
            for ci in 0..<2 { for kd in 0..<2 { for kh in 0..<3 { for kw in 0..<2 {
                let id = od - 1 + kd, ih = oh * 2 + kh, iw = ow - 1 + kw
                if id < 0 || id >= 4 || ih < 0 || ih >= 5 || iw < 0 || iw >= 6 { continue }
                s += xs[((ci * 4 + id) * 5 + ih) * 6 + iw] * ws[(((co * 2 + ci) * 2 + kd) * 3 + kh) * 2 + kw]
            } } } }
            want[((co * 4 + od) * 2 + oh) * 7 + ow] = s
        } } } }
        assertClose(got.floats, want, tol: 1e-5, "conv3d")

        let mp = try run("max_pool", ["x": .tensor(x), "kernel_sizes": ints([2, 2, 3]), "strides": ints([2, 2, 3]),
                                      "pad_type": .tensor(Tensor(dtype: .string, shape: [], data: .string(["valid"])))])
        XCTAssertEqual(mp.shape, [1, 2, 2, 2, 2])
        var wantMax = [Float](repeating: -.infinity, count: 16)
        for c in 0..<2 { for od in 0..<2 { for oh in 0..<2 { for ow in 0..<2 {
            for kd in 0..<2 { for kh in 0..<2 { for kw in 0..<3 {
                let v = xs[((c * 4 + od * 2 + kd) * 5 + oh * 2 + kh) * 6 + ow * 3 + kw]
                let o = ((c * 2 + od) * 2 + oh) * 2 + ow
                wantMax[o] = max(wantMax[o], v)
            } } }
        } } } }
        XCTAssertEqual(mp.floats, wantMax)
    }

    // MARK: - worker pool

    /// Many back-to-back small jobs, nested jobs, and jobs submitted from several threads at
    /// once (those run inline): every chunk runs exactly once.
    func testWorkerPoolRunsEveryChunkOnce() {
        GEMM.parallelGrain = 1
        let count = 1000
        var hits = [Int32](repeating: 0, count: count)
        for round in 0..<2000 {
            let n = 1 + round % count
            hits.withUnsafeMutableBufferPointer { h in
                let base = h.baseAddress!
                GEMM.parallelChunks(n, align: 1 + round % 7, work: Int.max / 2) { r in
                    for i in r { base[i] += 1 }
                }
            }
        }
        var want = [Int32](repeating: 0, count: count)
        for round in 0..<2000 { for i in 0..<(1 + round % count) { want[i] += 1 } }
        XCTAssertEqual(hits, want)

        // nested: the inner call runs on the calling thread
        var nested = [Int32](repeating: 0, count: 64)
        nested.withUnsafeMutableBufferPointer { h in
            let base = h.baseAddress!
            GEMM.parallelChunks(8, work: Int.max / 2) { outer in
                for o in outer {
                    GEMM.parallelChunks(8, work: Int.max / 2) { inner in for i in inner { base[o * 8 + i] += 1 } }
                }
            }
        }
        XCTAssertEqual(nested, [Int32](repeating: 1, count: 64))

        // concurrent submitters
        let results = UnsafeMutableBufferPointer<Int32>.allocate(capacity: 4 * 256)
        results.initialize(repeating: 0)
        defer { results.deallocate() }
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for _ in 0..<200 {
                GEMM.parallelChunks(256, work: Int.max / 2) { r in for i in r { results[t * 256 + i] += 1 } }
            }
        }
        XCTAssertEqual(Array(results), [Int32](repeating: 200, count: 4 * 256))

        // prefetch hints between jobs (and one still running when the next job starts): the
        // worker stops them, and a job's completion count is not disturbed
        let buffer = [UInt8](repeating: 1, count: 4 << 20)
        var after = [Int32](repeating: 0, count: 97)
        buffer.withUnsafeBytes { b in
            after.withUnsafeMutableBufferPointer { h in
                let base = h.baseAddress!
                for round in 0..<500 {
                    fk_parallel_prefetch(b.baseAddress! + (round % 4) * 4096, b.count - (round % 4) * 4096)
                    if round % 3 == 0 { fk_parallel_prefetch(b.baseAddress, 64) }
                    GEMM.parallelChunks(97, work: Int.max / 2) { r in for i in r { base[i] += 1 } }
                }
            }
        }
        XCTAssertEqual(after, [Int32](repeating: 500, count: 97))

        // A prefetch nobody has claimed yet when the next job is published: its task 0 must not
        // be claimable for the new job's fn (before close_claims in Pool.c, a C loop of 300k
        // rounds ran a task twice, or returned before a task ended, in ~7 % of the rounds).
        var counts = [Int32](repeating: 0, count: 8)
        var badRounds = 0
        buffer.withUnsafeBytes { b in
            counts.withUnsafeMutableBufferPointer { c in
                for _ in 0..<20000 {
                    for i in 0..<8 { c[i] = 0 }
                    fk_parallel_prefetch(b.baseAddress, 1 << 16)
                    fk_parallel_run(8, { ctx, task in
                        ctx!.assumingMemoryBound(to: Int32.self)[task] += 1
                    }, c.baseAddress)
                    if c.contains(where: { $0 != 1 }) { badRounds += 1 }
                }
            }
        }
        XCTAssertEqual(badRounds, 0, "rounds where a task did not run exactly once before fk_parallel_run returned")
        fk_parallel_prefetch(nil, 100)  // no-ops
        fk_parallel_prefetch(buffer, 0)
    }

    // MARK: - benchmark (by hand)

    /// `FORGE_BENCH=1 swift test -c release --filter MatmulKernelTests/testBenchmarkLinear`
    ///
    /// Every case runs at each SIMD level (best first) and on 1 and all threads, interleaved
    /// round by round (the machine may be shared: the best round of each is the least
    /// disturbed one); prints the times and the speed-up of the best level over each other.
    func testBenchmarkLinear() throws {
        guard ProcessInfo.processInfo.environment["FORGE_BENCH"] == "1" else { throw XCTSkip("set FORGE_BENCH=1 to run") }
        var rng = MMRandom(seed: 10)
        let (k, n) = (576, 1536)
        let levels = Self.levels
        let threadModes = GEMM.cores > 1 ? [1, GEMM.cores] : [1]
        print("CKernels levels \(levels), \(GEMM.cores) cores")
        defer {
            GEMM.simdLevel = -1
            GEMM.parallelGrain = GEMM.defaultParallelGrain
        }
        /// Best seconds per (level, threads) of `body` over `rounds` rounds of ≥ `minTime`.
        func measure(rounds: Int, minTime: Double, _ body: () throws -> Void) rethrows -> [[Double]] {
            var best = [[Double]](repeating: [Double](repeating: .infinity, count: threadModes.count), count: levels.count)
            for li in levels.indices {
                GEMM.simdLevel = levels[li]
                try body()  // warm-up
            }
            for _ in 0..<rounds {
                for li in levels.indices {
                    GEMM.simdLevel = levels[li]
                    for ti in threadModes.indices {
                        GEMM.parallelGrain = threadModes[ti] == 1 ? Int.max : GEMM.defaultParallelGrain
                        var iters = 0
                        let start = DispatchTime.now().uptimeNanoseconds
                        var elapsed = 0.0
                        repeat {
                            try body()
                            iters += 1
                            elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                        } while elapsed < minTime
                        best[li][ti] = min(best[li][ti], elapsed / Double(iters))
                    }
                }
            }
            return best
        }
        func report(_ what: String, _ best: [[Double]], flops: Double? = nil, bytes: Double? = nil) {
            for ti in threadModes.indices {
                var line = String(format: "%-46@ %d thr:", what as NSString, threadModes[ti])
                for li in levels.indices {
                    let t = best[li][ti]
                    line += String(format: "  L%d %8.1f µs", levels[li], t * 1e6)
                    if let flops { line += String(format: " %6.1f GFLOP/s", flops / t / 1e9) }
                    if let bytes { line += String(format: " %5.1f GB/s", bytes / t / 1e9) }
                }
                for li in levels.indices.dropFirst() { line += String(format: "  L%d/L%d x%.2f", levels[0], levels[li], best[li][ti] / best[0][ti]) }
                print(line)
            }
        }

        let w = Tensor(.fp32, shape: [n, k], floats: rng.floats(n * k))
        let q = rng.quantized(shape: [n, k], scaleShape: [n, k / 32], offset: false)
        let qOff = rng.quantized(shape: [n, k], scaleShape: [n, k / 32], offset: true)
        let qPerChannel = rng.quantized(shape: [n, k], scaleShape: [n, 1], offset: false)
        for m in [1, 3, 128] {
            let x = Tensor(.fp32, shape: [1, m, k], floats: rng.floats(m * k))
            for (name, weight) in [("fp32", RuntimeValue.tensor(w)), ("int8 block32", .quantized(q)),
                                   ("int8 block32+offset", .quantized(qOff)), ("int8 per-channel", .quantized(qPerChannel))] {
                let inv = invocation("linear", ["x": .tensor(x), "weight": weight])
                let best = try measure(rounds: 15, minTime: 0.02) { _ = try MatmulKernels.linear(inv) }
                report("linear [1,\(m),\(k)]x[\(n),\(k)]ᵀ \(name)", best, flops: 2.0 * Double(m * n * k))
            }
        }
        // Small decode products (k/v projections): worth splitting only with a cheap hand-off.
        for rows in [192, 576] {
            let qs = rng.quantized(shape: [rows, k], scaleShape: [rows, k / 32], offset: false)
            let inv = invocation("linear", ["x": .tensor(Tensor(.fp32, shape: [1, 1, k], floats: rng.floats(k))), "weight": .quantized(qs)])
            let best = try measure(rounds: 15, minTime: 0.02) { _ = try MatmulKernels.linear(inv) }
            report("linear [1,1,\(k)]x[\(rows),\(k)]ᵀ int8 block32", best)
        }
        // Decode-like streaming: weights bigger than the caches (DRAM bandwidth bound).
        let stream = (0..<48).map { _ in rng.quantized(shape: [n, k], scaleShape: [n, k / 32], offset: false) }
        let lmHead = rng.quantized(shape: [49152, k], scaleShape: [49152, k / 32], offset: false)
        let x1 = Tensor(.fp32, shape: [1, 1, k], floats: rng.floats(k))
        for (name, weights) in [("stream 48 distinct 1536x576 int8 (42 MB)", stream), ("stream lm_head 49152x576 int8 (28 MB)", [lmHead])] {
            let invs = weights.map { invocation("linear", ["x": .tensor(x1), "weight": .quantized($0)]) }
            let bytes = Double(weights.map { $0.data.count + 4 * $0.scale.count }.reduce(0, +))
            let best = try measure(rounds: 8, minTime: 0) { for inv in invs { _ = try MatmulKernels.linear(inv) } }
            report(name, best, bytes: bytes)
        }
    }

    // MARK: - helpers

    func invocation(_ op: String, _ values: [String: RuntimeValue], out: DType = .fp32) -> KernelInvocation {
        let inputs = values.keys.sorted().map { name in
            OpInput(name: name, operands: [.value(Value(name: name, type: .tensor(TensorType(.fp32, fixed: []))))])
        }
        let o = Op(type: op, inputs: inputs, outputs: [Value(name: "out", type: .tensor(TensorType(out, [])))],
                   attributes: [Attribute(name: "name", value: .string(op))])
        return KernelInvocation(op: o, precision: .fp32, values: values.mapValues { [$0] })
    }

    func run(_ op: String, _ values: [String: RuntimeValue]) throws -> Tensor {
        let kernel = try XCTUnwrap(KernelRegistry.kernel(for: op))
        return try kernel(invocation(op, values))[0].dense()
    }

    func assertClose(_ got: [Float], _ want: [Float], tol: Float, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        guard got.count == want.count else { return XCTFail("\(what): \(got.count) values, expected \(want.count)", file: file, line: line) }
        for i in 0..<got.count where !(abs(got[i] - want[i]) <= tol * max(1, abs(want[i]))) {
            return XCTFail("\(what): element \(i) is \(got[i]), expected \(want[i])", file: file, line: line)
        }
    }
}

/// Deterministic random numbers for the tests.
struct MMRandom {
    var g: SplitMix64
    init(seed: UInt64) { g = SplitMix64(seed: seed) }
    mutating func next() -> UInt64 { g.next() }
    /// Uniform in [-1, 1).
    mutating func float() -> Float { Float(next() >> 40) / Float(1 << 23) - 1 }
    mutating func floats(_ n: Int) -> [Float] { (0..<n).map { _ in float() } }
    mutating func int8() -> Int8 { Int8(truncatingIfNeeded: next() >> 56) }

    mutating func quantized(shape: [Int], scaleShape: [Int], offset: Bool) -> QuantizedTensor {
        let n = shape.reduce(1, *), s = scaleShape.reduce(1, *)
        return QuantizedTensor(dtype: .fp32, shape: shape, data: (0..<n).map { _ in int8() },
                               // fp16-exact scales: the same matrix with fp32 or fp16 (`scale_h`) scales
                               scale: (0..<s).map { _ in Float(Float16(0.001 + 0.02 * abs(float()))) }, scaleShape: scaleShape,
                               offset: offset ? (0..<s).map { _ in (4 * float()).rounded() } : nil)
    }
}

