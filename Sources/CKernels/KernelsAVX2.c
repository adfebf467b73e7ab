// Level 1 of CKernels (see include/CKernels.h): the bodies of ck_bodies.h compiled inside
// `target("avx2,fma,f16c")` functions (x86-64 only; no compiler flags), fp16 scales widened
// with F16C. Dispatch.c calls these when the CPU has AVX2 + FMA + F16C, and for the shapes
// the level-2 bodies leave alone. The int8 prefill route (qgemm_panels_avx2) dequantizes
// weight panels into the fp32 packed route's k-major layout (8 × 8 blocks transposed in
// registers) and runs its 6 × 16 tile: the level-2 route's panels and sums, so its bits.
#include "ck_bodies.h"

#if FK_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))

static AVX2 void h2f_row_f16c(const uint16_t *h, float *f, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = _cvtsh_ss(h[i]);
}

AVX2 void fk__sgemm_nt_avx2(FK_ARGS_NT) {
    // Rows and columns enough for panels: B packed a panel at a time (the packed route's bits).
    float *panel = M >= 4 && N >= 24 && K > 0 ? ck_scratch(0, (size_t)PKC * PNR * sizeof(float)) : NULL;
    if (panel) sgemm_nt_panels_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc, panel);
    else sgemm_nt_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc);
}
AVX2 void fk__sgemm_pack_nt_avx2(long N, long K, const float *B, long ldb, float *Bp) { sgemm_pack_nt_body(N, K, B, ldb, Bp); }
CK_PACKED_ENTRY(fk__sgemm_nt_packed_avx2, AVX2, prows, PKC)
AVX2 void fk__sgemm_nn_avx2(FK_ARGS_NT) { sgemm_nn_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }

/// 8 vectors of 8 floats transposed in registers (r[i][j] → r[j][i]).
static inline __attribute__((always_inline)) AVX2 void tr8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
    }
    for (int h = 0; h < 2; h++) {  // rows 4h ..< 4h + 4: u[4h + c] = column c (and c + 4) of them
        u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/// P[k·PNR + j] = W(r0 + j, k0 + k) for j < nr (≤ PNR), k < kc; zero for nr ≤ j < PNR: the
/// k-major panel of the fp32 route (pack_panel's layout), dequantized as dequant_body does
/// ((q − offset) · scale, per element), 8 × 8 blocks widened and transposed in registers.
/// Needs block_cols % 8 == 0, k0 % 8 == 0 and kc % 8 == 0 (8 columns lie in one block).
static inline __attribute__((always_inline)) AVX2 void pack_q_avx2(const fk_qmatrix *W, long r0, int nr, long k0, long kc,
                                                                   float *P) {
    const long bc = W->block_cols;
    for (int j0 = 0; j0 < PNR; j0 += 8) {
        if (j0 >= nr) {
            for (long k = 0; k < kc; k++) _mm256_storeu_ps(P + k * PNR + j0, _mm256_setzero_ps());
            continue;
        }
        const int rows = nr - j0 < 8 ? nr - j0 : 8;
        const int8_t *q[8];
        long srow[8];
        for (int i = 0; i < 8; i++) {
            const long r = r0 + j0 + (i < rows ? i : 0);
            q[i] = W->data + r * W->ld + k0;
            srow[i] = (r / W->block_rows) * W->scale_ld;
        }
        float sv[8] __attribute__((aligned(32))), ov[8] __attribute__((aligned(32)));
        long blk = -1;
        for (long k = 0; k < kc; k += 8) {
            const long b = (k0 + k) / bc;
            if (b != blk) {
                blk = b;
                for (int i = 0; i < 8; i++) {
                    sv[i] = i < rows ? scale_at(W, srow[i] + b, h2f_row_f16c) : 0.0f;
                    ov[i] = i < rows && W->offset ? W->offset[srow[i] + b] : 0.0f;
                }
            }
            __m256 v[8];
            for (int i = 0; i < 8; i++)
                v[i] = i < rows ? _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q[i] + k))))
                                : _mm256_setzero_ps();
            tr8x8(v);
            const __m256 s = _mm256_load_ps(sv), o = _mm256_load_ps(ov);
            for (int c = 0; c < 8; c++) _mm256_storeu_ps(P + (k + c) * PNR + j0, _mm256_mul_ps(_mm256_sub_ps(v[c], o), s));
        }
    }
}

/// The prefill route of fk_qgemm_nt at level 1 (M > Q_DIRECT_MAX_M): panels of PNR weight rows
/// dequantized k-major, PKC columns of K at a time, multiplied by the 6 × 16 tile of the fp32
/// packed route (prows) — each sum over k in order, one multiply-add per k, in passes of PKC,
/// the level-2 route's panels and sums (its bits). The next panel's int8 rows are prefetched
/// into L2 while the tiles run. Returns 0 (nothing done) when the shape or memory does not allow it.
static AVX2 int qgemm_panels_avx2(FK_ARGS_Q) {
    if (M <= Q_DIRECT_MAX_M || W->block_cols % 8 != 0 || K % 8 != 0 || K <= 0) return 0;
    float *panel = ck_scratch(0, (size_t)PKC * PNR * sizeof(float));
    if (!panel) return 0;
    for (long j = 0; j < N; j += PNR) {
        const int nc = (int)lmin(PNR, N - j);
        for (long k0 = 0; k0 < K; k0 += PKC) {
            const long kc = lmin(PKC, K - k0);
            pack_q_avx2(W, n0 + j, nc, k0, kc, panel);
            ck_prefetch_next_panel(W, n0, N, K, j, k0, PNR, PKC);
            prows(M, kc, A + k0, lda, panel, C + j, ldc, nc, k0 == 0 && bias ? bias + j : NULL, k0 == 0 ? acc : 1);
        }
    }
    return 1;
}

AVX2 void fk__qgemm_nt_avx2(FK_ARGS_Q) {
    if (M > 0 && N > 0 && qgemm_panels_avx2(M, N, K, A, lda, W, n0, C, ldc, bias, acc)) return;
    qgemm_nt_body(M, N, K, A, lda, W, n0, C, ldc, bias, acc, h2f_row_f16c);
}
AVX2 void fk__dequant_avx2(FK_ARGS_DQ) { dequant_body(W, r0, rows, c0, cols, out, ldo, h2f_row_f16c); }
AVX2 void fk__softmax_rows_avx2(float *x, long rows, long n, long ld) { softmax_body8(x, rows, n, ld); }
AVX2 void fk__gelu_erf_avx2(const float *x, float *y, long n) { gelu_erf_body8(x, y, n); }
#endif

// MARK: - Q8 / Q16 routes: int8 or int16 activations × int8 weights

#if FK_X86
AVX2 int fk__qx_quantize_avx2(int bits, long K, const float *x, void *q, float *d, float *qs) {
    return bits == 8 ? qx_quantize_body(8, K, x, q, d, qs) : qx_quantize_body(16, K, x, q, d, qs);
}

/// Activation blocks whose combined scales s_w·d_x are computed at once.
#define Q8_CHUNK 64

/// `nr` (≤ 4) weight rows from absolute row `n` against one quantized activation row `xq`
/// (int8 when `bits` is 8, int16 when 16), per block of 32:
///  * 8: vpmaddubsw(|w|, sign(x, w)) (pairs of u8·s8 products in int16; |w| ≤ 128 and
///    |x| ≤ 127, so a pair stays below 2^15 and nothing saturates, w = −128 included), vpmaddwd
///    with ones (int32 per 4);
///  * 16: the weights sign-extended to int16 (vpmovsxbw), vpmaddwd with the activations (pairs
///    in int32: |2·128·32767| < 2^23, exact), two halves added;
/// then converted and added to the row total by one FMA with the block's s_w·d_x. Weights
/// prefetched PF_BYTES ahead into L2, as the fp32 route.
static inline __attribute__((always_inline)) AVX2 void qx_rows_avx2(const int bits, const int nr, long K, const void *xq,
                                                                    const float *xd, const float *xs, const fk_qmatrix *W,
                                                                    long n, float *y, const float *bias, int acc) {
    const long nb = K / 32, per = W->block_cols / 32;
    const int8_t *q[4];
    long srow[4];
    for (int r = 0; r < nr; r++) {
        q[r] = W->data + (n + r) * W->ld;
        srow[r] = ((n + r) / W->block_rows) * W->scale_ld;
    }
    ck_prefetch_scales(W, n, nr, PF_BYTES);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 t[4];
    float corr[4] = {0, 0, 0, 0};
    for (int r = 0; r < nr; r++) t[r] = _mm256_setzero_ps();
    float ss[4][Q8_CHUNK];
    for (long b0 = 0; b0 < nb; b0 += Q8_CHUNK) {
        const long nbk = lmin(Q8_CHUNK, nb - b0);
        for (int r = 0; r < nr; r++) q8_block_scales(W, srow[r], per, b0, nbk, xd, ss[r]);
        if (W->offset)
            for (int r = 0; r < nr; r++)
                for (long i = 0; i < nbk; i++) corr[r] += ss[r][i] * W->offset[srow[r] + (b0 + i) / per] * xs[b0 + i];
        for (long b = b0; b < b0 + nbk; b++) {
            if (((b * 32) & 63) == 0)
                for (int r = 0; r < nr; r++) __builtin_prefetch(q[r] + b * 32 + PF_BYTES, 0, PF_LOC);
            if (bits == 8) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)((const int8_t *)xq + b * 32));
                for (int r = 0; r < nr; r++) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *)(q[r] + b * 32));
                    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
                    const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                    t[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(ss[r][b - b0]), t[r]);
                }
            } else {
                const int16_t *xb = (const int16_t *)xq + b * 32;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)xb), x1 = _mm256_loadu_si256((const __m256i *)(xb + 16));
                for (int r = 0; r < nr; r++) {
                    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q[r] + b * 32)));
                    const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q[r] + b * 32 + 16)));
                    const __m256i s32 = _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1));
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

#define QX_ROWS_FN(BITS, NR)                                                                                       \
    static AVX2 void qx_rows_##BITS##_##NR(long K, const void *xq, const float *xd, const float *xs, const fk_qmatrix *W, \
                                           long n, float *y, const float *bias, int acc) {                          \
        qx_rows_avx2(BITS, NR, K, xq, xd, xs, W, n, y, bias, acc);                                                  \
    }
QX_ROWS_FN(8, 4) QX_ROWS_FN(8, 1) QX_ROWS_FN(16, 4) QX_ROWS_FN(16, 1)

/// Every output in groups of 4 weight rows (each group reused by all M activation rows while
/// it is in L1); `esize` bytes per activation value.
static inline __attribute__((always_inline)) AVX2 void qx_gemv_avx2(const int bits, long M, long N, long K, const void *xq,
                                                                    const float *xd, const float *xs, const fk_qmatrix *W,
                                                                    long n0, float *C, long ldc, const float *bias, int acc) {
    const long nb = K / 32, esize = bits / 8;
    {
        // The loop prefetches PF_BYTES ahead of each row; start that window now.
        const char *base = (const char *)(W->data + n0 * W->ld);
        const long span = lmin(PF_BYTES, N * W->ld);
        for (long p = 0; p < span; p += 64) __builtin_prefetch(base + p, 0, PF_LOC);
        if (W->ld > 0) ck_prefetch_scales(W, n0, span / W->ld + 1, 0);
    }
    for (long j = 0; j < N;) {
        const int nr = N - j >= 4 ? 4 : 1;
        for (long m = 0; m < M; m++) {
            const void *xm = (const char *)xq + m * K * esize;
            const float *bj = bias ? bias + j : NULL;
            float *y = C + m * ldc + j;
            if (bits == 8 && nr == 4) qx_rows_8_4(K, xm, xd + m * nb, xs + m * nb, W, n0 + j, y, bj, acc);
            else if (bits == 8) qx_rows_8_1(K, xm, xd + m * nb, xs + m * nb, W, n0 + j, y, bj, acc);
            else if (nr == 4) qx_rows_16_4(K, xm, xd + m * nb, xs + m * nb, W, n0 + j, y, bj, acc);
            else qx_rows_16_1(K, xm, xd + m * nb, xs + m * nb, W, n0 + j, y, bj, acc);
        }
        j += nr;
    }
}

AVX2 void fk__q8_gemv_avx2(FK_ARGS_Q8) {
    (void)xc;
    qx_gemv_avx2(8, M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc);
}
AVX2 void fk__q16_gemv_avx2(FK_ARGS_Q16) { qx_gemv_avx2(16, M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc); }
#endif
