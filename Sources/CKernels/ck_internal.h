// Internal to CKernels: what CKernels.c (levels 0/1, dispatch, pool) and KernelsAVX512.c
// (level 2) share. Not part of the public interface (include/CKernels.h).
#ifndef FORGE_CK_INTERNAL_H
#define FORGE_CK_INTERNAL_H

#include "CKernels.h"

#include <stdint.h>
#include <string.h>

#define FK_HIDDEN __attribute__((visibility("hidden")))

#define FK_ARGS_NT long M, long N, long K, const float *A, long lda, const float *B, long ldb, float *C, long ldc, const float *bias, int acc
#define FK_ARGS_Q long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0, float *C, long ldc, const float *bias, int acc
#define FK_ARGS_DQ const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo

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

#if defined(__x86_64__) || defined(__i386__)
#define FK_X86 1
// Level 1 (CKernels.c): also the fallback of level 2 for the shapes it leaves alone.
FK_HIDDEN void fk__sgemm_nt_avx2(FK_ARGS_NT);
FK_HIDDEN void fk__sgemm_nn_avx2(FK_ARGS_NT);
FK_HIDDEN void fk__qgemm_nt_avx2(FK_ARGS_Q);
FK_HIDDEN void fk__dequant_avx2(FK_ARGS_DQ);
// Level 2 (KernelsAVX512.c).
FK_HIDDEN void fk__sgemm_nt_avx512(FK_ARGS_NT);
FK_HIDDEN void fk__sgemm_nn_avx512(FK_ARGS_NT);
FK_HIDDEN void fk__qgemm_nt_avx512(FK_ARGS_Q);
FK_HIDDEN void fk__dequant_avx512(FK_ARGS_DQ);
#else
#define FK_X86 0
#endif

/// A 64-byte aligned scratch buffer of at least `bytes`, private to the calling thread and
/// reused by its later calls (slot 0/1: level-2 panels, 2: level-1 panel). Never free it; NULL
/// when out of memory. One user per slot at a time (kernels do not nest).
#define CK_SCRATCH_SLOTS 4
void *ck_scratch(int slot, size_t bytes);

#endif
