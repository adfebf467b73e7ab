import CKernels

/// Products with an int4 weight kept packed two values a byte (``Int8Buffer/isPackedInt4``: an
/// int4 `constexpr_blockwise_shift_scale` blob read in place from the mapped weight file, as
/// coremltools' `linear_quantize_weights(dtype="int4", granularity="per_block")` writes it).
///
/// Up to ``int4GEMVRows`` activation rows (decode): `fk_q4_gemv` (CKernels, CKInt4Linear.h)
/// reads the packed bytes in place (the only weight bytes read: nothing is decoded or copied
/// per call) and dots them with the activations in fp32 — AVX-512 looks each nibble up as its
/// dequantized value in a per-block table, AVX2 and the portable body widen each run of 32 and
/// scale it once per block. More rows
/// (prefill), or a layout the direct kernel does not take (the input axis or its blocks not a
/// multiple of 32): panels of 32 weight rows are dequantized to fp32 (`fk_q4_dequant`) and
/// multiplied with the fp32 GEMM kernel. An odd row length (rows not starting on a byte) runs
/// the int8 kernels on an unpacked copy. `activations` ``ActivationQuantization/int8``
/// (opt-in): `fk_q4_gemv_q8` quantizes each activation row per block of 32 (Q8_0, as the
/// int8-weight route) and sums the block products in int32, for every row count, when the direct
/// kernel takes the layout; ``ActivationQuantization/int16`` has no int4 route (fp32 activations).
extension QuantizedGEMM {
    /// Activation rows up to which the packed weight is dotted directly (each row re-widens it).
    static let int4GEMVRows = 4

    /// Calls `body` with the C descriptor of the packed int4 `q` (valid only inside `body`), or
    /// returns nil when `q` is not packed, not a rank-2 block layout, or has odd rows.
    static func withInt4Matrix<R>(_ q: QuantizedTensor, _ body: (UnsafePointer<fk_q4matrix>) throws -> R) throws -> R? {
        guard q.data.isPackedInt4, let l = layout(q), l.cols % 2 == 0 else { return nil }
        return try q.data.withUnsafeBufferPointer { d in
            let bytes = UnsafeRawPointer(d.baseAddress!).assumingMemoryBound(to: UInt8.self)
            return try withScales(q) { scale, half, offset in
                var m = fk_q4matrix(data: bytes, ld: l.cols, scale: scale, scale_h: half, offset: offset,
                                    block_rows: l.blockRows, block_cols: l.blockCols, scale_ld: l.scaleLD)
                return try body(&m)
            }
        }
    }

    /// ``nt(m:a:lda:weight:c:ldc:bias:accumulate:threaded:int8Activations:)`` for a packed int4
    /// weight.
    static func ntInt4(m: Int, a: UnsafePointer<Float>, lda: Int, weight q: QuantizedTensor,
                       c: UnsafeMutablePointer<Float>, ldc: Int, bias: UnsafePointer<Float>?,
                       accumulate: Bool, threaded: Bool, activations: ActivationQuantization = .exact) throws {
        let n = q.shape[0], k = q.shape[1]
        let acc: Int32 = accumulate ? 1 : 0
        let work = threaded ? m * n * max(k, 1) : 0
        let ran: Void? = try withInt4Matrix(q) { w in
            if activations == .int8, fk_q4_gemv_fits(w, k) != 0 {
                // Each chunk quantizes the rows itself (K values, against its N/threads × K products).
                GEMM.parallelChunks(n, align: 16, work: work, perThread: GEMM.chunksPerThread(rows: m)) { r in
                    if fk_q4_gemv_q8(m, r.count, k, a, lda, w, r.lowerBound, c + r.lowerBound, ldc, bias.map { $0 + r.lowerBound }, acc) < 0 {
                        // out of scratch memory (an inf / NaN activation ran the fp32 route itself)
                        let xs = UnsafeMutablePointer<Float>.allocate(capacity: m * fk_q4_split_floats(k))
                        defer { xs.deallocate() }
                        fk_q4_split(m, k, a, lda, xs)
                        fk_q4_gemv(m, r.count, k, xs, w, r.lowerBound, c + r.lowerBound, ldc, bias.map { $0 + r.lowerBound }, acc)
                    }
                }
                return
            }
            if m <= int4GEMVRows, fk_q4_gemv_fits(w, k) != 0 {
                let xs = UnsafeMutablePointer<Float>.allocate(capacity: m * fk_q4_split_floats(k))
                defer { xs.deallocate() }
                fk_q4_split(m, k, a, lda, xs)
                GEMM.parallelChunks(n, align: 16, work: work, perThread: GEMM.chunksPerThread(rows: m)) { r in
                    fk_q4_gemv(m, r.count, k, xs, w, r.lowerBound, c + r.lowerBound, ldc, bias.map { $0 + r.lowerBound }, acc)
                }
                return
            }
            GEMM.widenedPanelsNT(m: m, n: n, k: k, a: a, lda: lda, c: c, ldc: ldc, bias: bias, accumulate: accumulate,
                                 work: work) { j, rows, panel in
                fk_q4_dequant(w, j, rows, k, panel, k)
            }
        }
        if ran == nil {
            try nt(m: m, a: a, lda: lda, weight: unpacked(q), c: c, ldc: ldc, bias: bias, accumulate: accumulate, threaded: threaded)
        }
    }

    /// `q` with its values one a byte (a copy when packed int4, else `q`): for the kernels that
    /// read int8 data.
    static func unpacked(_ q: QuantizedTensor) -> QuantizedTensor {
        guard q.data.isPackedInt4 else { return q }
        return QuantizedTensor(dtype: q.dtype, shape: q.shape, buffer: q.data.unpacked(), scales: q.scales,
                               scaleShape: q.scaleShape, offset: q.offset)
    }
}
