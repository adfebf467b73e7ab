// A linear layer over an int4 block-quantized weight kept packed, two values a byte, exactly as
// MIL stores an int4 blob (element i in the low nibble of byte i / 2 when i is even, the high
// nibble when odd; two's complement), read in place from the mapped weight file. Decode reads
// half the bytes an unpacked (one byte a value) copy would.
#ifndef FORGE_CK_INT4_LINEAR_H
#define FORGE_CK_INT4_LINEAR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A block-quantized int4 matrix: value(r, c) = scale(s) · (q(r, c) − offset[s]) with q the
/// signed nibble at element r·ld + c of `data` and s = (r / block_rows)·scale_ld + c /
/// block_cols. `ld` is even (rows start on a byte). Scales are fp32 (`scale`) or binary16 bits
/// (`scale_h`, when `scale` is NULL); `offset` (fp32) may be NULL.
typedef struct {
    const uint8_t *data;
    long ld;
    const float *scale;
    const uint16_t *scale_h;
    const float *offset;
    long block_rows;
    long block_cols;
    long scale_ld;
} fk_q4matrix;

/// 1 when ``fk_q4_gemv`` takes W with K input columns: K and `block_cols` multiples of 32 (every
/// run of 32 columns shares one scale), `ld` ≥ K and even.
int fk_q4_gemv_fits(const fk_q4matrix *W, long K);

/// Floats of the ``fk_q4_split`` buffer of one activation row of K columns: K + K / 32.
long fk_q4_split_floats(long K);

/// Prepares M activation rows of A (row stride lda, K a multiple of 32) for ``fk_q4_gemv``:
/// row m of `xs` (``fk_q4_split_floats``(K) floats) holds A's even columns, then its odd
/// columns (the order of a packed byte's low and high nibbles), then the sum of each run of 32
/// columns.
void fk_q4_split(long M, long K, const float *A, long lda, float *xs);

/// C[m·ldc + j] (+)= Σ_k A[m, k] · W(n0 + j, k) (+ bias[j]) for m < M, j < N, from the
/// ``fk_q4_split`` rows `xs` of A, in fp32, each packed byte read once per activation row.
/// Every level multiplies each weight's dequantized value s · (q − o) by x (a dequantize-then-
/// matmul's products, Core ML's CPU path): AVX-512 (4 weight rows per activation load, the value
/// looked up in a per-block 16-entry table indexed by the nibble), AVX2 + FMA + F16C (4 rows, 8
/// lanes, the nibble widened, converted, minus o, times s) and portable C (a per-block table).
/// Chosen by ``fk_simd_level``; the levels differ only in rounding (the order of the fp32 sums).
/// (The run sums of the split are not read.) W must fit
/// (``fk_q4_gemv_fits``).
void fk_q4_gemv(long M, long N, long K, const float *xs, const fk_q4matrix *W, long n0, float *C, long ldc,
                const float *bias, int accumulate);

/// ``fk_q4_gemv`` with int8 activations (opt-in, `--activations int8`; not Core ML's numerics):
/// from the M rows of A (row stride lda) directly, each quantized per block of 32 as
/// ``fk_qgemm_nt_q8`` does (llama.cpp's Q8_0), Σ q_x · q_w per block in int32, scaled by
/// s_w · d in fp32 — the int8-weight route's arithmetic on the same values. AVX-512 VNNI
/// (vpdpbusd), AVX2 (vpmaddubsw) or portable C. Returns 1 when the int8 route ran; 0 when an
/// activation is inf or NaN (then the exact fp32 route ran, as the graph would compute); −1,
/// writing nothing, when W does not fit (``fk_q4_gemv_fits``) or scratch memory ran out.
int fk_q4_gemv_q8(long M, long N, long K, const float *A, long lda, const fk_q4matrix *W, long n0, float *C, long ldc,
                  const float *bias, int accumulate);

/// out[i·ldo + c] = W(r0 + i, c) for i < rows, c < cols: dense fp32 rows (for many activation
/// rows, multiplied by the fp32 GEMM; and for shapes ``fk_q4_gemv`` does not take).
void fk_q4_dequant(const fk_q4matrix *W, long r0, long rows, long cols, float *out, long ldo);

#ifdef __cplusplus
}
#endif

#endif
