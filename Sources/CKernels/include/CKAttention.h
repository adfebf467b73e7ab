// Attention over a KV cache read in place (fp16 bits or fp32), and the binary16 conversions
// of fp16 state buffers. Each entry point picks an AVX2+FMA+F16C body at run time when the
// CPU has it (and fk_simd_level() >= 1), else the portable body; fk_attention takes an
// AVX-512 variant of that body at fk_simd_level() 2 (16-wide weighted sums of V). The Swift side keeps a
// reference for the attention (AttentionFusion.reference) that the kernel matches bit for bit:
// no multiply-add contraction, the same summation order.
#ifndef FORGE_CKATTENTION_H
#define FORGE_CKATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// dst[i] = the binary16 value src[i] as float (exact) for i < n. A signalling NaN may come
/// back quiet (the F16C body quiets it); fk_float_to_half never produces one.
void fk_half_to_float(const uint16_t *src, float *dst, long n);

/// dst[i] = src[i] rounded to binary16 bits, round to nearest even; overflow gives ±inf, a NaN
/// stays a NaN (quiet bit set, top mantissa bits kept), for i < n.
void fk_float_to_half(const float *src, uint16_t *dst, long n);

/// One grouped-query attention call. Query head h reads KV head h / rep.
typedef struct {
    long heads;   ///< H = KV · rep
    long rows;    ///< S, query positions
    long dim;     ///< D, head size
    long ctx;     ///< CTX, key / value positions
    long rep;     ///< query heads per KV head (≥ 1)
    const float *q;     ///< [H, S, D]
    const void *k;      ///< [KV, CTX, D], binary16 bits when k_half, else float
    const void *v;      ///< [KV, CTX, D], binary16 bits when v_half, else float
    int k_half;
    int v_half;
    /// Additive mask: row (h, r) starts at mask + h * mask_head_stride + r * mask_row_stride and
    /// has CTX entries (a stride of 0 broadcasts).
    const float *mask;
    long mask_head_stride;
    long mask_row_stride;
    float scale;        ///< scores = (q · k) * scale + mask
    float masked;       ///< columns whose mask is ≤ this are skipped (unless every column is)
    float *out;         ///< [H, S, D]
} fk_attention_desc;

/// out[h, r, :] = softmax_j((q[h, r] · k[h/rep, j]) * scale + mask[h, r, j]) · v[h/rep, j].
/// Columns with mask ≤ `masked` are skipped (their weight would be exp(≤ −1e4) = 0); when every
/// column of a row is, the row attends over the columns with mask > −inf. A row left without
/// columns (a NaN or all −inf mask) is NaN. Masked K / V rows are never read. Rows run in
/// parallel on the fk_parallel_run pool when the call is large enough, each thread with its
/// own scratch of 8·CTX bytes (kept between calls, no allocation per row).
///
/// Decode route: one query row (S = 1), a mask shared by the heads (mask_head_stride 0), D a
/// multiple of 32, more than one thread and at least 16 KiB of kept K / V rows (FORGE_ATTN_DECODE=0
/// / 1 forces it off / on): instead of a task per query head, three passes split across the
/// threads — the scores by (KV head, run of kept columns), each K row read and widened once for
/// all the query heads of its KV head; the softmax per head; the weighted sums of V by (KV head,
/// run of 32 dims), each V row read once for those heads. Every element is the same operations
/// in the same order as in the per-row route: the same bits. The caller's thread keeps a scratch
/// of about 4·H·CTX bytes for it. Other calls of grouped heads (rep > 1: several rows, or one row
/// the decode route leaves) over a mask shared by the heads, D a multiple of 32, run a task per
/// (KV head, row) instead of per (head, row), with the same sharing of
/// each widened K / V vector among the KV head's query heads and the same bits
/// (FORGE_ATTN_GROUP=0 turns it off).
/// Returns 0, or -1 when scratch memory could not be allocated (the output is then undefined).
int fk_attention(const fk_attention_desc *desc);

/// Calls of fk_attention that took its decode route (see there): for tests.
long fk_attention_decode_calls(void);

/// 1 when fk_attention / the conversions take the F16C body, else 0 (follows fk_simd_level).
int fk_attention_simd_level(void);

#ifdef __cplusplus
}
#endif

#endif
