// Level 0 of CKernels (see include/CKernels.h): the bodies of ck_bodies.h compiled for the
// baseline ISA (on x86-64 that is SSE2; GCC/Clang lower the 8-wide vectors to what exists).
// Every shape goes through here correctly; Dispatch.c falls back to it when no SIMD level
// is available or one is forced off (FORGE_SIMD_LEVEL=0).
#include "ck_bodies.h"

FK_HIDDEN void fk__sgemm_nt_gen(FK_ARGS_NT) { sgemm_nt_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
FK_HIDDEN void fk__sgemm_nn_gen(FK_ARGS_NT) { sgemm_nn_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
FK_HIDDEN void fk__qgemm_nt_gen(FK_ARGS_Q) { qgemm_nt_body(M, N, K, A, lda, W, n0, C, ldc, bias, acc, h2f_row_gen); }
FK_HIDDEN void fk__dequant_gen(FK_ARGS_DQ) { dequant_body(W, r0, rows, c0, cols, out, ldo, h2f_row_gen); }
FK_HIDDEN void fk__softmax_rows_gen(float *x, long rows, long n, long ld) { softmax_body(x, rows, n, ld); }
FK_HIDDEN void fk__gelu_erf_gen(const float *x, float *y, long n) { gelu_erf_body(x, y, n); }
FK_HIDDEN int fk__q8_quantize_gen(long K, const float *x, int8_t *q, float *d, float *qs) { return q8_quantize_body(K, x, q, d, qs); }
FK_HIDDEN void fk__q8_gemv_gen(FK_ARGS_Q8) {
    (void)xc;
    q8_gemv_body(M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc, h2f_row_gen);
}
