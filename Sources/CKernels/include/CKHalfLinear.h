#ifndef FORGE_CK_HALF_LINEAR_H
#define FORGE_CK_HALF_LINEAR_H

#include <stdint.h>

/// C[i, j] = bias[j] + sum_k A[i, k] * W[j, k] for i < M and j in [j0, j1): a linear layer
/// whose weight W [N, K] is IEEE binary16 bits read in place (widened exactly to fp32 as it
/// is read, vcvtph2ps with AVX2+FMA+F16C, portable otherwise). A [M, K] and C [M, N] are fp32
/// (row strides K and N); bias may be NULL. Each W row is read once per call: widened into
/// `scratch` (K floats, always: the portable body widens even a single row into it) when M > 1
/// or at the portable level, used directly when M == 1 with AVX2+FMA+F16C.
void fk_linear_half(long M, long N, long K, const float *A, const uint16_t *W, const float *bias,
                    float *C, long j0, long j1, float *scratch);

#endif
