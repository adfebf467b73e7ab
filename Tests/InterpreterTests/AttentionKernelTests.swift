import CKernels
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// `fk_attention` (C, portable, F16C and AVX-512 bodies) against the Swift reference
/// (`AttentionFusion.reference`): the same bits for fp16 and fp32 K / V, one and several query
/// rows, 1 and 3 query heads per KV head, masks with no / some / every column masked, NaN masks,
/// head sizes with and without a 64-wide block and a scalar tail. Several rows of grouped heads
/// over a shared mask (9 / 3 heads, D 64) run the task-per-(KV head, row) route.
final class AttentionKernelTests: XCTestCase {
    override func tearDown() {
        fk_set_simd_level(-1)
        super.tearDown()
    }

    struct Rand {
        var state: UInt64
        mutating func next() -> Float {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Float(Int64(bitPattern: state >> 11) % 2_000_001 - 1_000_000) / 1_000_000
        }
        mutating func array(_ n: Int, scale: Float = 1) -> [Float] { (0..<n).map { _ in next() * scale } }
    }

    enum MaskKind: CaseIterable { case none, causal, allMasked, allMinusInf, nanRow, nanColumn, perHead }

    /// [1, 1 or H, S, CTX] additive mask of `kind`; rows of query position `pos0 + r`.
    func mask(_ kind: MaskKind, h: Int, s: Int, ctx: Int, pos0: Int) -> ([Float], [Int]) {
        var m = [Float](repeating: 0, count: s * ctx)
        for r in 0..<s {
            for c in 0..<ctx {
                let i = r * ctx + c
                switch kind {
                case .none: m[i] = 0
                case .causal: m[i] = c <= pos0 + r ? 0 : (c % 2 == 0 ? -1e4 : -.infinity)
                case .allMasked: m[i] = c % 3 == 0 ? -1e4 : -2e4
                case .allMinusInf: m[i] = -.infinity
                case .nanRow: m[i] = r == 0 ? .nan : (c <= pos0 + r ? 0 : -1e4)
                case .nanColumn: m[i] = c == 1 ? .nan : (c <= pos0 + r ? -0.5 : -1e4)
                case .perHead: m[i] = 0
                }
            }
        }
        if kind == .perHead {
            var out = [Float]()
            for head in 0..<h { out += m.enumerated().map { i, _ in (i % ctx) <= pos0 + i / ctx + head % 2 ? Float(head) * -0.25 : -1e4 } }
            return (out, [1, h, s, ctx])
        }
        return (m, [1, 1, s, ctx])
    }

    func same(_ a: [Float], _ b: [Float]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern || ($0.isNaN && $1.isNaN) }
    }

    func check(h: Int, kv: Int, s: Int, d: Int, ctx: Int, half: Bool, kind: MaskKind, asState: Bool, seed: UInt64) throws {
        var g = Rand(state: seed)
        let q = g.array(h * s * d, scale: 2)
        var k = g.array(kv * ctx * d, scale: 2), v = g.array(kv * ctx * d)
        if half { Rounding.toHalf(&k); Rounding.toHalf(&v) }
        let (m, mshape) = mask(kind, h: h, s: s, ctx: ctx, pos0: ctx / 2)
        let p = try AttentionFusion.Problem(q: [1, h, s, d], k: [1, kv, ctx, d], v: [1, kv, ctx, d], mask: mshape, rep: h / kv)
        let want = AttentionFusion.reference(p, q: q, k: k, v: v, mask: m, scale: 0.125)
        func operand(_ x: [Float]) throws -> AttentionFusion.KV {
            guard asState else { return .tensor(Tensor(half ? .fp16 : .fp32, shape: [1, kv, ctx, d], floats: x)) }
            let st = try StateBuffer(name: "c", type: TensorType(half ? .fp16 : .fp32, fixed: [1, kv, ctx, d]))
            try st.write(Tensor(.fp32, shape: [1, kv, ctx, d], floats: x))
            return .state(st)
        }
        let got = try AttentionFusion.run(p, q: q, k: operand(k), v: operand(v), mask: m, scale: 0.125)
        let label = "h \(h) kv \(kv) s \(s) d \(d) ctx \(ctx) \(half ? "fp16" : "fp32") \(kind) state \(asState) level \(fk_attention_simd_level()) simd \(fk_simd_level())"
        XCTAssertTrue(same(got, want), "\(label): C kernel differs from the reference; first \(Array(got.prefix(4))) vs \(Array(want.prefix(4)))")
        switch kind {
        case .nanRow: XCTAssertTrue(got[0..<d].allSatisfy(\.isNaN), label)
        // One NaN column in every row: every row is NaN, as the graph's softmax gives.
        case .nanColumn: XCTAssertTrue(got.allSatisfy(\.isNaN), label)
        case .allMinusInf: XCTAssertTrue(got.allSatisfy(\.isNaN), label)
        default: XCTAssertFalse(got.contains { $0.isNaN }, label)
        }
    }

    func testKernelMatchesReference() throws {
        var seed: UInt64 = 1
        for level: Int32 in [0, 1, 2] {
            fk_set_simd_level(level)
            for (h, kv) in [(3, 3), (9, 3)] {
                for s in [1, 4] {
                    for half in [true, false] {
                        for kind in MaskKind.allCases {
                            seed += 1
                            try check(h: h, kv: kv, s: s, d: 64, ctx: 40, half: half, kind: kind, asState: seed % 2 == 0, seed: seed)
                        }
                        for d in [20, 72, 8] {
                            seed += 1
                            try check(h: h, kv: kv, s: s, d: d, ctx: 17, half: half, kind: .causal, asState: true, seed: seed)
                        }
                    }
                }
            }
            // Large enough for the worker pool (H·S ≥ 4 and H·S·CTX·D ≥ 65536).
            try check(h: 9, kv: 3, s: 5, d: 64, ctx: 300, half: true, kind: .causal, asState: true, seed: 99)
            try check(h: 9, kv: 3, s: 5, d: 64, ctx: 300, half: false, kind: .perHead, asState: false, seed: 98)
        }
    }

    /// The decode route (one query row, a mask shared by the heads, D a multiple of 32, enough
    /// K / V rows, more than one thread): the reference's bits for every mask kind, grouped
    /// (9 / 3, 16 / 2 heads), one head per KV head, D 32 / 64 / 128, fp16 and fp32 K / V, at every
    /// SIMD level; and it ran (counted) wherever the pool has a second thread.
    func testDecodeRouteMatchesReference() throws {
        var seed: UInt64 = 500
        let before = fk_attention_decode_calls()
        var eligible = 0
        for level: Int32 in [0, 1, 2] {
            fk_set_simd_level(level)
            for (h, kv, d) in [(9, 3, 64), (16, 2, 128), (4, 4, 32), (6, 1, 64)] {
                for half in [true, false] {
                    for kind in MaskKind.allCases where kind != .perHead {
                        seed += 1
                        try check(h: h, kv: kv, s: 1, d: d, ctx: 203, half: half, kind: kind, asState: seed % 2 == 0, seed: seed)
                        if kind != .allMinusInf { eligible += 1 }
                    }
                }
            }
        }
        if fk_parallel_width() > 1 {
            XCTAssertEqual(fk_attention_decode_calls() - before, eligible, "every eligible call should take the decode route")
        }
    }

    /// The masked columns of a state are never read: a cache whose masked slots hold NaN gives
    /// the same result as one holding zeros there.
    func testMaskedSlotsAreNotRead() throws {
        let (h, kv, s, d, ctx) = (6, 2, 2, 16, 64)
        var g = Rand(state: 7)
        let q = g.array(h * s * d), k = g.array(kv * ctx * d), v = g.array(kv * ctx * d)
        let (m, mshape) = mask(.causal, h: h, s: s, ctx: ctx, pos0: 5)
        let p = try AttentionFusion.Problem(q: [1, h, s, d], k: [1, kv, ctx, d], v: [1, kv, ctx, d], mask: mshape, rep: 3)
        var kn = k, vn = v
        for c in 7..<ctx { for head in 0..<kv { for t in 0..<d { kn[(head * ctx + c) * d + t] = .nan; vn[(head * ctx + c) * d + t] = .nan } } }
        let a = try AttentionFusion.run(p, q: q, k: .tensor(Tensor(.fp32, shape: [1, kv, ctx, d], floats: k)), v: .tensor(Tensor(.fp32, shape: [1, kv, ctx, d], floats: v)), mask: m, scale: 0.25)
        let b = try AttentionFusion.run(p, q: q, k: .tensor(Tensor(.fp32, shape: [1, kv, ctx, d], floats: kn)), v: .tensor(Tensor(.fp32, shape: [1, kv, ctx, d], floats: vn)), mask: m, scale: 0.25)
        XCTAssertTrue(same(a, b))
        XCTAssertFalse(b.contains { $0.isNaN })
    }

    func testShapesThatDoNotFitThrow() {
        func bad(q: [Int], k: [Int], v: [Int], mask: [Int], rep: Int) {
            XCTAssertThrowsError(try AttentionFusion.Problem(q: q, k: k, v: v, mask: mask, rep: rep), "\(q) \(k) \(v) \(mask) \(rep)") {
                XCTAssertTrue($0 is KernelError)
            }
        }
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 1, 1, 8], rep: 2)   // 9 heads ≠ 3 · 2
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 9, 64], mask: [1, 1, 1, 8], rep: 3)   // k ≠ v
        bad(q: [1, 9, 1, 32], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 1, 1, 8], rep: 3)   // D
        bad(q: [1, 9, 2, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 1, 3, 8], rep: 3)   // mask rows
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 3, 1, 8], rep: 3)   // mask heads 3 ≠ 9
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [2, 1, 1, 8], rep: 3)   // mask batch
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [8], rep: 3)
        bad(q: [1, 9, 1, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 1, 1, 8], rep: 0)
        XCTAssertNoThrow(try AttentionFusion.Problem(q: [1, 9, 2, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [9, 2, 8], rep: 3))
        XCTAssertNoThrow(try AttentionFusion.Problem(q: [1, 9, 2, 64], k: [1, 3, 8, 64], v: [1, 3, 8, 64], mask: [1, 8], rep: 3))
    }
}
