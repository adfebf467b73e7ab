// See include/CKHalfLinear.h: a linear layer over an fp16 weight read in place (decode reads
// half the bytes of a widened fp32 copy).

#include "CKHalfLinear.h"
#include "CKAttention.h"

#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && !defined(FORGE_PORTABLE)  // see FK_X86 in ck_internal.h
#include <immintrin.h>
#define FK_HL_X86 1
#else
#define FK_HL_X86 0
#endif

static float dot_gen(const float *a, const float *b, long k) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    long i = 0;
    for (; i + 4 <= k; i += 4) { s0 += a[i] * b[i]; s1 += a[i + 1] * b[i + 1]; s2 += a[i + 2] * b[i + 2]; s3 += a[i + 3] * b[i + 3]; }
    for (; i < k; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

#if FK_HL_X86
#define HL_TARGET __attribute__((target("avx2,fma,f16c")))

static inline HL_TARGET float hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/// Bytes ahead of each weight row that `gemv_avx2` prefetches. One thread streaming fp16 rows
/// with the hardware prefetcher alone reads well below the machine's bandwidth (the int4 GEMV
/// measured 4.8 GB/s → 8.8 GB/s per thread with a 4 KiB software prefetch, Int4Linear.c); the
/// rows of a [N, K] weight are contiguous, so running past a row's end prefetches the next ones.
#define HL_PREFETCH 4096

/// M == 1: four W rows at a time, widened in registers; prefetching each row `HL_PREFETCH`
/// bytes ahead once per 64-byte line.
static HL_TARGET void gemv_avx2(long K, const float *a, const uint16_t *W, const float *bias, float *c, long j0, long j1) {
    long j = j0;
    for (; j + 4 <= j1; j += 4) {
        const uint16_t *w0 = W + j * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        long i = 0;
        for (; i + 8 <= K; i += 8) {
            if ((i & 31) == 0) {
                _mm_prefetch((const char *)(w0 + i) + HL_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)(w1 + i) + HL_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)(w2 + i) + HL_PREFETCH, _MM_HINT_T0);
                _mm_prefetch((const char *)(w3 + i) + HL_PREFETCH, _MM_HINT_T0);
            }
            __m256 x = _mm256_loadu_ps(a + i);
            s0 = _mm256_fmadd_ps(x, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w0 + i))), s0);
            s1 = _mm256_fmadd_ps(x, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w1 + i))), s1);
            s2 = _mm256_fmadd_ps(x, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w2 + i))), s2);
            s3 = _mm256_fmadd_ps(x, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w3 + i))), s3);
        }
        float r0 = hsum8(s0), r1 = hsum8(s1), r2 = hsum8(s2), r3 = hsum8(s3);
        for (; i < K; i++) {
            r0 += a[i] * _cvtsh_ss(w0[i]); r1 += a[i] * _cvtsh_ss(w1[i]);
            r2 += a[i] * _cvtsh_ss(w2[i]); r3 += a[i] * _cvtsh_ss(w3[i]);
        }
        c[j] = r0 + (bias ? bias[j] : 0); c[j + 1] = r1 + (bias ? bias[j + 1] : 0);
        c[j + 2] = r2 + (bias ? bias[j + 2] : 0); c[j + 3] = r3 + (bias ? bias[j + 3] : 0);
    }
    for (; j < j1; j++) {
        const uint16_t *w = W + j * K;
        __m256 s = _mm256_setzero_ps();
        long i = 0;
        for (; i + 8 <= K; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))), s);
        float r = hsum8(s);
        for (; i < K; i++) r += a[i] * _cvtsh_ss(w[i]);
        c[j] = r + (bias ? bias[j] : 0);
    }
}

static HL_TARGET float dot_avx2(const float *a, const float *b, long k) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    long i = 0;
    for (; i + 16 <= k; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= k; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float r = hsum8(_mm256_add_ps(s0, s1));
    for (; i < k; i++) r += a[i] * b[i];
    return r;
}
#endif

void fk_linear_half(long M, long N, long K, const float *A, const uint16_t *W, const float *bias,
                    float *C, long j0, long j1, float *scratch) {
    if (j0 < 0) j0 = 0;
    if (j1 > N) j1 = N;
    if (M <= 0 || j0 >= j1) return;
#if FK_HL_X86
    const int simd = fk_attention_simd_level();
    if (simd && M == 1) { gemv_avx2(K, A, W, bias, C, j0, j1); return; }
#endif
    for (long j = j0; j < j1; j++) {
        fk_half_to_float(W + j * K, scratch, K);
        const float b = bias ? bias[j] : 0;
        for (long i = 0; i < M; i++) {
#if FK_HL_X86
            const float d = simd ? dot_avx2(A + i * K, scratch, K) : dot_gen(A + i * K, scratch, K);
#else
            const float d = dot_gen(A + i * K, scratch, K);
#endif
            C[i * N + j] = d + b;
        }
    }
}
