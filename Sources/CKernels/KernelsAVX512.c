// Level 2 of CKernels (see include/CKernels.h): AVX-512 F/BW/VL/DQ bodies, compiled through a
// per-function target attribute (no compiler flags) and chosen at run time by Dispatch.c.
//
// int8 block-quantized A · Wᵀ (fk_qgemm_nt):
//  * up to QV_MAX_M activation rows ("direct", decode): each 16-byte run of a weight row is
//    widened in registers (vpmovsxbd + vcvtdq2ps) and shared by every activation row. With one
//    activation row, the products of a block are summed in a vector register and added to the
//    row total with one FMA by the broadcast block scale; with more rows, the widened weights
//    are scaled first (one multiply, shared) and each row takes one FMA. One horizontal sum per
//    output at the end; offsets are folded in as scale·offset·Σx per block. Weights are
//    prefetched a few KB ahead (they stream from DRAM at decode).
//  * more rows (prefill): panels of 32 weight rows are transposed as int8 (byte unpacks) and
//    dequantized into a k-major 32-wide fp32 panel (KC columns of K at a time, L1/L2 sized),
//    multiplied with an 8×32 register tile (16 zmm accumulators, A broadcast from memory); the
//    next panel's int8 rows are prefetched into L2 meanwhile.
// fp32 A · Bᵀ (fk_sgemm_nt) packs B the same way; A · B (fk_sgemm_nn) reads B's rows in place.
// Shapes the fast paths do not cover (input-axis blocks not a multiple of 16, small-M fp32 NT)
// return 0: Dispatch.c then runs the level-1 (AVX2) body. Nothing here calls another level.

#include "ck_internal.h"

#if FK_X86

#include <immintrin.h>
#include <stdlib.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define AI5 static inline __attribute__((always_inline)) T512
#if defined(__OPTIMIZE__)
#define FK_DEBUG_NOINLINE
#else
#define FK_DEBUG_NOINLINE __attribute__((noinline))
#endif

static inline long lmin5(long a, long b) { return a < b ? a : b; }

AI5 __mmask16 mask16(long n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u); }

/// 16 int8 → 16 fp32.
AI5 __m512 ldq16(const int8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))); }

/// Scales idx ..< idx+n (n ≤ 16) of W as fp32: a pointer into `W->scale`, or the fp16 scales
/// widened into `buf` (16 floats).
AI5 const float *scales16(const fk_qmatrix *W, long idx, long n, float *buf) {
    if (W->scale) return W->scale + idx;
    _mm512_storeu_ps(buf, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(n), W->scale_h + idx)));
    return buf;
}

// MARK: - dequantization

/// Scales idx ..< idx+n of W as fp32 (any n): `W->scale` itself, or widened into `buf`.
AI5 const float *scales_any(const fk_qmatrix *W, long idx, long n, float *buf) {
    if (W->scale) return W->scale + idx;
    for (long i = 0; i < n; i += 16)
        _mm512_storeu_ps(buf + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(n - i), W->scale_h + idx + i)));
    return buf;
}

#define DQ_CHUNK 64  // blocks whose scales are fetched at once

AI5 void dequant512(const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo) {
    const long bc = W->block_cols;
    float sbuf[DQ_CHUNK] __attribute__((aligned(64)));
    for (long i = 0; i < rows; i++) {
        const long r = r0 + i;
        const int8_t *q = W->data + r * W->ld;
        const long srow = (r / W->block_rows) * W->scale_ld;
        const float *o = W->offset ? W->offset + srow : NULL;
        float *d = out + i * ldo;
        long c = 0;
        while (c < cols) {
            const long b0 = (c0 + c) / bc;
            const long cend = lmin5(cols, (b0 + DQ_CHUNK) * bc - c0);
            const float *s = scales_any(W, srow + b0, (c0 + cend - 1) / bc - b0 + 1, sbuf);
            if (bc % 16 == 0 && (c0 + c) % bc == 0 && (cend - c) % bc == 0) {
                for (; c < cend; c += bc) {
                    const long b = (c0 + c) / bc;
                    const __m512 sv = _mm512_set1_ps(s[b - b0]), ov = _mm512_set1_ps(o ? o[b] : 0.0f);
                    for (long e = c; e < c + bc; e += 16)
                        _mm512_storeu_ps(d + e, _mm512_mul_ps(_mm512_sub_ps(ldq16(q + c0 + e), ov), sv));
                }
            } else {
                for (; c < cend; c++) {
                    const long b = (c0 + c) / bc;
                    d[c] = ((float)q[c0 + c] - (o ? o[b] : 0.0f)) * s[b - b0];
                }
            }
        }
    }
}

T512 int fk__dequant_avx512(FK_ARGS_DQ) {
    dequant512(W, r0, rows, c0, cols, out, ldo);
    return 1;
}

// MARK: - int8 matrix-vector (≤ QV_MAX_M activation rows)

// Tunables (overridable with -D for benchmarking). Measured on the 2-core Zen 4 (SmolLM2-135M
// int8 decode, all 211 products of a token, weights from DRAM): 4 rows per pass beat 8 (fewer
// concurrent streams); prefetching into L2 (T1) 8 KB ahead doubled one core's weight stream
// (8.7 → 16-19 GB/s) where T0/NTA at 1-16 KB gained 0-10%.
#ifndef QV_MAX_M
#define QV_MAX_M 4  // activation rows of the direct route
#endif
#ifndef QV_NR1
#define QV_NR1 4  // weight rows per pass, one activation row (row totals + block partials)
#endif
#ifndef QV_NR
#define QV_NR 4  // weight rows per pass, 2-4 activation rows (M × 4 row totals)
#endif
#ifndef QV_HINT
#define QV_HINT _MM_HINT_T1  // prefetch into L2
#endif
#ifndef QV_PF
#define QV_PF 8192  // prefetch distance, bytes ahead in each weight row
#endif

/// Activation rows 0 ..< M (M ≤ 4) against weight rows n ..< n+nr. Requires bc % 16 == 0 and
/// K % bc == 0. `BC` is block_cols when known at compile time (32), else 0. `xsum` holds Σx per
/// block (nb per activation row) when there are offsets.
AI5 void qv_tile(const int M, const int nr, const int has_off, const long BC, long K, const float *A, long lda,
                 const float *xsum, const fk_qmatrix *W, long n, float *C, long ldc, const float *bias, int acc) {
    const long bc = BC ? BC : W->block_cols;
    const long nb = K / bc;
    const int8_t *q[QV_NR1];
    long srow[QV_NR1];
    for (int r = 0; r < nr; r++) {
        q[r] = W->data + (n + r) * W->ld;
        srow[r] = ((n + r) / W->block_rows) * W->scale_ld;
    }
    ck_prefetch_scales(W, n, nr, QV_PF);
    __m512 t[QV_MAX_M][QV_NR1], cr[QV_MAX_M][QV_NR1];
    for (int m = 0; m < M; m++)
        for (int r = 0; r < nr; r++) t[m][r] = _mm512_setzero_ps(), cr[m][r] = _mm512_setzero_ps();
    float sbuf[QV_NR1][16] __attribute__((aligned(64)));
    for (long b0 = 0; b0 < nb; b0 += 16) {
        const long nbk = lmin5(16, nb - b0);
        const float *s[QV_NR1];
        for (int r = 0; r < nr; r++) s[r] = scales16(W, srow[r] + b0, nbk, sbuf[r]);
        if (has_off) {
            // Σ_b scale·offset·Σx_block, 16 blocks at a time.
            const __mmask16 km = mask16(nbk);
            for (int r = 0; r < nr; r++) {
                const __m512 so = _mm512_mul_ps(_mm512_maskz_loadu_ps(km, s[r]), _mm512_maskz_loadu_ps(km, W->offset + srow[r] + b0));
                for (int m = 0; m < M; m++)
                    cr[m][r] = _mm512_fmadd_ps(so, _mm512_maskz_loadu_ps(km, xsum + m * nb + b0), cr[m][r]);
            }
        }
        for (long b = b0; b < b0 + nbk; b++) {
            const long i0 = b * bc;
            if (QV_PF > 0)
                for (long p = (64 - (i0 & 63)) & 63; p < bc; p += 64)
                for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(q[r] + i0 + p + QV_PF), QV_HINT);
            if (M == 1) {
                // Partial sums of the block, then one FMA by the block scale per row.
                __m512 a[QV_NR1];
                for (int r = 0; r < nr; r++) a[r] = _mm512_setzero_ps();
                for (long i = i0; i < i0 + bc; i += 16) {
                    const __m512 xv = _mm512_loadu_ps(A + i);
                    for (int r = 0; r < nr; r++) a[r] = _mm512_fmadd_ps(xv, ldq16(q[r] + i), a[r]);
                }
                for (int r = 0; r < nr; r++) t[0][r] = _mm512_fmadd_ps(a[r], _mm512_set1_ps(s[r][b - b0]), t[0][r]);
            } else {
                // Widen and scale each weight vector once; one FMA per activation row.
                __m512 sb[QV_NR1];
                for (int r = 0; r < nr; r++) sb[r] = _mm512_set1_ps(s[r][b - b0]);
                for (long i = i0; i < i0 + bc; i += 16) {
                    __m512 xv[QV_MAX_M];
                    for (int m = 0; m < M; m++) xv[m] = _mm512_loadu_ps(A + m * lda + i);
                    for (int r = 0; r < nr; r++) {
                        const __m512 w = _mm512_mul_ps(ldq16(q[r] + i), sb[r]);
                        for (int m = 0; m < M; m++) t[m][r] = _mm512_fmadd_ps(xv[m], w, t[m][r]);
                    }
                }
            }
        }
    }
    for (int m = 0; m < M; m++)
        for (int r = 0; r < nr; r++) {
            float v = _mm512_reduce_add_ps(t[m][r]);
            if (has_off) v -= _mm512_reduce_add_ps(cr[m][r]);
            if (bias) v += bias[r];
            float *d = C + m * ldc + r;
            *d = acc ? *d + v : v;
        }
}

// One function per instance: without optimization (debug builds) the instances inlined into
// one switch would share a frame of ~300 KB; with it they are inlined back into the switch.
#define QV_PARAMS long K, const float *A, long lda, const float *xsum, const fk_qmatrix *W, long n, float *C, long ldc, \
                  const float *bias, int acc
#define QV_FN(MM, NRR, OFF, B)                                                  \
    static T512 FK_DEBUG_NOINLINE void qv_##MM##_##NRR##_##OFF##_##B(QV_PARAMS) { \
        qv_tile(MM, NRR, OFF, B, K, A, lda, xsum, W, n, C, ldc, bias, acc);     \
    }
#define QV_FNS_M(MM, NRR) \
    QV_FN(MM, NRR, 0, 0) QV_FN(MM, NRR, 0, 32) QV_FN(MM, NRR, 1, 0) QV_FN(MM, NRR, 1, 32) \
    QV_FN(MM, 1, 0, 0) QV_FN(MM, 1, 0, 32) QV_FN(MM, 1, 1, 0) QV_FN(MM, 1, 1, 32)
QV_FNS_M(1, QV_NR1)
QV_FNS_M(2, QV_NR)
QV_FNS_M(3, QV_NR)
QV_FNS_M(4, QV_NR)

#define QV_CASE(MM, NRR, OFF, B)                                     \
    case ((MM) * 16 + (NRR)) * 4 + (OFF) * 2 + ((B) != 0):           \
        qv_##MM##_##NRR##_##OFF##_##B(K, A, lda, xsum, W, n, C, ldc, bias, acc); \
        break;
#define QV_CASES_M(MM, NRR) \
    QV_CASE(MM, NRR, 0, 0) QV_CASE(MM, NRR, 0, 32) QV_CASE(MM, NRR, 1, 0) QV_CASE(MM, NRR, 1, 32) \
    QV_CASE(MM, 1, 0, 0) QV_CASE(MM, 1, 0, 32) QV_CASE(MM, 1, 1, 0) QV_CASE(MM, 1, 1, 32)

static T512 void qv_tile_any(int M, int nr, int has_off, int bc32, QV_PARAMS) {
    switch ((M * 16 + nr) * 4 + has_off * 2 + bc32) {
        QV_CASES_M(1, QV_NR1)
        QV_CASES_M(2, QV_NR)
        QV_CASES_M(3, QV_NR)
        QV_CASES_M(4, QV_NR)
        default: break;
    }
}

/// The direct route; returns 0 (nothing done) when the shape is not supported.
static T512 int qgemv512(FK_ARGS_Q) {
    const long bc = W->block_cols;
    if (M > QV_MAX_M || bc % 16 != 0 || K % bc != 0) return 0;
    const long nb = K / bc;
    const int has_off = W->offset != NULL;
    float local[QV_MAX_M * 64];
    float *xsum = local;
    if (has_off) {
        if (M * nb > QV_MAX_M * 64) {
            xsum = malloc((size_t)(M * nb) * sizeof(float));
            if (!xsum) return 0;
        }
        for (long m = 0; m < M; m++)
            for (long b = 0; b < nb; b++) {
                __m512 v = _mm512_setzero_ps();
                for (long i = b * bc; i < (b + 1) * bc; i += 16) v = _mm512_add_ps(v, _mm512_loadu_ps(A + m * lda + i));
                xsum[m * nb + b] = _mm512_reduce_add_ps(v);
            }
    }
    const int nrmax = M == 1 ? QV_NR1 : QV_NR;
    {
        // The loop prefetches QV_PF bytes ahead of each row; start that window now.
        const char *base = (const char *)(W->data + n0 * W->ld);
        const long span = lmin5(QV_PF, N * W->ld);
        for (long p = 0; p < span; p += 64) _mm_prefetch(base + p, QV_HINT);
        if (W->ld > 0) ck_prefetch_scales(W, n0, span / W->ld + 1, 0);
    }
    for (long j = 0; j < N;) {
        const int nr = N - j >= nrmax ? nrmax : 1;
        qv_tile_any((int)M, nr, has_off, bc == 32, K, A, lda, xsum, W, n0 + j, C + j, ldc, bias ? bias + j : NULL, acc);
        j += nr;
    }
    if (xsum != local) free(xsum);
    return 1;
}

// MARK: - fp32 register tile (8 × 32)

#ifndef MR
#define MR 8
#endif
#define NRP 32
/// Columns of K per packed panel (KC × 32 floats = 64 KB).
#ifndef KC
#define KC 512
#endif

/// C[0 ..< mr, 0 ..< nc] (+)= A[0 ..< mr, 0 ..< K] · B[0 ..< K, 0 ..< nc] (+ bias), nc ≤ 32, B's
/// rows `ldb` apart. `masked`: B's columns ≥ nc must not be read (else they are readable).
AI5 void tile8x32(const int mr, const int masked, long K, const float *A, long lda, const float *B, long ldb, float *C,
                  long ldc, int nc, const float *bias, int acc) {
    __m512 c0[MR], c1[MR];
    for (int i = 0; i < mr; i++) c0[i] = _mm512_setzero_ps(), c1[i] = _mm512_setzero_ps();
    const __mmask16 m0 = mask16(nc), m1 = mask16(nc - 16);
    for (long k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        const __m512 b0 = masked ? _mm512_maskz_loadu_ps(m0, b) : _mm512_loadu_ps(b);
        const __m512 b1 = masked ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_loadu_ps(b + 16);
        for (int i = 0; i < mr; i++) {
            const __m512 a = _mm512_set1_ps(A[i * lda + k]);
            c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
        }
    }
    for (int i = 0; i < mr; i++) {
        __m512 v0 = c0[i], v1 = c1[i];
        if (bias) v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, bias)), v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, bias + 16));
        float *d = C + i * ldc;
        if (acc) v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, d), v0), v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, d + 16), v1);
        _mm512_mask_storeu_ps(d, m0, v0);
        _mm512_mask_storeu_ps(d + 16, m1, v1);
    }
}

#define TILE_PARAMS long K, const float *A, long lda, const float *B, long ldb, float *C, long ldc, int nc, const float *bias, int acc
#define TILE_FN(MRR, MSK) \
    static T512 FK_DEBUG_NOINLINE void tile_##MRR##_##MSK(TILE_PARAMS) { tile8x32(MRR, MSK, K, A, lda, B, ldb, C, ldc, nc, bias, acc); }
TILE_FN(1, 0) TILE_FN(2, 0) TILE_FN(3, 0) TILE_FN(4, 0) TILE_FN(5, 0) TILE_FN(6, 0) TILE_FN(7, 0) TILE_FN(8, 0)
TILE_FN(1, 1) TILE_FN(2, 1) TILE_FN(3, 1) TILE_FN(4, 1) TILE_FN(5, 1) TILE_FN(6, 1) TILE_FN(7, 1) TILE_FN(8, 1)

#define TILE_CASE(MRR, MSK) \
    case (MRR) * 2 + (MSK): tile_##MRR##_##MSK(K, A, lda, B, ldb, C, ldc, nc, bias, acc); break;

static T512 void tile_any(int mr, int masked, TILE_PARAMS) {
    switch (mr * 2 + masked) {
        TILE_CASE(1, 0) TILE_CASE(2, 0) TILE_CASE(3, 0) TILE_CASE(4, 0)
        TILE_CASE(5, 0) TILE_CASE(6, 0) TILE_CASE(7, 0) TILE_CASE(8, 0)
        TILE_CASE(1, 1) TILE_CASE(2, 1) TILE_CASE(3, 1) TILE_CASE(4, 1)
        TILE_CASE(5, 1) TILE_CASE(6, 1) TILE_CASE(7, 1) TILE_CASE(8, 1)
        default: break;
    }
}

/// All rows of A against one packed panel (K × 32, zero beyond nc columns).
AI5 void panel_rows(long M, long K, const float *A, long lda, const float *Bp, float *C, long ldc, int nc, const float *bias,
                    int acc) {
    for (long m = 0; m < M; m += MR)
        tile_any((int)lmin5(MR, M - m), 0, K, A + m * lda, lda, Bp, NRP, C + m * ldc, ldc, nc, bias, acc);
}

/// In-register transpose of a 16 × 16 block.
AI5 void tr16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
        t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
        t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
        t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    }
}

/// Bp[k*32 + j] = B[j*ldb + k] for j < nr (≤ 32), k < kc; zero for nr ≤ j < 32.
AI5 void pack_nt(const float *B, long ldb, int nr, long kc, float *Bp) {
    for (int jb = 0; jb < NRP; jb += 16) {
        for (long k0 = 0; k0 < kc; k0 += 16) {
            const __mmask16 km = mask16(kc - k0);
            __m512 r[16];
            for (int j = 0; j < 16; j++)
                r[j] = jb + j < nr ? _mm512_maskz_loadu_ps(km, B + (jb + j) * ldb + k0) : _mm512_setzero_ps();
            tr16(r);
            const long kn = lmin5(16, kc - k0);
            for (long t = 0; t < kn; t++) _mm512_storeu_ps(Bp + (k0 + t) * NRP + jb, r[t]);
        }
    }
}

/// Bp[k*32 + j] = W(r0 + j, k0 + k) for j < nr (≤ 32), k < kc; zero for nr ≤ j < 32: the
/// int8 rows are transposed as bytes (16 × 16 blocks, four at a time, in 4 unpack stages),
/// then widened and dequantized 16 output columns at a time with per-column scale / offset
/// vectors. Needs block_cols % 16 == 0 and k0 % 16 == 0 (a run of 16 columns is in one block).
AI5 void pack_q(const fk_qmatrix *W, long r0, int nr, long k0, long kc, float *Bp) {
    const long bc = W->block_cols;
    const long b0 = k0 / bc, nbk = (k0 + kc - 1) / bc - b0 + 1;  // blocks touched (≤ KC/16 + 1)
    // Scales and offsets of the panel, transposed: st[b][j] for the rows j of the panel.
    float st[KC / 16 + 1][NRP] __attribute__((aligned(64)));
    float ot[KC / 16 + 1][NRP] __attribute__((aligned(64)));
    for (int j = 0; j < NRP; j++) {
        const long srow = j < nr ? ((r0 + j) / W->block_rows) * W->scale_ld + b0 : 0;
        for (long b = 0; b < nbk; b++) {
            st[b][j] = j >= nr ? 0.0f : W->scale ? W->scale[srow + b] : _cvtsh_ss(W->scale_h[srow + b]);
            ot[b][j] = j < nr && W->offset ? W->offset[srow + b] : 0.0f;
        }
    }
    for (int jb = 0; jb < NRP; jb += 16) {
        if (jb >= nr) {
            for (long k = 0; k < kc; k++) _mm512_store_ps(Bp + k * NRP + jb, _mm512_setzero_ps());
            continue;
        }
        for (long kk = 0; kk < kc; kk += 64) {
            const __mmask64 km = kc - kk >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (kc - kk)) - 1);
            __m512i r[16], t[16];
            for (int j = 0; j < 16; j++)
                r[j] = jb + j < nr ? _mm512_maskz_loadu_epi8(km, W->data + (r0 + jb + j) * W->ld + k0 + kk) : _mm512_setzero_si512();
            // Per 128-bit lane l (columns kk + 16l ..< kk + 16l + 16): 16 × 16 byte transpose.
            for (int i = 0; i < 8; i++) {
                t[i] = _mm512_unpacklo_epi8(r[2 * i], r[2 * i + 1]);      // word w: rows 2i, 2i+1 at column w
                t[8 + i] = _mm512_unpackhi_epi8(r[2 * i], r[2 * i + 1]);  // ... at column 8 + w
            }
            for (int h = 0; h < 2; h++)
                for (int i = 0; i < 4; i++) {  // u[g*4 + i], g = 2h (+1): dword d = rows 4i..4i+3 at column 4g + d
                    r[h * 8 + i] = _mm512_unpacklo_epi16(t[h * 8 + 2 * i], t[h * 8 + 2 * i + 1]);
                    r[h * 8 + 4 + i] = _mm512_unpackhi_epi16(t[h * 8 + 2 * i], t[h * 8 + 2 * i + 1]);
                }
            for (int g = 0; g < 4; g++)
                for (int p = 0; p < 2; p++) {  // qword e = rows 8p..8p+7 at column 4g + e (+ 2)
                    t[g * 4 + 2 * p] = _mm512_unpacklo_epi32(r[g * 4 + 2 * p], r[g * 4 + 2 * p + 1]);
                    t[g * 4 + 2 * p + 1] = _mm512_unpackhi_epi32(r[g * 4 + 2 * p], r[g * 4 + 2 * p + 1]);
                }
            for (int g = 0; g < 4; g++)
                for (int e = 0; e < 2; e++) {  // column 4g + 2e (+ 1): rows 0..7 then 8..15
                    r[4 * g + 2 * e] = _mm512_unpacklo_epi64(t[g * 4 + e], t[g * 4 + 2 + e]);
                    r[4 * g + 2 * e + 1] = _mm512_unpackhi_epi64(t[g * 4 + e], t[g * 4 + 2 + e]);
                }
            for (int l = 0; l < 4; l++) {
                const long kl = kk + 16 * l;
                if (kl >= kc) break;
                const long b = (k0 + kl) / bc - b0;
                const __m512 sv = _mm512_load_ps(st[b] + jb), ov = _mm512_load_ps(ot[b] + jb);
                const long kn = lmin5(16, kc - kl);
                for (long c = 0; c < kn; c++) {
                    const __m128i q = l == 0 ? _mm512_castsi512_si128(r[c])
                                    : l == 1 ? _mm512_extracti32x4_epi32(r[c], 1)
                                    : l == 2 ? _mm512_extracti32x4_epi32(r[c], 2)
                                             : _mm512_extracti32x4_epi32(r[c], 3);
                    const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
                    _mm512_store_ps(Bp + (kl + c) * NRP + jb, _mm512_mul_ps(_mm512_sub_ps(v, ov), sv));
                }
            }
        }
    }
}

/// Panel buffers of the prefill route: the packed panel and (quantized weights) the
/// dequantized rows it is transposed from.
typedef struct {
    float *bp;   // KC × 32
    float *tmp;  // 32 × KC
} panel_buf;

static int panel_alloc(panel_buf *p, int quantized) {
    p->bp = ck_scratch(0, (size_t)KC * NRP * sizeof(float));
    p->tmp = quantized ? ck_scratch(1, (size_t)KC * NRP * sizeof(float)) : NULL;
    return p->bp != NULL && (!quantized || p->tmp != NULL);
}

/// The panels are per-thread scratch (``ck_scratch``): nothing to free.
static void panel_free(panel_buf *p) { (void)p; }

/// The prefill route of fk_qgemm_nt; returns 0 when out of memory.
static T512 int qgemm_panel512(FK_ARGS_Q) {
    panel_buf pb;
    if (!panel_alloc(&pb, 1)) return 0;
    for (long j = 0; j < N; j += NRP) {
        const int nc = (int)lmin5(NRP, N - j);
        for (long k0 = 0; k0 < K || k0 == 0; k0 += KC) {
            const long kc = lmin5(KC, K - k0);
            if (kc > 0 && W->block_cols % 16 == 0) {
                pack_q(W, n0 + j, nc, k0, kc, pb.bp);
            } else if (kc > 0) {
                dequant512(W, n0 + j, nc, k0, kc, pb.tmp, kc);
                pack_nt(pb.tmp, kc, nc, kc, pb.bp);
            }
            // The int8 rows of the next panel stream from DRAM: fetch them into L2 while the
            // tile kernel works on this one.
            ck_prefetch_next_panel(W, n0, N, K, j, k0, NRP, KC);
            panel_rows(M, kc, A + k0, lda, pb.bp, C + j, ldc, nc, k0 == 0 && bias ? bias + j : NULL, k0 == 0 ? acc : 1);
        }
    }
    panel_free(&pb);
    return 1;
}

T512 int fk__qgemm_nt_avx512(FK_ARGS_Q) {
    if (M <= 0 || N <= 0) return 1;
    if (M <= QV_MAX_M) return qgemv512(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
    return qgemm_panel512(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
}

// MARK: - fp32

T512 int fk__sgemm_nt_avx512(FK_ARGS_NT) {
    if (M <= 0 || N <= 0) return 1;
    panel_buf pb;
    // Matrix-vector shape (dot products along K), or too few columns for 32-wide panels: left
    // to the level-1 body.
    if (M < 4 || N < 24 || !panel_alloc(&pb, 0)) return 0;
    for (long j = 0; j < N; j += NRP) {
        const int nc = (int)lmin5(NRP, N - j);
        for (long k0 = 0; k0 < K || k0 == 0; k0 += KC) {
            const long kc = lmin5(KC, K - k0);
            if (kc > 0) pack_nt(B + j * ldb + k0, ldb, nc, kc, pb.bp);
            panel_rows(M, kc, A + k0, lda, pb.bp, C + j, ldc, nc, k0 == 0 && bias ? bias + j : NULL, k0 == 0 ? acc : 1);
        }
    }
    panel_free(&pb);
    return 1;
}

/// B (N × K) as the panels fk__sgemm_nt_avx512 packs per call, all at once: panel p (columns
/// 32p ..< 32p + 32, zero past N) at Bp + 32·K·p, K × 32 floats, k-major.
T512 void fk__sgemm_pack_nt_avx512(long N, long K, const float *B, long ldb, float *Bp) {
    for (long j = 0; j < N; j += NRP)
        for (long k0 = 0; k0 < K; k0 += KC)
            pack_nt(B + j * ldb + k0, ldb, (int)lmin5(NRP, N - j), lmin5(KC, K - k0), Bp + j * K + k0 * NRP);
}

/// fk__sgemm_nt_avx512 on B's packed form, columns n0 ..< n0 + N (n0 % 32 == 0): the same
/// tiles over the same panels, so the same bits.
CK_PACKED_ENTRY(fk__sgemm_nt_packed_avx512, T512, panel_rows, KC)

T512 int fk__sgemm_nn_avx512(FK_ARGS_NT) {
    if (M <= 0 || N <= 0) return 1;
    if (N < 16) return 0;  // mostly masked-off 32-wide strips: left to the level-1 body (8-wide strips)
    // Columns in strips of 32 (B's rows read in place, the last strip masked); rows in tiles of
    // 8; K in blocks so a strip of B stays in L1/L2 while the row tiles walk it.
    for (long k0 = 0; k0 < K || k0 == 0; k0 += KC) {
        const long kc = lmin5(KC, K - k0);
        for (long j = 0; j < N; j += NRP) {
            const int nc = (int)lmin5(NRP, N - j);
            const float *bj = k0 == 0 && bias ? bias + j : NULL;
            for (long m = 0; m < M; m += MR)
                tile_any((int)lmin5(MR, M - m), nc < NRP, kc, A + m * lda + k0, lda, B + k0 * ldb + j, ldb, C + m * ldc + j,
                         ldc, nc, bj, k0 == 0 ? acc : 1);
        }
    }
    return 1;
}

// MARK: - exp, softmax rows, gelu EXACT: ck_vmath.h at 16 lanes

#include <math.h>
#include <string.h>
#pragma clang diagnostic ignored "-Wpsabi"

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
#define VF v16f
#define VI v16i
#define VW 16
#define VN(name) name##16
#define VAI AI5
#include "ck_vmath.h"

T512 void fk__softmax_rows_avx512(float *x, long rows, long n, long ld) { softmax_body16(x, rows, n, ld); }
T512 void fk__gelu_erf_avx512(const float *x, float *y, long n) { gelu_erf_body16(x, y, n); }

// MARK: - Q8 route with VNNI: int8 activations × int8 weights

#define TVNNI __attribute__((target("avx512vnni,avx512vl,avx512f,avx512bw,avx2,fma,f16c")))
#define Q8V_CHUNK 64

/// `nr` (≤ 4) weight rows from absolute row `n` against one quantized activation row `xq`, per
/// block of 32:
///  * `bits` 8 (int8 `xq`): vpdpbusd(c, w ⊕ 0x80, x) where w ⊕ 0x80 = w + 128 as u8 and c = the
///    block's [−128·Σq_x, 0, …] (xc), so the 8 int32 lanes sum to Σ q_x·q_w exactly (any int8
///    weight); 256-bit;
///  * `bits` 16 (int16 `xq`, `xc` unused): the weights sign-extended to int16 (vpmovsxbw, 16 at a
///    time) and two chained 256-bit vpdpwssd with the 32 activations (int32 lanes of 4 products,
///    exact: < 2^24); 256-bit measured as fast as 512-bit here (fewer ports at 512 bits);
/// converted and added to the row total by one FMA with the block's s_w·d_x.
static inline __attribute__((always_inline)) TVNNI void qx_rows_vnni(const int bits, const int nr, long K, const void *xq,
                                                                     const float *xd, const float *xs, const int32_t *xc,
                                                                     const fk_qmatrix *W, long n, float *y,
                                                                     const float *bias, int acc) {
    const long nb = K / 32, per = W->block_cols / 32;
    const int8_t *q[4];
    long srow[4];
    for (int r = 0; r < nr; r++) {
        q[r] = W->data + (n + r) * W->ld;
        srow[r] = ((n + r) / W->block_rows) * W->scale_ld;
    }
    ck_prefetch_scales(W, n, nr, QV_PF);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 t[4];
    float corr[4] = {0, 0, 0, 0};
    for (int r = 0; r < nr; r++) t[r] = _mm256_setzero_ps();
    float ss[4][Q8V_CHUNK];
    for (long b0 = 0; b0 < nb; b0 += Q8V_CHUNK) {
        const long nbk = lmin5(Q8V_CHUNK, nb - b0);
        for (int r = 0; r < nr; r++) q8_block_scales(W, srow[r], per, b0, nbk, xd, ss[r]);
        if (W->offset)
            for (int r = 0; r < nr; r++)
                for (long i = 0; i < nbk; i++) corr[r] += ss[r][i] * W->offset[srow[r] + (b0 + i) / per] * xs[b0 + i];
        for (long b = b0; b < b0 + nbk; b++) {
            if (QV_PF > 0 && ((b * 32) & 63) == 0)
                for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(q[r] + b * 32 + QV_PF), QV_HINT);
            if (bits == 8) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)((const int8_t *)xq + b * 32));
                const __m256i c = _mm256_loadu_si256((const __m256i *)(xc + b * 8));
                for (int r = 0; r < nr; r++) {
                    const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q[r] + b * 32)), flip);
                    const __m256 p = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(c, w, xv));
                    t[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(ss[r][b - b0]), t[r]);
                }
            } else {
                const int16_t *xb = (const int16_t *)xq + b * 32;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb), x1 = _mm256_loadu_si256((const __m256i *)(xb + 16));
                for (int r = 0; r < nr; r++) {
                    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q[r] + b * 32)));
                    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q[r] + b * 32 + 16)));
                    const __m256i s32 = _mm256_dpwssd_epi32(_mm256_dpwssd_epi32(_mm256_setzero_si256(), w0, x0), w1, x1);
                    t[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32), _mm256_set1_ps(ss[r][b - b0]), t[r]);
                }
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(t[r]), _mm256_extractf128_ps(t[r], 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        float v = _mm_cvtss_f32(h) - corr[r];
        if (bias) v += bias[r];
        y[r] = acc ? y[r] + v : v;
    }
}

#define QXV_ROWS_FN(BITS, NR)                                                                                             \
    static TVNNI FK_DEBUG_NOINLINE void qxv_rows_##BITS##_##NR(long K, const void *xq, const float *xd, const float *xs, \
                                                               const int32_t *xc, const fk_qmatrix *W, long n, float *y, \
                                                               const float *bias, int acc) {                            \
        qx_rows_vnni(BITS, NR, K, xq, xd, xs, xc, W, n, y, bias, acc);                                                  \
    }
QXV_ROWS_FN(8, 4) QXV_ROWS_FN(8, 1) QXV_ROWS_FN(16, 4) QXV_ROWS_FN(16, 1)

/// Every output in groups of 4 weight rows, each group reused by all M activation rows.
static inline __attribute__((always_inline)) TVNNI void qx_gemv_vnni(const int bits, long M, long N, long K, const void *xq,
                                                                     const float *xd, const float *xs, const int32_t *xc,
                                                                     const fk_qmatrix *W, long n0, float *C, long ldc,
                                                                     const float *bias, int acc) {
    const long nb = K / 32, esize = bits / 8;
    {
        const char *base = (const char *)(W->data + n0 * W->ld);
        const long span = lmin5(QV_PF, N * W->ld);
        for (long p = 0; p < span; p += 64) _mm_prefetch(base + p, QV_HINT);
        if (W->ld > 0) ck_prefetch_scales(W, n0, span / W->ld + 1, 0);
    }
    for (long j = 0; j < N;) {
        const int nr = N - j >= 4 ? 4 : 1;
        for (long m = 0; m < M; m++) {
            const float *bj = bias ? bias + j : NULL;
            const void *xm = (const char *)xq + m * K * esize;
            const int32_t *cm = xc ? xc + m * nb * 8 : NULL;
            float *yv = C + m * ldc + j;
            if (bits == 8 && nr == 4) qxv_rows_8_4(K, xm, xd + m * nb, xs + m * nb, cm, W, n0 + j, yv, bj, acc);
            else if (bits == 8) qxv_rows_8_1(K, xm, xd + m * nb, xs + m * nb, cm, W, n0 + j, yv, bj, acc);
            else if (nr == 4) qxv_rows_16_4(K, xm, xd + m * nb, xs + m * nb, cm, W, n0 + j, yv, bj, acc);
            else qxv_rows_16_1(K, xm, xd + m * nb, xs + m * nb, cm, W, n0 + j, yv, bj, acc);
        }
        j += nr;
    }
}

TVNNI void fk__q8_gemv_vnni(FK_ARGS_Q8) { qx_gemv_vnni(8, M, N, K, xq, xd, xs, xc, W, n0, C, ldc, bias, acc); }
TVNNI void fk__q16_gemv_vnni(FK_ARGS_Q16) { qx_gemv_vnni(16, M, N, K, xq, xd, xs, NULL, W, n0, C, ldc, bias, acc); }

#endif
