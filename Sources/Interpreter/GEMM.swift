import CKernels
import Foundation

/// fp32 matrix products on row-major buffers with explicit leading dimensions.
///
/// The loops live in the `CKernels` C target (`fk_sgemm_nt` / `fk_sgemm_nn`: float
/// accumulators in register tiles; an AVX-512 8×32 tile, or AVX2+FMA 8-wide tiles, chosen at
/// run time, portable body otherwise): measured on this machine's 2-core AMD EPYC, a Swift
/// `SIMD8<Float>` version of the AVX2 4×3 tile reached 29 GFLOP/s at the default x86-64
/// target against 93 GFLOP/s for the C AVX2 body. The Swift side splits the output across
/// cores (CKernels' worker pool) when the product is big enough and keeps ``referenceNT`` /
/// ``referenceNN``, the plain scalar definitions the fast paths are tested against.
public enum GEMM {
    /// The CKernels body in use: 0 portable, 1 AVX2+FMA+F16C, 2 AVX-512 (F/BW/VL/DQ). Setting it
    /// (tests) forces a level (clamped to what the CPU supports); -1 restores detection.
    static var simdLevel: Int {
        get { Int(fk_simd_level()) }
        set { fk_set_simd_level(Int32(newValue)) }
    }

    /// Threads the products may use (the caller plus CKernels' worker pool, one per extra core;
    /// `FORGE_THREADS` / `--threads` when set).
    public static let cores = max(1, Int(fk_parallel_width()))
    /// Chunks a thread of a matrix-vector product (≤ 4 activation rows, a decode step's
    /// products): 2, not the 4 of bigger products. Measured on a Zen 5 (SmolLM2-135M int8 tg128,
    /// 13 alternating pairs on one binary): 1.04× over 4 (0.93–1.20), where the caller otherwise
    /// waited at the join for the worker's last chunk; prefill kept at 4 (2 was 0.95× pp128).
    /// `FORGE_GEMV_CHUNKS` overrides it (for A/B measurements).
    static let gemvChunksPerThread = max(1, Int(ProcessInfo.processInfo.environment["FORGE_GEMV_CHUNKS"] ?? "") ?? 2)

    /// Chunks a thread for a product of `m` activation rows: ``gemvChunksPerThread`` for a
    /// matrix-vector product (m ≤ 4, the direct GEMV routes), else 4.
    static func chunksPerThread(rows m: Int) -> Int { m <= 4 ? gemvChunksPerThread : 4 }

    /// Multiply-adds per extra thread below which a product stays on the calling thread
    /// (2^14 ≈ 1 µs: handing a chunk to a spinning pool worker costs well under that).
    static let defaultParallelGrain = 1 << 14
    nonisolated(unsafe) static var parallelGrain = defaultParallelGrain

    /// Runs `body` on contiguous chunks of `0..<count` (chunk starts are multiples of
    /// `align`), concurrently when `work` (multiply-adds, or any comparable cost) is big enough.
    ///
    /// Uses CKernels' spinning worker pool (`fk_parallel_run`), not `DispatchQueue.concurrentPerform`:
    /// measured here, waking a dispatch worker took longer than a whole decode-sized product
    /// (1536×576 GEMV ≈ 40 µs), so the second chunk ran serially on the caller.
    static func parallelChunks(_ count: Int, align: Int = 1, work: Int, perThread: Int = 4, _ body: (Range<Int>) -> Void) {
        guard count > 0 else { return }
        let a = max(1, align)
        // Up to `perThread` (4) chunks per thread: when another process holds a core, the threads
        // that do run take the chunks the others cannot (only a chunk already started can stall).
        let chunks = min(cores == 1 ? 1 : max(1, perThread) * cores, (count + a - 1) / a, max(1, work / max(1, parallelGrain)))
        if chunks <= 1 {
            body(0..<count)
            return
        }
        let per = ((count + chunks - 1) / chunks + a - 1) / a * a
        let n = (count + per - 1) / per
        withoutActuallyEscaping(body) { escaping in
            var job = ChunkJob(count: count, per: per, body: escaping)
            withUnsafeMutablePointer(to: &job) { p in
                fk_parallel_run(n, { ctx, task in
                    let job = ctx!.assumingMemoryBound(to: ChunkJob.self)
                    let lo = task * job.pointee.per, hi = min(job.pointee.count, lo + job.pointee.per)
                    if lo < hi { job.pointee.body(lo..<hi) }
                }, UnsafeMutableRawPointer(p))
            }
        }
    }

    private struct ChunkJob {
        let count: Int
        let per: Int
        let body: (Range<Int>) -> Void
    }

    /// `C[m, n] (+)= Σ_k A[m·lda + k] · B[n·ldb + k] (+ bias[n])` — A·Bᵀ ("NT": both operands
    /// contiguous along K; the layout of `linear`'s weight). Splits across cores when
    /// `threaded` and the product is big enough.
    static func nt(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                   c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
                   accumulate: Bool = false, threaded: Bool = true) {
        let acc: Int32 = accumulate ? 1 : 0
        // Column panels: 32 wide (levels 1-2), portable 3 · 4.
        splitProduct(m: m, n: n, k: k, threaded: threaded, wideFrom: 32, columnAlign: simdLevel >= 1 ? 32 : 12, rowAlign: 8) { rows, cols in
            fk_sgemm_nt(rows.count, cols.count, k, a + rows.lowerBound * lda, lda, b + cols.lowerBound * ldb, ldb,
                        c + rows.lowerBound * ldc + cols.lowerBound, ldc, bias.map { $0 + cols.lowerBound }, acc)
        }
    }

    /// The split ``nt`` and ``nn`` share: a wide product (`n ≥ wideFrom` or `n ≥ m`) in chunks
    /// of whole column panels (`rows` all of `0..<m`), else in chunks of rows (`cols` all of
    /// `0..<n`); concurrently when `threaded` and the product is big enough (``parallelChunks``).
    private static func splitProduct(m: Int, n: Int, k: Int, threaded: Bool, wideFrom: Int, columnAlign: Int, rowAlign: Int,
                                     _ body: (_ rows: Range<Int>, _ cols: Range<Int>) -> Void) {
        guard m > 0, n > 0 else { return }
        let work = threaded ? m * n * max(k, 1) : 0
        if n >= wideFrom || n >= m {
            parallelChunks(n, align: columnAlign, work: work) { body(0..<m, $0) }
        } else {
            parallelChunks(m, align: rowAlign, work: work) { body($0, 0..<n) }
        }
    }

    /// Weight rows a panel of ``widenedPanelsNT`` (the fp32 GEMM's 32-column panel width).
    static let widenedPanelRows = 32

    /// `C[m, j] (+)= Σ_p A[m·lda + p] · W[j, p] (+ bias[j])` for a weight `W` [n, k] kept in a
    /// compact form: `widen(j, rows, panel)` writes its rows `j ..< j + rows` as fp32 (`rows × k`,
    /// contiguous) into `panel`, `rowsPer` rows at a time, into a small buffer of each thread's own
    /// (cache-resident; the dense weight never exists), and the fp32 GEMM multiplies each panel.
    /// Output columns in chunks of whole panels across threads; writes every element of C.
    static func widenedPanelsNT(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, c: UnsafeMutablePointer<Float>, ldc: Int,
                                bias: UnsafePointer<Float>?, accumulate: Bool, rowsPer: Int = widenedPanelRows, work: Int,
                                widen: (_ j: Int, _ rows: Int, _ panel: UnsafeMutablePointer<Float>) -> Void) {
        let acc: Int32 = accumulate ? 1 : 0
        parallelChunks(n, align: rowsPer, work: work) { cols in
            let panel = UnsafeMutablePointer<Float>.allocate(capacity: max(1, min(rowsPer, cols.count) * k))
            defer { panel.deallocate() }
            var j = cols.lowerBound
            while j < cols.upperBound {
                let rows = min(rowsPer, cols.upperBound - j)
                widen(j, rows, panel)
                fk_sgemm_nt(m, rows, k, a, lda, panel, k, c + j, ldc, bias.map { $0 + j }, acc)
                j += rows
            }
        }
    }

    /// ``nt`` with B (`n × k`, contiguous) taken from its packed panels when it is a constant of
    /// the running plan (``BufferPool/packedConstant(_:n:k:)``), the level has that route and
    /// the product has rows enough for it (m ≥ 4, n ≥ 24, as `fk_sgemm_nt`'s panel route);
    /// else ``nt`` on `weight`. Chunks of whole 32-column panels.
    static func ntPacked(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, weight: [Float],
                         c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil) {
        guard m > 0, n > 0 else { return }
        MatmulKernels.withBase(weight) { b in
            guard m >= 4, n >= 24, k > 0, simdLevel >= 1, let p = BufferPool.current?.packedConstant(weight, n: n, k: k) else {
                nt(m: m, n: n, k: k, a: a, lda: lda, b: b, ldb: k, c: c, ldc: ldc, bias: bias)
                return
            }
            parallelChunks(n, align: 32, work: m * n * k) { r in
                let j = r.lowerBound, bj = bias.map { $0 + j }
                // 0 only if the level was lowered meanwhile (tests): this chunk from B itself.
                if fk_sgemm_nt_packed(m, r.count, k, a, lda, p.pointer, j, c + j, ldc, bj, 0) == 0 {
                    fk_sgemm_nt(m, r.count, k, a, lda, b + j * k, k, c + j, ldc, bj, 0)
                }
            }
        }
    }

    /// `C[m, n] (+)= Σ_k A[m·lda + k] · B[k·ldb + n] (+ bias[n])` — A·B ("NN").
    static func nn(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                   c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
                   accumulate: Bool = false, threaded: Bool = true) {
        let acc: Int32 = accumulate ? 1 : 0
        splitProduct(m: m, n: n, k: k, threaded: threaded, wideFrom: 64, columnAlign: simdLevel >= 2 ? 32 : 16,
                     rowAlign: simdLevel >= 2 ? 8 : 6) { rows, cols in
            fk_sgemm_nn(rows.count, cols.count, k, a + rows.lowerBound * lda, lda, b + cols.lowerBound, ldb,
                        c + rows.lowerBound * ldc + cols.lowerBound, ldc, bias.map { $0 + cols.lowerBound }, acc)
        }
    }

    // MARK: - scalar references

    /// Plain triple loop of ``nt`` (accumulates in Double).
    static func referenceNT(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                            c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, accumulate: Bool = false) {
        reference(m: m, n: n, k: k, a: a, lda: lda, c: c, ldc: ldc, bias: bias, accumulate: accumulate) { p, j in b[j * ldb + p] }
    }

    /// Plain triple loop of ``nn`` (accumulates in Double).
    static func referenceNN(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, b: UnsafePointer<Float>, ldb: Int,
                            c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, accumulate: Bool = false) {
        reference(m: m, n: n, k: k, a: a, lda: lda, c: c, ldc: ldc, bias: bias, accumulate: accumulate) { p, j in b[p * ldb + j] }
    }

    /// The triple loop of both references; `bAt(p, j)` is B's element at row p, column j of the
    /// product (`k × n`).
    private static func reference(m: Int, n: Int, k: Int, a: UnsafePointer<Float>, lda: Int, c: UnsafeMutablePointer<Float>, ldc: Int,
                                  bias: UnsafePointer<Float>?, accumulate: Bool, _ bAt: (_ p: Int, _ j: Int) -> Float) {
        for i in 0..<m {
            for j in 0..<n {
                var s = 0.0
                for p in 0..<k { s += Double(a[i * lda + p]) * Double(bAt(p, j)) }
                if let bias { s += Double(bias[j]) }
                if accumulate { s += Double(c[i * ldc + j]) }
                c[i * ldc + j] = Float(s)
            }
        }
    }

    // MARK: - layout helpers

    /// `dst[j·rows + i] = src[i·ld + j]` for a `rows × cols` block (out-of-place transpose).
    static func transpose(_ src: UnsafePointer<Float>, rows: Int, cols: Int, ld: Int, into dst: UnsafeMutablePointer<Float>) {
        let t = 32
        var i0 = 0
        while i0 < rows {
            let i1 = min(rows, i0 + t)
            var j0 = 0
            while j0 < cols {
                let j1 = min(cols, j0 + t)
                for i in i0..<i1 {
                    let s = src + i * ld
                    for j in j0..<j1 { dst[j * rows + i] = s[j] }
                }
                j0 = j1
            }
            i0 = i1
        }
    }

    /// Copies the strided view `src[Σ idx[d]·strides[d]]` over `shape` into contiguous `dst`.
    static func stridedCopy<T>(_ src: UnsafePointer<T>, shape: [Int], strides: [Int], into dst: UnsafeMutablePointer<T>) {
        let total = shape.reduce(1, *)
        guard total > 0 else { return }
        guard let inner = shape.last else { dst[0] = src[0]; return }
        let si = strides.last!
        let outer = total / inner
        let r = shape.count - 1
        var idx = [Int](repeating: 0, count: r)
        var base = 0
        var o = 0
        for _ in 0..<outer {
            let s = src + base
            if si == 1 {
                (dst + o).update(from: s, count: inner)
            } else {
                for j in 0..<inner { dst[o + j] = s[j * si] }
            }
            o += inner
            // odometer over the outer dimensions
            var d = r - 1
            while d >= 0 {
                idx[d] += 1
                base += strides[d]
                if idx[d] < shape[d] { break }
                base -= strides[d] * shape[d]
                idx[d] = 0
                d -= 1
            }
        }
    }
}
