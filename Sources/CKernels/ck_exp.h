// Internal to CKernels: the 8-lane e^x of the softmax, gelu and fused-attention bodies, written
// once. Its multiply-adds contract to FMA or not as the including file says: ck_bodies.h's
// bodies compile it under clang's default -ffp-contract=on, Attention.c under
// `#pragma STDC FP_CONTRACT OFF` (the same bits as the Interpreter's Swift FastExp.exp8).
#ifndef FORGE_CK_EXP_H
#define FORGE_CK_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) v8f ck_splat8(float s) { return (v8f){s, s, s, s, s, s, s, s}; }

static inline __attribute__((always_inline)) v8f vsel(v8i m, v8f a, v8f b) {  // m ? a : b, lane by lane (m all ones or zero)
    v8i ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    const v8i r = (ai & m) | (bi & ~m);
    v8f o;
    memcpy(&o, &r, sizeof o);
    return o;
}

/// e^x, 8 lanes (Cephes `expf` scheme, as the Interpreter's FastExp.exp8: x = n·ln2 + r,
/// |r| ≤ ln2/2, a degree-6 polynomial for e^r, 2^n built in the exponent bits as 2^n1·2^n2 so
/// results down to the subnormals come out). Within a few ulp of libm's expf; underflows to 0
/// below −103.97, +inf above 88.72, NaN stays NaN.
static inline __attribute__((always_inline)) v8f exp8v(v8f x) {
    const v8f hi = ck_splat8(88.72283f), lo = ck_splat8(-103.97208f);
    const v8i over = x > hi, under = x < lo, nan = x != x;
    const v8f v = vsel(under, lo, vsel(over, hi, x));
    const v8f magic = ck_splat8(12582912.0f);
    const v8f t = v * ck_splat8(1.44269504f) + magic;
    const v8f n = t - magic;
    v8f r = v - n * ck_splat8(0.693359375f);
    r = r - n * ck_splat8(-2.12194440e-4f);
    v8f p = ck_splat8(1.9875691e-4f);
    p = p * r + ck_splat8(1.3981999e-3f);
    p = p * r + ck_splat8(8.3334520e-3f);
    p = p * r + ck_splat8(4.1665796e-2f);
    p = p * r + ck_splat8(1.6666665e-1f);
    p = p * r + ck_splat8(5.0e-1f);
    p = p * (r * r) + r + ck_splat8(1.0f);
    v8i ni;
    memcpy(&ni, &t, sizeof ni);
    ni = ni - 0x4B400000;
    const v8i n1 = ni >> 1, n2 = ni - n1;
    const v8i e1 = (n1 + 127) << 23, e2 = (n2 + 127) << 23;
    v8f s1, s2;
    memcpy(&s1, &e1, sizeof s1);
    memcpy(&s2, &e2, sizeof s2);
    v8f out = p * s1 * s2;
    out = vsel(over, ck_splat8(INFINITY), out);
    out = vsel(under, ck_splat8(0.0f), out);
    return vsel(nan, x, out);
}

/// w[i] = e^(w[i] − shift) for i in 0 ..< n, 8 lanes at a time (the tail through a padded
/// vector): exp8v behind a pointer interface, so a function compiled for another ISA
/// (`target(...)`) can call it without passing a vector across the boundary.
static inline __attribute__((always_inline)) void ck_exp_shifted(float *w, long n, float shift) {
    const v8f s = ck_splat8(shift);
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f x;
        memcpy(&x, w + i, sizeof x);
        x = exp8v(x - s);
        memcpy(w + i, &x, sizeof x);
    }
    if (i < n) {
        float tail[8] = {0};
        for (long c = i; c < n; c++) tail[c - i] = w[c];
        v8f x;
        memcpy(&x, tail, sizeof x);
        x = exp8v(x - s);
        for (long c = i; c < n; c++) w[c] = x[c - i];
    }
}

#endif
