// See include/CKAttention.h. The per-row attention body is written once (the second half of
// this file) and compiled once per ISA by including this file into itself: as a plain function for
// the baseline ISA, and inside `target("avx2,fma,f16c")` where fp16 K / V rows are widened
// with vcvtph2ps (and once more inside an AVX-512 target, where only the weighted sum of V rows
// is 16 lanes wide). fk_attention picks one at run time.
//
// Floating-point contraction is off for the whole file: `acc + q * k` stays a multiply and
// an add, as in the Swift reference (AttentionFusion.reference), so both give the same bits.

#ifndef FK_ATTN_BODY

#include "CKAttention.h"
#include "CKernels.h"
#include "ck_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && !defined(FORGE_PORTABLE)  // see FK_X86 in ck_internal.h
#include <cpuid.h>
#include <immintrin.h>
#define FK_HAVE_F16C_PATH 1
#else
#define FK_HAVE_F16C_PATH 0
#endif

#pragma STDC FP_CONTRACT OFF

// The K / V rows' software prefetch: locality hint and distance in kept columns (overridable
// with -D for benchmarks; T0 / T1 / T2 at 64–256 columns measured alike, tools/NOTES.md).
#ifndef ATTN_PF_LOC
#define ATTN_PF_LOC 3
#endif
#ifndef ATTN_PF_K
#define ATTN_PF_K 64
#endif
#ifndef ATTN_PF_V
#define ATTN_PF_V 32
#endif
#pragma clang diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

// e^x at 8 lanes from ck_vmath.h (the scheme of the softmax and gelu kernels), compiled here
// without FMA contraction: the same bits as the Interpreter's Swift FastExp.exp8.
#define VN(name) name##_attn8
#define VAI static inline __attribute__((always_inline))
#include "ck_vmath.h"

/// w[i] = e^(w[i] − shift) for i in 0 ..< n, 8 lanes at a time (the tail through a padded
/// vector): behind a pointer interface, so the `target(...)` body below calls it without
/// passing a vector across an ISA boundary.
static inline __attribute__((always_inline)) void exp_shifted(float *w, long n, float shift) {
    const v8f s = vsplat_attn8(shift);
    long i = 0;
    for (; i + 8 <= n; i += 8) vstore_attn8(w + i, vexp_attn8(vload_attn8(w + i) - s));
    if (i < n) {
        float tail[8] = {0};
        for (long c = i; c < n; c++) tail[c - i] = w[c];
        const v8f x = vexp_attn8(vload_attn8(tail) - s);
        for (long c = i; c < n; c++) w[c] = x[c - i];
    }
}

#define AI static inline __attribute__((always_inline))

// MARK: - binary16 conversions (portable)

AI float h2f_soft(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            float v = (float)mant * (1.0f / 16777216.0f);  // subnormal: mant · 2^-24, exact
            return sign ? -v : v;
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

AI uint16_t f2h_soft(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    int exp = (int)((x >> 23) & 0xFFu);
    uint32_t mant = x & 0x7FFFFFu;
    if (exp == 0xFF) return sign | 0x7C00u | (mant != 0 ? 0x200u | (uint16_t)(mant >> 13) : 0);
    int e = exp - 127 + 15;
    if (e >= 31) return sign | 0x7C00u;
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = 1u << (shift - 1);
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1u))) r += 1;
        return sign | (uint16_t)r;
    }
    uint32_t r = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r += 1;
    return sign | (uint16_t)r;
}

AI v8f ld8h_gen(const uint16_t *p) {
    v8f v;
    for (int i = 0; i < 8; i++) v[i] = h2f_soft(p[i]);
    return v;
}

static void half_to_float_gen(const uint16_t *src, float *dst, long n) {
    for (long i = 0; i < n; i++) dst[i] = h2f_soft(src[i]);
}

static void float_to_half_gen(const float *src, uint16_t *dst, long n) {
    for (long i = 0; i < n; i++) dst[i] = f2h_soft(src[i]);
}

// MARK: - binary16 conversions (F16C)

#if FK_HAVE_F16C_PATH
#define F16C_TARGET __attribute__((target("avx2,fma,f16c")))
#define AVX512_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))

static inline __attribute__((always_inline, target("avx2,fma,f16c"))) v8f ld8h_avx2(const uint16_t *p) {
    return (v8f)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static F16C_TARGET void half_to_float_avx2(const uint16_t *src, float *dst, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(src[i]);
}

static F16C_TARGET void float_to_half_avx2(const float *src, uint16_t *dst, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

static int detected_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_F16C) != 0;
}
#endif

int fk_attention_simd_level(void) {
#if FK_HAVE_F16C_PATH
    static int f16c = -1;
    int f = __atomic_load_n(&f16c, __ATOMIC_RELAXED);
    if (f < 0) {
        f = detected_f16c();
        __atomic_store_n(&f16c, f, __ATOMIC_RELAXED);
    }
    return (f && fk_simd_level() >= 1) ? 1 : 0;
#else
    return 0;
#endif
}

void fk_half_to_float(const uint16_t *src, float *dst, long n) {
#if FK_HAVE_F16C_PATH
    if (fk_attention_simd_level()) { half_to_float_avx2(src, dst, n); return; }
#endif
    half_to_float_gen(src, dst, n);
}

void fk_float_to_half(const float *src, uint16_t *dst, long n) {
#if FK_HAVE_F16C_PATH
    if (fk_attention_simd_level()) { float_to_half_avx2(src, dst, n); return; }
#endif
    float_to_half_gen(src, dst, n);
}

// MARK: - per-thread scratch

// scores[CTX] and cols[CTX] of the row being computed, one block per thread, grown as needed
// and freed when the thread exits.
typedef struct {
    long cap;
    float *scores;
    int32_t *cols;
} attn_scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) { free(p); }
static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

static attn_scratch *scratch_get(long n) {
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_key_ok) return NULL;
    attn_scratch *s = pthread_getspecific(scratch_key);
    if (s && s->cap >= n) return s;
    long cap = n < 256 ? 256 : n;
    attn_scratch *t = malloc(sizeof(attn_scratch) + (size_t)cap * (sizeof(float) + sizeof(int32_t)));
    if (!t) return NULL;
    t->cap = cap;
    t->scores = (float *)(t + 1);
    t->cols = (int32_t *)(t->scores + cap);
    if (pthread_setspecific(scratch_key, t) != 0) {
        free(t);
        return NULL;
    }
    free(s);
    return t;
}

typedef struct {
    const fk_attention_desc *desc;
    atomic_int failed;
} attn_job;

/// The decode route (one query row, a mask shared by every head; ``fk_attention``): three
/// parallel passes over shared buffers, each reading a K or V row once for all the query heads
/// of its KV head where the per-row route reads it once per query head.
///  1. scores: task (KV head, chunk of kept columns), every query head of that KV head;
///  2. softmax: task = query head (max over the chunks' maxima, e^(w − max), normalized);
///  3. weighted sum of V: task (KV head, run of 32 dims), every query head of that KV head.
/// Each output element is computed by the same operations in the same order as in ``attn_row``
/// (a chunk's scores are the same dots; the sums run over the columns in order), so both
/// routes give the same bits.
typedef struct {
    const fk_attention_desc *desc;
    const int32_t *cols;  ///< the kept columns, in order
    long nc;
    float *w;             ///< [H, nc]: scores, then weights
    float *cmax;          ///< [H, nchunks]: each chunk's largest score
    long chunk, nchunks;  ///< kept columns per pass-1 task
    long nparts;          ///< pass-3 tasks per KV head (runs of 32 dims)
} attn_dec_job;

// MARK: - the instantiations of the body

#define FK_ATTN_BODY 1
#define SFX(name) name##_gen
#define BODY_TARGET
#define LD8H ld8h_gen
#include "Attention.c"
#undef SFX
#undef BODY_TARGET
#undef LD8H

#if FK_HAVE_F16C_PATH
#define SFX(name) name##_avx2
#define BODY_TARGET F16C_TARGET
#define LD8H ld8h_avx2
#include "Attention.c"
#undef SFX
#undef BODY_TARGET
#undef LD8H

// AVX-512 (simd level 2): the same body; only the weighted sum of V rows runs 16 lanes wide
// (elementwise, so the same additions in the same order: the same bits).
#define SFX(name) name##_avx512
#define BODY_TARGET AVX512_TARGET
#define LD8H ld8h_avx2
#define FK_ATTN_512 1
#include "Attention.c"
#undef FK_ATTN_512
#undef SFX
#undef BODY_TARGET
#undef LD8H
#endif

/// The columns the kernel will read for the last row of head 0 (the widest row of a causal
/// mask; a broadcast mask is the same for every head): the work of one (head, row), counted
/// before deciding whether the call is big enough to hand to the worker pool. Decided from
/// the full CTX, a short prompt in a long window would pay a thread hand-off per call for a
/// few live columns.
static long live_columns(const fk_attention_desc *a) {
    const float *m = a->mask + (a->rows - 1) * a->mask_row_stride;
    long live = 0;
    // !(x <= masked): above it, or NaN (branch-free, so the loop vectorizes).
    for (long j = 0; j < a->ctx; j++) live += !(m[j] <= a->masked);
    return live == 0 ? a->ctx : live;
}

/// K and V bytes a one-row call reads (kept columns only) from which the decode route runs.
#ifndef DECODE_MIN_BYTES
#define DECODE_MIN_BYTES (16L << 10)
#endif

/// Whether a one-row call takes the decode route: more than one thread, and K / V reads big
/// enough that reading each row once per KV head, on every core, pays for three hand-offs.
/// FORGE_ATTN_DECODE=0 / 1 forces it off / on (benchmarks).
static int decode_route(const fk_attention_desc *a, long live) {
    static atomic_int forced_once = -2;
    int forced = atomic_load_explicit(&forced_once, memory_order_relaxed);
    if (forced == -2) {
        const char *e = getenv("FORGE_ATTN_DECODE");
        forced = e && *e ? (*e == '1') : -1;
        atomic_store_explicit(&forced_once, forced, memory_order_relaxed);
    }
    if (a->dim % 32 != 0) return 0;
    if (forced == 1) return 1;
    if (forced == 0 || fk_parallel_width() < 2) return 0;
    const long kv = a->heads / a->rep;
    return kv * live * a->dim * (a->k_half ? 2 : 4) * 2 >= DECODE_MIN_BYTES;
}

static atomic_long decode_calls;

/// FORGE_ATTN_GROUP=0 keeps several-row calls on the task-per-(head, row) route (benchmarks).
static int group_rows_on(void) {
    static atomic_int on_once = -1;
    int on = atomic_load_explicit(&on_once, memory_order_relaxed);
    if (on < 0) {
        const char *e = getenv("FORGE_ATTN_GROUP");
        on = !(e && *e == '0');
        atomic_store_explicit(&on_once, on, memory_order_relaxed);
    }
    return on;
}

/// The decode route (``attn_dec_job``). Returns 0 when done, -1 without scratch, 1 when the
/// call is left to the per-row route (no kept column).
static int attention_decode(const fk_attention_desc *a) {
    const long h = a->heads, kv = h / a->rep, width = fk_parallel_width();
    attn_scratch *sc = scratch_get(a->ctx);
    if (!sc) return -1;
    long (*cfn)(const fk_attention_desc *, int32_t *) = dec_columns_gen;
    fk_task_fn sfn = dec_scores_gen, mfn = dec_softmax_gen, vfn = dec_values_gen;
#if FK_HAVE_F16C_PATH
    if (fk_attention_simd_level()) {
        const int l2 = fk_simd_level() >= 2;
        cfn = l2 ? dec_columns_avx512 : dec_columns_avx2;
        sfn = l2 ? dec_scores_avx512 : dec_scores_avx2;
        mfn = l2 ? dec_softmax_avx512 : dec_softmax_avx2;
        vfn = l2 ? dec_values_avx512 : dec_values_avx2;
    }
#endif
    const long nc = cfn(a, sc->cols);
    if (nc == 0) return 1;
    // Pass 1: about 4 tasks a thread, chunks of at least 32 columns.
    long nchunks = (4 * width + kv - 1) / kv;
    if (nchunks > (nc + 31) / 32) nchunks = (nc + 31) / 32;
    if (nchunks < 1) nchunks = 1;
    const long chunk = ((nc + nchunks - 1) / nchunks + 7) / 8 * 8;
    nchunks = (nc + chunk - 1) / chunk;
    float *buf = ck_scratch(4, (size_t)(h * nc + h * nchunks) * sizeof(float));
    if (!buf) return -1;
    attn_dec_job j = {.desc = a, .cols = sc->cols, .nc = nc, .w = buf, .cmax = buf + h * nc,
                      .chunk = chunk, .nchunks = nchunks, .nparts = a->dim / 32};
    fk_parallel_run(kv * nchunks, sfn, &j);
    fk_parallel_run(h, mfn, &j);
    fk_parallel_run(kv * j.nparts, vfn, &j);
    atomic_fetch_add_explicit(&decode_calls, 1, memory_order_relaxed);
    return 0;
}

long fk_attention_decode_calls(void) { return atomic_load_explicit(&decode_calls, memory_order_relaxed); }

int fk_attention(const fk_attention_desc *a) {
    if (a->rep < 1 || a->heads < 0 || a->rows < 0 || a->dim < 0 || a->ctx < 0) return -2;
    long work = a->heads * a->rows;
    if (work == 0 || a->dim == 0) return 0;
    attn_job job = {.desc = a};
    atomic_init(&job.failed, 0);
    fk_task_fn fn = attn_row_gen;
#if FK_HAVE_F16C_PATH
    if (fk_attention_simd_level()) fn = fk_simd_level() >= 2 ? attn_row_avx512 : attn_row_avx2;
#endif
    const long live = live_columns(a);
    if (a->rows == 1 && a->mask_head_stride == 0 && decode_route(a, live)) {
        int rc = attention_decode(a);
        if (rc <= 0) return rc;
    }
    // Grouped queries over a mask shared by the heads (a prefill chunk, or a decode row the
    // decode route left: one thread, few columns): a task per (KV head, row).
    long tasks = work;
    if (a->rep > 1 && a->mask_head_stride == 0 && a->dim % 32 == 0 && group_rows_on()) {
        tasks = (a->heads / a->rep) * a->rows;
        fn = attn_group_row_gen;
#if FK_HAVE_F16C_PATH
        if (fk_attention_simd_level()) fn = fk_simd_level() >= 2 ? attn_group_row_avx512 : attn_group_row_avx2;
#endif
    }
    if (work >= 4 && tasks >= 2 && work * live * a->dim >= (1L << 16)) {
        fk_parallel_run(tasks, fn, &job);
    } else {
        for (long t = 0; t < tasks; t++) fn(&job, t);
    }
    return atomic_load(&job.failed) ? -1 : 0;
}

#else  // FK_ATTN_BODY: the body, compiled once per instantiation

// Vector helpers of this instantiation (a 256-bit vector crosses no call between functions
// compiled for different ISAs).
AI BODY_TARGET v8f SFX(ld8)(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
AI BODY_TARGET void SFX(st8)(float *p, v8f v) { memcpy(p, &v, sizeof v); }
AI BODY_TARGET v8f SFX(splat)(float s) { return (v8f){s, s, s, s, s, s, s, s}; }


/// sum_t q[t] * k[t], as the Swift reference: 8 lanes accumulated in order, then the lanes
/// summed left to right from -0, then the scalar tail.
AI BODY_TARGET float SFX(dot_f)(const float *q, const float *k, long d) {
    v8f acc = SFX(splat)(0);
    long t = 0;
    for (; t + 8 <= d; t += 8) acc = acc + SFX(ld8)(q + t) * SFX(ld8)(k + t);
    float s = -0.0f;
    for (int i = 0; i < 8; i++) s += acc[i];
    for (; t < d; t++) s += q[t] * k[t];
    return s;
}

AI BODY_TARGET float SFX(dot_h)(const float *q, const uint16_t *k, long d) {
    v8f acc = SFX(splat)(0);
    long t = 0;
    for (; t + 8 <= d; t += 8) acc = acc + SFX(ld8)(q + t) * LD8H(k + t);
    float s = -0.0f;
    for (int i = 0; i < 8; i++) s += acc[i];
    for (; t < d; t++) s += q[t] * h2f_soft(k[t]);
    return s;
}

/// Lane c of the result = the lanes of the c-th argument summed left to right from -0 (the
/// reduction of ``dot_f``, for 8 accumulators at once): an 8 × 8 transpose (T_i[c] = a_c[i]),
/// then -0 + T_0 + T_1 + … + T_7, the same additions in the same order in every lane.
AI BODY_TARGET v8f SFX(lane_sums8)(v8f a0, v8f a1, v8f a2, v8f a3, v8f a4, v8f a5, v8f a6, v8f a7) {
    // unpacklo / unpackhi within 128-bit halves, then pairs, then the halves.
    const v8f t0 = __builtin_shufflevector(a0, a1, 0, 8, 1, 9, 4, 12, 5, 13);
    const v8f t1 = __builtin_shufflevector(a0, a1, 2, 10, 3, 11, 6, 14, 7, 15);
    const v8f t2 = __builtin_shufflevector(a2, a3, 0, 8, 1, 9, 4, 12, 5, 13);
    const v8f t3 = __builtin_shufflevector(a2, a3, 2, 10, 3, 11, 6, 14, 7, 15);
    const v8f t4 = __builtin_shufflevector(a4, a5, 0, 8, 1, 9, 4, 12, 5, 13);
    const v8f t5 = __builtin_shufflevector(a4, a5, 2, 10, 3, 11, 6, 14, 7, 15);
    const v8f t6 = __builtin_shufflevector(a6, a7, 0, 8, 1, 9, 4, 12, 5, 13);
    const v8f t7 = __builtin_shufflevector(a6, a7, 2, 10, 3, 11, 6, 14, 7, 15);
    // u0: lanes 0 and 4 of a0..a3; u1: lanes 1 and 5; u2: 2 and 6; u3: 3 and 7 (w: of a4..a7).
    const v8f u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8f u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8f u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8f u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8f w0 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8f w1 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    const v8f w2 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    const v8f w3 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    v8f s = SFX(splat)(-0.0f);
    s = s + __builtin_shufflevector(u0, w0, 0, 1, 2, 3, 8, 9, 10, 11);  // lane 0 of every a_c
    s = s + __builtin_shufflevector(u1, w1, 0, 1, 2, 3, 8, 9, 10, 11);
    s = s + __builtin_shufflevector(u2, w2, 0, 1, 2, 3, 8, 9, 10, 11);
    s = s + __builtin_shufflevector(u3, w3, 0, 1, 2, 3, 8, 9, 10, 11);
    s = s + __builtin_shufflevector(u0, w0, 4, 5, 6, 7, 12, 13, 14, 15);  // lane 4
    s = s + __builtin_shufflevector(u1, w1, 4, 5, 6, 7, 12, 13, 14, 15);
    s = s + __builtin_shufflevector(u2, w2, 4, 5, 6, 7, 12, 13, 14, 15);
    s = s + __builtin_shufflevector(u3, w3, 4, 5, 6, 7, 12, 13, 14, 15);
    return s;
}

/// 8 values of K at element `off`: widened from binary16 when `half`, else floats (`half` is a
/// constant at every call, so each instantiation keeps one branch).
AI BODY_TARGET v8f SFX(ldk8)(const void *k, int half, long off) {
    return half ? LD8H((const uint16_t *)k + off) : SFX(ld8)((const float *)k + off);
}

/// The dots of q with 8 K rows (`rows[c]`, `d` values each, fp16 when `half`): each the same
/// additions in the same order as ``dot_f`` / ``dot_h`` (one 8-lane accumulator per row, then
/// its lanes from -0, then the scalar tail), so the bits are those of 8 single calls; the 8
/// independent accumulators keep the adds from waiting on each other, and q is loaded once
/// per 8 rows.
AI BODY_TARGET void SFX(dot8_rows)(const float *q, const void *k, int half, const int32_t *rows, long d, float *out) {
    long r[8];
    for (int c = 0; c < 8; c++) r[c] = (long)rows[c] * d;
    v8f a0 = SFX(splat)(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    long t = 0;
    for (; t + 8 <= d; t += 8) {
        const v8f qv = SFX(ld8)(q + t);
        a0 = a0 + qv * SFX(ldk8)(k, half, r[0] + t);
        a1 = a1 + qv * SFX(ldk8)(k, half, r[1] + t);
        a2 = a2 + qv * SFX(ldk8)(k, half, r[2] + t);
        a3 = a3 + qv * SFX(ldk8)(k, half, r[3] + t);
        a4 = a4 + qv * SFX(ldk8)(k, half, r[4] + t);
        a5 = a5 + qv * SFX(ldk8)(k, half, r[5] + t);
        a6 = a6 + qv * SFX(ldk8)(k, half, r[6] + t);
        a7 = a7 + qv * SFX(ldk8)(k, half, r[7] + t);
    }
    SFX(st8)(out, SFX(lane_sums8)(a0, a1, a2, a3, a4, a5, a6, a7));
    for (int c = 0; c < 8; c++)
        for (long u = t; u < d; u++)
            out[c] += q[u] * (half ? h2f_soft(((const uint16_t *)k)[r[c] + u]) : ((const float *)k)[r[c] + u]);
}

/// Appends the kept columns of lo ..< hi to `cols[*nc ...]`, branch-free.
AI BODY_TARGET void SFX(kept_range)(const float *m, float threshold, long lo, long hi, int32_t *cols, long *nc) {
    long c = *nc;
    for (long j = lo; j < hi; j++) {
        cols[c] = (int32_t)j;
        c += !(m[j] <= threshold);
    }
    *nc = c;
}

/// The columns j < n the mask keeps (m[j] > threshold, or NaN: `!(m[j] <= threshold)`), in
/// order, into `cols` (room for n; no write passes column j's own index); returns their count.
/// Eight columns at a time: a block all kept or all masked (every block of a causal mask's row
/// but the one at its edge) costs one compare, not a branch per column.
AI BODY_TARGET long SFX(kept_columns)(const float *m, float threshold, long n, int32_t *cols) {
    long nc = 0, j = 0;
    const v8f t = SFX(splat)(threshold);
    for (; j + 8 <= n; j += 8) {
        const v8i masked = SFX(ld8)(m + j) <= t;  // lanes −1 where masked (false for NaN)
        if (__builtin_reduce_or(masked) == 0) {
            for (int c = 0; c < 8; c++) cols[nc + c] = (int32_t)(j + c);
            nc += 8;
        } else if (__builtin_reduce_and(masked) != -1) {
            SFX(kept_range)(m, threshold, j, j + 8, cols, &nc);
        }
    }
    SFX(kept_range)(m, threshold, j, n, cols, &nc);
    return nc;
}

/// w[i] = w[i] · scale + m[cols[i]] for i < nc; returns the largest (NaN never is: the
/// comparison `x > max` of the scalar loop, lane by lane, then over the lanes). Eight columns at
/// a time where they are consecutive (a mask row's kept columns mostly are), one by one
/// elsewhere: each element a multiply and an add, so the same bits either way.
AI BODY_TARGET float SFX(scale_mask_max)(float *w, long nc, const int32_t *cols, const float *m, float scale) {
    const v8f sv = SFX(splat)(scale);
    v8f mv = SFX(splat)(-INFINITY);
    float mx = -INFINITY;
    long i = 0;
    for (; i + 8 <= nc; i += 8) {
        if (cols[i + 7] - cols[i] == 7) {
            const v8f x = SFX(ld8)(w + i) * sv + SFX(ld8)(m + cols[i]);
            SFX(st8)(w + i, x);
            const v8i gt = x > mv;
            mv = (v8f)(((v8i)x & gt) | ((v8i)mv & ~gt));
        } else {
            for (long c = i; c < i + 8; c++) {
                const float x = w[c] * scale + m[cols[c]];
                w[c] = x;
                if (x > mx) mx = x;
            }
        }
    }
    for (; i < nc; i++) {
        const float x = w[i] * scale + m[cols[i]];
        w[i] = x;
        if (x > mx) mx = x;
    }
    for (int l = 0; l < 8; l++)
        if (mv[l] > mx) mx = mv[l];
    return mx;
}

/// The kept columns of one mask row, into `cols`: those above `masked`; when there is none,
/// every column above −inf (the graph's softmax then attends over all of them). A NaN mask value
/// is never skipped: the graph's softmax row is NaN then, and so is this one.
AI BODY_TARGET long SFX(row_columns)(const float *m, float masked, long n, int32_t *cols) {
    long nc = SFX(kept_columns)(m, masked, n, cols);
    if (nc == 0) nc = SFX(kept_columns)(m, -INFINITY, n, cols);
    return nc;
}

/// A row's scores `w[0 ..< nc]` (largest `mx`) into its softmax weights: e^(w − mx) 8 at a time
/// (ck_vmath.h's vexp, the scheme of the graph's softmax kernel), the denominator summed in
/// column order, each weight times its inverse.
AI BODY_TARGET void SFX(softmax_weights)(float *w, long nc, float mx) {
    exp_shifted(w, nc, mx);
    float denom = 0;
    for (long i = 0; i < nc; i++) denom += w[i];
    const float inv = 1 / denom;
    for (long i = 0; i < nc; i++) w[i] = w[i] * inv;
}

/// The scores of one row over its `nc` kept columns (``kept_columns``): w[i] = (q · K[j]) ·
/// scale + m[j] for j = cols[i]; K (rows of `d`) is fp16 when `half`, else fp32. Returns the
/// largest score. The dots are taken 8 at a time (``dot8_rows``; the same bits as one at a time).
AI BODY_TARGET float SFX(scores)(const float *q, const void *k, int half, const float *m, float scale,
                                 long d, float *w, const int32_t *cols, long nc) {
    long i = 0;
    const long rowb = d * (half ? 2 : 4);
    for (; i + 8 <= nc; i += 8) {
        // The K rows 64 kept columns ahead (at depth they come from DRAM): a hint only.
        if (i + ATTN_PF_K + 8 <= nc)
            for (int c = 0; c < 8; c++)
                for (long o = 0; o < rowb; o += 64) __builtin_prefetch((const char *)k + (long)cols[i + ATTN_PF_K + c] * rowb + o, 0, ATTN_PF_LOC);
        SFX(dot8_rows)(q, k, half, cols + i, d, w + i);
    }
    for (; i < nc; i++) {
        const long j = cols[i];
        w[i] = half ? SFX(dot_h)(q, (const uint16_t *)k + j * d, d) : SFX(dot_f)(q, (const float *)k + j * d, d);
    }
    return SFX(scale_mask_max)(w, nc, cols, m, scale);
}

/// The fp16 V row 32 kept columns ahead of column i, on the first 64-wide pass (a hint only).
AI BODY_TARGET void SFX(prefetch_v)(const uint16_t *vb, const int32_t *cols, long i, long ncols, long d, long t0) {
    if (t0 == 0 && i + ATTN_PF_V < ncols)
        for (long o = 0; o < d * 2; o += 64) __builtin_prefetch((const char *)(vb + (long)cols[i + ATTN_PF_V] * d) + o, 0, ATTN_PF_LOC);
}

/// o[t0 ..< t0 + 64] = sum_i w[i] · v_row(cols[i])[…], accumulated in 8 registers; the same
/// additions in the same order as adding into `o` column by column.
AI BODY_TARGET void SFX(wsum64)(float *o, const float *w, const int32_t *cols, long ncols, const void *v, int half,
                                long d, long t0) {
#if FK_ATTN_512
    __m512 z0 = _mm512_setzero_ps(), z1 = z0, z2 = z0, z3 = z0;
    if (half) {
        const uint16_t *vb = (const uint16_t *)v + t0;
        for (long i = 0; i < ncols; i++) {
            const uint16_t *r = vb + (long)cols[i] * d;
            SFX(prefetch_v)(vb, cols, i, ncols, d, t0);
            const __m512 ww = _mm512_set1_ps(w[i]);
            z0 = _mm512_add_ps(z0, _mm512_mul_ps(ww, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)r))));
            z1 = _mm512_add_ps(z1, _mm512_mul_ps(ww, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 16)))));
            z2 = _mm512_add_ps(z2, _mm512_mul_ps(ww, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 32)))));
            z3 = _mm512_add_ps(z3, _mm512_mul_ps(ww, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(r + 48)))));
        }
    } else {
        const float *vb = (const float *)v + t0;
        for (long i = 0; i < ncols; i++) {
            const float *r = vb + (long)cols[i] * d;
            const __m512 ww = _mm512_set1_ps(w[i]);
            z0 = _mm512_add_ps(z0, _mm512_mul_ps(ww, _mm512_loadu_ps(r)));
            z1 = _mm512_add_ps(z1, _mm512_mul_ps(ww, _mm512_loadu_ps(r + 16)));
            z2 = _mm512_add_ps(z2, _mm512_mul_ps(ww, _mm512_loadu_ps(r + 32)));
            z3 = _mm512_add_ps(z3, _mm512_mul_ps(ww, _mm512_loadu_ps(r + 48)));
        }
    }
    _mm512_storeu_ps(o + t0, z0);
    _mm512_storeu_ps(o + t0 + 16, z1);
    _mm512_storeu_ps(o + t0 + 32, z2);
    _mm512_storeu_ps(o + t0 + 48, z3);
#else
    v8f a0 = SFX(splat)(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    if (half) {
        const uint16_t *vb = (const uint16_t *)v + t0;
        for (long i = 0; i < ncols; i++) {
            const uint16_t *r = vb + (long)cols[i] * d;
            SFX(prefetch_v)(vb, cols, i, ncols, d, t0);
            v8f ww = SFX(splat)(w[i]);
            a0 = a0 + ww * LD8H(r);
            a1 = a1 + ww * LD8H(r + 8);
            a2 = a2 + ww * LD8H(r + 16);
            a3 = a3 + ww * LD8H(r + 24);
            a4 = a4 + ww * LD8H(r + 32);
            a5 = a5 + ww * LD8H(r + 40);
            a6 = a6 + ww * LD8H(r + 48);
            a7 = a7 + ww * LD8H(r + 56);
        }
    } else {
        const float *vb = (const float *)v + t0;
        for (long i = 0; i < ncols; i++) {
            const float *r = vb + (long)cols[i] * d;
            v8f ww = SFX(splat)(w[i]);
            a0 = a0 + ww * SFX(ld8)(r);
            a1 = a1 + ww * SFX(ld8)(r + 8);
            a2 = a2 + ww * SFX(ld8)(r + 16);
            a3 = a3 + ww * SFX(ld8)(r + 24);
            a4 = a4 + ww * SFX(ld8)(r + 32);
            a5 = a5 + ww * SFX(ld8)(r + 40);
            a6 = a6 + ww * SFX(ld8)(r + 48);
            a7 = a7 + ww * SFX(ld8)(r + 56);
        }
    }
    SFX(st8)(o + t0, a0);
    SFX(st8)(o + t0 + 8, a1);
    SFX(st8)(o + t0 + 16, a2);
    SFX(st8)(o + t0 + 24, a3);
    SFX(st8)(o + t0 + 32, a4);
    SFX(st8)(o + t0 + 40, a5);
    SFX(st8)(o + t0 + 48, a6);
    SFX(st8)(o + t0 + 56, a7);
#endif
}

/// One (head, row) of the attention: task = head * S + row.
static BODY_TARGET void SFX(attn_row)(void *ctx, long task) {
    attn_job *job = ctx;
    const fk_attention_desc *a = job->desc;
    const long s = a->rows, d = a->dim, n = a->ctx;
    const long head = task / s, row = task % s, kvh = head / a->rep;
    const float *q = a->q + (head * s + row) * d;
    const float *m = a->mask + head * a->mask_head_stride + row * a->mask_row_stride;
    float *o = a->out + (head * s + row) * d;
    attn_scratch *sc = scratch_get(n);
    if (!sc) {
        atomic_store(&job->failed, 1);
        return;
    }
    float *w = sc->scores;
    int32_t *cols = sc->cols;

    const long nc = SFX(row_columns)(m, a->masked, n, cols);

    const long kvoff = kvh * n * d;
    // A constant `half` in each call: the score loop is compiled once per K dtype.
    const float maxv = a->k_half ? SFX(scores)(q, (const uint16_t *)a->k + kvoff, 1, m, a->scale, d, w, cols, nc)
                                 : SFX(scores)(q, (const float *)a->k + kvoff, 0, m, a->scale, d, w, cols, nc);
    if (nc == 0) {  // an all −inf mask: NaN, as the graph gives
        for (long t = 0; t < d; t++) o[t] = NAN;
        return;
    }
    SFX(softmax_weights)(w, nc, maxv);

    const int vh = a->v_half;
    const void *vbase = vh ? (const void *)((const uint16_t *)a->v + kvoff) : (const void *)((const float *)a->v + kvoff);
    long t0 = 0;
    for (; t0 + 64 <= d; t0 += 64) SFX(wsum64)(o, w, cols, nc, vbase, vh, d, t0);
    if (t0 < d) {
        for (long t = t0; t < d; t++) o[t] = 0;
        for (long i = 0; i < nc; i++) {
            const long r = (long)cols[i] * d;
            const v8f ww = SFX(splat)(w[i]);
            long t = t0;
            if (vh) {
                const uint16_t *vr = (const uint16_t *)vbase + r;
                for (; t + 8 <= d; t += 8) SFX(st8)(o + t, SFX(ld8)(o + t) + ww * LD8H(vr + t));
                for (; t < d; t++) o[t] += w[i] * h2f_soft(vr[t]);
            } else {
                const float *vr = (const float *)vbase + r;
                for (; t + 8 <= d; t += 8) SFX(st8)(o + t, SFX(ld8)(o + t) + ww * SFX(ld8)(vr + t));
                for (; t < d; t++) o[t] += w[i] * vr[t];
            }
        }
    }
}

/// The kept columns of the decode route's one mask row (as ``attn_row`` finds them).
static BODY_TARGET long SFX(dec_columns)(const fk_attention_desc *a, int32_t *cols) {
    return SFX(row_columns)(a->mask, a->masked, a->ctx, cols);
}

/// The dots of `G` (≤ 3) query rows (`qstride` apart) with 4 K rows (`rows[c]`, d % 8 == 0):
/// out[g·ostride + c] = q_g · K[rows[c]], each the additions of ``dot_f`` / ``dot_h`` in their
/// order (an 8-lane accumulator, its lanes from -0; ``lane_sums8``), each K vector widened once
/// for the G heads. `G` and `half` are constants at every call.
AI BODY_TARGET void SFX(dec_dots4)(const int G, const int half, const float *q, long qstride, const void *k,
                                   const int32_t *rows, long d, float *out, long ostride) {
    const long r0 = (long)rows[0] * d, r1 = (long)rows[1] * d, r2 = (long)rows[2] * d, r3 = (long)rows[3] * d;
    v8f a00 = SFX(splat)(0), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    v8f a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    for (long t = 0; t < d; t += 8) {
        const v8f k0 = SFX(ldk8)(k, half, r0 + t), k1 = SFX(ldk8)(k, half, r1 + t);
        const v8f k2 = SFX(ldk8)(k, half, r2 + t), k3 = SFX(ldk8)(k, half, r3 + t);
        const v8f q0 = SFX(ld8)(q + t);
        a00 = a00 + q0 * k0; a01 = a01 + q0 * k1; a02 = a02 + q0 * k2; a03 = a03 + q0 * k3;
        if (G > 1) {
            const v8f q1 = SFX(ld8)(q + qstride + t);
            a10 = a10 + q1 * k0; a11 = a11 + q1 * k1; a12 = a12 + q1 * k2; a13 = a13 + q1 * k3;
        }
        if (G > 2) {
            const v8f q2 = SFX(ld8)(q + 2 * qstride + t);
            a20 = a20 + q2 * k0; a21 = a21 + q2 * k1; a22 = a22 + q2 * k2; a23 = a23 + q2 * k3;
        }
    }
    const v8f s01 = SFX(lane_sums8)(a00, a01, a02, a03, a10, a11, a12, a13);
    for (int c = 0; c < 4; c++) out[c] = s01[c];
    if (G > 1)
        for (int c = 0; c < 4; c++) out[ostride + c] = s01[4 + c];
    if (G > 2) {
        const v8f s2 = SFX(lane_sums8)(a20, a21, a22, a23, a20, a21, a22, a23);
        for (int c = 0; c < 4; c++) out[2 * ostride + c] = s2[c];
    }
}

/// w[g·wstride + i] = q_g · K[cols[i]] for i < n and the `G` (≤ 3) query rows g (`qstride`
/// apart): ``dec_dots4`` over 4 columns at a time, ``dot_f`` / ``dot_h`` for the rest (the same
/// bits). `prefetch`: hint the K rows ATTN_PF_K columns ahead (the first pass over them).
AI BODY_TARGET void SFX(head_dots)(const int G, const int half, const float *q, long qstride, const void *k, const int32_t *cols,
                                   long n, long d, float *w, long wstride, int prefetch) {
    const long rowb = d * (half ? 2 : 4);
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        if (prefetch && i + ATTN_PF_K + 4 <= n)
            for (int c = 0; c < 4; c++)
                for (long o = 0; o < rowb; o += 64) __builtin_prefetch((const char *)k + (long)cols[i + ATTN_PF_K + c] * rowb + o, 0, ATTN_PF_LOC);
#define HEAD_DOTS(GG) half ? SFX(dec_dots4)(GG, 1, q, qstride, k, cols + i, d, w + i, wstride) \
                           : SFX(dec_dots4)(GG, 0, q, qstride, k, cols + i, d, w + i, wstride)
        switch (G) {
        case 1: HEAD_DOTS(1); break;
        case 2: HEAD_DOTS(2); break;
        default: HEAD_DOTS(3); break;
        }
#undef HEAD_DOTS
    }
    for (; i < n; i++)
        for (int g = 0; g < G; g++) {
            const long r = (long)cols[i] * d;
            w[g * wstride + i] = half ? SFX(dot_h)(q + g * qstride, (const uint16_t *)k + r, d) : SFX(dot_f)(q + g * qstride, (const float *)k + r, d);
        }
}

/// Decode pass 1, task (KV head, chunk): the scores of the chunk's kept columns for every query
/// head of the KV head, 3 heads and 4 K rows at a time (each K row read and widened once for
/// the heads; the same bits as ``scores`` per head), then scale, mask and each head's largest
/// score over the chunk.
static BODY_TARGET void SFX(dec_scores)(void *ctx, long task) {
    const attn_dec_job *j = ctx;
    const fk_attention_desc *a = j->desc;
    const long kvh = task / j->nchunks, c = task % j->nchunks, d = a->dim;
    const long i0 = c * j->chunk, n = j->nc - i0 < j->chunk ? j->nc - i0 : j->chunk;
    if (n <= 0) return;
    const int half = a->k_half;
    const void *kb = half ? (const void *)((const uint16_t *)a->k + kvh * a->ctx * d) : (const void *)((const float *)a->k + kvh * a->ctx * d);
    const int32_t *cols = j->cols + i0;
    for (long r = 0; r < a->rep; r += 3) {
        const long h = kvh * a->rep + r;
        const int G = a->rep - r < 3 ? (int)(a->rep - r) : 3;
        float *w = j->w + h * j->nc + i0;
        SFX(head_dots)(G, half, a->q + h * d, d, kb, cols, n, d, w, j->nc, r == 0);
        for (int g = 0; g < G; g++) j->cmax[(h + g) * j->nchunks + c] = SFX(scale_mask_max)(w + g * j->nc, n, cols, a->mask, a->scale);
    }
}

/// Decode pass 2, task = query head: the row's weights, as ``attn_row`` computes them.
static BODY_TARGET void SFX(dec_softmax)(void *ctx, long h) {
    const attn_dec_job *j = ctx;
    float mx = -INFINITY;
    for (long c = 0; c < j->nchunks; c++) {
        const float x = j->cmax[h * j->nchunks + c];
        if (x > mx) mx = x;
    }
    SFX(softmax_weights)(j->w + h * j->nc, j->nc, mx);
}

/// o_g[t0 ..< t0 + 32] = Σ_i w_g[i] · v_row(cols[i])[…] for the `G` (≤ 4) heads g of one
/// group: each element accumulated from 0 over the columns in order, a multiply and an add a
/// term, as ``wsum64`` and the tail of ``attn_row``. `half` and `G` are constants at every call.
AI BODY_TARGET void SFX(dec_wsum32)(const int G, const int half, float *o, long ostride, const float *w, long wstride,
                                    const int32_t *cols, long nc, const void *v, long d, long t0) {
    v8f a00 = SFX(splat)(0), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    v8f a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    for (long i = 0; i < nc; i++) {
        const long r = (long)cols[i] * d + t0;
        if (i + ATTN_PF_V < nc) __builtin_prefetch((const char *)v + ((long)cols[i + ATTN_PF_V] * d + t0) * (half ? 2 : 4), 0, ATTN_PF_LOC);
        const v8f x0 = SFX(ldk8)(v, half, r), x1 = SFX(ldk8)(v, half, r + 8), x2 = SFX(ldk8)(v, half, r + 16), x3 = SFX(ldk8)(v, half, r + 24);
        const v8f w0 = SFX(splat)(w[i]);
        a00 = a00 + w0 * x0; a01 = a01 + w0 * x1; a02 = a02 + w0 * x2; a03 = a03 + w0 * x3;
        if (G > 1) {
            const v8f w1 = SFX(splat)(w[wstride + i]);
            a10 = a10 + w1 * x0; a11 = a11 + w1 * x1; a12 = a12 + w1 * x2; a13 = a13 + w1 * x3;
        }
        if (G > 2) {
            const v8f w2 = SFX(splat)(w[2 * wstride + i]);
            a20 = a20 + w2 * x0; a21 = a21 + w2 * x1; a22 = a22 + w2 * x2; a23 = a23 + w2 * x3;
        }
        if (G > 3) {
            const v8f w3 = SFX(splat)(w[3 * wstride + i]);
            a30 = a30 + w3 * x0; a31 = a31 + w3 * x1; a32 = a32 + w3 * x2; a33 = a33 + w3 * x3;
        }
    }
    float *p = o + t0;
    SFX(st8)(p, a00); SFX(st8)(p + 8, a01); SFX(st8)(p + 16, a02); SFX(st8)(p + 24, a03);
    if (G > 1) { p += ostride; SFX(st8)(p, a10); SFX(st8)(p + 8, a11); SFX(st8)(p + 16, a12); SFX(st8)(p + 24, a13); }
    if (G > 2) { p += ostride; SFX(st8)(p, a20); SFX(st8)(p + 8, a21); SFX(st8)(p + 16, a22); SFX(st8)(p + 24, a23); }
    if (G > 3) { p += ostride; SFX(st8)(p, a30); SFX(st8)(p + 8, a31); SFX(st8)(p + 16, a32); SFX(st8)(p + 24, a33); }
}

/// ``dec_wsum32`` for `nh` heads (their outputs `ostride`, their weights `wstride` apart), 4 at
/// a time: each V vector widened once per group.
AI BODY_TARGET void SFX(head_wsums)(long nh, const int half, float *o, long ostride, const float *w, long wstride,
                                    const int32_t *cols, long nc, const void *v, long d, long t0) {
    for (long r = 0; r < nh; r += 4) {
        float *og = o + r * ostride;
        const float *wg = w + r * wstride;
#define HEAD_WSUM(GG) half ? SFX(dec_wsum32)(GG, 1, og, ostride, wg, wstride, cols, nc, v, d, t0) \
                           : SFX(dec_wsum32)(GG, 0, og, ostride, wg, wstride, cols, nc, v, d, t0)
        switch (nh - r < 4 ? nh - r : 4) {
        case 1: HEAD_WSUM(1); break;
        case 2: HEAD_WSUM(2); break;
        case 3: HEAD_WSUM(3); break;
        default: HEAD_WSUM(4); break;
        }
#undef HEAD_WSUM
    }
}

/// Decode pass 3, task (KV head, run of dims): the weighted sums of V over that run for every
/// query head of the KV head, up to 4 heads per sweep of the V rows.
static BODY_TARGET void SFX(dec_values)(void *ctx, long task) {
    const attn_dec_job *j = ctx;
    const fk_attention_desc *a = j->desc;
    const long kvh = task / j->nparts, t0 = (task % j->nparts) * 32, d = a->dim;
    const void *vb = a->v_half ? (const void *)((const uint16_t *)a->v + kvh * a->ctx * d)
                               : (const void *)((const float *)a->v + kvh * a->ctx * d);
    SFX(head_wsums)(a->rep, a->v_half, a->out + kvh * a->rep * d, d, j->w + kvh * a->rep * j->nc, j->nc, j->cols, j->nc, vb, d, t0);
}

/// One query row of every query head of one KV head (task = KV head · S + row), for several
/// rows over a mask shared by the heads: the row's kept columns found once, the scores of 3
/// heads against 4 K rows at a time (``dec_dots4``), each head's softmax, the V sums 32 dims
/// and up to 4 heads at a time (``dec_wsum32``) — each K / V vector widened once for the KV
/// head's query heads, every element the operations of ``attn_row`` in its order (its bits).
static BODY_TARGET void SFX(attn_group_row)(void *ctx, long task) {
    attn_job *job = ctx;
    const fk_attention_desc *a = job->desc;
    const long s = a->rows, d = a->dim, n = a->ctx, rep = a->rep;
    const long kvh = task / s, row = task % s;
    const float *m = a->mask + row * a->mask_row_stride;
    attn_scratch *sc = scratch_get(rep * n);
    if (!sc) {
        atomic_store(&job->failed, 1);
        return;
    }
    int32_t *cols = sc->cols;
    const long nc = SFX(row_columns)(m, a->masked, n, cols);
    const long h0 = kvh * rep, hs = s * d;  // query / output rows of consecutive heads are S·D apart
    if (nc == 0) {  // an all −inf mask: NaN, as the graph gives
        for (long r = 0; r < rep; r++)
            for (long t = 0; t < d; t++) a->out[(h0 + r) * hs + row * d + t] = NAN;
        return;
    }
    float *w = sc->scores;  // [rep, nc]
    const int kh = a->k_half, vh = a->v_half;
    const void *kb = kh ? (const void *)((const uint16_t *)a->k + kvh * n * d) : (const void *)((const float *)a->k + kvh * n * d);
    const void *vb = vh ? (const void *)((const uint16_t *)a->v + kvh * n * d) : (const void *)((const float *)a->v + kvh * n * d);
    for (long r = 0; r < rep; r += 3) {
        const int G = rep - r < 3 ? (int)(rep - r) : 3;
        float *wr = w + r * nc;
        SFX(head_dots)(G, kh, a->q + (h0 + r) * hs + row * d, hs, kb, cols, nc, d, wr, nc, 0);
        for (int g = 0; g < G; g++) SFX(softmax_weights)(wr + g * nc, nc, SFX(scale_mask_max)(wr + g * nc, nc, cols, m, a->scale));
    }
    for (long t0 = 0; t0 < d; t0 += 32) SFX(head_wsums)(rep, vh, a->out + h0 * hs + row * d, hs, w, nc, cols, nc, vb, d, t0);
}

#endif  // FK_ATTN_BODY
