// Level 0 of CKernels (see include/CKernels.h): the bodies of ck_bodies.h compiled for the
// baseline ISA (on x86-64 that is SSE2; GCC/Clang lower the 8-wide vectors to what exists).
// Every shape goes through here correctly; Dispatch.c falls back to it when no SIMD level
// is available or one is forced off (FORGE_SIMD_LEVEL=0).
#include "ck_bodies.h"

FK_HIDDEN void fk__sgemm_nt_gen(FK_ARGS_NT) { sgemm_nt_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
FK_HIDDEN void fk__sgemm_nn_gen(FK_ARGS_NT) { sgemm_nn_body(M, N, K, A, lda, B, ldb, C, ldc, bias, acc); }
FK_HIDDEN void fk__qgemm_nt_gen(FK_ARGS_Q) { qgemm_nt_body(M, N, K, A, lda, W, n0, C, ldc, bias, acc, h2f_row_gen); }
FK_HIDDEN void fk__dequant_gen(FK_ARGS_DQ) { dequant_body(W, r0, rows, c0, cols, out, ldo, h2f_row_gen); }
FK_HIDDEN void fk__softmax_rows_gen(float *x, long rows, long n, long ld) { softmax_body8(x, rows, n, ld); }
FK_HIDDEN void fk__gelu_erf_gen(const float *x, float *y, long n) { gelu_erf_body8(x, y, n); }
FK_HIDDEN int fk__qx_quantize_gen(int bits, long K, const float *x, void *q, float *d, float *qs) {
    return bits == 8 ? qx_quantize_body(8, K, x, q, d, qs) : qx_quantize_body(16, K, x, q, d, qs);
}
FK_HIDDEN void fk__q8_gemv_gen(FK_ARGS_Q8) {
    (void)xc;
    qx_gemv_body(8, M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc, h2f_row_gen);
}
FK_HIDDEN void fk__q16_gemv_gen(FK_ARGS_Q16) { qx_gemv_body(16, M, N, K, xq, xd, xs, W, n0, C, ldc, bias, acc, h2f_row_gen); }
