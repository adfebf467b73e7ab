import CKernels
@testable import Interpreter
import XCTest

/// The int4 GEMV kernel itself (CKernels' `fk_q4_split` + `fk_q4_gemv`, CKInt4Linear.h) at
/// every SIMD level this machine runs (`GEMM.simdLevel`, i.e. `fk_set_simd_level`), against a
/// plain dequantize-then-multiply loop written here (Double, from the int4 values before
/// packing: no code shared with the kernel).
///
/// The values are chosen so that every product and every partial sum, in any order, is exact
/// in fp32 (activations multiples of 1/8 in [−1, 1], scales powers of two, offsets multiples
/// of 1/2, sums below 2^24 units of the finest product): each level must then return the
/// reference exactly, so one wrong nibble, scale, offset, row or column fails the test. The
/// rounding of ordinary values is covered by `Int4LinearTests` (tolerance).
final class Int4KernelTests: XCTestCase {
    /// One case: N × K weight, blocks of `blockRows` × `blockCols`, M activation rows,
    /// output rows `n0 ..< n0 + count` of the weight.
    struct Case {
        var n: Int, k: Int, blockRows: Int, blockCols: Int
        var offset: Bool, half: Bool
        var m: Int, n0: Int, count: Int
        var bias: Bool, accumulate: Bool
        /// Activations in {−xMax … xMax} / 8.
        var xMax: Int = 8
    }

    static let cases: [Case] = [
        // blocks of 32 (Apple's recipe), 4-row groups plus a tail of 1 … 3 rows
        Case(n: 7, k: 64, blockRows: 1, blockCols: 32, offset: false, half: true, m: 1, n0: 0, count: 7, bias: false, accumulate: false),
        Case(n: 13, k: 1024, blockRows: 1, blockCols: 32, offset: false, half: true, m: 1, n0: 0, count: 13, bias: true, accumulate: false),
        Case(n: 22, k: 2816, blockRows: 1, blockCols: 32, offset: true, half: false, m: 2, n0: 5, count: 14, bias: false, accumulate: true),
        Case(n: 9, k: 96, blockRows: 1, blockCols: 32, offset: true, half: true, m: 4, n0: 1, count: 8, bias: true, accumulate: true),
        // more than 4 activation rows (passes of 4, then the rest)
        Case(n: 11, k: 128, blockRows: 1, blockCols: 32, offset: true, half: false, m: 6, n0: 2, count: 9, bias: true, accumulate: true),
        Case(n: 6, k: 128, blockRows: 1, blockCols: 64, offset: false, half: true, m: 9, n0: 0, count: 6, bias: false, accumulate: false),
        // blocks of several runs (64, 128, the whole row), 2-D blocks
        Case(n: 10, k: 256, blockRows: 1, blockCols: 64, offset: false, half: false, m: 3, n0: 0, count: 10, bias: false, accumulate: false),
        Case(n: 6, k: 512, blockRows: 1, blockCols: 128, offset: true, half: true, m: 1, n0: 2, count: 3, bias: true, accumulate: false),
        Case(n: 5, k: 160, blockRows: 1, blockCols: 160, offset: true, half: false, m: 2, n0: 0, count: 5, bias: false, accumulate: true),
        Case(n: 12, k: 192, blockRows: 4, blockCols: 64, offset: true, half: true, m: 1, n0: 3, count: 9, bias: false, accumulate: false),
        Case(n: 8, k: 64, blockRows: 8, blockCols: 64, offset: false, half: false, m: 2, n0: 0, count: 8, bias: true, accumulate: false),
        // the most blocks a row may have (1024), small activations to keep the sums exact
        Case(n: 5, k: 32768, blockRows: 1, blockCols: 32, offset: false, half: true, m: 1, n0: 0, count: 5, bias: false, accumulate: false, xMax: 1),
    ]

    func testInt4GEMVExactAtEveryLevel() throws {
        var rng = MMRandom(seed: 1313)
        defer { GEMM.simdLevel = -1 }
        for (ci, t) in Self.cases.enumerated() {
            let scaleRows = t.n / t.blockRows, scaleCols = t.k / t.blockCols
            // int4 values, −8 … 7
            let q = (0..<(t.n * t.k)).map { _ in Int(rng.next() >> 60) - 8 }
            let scales = (0..<(scaleRows * scaleCols)).map { _ in Float(1) / Float(1 << (2 + Int(rng.next() >> 61) % 5)) }
            let offsets: [Float]? = t.offset ? (0..<(scaleRows * scaleCols)).map { _ in Float(Int(rng.next() >> 61)) / 2 - 2 } : nil
            let lda = t.k + t.m % 2, ldc = t.count + 3
            let a = (0..<(t.m * lda)).map { _ in Float(Int(rng.next() % UInt64(2 * t.xMax + 1)) - t.xMax) / 8 }
            let bias: [Float]? = t.bias ? (0..<t.count).map { _ in Float(Int(rng.next() % 64) - 32) / 8 } : nil
            let start = (0..<(t.m * ldc)).map { _ in Float(Int(rng.next() % 64) - 32) / 8 }

            // The reference: each weight dequantized, s · (q − o), then the plain product.
            var want = start
            for i in 0..<t.m {
                for j in 0..<t.count {
                    let row = t.n0 + j
                    var s = 0.0
                    for c in 0..<t.k {
                        let si = (row / t.blockRows) * scaleCols + c / t.blockCols
                        let w = Double(scales[si]) * (Double(q[row * t.k + c]) - Double(offsets?[si] ?? 0))
                        s += Double(a[i * lda + c]) * w
                    }
                    if let bias { s += Double(bias[j]) }
                    want[i * ldc + j] = Float(s + (t.accumulate ? Double(start[i * ldc + j]) : 0))
                }
            }

            // MIL's sub-byte packing, written here: value i in the low nibble of byte i / 2 when
            // i is even, the high nibble when odd.
            var packed = [UInt8](repeating: 0, count: t.n * t.k / 2)
            for (i, v) in q.enumerated() { packed[i / 2] |= (UInt8(v & 0xF)) << (4 * UInt8(i % 2)) }
            let halves = scales.map { Float16($0).bitPattern }

            for level in MatmulKernelTests.levels {
                GEMM.simdLevel = level
                var got = start
                packed.withUnsafeBufferPointer { d in
                    scales.withUnsafeBufferPointer { sf in
                        halves.withUnsafeBufferPointer { sh in
                            MatmulKernels.withOptionalBase(offsets) { o in
                                MatmulKernels.withOptionalBase(bias) { b in
                                    var w = fk_q4matrix(data: d.baseAddress!, ld: t.k, scale: t.half ? nil : sf.baseAddress,
                                                        scale_h: t.half ? sh.baseAddress : nil, offset: o,
                                                        block_rows: t.blockRows, block_cols: t.blockCols, scale_ld: scaleCols)
                                    XCTAssertEqual(fk_q4_gemv_fits(&w, t.k), 1, "case \(ci)")
                                    var xs = [Float](repeating: .nan, count: t.m * fk_q4_split_floats(t.k))
                                    fk_q4_split(t.m, t.k, a, lda, &xs)
                                    got.withUnsafeMutableBufferPointer { c in
                                        fk_q4_gemv(t.m, t.count, t.k, xs, &w, t.n0, c.baseAddress!, ldc, b, t.accumulate ? 1 : 0)
                                    }
                                }
                            }
                        }
                    }
                }
                var wrong = 0
                for i in 0..<got.count where got[i] != want[i] { wrong += 1 }
                XCTAssertEqual(wrong, 0, "level \(level) case \(ci) (\(t)): first \(zip(got, want).first { $0 != $1 }.map { "\($0) vs \($1)" } ?? "")")
            }
        }
    }

    /// Dequantize-then-multiply in Double, straight from the block definition (no kernel code):
    /// `Σ_c a[i, c] · s[j, c / blockCols] · (q[j, c] − o[j, c / blockCols])` for [M, K] · [N, K]ᵀ.
    static func dequantizedProduct(m: Int, n: Int, k: Int, a: [Float], q: [Int], scales: [Float], offsets: [Float]?,
                                   blockCols: Int) -> [Double] {
        let scaleCols = k / blockCols
        var want = [Double](repeating: 0, count: m * n)
        for i in 0..<m {
            for j in 0..<n {
                var s = 0.0
                for c in 0..<k {
                    let si = j * scaleCols + c / blockCols
                    s += Double(a[i * k + c]) * (Double(scales[si]) * (Double(q[j * k + c]) - Double(offsets?[si] ?? 0)))
                }
                want[i * n + j] = s
            }
        }
        return want
    }

    /// An inf activation gives what dequantize-then-multiply gives (IEEE: inf · w = ±inf, inf · 0
    /// = NaN, +inf + −inf = NaN; the reference below in Double), at every level: ±inf in the
    /// outputs whose weights at that column are not 0, NaN where one is 0 or where infs of both
    /// signs meet. (Levels 0 and 1 subtracted Σ s · (o + 8) · Σx per row: inf − inf = NaN in
    /// every output.) A NaN activation makes its row NaN; the other rows stay finite.
    func testInt4GEMVNonFiniteActivationsAtEveryLevel() throws {
        var rng = MMRandom(seed: 4242)
        defer { GEMM.simdLevel = -1 }
        for offset in [false, true] {
            let n = 9, k = 128, m = 4, blockCols = 32, scaleCols = k / blockCols
            var q = (0..<(n * k)).map { _ in Int(rng.next() >> 60) - 8 }
            let scales = (0..<(n * scaleCols)).map { _ in Float(1) / Float(1 << (2 + Int(rng.next() >> 61) % 5)) }
            // Offsets (when given) 0 for the first block, so that q = 0 is a weight of 0 there.
            let offsets: [Float]? = offset ? (0..<(n * scaleCols)).map { i in i % scaleCols == 0 ? 0 : 0.5 } : nil
            var a = (0..<(m * k)).map { _ in Float(Int(rng.next() % 17) - 8) / 8 }
            a[0 * k + 3] = .infinity         // row 0: +inf at column 3
            a[1 * k + 70] = -.infinity       // row 1: −inf at column 70 …
            a[1 * k + 5] = .infinity         // … and +inf at column 5
            a[2 * k + 100] = .nan            // row 2: NaN; row 3 finite
            for j in 0..<n { q[j * k + 3] = j % 3 == 0 ? 0 : (j % 2 == 0 ? 5 : -6) }  // weights 0 in rows 0, 3, 6
            for j in 0..<n { q[j * k + 5] = j == 4 ? 0 : 3; q[j * k + 70] = j % 2 == 0 ? 2 : -2 }
            let want = Self.dequantizedProduct(m: m, n: n, k: k, a: a, q: q, scales: scales, offsets: offsets, blockCols: blockCols).map(Float.init)
            XCTAssertTrue(want[0].isNaN && want[1] == -.infinity && want[2] == .infinity, "reference: \(want[0..<3])")
            var packed = [UInt8](repeating: 0, count: n * k / 2)
            for (i, v) in q.enumerated() { packed[i / 2] |= (UInt8(v & 0xF)) << (4 * UInt8(i % 2)) }
            for level in MatmulKernelTests.levels {
                GEMM.simdLevel = level
                var got = [Float](repeating: 0, count: m * n)
                packed.withUnsafeBufferPointer { d in
                    scales.withUnsafeBufferPointer { sf in
                        MatmulKernels.withOptionalBase(offsets) { o in
                            var w = fk_q4matrix(data: d.baseAddress!, ld: k, scale: sf.baseAddress, scale_h: nil, offset: o,
                                                block_rows: 1, block_cols: blockCols, scale_ld: scaleCols)
                            var xs = [Float](repeating: 0, count: m * fk_q4_split_floats(k))
                            fk_q4_split(m, k, a, k, &xs)
                            got.withUnsafeMutableBufferPointer { c in fk_q4_gemv(m, n, k, xs, &w, 0, c.baseAddress!, n, nil, 0) }
                        }
                    }
                }
                for i in 0..<(m * n) {
                    let same = want[i].isNaN ? got[i].isNaN : (want[i].isFinite ? abs(got[i] - want[i]) <= 1e-4 * max(1, abs(want[i])) : got[i] == want[i])
                    XCTAssertTrue(same, "level \(level) offset \(offset) row \(i / n) col \(i % n): \(got[i]) vs \(want[i])")
                }
            }
        }
    }

    /// Activations sharing a large offset, x ≈ 1000 + u (u uniform in [−2, 2)), K = 4096, scales
    /// 0.1 … 0.2, weights of mean 0 (q in −8 … 7 with offsets −0.5, or −7 … 7 and none): outputs up to ~1e5 while
    /// Σ x · (q + 8) per block is ~3e5. A dequantize-then-matmul (Core ML's CPU path:
    /// constexpr_blockwise_shift_scale, then an fp32 matmul) multiplies each dequantized weight
    /// by x; a body that sums x · q per block and subtracts s · o · Σx cancels large terms
    /// (measured: max error 1.3 at level 1 before it dequantized per weight, vs 0.13 at level 0,
    /// 0.02 at level 2). Against a Double dequantize-then-multiply reference here; tolerance
    /// 0.4 (≈ 50 ulp of 1e5, above level 0's sequential fp32 sum). Every (weight rows ×
    /// activation rows) pass shape: M = 1, 2, 3, 4, 5 against 9 rows (groups of 4 and a tail).
    func testInt4GEMVLargeActivationOffsetAtEveryLevel() throws {
        var rng = MMRandom(seed: 9001)
        defer { GEMM.simdLevel = -1 }
        let n = 9, k = 4096, blockCols = 32, scaleCols = k / blockCols
        for (offset, half) in [(true, false), (false, true)] {
            // −8 … 7 less an offset of −0.5, or (no offset) −7 … 7: mean 0
            let q = (0..<(n * k)).map { _ in offset ? Int(rng.next() >> 60) - 8 : Int(rng.next() % 15) - 7 }
            let scales = (0..<(n * scaleCols)).map { _ in Float(Float16(0.1 + 0.1 * Double(rng.next() >> 11) / Double(1 << 53))) }
            let offsets: [Float]? = offset ? [Float](repeating: -0.5, count: n * scaleCols) : nil
            let halves = scales.map { Float16($0).bitPattern }
            var packed = [UInt8](repeating: 0, count: n * k / 2)
            for (i, v) in q.enumerated() { packed[i / 2] |= (UInt8(v & 0xF)) << (4 * UInt8(i % 2)) }
            for m in 1...5 {
                let a = (0..<(m * k)).map { _ in 1000 + 2 * rng.float() }
                let want = Self.dequantizedProduct(m: m, n: n, k: k, a: a, q: q, scales: scales, offsets: offsets, blockCols: blockCols)
                for level in MatmulKernelTests.levels {
                    GEMM.simdLevel = level
                    var got = [Float](repeating: .nan, count: m * n)
                    packed.withUnsafeBufferPointer { d in
                        scales.withUnsafeBufferPointer { sf in
                            halves.withUnsafeBufferPointer { sh in
                                MatmulKernels.withOptionalBase(offsets) { o in
                                    var w = fk_q4matrix(data: d.baseAddress!, ld: k, scale: half ? nil : sf.baseAddress,
                                                        scale_h: half ? sh.baseAddress : nil, offset: o,
                                                        block_rows: 1, block_cols: blockCols, scale_ld: scaleCols)
                                    var xs = [Float](repeating: .nan, count: m * fk_q4_split_floats(k))
                                    fk_q4_split(m, k, a, k, &xs)
                                    got.withUnsafeMutableBufferPointer { c in fk_q4_gemv(m, n, k, xs, &w, 0, c.baseAddress!, n, nil, 0) }
                                }
                            }
                        }
                    }
                    let err = zip(got, want).map { abs(Double($0) - $1) }.max() ?? .nan
                    XCTAssertLessThanOrEqual(err, 0.4, "level \(level) offset \(offset) M \(m): max error \(err), max |y| \(want.map(abs).max()!)")
                }
            }
        }
    }

    /// Shapes the direct kernel must decline (they take the panel route instead).
    func testInt4GEMVFits() {
        let byte: [UInt8] = [0]
        let scale: [Float] = [1]
        byte.withUnsafeBufferPointer { d in
            scale.withUnsafeBufferPointer { s in
                func fits(_ k: Int, ld: Int, blockCols: Int, scaled: Bool = true) -> Bool {
                    var w = fk_q4matrix(data: d.baseAddress!, ld: ld, scale: scaled ? s.baseAddress : nil, scale_h: nil, offset: nil,
                                        block_rows: 1, block_cols: blockCols, scale_ld: 1)
                    return fk_q4_gemv_fits(&w, k) != 0
                }
                XCTAssertTrue(fits(64, ld: 64, blockCols: 32))
                XCTAssertTrue(fits(32768, ld: 32768, blockCols: 32))
                XCTAssertFalse(fits(32800, ld: 32800, blockCols: 32))  // 1025 blocks a row
                XCTAssertFalse(fits(48, ld: 48, blockCols: 16))  // blocks not whole runs
                XCTAssertFalse(fits(80, ld: 80, blockCols: 80))  // K not a multiple of 32
                XCTAssertFalse(fits(64, ld: 63, blockCols: 32))  // rows overlap
                XCTAssertFalse(fits(64, ld: 64, blockCols: 32, scaled: false))  // no scales
            }
        }
    }
}
