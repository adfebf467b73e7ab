import CKernels
@testable import Interpreter
import XCTest

/// `linear`'s packed constant weights (``PackedWeights``, ``GEMM/ntPacked``): against the
/// Double triple loop at every SIMD level (level 0 has no packed route and uses the weight
/// itself), bit for bit `fk_sgemm_nt` at levels 1 and 2, the same again from the cache (an
/// entry is made), and a weight changed after it was packed is packed anew (its storage is
/// copied on write, so the old entry is never read for it).
final class PackedWeightsTests: XCTestCase {
    /// One plan's pool for the whole test: its packed constants persist across calls.
    let pool = BufferPool()

    /// `ntPacked` inside `pool`, with `w` pinned as the pool does for a plan's constants.
    func product(_ m: Int, _ n: Int, _ k: Int, _ a: [Float], _ w: [Float], _ bias: [Float]?) -> [Float] {
        pool.pin(.tensor(Tensor(shape: [n, k], floats: w)), forRun: false)
        var c = [Float](repeating: .nan, count: m * n)
        pool.installed {
            a.withUnsafeBufferPointer { ap in
                MatmulKernels.withOptionalBase(bias) { bp in
                    c.withUnsafeMutableBufferPointer { GEMM.ntPacked(m: m, n: n, k: k, a: ap.baseAddress!, lda: k, weight: w, c: $0.baseAddress!, ldc: n, bias: bp) }
                }
            }
        }
        return c
    }

    func reference(_ m: Int, _ n: Int, _ k: Int, _ a: [Float], _ w: [Float], _ bias: [Float]?) -> [Float] {
        var c = [Float](repeating: 0, count: m * n)
        a.withUnsafeBufferPointer { ap in
            w.withUnsafeBufferPointer { wp in
                MatmulKernels.withOptionalBase(bias) { bp in
                    c.withUnsafeMutableBufferPointer {
                        GEMM.referenceNT(m: m, n: n, k: k, a: ap.baseAddress!, lda: k, b: wp.baseAddress!, ldb: k, c: $0.baseAddress!, ldc: n, bias: bp)
                    }
                }
            }
        }
        return c
    }

    func testPackedProductsMatchReferenceAtEveryLevel() {
        var rng = MMRandom(seed: 18)
        defer { fk_set_simd_level(-1) }
        // Tails in every dimension, a K beyond one 512-column block, the encoder's shapes.
        for (m, n, k) in [(37, 100, 70), (5, 24, 1), (130, 72, 1100), (128, 384, 384), (3, 64, 16)] {
            let a = rng.floats(m * k), bias = rng.floats(n)
            var w = rng.floats(n * k)
            let want = reference(m, n, k, a, w, bias)
            var atLevel2: [Float]?
            for level in [2, 1, 0] {
                fk_set_simd_level(Int32(level))
                let got = product(m, n, k, a, w, bias)
                if fk_simd_level() == 2 { atLevel2 = got }
                // Levels 1 and 2 share the panels and the order of every sum: the same bits.
                if fk_simd_level() == 1, let l2 = atLevel2, m >= 4, n >= 24 { XCTAssertEqual(got, l2, "m\(m) n\(n) k\(k): level 1 vs 2") }
                for i in 0..<got.count where !(abs(got[i] - want[i]) <= 1e-5 * Float(k + 2) * max(1, abs(want[i]))) {
                    XCTFail("m\(m) n\(n) k\(k) level \(fk_simd_level()): element \(i) is \(got[i]), expected \(want[i])")
                    break
                }
                if fk_simd_level() >= 1 {
                    var direct = [Float](repeating: 0, count: m * n)
                    a.withUnsafeBufferPointer { ap in
                        w.withUnsafeBufferPointer { wp in
                            bias.withUnsafeBufferPointer { bp in
                                direct.withUnsafeMutableBufferPointer { fk_sgemm_nt(m, n, k, ap.baseAddress, k, wp.baseAddress, k, $0.baseAddress, n, bp.baseAddress, 0) }
                            }
                        }
                    }
                    if m >= 4 && n >= 24 { XCTAssertEqual(got, direct, "m\(m) n\(n) k\(k): packed and per-call panels differ") }
                    XCTAssertEqual(product(m, n, k, a, w, bias), got, "m\(m) n\(n) k\(k): second call (cached panels)")
                    XCTAssertNotNil(pool.packedConstant(w, n: n, k: k), "m\(m) n\(n) k\(k): a pinned weight has packed panels")
                    var copy = w
                    copy[0] += 0  // a copy of the storage: not a constant of the plan
                    XCTAssertNil(pool.packedConstant(copy, n: n, k: k), "m\(m) n\(n) k\(k): unpinned storage")
                }
            }
            // A write after packing copies the (shared) storage: the new contents are used.
            fk_set_simd_level(-1)
            w[0] += 1
            w[n * k - 1] -= 2
            let want2 = reference(m, n, k, a, w, bias)
            let got2 = product(m, n, k, a, w, bias)
            for i in 0..<got2.count where !(abs(got2[i] - want2[i]) <= 1e-5 * Float(k + 2) * max(1, abs(want2[i]))) {
                XCTFail("m\(m) n\(n) k\(k) after a write: element \(i) is \(got2[i]), expected \(want2[i])")
                break
            }
        }
    }

    /// fk_sgemm_pack_nt into a buffer only 4-byte aligned (a C caller's malloc + 1 float, a
    /// Swift array): nothing in the header asks for more. Level 2's packing stored its panels
    /// with aligned 64-byte stores and crashed there (SIGSEGV, N = 1, K = 1). The product from
    /// those panels against the Double triple loop.
    func testPackingIntoAnUnalignedBufferAtEveryLevel() {
        var rng = MMRandom(seed: 5)
        defer { fk_set_simd_level(-1) }
        for (m, n, k) in [(4, 1, 1), (5, 33, 31), (7, 24, 17)] {
            let a = rng.floats(m * k), w = rng.floats(n * k)
            let want = reference(m, n, k, a, w, nil)
            for level in [2, 1] {
                fk_set_simd_level(Int32(level))
                let count = Int(fk_sgemm_nt_packed_size(n, k))
                guard count > 0 else { continue }
                let raw = UnsafeMutableRawPointer.allocate(byteCount: (count + 1) * 4, alignment: 64)
                defer { raw.deallocate() }
                let bp = raw.bindMemory(to: Float.self, capacity: count + 1) + 1  // 4 bytes past a 64-byte boundary
                XCTAssertEqual(w.withUnsafeBufferPointer { fk_sgemm_pack_nt(n, k, $0.baseAddress, k, bp) }, 1)
                var c = [Float](repeating: .nan, count: m * n)
                let done = a.withUnsafeBufferPointer { ap in c.withUnsafeMutableBufferPointer { fk_sgemm_nt_packed(m, n, k, ap.baseAddress, k, bp, 0, $0.baseAddress, n, nil, 0) } }
                XCTAssertEqual(done, 1, "m\(m) n\(n) k\(k) level \(level)")
                for i in 0..<c.count where !(abs(c[i] - want[i]) <= 1e-5 * Float(k + 2) * max(1, abs(want[i]))) {
                    XCTFail("m\(m) n\(n) k\(k) level \(fk_simd_level()): element \(i) is \(c[i]), expected \(want[i])")
                    break
                }
            }
        }
    }
}
