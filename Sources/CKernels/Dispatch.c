// The run-time dispatch of CKernels (see include/CKernels.h): the one place that knows every
// level. It detects the CPU's level once (``fk_simd_level``; `FORGE_SIMD_LEVEL` in the
// environment, or ``fk_set_simd_level``, lowers it), then each public entry point calls the
// body of the highest level at or below it that takes the shape: level 2 (KernelsAVX512.c)
// may decline a shape (returns 0), level 1 (KernelsAVX2.c) and level 0 (KernelsPortable.c)
// take every shape. The bodies never call each other.
#include "ck_internal.h"

#include <stdlib.h>
#include <string.h>

static int cpu_level(void) {
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

/// The CPU's level, lowered to `FORGE_SIMD_LEVEL` (0, 1, 2) when that is set to a number.
static int detected_level(void) {
    int l = cpu_level();
    const char *env = getenv("FORGE_SIMD_LEVEL");
    if (env && *env >= '0' && *env <= '9') {
        long v = strtol(env, NULL, 10);
        if (v < l) l = (int)v;
    }
    return l;
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

int fk_cpu_has_vnni(void) {
#if FK_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") ? 1 : 0;
#else
    return 0;
#endif
}

/// The ladder of an entry point every level has a body for (`fk__<name>_avx512`, which may
/// decline the shape, `_avx2`, `_gen`, all taking the entry point's arguments): the body of the
/// highest level at or below ``fk_simd_level`` that takes the shape.
#if FK_X86
#define FK_DISPATCH(name, ...)                                   \
    do {                                                         \
        const int l = fk_simd_level();                           \
        if (l >= 2 && fk__##name##_avx512(__VA_ARGS__)) return;  \
        if (l >= 1) {                                            \
            fk__##name##_avx2(__VA_ARGS__);                      \
            return;                                              \
        }                                                        \
        fk__##name##_gen(__VA_ARGS__);                           \
    } while (0)
#else
#define FK_DISPATCH(name, ...) fk__##name##_gen(__VA_ARGS__)
#endif

void fk_sgemm_nt(FK_ARGS_NT) { FK_DISPATCH(sgemm_nt, M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }

long fk_sgemm_nt_packed_size(long N, long K) {
#if FK_X86
    if (fk_simd_level() >= 1 && N > 0 && K > 0 && N <= (1L << 40) / K) return (N + 31) / 32 * 32 * K;
#endif
    (void)N, (void)K;
    return 0;
}

int fk_sgemm_pack_nt(long N, long K, const float *B, long ldb, float *Bp) {
#if FK_X86
    if (fk_sgemm_nt_packed_size(N, K) > 0) {
        if (fk_simd_level() >= 2) fk__sgemm_pack_nt_avx512(N, K, B, ldb, Bp);
        else fk__sgemm_pack_nt_avx2(N, K, B, ldb, Bp);
        return 1;
    }
#endif
    (void)N, (void)K, (void)B, (void)ldb, (void)Bp;
    return 0;
}

int fk_sgemm_nt_packed(long M, long N, long K, const float *A, long lda, const float *Bp, long n0, float *C, long ldc,
                       const float *bias, int acc) {
#if FK_X86
    if (fk_simd_level() >= 1 && M >= 4 && N > 0 && K > 0 && n0 % 32 == 0) {
        if (fk_simd_level() >= 2) fk__sgemm_nt_packed_avx512(M, N, K, A, lda, Bp, n0, C, ldc, bias, acc);
        else fk__sgemm_nt_packed_avx2(M, N, K, A, lda, Bp, n0, C, ldc, bias, acc);
        return 1;
    }
#endif
    (void)M, (void)N, (void)K, (void)A, (void)lda, (void)Bp, (void)n0, (void)C, (void)ldc, (void)bias, (void)acc;
    return 0;
}

void fk_sgemm_nn(FK_ARGS_NT) { FK_DISPATCH(sgemm_nn, M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }

void fk_qgemm_nt(FK_ARGS_Q) { FK_DISPATCH(qgemm_nt, M, N, K, A, lda, W, n0, C, ldc, bias, acc); }

void fk_dequant(FK_ARGS_DQ) { FK_DISPATCH(dequant, W, r0, rows, c0, cols, out, ldo); }

void fk_softmax_rows(float *x, long rows, long n, long ld) {
#if FK_X86
    if (fk_simd_level() >= 2) { fk__softmax_rows_avx512(x, rows, n, ld); return; }
    if (fk_simd_level() >= 1) { fk__softmax_rows_avx2(x, rows, n, ld); return; }
#endif
    fk__softmax_rows_gen(x, rows, n, ld);
}

void fk_gelu_erf(const float *x, float *y, long n) {
#if FK_X86
    if (fk_simd_level() >= 2) { fk__gelu_erf_avx512(x, y, n); return; }
    if (fk_simd_level() >= 1) { fk__gelu_erf_avx2(x, y, n); return; }
#endif
    fk__gelu_erf_gen(x, y, n);
}

/// Quantizes the M activation rows for the integer route of `bits` (8 or 16) with the level's
/// body; 0 when a row holds an inf or NaN.
static int qx_quantize_rows(int bits, int l, long M, long K, const float *A, long lda, void *xq, float *xd, float *xs) {
    const long nb = K / 32;
    for (long m = 0; m < M; m++) {
        const float *x = A + m * lda;
        void *q = (char *)xq + m * K * (bits / 8);
#if FK_X86
        const int ok = l >= 1 ? fk__qx_quantize_avx2(bits, K, x, q, xd + m * nb, xs + m * nb)
                              : fk__qx_quantize_gen(bits, K, x, q, xd + m * nb, xs + m * nb);
#else
        const int ok = fk__qx_quantize_gen(bits, K, x, q, xd + m * nb, xs + m * nb);
#endif
        if (!ok) return 0;
    }
    (void)l;
    return 1;
}

/// The integer-activation routes (`bits` 8 or 16). Every row count takes the route (each
/// activation row is quantized on its own, so a prefill row gets exactly the result a decode
/// step would).
static int qgemm_nt_qx(int bits, FK_ARGS_Q) {
    if (M <= 0 || N <= 0) return 1;
    if (K <= 0 || K % 32 != 0 || W->block_cols % 32 != 0) {
        fk_qgemm_nt(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
        return 0;
    }
    const int l = fk_simd_level();
    const int vnni = FK_X86 && l >= 2 && fk_cpu_has_vnni();
    const long nb = K / 32;
    // Layout of the scratch: xc (32-byte aligned int32 [M, nb, 8], Q8 only), xd, xs, then xq.
    const size_t xcBytes = bits == 8 ? (size_t)(M * nb * 8) * sizeof(int32_t) : 0, fBytes = (size_t)(M * nb) * sizeof(float);
    char *buf = ck_scratch(3, xcBytes + 2 * fBytes + (size_t)(M * K) * (size_t)(bits / 8));
    if (!buf) {
        fk_qgemm_nt(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
        return 0;
    }
    int32_t *xc = (int32_t *)buf;
    float *xd = (float *)(buf + xcBytes), *xs = xd + M * nb;
    void *xq = xs + M * nb;
    if (!qx_quantize_rows(bits, l, M, K, A, lda, xq, xd, xs)) {
        // an inf or NaN activation: the fp32 route propagates it as the graph does
        fk_qgemm_nt(M, N, K, A, lda, W, n0, C, ldc, bias, acc);
        return 0;
    }
#if FK_X86
    if (vnni && bits == 8) {
        memset(xc, 0, xcBytes);
        for (long i = 0; i < M * nb; i++) xc[i * 8] = -128 * (int32_t)xs[i];
        fk__q8_gemv_vnni(M, N, K, xq, xd, xs, xc, W, n0, C, ldc, bias, acc);
    } else if (vnni) {
        fk__q16_gemv_vnni(M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc);
    } else if (l >= 1 && bits == 8) {
        fk__q8_gemv_avx2(M, N, K, xq, xd, xs, NULL, W, n0, C, ldc, bias, acc);
    } else if (l >= 1) {
        fk__q16_gemv_avx2(M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc);
    } else
#endif
    if (bits == 8) {
        fk__q8_gemv_gen(M, N, K, xq, xd, xs, NULL, W, n0, C, ldc, bias, acc);
    } else {
        fk__q16_gemv_gen(M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc);
    }
    (void)vnni;
    (void)xc;
    return 1;
}

int fk_qgemm_nt_q8(FK_ARGS_Q) { return qgemm_nt_qx(8, M, N, K, A, lda, W, n0, C, ldc, bias, acc); }
int fk_qgemm_nt_q16(FK_ARGS_Q) { return qgemm_nt_qx(16, M, N, K, A, lda, W, n0, C, ldc, bias, acc); }

// Whether the int8 / int4 GEMV loops prefetch the block scales ahead (ck_prefetch_scales);
// FORGE_SCALE_PREFETCH=0 turns it off, for A/B measurements (read once, at load).
int fk_scale_prefetch = 1;
__attribute__((constructor)) static void fk_scale_prefetch_init(void) {
    const char *e = getenv("FORGE_SCALE_PREFETCH");
    if (e && e[0] == '0') fk_scale_prefetch = 0;
}
