// See include/CKInt4Linear.h: A · Wᵀ with W int4 block-quantized and packed two values a byte.
//
// A packed byte holds the even column in its low nibble and the odd one in its high nibble, so
// the activations are split once per call into their even and odd columns (fk_q4_split) and
// each byte's two nibbles are dotted with one even and one odd activation: no shuffle back into
// column order. Levels (fk_simd_level), everything accumulated in fp32:
// - 2 = AVX-512: 4 weight rows per activation load; per block each row's 16 dequantized values
//   s · (q − o) are one register, indexed by the nibbles themselves (`vpermps` reads the low 4
//   bits of a lane), so a weight costs a widening, a lookup and an FMA — no conversion, no
//   per-block sum or correction, and each product is the dequantized weight times x, as a
//   dequantize-then-matmul computes it.
// - 1 = AVX2 + FMA + F16C (8 lanes, 4 weight rows a pass) and 0 = portable C: a nibble u is
//   the two's complement value q = (u ^ 8) − 8; the kernels widen u ^ 8 (= q + 8, unsigned
//   0 … 15: a zero extension and a mask or a shift), scale each block's sum once and subtract
//   Σ s · (o + 8) · Σx (Σx of each run of 32 columns being part of the split) once per row.
// The SIMD bodies prefetch the weight rows Q4_PREFETCH bytes ahead: one thread streaming the
// packed rows waits on memory otherwise (measured: about half the read bandwidth).
#include "CKInt4Linear.h"
#include "ck_internal.h"

#if FK_X86
#include <immintrin.h>
#endif

#define Q4_RUN 32  // columns per run: 16 packed bytes
#define Q4_MAX_BLOCKS 1024  // scale blocks per weight row the SIMD bodies widen into a stack buffer
#define Q4_PREFETCH 4096    // bytes ahead of a weight row's run that the SIMD bodies prefetch

int fk_q4_gemv_fits(const fk_q4matrix *W, long K) {
    return K > 0 && K % Q4_RUN == 0 && W->block_cols > 0 && W->block_cols % Q4_RUN == 0 && K % W->block_cols == 0 &&
           K / W->block_cols <= Q4_MAX_BLOCKS && W->block_rows > 0 && W->ld >= K && W->ld % 2 == 0 && (W->scale || W->scale_h);
}

long fk_q4_split_floats(long K) { return K + K / Q4_RUN; }

void fk_q4_split(long M, long K, const float *A, long lda, float *xs) {
    const long half = K / 2, runs = K / Q4_RUN, stride = fk_q4_split_floats(K);
    for (long m = 0; m < M; m++) {
        const float *a = A + m * lda;
        float *even = xs + m * stride, *odd = even + half, *sums = odd + half;
        for (long i = 0; i < half; i++) {
            even[i] = a[2 * i];
            odd[i] = a[2 * i + 1];
        }
        for (long r = 0; r < runs; r++) {
            float s = 0;
            for (long i = 0; i < Q4_RUN; i++) s += a[r * Q4_RUN + i];
            sums[r] = s;
        }
    }
}

/// Scale and offset of block `idx` (row-major over the scale matrix).
static inline float q4_scale(const fk_q4matrix *W, long idx) { return W->scale ? W->scale[idx] : fk__h2f(W->scale_h[idx]); }
static inline float q4_offset8(const fk_q4matrix *W, long idx) { return (W->offset ? W->offset[idx] : 0.0f) + 8.0f; }

/// Writes y to C[j] (adding when accumulating), plus the bias.
static inline void q4_store(float *c, float y, const float *bias, long j, int acc) {
    if (bias) y += bias[j];
    *c = acc ? *c + y : y;
}

// MARK: - level 0: portable

static void q4_row_gen(long K, const float *xs, const fk_q4matrix *W, long row, float *out) {
    const float *even = xs, *odd = xs + K / 2, *sums = xs + K;
    const uint8_t *p = W->data + row * (W->ld / 2);
    const long per = W->block_cols / Q4_RUN, blocks = K / W->block_cols, srow = (row / W->block_rows) * W->scale_ld;
    float y = 0, corr = 0;
    for (long b = 0; b < blocks; b++) {
        float a = 0, xsum = 0;
        for (long r = b * per; r < (b + 1) * per; r++) {
            xsum += sums[r];
            for (long i = r * 16; i < r * 16 + 16; i++) {
                const unsigned u = p[i] ^ 0x88u;
                a += even[i] * (float)(u & 15u) + odd[i] * (float)(u >> 4);
            }
        }
        const float s = q4_scale(W, srow + b);
        y += s * a;
        corr += s * q4_offset8(W, srow + b) * xsum;
    }
    *out = y - corr;
}

/// One weight row against one split activation row (a level's body).
typedef void (*q4_row_fn)(long K, const float *xs, const fk_q4matrix *W, long row, float *out);

/// Every (weight row, activation row) through `row`: the levels with a one-row body.
static void q4_gemv_rows(q4_row_fn row, long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C,
                         long ldc, const float *bias, int acc) {
    const long stride = fk_q4_split_floats(K);
    for (long j = 0; j < N; j++) {
        for (long m = 0; m < M; m++) {
            float y;
            row(K, xs + m * stride, W, n0 + j, &y);
            q4_store(C + m * ldc + j, y, bias, j, acc);
        }
    }
}

#if FK_X86

// MARK: - level 1: AVX2 + FMA + F16C

#define T256 __attribute__((target("avx2,fma,f16c")))

static inline __attribute__((always_inline)) T256 float q4_hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/// The fp32 scales of the `blocks` blocks of a weight row starting at scale index `srow`,
/// written to `buf` (fp16 scales widened).
static inline __attribute__((always_inline)) T256 void q4_row_scales(const fk_q4matrix *W, long srow, long blocks,
                                                                    float *buf) {
    long b = 0;
    if (W->scale) {
        const float *s = W->scale + srow;
        for (; b + 8 <= blocks; b += 8) _mm256_storeu_ps(buf + b, _mm256_loadu_ps(s + b));
        for (; b < blocks; b++) buf[b] = s[b];
        return;
    }
    const uint16_t *h = W->scale_h + srow;
    for (; b + 8 <= blocks; b += 8) _mm256_storeu_ps(buf + b, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + b))));
    for (; b < blocks; b++) buf[b] = _cvtsh_ss(h[b]);
}

/// Σ_b s[b] · (offset[b] + 8) · Σx(block b): what the widened nibbles (q + 8) added.
static inline __attribute__((always_inline)) T256 float q4_correction(const fk_q4matrix *W, long srow, const float *s,
                                                                     const float *sums, long blocks, long per) {
    const float *off = W->offset ? W->offset + srow : NULL;
    if (per != 1) {
        float corr = 0;
        for (long b = 0; b < blocks; b++) {
            float xsum = 0;
            for (long c = b * per; c < (b + 1) * per; c++) xsum += sums[c];
            corr += s[b] * ((off ? off[b] : 0.0f) + 8.0f) * xsum;
        }
        return corr;
    }
    const __m256 eight = _mm256_set1_ps(8.0f);
    __m256 v = _mm256_setzero_ps();
    long b = 0;
    for (; b + 8 <= blocks; b += 8) {
        const __m256 o8 = off ? _mm256_add_ps(_mm256_loadu_ps(off + b), eight) : eight;
        v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(s + b), o8), _mm256_loadu_ps(sums + b), v);
    }
    float corr = q4_hsum256(v);
    for (; b < blocks; b++) corr += s[b] * ((off ? off[b] : 0.0f) + 8.0f) * sums[b];
    return corr;
}

/// One run (32 values: the 16 packed bytes at `p`) of a weight row dotted with the split
/// activations at `even` and `odd`, added to `a` (or starting the sum when `first`): the bytes
/// ^ 0x88 hold each nibble + 8; 8 bytes widen to 8 lanes, masked (even columns) or shifted
/// (odd columns), converted, multiplied.
static inline __attribute__((always_inline)) T256 __m256 q4_run_avx2(const uint8_t *p, const float *even,
                                                                    const float *odd, __m256 a, const int first) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8((char)0x88));
    const __m256i low = _mm256_set1_epi32(15);
    const __m256i w0 = _mm256_cvtepu8_epi32(v), w1 = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
    const __m256 e0 = _mm256_cvtepi32_ps(_mm256_and_si256(w0, low)), e1 = _mm256_cvtepi32_ps(_mm256_and_si256(w1, low));
    const __m256 o0 = _mm256_cvtepi32_ps(_mm256_srli_epi32(w0, 4)), o1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(w1, 4));
    a = first ? _mm256_mul_ps(_mm256_loadu_ps(even), e0) : _mm256_fmadd_ps(_mm256_loadu_ps(even), e0, a);
    a = _mm256_fmadd_ps(_mm256_loadu_ps(even + 8), e1, a);
    a = _mm256_fmadd_ps(_mm256_loadu_ps(odd), o0, a);
    return _mm256_fmadd_ps(_mm256_loadu_ps(odd + 8), o1, a);
}

/// `nr` (1 or 4) weight rows from `row` against one split activation row; `per1`: one run a
/// block (blocks of 32 columns, the common layout) — its loop has no inner run loop.
static inline __attribute__((always_inline)) T256 void q4_rows_avx2(const int nr, const int per1, long K,
                                                                   const float *xs, const fk_q4matrix *W, long row,
                                                                   float *out) {
    const float *even = xs, *odd = xs + K / 2, *sums = xs + K;
    const long per = per1 ? 1 : W->block_cols / Q4_RUN, blocks = K / W->block_cols, half = W->ld / 2;
    const uint8_t *p0 = W->data + row * half;
    float sc[4][Q4_MAX_BLOCKS];
    __m256 y[4];
    for (int r = 0; r < nr; r++) {
        q4_row_scales(W, ((row + r) / W->block_rows) * W->scale_ld, blocks, sc[r]);
        y[r] = _mm256_setzero_ps();
    }
    for (long b = 0; b < blocks; b++) {
        const long c0 = b * per, i0 = c0 * 16;
        if ((c0 & 3) == 0)
            for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(p0 + r * half + i0 + Q4_PREFETCH), _MM_HINT_T0);
        __m256 a[4];
        for (int r = 0; r < nr; r++) a[r] = q4_run_avx2(p0 + r * half + i0, even + i0, odd + i0, _mm256_setzero_ps(), 1);
        if (!per1) {
            for (long c = c0 + 1; c < c0 + per; c++) {
                const long i = c * 16;
                if ((c & 3) == 0)
                    for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(p0 + r * half + i + Q4_PREFETCH), _MM_HINT_T0);
                for (int r = 0; r < nr; r++) a[r] = q4_run_avx2(p0 + r * half + i, even + i, odd + i, a[r], 0);
            }
        }
        for (int r = 0; r < nr; r++) y[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(sc[r] + b), a[r], y[r]);
    }
    for (int r = 0; r < nr; r++)
        out[r] = q4_hsum256(y[r]) - q4_correction(W, ((row + r) / W->block_rows) * W->scale_ld, sc[r], sums, blocks, per);
}

static inline __attribute__((always_inline)) T256 void q4_gemv_avx2_(const int per1, long M, long N, long K,
                                                                    const float *xs, const fk_q4matrix *W, long n0,
                                                                    float *C, long ldc, const float *bias, int acc) {
    const long stride = fk_q4_split_floats(K);
    long j = 0;
    for (; j + 4 <= N; j += 4) {
        for (long m = 0; m < M; m++) {
            float y[4];
            q4_rows_avx2(4, per1, K, xs + m * stride, W, n0 + j, y);
            for (int r = 0; r < 4; r++) q4_store(C + m * ldc + j + r, y[r], bias, j + r, acc);
        }
    }
    for (; j < N; j++) {
        for (long m = 0; m < M; m++) {
            float y;
            q4_rows_avx2(1, per1, K, xs + m * stride, W, n0 + j, &y);
            q4_store(C + m * ldc + j, y, bias, j, acc);
        }
    }
}

static T256 void q4_gemv_avx2(long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C, long ldc,
                              const float *bias, int acc) {
    if (W->block_cols == Q4_RUN) q4_gemv_avx2_(1, M, N, K, xs, W, n0, C, ldc, bias, acc);
    else q4_gemv_avx2_(0, M, N, K, xs, W, n0, C, ldc, bias, acc);
}

// MARK: - level 2: AVX-512

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/// The table of a nibble u (0 … 15) → its two's complement value q, in lane u.
static const float q4_values[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};

/// `nr` (1 or 4) weight rows from `row` against one split activation row: each run's 16 even
/// and 16 odd activations are loaded once and shared by the rows. Per block each row's table
/// holds its 16 dequantized values s · (q − o) (`hasoff`: with the offset); a run's 16 bytes
/// widen to 16 lanes (`vpmovzxbd`) whose bits 0 … 3 (the even columns) and, shifted, 4 … 7 (the
/// odd ones) index the table (`vpermps` reads the low 4 bits of each index).
static inline __attribute__((always_inline)) T512 void q4_rows_512(const int nr, const int hasoff, long K,
                                                                  const float *xs, const fk_q4matrix *W, long row,
                                                                  float *out) {
    const float *even = xs, *odd = xs + K / 2;
    const long per = W->block_cols / Q4_RUN, blocks = K / W->block_cols, half = W->ld / 2;
    const uint8_t *p0 = W->data + row * half;
    float sc[4][Q4_MAX_BLOCKS];
    const float *off[4];
    __m512 y0[4], y1[4];
    const __m512 values = _mm512_loadu_ps(q4_values);
    for (int r = 0; r < nr; r++) {
        const long srow = ((row + r) / W->block_rows) * W->scale_ld;
        q4_row_scales(W, srow, blocks, sc[r]);
        off[r] = hasoff ? W->offset + srow : NULL;
        y0[r] = _mm512_setzero_ps();
        y1[r] = _mm512_setzero_ps();
    }
    for (long b = 0; b < blocks; b++) {
        __m512 t[4];
        for (int r = 0; r < nr; r++) {
            const __m512 q = hasoff ? _mm512_sub_ps(values, _mm512_set1_ps(off[r][b])) : values;
            t[r] = _mm512_mul_ps(q, _mm512_set1_ps(sc[r][b]));
        }
        for (long c = b * per; c < (b + 1) * per; c++) {
            const long i = c * 16;
            if ((c & 3) == 0)
                for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(p0 + r * half + i + Q4_PREFETCH), _MM_HINT_T0);
            const __m512 xe = _mm512_loadu_ps(even + i), xo = _mm512_loadu_ps(odd + i);
            for (int r = 0; r < nr; r++) {
                const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p0 + r * half + i)));
                y0[r] = _mm512_fmadd_ps(xe, _mm512_permutexvar_ps(w, t[r]), y0[r]);
                y1[r] = _mm512_fmadd_ps(xo, _mm512_permutexvar_ps(_mm512_srli_epi32(w, 4), t[r]), y1[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(y0[r], y1[r]));
}

static inline __attribute__((always_inline)) T512 void q4_gemv_512_(const int hasoff, long M, long N, long K,
                                                                   const float *xs, const fk_q4matrix *W, long n0,
                                                                   float *C, long ldc, const float *bias, int acc) {
    const long stride = fk_q4_split_floats(K);
    long j = 0;
    for (; j + 4 <= N; j += 4) {
        for (long m = 0; m < M; m++) {
            float y[4];
            q4_rows_512(4, hasoff, K, xs + m * stride, W, n0 + j, y);
            for (int r = 0; r < 4; r++) q4_store(C + m * ldc + j + r, y[r], bias, j + r, acc);
        }
    }
    for (; j < N; j++) {
        for (long m = 0; m < M; m++) {
            float y;
            q4_rows_512(1, hasoff, K, xs + m * stride, W, n0 + j, &y);
            q4_store(C + m * ldc + j, y, bias, j, acc);
        }
    }
}

static T512 void q4_gemv_512(long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C, long ldc,
                             const float *bias, int acc) {
    if (W->offset) q4_gemv_512_(1, M, N, K, xs, W, n0, C, ldc, bias, acc);
    else q4_gemv_512_(0, M, N, K, xs, W, n0, C, ldc, bias, acc);
}
#endif

void fk_q4_gemv(long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C, long ldc,
                const float *bias, int acc) {
    if (M <= 0 || N <= 0) return;
#if FK_X86
    const int level = fk_simd_level();
    if (level >= 2) { q4_gemv_512(M, N, K, xs, W, n0, C, ldc, bias, acc); return; }
    if (level >= 1) { q4_gemv_avx2(M, N, K, xs, W, n0, C, ldc, bias, acc); return; }
#endif
    q4_gemv_rows(q4_row_gen, M, N, K, xs, W, n0, C, ldc, bias, acc);
}

void fk_q4_dequant(const fk_q4matrix *W, long r0, long rows, long cols, float *out, long ldo) {
    for (long i = 0; i < rows; i++) {
        const long row = r0 + i, srow = (row / W->block_rows) * W->scale_ld, base = row * W->ld;
        float *o = out + i * ldo;
        long c = 0;
        while (c < cols) {
            const long b = c / W->block_cols, end = (b + 1) * W->block_cols < cols ? (b + 1) * W->block_cols : cols;
            const float s = q4_scale(W, srow + b), off = q4_offset8(W, srow + b) - 8.0f;
            for (; c < end; c++) {
                const long e = base + c;
                const unsigned u = (W->data[e >> 1] >> ((e & 1) * 4)) & 15u;
                o[c] = s * ((float)((int)(u ^ 8u) - 8) - off);
            }
        }
    }
}
