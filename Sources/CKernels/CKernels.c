// See include/CKernels.h. Levels 0 and 1: every kernel body below is written once with
// GCC/Clang vector extensions (8 x float) as an always-inline function, then instantiated
// twice: inside a `target("avx2,fma,f16c")` function (x86-64 only) and inside a plain function
// compiled for the baseline ISA. Level 2 (AVX-512) lives in KernelsAVX512.c. The public entry
// points at the end choose a body at run time (fk_simd_level).
//
// The fp32 kernels are dot-product shaped ("NT": both operands walk along K contiguously)
// with a 4x3 register tile of 8-wide accumulators (12 of the 16 ymm registers), or an
// outer-product tile for "NN" (A broadcast, B rows along N). `c += a * b` contracts to one
// FMA under -ffp-contract=on (clang's default) where FMA exists.
//
// fp16 block scales (fk_qmatrix.scale_h) are widened to fp32 a chunk of blocks at a time by a
// per-level function passed to the bodies (portable C, or F16C), so the hot loops only ever
// read fp32 scales.
//
// The file ends with a tiny worker pool (fk_parallel_run): workers spin for a while after a
// job, so the ~20 µs products of a decode step can be split across cores at all.

#define _GNU_SOURCE  // sched_getaffinity
#include "ck_internal.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// The helpers passing 8-float vectors by value are always inlined: no call ABI is involved.
#pragma clang diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((vector_size(32)));
typedef int8_t v8b __attribute__((vector_size(8)));

#define AI static inline __attribute__((always_inline))

AI v8f ld8(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
AI void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }
AI v8f ldq8(const int8_t *p) { v8b b; memcpy(&b, p, sizeof b); return __builtin_convertvector(b, v8f); }
AI v8f splat(float s) { return (v8f){s, s, s, s, s, s, s, s}; }
AI float hsum8(v8f v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
AI long lmin(long a, long b) { return a < b ? a : b; }

/// Prefetch distance (bytes ahead in the weight stream) of the int8 matrix-vector loop, and
/// its __builtin_prefetch locality (2 = prefetcht1: into L2).
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif
#ifndef PF_LOC
#define PF_LOC 2
#endif

/// Rows of A kept hot in L2 while the tiles walk all of B.
#define L2_BYTES_FOR_A (192L * 1024L)

// MARK: - NT: C = A · Bᵀ

AI void nt_tile(const int mr, const int nr, long K, const float *A, long lda, const float *B, long ldb,
                float *C, long ldc, const float *bias, int acc) {
    v8f c[4][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i][j] = splat(0);
    long k = 0;
    for (; k + 8 <= K; k += 8) {
        v8f b[4];
        for (int j = 0; j < nr; j++) b[j] = ld8(B + j * ldb + k);
        for (int i = 0; i < mr; i++) {
            v8f a = ld8(A + i * lda + k);
            for (int j = 0; j < nr; j++) c[i][j] += a * b[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float s = hsum8(c[i][j]);
            for (long kk = k; kk < K; kk++) s += A[i * lda + kk] * B[j * ldb + kk];
            if (bias) s += bias[j];
            float *d = C + i * ldc + j;
            *d = acc ? *d + s : s;
        }
    }
}

#define NT_CASE(MR, NR) \
    case (MR) * 8 + (NR): nt_tile(MR, NR, K, A, lda, B, ldb, C, ldc, bias, acc); break;

AI void nt_tile_any(int mr, int nr, long K, const float *A, long lda, const float *B, long ldb,
                    float *C, long ldc, const float *bias, int acc) {
    switch (mr * 8 + nr) {
        NT_CASE(1, 1) NT_CASE(1, 2) NT_CASE(1, 3) NT_CASE(1, 4)
        NT_CASE(2, 1) NT_CASE(2, 2) NT_CASE(2, 3) NT_CASE(2, 4)
        NT_CASE(3, 1) NT_CASE(3, 2) NT_CASE(3, 3) NT_CASE(3, 4)
        NT_CASE(4, 1) NT_CASE(4, 2) NT_CASE(4, 3)
        default: break;
    }
}

AI void sgemm_nt_body(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                      float *C, long ldc, const float *bias, int acc) {
    if (M <= 0 || N <= 0) return;
    if (M < 4) {
        // Matrix-vector shape: each x row against 4 weight rows at a time.
        for (long n = 0; n < N; n += 4) {
            int nr = (int)lmin(4, N - n);
            nt_tile_any((int)M, nr, K, A, lda, B + n * ldb, ldb, C + n, ldc, bias ? bias + n : NULL, acc);
        }
        return;
    }
    long mc = L2_BYTES_FOR_A / ((K > 0 ? K : 1) * (long)sizeof(float));
    mc = mc / 4 * 4;
    if (mc < 4) mc = 4;
    for (long m0 = 0; m0 < M; m0 += mc) {
        long m1 = lmin(M, m0 + mc);
        for (long n = 0; n < N; n += 3) {
            int nr = (int)lmin(3, N - n);
            for (long m = m0; m < m1; m += 4) {
                int mr = (int)lmin(4, m1 - m);
                nt_tile_any(mr, nr, K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc,
                            bias ? bias + n : NULL, acc);
            }
        }
    }
}

// MARK: - NN: C = A · B

AI void nn_tile(const int mr, const int nv, long K, const float *A, long lda, const float *B, long ldb,
                float *C, long ldc, const float *bias, int acc) {
    v8f c[6][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nv; j++) c[i][j] = splat(0);
    for (long k = 0; k < K; k++) {
        v8f b[4];
        for (int j = 0; j < nv; j++) b[j] = ld8(B + k * ldb + 8 * j);
        for (int i = 0; i < mr; i++) {
            v8f a = splat(A[i * lda + k]);
            for (int j = 0; j < nv; j++) c[i][j] += a * b[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nv; j++) {
            v8f v = c[i][j];
            if (bias) v += ld8(bias + 8 * j);
            float *d = C + i * ldc + 8 * j;
            if (acc) v += ld8(d);
            st8(d, v);
        }
    }
}

#define NN_CASE(MR, NV) \
    case (MR) * 8 + (NV): nn_tile(MR, NV, K, A, lda, B, ldb, C, ldc, bias, acc); break;

AI void nn_tile_any(int mr, int nv, long K, const float *A, long lda, const float *B, long ldb,
                    float *C, long ldc, const float *bias, int acc) {
    switch (mr * 8 + nv) {
        NN_CASE(1, 1) NN_CASE(1, 2) NN_CASE(1, 4)
        NN_CASE(2, 1) NN_CASE(2, 2) NN_CASE(2, 4)
        NN_CASE(3, 1) NN_CASE(3, 2) NN_CASE(3, 4)
        NN_CASE(4, 1) NN_CASE(4, 2)
        NN_CASE(5, 1) NN_CASE(5, 2)
        NN_CASE(6, 1) NN_CASE(6, 2)
        default: break;
    }
}

AI void sgemm_nn_body(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                      float *C, long ldc, const float *bias, int acc) {
    if (M <= 0 || N <= 0) return;
    const long n8 = N / 8 * 8;
    // Columns in strips of 32 (small M) or 16, then of 8.
    const int small = M <= 3;
    const int mrMax = small ? (int)M : 6;
    const int nvMax = small ? 4 : 2;
    long mc = L2_BYTES_FOR_A / ((K > 0 ? K : 1) * (long)sizeof(float));
    mc = mc / 6 * 6;
    if (mc < 6) mc = 6;
    for (long m0 = 0; m0 < M; m0 += mc) {
        long m1 = lmin(M, m0 + mc);
        long n = 0;
        while (n < n8) {
            int nv = (n + 8 * nvMax <= n8) ? nvMax : 1;
            for (long m = m0; m < m1; m += mrMax) {
                int mr = (int)lmin(mrMax, m1 - m);
                nn_tile_any(mr, nv, K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc,
                            bias ? bias + n : NULL, acc);
            }
            n += 8 * nv;
        }
        // Column tail (< 8 columns).
        for (long m = m0; m < m1; m++) {
            for (long j = n8; j < N; j++) {
                float s = 0;
                for (long k = 0; k < K; k++) s += A[m * lda + k] * B[k * ldb + j];
                if (bias) s += bias[j];
                float *d = C + m * ldc + j;
                *d = acc ? *d + s : s;
            }
        }
    }
}

// MARK: - int8 block-quantized weights

/// Widens `n` IEEE binary16 values to fp32 (one body per level: portable C, or F16C).
typedef void (*h2f_fn)(const uint16_t *h, float *f, long n);

static void h2f_row_gen(const uint16_t *h, float *f, long n) {
    for (long i = 0; i < n; i++) f[i] = fk__h2f(h[i]);
}

/// Scales idx ..< idx+n of W as fp32: `W->scale` itself, or the fp16 scales widened into `buf`.
AI const float *scales_of(const fk_qmatrix *W, long idx, long n, float *buf, h2f_fn cvt) {
    if (W->scale) return W->scale + idx;
    cvt(W->scale_h + idx, buf, n);
    return buf;
}

AI float scale_at(const fk_qmatrix *W, long idx, h2f_fn cvt) {
    float f;
    return *scales_of(W, idx, 1, &f, cvt);
}

/// Blocks whose scales are widened at once (fp16 scales) in the int8 loops.
#define SC_CHUNK 64

AI void dequant_body(const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo, h2f_fn cvt) {
    const long bc = W->block_cols;
    float sbuf[SC_CHUNK];
    for (long i = 0; i < rows; i++) {
        const long r = r0 + i;
        const int8_t *q = W->data + r * W->ld;
        const long srow = (r / W->block_rows) * W->scale_ld;
        const float *o = W->offset ? W->offset + srow : NULL;
        float *d = out + i * ldo;
        // Columns in runs of up to SC_CHUNK blocks (the scales of a run are fetched at once).
        long c = 0;
        while (c < cols) {
            const long b0 = (c0 + c) / bc;
            const long cend = lmin(cols, (b0 + SC_CHUNK) * bc - c0);
            const float *s = scales_of(W, srow + b0, (c0 + cend - 1) / bc - b0 + 1, sbuf, cvt);
            if (bc % 8 == 0 && (c0 + c) % bc == 0 && (cend - c) % bc == 0) {
                for (; c < cend; c += bc) {
                    const long b = (c0 + c) / bc;
                    const v8f sv = splat(s[b - b0]), ov = splat(o ? o[b] : 0.0f);
                    for (long e = c; e < c + bc; e += 8) st8(d + e, (ldq8(q + c0 + e) - ov) * sv);
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

/// `nr` (≤ 4) weight rows starting at absolute row `n` against one activation row `x`:
/// per block, an 8-wide float accumulator of x·q per row, then `total += scale · acc`; with an
/// offset, `scale · offset · Σx_block` (block sums `xsum`, precomputed once per activation row)
/// is subtracted in a scalar. Needs block_cols % 8 == 0.
AI void q_rows(const int nr, const int has_off, long K, const float *x, const float *xsum, const fk_qmatrix *W, long n,
               float *y, const float *bias, int acc, h2f_fn cvt) {
    const long bc = W->block_cols;
    const long nb = K / bc;
    const int8_t *q[4];
    long srow[4];
    const float *o[4];
    for (int r = 0; r < nr; r++) {
        q[r] = W->data + (n + r) * W->ld;
        srow[r] = ((n + r) / W->block_rows) * W->scale_ld;
        o[r] = has_off ? W->offset + srow[r] : NULL;
    }
    float sbuf[4][SC_CHUNK];
    v8f t[4];
    float corr[4];
    for (int r = 0; r < nr; r++) t[r] = splat(0), corr[r] = 0;
    for (long b0 = 0; b0 < nb; b0 += SC_CHUNK) {
        const long nbk = lmin(SC_CHUNK, nb - b0);
        const float *s[4];
        for (int r = 0; r < nr; r++) s[r] = scales_of(W, srow[r] + b0, nbk, sbuf[r], cvt);
        for (long b = b0; b < b0 + nbk; b++) {
            v8f a[4];
            for (int r = 0; r < nr; r++) a[r] = splat(0);
            // At decode the weights stream from DRAM, faster than the hardware prefetcher follows
            // these 4 interleaved rows: prefetch PF_BYTES ahead into L2, once per 64-byte line
            // (measured on one Zen 4 core, all SmolLM2-135M int8 products of a token: 9 GB/s
            // with a non-temporal prefetch 4 KB ahead, 15.7 GB/s into L2 8 KB ahead).
            if (((b * bc) & 63) < bc)
                for (int r = 0; r < nr; r++) __builtin_prefetch(q[r] + b * bc + PF_BYTES, 0, PF_LOC);
            for (long i = b * bc; i < (b + 1) * bc; i += 8) {
                v8f xv = ld8(x + i);
                for (int r = 0; r < nr; r++) a[r] += xv * ldq8(q[r] + i);
            }
            for (int r = 0; r < nr; r++) t[r] += a[r] * s[r][b - b0];
        }
        if (has_off) {
            // Offset term outside the hot loop: Σ_b scale·offset·Σx_block.
            for (int r = 0; r < nr; r++) {
                long b = 0;
                v8f cv = splat(0);
                for (; b + 8 <= nbk; b += 8) cv += ld8(s[r] + b) * ld8(o[r] + b0 + b) * ld8(xsum + b0 + b);
                corr[r] += hsum8(cv);
                for (; b < nbk; b++) corr[r] += s[r][b] * o[r][b0 + b] * xsum[b0 + b];
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        float v = hsum8(t[r]) - corr[r];
        if (bias) v += bias[r];
        y[r] = acc ? y[r] + v : v;
    }
}

#define Q_CASE(NR, OFF) \
    case (NR) * 2 + (OFF): q_rows(NR, OFF, K, x, xsum, W, n, y, bias, acc, cvt); break;

AI void q_rows_any(int nr, int has_off, long K, const float *x, const float *xsum, const fk_qmatrix *W, long n, float *y,
                   const float *bias, int acc, h2f_fn cvt) {
    switch (nr * 2 + has_off) {
        Q_CASE(1, 0) Q_CASE(2, 0) Q_CASE(3, 0) Q_CASE(4, 0)
        Q_CASE(1, 1) Q_CASE(2, 1) Q_CASE(3, 1) Q_CASE(4, 1)
        default: break;
    }
}

/// Up to this many activation rows, int8 rows are dotted directly (per row); above it, a
/// panel of weight rows is dequantized to fp32 once and shared by all activation rows.
#define Q_DIRECT_MAX_M 3
#define Q_PANEL_ROWS 24

AI void qgemm_nt_body(long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0,
                      float *C, long ldc, const float *bias, int acc, h2f_fn cvt) {
    if (M <= 0 || N <= 0) return;
    const int has_off = W->offset != NULL;
    if (M <= Q_DIRECT_MAX_M && W->block_cols % 8 == 0 && K % W->block_cols == 0) {
        // Block sums of each activation row (only needed with offsets).
        const long nb = K / W->block_cols;
        float local[Q_DIRECT_MAX_M * 64];
        float *xsum = local;
        if (has_off && M * nb > Q_DIRECT_MAX_M * 64) {
            xsum = malloc((size_t)(M * nb) * sizeof(float));
            if (!xsum) goto panel_route;  // out of memory: the panel route below
        }
        if (has_off) {
            for (long m = 0; m < M; m++)
                for (long b = 0; b < nb; b++) {
                    float sum = 0;
                    for (long i = b * W->block_cols; i < (b + 1) * W->block_cols; i++) sum += A[m * lda + i];
                    xsum[m * nb + b] = sum;
                }
        }
        for (long j = 0; j < N; j += 4) {
            int nr = (int)lmin(4, N - j);
            for (long m = 0; m < M; m++)
                q_rows_any(nr, has_off, K, A + m * lda, xsum + m * nb, W, n0 + j, C + m * ldc + j, bias ? bias + j : NULL, acc, cvt);
        }
        if (xsum != local) free(xsum);
        return;
    }
panel_route:;
    const long P = lmin(Q_PANEL_ROWS, N);
    float *panel = ck_scratch(2, (size_t)(P * (K > 0 ? K : 1)) * sizeof(float));
    if (!panel) {
        // No memory for a panel: one row at a time on the stack-free scalar route.
        for (long j = 0; j < N; j++) {
            for (long m = 0; m < M; m++) {
                float s = 0;
                for (long k = 0; k < K; k++) {
                    const long r = n0 + j, srow = (r / W->block_rows) * W->scale_ld, b = k / W->block_cols;
                    s += A[m * lda + k] * (((float)W->data[r * W->ld + k] - (has_off ? W->offset[srow + b] : 0.0f)) * scale_at(W, srow + b, cvt));
                }
                if (bias) s += bias[j];
                C[m * ldc + j] = acc ? C[m * ldc + j] + s : s;
            }
        }
        return;
    }
    for (long j = 0; j < N; j += P) {
        long rows = lmin(P, N - j);
        dequant_body(W, n0 + j, rows, 0, K, panel, K, cvt);
        sgemm_nt_body(M, rows, K, A, lda, panel, K, C + j, ldc, bias ? bias + j : NULL, acc);
    }
}

// MARK: - softmax

AI void softmax_body(float *x, long rows, long n, long ld) {
    for (long r = 0; r < rows; r++) {
        float *p = x + r * ld;
        float m = -INFINITY;
        for (long i = 0; i < n; i++) m = p[i] > m ? p[i] : m;
        if (m == -INFINITY) {
            for (long i = 0; i < n; i++) p[i] = NAN;
            continue;
        }
        float s = 0;
        for (long i = 0; i < n; i++) {
            float e = expf(p[i] - m);
            p[i] = e;
            s += e;
        }
        for (long i = 0; i < n; i++) p[i] = p[i] / s;
    }
}

// MARK: - instantiation and dispatch

static void sgemm_nt_gen(FK_ARGS_NT) { sgemm_nt_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
static void sgemm_nn_gen(FK_ARGS_NT) { sgemm_nn_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
static void qgemm_nt_gen(FK_ARGS_Q) { qgemm_nt_body(M, N, K, A, lda, W, n0, C, ldc, bias, acc, h2f_row_gen); }
static void dequant_gen(FK_ARGS_DQ) { dequant_body(W, r0, rows, c0, cols, out, ldo, h2f_row_gen); }

#if FK_X86
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
static AVX2 void h2f_row_f16c(const uint16_t *h, float *f, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = _cvtsh_ss(h[i]);
}
AVX2 void fk__sgemm_nt_avx2(FK_ARGS_NT) { sgemm_nt_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
AVX2 void fk__sgemm_nn_avx2(FK_ARGS_NT) { sgemm_nn_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
AVX2 void fk__qgemm_nt_avx2(FK_ARGS_Q) { qgemm_nt_body(M, N, K, A, lda, W, n0, C, ldc, bias, acc, h2f_row_f16c); }
AVX2 void fk__dequant_avx2(FK_ARGS_DQ) { dequant_body(W, r0, rows, c0, cols, out, ldo, h2f_row_f16c); }
#endif

static int detected_level(void) {
#if FK_X86
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))) return 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return 2;
    return 1;
#else
    return 0;
#endif
}

static int g_level = -1;

int fk_simd_level(void) {
    int l = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = detected_level();
        __atomic_store_n(&g_level, l, __ATOMIC_RELAXED);
    }
    return l;
}

void fk_set_simd_level(int level) {
    int d = detected_level();
    __atomic_store_n(&g_level, level < 0 ? d : (level < d ? level : d), __ATOMIC_RELAXED);
}

void fk_sgemm_nt(FK_ARGS_NT) {
#if FK_X86
    const int l = fk_simd_level();
    if (l >= 2) { fk__sgemm_nt_avx512(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); return; }
    if (l >= 1) { fk__sgemm_nt_avx2(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); return; }
#endif
    sgemm_nt_gen(M, N, K, A, lda, B, ldb, C, ldc, bias, acc);
}

void fk_sgemm_nn(FK_ARGS_NT) {
#if FK_X86
    const int l = fk_simd_level();
    if (l >= 2) { fk__sgemm_nn_avx512(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); return; }
    if (l >= 1) { fk__sgemm_nn_avx2(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); return; }
#endif
    sgemm_nn_gen(M, N, K, A, lda, B, ldb, C, ldc, bias, acc);
}

void fk_qgemm_nt(FK_ARGS_Q) {
#if FK_X86
    const int l = fk_simd_level();
    if (l >= 2) { fk__qgemm_nt_avx512(M, N, K, A, lda, W, n0, C, ldc, bias, acc); return; }
    if (l >= 1) { fk__qgemm_nt_avx2(M, N, K, A, lda, W, n0, C, ldc, bias, acc); return; }
#endif
    qgemm_nt_gen(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
}

void fk_dequant(FK_ARGS_DQ) {
#if FK_X86
    const int l = fk_simd_level();
    if (l >= 2) { fk__dequant_avx512(W, r0, rows, c0, cols, out, ldo); return; }
    if (l >= 1) { fk__dequant_avx2(W, r0, rows, c0, cols, out, ldo); return; }
#endif
    dequant_gen(W, r0, rows, c0, cols, out, ldo);
}

void fk_softmax_rows(float *x, long rows, long n, long ld) { softmax_body(x, rows, n, ld); }

// MARK: - worker pool

// A job is published by bumping `gen`; tasks are claimed with a CAS on `claim` = (gen << 32) |
// next task, so a worker still finishing an older job can never claim a task of a newer one
// (it would see a different generation), and `fn`/`ctx`/`ntasks` read after acquiring `gen`
// belong to the job whose tasks it manages to claim.

#define POOL_MAX_WORKERS 63
#define POOL_SPIN_NS 300000L  // a worker spins this long after its last job, then sleeps

static struct {
    pthread_once_t once;
    int nworkers;
    pthread_mutex_t submit;  // one job at a time
    pthread_mutex_t mu;      // sleeping workers
    pthread_cond_t cv;
    atomic_long gen;
    atomic_ulong claim;
    atomic_long done;
    atomic_int sleepers;
    _Atomic(fk_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_long ntasks;
} pool = {.once = PTHREAD_ONCE_INIT, .submit = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/// Claims and runs tasks of generation `g` until none is left.
static void pool_work(long g) {
    fk_task_fn fn = atomic_load_explicit(&pool.fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&pool.ctx, memory_order_relaxed);
    long n = atomic_load_explicit(&pool.ntasks, memory_order_relaxed);
    const unsigned long tag = (unsigned long)g & 0xFFFFFFFFUL;
    unsigned long c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    for (;;) {
        if ((c >> 32) != tag || (long)(c & 0xFFFFFFFFUL) >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire)) continue;
        fn(ctx, (long)(c & 0xFFFFFFFFUL));
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        c = atomic_load_explicit(&pool.claim, memory_order_acquire);
    }
}

static void *pool_worker(void *arg) {
    (void)arg;
    long seen = atomic_load_explicit(&pool.gen, memory_order_acquire);
    for (;;) {
        long g = atomic_load_explicit(&pool.gen, memory_order_acquire);
        if (g == seen) {
            long start = now_ns();
            int spins = 0;
            while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen) {
                cpu_relax();
                if (++spins % 256 == 0 && now_ns() - start > POOL_SPIN_NS) {
                    pthread_mutex_lock(&pool.mu);
                    atomic_fetch_add(&pool.sleepers, 1);
                    // seq_cst pairs with the publisher's store of gen / load of sleepers.
                    while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.cv, &pool.mu);
                    atomic_fetch_sub(&pool.sleepers, 1);
                    pthread_mutex_unlock(&pool.mu);
                    break;
                }
            }
        }
        seen = g;
        pool_work(g);
    }
    return NULL;
}

/// Threads to use: FORGE_THREADS if set (1 = no pool), else the CPUs this process may run on.
static long pool_threads(void) {
    const char *env = getenv("FORGE_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1) return v;
    }
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c;
    }
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

static void pool_start(void) {
    long cores = pool_threads();
    int n = cores > 1 ? (int)(cores - 1) : 0;
    if (n > POOL_MAX_WORKERS) n = POOL_MAX_WORKERS;
    int started = 0;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, pool_worker, NULL) == 0) started++;
        pthread_attr_destroy(&attr);
    }
    pool.nworkers = started;
}

int fk_parallel_width(void) {
    pthread_once(&pool.once, pool_start);
    return pool.nworkers + 1;
}

void fk_parallel_run(long ntasks, fk_task_fn fn, void *ctx) {
    if (ntasks <= 0) return;
    pthread_once(&pool.once, pool_start);
    if (ntasks == 1 || pool.nworkers == 0 || ntasks > 0x7FFFFFFFL || pthread_mutex_trylock(&pool.submit) != 0) {
        for (long i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    atomic_store_explicit(&pool.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool.ntasks, ntasks, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    long g = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool.claim, ((unsigned long)g & 0xFFFFFFFFUL) << 32, memory_order_release);
    atomic_store(&pool.gen, g);  // seq_cst: either a sleeping worker sees it, or we see the sleeper
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv);
        pthread_mutex_unlock(&pool.mu);
    }
    pool_work(g);
    int spins = 0;
    while (atomic_load_explicit(&pool.done, memory_order_acquire) < ntasks) {
        cpu_relax();
        if (++spins % 4096 == 0) sched_yield();
    }
    pthread_mutex_unlock(&pool.submit);
}
