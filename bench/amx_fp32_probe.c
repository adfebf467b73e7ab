// AMX-BF16 probe for an fp32-exact GEMM (issue 18, session 5): is C = A·Bᵀ (fp32) on
// TDPBF16PS, with each fp32 operand split into three bf16 pieces, as exact as the fp32 FMA
// path of CKernels and faster? A measurement tool, not a kernel of forge-ir (see
// tools/NOTES.md, "AMX for fp32 GEMM": measured, not adopted).
//
//   clang -O2 -ISources/CKernels/include -ISources/CKernels -o /tmp/amx_probe \
//         bench/amx_fp32_probe.c Sources/CKernels/*.c -lpthread -lm
//   FORGE_THREADS=1 /tmp/amx_probe 128 384 384 [reps]      (M N K: the encoder's shapes)
//
// Needs Linux ≥ 5.16 and a CPU with AMX-TILE + AMX-BF16 + AVX512-BF16 (Sapphire Rapids or
// later); it asks the kernel for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA)
// and exits when refused.
//
// Split: hi = bf16(x) (RNE, vcvtneps2bf16), mid = bf16(x − hi), lo = bf16(x − hi − mid): both
// differences are exact in fp32 and x = hi + mid + lo exactly (hi keeps 8 significant bits,
// x − hi has at most 16, x − hi − mid at most 8), as long as no piece is a bf16 denormal
// (TDPBF16PS treats input denormals as zero and flushes output denormals): the probe refuses
// (returns 0) any matrix with a nonzero |x| outside [2^-40, 2^40] or a non-finite x, where
// every piece is a multiple of 2^-63 and every product and partial sum a multiple of 2^-126,
// so no denormal can occur. A bf16·bf16 product is exact in fp32 (8 × 8 significant bits).
// Products kept: 3 = hi·hi + hi·mid + mid·hi; 6 = those + mid·mid + hi·lo + lo·hi (dropped:
// mid·lo, lo·mid, lo·lo, |each| ≤ 2^-24·|a·b|); 8 = all but lo·lo.
// Layout: A pieces as 16 × 32 bf16 tiles, B pieces in the pair-interleaved (VNNI) layout;
// a 32 × 32 block of C in 4 tile registers, 2 A and 2 B tiles.
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "../Sources/CKernels/KernelsAVX512.c"

#define TAMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
#define AIA static inline __attribute__((always_inline)) TAMX

int amx_npairs = 6;
int amx_reuse_b = 0;
#include <time.h>
double amx_tpack;
static double amx_now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}

int amx_enable(void) {
    // ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

typedef struct { uint8_t palette, start_row, rsv[14]; uint16_t colsb[16]; uint8_t rows[16]; } tilecfg;

static TAMX void amx_config(void) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
}

/// 16 fp32 → hi, mid, lo bf16 (RNE) with x = hi + mid + lo exactly when x is in range.
/// returns a mask of lanes out of range ([2^-40, 2^40] or 0).
AIA __mmask16 split16(__m512 x, __m256i *h, __m256i *m, __m256i *l) {
    const __m512i ai = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    const __m512i lo_b = _mm512_set1_epi32(0x2b800000), span = _mm512_set1_epi32(0x53800000 - 0x2b800000);
    __mmask16 bad = _mm512_mask_cmp_epu32_mask(_mm512_test_epi32_mask(ai, ai), _mm512_sub_epi32(ai, lo_b), span, _MM_CMPINT_NLT);
    __m256i hb = (__m256i)_mm512_cvtneps_pbh(x);
    __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    __m512 r1 = _mm512_sub_ps(x, hf);
    __m256i mb = (__m256i)_mm512_cvtneps_pbh(r1);
    __m512 mf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(mb), 16));
    __m512 r2 = _mm512_sub_ps(r1, mf);
    *h = hb; *m = mb; *l = (__m256i)_mm512_cvtneps_pbh(r2);
    return bad;
}


/// tr16 (KernelsAVX512.c, included below the header) on dwords: a 16 × 16 transpose.
AIA void tr16i(__m512i r[16]) {
    __m512 f[16];
    for (int i = 0; i < 16; i++) f[i] = _mm512_castsi512_ps(r[i]);
    tr16(f);
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(f[i]);
}

AIA __mmask16 kmask(long n) { return n >= 16 ? (__mmask16)0xffff : n > 0 ? (__mmask16)((1u << n) - 1) : 0; }

/// Splits 16 rows × 32 columns (rows < nr, columns < nk valid; zeros elsewhere) into
/// out[p][16][32] bf16 for the pieces p = hi, mid, lo.
AIA __mmask16 split_block(const float *X, long ld, long nr, long nk, uint16_t *out) {
    __mmask16 bad = 0;
    for (int r = 0; r < 16; r++) {
        __m512 x0 = r < nr ? _mm512_maskz_loadu_ps(kmask(nk), X + r * ld) : _mm512_setzero_ps();
        __m512 x1 = r < nr ? _mm512_maskz_loadu_ps(kmask(nk - 16), X + r * ld + 16) : _mm512_setzero_ps();
        __m256i h0, m0, l0, h1, m1, l1;
        bad |= split16(x0, &h0, &m0, &l0) | split16(x1, &h1, &m1, &l1);
        _mm512_store_si512(out + r * 32, _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1));
        _mm512_store_si512(out + 512 + r * 32, _mm512_inserti64x4(_mm512_castsi256_si512(m0), m1, 1));
        _mm512_store_si512(out + 1024 + r * 32, _mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1));
    }
    return bad;
}

/// Ap[it][c][p][16][32]: tile it of 16 rows, chunk c of 32 columns, piece p.
static TAMX int pack_a(long M, long K, const float *A, long lda, uint16_t *Ap, long Mp, long Kp) {
    __mmask16 bad = 0;
    const long nc = Kp / 32;
    for (long it = 0; it < Mp / 16; it++)
        for (long c = 0; c < nc; c++)
            bad |= split_block(A + it * 16 * lda + c * 32, lda, M - it * 16, K - c * 32, Ap + (it * nc + c) * 1536);
    return bad == 0;
}

/// Bp[t][c][p][kk][n][2]: the VNNI (pair) layout of tile t (16 rows of B), chunk c.
static TAMX int pack_b(long N, long K, const float *B, long ldb, uint16_t *Bp, long Np, long Kp) {
    __mmask16 bad = 0;
    const long nc = Kp / 32;
    uint16_t tmp[1536] __attribute__((aligned(64)));
    for (long t = 0; t < Np / 16; t++)
        for (long c = 0; c < nc; c++) {
            bad |= split_block(B + t * 16 * ldb + c * 32, ldb, N - t * 16, K - c * 32, tmp);
            uint16_t *d = Bp + (t * nc + c) * 1536;
            for (int p = 0; p < 3; p++) {
                __m512i r[16];
                for (int i = 0; i < 16; i++) r[i] = _mm512_load_si512(tmp + p * 512 + i * 32);
                tr16i(r);
                for (int i = 0; i < 16; i++) _mm512_store_si512(d + p * 512 + i * 32, r[i]);
            }
        }
    return bad == 0;
}

#define LDA(tn, p, i) _tile_loadd(tn, Ap + ((i) * nc + c) * 1536 + (p) * 512, 64)
#define LDB(tn, p, t) _tile_loadd(tn, Bp + ((t) * nc + c) * 1536 + (p) * 512, 64)
#define DOT4 _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7)

static TAMX void block2x2(long nc, const uint16_t *Ap, long i0, const uint16_t *Bp, long t0, float *out /* 32 x 32, ld 32 */) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (long c = 0; c < nc; c++) {
        LDA(4, 0, i0); LDA(5, 0, i0 + 1); LDB(6, 0, t0); LDB(7, 0, t0 + 1); DOT4;   // hi·hi
        LDB(6, 1, t0); LDB(7, 1, t0 + 1); DOT4;                                     // hi·mid
        if (amx_npairs == 3) {
            LDB(6, 0, t0); LDB(7, 0, t0 + 1); LDA(4, 1, i0); LDA(5, 1, i0 + 1); DOT4;   // mid·hi
            continue;
        }
        LDA(4, 1, i0); LDA(5, 1, i0 + 1); DOT4;                                     // mid·mid
        if (amx_npairs == 8) {
            LDB(6, 2, t0); LDB(7, 2, t0 + 1); DOT4;                                 // mid·lo
            LDA(4, 0, i0); LDA(5, 0, i0 + 1); DOT4;                                 // hi·lo
            LDB(6, 0, t0); LDB(7, 0, t0 + 1); LDA(4, 1, i0); LDA(5, 1, i0 + 1); DOT4;  // mid·hi
            LDA(4, 2, i0); LDA(5, 2, i0 + 1); DOT4;                                 // lo·hi
            LDB(6, 1, t0); LDB(7, 1, t0 + 1); DOT4;                                 // lo·mid
            continue;
        }
        LDB(6, 0, t0); LDB(7, 0, t0 + 1); DOT4;                                     // mid·hi
        LDA(4, 2, i0); LDA(5, 2, i0 + 1); DOT4;                                     // lo·hi
        LDA(4, 0, i0); LDA(5, 0, i0 + 1); LDB(6, 2, t0); LDB(7, 2, t0 + 1); DOT4;   // hi·lo
    }
    _tile_stored(0, out, 128); _tile_stored(1, out + 16, 128); _tile_stored(2, out + 16 * 32, 128); _tile_stored(3, out + 16 * 32 + 16, 128);
}

TAMX int amx_sgemm_nt(long M, long N, long K, const float *A, long lda, const float *B, long ldb, float *C, long ldc,
                      const float *bias, int acc) {
    const long Mp = (M + 31) / 32 * 32, Np = (N + 31) / 32 * 32, Kp = (K + 31) / 32 * 32;
    // Pieces of A and B in two 16 MiB buffers kept between calls (no allocation timed).
    if (3 * Mp * Kp * 2 > (16 << 20) || 3 * Np * Kp * 2 > (16 << 20)) return 0;
    static uint16_t *Ap, *Bp; if (!Ap) { Ap = aligned_alloc(64, 16 << 20); Bp = aligned_alloc(64, 16 << 20); }
    if (!Ap || !Bp) return 0;
    extern double amx_tpack; double t0 = amx_now();
    extern int amx_reuse_b; static const float *lastB;
    int ok = pack_a(M, K, A, lda, Ap, Mp, Kp) && ((amx_reuse_b && lastB == B) || pack_b(N, K, B, ldb, Bp, Np, Kp));
    lastB = B;
    { double d = amx_now() - t0; if (amx_tpack == 0 || d < amx_tpack) amx_tpack = d; }
    if (ok) {
        amx_config();
        float out[32 * 32] __attribute__((aligned(64)));
        for (long j = 0; j < Np; j += 32)
            for (long i = 0; i < Mp; i += 32) {
                block2x2(Kp / 32, Ap, i / 16, Bp, j / 16, out);
                for (long r = 0; r < 32 && i + r < M; r++)
                    for (long s = 0; s < 32 && j + s < N; s++) {
                        float v = out[r * 32 + s] + (bias ? bias[j + s] : 0.0f);
                        C[(i + r) * ldc + j + s] = acc ? C[(i + r) * ldc + j + s] + v : v;
                    }
            }
        _tile_release();
    }
    return ok;
}

// MARK: - the measurement

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "CKernels.h"
#define now amx_now
static float rnd(void){ double u1=(rand()+1.0)/(RAND_MAX+2.0),u2=(rand()+1.0)/(RAND_MAX+2.0); return (float)(sqrt(-2*log(u1))*cos(6.2831853*u2)); }
int main(int argc,char**argv){
  long M=atol(argv[1]),N=atol(argv[2]),K=atol(argv[3]); int reps=argc>4?atoi(argv[4]):20;
  if(!amx_enable()){printf("no amx perm\n");return 1;}
  float*A=malloc(M*K*4),*B=malloc(N*K*4),*C=malloc(M*N*4); double*R=malloc(M*N*8),*S=malloc(M*N*8);
  srand(1); for(long i=0;i<M*K;i++)A[i]=rnd()*3; for(long i=0;i<N*K;i++)B[i]=rnd()*0.05f;
  for(long i=0;i<M;i++)for(long j=0;j<N;j++){double s=0,a=0;for(long k=0;k<K;k++){double p=(double)A[i*K+k]*B[j*K+k];s+=p;a+=fabs(p);}R[i*N+j]=s;S[i*N+j]=a;}
  const char*names[]={"avx512 fp32 FMA","amx 3 products","amx 6 products","amx 8 products"}; int np[]={0,3,6,8};
  printf("M %ld N %ld K %ld (A ~ N(0,3), B ~ N(0,0.05)); error vs float64; u = 2^-24\n",M,N,K);
  for(int v=0;v<4;v++){ amx_npairs=np[v]; amx_reuse_b=0;
    if(v==0) fk_sgemm_nt(M,N,K,A,K,B,K,C,N,NULL,0); else amx_sgemm_nt(M,N,K,A,K,B,K,C,N,NULL,0);
    double e=0,m=0,r=0,rel=0; for(long i=0;i<M*N;i++){double a=fabs(C[i]-R[i]); e+=a; if(a>m)m=a; double u=S[i]*pow(2,-24); if(a/u>r)r=a/u; rel+=a/fabs(R[i]+1e-30);}
    double t1=1e9,t2=1e9; for(int q=0;q<reps;q++){ double t=now(); if(v==0) fk_sgemm_nt(M,N,K,A,K,B,K,C,N,NULL,0); else amx_sgemm_nt(M,N,K,A,K,B,K,C,N,NULL,0); t=now()-t; if(t<t1)t1=t; }
    if(v){ amx_reuse_b=1; for(int q=0;q<reps;q++){ double t=now(); amx_sgemm_nt(M,N,K,A,K,B,K,C,N,NULL,0); t=now()-t; if(t<t2)t2=t; } }
    printf("  %-16s mean|err| %.3g  max|err| %.3g  max err/(u·Σ|a·b|) %.2f | best of %d: %7.1f us %6.1f GF/s", names[v], e/(M*N), m, r, reps, t1*1e6, 2.0*M*N*K/t1*1e-9);
    if(v) printf("  (B packed once: %7.1f us %6.1f GF/s)", t2*1e6, 2.0*M*N*K/t2*1e-9); printf("\n"); }
  return 0;}
