// Internal to CKernels: the level-0 / level-1 kernel bodies, written once with GCC/Clang
// vector extensions (8 x float) as always-inline functions. KernelsPortable.c instantiates
// them for the baseline ISA, KernelsAVX2.c inside `target("avx2,fma,f16c")` functions; nothing
// here refers to any other ISA's code.
//
// The fp32 kernels are dot-product shaped ("NT": both operands walk along K contiguously)
// with a 4x3 register tile of 8-wide accumulators (12 of the 16 ymm registers), or an
// outer-product tile for "NN" (A broadcast, B rows along N). `c += a * b` contracts to one
// FMA under -ffp-contract=on (clang's default) where FMA exists.
//
// fp16 block scales (fk_qmatrix.scale_h) are widened to fp32 a chunk of blocks at a time by a
// per-level function passed to the bodies (portable C, or F16C), so the hot loops only ever
// read fp32 scales.
#ifndef FORGE_CK_BODIES_H
#define FORGE_CK_BODIES_H

#include "ck_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// The helpers passing 8-float vectors by value are always inlined: no call ABI is involved.
#pragma clang diagnostic ignored "-Wpsabi"

typedef float v8f __attribute__((vector_size(32)));
typedef int8_t v8b __attribute__((vector_size(8)));

#define AI static inline __attribute__((always_inline))

AI v8f ld8(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
AI void st8(float *p, v8f v) { memcpy(p, &v, sizeof v); }
AI v8f ldq8(const int8_t *p) { v8b b; memcpy(&b, p, sizeof b); return __builtin_convertvector(b, v8f); }
AI v8f splat(float s) { return (v8f){s, s, s, s, s, s, s, s}; }
AI float hsum8(v8f v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
AI long lmin(long a, long b) { return a < b ? a : b; }


/// Prefetch distance (bytes ahead in the weight stream) of the int8 matrix-vector loop, and
/// its __builtin_prefetch locality (2 = prefetcht1: into L2).
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif
#ifndef PF_LOC
#define PF_LOC 2
#endif

/// Rows of A kept hot in L2 while the tiles walk all of B.
#define L2_BYTES_FOR_A (192L * 1024L)

// MARK: - NT: C = A · Bᵀ

AI void nt_tile(const int mr, const int nr, long K, const float *A, long lda, const float *B, long ldb,
                float *C, long ldc, const float *bias, int acc) {
    v8f c[4][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i][j] = splat(0);
    long k = 0;
    for (; k + 8 <= K; k += 8) {
        v8f b[4];
        for (int j = 0; j < nr; j++) b[j] = ld8(B + j * ldb + k);
        for (int i = 0; i < mr; i++) {
            v8f a = ld8(A + i * lda + k);
            for (int j = 0; j < nr; j++) c[i][j] += a * b[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float s = hsum8(c[i][j]);
            for (long kk = k; kk < K; kk++) s += A[i * lda + kk] * B[j * ldb + kk];
            if (bias) s += bias[j];
            float *d = C + i * ldc + j;
            *d = acc ? *d + s : s;
        }
    }
}

#define NT_CASE(MR, NR) \
    case (MR) * 8 + (NR): nt_tile(MR, NR, K, A, lda, B, ldb, C, ldc, bias, acc); break;

AI void nt_tile_any(int mr, int nr, long K, const float *A, long lda, const float *B, long ldb,
                    float *C, long ldc, const float *bias, int acc) {
    switch (mr * 8 + nr) {
        NT_CASE(1, 1) NT_CASE(1, 2) NT_CASE(1, 3) NT_CASE(1, 4)
        NT_CASE(2, 1) NT_CASE(2, 2) NT_CASE(2, 3) NT_CASE(2, 4)
        NT_CASE(3, 1) NT_CASE(3, 2) NT_CASE(3, 3) NT_CASE(3, 4)
        NT_CASE(4, 1) NT_CASE(4, 2) NT_CASE(4, 3)
        default: break;
    }
}

AI void sgemm_nt_body(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                      float *C, long ldc, const float *bias, int acc) {
    if (M <= 0 || N <= 0) return;
    if (M < 4) {
        // Matrix-vector shape: each x row against 4 weight rows at a time.
        for (long n = 0; n < N; n += 4) {
            int nr = (int)lmin(4, N - n);
            nt_tile_any((int)M, nr, K, A, lda, B + n * ldb, ldb, C + n, ldc, bias ? bias + n : NULL, acc);
        }
        return;
    }
    long mc = L2_BYTES_FOR_A / ((K > 0 ? K : 1) * (long)sizeof(float));
    mc = mc / 4 * 4;
    if (mc < 4) mc = 4;
    for (long m0 = 0; m0 < M; m0 += mc) {
        long m1 = lmin(M, m0 + mc);
        for (long n = 0; n < N; n += 3) {
            int nr = (int)lmin(3, N - n);
            for (long m = m0; m < m1; m += 4) {
                int mr = (int)lmin(4, m1 - m);
                nt_tile_any(mr, nr, K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc,
                            bias ? bias + n : NULL, acc);
            }
        }
    }
}

// MARK: - NT on packed panels (level 1): the AVX-512 route's layout and sums at 8 lanes

/// Columns of a packed panel and columns of K per pass: those of the level-2 route
/// (fk_sgemm_pack_nt's layout; the same sums in the same order, so the same bits).
#define PNR 32
#define PKC 512

/// C[0 ..< mr, 0 ..< nc] (+)= A[0 ..< mr, 0 ..< K] · P[0 ..< K, 0 ..< nc] (+ bias): P is 16
/// columns of a k-major panel (rows PNR floats apart), nc ≤ 16; a 6 × 16 tile (12 accumulators),
/// each sum over k in order, one multiply-add per k, then + bias, then + C when `acc`.
AI void ptile(const int mr, long K, const float *A, long lda, const float *P, float *C, long ldc, int nc, const float *bias,
              int acc) {
    v8f c[6][2];
    for (int i = 0; i < mr; i++) c[i][0] = splat(0), c[i][1] = splat(0);
    for (long k = 0; k < K; k++) {
        const v8f b0 = ld8(P + k * PNR), b1 = ld8(P + k * PNR + 8);
        for (int i = 0; i < mr; i++) {
            const v8f a = splat(A[i * lda + k]);
            c[i][0] = c[i][0] + a * b0;
            c[i][1] = c[i][1] + a * b1;
        }
    }
    for (int i = 0; i < mr; i++) {
        float *d = C + i * ldc;
        for (int j = 0; j < 2; j++) {
            v8f v = c[i][j];
            if (8 * j + 8 <= nc) {
                if (bias) v = v + ld8(bias + 8 * j);
                if (acc) v = ld8(d + 8 * j) + v;
                st8(d + 8 * j, v);
            } else {
                for (int l = 0; l < nc - 8 * j; l++) {
                    float x = v[l];
                    if (bias) x = x + bias[8 * j + l];
                    if (acc) x = d[8 * j + l] + x;
                    d[8 * j + l] = x;
                }
            }
        }
    }
}

#define PT_CASE(MR) \
    case MR: ptile(MR, K, A, lda, P, C, ldc, nc, bias, acc); break;

AI void ptile_any(int mr, long K, const float *A, long lda, const float *P, float *C, long ldc, int nc, const float *bias, int acc) {
    switch (mr) {
        PT_CASE(1) PT_CASE(2) PT_CASE(3) PT_CASE(4) PT_CASE(5) PT_CASE(6)
        default: break;
    }
}

/// All M rows of A against one packed panel (K × PNR, k-major, zero past nc columns).
AI void prows(long M, long K, const float *A, long lda, const float *P, float *C, long ldc, int nc, const float *bias, int acc) {
    for (int h = 0; h < PNR && h < nc; h += 16) {
        const int hn = nc - h < 16 ? nc - h : 16;
        for (long m = 0; m < M; m += 6)
            ptile_any((int)lmin(6, M - m), K, A + m * lda, lda, P + h, C + m * ldc + h, ldc, hn, bias ? bias + h : NULL, acc);
    }
}

/// Bp[k·PNR + j] = B[j·ldb + k] for j < nr (≤ PNR), k < kc; zero for nr ≤ j < PNR.
AI void pack_panel(const float *B, long ldb, int nr, long kc, float *Bp) {
    for (long k = 0; k < kc; k++)
        for (int j = 0; j < PNR; j++) Bp[k * PNR + j] = j < nr ? B[j * ldb + k] : 0.0f;
}

/// B (N × K) as panels of PNR columns: panel p at Bp + PNR·K·p, K × PNR floats, k-major (the
/// layout of fk_sgemm_pack_nt).
AI void sgemm_pack_nt_body(long N, long K, const float *B, long ldb, float *Bp) {
    for (long j = 0; j < N; j += PNR) pack_panel(B + j * ldb, ldb, (int)lmin(PNR, N - j), K, Bp + j * K);
}

/// fk_sgemm_nt with B packed a panel at a time into `panel` (PKC × PNR floats), for M ≥ 4 and
/// N ≥ 24: the same tiles and bits as prows over fk_sgemm_pack_nt's panels (ck_packed_walk).
AI void sgemm_nt_panels_body(long M, long N, long K, const float *A, long lda, const float *B, long ldb, float *C, long ldc,
                             const float *bias, int acc, float *panel) {
    for (long j = 0; j < N; j += PNR) {
        const int nc = (int)lmin(PNR, N - j);
        for (long k0 = 0; k0 < K || k0 == 0; k0 += PKC) {
            const long kc = lmin(PKC, K - k0);
            if (kc > 0) pack_panel(B + j * ldb + k0, ldb, nc, kc, panel);
            prows(M, kc, A + k0, lda, panel, C + j, ldc, nc, k0 == 0 && bias ? bias + j : NULL, k0 == 0 ? acc : 1);
        }
    }
}

// MARK: - NN: C = A · B

AI void nn_tile(const int mr, const int nv, long K, const float *A, long lda, const float *B, long ldb,
                float *C, long ldc, const float *bias, int acc) {
    v8f c[6][4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nv; j++) c[i][j] = splat(0);
    for (long k = 0; k < K; k++) {
        v8f b[4];
        for (int j = 0; j < nv; j++) b[j] = ld8(B + k * ldb + 8 * j);
        for (int i = 0; i < mr; i++) {
            v8f a = splat(A[i * lda + k]);
            for (int j = 0; j < nv; j++) c[i][j] += a * b[j];
        }
    }
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nv; j++) {
            v8f v = c[i][j];
            if (bias) v += ld8(bias + 8 * j);
            float *d = C + i * ldc + 8 * j;
            if (acc) v += ld8(d);
            st8(d, v);
        }
    }
}

#define NN_CASE(MR, NV) \
    case (MR) * 8 + (NV): nn_tile(MR, NV, K, A, lda, B, ldb, C, ldc, bias, acc); break;

AI void nn_tile_any(int mr, int nv, long K, const float *A, long lda, const float *B, long ldb,
                    float *C, long ldc, const float *bias, int acc) {
    switch (mr * 8 + nv) {
        NN_CASE(1, 1) NN_CASE(1, 2) NN_CASE(1, 4)
        NN_CASE(2, 1) NN_CASE(2, 2) NN_CASE(2, 4)
        NN_CASE(3, 1) NN_CASE(3, 2) NN_CASE(3, 4)
        NN_CASE(4, 1) NN_CASE(4, 2)
        NN_CASE(5, 1) NN_CASE(5, 2)
        NN_CASE(6, 1) NN_CASE(6, 2)
        default: break;
    }
}

AI void sgemm_nn_body(long M, long N, long K, const float *A, long lda, const float *B, long ldb,
                      float *C, long ldc, const float *bias, int acc) {
    if (M <= 0 || N <= 0) return;
    const long n8 = N / 8 * 8;
    // Columns in strips of 32 (small M) or 16, then of 8.
    const int small = M <= 3;
    const int mrMax = small ? (int)M : 6;
    const int nvMax = small ? 4 : 2;
    long mc = L2_BYTES_FOR_A / ((K > 0 ? K : 1) * (long)sizeof(float));
    mc = mc / 6 * 6;
    if (mc < 6) mc = 6;
    for (long m0 = 0; m0 < M; m0 += mc) {
        long m1 = lmin(M, m0 + mc);
        long n = 0;
        while (n < n8) {
            int nv = (n + 8 * nvMax <= n8) ? nvMax : 1;
            for (long m = m0; m < m1; m += mrMax) {
                int mr = (int)lmin(mrMax, m1 - m);
                nn_tile_any(mr, nv, K, A + m * lda, lda, B + n, ldb, C + m * ldc + n, ldc,
                            bias ? bias + n : NULL, acc);
            }
            n += 8 * nv;
        }
        // Column tail (< 8 columns).
        for (long m = m0; m < m1; m++) {
            for (long j = n8; j < N; j++) {
                float s = 0;
                for (long k = 0; k < K; k++) s += A[m * lda + k] * B[k * ldb + j];
                if (bias) s += bias[j];
                float *d = C + m * ldc + j;
                *d = acc ? *d + s : s;
            }
        }
    }
}

// MARK: - int8 block-quantized weights

/// Widens `n` IEEE binary16 values to fp32 (one body per level: portable C, or F16C).
typedef void (*h2f_fn)(const uint16_t *h, float *f, long n);

static inline void h2f_row_gen(const uint16_t *h, float *f, long n) {
    for (long i = 0; i < n; i++) f[i] = fk__h2f(h[i]);
}

/// Scales idx ..< idx+n of W as fp32: `W->scale` itself, or the fp16 scales widened into `buf`.
AI const float *scales_of(const fk_qmatrix *W, long idx, long n, float *buf, h2f_fn cvt) {
    if (W->scale) return W->scale + idx;
    cvt(W->scale_h + idx, buf, n);
    return buf;
}

AI float scale_at(const fk_qmatrix *W, long idx, h2f_fn cvt) {
    float f;
    return *scales_of(W, idx, 1, &f, cvt);
}

/// Blocks whose scales are widened at once (fp16 scales) in the int8 loops.
#define SC_CHUNK 64

AI void dequant_body(const fk_qmatrix *W, long r0, long rows, long c0, long cols, float *out, long ldo, h2f_fn cvt) {
    const long bc = W->block_cols;
    float sbuf[SC_CHUNK];
    for (long i = 0; i < rows; i++) {
        const long r = r0 + i;
        const int8_t *q = W->data + r * W->ld;
        const long srow = (r / W->block_rows) * W->scale_ld;
        const float *o = W->offset ? W->offset + srow : NULL;
        float *d = out + i * ldo;
        // Columns in runs of up to SC_CHUNK blocks (the scales of a run are fetched at once).
        long c = 0;
        while (c < cols) {
            const long b0 = (c0 + c) / bc;
            const long cend = lmin(cols, (b0 + SC_CHUNK) * bc - c0);
            const float *s = scales_of(W, srow + b0, (c0 + cend - 1) / bc - b0 + 1, sbuf, cvt);
            if (bc % 8 == 0 && (c0 + c) % bc == 0 && (cend - c) % bc == 0) {
                for (; c < cend; c += bc) {
                    const long b = (c0 + c) / bc;
                    const v8f sv = splat(s[b - b0]), ov = splat(o ? o[b] : 0.0f);
                    for (long e = c; e < c + bc; e += 8) st8(d + e, (ldq8(q + c0 + e) - ov) * sv);
                }
            } else {
                for (; c < cend; c++) {
                    const long b = (c0 + c) / bc;
                    d[c] = ((float)q[c0 + c] - (o ? o[b] : 0.0f)) * s[b - b0];
                }
            }
        }
    }
}

/// `nr` (≤ 4) weight rows starting at absolute row `n` against one activation row `x`:
/// per block, an 8-wide float accumulator of x·q per row, then `total += scale · acc`; with an
/// offset, `scale · offset · Σx_block` (block sums `xsum`, precomputed once per activation row)
/// is subtracted in a scalar. Needs block_cols % 8 == 0.
AI void q_rows(const int nr, const int has_off, const long bc32, long K, const float *x, const float *xsum, const fk_qmatrix *W,
               long n, float *y, const float *bias, int acc, h2f_fn cvt) {
    // bc32: block_cols is 32 (a constant here, so the block's four steps unroll), else W's.
    const long bc = bc32 ? 32 : W->block_cols;
    const long nb = K / bc;
    const int8_t *q[4];
    long srow[4];
    const float *o[4];
    for (int r = 0; r < nr; r++) {
        q[r] = W->data + (n + r) * W->ld;
        srow[r] = ((n + r) / W->block_rows) * W->scale_ld;
        o[r] = has_off ? W->offset + srow[r] : NULL;
    }
    ck_prefetch_scales(W, n, nr, PF_BYTES);
    float sbuf[4][SC_CHUNK];
    v8f t[4];
    float corr[4];
    for (int r = 0; r < nr; r++) t[r] = splat(0), corr[r] = 0;
    for (long b0 = 0; b0 < nb; b0 += SC_CHUNK) {
        const long nbk = lmin(SC_CHUNK, nb - b0);
        const float *s[4];
        for (int r = 0; r < nr; r++) s[r] = scales_of(W, srow[r] + b0, nbk, sbuf[r], cvt);
        for (long b = b0; b < b0 + nbk; b++) {
            v8f a[4];
            for (int r = 0; r < nr; r++) a[r] = splat(0);
            // At decode the weights stream from DRAM, faster than the hardware prefetcher follows
            // these 4 interleaved rows: prefetch PF_BYTES ahead into L2, once per 64-byte line
            // (measured on one Zen 4 core, all SmolLM2-135M int8 products of a token: 9 GB/s
            // with a non-temporal prefetch 4 KB ahead, 15.7 GB/s into L2 8 KB ahead).
            if (((b * bc) & 63) < bc)
                for (int r = 0; r < nr; r++) __builtin_prefetch(q[r] + b * bc + PF_BYTES, 0, PF_LOC);
            for (long i = b * bc; i < (b + 1) * bc; i += 8) {
                v8f xv = ld8(x + i);
                for (int r = 0; r < nr; r++) a[r] += xv * ldq8(q[r] + i);
            }
            for (int r = 0; r < nr; r++) t[r] += a[r] * s[r][b - b0];
        }
        if (has_off) {
            // Offset term outside the hot loop: Σ_b scale·offset·Σx_block.
            for (int r = 0; r < nr; r++) {
                long b = 0;
                v8f cv = splat(0);
                for (; b + 8 <= nbk; b += 8) cv += ld8(s[r] + b) * ld8(o[r] + b0 + b) * ld8(xsum + b0 + b);
                corr[r] += hsum8(cv);
                for (; b < nbk; b++) corr[r] += s[r][b] * o[r][b0 + b] * xsum[b0 + b];
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        float v = hsum8(t[r]) - corr[r];
        if (bias) v += bias[r];
        y[r] = acc ? y[r] + v : v;
    }
}

#define Q_CASE(NR, OFF, B32) \
    case (NR) * 4 + (OFF) * 2 + (B32): q_rows(NR, OFF, B32, K, x, xsum, W, n, y, bias, acc, cvt); break;

AI void q_rows_any(int nr, int has_off, long K, const float *x, const float *xsum, const fk_qmatrix *W, long n, float *y,
                   const float *bias, int acc, h2f_fn cvt) {
    // Blocks of 32 columns (llama.cpp's Q8_0, coremltools' per-block 32) get bodies of their own.
    switch (nr * 4 + has_off * 2 + (W->block_cols == 32)) {
        Q_CASE(1, 0, 0) Q_CASE(2, 0, 0) Q_CASE(3, 0, 0) Q_CASE(4, 0, 0)
        Q_CASE(1, 1, 0) Q_CASE(2, 1, 0) Q_CASE(3, 1, 0) Q_CASE(4, 1, 0)
        Q_CASE(1, 0, 1) Q_CASE(2, 0, 1) Q_CASE(3, 0, 1) Q_CASE(4, 0, 1)
        Q_CASE(1, 1, 1) Q_CASE(2, 1, 1) Q_CASE(3, 1, 1) Q_CASE(4, 1, 1)
        default: break;
    }
}

/// Up to this many activation rows, int8 rows are dotted directly (per row); above it, a
/// panel of weight rows is dequantized to fp32 once and shared by all activation rows.
#define Q_DIRECT_MAX_M 3
#define Q_PANEL_ROWS 24

AI void qgemm_nt_body(long M, long N, long K, const float *A, long lda, const fk_qmatrix *W, long n0,
                      float *C, long ldc, const float *bias, int acc, h2f_fn cvt) {
    if (M <= 0 || N <= 0) return;
    const int has_off = W->offset != NULL;
    if (M <= Q_DIRECT_MAX_M && W->block_cols % 8 == 0 && K % W->block_cols == 0) {
        // Block sums of each activation row (only needed with offsets).
        const long nb = K / W->block_cols;
        float local[Q_DIRECT_MAX_M * 64];
        float *xsum = local;
        if (has_off && M * nb > Q_DIRECT_MAX_M * 64) {
            xsum = malloc((size_t)(M * nb) * sizeof(float));
            if (!xsum) goto panel_route;  // out of memory: the panel route below
        }
        if (has_off) {
            for (long m = 0; m < M; m++)
                for (long b = 0; b < nb; b++) {
                    float sum = 0;
                    for (long i = b * W->block_cols; i < (b + 1) * W->block_cols; i++) sum += A[m * lda + i];
                    xsum[m * nb + b] = sum;
                }
        }
        for (long j = 0; j < N; j += 4) {
            int nr = (int)lmin(4, N - j);
            for (long m = 0; m < M; m++)
                q_rows_any(nr, has_off, K, A + m * lda, xsum + m * nb, W, n0 + j, C + m * ldc + j, bias ? bias + j : NULL, acc, cvt);
        }
        if (xsum != local) free(xsum);
        return;
    }
panel_route:;
    const long P = lmin(Q_PANEL_ROWS, N);
    float *panel = ck_scratch(2, (size_t)(P * (K > 0 ? K : 1)) * sizeof(float));
    if (!panel) {
        // No memory for a panel: one row at a time on the stack-free scalar route.
        for (long j = 0; j < N; j++) {
            for (long m = 0; m < M; m++) {
                float s = 0;
                for (long k = 0; k < K; k++) {
                    const long r = n0 + j, srow = (r / W->block_rows) * W->scale_ld, b = k / W->block_cols;
                    s += A[m * lda + k] * (((float)W->data[r * W->ld + k] - (has_off ? W->offset[srow + b] : 0.0f)) * scale_at(W, srow + b, cvt));
                }
                if (bias) s += bias[j];
                C[m * ldc + j] = acc ? C[m * ldc + j] + s : s;
            }
        }
        return;
    }
    for (long j = 0; j < N; j += P) {
        long rows = lmin(P, N - j);
        dequant_body(W, n0 + j, rows, 0, K, panel, K, cvt);
        sgemm_nt_body(M, rows, K, A, lda, panel, K, C + j, ldc, bias ? bias + j : NULL, acc);
    }
}

// MARK: - exp, softmax, gelu

typedef int32_t v8i __attribute__((vector_size(32)));

// e^x, softmax rows, gelu EXACT at 8 lanes (ck_vmath.h; level 2 instantiates it at 16).
#define VN(name) name##8
#define VAI AI
#include "ck_vmath.h"

// MARK: - integer activations (Q8 / Q16 routes of fk_qgemm_nt_q8 / fk_qgemm_nt_q16)

typedef int16_t v8h __attribute__((vector_size(16)));

/// Quantizes activation row x[0 ..< K] (K % 32 == 0) per block of 32 to `bits` = 8 (int8, as
/// llama.cpp's Q8_0) or 16 (int16) bit integers: qmax = 127 or 32767, d[b] = max|x_block| / qmax,
/// q = x / d rounded to nearest even (|q| ≤ qmax; `q` is int8_t or int16_t [K]), qs[b] = Σ q of
/// the block (as float, exact: |Σ| ≤ 32·32767 < 2^24). Returns 0 (nothing usable) when a block
/// holds an inf or NaN.
AI int qx_quantize_body(const int bits, long K, const float *x, void *q, float *d, float *qs) {
    // x·id is rounded to fp32 first, then to an integer (no fused multiply-add: every level
    // and the references give the same q, ties included).
#pragma clang fp contract(off)
    const float qmax = bits == 8 ? 127.0f : 32767.0f;
    for (long b = 0; b < K / 32; b++) {
        const float *xb = x + b * 32;
        v8i mx = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < 32; i += 8) {
            v8i a;
            memcpy(&a, xb + i, sizeof a);
            a &= 0x7fffffff;  // |x| as ordered integer bits (NaN above inf)
            const v8i gt = a > mx;
            mx = (a & gt) | (mx & ~gt);
        }
        int32_t m = 0;
        for (int i = 0; i < 8; i++) m = mx[i] > m ? mx[i] : m;
        float amax;
        memcpy(&amax, &m, sizeof amax);
        if (!(amax <= 3.40282347e38f)) return 0;
        const float dd = amax / qmax, id = amax != 0 ? qmax / amax : 0.0f;
        d[b] = dd;
        v8i sum = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int i = 0; i < 32; i += 8) {
            // x·id is within ±qmax (+ a few ulps): adding and subtracting 1.5·2^23 rounds it to
            // an integer, to nearest even.
            const v8f v = (ld8(xb + i) * splat(id) + splat(12582912.0f)) - splat(12582912.0f);
            const v8i iv = __builtin_convertvector(v, v8i);
            if (bits == 8) {
                const v8b bv = __builtin_convertvector(iv, v8b);
                memcpy((int8_t *)q + b * 32 + i, &bv, sizeof bv);
            } else {
                const v8h hv = __builtin_convertvector(iv, v8h);
                memcpy((int16_t *)q + b * 32 + i, &hv, sizeof hv);
            }
            sum += iv;
        }
        int32_t s = 0;
        for (int i = 0; i < 8; i++) s += sum[i];
        qs[b] = (float)s;
    }
    return 1;
}

/// The level-0 integer-activation product (`bits` 8: `xq` int8_t, 16: int16_t [M, K]): per
/// output and activation row, Σ_b (s_w · d_b) · Σ_i q_x·q_w in block order (int32 block sums,
/// exact: |Σ| ≤ 32·128·32767 < 2^28; fp32 total), minus Σ_b s_w · o_w · d_b · qs_b with offsets.
AI void qx_gemv_body(const int bits, long M, long N, long K, const void *xq, const float *xd, const float *xs,
                     const fk_qmatrix *W, long n0, float *C, long ldc, const float *bias, int acc, h2f_fn cvt) {
    const long nb = K / 32, per = W->block_cols / 32;
    for (long j = 0; j < N; j++) {
        const long r = n0 + j;
        const int8_t *wq = W->data + r * W->ld;
        const long srow = (r / W->block_rows) * W->scale_ld;
        for (long m = 0; m < M; m++) {
            const int8_t *a8 = (const int8_t *)xq + m * K;
            const int16_t *a16 = (const int16_t *)xq + m * K;
            float t = 0, corr = 0;
            for (long b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int i = 0; i < 32; i++)
                    s += (int32_t)(bits == 8 ? a8[b * 32 + i] : a16[b * 32 + i]) * (int32_t)wq[b * 32 + i];
                const float sc = scale_at(W, srow + b / per, cvt) * xd[m * nb + b];
                t += (float)s * sc;
                if (W->offset) corr += sc * W->offset[srow + b / per] * xs[m * nb + b];
            }
            float v = t - corr;
            if (bias) v += bias[j];
            float *dst = C + m * ldc + j;
            *dst = acc ? *dst + v : v;
        }
    }
}

#endif
