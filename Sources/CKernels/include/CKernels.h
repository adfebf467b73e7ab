// Hot loops of the Interpreter's linear-algebra kernels (GEMM, int8 block-quantized GEMM,
// softmax rows). Each entry point picks a body at run time (``fk_simd_level``, in Dispatch.c,
// the only file that knows every level):
//   level 0  portable C (GCC/Clang 8-wide vector extensions, baseline ISA; KernelsPortable.c);
//   level 1  the same source (ck_bodies.h) compiled for AVX2 + FMA + F16C (KernelsAVX2.c);
//   level 2  AVX-512 (F, BW, VL, DQ) bodies (KernelsAVX512.c): a 16-wide int8 matrix-vector
//            kernel for up to 4 activation rows, and for more rows an 8×32 register-tile
//            fp32 kernel fed by packed (dequantized) weight panels; shapes it declines run
//            at level 1.
// No compiler flags are needed: the SIMD bodies use per-function target attributes.
// The Swift side keeps a plain scalar reference for each (GEMM.swift, QuantizedGEMM.swift).
// All matrices are row-major fp32 with explicit leading dimensions (in elements).
#ifndef FORGE_CKERNELS_H
#define FORGE_CKERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// 0 = portable, 1 = AVX2+FMA+F16C, 2 = AVX-512 F/BW/VL/DQ (+ the level-1 features); x86-64
/// only above 0. The environment variable `FORGE_SIMD_LEVEL` (0, 1, 2), read once, caps it:
/// e.g. `FORGE_SIMD_LEVEL=0 swift test` runs every kernel on the portable bodies.
int fk_simd_level(void);
/// Forces a level (clamped to what the CPU supports and to `FORGE_SIMD_LEVEL`); -1 restores
/// detection. For tests.
void fk_set_simd_level(int level);
/// 1 when the CPU has AVX-512 VNNI (vpdpbusd), else 0 (whatever the level).
int fk_cpu_has_vnni(void);

/// C[m, n] (+)= sum_k A[m*lda + k] * B[n*ldb + k] (+ bias[n]).  (A · Bᵀ, "NT")
void fk_sgemm_nt(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                 float *C, long ldc, const float *bias, int accumulate);

/// Floats of B's packed form for ``fk_sgemm_nt_packed`` (N × K: 32-column panels of K × 32,
/// zero past N), or 0 when the current level has no packed route (level 0, or N·K beyond
/// 2^40). Levels 1 and 2 share the layout.
long fk_sgemm_nt_packed_size(long N, long K);
/// Packs B (N × K, rows `ldb` apart) into `Bp` (``fk_sgemm_nt_packed_size`` floats) as
/// ``fk_sgemm_nt`` packs it on every call. Returns 1, or 0 (nothing written) without a route.
int fk_sgemm_pack_nt(long N, long K, const float *B, long ldb, float *Bp);
/// ``fk_sgemm_nt`` for B's columns n0 ..< n0+N (n0 a multiple of 32) from its packed form `Bp`
/// (the panels of fk_sgemm_nt's route at levels 1 and 2, so its bits for M ≥ 4, N ≥ 24: each
/// sum over k in order, one multiply-add per k, in passes of 512). Returns 1, or 0 (nothing
/// done) at level 0 or for M < 4: then call fk_sgemm_nt on B itself.
int fk_sgemm_nt_packed(long M, long N, long K, const float *A, long lda, const float *Bp, long n0, float *C, long ldc,
                       const float *bias, int acc);

/// C[m, n] (+)= sum_k A[m*lda + k] * B[k*ldb + n] (+ bias[n]).  (A · B, "NN")
void fk_sgemm_nn(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                 float *C, long ldc, const float *bias, int accumulate);

/// A block-quantized int8 matrix: value(r, c) = scale(s) * (data[r*ld + c] - offset[s]) with
/// s = (r / block_rows) * scale_ld + c / block_cols. The scales are fp32 (`scale`) or IEEE
/// binary16 bits (`scale_h`, used when `scale` is NULL; NULL otherwise): exactly one of the two
/// is set. `offset` (fp32) may be NULL. Every route and level accepts both scale forms
/// (fp16 scales are widened with F16C at levels >= 1, in portable C at level 0).
typedef struct {
    const int8_t *data;
    long ld;
    const float *scale;
    const float *offset;
    long block_rows;
    long block_cols;
    long scale_ld;
    const uint16_t *scale_h;
} fk_qmatrix;

/// C[m, j] (+)= sum_k A[m*lda + k] * W(n0 + j, k) (+ bias[j]) for j < N: A · Wᵀ with W's rows
/// n0 ..< n0+N, dequantized on the fly (never materialised beyond a panel of rows). Up to a few
/// rows of A (decode), int8 rows are widened in registers and dotted with A directly; above,
/// panels of W are dequantized to fp32 and multiplied with the fp32 tile kernel — at levels 1
/// and 2 32-row k-major panels, each sum over k in order with one multiply-add per k in passes
/// of 512 columns, so both levels give the same bits from M = 5 on (level 2 dots M ≤ 4 rows
/// directly, level 1 M ≤ 3; level 1 needs block_cols and K multiples of 8, other shapes take
/// its 24-row dot-product route).
void fk_qgemm_nt(long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0,
                 float *C, long ldc, const float *bias, int accumulate);

/// ``fk_qgemm_nt`` with int8 activations (opt-in; not Core ML's numerics): each activation row
/// is quantized to int8 per block of 32 as llama.cpp's Q8_0 does (d = max|x| / 127, q = x / d
/// rounded to nearest even), and each block's Σ q_x·q_w is summed exactly in int32, then
/// scaled by s_w·d (fp32 total; an offset o_w subtracts s_w·o_w·d·Σq_x). AVX2: vpmaddubsw +
/// vpmaddwd; AVX-512 VNNI: vpdpbusd (256-bit); portable: plain loops — all give the same int32
/// block sums. Taken (for any M) when K and W's input-axis blocks are multiples of 32; other
/// shapes, an inf/NaN activation or no scratch memory run ``fk_qgemm_nt`` instead (exact
/// fp32 activations). Returns 1 when the int8 route ran, 0 when it fell back.
int fk_qgemm_nt_q8(long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0,
                   float *C, long ldc, const float *bias, int accumulate);

/// ``fk_qgemm_nt_q8`` with int16 activations (opt-in; not Core ML's numerics, ~256× finer
/// steps than Q8): each activation row is quantized per block of 32 to int16 (d = max|x| /
/// 32767, q = x / d rounded to nearest even), the int8 weights are sign-extended to int16 and
/// each block's Σ q_x·q_w is summed exactly in int32 (|Σ| < 2^28), then scaled by s_w·d (fp32
/// total; an offset o_w subtracts s_w·o_w·d·Σq_x). AVX-512 VNNI: 256-bit vpdpwssd; AVX2:
/// vpmaddwd; portable: plain loops — all give the same int32 block sums. Same shapes and
/// fall-backs as ``fk_qgemm_nt_q8``; returns 1 when the int16 route ran, 0 when it fell back.
int fk_qgemm_nt_q16(long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0,
                    float *C, long ldc, const float *bias, int accumulate);

/// out[i*ldo + c] = W(r0 + i, c0 + c) for i < rows, c < cols.
void fk_dequant(const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo);

/// Softmax of each row x[r*ld ..< r*ld + n] in place (max-subtracted; a row of all -inf
/// becomes NaN, as in torch; a NaN anywhere in a row makes the row NaN). exp is a vectorized
/// Cephes-style polynomial within a few ulp of libm's expf (level ≥ 1: AVX2 + FMA).
void fk_softmax_rows(float *x, long rows, long n, long ld);

/// y[i] = gelu EXACT of x[i] = 0.5·x·(1 + erf(x/√2)) for i < n (MIL `gelu`, mode EXACT; torch
/// `gelu`), with Cephes erff / erfcf polynomials (|erf error| ≤ ~1.2e−7; the negative tail as
/// erfc, without the cancellation of 1 + erf). x and y may be the same buffer.
void fk_gelu_erf(const float *x, float *y, long n);

/// A task of ``fk_parallel_run``: `fn(ctx, task)`.
typedef void (*fk_task_fn)(void *ctx, long task);

/// Runs `fn(ctx, 0 ..< ntasks)` on the calling thread and the worker pool (one worker per
/// extra core), returning when every task is done. Workers spin briefly after a job (so the
/// back-to-back products of a decode step start in well under a microsecond) and then sleep.
/// One job at a time: a call made while another is running (another thread, or from inside
/// a task) runs its tasks serially on the calling thread.
void fk_parallel_run(long ntasks, fk_task_fn fn, void *ctx);

/// Hands `bytes` bytes at `p` to an idle pool worker to prefetch into its cache (prefetch
/// instructions only: an address that is not mapped is never faulted in), and returns at
/// once. Meant for the weights of a product the caller is about to start, while the caller
/// runs the small ops before it. The worker stops as soon as the next job is published. Does
/// nothing without a spinning (awake, idle) worker, or when a job is running. At most the
/// first 1 MiB is fetched.
void fk_parallel_prefetch(const void *p, long bytes);

/// Prefetches (into L1, on the calling thread) the 64-byte line at each of `addrs[0 ..< n]`
/// (0 entries skipped): the run loop's hint for the records the next steps will read. Prefetch
/// instructions only, never a fault.
void fk_prefetch_lines(const uintptr_t *addrs, long n);

/// The wrapping sum of the `bytes / 8` 64-bit words at `p` (8-byte aligned), read in order with
/// a software prefetch 8 KB ahead into L2 (as the int8 GEMV streams its weights): a read
/// bandwidth probe's inner loop. Reads past the end are prefetches only (no fault).
uint64_t fk_read_sum(const void *p, long bytes);

/// Worker threads of the pool plus the caller (1 = no pool): `FORGE_THREADS` if set, else
/// the CPUs the process may run on.
int fk_parallel_width(void);

/// Returns free heap pages to the operating system (glibc `malloc_trim(0)`; a no-op on other C
/// libraries). Worth calling once after a model is loaded and planned: the parsed protobuf and
/// the loader's scratch were freed, but glibc keeps their pages resident otherwise. Returns 1
/// when memory was released.
int fk_release_free_memory(void);

/// Tunes glibc malloc for a long-running interpreter (`mallopt`; a no-op elsewhere): one arena
/// for every thread (by default each worker thread that allocates gets its own, whose freed
/// pages stay resident) and a fixed mmap threshold of 256 KiB (glibc raises a dynamic one after
/// large frees, after which large tensor buffers fragment the main heap). Call before starting
/// threads. Returns 1 on success.
int fk_tune_malloc(void);

#ifdef __cplusplus
}
#endif

#endif
