// Internal to CKernels: what the dispatcher (Dispatch.c), the per-level bodies
// (KernelsPortable.c, KernelsAVX2.c, KernelsAVX512.c), the pool and the scratch share. Not part of the public interface (include/CKernels.h).
#ifndef FORGE_CK_INTERNAL_H
#define FORGE_CK_INTERNAL_H

#include "CKernels.h"

#include <stdint.h>
#include <string.h>

#define FK_HIDDEN __attribute__((visibility("hidden")))

#define FK_ARGS_NT long M, long N, long K, const float *A, long lda, const float *B, long ldb, float *C, long ldc, const float *bias, int acc
#define FK_ARGS_Q long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0, float *C, long ldc, const float *bias, int acc
#define FK_ARGS_DQ const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo
/// The Q8 route (fk_qgemm_nt_q8) after quantization: M activation rows of K int8 values `xq`,
/// per block of 32 their scale `xd` [M, K/32] and Σq `xs` [M, K/32]; `xc` [M, K/32, 8] int32
/// holds −128·Σq in lane 0 (the VNNI body's bias correction), or is NULL.
#define FK_ARGS_Q8 long M, long N, long K, const int8_t *xq, const float *xd, const float *xs, const int32_t *xc, \
                   const fk_qmatrix *W, long n0, float *C, long ldc, const float *bias, int acc
/// The Q16 route (fk_qgemm_nt_q16) after quantization: as FK_ARGS_Q8 with int16 values `xq`
/// and no bias-correction vector.
#define FK_ARGS_Q16 long M, long N, long K, const int16_t *xq, const float *xd, const float *xs, \
                    const fk_qmatrix *W, long n0, float *C, long ldc, const float *bias, int acc

/// IEEE binary16 bits → fp32, portable (exact: every half is a float).
static inline float fk__h2f(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1f) {
        u = sign | 0x7f800000u | (m << 13);  // inf / nan (payload kept)
    } else if (e != 0) {
        u = sign | ((e + 112u) << 23) | (m << 13);  // normal: rebias 15 → 127
    } else if (m != 0) {
        const float f = (float)m * 5.9604644775390625e-8f;  // subnormal: m · 2^-24
        return sign ? -f : f;
    } else {
        u = sign;  // ±0
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/// The bodies of each level. Dispatch.c is the only caller; no level calls another, so each
/// file (KernelsPortable.c, KernelsAVX2.c, KernelsAVX512.c) depends on these headers only.
// Levels 0 and 1 have the same bodies, each taking every shape: fk__<body>_<level>, declared
// once for both here. `qx_quantize` quantizes one activation row for the Q8 (`bits` 8, int8_t
// `q`) or Q16 (16, int16_t) route.
#define FK_EVERY_SHAPE_BODIES(level)                                                                 \
    FK_HIDDEN void fk__sgemm_nt_##level(FK_ARGS_NT);                                                 \
    FK_HIDDEN void fk__sgemm_nn_##level(FK_ARGS_NT);                                                 \
    FK_HIDDEN void fk__qgemm_nt_##level(FK_ARGS_Q);                                                  \
    FK_HIDDEN void fk__dequant_##level(FK_ARGS_DQ);                                                  \
    FK_HIDDEN void fk__softmax_rows_##level(float *x, long rows, long n, long ld);                   \
    FK_HIDDEN void fk__gelu_erf_##level(const float *x, float *y, long n);                           \
    FK_HIDDEN int fk__qx_quantize_##level(int bits, long K, const float *x, void *q, float *d, float *qs); \
    FK_HIDDEN void fk__q8_gemv_##level(FK_ARGS_Q8);                                                  \
    FK_HIDDEN void fk__q16_gemv_##level(FK_ARGS_Q16);
// Level 0 (KernelsPortable.c).
FK_EVERY_SHAPE_BODIES(gen)

// FK_X86: the x86 SIMD bodies (AVX2, AVX-512) are compiled and chosen at run time. Building
// with -DFORGE_PORTABLE (`swift build -Xcc -DFORGE_PORTABLE`, scripts/test-portable.sh) leaves
// them out on x86 too: the portable C bodies only, as on any other CPU.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(FORGE_PORTABLE)
#define FK_X86 1
// Level 1 (KernelsAVX2.c).
FK_EVERY_SHAPE_BODIES(avx2)
// The packed-panel NT route at level 1 (the layout of level 2's fk__sgemm_pack_nt_avx512).
FK_HIDDEN void fk__sgemm_pack_nt_avx2(long N, long K, const float *B, long ldb, float *Bp);
FK_HIDDEN void fk__sgemm_nt_packed_avx2(long M, long N, long K, const float *A, long lda, const float *Bp, long n0, float *C,
                                        long ldc, const float *bias, int acc);
// Level 2 (KernelsAVX512.c): return 1 when done, 0 for a shape (or an out-of-memory case)
// they leave to the level below.
FK_HIDDEN int fk__sgemm_nt_avx512(FK_ARGS_NT);
FK_HIDDEN int fk__sgemm_nn_avx512(FK_ARGS_NT);
FK_HIDDEN void fk__softmax_rows_avx512(float *x, long rows, long n, long ld);
FK_HIDDEN void fk__gelu_erf_avx512(const float *x, float *y, long n);
FK_HIDDEN void fk__sgemm_pack_nt_avx512(long N, long K, const float *B, long ldb, float *Bp);
FK_HIDDEN void fk__sgemm_nt_packed_avx512(long M, long N, long K, const float *A, long lda, const float *Bp, long n0,
                                          float *C, long ldc, const float *bias, int acc);
FK_HIDDEN int fk__qgemm_nt_avx512(FK_ARGS_Q);
FK_HIDDEN int fk__dequant_avx512(FK_ARGS_DQ);
// AVX-512 VNNI (+ VL): the Q8 product with 256-bit vpdpbusd; needs `xc`.
FK_HIDDEN void fk__q8_gemv_vnni(FK_ARGS_Q8);
// AVX-512 VNNI (+ VL): the Q16 product with 256-bit vpdpwssd.
FK_HIDDEN void fk__q16_gemv_vnni(FK_ARGS_Q16);
#else
#define FK_X86 0
#endif

#if FK_X86
#include <immintrin.h>
/// ss[i] = s_w(srow, activation block b0 + i) · xd[b0 + i] for i < n: the combined scale of each
/// 32-column activation block against weight row scales starting at `srow` (weight blocks of
/// `per` activation blocks; fp32 or fp16 scales, the latter widened with F16C eight at a time
/// when per == 1). Shared by the AVX2 and VNNI Q8 bodies (no per-element division).
static inline __attribute__((always_inline, target("avx2,fma,f16c"))) void q8_block_scales(
    const fk_qmatrix *W, long srow, long per, long b0, long n, const float *xd, float *ss) {
    if (per == 1) {
        long i = 0;
        if (!W->scale)
            for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(ss + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(W->scale_h + srow + b0 + i))),
                                                       _mm256_loadu_ps(xd + b0 + i)));
        for (; i < n; i++) ss[i] = (W->scale ? W->scale[srow + b0 + i] : _cvtsh_ss(W->scale_h[srow + b0 + i])) * xd[b0 + i];
        return;
    }
    long wb = srow + b0 / per, rem = b0 % per;
    for (long i = 0; i < n; i++) {
        ss[i] = (W->scale ? W->scale[wb] : _cvtsh_ss(W->scale_h[wb])) * xd[b0 + i];
        if (++rem == per) rem = 0, wb++;
    }
}
#endif

/// The row kernel of a packed-panel walk: C[0 ..< M, 0 ..< nc] (+)= A[0 ..< M, 0 ..< K] · P
/// (+ bias), P one panel of fk_sgemm_pack_nt's layout (K × 32 floats, k-major, zero past nc).
typedef void (*ck_panel_rows_fn)(long M, long K, const float *A, long lda, const float *P, float *C, long ldc, int nc,
                                 const float *bias, int acc);

/// C = A · Bᵀ over B's packed panels (fk_sgemm_pack_nt: panel p at Bp + 32·K·p), columns
/// n0 ..< n0 + N (n0 % 32 == 0), K in passes of `kc` columns, each pass's sums added to C:
/// the walk of the packed routes of levels 1 and 2 (their row kernels differ).
static inline __attribute__((always_inline)) void ck_packed_walk(long M, long N, long K, const float *A, long lda,
                                                                 const float *Bp, long n0, float *C, long ldc,
                                                                 const float *bias, int acc, long kc, ck_panel_rows_fn rows) {
    for (long j = 0; j < N; j += 32) {
        const int nc = (int)(N - j < 32 ? N - j : 32);
        const float *panel = Bp + (n0 + j) * K;
        for (long k0 = 0; k0 < K || k0 == 0; k0 += kc)
            rows(M, K - k0 < kc ? K - k0 : kc, A + k0, lda, panel + k0 * 32, C + j, ldc, nc, k0 == 0 && bias ? bias + j : NULL,
                 k0 == 0 ? acc : 1);
    }
}

/// Defines the packed entry point `ENTRY` of a level (ck_packed_walk over K passes of `KCV`)
/// with `ROWS`, an always-inline row kernel of that level, as its out-of-line row kernel;
/// `ATTR` is the level's target attribute.
#define CK_PACKED_ENTRY(ENTRY, ATTR, ROWS, KCV)                                                                        \
    static ATTR void ENTRY##_rows(long M, long K, const float *A, long lda, const float *P, float *C, long ldc, int nc,  \
                                  const float *bias, int acc) {                                                         \
        ROWS(M, K, A, lda, P, C, ldc, nc, bias, acc);                                                                   \
    }                                                                                                                   \
    ATTR void ENTRY(long M, long N, long K, const float *A, long lda, const float *Bp, long n0, float *C, long ldc,      \
                    const float *bias, int acc) {                                                                       \
        ck_packed_walk(M, N, K, A, lda, Bp, n0, C, ldc, bias, acc, KCV, ENTRY##_rows);                                  \
    }

/// A 64-byte aligned scratch buffer of at least `bytes`, private to the calling thread and
/// reused by its later calls (slot 0/1: level-2 panels, 0 also level 1's fp32 NT and int8 panels, 2: the int8 panel of level 0 and of
/// shapes level 1's panel route leaves). Never free it; NULL
/// when out of memory. One user per slot at a time (kernels do not nest).
#define CK_SCRATCH_SLOTS 5  // 3: the Q8 / Q16 activations of fk_qgemm_nt_q8 / fk_qgemm_nt_q16; 4: fk_attention's decode route
void *ck_scratch(int slot, size_t bytes);

extern int fk_scale_prefetch;

/// Prefetches (into L2) the scales of block rows `r / block_rows ..= (r + nr - 1) / block_rows`
/// of a block-quantized matrix whose scales (`es` bytes each, `scale_ld` a block row) start at
/// `base`; by line address, as the scales need not start on a line. A hint only (prefetches
/// never fault, so it may reach past the matrix). Shared by the int8 and int4 GEMVs.
static inline void ck_prefetch_scale_rows(uintptr_t base, long es, long block_rows, long scale_ld, long r, long nr) {
    if (!fk_scale_prefetch || block_rows <= 0 || nr <= 0) return;
    const long first = r / block_rows * scale_ld * es, end = ((r + nr - 1) / block_rows + 1) * scale_ld * es;
    for (uintptr_t p = (base + (uintptr_t)first) & ~(uintptr_t)63; p < base + (uintptr_t)end; p += 64)
        __builtin_prefetch((const void *)p, 0, 2);
}

/// Prefetches the scales of weight rows `row ..< row + nr` of W as they will be `ahead` bytes of
/// weights further on: the rows the weight prefetch of the GEMV loops has reached. The scales
/// are a stream of their own (one per block of a row, stored apart from the int8 values) that
/// the hardware prefetcher, busy with the weight rows, does not follow at decode: without it a
/// third of the GEMV's samples waited on scale loads (perf, SmolLM2-135M int8 decode on a Zen 5).
static inline void ck_prefetch_scales(const fk_qmatrix *W, long row, long nr, long ahead) {
    if (W->ld <= 0) return;
    ck_prefetch_scale_rows(W->scale ? (uintptr_t)W->scale : (uintptr_t)W->scale_h, W->scale ? 4 : 2, W->block_rows,
                           W->scale_ld, row + ahead / W->ld, nr);
}

/// The prefill routes' walk over an int8 matrix in panels of `pr` weight rows (N of them from
/// row n0) and `pk` columns of K: prefetches (into L2) the int8 rows of the panel after the one
/// at row j, columns k0 — the next `pk` columns of these rows, else the next rows from column 0
/// — so they arrive while the tiles work on this one. Nothing after the last panel.
static inline void ck_prefetch_next_panel(const fk_qmatrix *W, long n0, long N, long K, long j, long k0, long pr, long pk) {
    const long nk0 = k0 + pk < K ? k0 + pk : 0, nj = k0 + pk < K ? j : j + pr;
    if (nj >= N) return;
    const long nkc = K - nk0 < pk ? K - nk0 : pk, rows = N - nj < pr ? N - nj : pr;
    for (long r = 0; r < rows; r++) {
        const char *p = (const char *)(W->data + (n0 + nj + r) * W->ld + nk0);
        for (long o = 0; o < nkc; o += 64) __builtin_prefetch(p + o, 0, 2);
    }
}

#endif
