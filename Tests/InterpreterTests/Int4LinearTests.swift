import CKernels
import GraphIR
@testable import Interpreter
import TestSupport
import XCTest

/// int4 weights kept packed two a byte (`QuantizedGEMM.ntInt4`, CKernels' fk_q4_gemv /
/// fk_q4_dequant) against the plain-loop reference on the same values held one a byte, at every
/// SIMD level, single- and multi-threaded; and the int4 blob of a weight file staying a packed
/// view of the mapping.
final class Int4LinearTests: XCTestCase {
    /// Owns the packed bytes the test buffers view.
    final class Bytes { let storage: UnsafeMutablePointer<UInt8>; init(_ b: [UInt8]) { storage = .allocate(capacity: max(1, b.count)); storage.initialize(from: b, count: b.count) }; deinit { storage.deallocate() } }

    /// int4 values `v` (−8 … 7) packed as MIL packs sub-byte data: value i in bits 4i … 4i+3
    /// (the low nibble of byte i / 2 when i is even), written here bit by bit.
    static func pack(_ v: [Int8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: (v.count + 1) / 2)
        for (i, x) in v.enumerated() {
            let u = UInt8(bitPattern: x) & 0x0F
            for b in 0..<4 where u & (1 << b) != 0 { out[(4 * i + b) / 8] |= 1 << UInt8((4 * i + b) % 8) }
        }
        return out
    }

    /// The same random matrix packed and unpacked (fp32 or fp16 scales, optional offset).
    static func pair(_ rng: inout MMRandom, n: Int, k: Int, scaleShape: [Int], offset: Bool, half: Bool) -> (packed: QuantizedTensor, plain: QuantizedTensor, owner: Bytes) {
        let values = (0..<(n * k)).map { _ in Int8(truncatingIfNeeded: rng.next() >> 60) - 8 }
        let s = scaleShape.reduce(1, *)
        let scales = (0..<s).map { _ in Float(Float16(0.001 + 0.02 * abs(rng.float()))) }
        let offsets: [Float]? = offset ? (0..<s).map { _ in (4 * rng.float()).rounded() } : nil
        let owner = Bytes(pack(values))
        let buffer = Int8Buffer(mapped: UnsafeRawPointer(owner.storage), count: n * k, owner: owner, packedInt4: true)
        let sc: QuantizedTensor.Scales = half ? .half(HalfBuffer(rounding: scales)) : .float(scales)
        let packed = QuantizedTensor(dtype: .fp32, shape: [n, k], buffer: buffer, scales: sc, scaleShape: scaleShape, offset: offsets)
        let plain = QuantizedTensor(dtype: .fp32, shape: [n, k], data: values, scale: scales, scaleShape: scaleShape, offset: offsets)
        return (packed, plain, owner)
    }

    /// (rows, cols, scale shape): blocks of 32 / 64 along the input axis, per-channel, 2-D blocks
    /// (the direct kernel); blocks of 16 and 2 (the panel route); an odd row (unpacked copy).
    static let layouts: [(Int, Int, [Int])] = [
        (40, 64, [40, 2]), (37, 96, [37, 3]), (13, 128, [13, 2]), (21, 64, [21, 1]), (12, 64, [3, 2]),
        (6, 1024, [6, 32]), (70, 576, [70, 18]), (10, 48, [10, 3]), (9, 34, [9, 17]), (7, 35, [7, 7]),
    ]

    func testPackedInt4LinearMatchesReference() throws {
        var rng = MMRandom(seed: 41)
        defer { GEMM.simdLevel = -1; GEMM.parallelGrain = GEMM.defaultParallelGrain }
        for (n, k, ss) in Self.layouts {
            for (offset, half) in [(false, true), (true, false), (false, false)] {
                let (q, plain, owner) = Self.pair(&rng, n: n, k: k, scaleShape: ss, offset: offset, half: half)
                for m in [1, 2, 4, 5, 17] {
                    let lda = k + m % 2
                    let a = rng.floats(m * lda)
                    let bias: [Float]? = m % 2 == 1 ? rng.floats(n) : nil
                    let start = rng.floats(m * n)
                    var want = [Float](repeating: 0, count: m * n)
                    a.withUnsafeBufferPointer { ap in
                        MatmulKernels.withOptionalBase(bias) { bp in
                            want.withUnsafeMutableBufferPointer { cp in
                                QuantizedGEMM.referenceNT(m: m, a: ap.baseAddress!, lda: lda, weight: plain, c: cp.baseAddress!, ldc: n, bias: bp)
                            }
                        }
                    }
                    for level in MatmulKernelTests.levels {
                        GEMM.simdLevel = level
                        for (grain, accumulate) in [(Int.max, false), (1, true)] {
                            GEMM.parallelGrain = grain
                            var got = start
                            try a.withUnsafeBufferPointer { ap in
                                try MatmulKernels.withOptionalBase(bias) { bp in
                                    try got.withUnsafeMutableBufferPointer { cp in
                                        try QuantizedGEMM.nt(m: m, a: ap.baseAddress!, lda: lda, weight: q, c: cp.baseAddress!, ldc: n,
                                                             bias: bp, accumulate: accumulate)
                                    }
                                }
                            }
                            var worst: Float = 0
                            for i in 0..<got.count { worst = max(worst, abs(got[i] - (want[i] + (accumulate ? start[i] : 0))) / (1 + abs(want[i]))) }
                            XCTAssertLessThan(worst, 2e-5 * Float(k),
                                              "level \(level) grain \(grain) \(n)x\(k) scale \(ss) offset \(offset) fp16 scales \(half) m \(m) acc \(accumulate)")
                        }
                    }
                }
                withExtendedLifetime(owner) {}
            }
        }
    }

    /// `--activations int8` on packed int4 weights (`fk_q4_gemv_q8`) at every level against the
    /// Q8_0 reference written in `Q8ActivationTests` (quantized activations, integer block sums,
    /// from the values one a byte), threaded and accumulating; at level 0 also bit-identical to
    /// the int8-weight route on the same values (the same arithmetic in the same order).
    func testPackedInt4Int8ActivationsMatchReference() throws {
        var rng = MMRandom(seed: 43)
        defer { GEMM.simdLevel = -1; GEMM.parallelGrain = GEMM.defaultParallelGrain }
        for (n, k, ss) in Self.layouts where k % 32 == 0 && (k / ss[1]) % 32 == 0 {
            for (offset, half) in [(false, true), (true, false), (true, true)] {
                let (q, plain, owner) = Self.pair(&rng, n: n, k: k, scaleShape: ss, offset: offset, half: half)
                for m in [1, 3, 4, 6] {
                    let lda = k + m % 2
                    var a = rng.floats(m * lda)
                    a[0] = 3.5  // a block maximum on ±127 exactly
                    a[1] = -3.5
                    let bias: [Float]? = m % 2 == 1 ? rng.floats(n) : nil
                    let want = Q8ActivationTests.reference(m: m, a: a, lda: lda, q: plain, bias: bias, qmax: 127)
                    let start = rng.floats(m * n)
                    for level in MatmulKernelTests.levels {
                        GEMM.simdLevel = level
                        for (grain, accumulate) in [(Int.max, false), (1, true)] {
                            GEMM.parallelGrain = grain
                            var got = start
                            try a.withUnsafeBufferPointer { ap in
                                try MatmulKernels.withOptionalBase(bias) { bp in
                                    try got.withUnsafeMutableBufferPointer { cp in
                                        try QuantizedGEMM.nt(m: m, a: ap.baseAddress!, lda: lda, weight: q, c: cp.baseAddress!, ldc: n,
                                                             bias: bp, accumulate: accumulate, activations: .int8)
                                    }
                                }
                            }
                            let tol = 4e-6 * Float(k / 32)
                            for i in 0..<got.count {
                                let w = want[i] + (accumulate ? start[i] : 0)
                                if !(abs(got[i] - w) <= tol * max(1, abs(w))) {
                                    XCTFail("level \(level) \(n)x\(k) scale \(ss) offset \(offset) fp16 \(half) m \(m) acc \(accumulate): element \(i) is \(got[i]), expected \(w)")
                                    break
                                }
                            }
                            if level == 0, !accumulate {
                                var int8Route = [Float](repeating: 0, count: m * n)
                                try a.withUnsafeBufferPointer { ap in
                                    try MatmulKernels.withOptionalBase(bias) { bp in
                                        try int8Route.withUnsafeMutableBufferPointer { cp in
                                            try QuantizedGEMM.nt(m: m, a: ap.baseAddress!, lda: lda, weight: plain, c: cp.baseAddress!, ldc: n,
                                                                 bias: bp, activations: .int8)
                                        }
                                    }
                                }
                                XCTAssertEqual(got, int8Route, "level 0 \(n)x\(k) \(ss) offset \(offset) m \(m): not the int8-weight route's result")
                            }
                        }
                    }
                }
                withExtendedLifetime(owner) {}
            }
        }
    }

    /// An inf or NaN activation under `--activations int8` runs the exact fp32 route (the graph's
    /// own propagation), at every level.
    func testPackedInt4Int8ActivationsNonFinite() throws {
        var rng = MMRandom(seed: 44)
        defer { GEMM.simdLevel = -1 }
        let (q, _, owner) = Self.pair(&rng, n: 9, k: 64, scaleShape: [9, 2], offset: false, half: true)
        var a = rng.floats(64)
        a[5] = .nan
        for level in MatmulKernelTests.levels {
            GEMM.simdLevel = level
            var got = [Float](repeating: 0, count: 9)
            try a.withUnsafeBufferPointer { ap in
                try got.withUnsafeMutableBufferPointer { cp in
                    try QuantizedGEMM.nt(m: 1, a: ap.baseAddress!, lda: 64, weight: q, c: cp.baseAddress!, ldc: 9, activations: .int8)
                }
            }
            XCTAssertTrue(got.allSatisfy { $0.isNaN }, "level \(level): \(got)")
        }
        withExtendedLifetime(owner) {}
    }

    /// Nibble decoding of the packed buffer: every value −8 … 7 in both nibble positions.
    func testPackedBufferValues() {
        let values: [Int8] = (0..<33).map { Int8($0 % 16) - 8 }
        let owner = Bytes(Self.pack(values))
        let b = Int8Buffer(mapped: UnsafeRawPointer(owner.storage), count: values.count, owner: owner, packedInt4: true)
        XCTAssertEqual(b.map { $0 }, values)
        XCTAssertEqual(b.bytes, 17)
        XCTAssertEqual(b.unpacked().map { $0 }, values)
        XCTAssertFalse(b.unpacked().isPackedInt4)
    }

    /// The int4 blobs of the committed Apple-recipe int4 fixture (coremltools 9
    /// `linear_quantize_weights(dtype="int4", per_block 32)`) become packed views of the mapped
    /// weight file (no copy), whose values are what GraphIR's element decoder reads from the
    /// same bytes.
    func testInt4BlobStaysPackedAndMapped() throws {
        let model = try ModelLoader.load(path: Fixtures.repoRoot + "/models-ir/recipes/apple_llama31_int4.mlpackage")
        let f = try XCTUnwrap(model.program.function(named: "main"))
        var checked = 0
        f.body.walk { op in
            guard op.type == "constexpr_blockwise_shift_scale", checked < 3 else { return }
            for input in op.inputs where input.name == "data" {
                for case let .constant(c) in input.operands where c.type.tensorType?.dtype == .int4 {
                    guard case let .int8Blob(shape, b)? = try? ConstConversion.runtimeValue(c) else { return XCTFail("\(op.name): not a blob view") }
                    XCTAssertEqual(shape, c.type.tensorType?.fixedShape)
                    XCTAssertTrue(b.isPackedInt4)
                    XCTAssertTrue(b.isMapped)
                    XCTAssertEqual(b.map { Double($0) }, c.doubles(), op.name)
                    checked += 1
                }
            }
        }
        XCTAssertEqual(checked, 3)
    }
}
