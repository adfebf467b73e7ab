// Internal to CKernels: e^x, softmax rows and gelu EXACT written once for a GCC/Clang vector
// type of any width. No include guard: included once per width, with
//   VF        the float vector type (VW lanes), VI the int32 vector type of as many lanes,
//   VW        the lane count (8 or 16),
//   VN(name)  this width's name of `name` (e.g. name##8),
//   VAI       the function attributes (always-inline, plus a target where the includer needs one).
// and undefines them at its end. Without VW it is the 8-lane instance: VF v8f, VI v8i (both
// typedefs the includer's). ck_bodies.h (levels 0 and 1) and Attention.c instantiate it at 8
// lanes, KernelsAVX512.c at 16 (level 2):
// the same operations lane by lane (a*b + c contracts to one FMA where the target has FMA),
// so exp and gelu give the same bits at levels 1 and 2; softmax sums its row in another order.

#ifndef VW
#define VW 8
#define VF v8f
#define VI v8i
#endif

VAI VF VN(vsplat)(float s) {
    VF v;
    for (int i = 0; i < VW; i++) v[i] = s;
    return v;
}

VAI VF VN(vload)(const float *p) { VF v; memcpy(&v, p, sizeof v); return v; }
VAI void VN(vstore)(float *p, VF v) { memcpy(p, &v, sizeof v); }

VAI VF VN(vsel)(VI m, VF a, VF b) {  // m ? a : b, lane by lane (m all ones or zero)
    VI ai, bi;
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    const VI r = (ai & m) | (bi & ~m);
    VF o;
    memcpy(&o, &r, sizeof o);
    return o;
}

/// Σ of the lanes: halves folded down to 8 lanes, then ((0+4)+(2+6))+((1+5)+(3+7)).
VAI float VN(vhsum)(VF v) {
    float h[VW];
    memcpy(h, &v, sizeof h);
    for (int w = VW / 2; w >= 8; w /= 2)
        for (int i = 0; i < w; i++) h[i] += h[i + w];
    return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

/// e^x (Cephes `expf` scheme, as the Interpreter's FastExp.exp8: x = n·ln2 + r, |r| ≤ ln2/2,
/// a degree-6 polynomial for e^r, 2^n built in the exponent bits as 2^n1·2^n2 so results down
/// to the subnormals come out). Within a few ulp of libm's expf; underflows to 0 below
/// −103.97, +inf above 88.72, NaN stays NaN.
VAI VF VN(vexp)(VF x) {
    const VF hi = VN(vsplat)(88.72283f), lo = VN(vsplat)(-103.97208f);
    const VI over = x > hi, under = x < lo, nan = x != x;
    const VF v = VN(vsel)(under, lo, VN(vsel)(over, hi, x));
    const VF magic = VN(vsplat)(12582912.0f);
    const VF t = v * VN(vsplat)(1.44269504f) + magic;
    const VF n = t - magic;
    VF r = v - n * VN(vsplat)(0.693359375f);
    r = r - n * VN(vsplat)(-2.12194440e-4f);
    VF p = VN(vsplat)(1.9875691e-4f);
    p = p * r + VN(vsplat)(1.3981999e-3f);
    p = p * r + VN(vsplat)(8.3334520e-3f);
    p = p * r + VN(vsplat)(4.1665796e-2f);
    p = p * r + VN(vsplat)(1.6666665e-1f);
    p = p * r + VN(vsplat)(5.0e-1f);
    p = p * (r * r) + r + VN(vsplat)(1.0f);
    VI ni;
    memcpy(&ni, &t, sizeof ni);
    ni = ni - 0x4B400000;
    const VI n1 = ni >> 1, n2 = ni - n1;
    const VI e1 = (n1 + 127) << 23, e2 = (n2 + 127) << 23;
    VF s1, s2;
    memcpy(&s1, &e1, sizeof s1);
    memcpy(&s2, &e2, sizeof s2);
    VF out = p * s1 * s2;
    out = VN(vsel)(over, VN(vsplat)(INFINITY), out);
    out = VN(vsel)(under, VN(vsplat)(0.0f), out);
    return VN(vsel)(nan, x, out);
}

VAI void VN(softmax_body)(float *x, long rows, long n, long ld) {
    for (long r = 0; r < rows; r++) {
        float *p = x + r * ld;
        // The row's largest value, NaN skipped (a NaN makes the sum, so the row, NaN below).
        VF mx = VN(vsplat)(-INFINITY);
        long j = 0;
        for (; j + VW <= n; j += VW) {
            const VF v = VN(vload)(p + j);
            mx = VN(vsel)(v > mx, v, mx);
        }
        float m = -INFINITY;
        for (int l = 0; l < VW; l++) m = mx[l] > m ? mx[l] : m;
        for (; j < n; j++) m = p[j] > m ? p[j] : m;
        if (m == -INFINITY) {
            for (long i = 0; i < n; i++) p[i] = NAN;
            continue;
        }
        const VF mv = VN(vsplat)(m);
        VF acc = VN(vsplat)(0);
        long i = 0;
        for (; i + VW <= n; i += VW) {
            const VF e = VN(vexp)(VN(vload)(p + i) - mv);
            VN(vstore)(p + i, e);
            acc += e;
        }
        float s = VN(vhsum)(acc);
        if (i < n) {
            float tail[VW] = {0};
            for (long k = i; k < n; k++) tail[k - i] = p[k] - m;
            const VF e = VN(vexp)(VN(vload)(tail));
            for (long k = i; k < n; k++) {
                p[k] = e[k - i];
                s += e[k - i];
            }
        }
        const float inv = 1 / s;
        for (long k = 0; k < n; k++) p[k] = p[k] * inv;
    }
}

/// c[0]·yⁿ⁻¹ + c[1]·yⁿ⁻² + … + c[n−1] by Horner's rule, one step `r·y + c[i]` (one FMA where
/// FMA exists) per coefficient after the first. `n` is a constant at every call: the loop
/// unrolls into the n − 1 steps, the coefficients into immediates.
VAI VF VN(horner)(VF y, const float *c, int n) {
    VF r = VN(vsplat)(c[0]);
    for (int i = 1; i < n; i++) r = r * y + VN(vsplat)(c[i]);
    return r;
}

/// Cephes `erff` (T: erf z = z·T(z²) for |z| < 1) and `erfcf` (P for 1 ≤ |z| < 2, R above:
/// erfc a = e^{−a²}·(1/a)·P(1/a²)), highest power first.
static const float VN(erf_T)[7] = {7.8538614e-5f, -8.0101936e-4f, 5.1883277e-3f, -2.6853812e-2f,
                                   1.1283585e-1f, -3.7612626e-1f, 1.1283792f};
static const float VN(erfc_P)[9] = {2.3268199e-2f, -1.3870394e-1f, 3.6874247e-1f, -5.824733e-1f, 6.2100046e-1f,
                                    -4.9445153e-1f, 3.40488e-1f,   -2.741127e-1f, 5.6382594e-1f};
static const float VN(erfc_R)[8] = {-1.0477664e1f, 1.297720e1f,    -7.4955187f,  2.921019f,
                                    -1.0152653f,   4.2184634e-1f, -2.8207674e-1f, 5.641895e-1f};

/// gelu EXACT: 0.5·x·(1 + erf(x/√2)) with Cephes `erff` / `erfcf`: for |z| < 1 (z = x/√2)
/// erf z = z·T(z²); above, 1 + erf z = 2 − erfc|z| (z > 0) or erfc|z| (z < 0), erfc a =
/// e^{−a²}·(1/a)·P(1/a²) (P for a < 2, R above), so the negative tail keeps its relative
/// precision.
VAI VF VN(gelu_erf)(VF x) {
    const VF z = x * VN(vsplat)(0.70710677f);
    const VI neg = z < VN(vsplat)(0.0f);
    const VF a = VN(vsel)(neg, -z, z);
    const VF small = VN(vsplat)(1.0f) + z * VN(horner)(z * z, VN(erf_T), 7);
    const VF q = VN(vsplat)(1.0f) / a, y = q * q;
    const VF p = VN(horner)(y, VN(erfc_P), 9);
    const VF rr = VN(horner)(y, VN(erfc_R), 8);
    const VF erfc = VN(vexp)(-(a * a)) * q * VN(vsel)(a >= VN(vsplat)(2.0f), rr, p);
    const VF big = VN(vsel)(z > VN(vsplat)(0.0f), VN(vsplat)(2.0f) - erfc, erfc);
    const VI inSmall = a < VN(vsplat)(1.0f);
    return VN(vsplat)(0.5f) * x * VN(vsel)(inSmall, small, big);
}

VAI void VN(gelu_erf_body)(const float *x, float *y, long n) {
    long i = 0;
    for (; i + VW <= n; i += VW) VN(vstore)(y + i, VN(gelu_erf)(VN(vload)(x + i)));
    if (i < n) {
        float tail[VW] = {0};
        for (long k = i; k < n; k++) tail[k - i] = x[k];
        const VF g = VN(gelu_erf)(VN(vload)(tail));
        for (long k = i; k < n; k++) y[k] = g[k - i];
    }
}

#undef VF
#undef VI
#undef VW
#undef VN
#undef VAI
