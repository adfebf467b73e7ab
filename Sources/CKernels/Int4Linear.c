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
// - 1 = AVX2 + FMA + F16C (8 lanes, 4 weight rows a pass): each weight dequantized s · (q − o)
//   (the bytes zero-extended to int32, each nibble's value q made a float by an xor into the
//   bits of 2^23 + (u ^ 8) and a subtraction, minus o, times s) and multiplied by x, as level 2 and a dequantize-then-matmul compute it.
//   (It summed x · (q + 8) per block and subtracted Σ s · (o + 8) · Σx per row: cheaper, but
//   activations sharing a large offset cancelled — max error 1.3 on outputs ~7e4 with
//   x ≈ 1000, K = 4096, vs 0.02 at level 2 — and an inf activation gave inf − inf = NaN.)
// - 0 = portable C: per block a table of the 16 dequantized values s · (q − o), indexed by the
//   nibbles (level 2's arithmetic, one weight at a time): no sum or correction, so inf and NaN
//   activations propagate as a dequantize-then-matmul propagates them.
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
    const float *even = xs, *odd = xs + K / 2;
    const uint8_t *p = W->data + row * (W->ld / 2);
    const long per = W->block_cols / Q4_RUN, blocks = K / W->block_cols, srow = (row / W->block_rows) * W->scale_ld;
    float y = 0;
    for (long b = 0; b < blocks; b++) {
        // t[u ^ 8] = s · (q − o) for the nibble u of value q: (u ^ 8) − 8 = q.
        const float s = q4_scale(W, srow + b), o8 = q4_offset8(W, srow + b);
        float t[16];
        for (int v = 0; v < 16; v++) t[v] = ((float)v - o8) * s;
        for (long i = b * per * 16; i < (b + 1) * per * 16; i++) {
            const unsigned u = p[i] ^ 0x88u;
            y += even[i] * t[u & 15u] + odd[i] * t[u >> 4];
        }
    }
    *out = y;
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

/// The column and activation-row drivers of one SIMD level, over its
/// `q4_rows_<SFX>(nr, nm, flag, K, xs, stride, W, row, y)` (nr weight rows × nm activation rows,
/// `flag` a per-level constant): `q4_cols_<SFX>` walks the N weight rows from n0 against `nm`
/// activation rows, `nr` rows a pass (then one); `q4_gemv_<SFX>_` takes the activation rows 4 at a
/// time — 1 row against 4 weight rows a pass, 2 against 2, 3 or 4 against 1 — so each decoded run
/// serves every activation row.
#define Q4_DRIVERS(SFX, TARGET)                                                                                   \
    static inline __attribute__((always_inline)) TARGET void q4_cols_##SFX(                                       \
        const int nr, const int nm, const int flag, long N, long K, const float *xs, const fk_q4matrix *W,        \
        long n0, float *C, long ldc, const float *bias, int acc) {                                                \
        const long stride = fk_q4_split_floats(K);                                                                \
        long j = 0;                                                                                               \
        float y[4];                                                                                               \
        for (; j + nr <= N; j += nr) {                                                                            \
            q4_rows_##SFX(nr, nm, flag, K, xs, stride, W, n0 + j, y);                                             \
            for (int r = 0; r < nr; r++)                                                                          \
                for (int m = 0; m < nm; m++) q4_store(C + m * ldc + j + r, y[r * nm + m], bias, j + r, acc);      \
        }                                                                                                         \
        for (; j < N; j++) {                                                                                      \
            q4_rows_##SFX(1, nm, flag, K, xs, stride, W, n0 + j, y);                                              \
            for (int m = 0; m < nm; m++) q4_store(C + m * ldc + j, y[m], bias, j, acc);                           \
        }                                                                                                         \
    }                                                                                                             \
    static inline __attribute__((always_inline)) TARGET void q4_gemv_##SFX##_(                                    \
        const int flag, long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C,         \
        long ldc, const float *bias, int acc) {                                                                   \
        const long stride = fk_q4_split_floats(K);                                                                \
        for (long m0 = 0; m0 < M; m0 += 4) {                                                                      \
            const float *x = xs + m0 * stride;                                                                    \
            float *c = C + m0 * ldc;                                                                              \
            switch (M - m0 < 4 ? M - m0 : 4) {                                                                    \
            case 1: q4_cols_##SFX(4, 1, flag, N, K, x, W, n0, c, ldc, bias, acc); break;                          \
            case 2: q4_cols_##SFX(2, 2, flag, N, K, x, W, n0, c, ldc, bias, acc); break;                          \
            case 3: q4_cols_##SFX(1, 3, flag, N, K, x, W, n0, c, ldc, bias, acc); break;                          \
            default: q4_cols_##SFX(1, 4, flag, N, K, x, W, n0, c, ldc, bias, acc); break;                         \
            }                                                                                                     \
        }                                                                                                         \
    }


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

/// What the row bodies of both levels read per block of the `nr` weight rows from `row`: the
/// scales widened into sc[r] (fp32), the offsets at off[r] (NULL without `hasoff`).
static inline __attribute__((always_inline)) T256 void q4_rows_scales(const int nr, const int hasoff, const fk_q4matrix *W,
                                                                     long row, long blocks, float sc[][Q4_MAX_BLOCKS],
                                                                     const float *off[]) {
    for (int r = 0; r < nr; r++) {
        const long srow = ((row + r) / W->block_rows) * W->scale_ld;
        q4_row_scales(W, srow, blocks, sc[r]);
        off[r] = hasoff ? W->offset + srow : NULL;
    }
    // The scales of the rows the weight prefetch has reached (Q4_PREFETCH bytes ahead of
    // these: ld / 2 bytes a row), a stream of their own (see ck_prefetch_scales).
    if (W->ld >= 2)
        ck_prefetch_scale_rows(W->scale ? (uintptr_t)W->scale : (uintptr_t)W->scale_h, W->scale ? 4 : 2, W->block_rows,
                               W->scale_ld, row + Q4_PREFETCH / (W->ld / 2), nr);
}

/// Prefetches the `nr` weight rows (`half` bytes apart from `p0`) Q4_PREFETCH bytes ahead of
/// run `c`, on every fourth run (16 bytes a run: one 64-byte line each).
static inline __attribute__((always_inline)) T256 void q4_prefetch_rows(const int nr, long c, const uint8_t *p0, long half) {
    if ((c & 3) == 0)
        for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(p0 + r * half + c * 16 + Q4_PREFETCH), _MM_HINT_T0);
}

/// Nibbles u (0 … 15, one an int32 lane) → their two's complement values q as floats, exactly:
/// the bits 0x4B000000 | (u ^ 8) are the float 2^23 + (u ^ 8), and (u ^ 8) − 8 = q, so one xor and
/// one subtraction (no shift pair, no int → float conversion on the multiply ports).
static inline __attribute__((always_inline)) T256 __m256 q4_nibble_values_avx2(__m256i u) {
    return _mm256_sub_ps(_mm256_castsi256_ps(_mm256_xor_si256(u, _mm256_set1_epi32(0x4B000008))), _mm256_set1_ps(8388616.0f));
}

/// `nr` weight rows from `row` against `nm` split activation rows (`xs`, `stride` floats
/// apart; nr · nm ≤ 4); out[r · nm + m]. Each weight is dequantized, s · (q − o) (`hasoff`:
/// with the offset), then multiplied by x — a dequantize-then-matmul's products, no per-block
/// sum or correction. A run's 16 bytes zero-extend to int32 lanes (`vpmovzxbd`, 8 at a time):
/// the low 4 bits are the even column's nibble, a shift right by 4 gives the odd one's; each
/// nibble becomes its two's complement value q as a float (q4_nibble_values_avx2), minus the offset,
/// times the scale, once for all `nm` activation rows; each run's activations are loaded once
/// for the `nr` weight rows. Even and odd columns sum into separate registers.
static inline __attribute__((always_inline)) T256 void q4_rows_avx2(const int nr, const int nm, const int hasoff, long K,
                                                                   const float *xs, long stride, const fk_q4matrix *W,
                                                                   long row, float *out) {
    const long per = W->block_cols / Q4_RUN, blocks = K / W->block_cols, half = W->ld / 2;
    const uint8_t *p0 = W->data + row * half;
    float sc[4][Q4_MAX_BLOCKS];
    const float *off[4];
    __m256 ye[4][4], yo[4][4];
    const __m256i lo4 = _mm256_set1_epi32(0xF);
    q4_rows_scales(nr, hasoff, W, row, blocks, sc, off);
    for (int r = 0; r < nr; r++)
        for (int m = 0; m < nm; m++) ye[r][m] = yo[r][m] = _mm256_setzero_ps();
    for (long b = 0; b < blocks; b++) {
        __m256 s[4], o[4];
        for (int r = 0; r < nr; r++) {
            s[r] = _mm256_broadcast_ss(sc[r] + b);
            o[r] = hasoff ? _mm256_broadcast_ss(off[r] + b) : _mm256_setzero_ps();
        }
        for (long c = b * per; c < (b + 1) * per; c++) {
            const long i = c * 16;
            q4_prefetch_rows(nr, c, p0, half);
            for (int r = 0; r < nr; r++) {
                const __m128i v = _mm_loadu_si128((const __m128i *)(p0 + r * half + i));
                const __m256i w0 = _mm256_cvtepu8_epi32(v), w1 = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
                __m256 e0 = q4_nibble_values_avx2(_mm256_and_si256(w0, lo4));
                __m256 e1 = q4_nibble_values_avx2(_mm256_and_si256(w1, lo4));
                __m256 o0 = q4_nibble_values_avx2(_mm256_srli_epi32(w0, 4));
                __m256 o1 = q4_nibble_values_avx2(_mm256_srli_epi32(w1, 4));
                if (hasoff) {
                    e0 = _mm256_sub_ps(e0, o[r]);
                    e1 = _mm256_sub_ps(e1, o[r]);
                    o0 = _mm256_sub_ps(o0, o[r]);
                    o1 = _mm256_sub_ps(o1, o[r]);
                }
                e0 = _mm256_mul_ps(e0, s[r]);
                e1 = _mm256_mul_ps(e1, s[r]);
                o0 = _mm256_mul_ps(o0, s[r]);
                o1 = _mm256_mul_ps(o1, s[r]);
                for (int m = 0; m < nm; m++) {
                    const float *x = xs + m * stride + i;
                    ye[r][m] = _mm256_fmadd_ps(_mm256_loadu_ps(x), e0, ye[r][m]);
                    yo[r][m] = _mm256_fmadd_ps(_mm256_loadu_ps(x + K / 2), o0, yo[r][m]);
                    ye[r][m] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), e1, ye[r][m]);
                    yo[r][m] = _mm256_fmadd_ps(_mm256_loadu_ps(x + K / 2 + 8), o1, yo[r][m]);
                }
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int m = 0; m < nm; m++) out[r * nm + m] = q4_hsum256(_mm256_add_ps(ye[r][m], yo[r][m]));
}

Q4_DRIVERS(avx2, T256)

static T256 void q4_gemv_avx2(long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C, long ldc,
                              const float *bias, int acc) {
    if (W->offset) q4_gemv_avx2_(1, M, N, K, xs, W, n0, C, ldc, bias, acc);
    else q4_gemv_avx2_(0, M, N, K, xs, W, n0, C, ldc, bias, acc);
}

// MARK: - level 2: AVX-512

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/// The table of a nibble u (0 … 15) → its two's complement value q, in lane u.
static const float q4_values[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};

/// `nr` weight rows from `row` against `nm` split activation rows (`xs`, `stride` floats
/// apart; nr · nm ≤ 4); out[r · nm + m]. Per block each row's table holds its 16 dequantized
/// values s · (q − o) (`hasoff`: with the offset); a run's 16 bytes widen to 16 lanes
/// (`vpmovzxbd`) whose bits 0 … 3 (the even columns) and, shifted, 4 … 7 (the odd ones) index
/// the table (`vpermps` reads the low 4 bits of each index), once for all `nm` activation rows;
/// each run's activations are loaded once for the `nr` weight rows.
static inline __attribute__((always_inline)) T512 void q4_rows_512(const int nr, const int nm, const int hasoff, long K,
                                                                  const float *xs, long stride, const fk_q4matrix *W,
                                                                  long row, float *out) {
    const long per = W->block_cols / Q4_RUN, blocks = K / W->block_cols, half = W->ld / 2;
    const uint8_t *p0 = W->data + row * half;
    float sc[4][Q4_MAX_BLOCKS];
    const float *off[4];
    __m512 y0[4][4], y1[4][4];
    const __m512 values = _mm512_loadu_ps(q4_values);
    q4_rows_scales(nr, hasoff, W, row, blocks, sc, off);
    for (int r = 0; r < nr; r++)
        for (int m = 0; m < nm; m++) y0[r][m] = y1[r][m] = _mm512_setzero_ps();
    for (long b = 0; b < blocks; b++) {
        __m512 t[4];
        for (int r = 0; r < nr; r++) {
            const __m512 q = hasoff ? _mm512_sub_ps(values, _mm512_set1_ps(off[r][b])) : values;
            t[r] = _mm512_mul_ps(q, _mm512_set1_ps(sc[r][b]));
        }
        for (long c = b * per; c < (b + 1) * per; c++) {
            const long i = c * 16;
            q4_prefetch_rows(nr, c, p0, half);
            __m512 xe[4], xo[4];
            for (int m = 0; m < nm; m++) {
                xe[m] = _mm512_loadu_ps(xs + m * stride + i);
                xo[m] = _mm512_loadu_ps(xs + m * stride + K / 2 + i);
            }
            for (int r = 0; r < nr; r++) {
                const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p0 + r * half + i)));
                const __m512 we = _mm512_permutexvar_ps(w, t[r]), wo = _mm512_permutexvar_ps(_mm512_srli_epi32(w, 4), t[r]);
                for (int m = 0; m < nm; m++) {
                    y0[r][m] = _mm512_fmadd_ps(xe[m], we, y0[r][m]);
                    y1[r][m] = _mm512_fmadd_ps(xo[m], wo, y1[r][m]);
                }
            }
        }
    }
    for (int r = 0; r < nr; r++)
        for (int m = 0; m < nm; m++) out[r * nm + m] = _mm512_reduce_add_ps(_mm512_add_ps(y0[r][m], y1[r][m]));
}

Q4_DRIVERS(512, T512)

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

// MARK: - int8 activations (opt-in: `--activations int8`)
//
// Each activation row is quantized per block of 32 as the int8-weight route does (llama.cpp's
// Q8_0: fk__qx_quantize_*, d = max|x| / 127, q = round-to-nearest-even(x / d)), then split per
// block into its 16 even then 16 odd columns, to meet a block's 16 low then 16 high nibbles.
// Per block: Σ q_x · q_w in int32 (the nibbles ^ 8 = q_w + 8 unsigned, the + 8 taken off by
// −8 · Σ q_x in lane 0 of the starting sum `xc`), scaled by s_w · d in fp32; the offsets' term
// Σ s_w · d · o · Σ q_x once per row — the arithmetic of the int8-weight route (its level 0
// exactly).

/// Q8 activations of M rows: `xq` [M, K] split per block, `xd` / `xs` [M, K / 32] (scale, Σq),
/// `xc` [M, K / 32, 8] (−8 · Σq in lane 0).
typedef struct {
    const int8_t *xq;
    const float *xd, *xs;
    const int32_t *xc;
} q4_q8x;

/// The level-0 body: one weight row at a time, plain loops.
static void q4q8_gen(long M, long N, long K, const q4_q8x *x, const fk_q4matrix *W, long n0, float *C, long ldc,
                     const float *bias, int acc) {
    const long nb = K / 32, per = W->block_cols / 32;
    for (long j = 0; j < N; j++) {
        const long row = n0 + j, srow = (row / W->block_rows) * W->scale_ld;
        const uint8_t *p = W->data + row * (W->ld / 2);
        for (long m = 0; m < M; m++) {
            float t = 0, corr = 0;
            for (long b = 0; b < nb; b++) {
                const int8_t *xe = x->xq + m * K + b * 32, *xo = xe + 16;
                int32_t s = 0;
                for (int i = 0; i < 16; i++) {
                    const unsigned u = p[b * 16 + i] ^ 0x88u;
                    s += (int32_t)xe[i] * ((int32_t)(u & 15u) - 8) + (int32_t)xo[i] * ((int32_t)(u >> 4) - 8);
                }
                const float sc = q4_scale(W, srow + b / per) * x->xd[m * nb + b];
                t += (float)s * sc;
                if (W->offset) corr += sc * W->offset[srow + b / per] * x->xs[m * nb + b];
            }
            q4_store(C + m * ldc + j, t - corr, bias, j, acc);
        }
    }
}

#if FK_X86
#define TVNNI4 __attribute__((target("avx512vnni,avx512vl,avx512f,avx512bw,avx2,fma,f16c")))

/// The 32 nibbles ^ 8 (q + 8, 0 … 15) of block `b` of a row as bytes: the 16 low nibbles, then
/// the 16 high ones (the split order of the activations).
static inline __attribute__((always_inline)) T256 __m256i q4_nibbles_avx2(const uint8_t *p) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8((char)0x88));
    const __m128i m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/// Levels 1 (vpmaddubsw + vpmaddwd) and 2 with VNNI (vpdpbusd): one weight row at a time, each
/// block's nibbles widened once for up to 4 activation rows. `DOT(c, u, x)`: c + the 8 int32
/// sums of 4 products u · x (u unsigned, x signed bytes).
#define Q4Q8_BODY(NAME, TARGET, DOT)                                                                                   \
    static TARGET void NAME(long M, long N, long K, const q4_q8x *x, const fk_q4matrix *W, long n0, float *C, long ldc, \
                            const float *bias, int acc)                                                                \
{                                                                                                                      \
    const long nb = K / 32, per = W->block_cols / 32, blocks = K / W->block_cols, half = W->ld / 2;                    \
    float sc[Q4_MAX_BLOCKS];                                                                                           \
    for (long m0 = 0; m0 < M; m0 += 4) {                                                                               \
        const int nm = M - m0 < 4 ? (int)(M - m0) : 4;                                                                 \
        for (long j = 0; j < N; j++) {                                                                                 \
            const long row = n0 + j, srow = (row / W->block_rows) * W->scale_ld;                                       \
            const uint8_t *p = W->data + row * half;                                                                   \
            q4_row_scales(W, srow, blocks, sc);                                                                        \
            __m256 t[4];                                                                                               \
            float corr[4] = {0, 0, 0, 0};                                                                              \
            for (int m = 0; m < nm; m++) t[m] = _mm256_setzero_ps();                                                   \
            for (long b = 0; b < nb; b++) {                                                                            \
                if ((b & 3) == 0) _mm_prefetch((const char *)(p + b * 16 + Q4_PREFETCH), _MM_HINT_T0);                 \
                const __m256i u = q4_nibbles_avx2(p + b * 16);                                                         \
                for (int m = 0; m < nm; m++) {                                                                         \
                    const long mb = (m0 + m) * nb + b;                                                                 \
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(x->xq + (m0 + m) * K + b * 32));           \
                    const __m256i c = _mm256_loadu_si256((const __m256i *)(x->xc + mb * 8));                           \
                    const __m256i d = DOT(c, u, xv);                                                                   \
                    const float s = sc[b / per] * x->xd[mb];                                                           \
                    t[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(s), t[m]);                            \
                    if (W->offset) corr[m] += s * W->offset[srow + b / per] * x->xs[mb];                               \
                }                                                                                                      \
            }                                                                                                          \
            for (int m = 0; m < nm; m++) q4_store(C + (m0 + m) * ldc + j, q4_hsum256(t[m]) - corr[m], bias, j, acc);   \
        }                                                                                                              \
    }                                                                                                                  \
}

#define Q4Q8_VNNI(c, u, x) _mm256_dpbusd_epi32(c, u, x)
#define Q4Q8_AVX2(c, u, x) _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1)), c)
Q4Q8_BODY(q4q8_vnni, TVNNI4, Q4Q8_VNNI)
Q4Q8_BODY(q4q8_avx2, T256, Q4Q8_AVX2)
#endif

int fk_q4_gemv_q8(long M, long N, long K, const float *A, long lda, const fk_q4matrix *W, long n0, float *C, long ldc,
                  const float *bias, int acc) {
    if (M <= 0 || N <= 0) return 1;
    if (!fk_q4_gemv_fits(W, K)) return -1;
    const long nb = K / 32;
    const int l = fk_simd_level();
    // Scratch: xc (64-byte aligned int32 [M, nb, 8]), xd, xs, xq [M, K], one row in column order.
    const size_t xcBytes = (size_t)(M * nb * 8) * sizeof(int32_t), fBytes = (size_t)(M * nb) * sizeof(float);
    const size_t need = xcBytes + 2 * fBytes + (size_t)(M * K + K), fp32 = (size_t)(M * fk_q4_split_floats(K)) * sizeof(float);
    char *buf = ck_scratch(3, need > fp32 ? need : fp32);
    if (!buf) return -1;
    int32_t *xc = (int32_t *)buf;
    float *xd = (float *)(buf + xcBytes), *xs = xd + M * nb;
    int8_t *xq = (int8_t *)(xs + M * nb), *row = xq + M * K;
    for (long m = 0; m < M; m++) {
#if FK_X86
        const int ok = l >= 1 ? fk__qx_quantize_avx2(8, K, A + m * lda, row, xd + m * nb, xs + m * nb)
                              : fk__qx_quantize_gen(8, K, A + m * lda, row, xd + m * nb, xs + m * nb);
#else
        const int ok = fk__qx_quantize_gen(8, K, A + m * lda, row, xd + m * nb, xs + m * nb);
#endif
        if (!ok) {
            // an inf or NaN activation: the exact fp32 route propagates it as the graph does
            float *split = (float *)buf;
            fk_q4_split(M, K, A, lda, split);
            fk_q4_gemv(M, N, K, split, W, n0, C, ldc, bias, acc);
            return 0;
        }
        int8_t *q = xq + m * K;
        for (long b = 0; b < nb; b++)
            for (int i = 0; i < 16; i++) {
                q[b * 32 + i] = row[b * 32 + 2 * i];
                q[b * 32 + 16 + i] = row[b * 32 + 2 * i + 1];
            }
    }
    memset(xc, 0, xcBytes);
    for (long i = 0; i < M * nb; i++) xc[i * 8] = -8 * (int32_t)xs[i];
    const q4_q8x x = {xq, xd, xs, xc};
#if FK_X86
    if (l >= 2 && fk_cpu_has_vnni()) { q4q8_vnni(M, N, K, &x, W, n0, C, ldc, bias, acc); return 1; }
    if (l >= 1) { q4q8_avx2(M, N, K, &x, W, n0, C, ldc, bias, acc); return 1; }
#endif
    q4q8_gen(M, N, K, &x, W, n0, C, ldc, bias, acc);
    return 1;
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
