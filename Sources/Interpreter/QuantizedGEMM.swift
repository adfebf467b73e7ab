import CKernels

/// Products with a block-quantized weight (``QuantizedTensor``: int8 data, one scale — and
/// optionally one offset — per block), computed on the int8 data with the dequantization
/// fused into the loop; the dense weight is never materialised.
///
/// `fk_qgemm_nt` (CKernels) works like llama.cpp's Q8_0 dot product, but keeps the
/// activations in fp32 (the result is Σ x·(scale·q) accumulated in fp32, as Core ML's CPU
/// path; only the summation order differs). For a few activation rows (decode), each block of
/// int8 weights is widened in registers and dotted with the activations, then scaled once per
/// block (`scale · (Σ x·q − offset · Σ x)`); the AVX-512 body shares each widened weight
/// vector across up to 4 activation rows and prefetches the weight stream into L2. For more
/// rows (prefill), panels of weight rows are dequantized into an L1/L2-sized fp32 buffer and
/// shared by all rows through the fp32 tile kernel. Any 2-D block shape works (blocks along
/// the input axis, along the output axis, per-channel, per-tensor); the direct route needs
/// input-axis blocks of a multiple of 8 (AVX-512: 16), others take the panel route. Scales
/// are fp32 or fp16 (`fk_qmatrix.scale_h`, for callers that keep the fp16 scales of the
/// weight file).
enum QuantizedGEMM {
    /// The fused kernels' view of a rank-2 quantized tensor, or nil when it is not rank 2 or
    /// its scale shape does not tile it.
    static func layout(_ q: QuantizedTensor) -> (rows: Int, cols: Int, blockRows: Int, blockCols: Int, scaleLD: Int)? {
        guard q.shape.count == 2, q.scaleShape.count == 2 else { return nil }
        let (r, c) = (q.shape[0], q.shape[1])
        let (sr, sc) = (q.scaleShape[0], q.scaleShape[1])
        guard sr > 0, sc > 0, r % sr == 0, c % sc == 0, q.data.count == r * c, q.scaleCount == sr * sc else { return nil }
        if let o = q.offset, o.count != q.scaleCount { return nil }
        return (r, c, max(1, r / sr), max(1, c / sc), sc)
    }

    /// Calls `body` with the C descriptor of `q` (valid only inside `body`).
    static func withMatrix<R>(_ q: QuantizedTensor, _ body: (UnsafePointer<fk_qmatrix>) throws -> R) throws -> R {
        guard let l = layout(q) else { throw KernelError("quantized weight of shape \(q.shape) with scale shape \(q.scaleShape) is not a rank-2 block layout") }
        guard !q.data.isPackedInt4 else { return try withMatrix(unpacked(q), body) }
        return try q.data.withUnsafeBufferPointer { d in
            try withScales(q) { scale, half, offset in
                var m = fk_qmatrix(data: d.baseAddress, ld: l.cols, scale: scale, offset: offset,
                                   block_rows: l.blockRows, block_cols: l.blockCols, scale_ld: l.scaleLD, scale_h: half)
                return try body(&m)
            }
        }
    }

    /// Calls `body` with `q`'s block scales — fp32 (`scale`) or fp16 bits (`half`), the other
    /// nil — and its per-block offsets (nil when it has none), valid only inside `body`.
    static func withScales<R>(_ q: QuantizedTensor,
                              _ body: (_ scale: UnsafePointer<Float>?, _ half: UnsafePointer<UInt16>?, _ offset: UnsafePointer<Float>?) throws -> R) throws -> R {
        func offsets(_ scale: UnsafePointer<Float>?, _ half: UnsafePointer<UInt16>?) throws -> R {
            if let off = q.offset { return try off.withUnsafeBufferPointer { try body(scale, half, $0.baseAddress) } }
            return try body(scale, half, nil)
        }
        switch q.scales {
        case let .float(a): return try a.withUnsafeBufferPointer { try offsets($0.baseAddress, nil) }
        case let .half(h): return try h.withUnsafeBufferPointer { try offsets(nil, $0.baseAddress) }
        }
    }

    /// `C[m, j] (+)= Σ_k A[m·lda + k] · W(j, k) (+ bias[j])` for the quantized `W` [n, k]
    /// (the `linear` layout), split across cores along `n` when big enough.
    ///
    /// `activations`: ``ActivationQuantization/int8`` / ``ActivationQuantization/int16``
    /// quantize each row of `A` per block of 32 to int8 (`fk_qgemm_nt_q8`, llama.cpp's Q8_0 ×
    /// Q8_0) or int16 (`fk_qgemm_nt_q16`), the block products summed in int32, when the shape
    /// allows it (K and the input-axis blocks multiples of 32); otherwise, and by default
    /// (``ActivationQuantization/exact``), the activations stay fp32 (Core ML's CPU numerics).
    /// Each thread's chunk quantizes the rows itself (K values, against its N/threads × K products).
    static func nt(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor,
                   c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil,
                   accumulate: Bool = false, threaded: Bool = true, activations: ActivationQuantization = .exact) throws {
        guard let l = layout(q) else { throw KernelError("quantized weight layout \(q.shape) / \(q.scaleShape) not supported") }
        let n = l.rows, k = l.cols
        guard m > 0, n > 0 else { return }
        if q.data.isPackedInt4 {
            return try ntInt4(m: m, a: a, lda: lda, weight: q, c: c, ldc: ldc, bias: bias, accumulate: accumulate, threaded: threaded,
                              activations: activations)
        }
        let acc: Int32 = accumulate ? 1 : 0
        try withMatrix(q) { w in
            // Chunks of whole panels: 32 weight rows at levels 1 and 2, 24 at level 0.
            GEMM.parallelChunks(n, align: GEMM.simdLevel >= 1 ? 32 : 24, work: threaded ? m * n * max(k, 1) : 0,
                               perThread: GEMM.chunksPerThread(rows: m)) { r in
                let b = bias.map { $0 + r.lowerBound }
                switch activations {
                case .int8: _ = fk_qgemm_nt_q8(m, r.count, k, a, lda, w, r.lowerBound, c + r.lowerBound, ldc, b, acc)
                case .int16: _ = fk_qgemm_nt_q16(m, r.count, k, a, lda, w, r.lowerBound, c + r.lowerBound, ldc, b, acc)
                case .exact: fk_qgemm_nt(m, r.count, k, a, lda, w, r.lowerBound, c + r.lowerBound, ldc, b, acc)
                }
            }
        }
    }

    /// `C[m, j] (+)= Σ_k A[m·lda + k] · W(k, j) (+ bias[j])` for the quantized `W` [k, n]
    /// (`matmul` with a quantized, untransposed `y`): panels of W's rows are dequantized into a
    /// small fp32 buffer and accumulated with the NN kernel.
    static func nn(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor,
                   c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil, threaded: Bool = true) throws {
        guard let l = layout(q) else { throw KernelError("quantized weight layout \(q.shape) / \(q.scaleShape) not supported") }
        let k = l.rows, n = l.cols
        guard m > 0, n > 0 else { return }
        try withMatrix(q) { w in
            GEMM.parallelChunks(n, align: 32, work: threaded ? m * n * max(k, 1) : 0) { r in
                let kc = max(8, min(k, (64 * 1024) / max(1, r.count)))
                var panel = [Float](repeating: 0, count: kc * r.count)
                panel.withUnsafeMutableBufferPointer { p in
                    // Zero k: C is just the bias (or unchanged when accumulating from empty).
                    if k == 0 {
                        for i in 0..<m { for j in r { c[i * ldc + j] = bias?[j] ?? 0 } }
                    }
                    var k0 = 0
                    while k0 < k {
                        let rows = min(kc, k - k0)
                        fk_dequant(w, k0, rows, r.lowerBound, r.count, p.baseAddress, r.count)
                        fk_sgemm_nn(m, r.count, rows, a + k0, lda, p.baseAddress, r.count, c + r.lowerBound, ldc,
                                    k0 == 0 ? bias.map { $0 + r.lowerBound } : nil, k0 == 0 ? 0 : 1)
                        k0 += rows
                    }
                }
            }
        }
    }

    // MARK: - scalar references

    /// `scale · (q − offset)` of element (r, c), straight from the block definition.
    static func referenceValue(_ q: QuantizedTensor, _ r: Int, _ c: Int, blocks: [Int]? = nil) -> Float {
        let blocks = blocks ?? q.blockSizes
        let si = (r / blocks[0]) * q.scaleShape[1] + c / blocks[1]
        return q.scale(at: si) * (Float(q.data[r * q.shape[1] + c]) - (q.offset?[si] ?? 0))
    }

    /// Plain loops of ``nt`` (Double accumulation, element-by-element dequantization).
    static func referenceNT(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor,
                            c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil) {
        reference(m: m, a: a, lda: lda, weight: q, transposed: true, c: c, ldc: ldc, bias: bias)
    }

    /// Plain loops of ``nn``.
    static func referenceNN(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor,
                            c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>? = nil) {
        reference(m: m, a: a, lda: lda, weight: q, transposed: false, c: c, ldc: ldc, bias: bias)
    }

    /// `C[i, j] = Σ_p A[i, p] · W(p, j) (+ bias[j])` in Double, W read as `q[j, p]` when
    /// `transposed` (``nt``: `q` is [N, K]) and as `q[p, j]` otherwise (``nn``: [K, N]).
    private static func reference(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor, transposed: Bool,
                                  c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>?) {
        let n = q.shape[transposed ? 0 : 1], k = q.shape[transposed ? 1 : 0], blocks = q.blockSizes
        for i in 0..<m {
            for j in 0..<n {
                var s = 0.0
                for p in 0..<k {
                    let w = transposed ? referenceValue(q, j, p, blocks: blocks) : referenceValue(q, p, j, blocks: blocks)
                    s += Double(a[i * lda + p]) * Double(w)
                }
                if let bias { s += Double(bias[j]) }
                c[i * ldc + j] = Float(s)
            }
        }
    }
}
