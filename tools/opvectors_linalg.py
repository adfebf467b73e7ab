#!/usr/bin/env python3
"""Per-op test vectors for the linear-algebra / attention / convolution / pooling kernels.

Writes
  models-ir/opvectors/linalg.json          cases run by `OpVectors.run(family: "linalg")`
  models-ir/opvectors/linalg_strings.json  cases with string inputs (`pad_type`, `equation`),
                                           the harness format plus `"strings": {name: value}`
                                           (an .npz cannot hold strings); run by
                                           `MatmulKernelTests`
  models-ir/opvectors/linalg.npz           the arrays of both

Every expected value comes from torch / numpy (float64 numpy, or torch float32 on CPU);
nothing comes from forge-ir. Where torch has no direct equivalent of a MIL padding mode
(asymmetric `custom` pads, `same` / `same_lower` with stride > 1, conv_transpose cropping,
`output_shape`), the input is padded (or the full result cropped) explicitly with numpy/torch
and the padding-free torch op is applied, following the MIL op reference:
  * conv / pool `same`: total pad = max(0, (ceil(in/s) - 1)*s + k_eff - in); `same` puts the
    odd element at the end, `same_lower` at the start (coremltools ops/defs/_utils.py).
  * conv_transpose: full size (in-1)*s + k_eff; custom pad crops [b, e]; `same` gives in*s,
    cropping floor((k_eff - s)/2) at the start; output_shape keeps out[o] = full[o + pad_b]
    (zeros past the full result, then bias).
  * avg_pool: exclude_padding_from_average=False counts padding (torch count_include_pad).
  * ceil_mode: torch's output size (same as coremltools' when padding > 0).

fp16 cases: inputs are rounded to fp16 and stored as fp16; expected = the float32 torch result
of those fp16 values, rounded to fp16 (the harness rounds fp16 outputs the same way).

Run: tools/.venv/bin/python tools/opvectors_linalg.py
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "models-ir", "opvectors")

rng = np.random.default_rng(20250214)
torch.manual_seed(0)

DTYPES = {
    np.dtype(np.float32): "fp32",
    np.dtype(np.float16): "fp16",
    np.dtype(np.int32): "int32",
    np.dtype(np.bool_): "bool",
}

TOL32 = dict(atol=1e-4, rtol=1e-4)
TOL16 = dict(atol=2e-3, rtol=2e-3)


class Vectors:
    def __init__(self):
        self.cases = []
        self.string_cases = []
        self.arrays = {}
        self.by_content = {}
        self.ids = set()

    def _put(self, key, v):
        v = np.array(v, order="C")
        if v.dtype == np.float64:
            v = v.astype(np.float32)
        if v.dtype == np.int64:
            v = v.astype(np.int32)
        assert v.dtype in DTYPES, (key, v.dtype)
        sig = (v.dtype.str, v.shape, v.tobytes())
        if sig in self.by_content:
            return self.by_content[sig], v
        assert key not in self.arrays, key
        self.by_content[sig] = key
        self.arrays[key] = v
        return key, v

    def add(self, cid, op, inputs, outputs, strings=None, variadic=None, tol=None, expect_error=False):
        assert cid not in self.ids, cid
        self.ids.add(cid)
        c = {"id": cid, "op": op, "inputs": {}, "outputs": []}
        for name, v in inputs.items():
            if v is None:
                continue
            c["inputs"][name] = self._put(f"{cid}__{name}", v)[0]
        if variadic:
            c["variadic"] = {n: [self._put(f"{cid}__{n}{i}", v)[0] for i, v in enumerate(vs)] for n, vs in variadic.items()}
        for i, o in enumerate(outputs):
            if expect_error:
                c["outputs"].append({"key": f"{cid}__out{i}", "dtype": o})
            else:
                key, o = self._put(f"{cid}__out{i}", o)
                c["outputs"].append({"key": key, "dtype": DTYPES[o.dtype]})
        if expect_error:
            c["expect_error"] = True
        if tol:
            c.update(tol)
        if strings:
            c["strings"] = strings
            self.string_cases.append(c)
        else:
            self.cases.append(c)

    def err(self, cid, op, inputs, strings=None, variadic=None):
        self.add(cid, op, inputs, ["fp32"], strings=strings, variadic=variadic, expect_error=True)


V = Vectors()


def rnd(shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def half(a):
    return np.asarray(a, dtype=np.float32).astype(np.float16)


def t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32).copy())


def n(x):
    return x.detach().numpy().astype(np.float32)


def i32(*a):
    return np.array(a, dtype=np.int32)


def scalar_i(v):
    return np.array(v, dtype=np.int32)


def scalar_b(v):
    return np.array(v, dtype=np.bool_)


def both(cid, op, inputs, fn, float_keys, strings=None, extra=None):
    """An fp32 case and an fp16 case (float_keys rounded to fp16; expected fn(fp32 of those))."""
    V.add(cid + "_fp32", op, inputs, [fn(inputs)], strings=strings, tol=TOL32)
    h = dict(inputs)
    for k in float_keys:
        if h.get(k) is not None:
            h[k] = half(h[k])
    h32 = {k: (v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float16 else v) for k, v in h.items()}
    V.add(cid + "_fp16", op, h, [half(fn(h32))], strings=strings, tol=TOL16)


# ---------------------------------------------------------------------------------------------
# linear
# ---------------------------------------------------------------------------------------------
def linear_cases():
    def f(d):
        b = t(d["bias"]) if d.get("bias") is not None else None
        return n(F.linear(t(d["x"]), t(d["weight"]), b))

    both("linear_2d_bias", "linear", {"x": rnd([3, 5]), "weight": rnd([7, 5]), "bias": rnd([7])}, f, ["x", "weight", "bias"])
    both("linear_3d", "linear", {"x": rnd([2, 3, 17]), "weight": rnd([33, 17])}, f, ["x", "weight"])
    both("linear_rank1", "linear", {"x": rnd([9]), "weight": rnd([4, 9]), "bias": rnd([4])}, f, ["x", "weight", "bias"])
    both("linear_wide", "linear", {"x": rnd([2, 70]), "weight": rnd([40, 70]), "bias": rnd([40])}, f, ["x", "weight", "bias"])
    V.err("linear_bad_weight", "linear", {"x": rnd([2, 5]), "weight": rnd([3, 4])})
    V.err("linear_bad_bias", "linear", {"x": rnd([2, 5]), "weight": rnd([3, 5]), "bias": rnd([4])})


def linear_mixed_cases():
    """iOS17 `linear`: weight and bias of another dtype than x (U ∈ {fp16, fp32, int32}), as
    coremltools' TestLinear::test_linear_ios17_mixed_precision builds them (integer values
    0…9). Expected: float64 numpy x·Wᵀ + b, in x's dtype. Own generator, so adding these cases
    leaves every other case's values unchanged."""
    g = np.random.default_rng(20261201)

    def ints(shape):
        return g.integers(0, 10, size=shape)

    for xd, wd in [("fp32", "int32"), ("fp16", "int32"), ("fp32", "fp16"), ("fp16", "fp32")]:
        npd = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32}
        x, w, b = ints([2, 3, 4]).astype(npd[xd]), ints([3, 4]).astype(npd[wd]), ints([3]).astype(npd[wd])
        want = (x.astype(np.float64) @ w.astype(np.float64).T + b.astype(np.float64)).astype(npd[xd])
        V.add(f"linear_mixed_x{xd}_w{wd}", "linear", {"x": x, "weight": w, "bias": b}, [want],
              tol=TOL32 if xd == "fp32" else TOL16)
    x = (g.uniform(-2, 2, size=[5, 6])).astype(np.float32)
    w = g.integers(-4, 5, size=[2, 6]).astype(np.int32)
    V.add("linear_mixed_int32_weight_no_bias", "linear", {"x": x, "weight": w},
          [(x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)], tol=TOL32)


# ---------------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------------
def matmul_cases():
    def f(d):
        x = np.asarray(d["x"], np.float64)
        y = np.asarray(d["y"], np.float64)
        if d.get("transpose_x") is not None and bool(d["transpose_x"]) and x.ndim >= 2:
            x = np.swapaxes(x, -1, -2)
        if d.get("transpose_y") is not None and bool(d["transpose_y"]) and y.ndim >= 2:
            y = np.swapaxes(y, -1, -2)
        return np.matmul(x, y).astype(np.float32)

    M, K, N = 5, 7, 6
    for tx in (False, True):
        for ty in (False, True):
            x = rnd([K, M] if tx else [M, K])
            y = rnd([N, K] if ty else [K, N])
            both(f"matmul_2d_tx{int(tx)}_ty{int(ty)}", "matmul",
                 {"x": x, "y": y, "transpose_x": scalar_b(tx), "transpose_y": scalar_b(ty)}, f, ["x", "y"])
    both("matmul_r1_r2", "matmul", {"x": rnd([7]), "y": rnd([7, 3])}, f, ["x", "y"])
    both("matmul_r2_r1", "matmul", {"x": rnd([4, 7]), "y": rnd([7])}, f, ["x", "y"])
    both("matmul_r1_r1", "matmul", {"x": rnd([9]), "y": rnd([9])}, f, ["x", "y"])
    both("matmul_r1_r3", "matmul", {"x": rnd([5]), "y": rnd([2, 5, 3])}, f, ["x", "y"])
    both("matmul_r3_r1", "matmul", {"x": rnd([2, 3, 5]), "y": rnd([5])}, f, ["x", "y"])
    both("matmul_r3_r2", "matmul", {"x": rnd([3, 4, 9]), "y": rnd([9, 10])}, f, ["x", "y"])
    both("matmul_r2_r3_ty", "matmul", {"x": rnd([4, 9]), "y": rnd([3, 10, 9]), "transpose_y": scalar_b(True)}, f, ["x", "y"])
    both("matmul_r4_bcast", "matmul", {"x": rnd([2, 1, 3, 5]), "y": rnd([3, 5, 4])}, f, ["x", "y"])
    both("matmul_r4_bcast_both", "matmul", {"x": rnd([2, 1, 3, 5]), "y": rnd([1, 4, 4, 5]), "transpose_y": scalar_b(True)}, f, ["x", "y"])
    both("matmul_r3_txty", "matmul", {"x": rnd([2, 6, 3]), "y": rnd([2, 4, 6]), "transpose_x": scalar_b(True), "transpose_y": scalar_b(True)}, f, ["x", "y"])
    # attention-shaped: [1, H, S, D] · [1, H, D, T]
    both("matmul_attn_scores", "matmul", {"x": rnd([1, 3, 4, 16]), "y": rnd([1, 3, 11, 16]), "transpose_y": scalar_b(True)}, f, ["x", "y"])
    both("matmul_attn_values", "matmul", {"x": rnd([1, 3, 4, 11]), "y": rnd([1, 3, 11, 16])}, f, ["x", "y"])
    # larger, odd sizes (tiles + tails, parallel split)
    x, y = rnd([37, 45]), rnd([45, 41])
    V.add("matmul_big_odd_fp32", "matmul", {"x": x, "y": y}, [f({"x": x, "y": y})], tol=TOL32)
    # int32
    xi = rng.integers(-20, 20, size=[2, 3, 4]).astype(np.int32)
    yi = rng.integers(-20, 20, size=[4, 5]).astype(np.int32)
    V.add("matmul_int32", "matmul", {"x": xi, "y": yi}, [np.matmul(xi, yi).astype(np.int32)])
    yi2 = rng.integers(-20, 20, size=[2, 5, 4]).astype(np.int32)
    V.add("matmul_int32_ty", "matmul", {"x": xi, "y": yi2, "transpose_y": scalar_b(True)},
          [np.matmul(xi, np.swapaxes(yi2, -1, -2)).astype(np.int32)])
    V.err("matmul_bad_inner", "matmul", {"x": rnd([2, 3]), "y": rnd([4, 2])})
    V.err("matmul_bad_batch", "matmul", {"x": rnd([2, 2, 3]), "y": rnd([3, 3, 2])})


# ---------------------------------------------------------------------------------------------
# einsum (string equation)
# ---------------------------------------------------------------------------------------------
def einsum_cases():
    def ein(eq):
        return lambda d: np.einsum(eq, *[np.asarray(v, np.float64) for v in d["values"]]).astype(np.float32)

    def case(cid, eq, arrays, fp16=True):
        f = ein(eq)
        V.add(cid + "_fp32", "einsum", {}, [f({"values": arrays})], variadic={"values": arrays},
              strings={"equation": eq}, tol=TOL32)
        if fp16:
            h = [half(a) for a in arrays]
            V.add(cid + "_fp16", "einsum", {}, [half(f({"values": [a.astype(np.float32) for a in h]}))],
                  variadic={"values": h}, strings={"equation": eq}, tol=TOL16)

    # the forms coremltools emits
    case("einsum_nchw_nwhu", "nchw,nwhu->nchu", [rnd([2, 3, 4, 5]), rnd([2, 5, 4, 6])])
    case("einsum_nchw_bcast_h", "nchw,nwhu->nchu", [rnd([2, 3, 4, 5]), rnd([1, 5, 1, 6])], fp16=False)
    case("einsum_chw_whr", "chw,whr->chr", [rnd([3, 4, 5]), rnd([5, 4, 2])])
    case("einsum_chw_bcast", "chw,whr->chr", [rnd([3, 1, 5]), rnd([5, 4, 2])], fp16=False)
    # general forms
    case("einsum_ij_jk", "ij,jk->ik", [rnd([4, 6]), rnd([6, 3])], fp16=False)
    case("einsum_implicit", "ij,jk", [rnd([4, 6]), rnd([6, 3])], fp16=False)
    case("einsum_bmm", "bij,bjk->bik", [rnd([2, 3, 4]), rnd([2, 4, 5])], fp16=False)
    case("einsum_transpose", "ij->ji", [rnd([3, 5])], fp16=False)
    case("einsum_trace", "ii->", [rnd([4, 4])], fp16=False)
    case("einsum_diag", "ii->i", [rnd([4, 4])], fp16=False)
    case("einsum_sum_axis", "ijk->ik", [rnd([2, 3, 4])], fp16=False)
    case("einsum_outer", "i,j->ij", [rnd([3]), rnd([4])], fp16=False)
    case("einsum_dot", "i,i->", [rnd([7]), rnd([7])], fp16=False)
    case("einsum_ellipsis", "...ij,...jk->...ik", [rnd([2, 3, 4, 5]), rnd([3, 5, 2])], fp16=False)
    case("einsum_three", "ij,jk,kl->il", [rnd([2, 3]), rnd([3, 4]), rnd([4, 5])], fp16=False)
    case("einsum_bhqd_bhkd", "bhqd,bhkd->bhqk", [rnd([1, 2, 3, 8]), rnd([1, 2, 5, 8])], fp16=False)
    V.err("einsum_bad_rank", "einsum", {}, variadic={"values": [rnd([2, 3]), rnd([3, 4])]}, strings={"equation": "ijk,kl->il"})
    V.err("einsum_bad_size", "einsum", {}, variadic={"values": [rnd([2, 3]), rnd([4, 5])]}, strings={"equation": "ij,jk->ik"})


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention
# ---------------------------------------------------------------------------------------------
def sdpa_cases():
    def f(d):
        m = d.get("attn_mask")
        if m is not None:
            m = torch.from_numpy(m.copy()) if m.dtype == np.bool_ else t(m)
        return n(F.scaled_dot_product_attention(t(d["query"]), t(d["key"]), t(d["value"]), attn_mask=m))

    q, k, v = rnd([2, 3, 4, 8]), rnd([2, 3, 6, 8]), rnd([2, 3, 6, 5])
    both("sdpa_nomask", "scaled_dot_product_attention", {"query": q, "key": k, "value": v}, f, ["query", "key", "value"])
    bmask = np.tril(np.ones([4, 6], dtype=np.bool_), k=2)
    both("sdpa_bool_mask", "scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": bmask}, f,
         ["query", "key", "value"])
    fmask = rnd([2, 1, 4, 6], -3, 0)
    fmask[..., 5] = -np.inf
    both("sdpa_float_mask", "scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": fmask}, f,
         ["query", "key", "value", "attn_mask"])
    # rank 3, decode-like single query row
    q3, k3, v3 = rnd([4, 1, 16]), rnd([4, 9, 16]), rnd([4, 9, 16])
    both("sdpa_rank3_decode", "scaled_dot_product_attention", {"query": q3, "key": k3, "value": v3}, f,
         ["query", "key", "value"])
    # per-batch bool mask [B, 1, L, S]
    bm = rng.uniform(size=[2, 1, 4, 6]) > 0.4
    bm[..., 0] = True
    V.add("sdpa_bool_mask_batched_fp32", "scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": bm},
          [f({"query": q, "key": k, "value": v, "attn_mask": bm})], tol=TOL32)
    V.err("sdpa_bad_embed", "scaled_dot_product_attention", {"query": rnd([1, 2, 4]), "key": rnd([1, 3, 5]), "value": rnd([1, 3, 5])})
    V.err("sdpa_bad_mask", "scaled_dot_product_attention", {"query": q, "key": k, "value": v, "attn_mask": rnd([4, 5])})


# ---------------------------------------------------------------------------------------------
# conv / conv_transpose
# ---------------------------------------------------------------------------------------------
def same_pads(inp, k_eff, s, lower=False):
    total = max(0, (-(-inp // s) - 1) * s + k_eff - inp)
    small, large = total // 2, total - total // 2
    return (large, small) if lower else (small, large)


def convnd(x, w, b, stride, dil, groups, pads):
    """pads: [(b0, e0), (b1, e1)...] explicit; zero-padded, then torch conv without padding."""
    r = x.ndim - 2
    flat = []
    for (pb, pe) in reversed(pads):
        flat += [pb, pe]
    xp = F.pad(t(x), flat)
    fn = F.conv1d if r == 1 else F.conv2d
    return n(fn(xp, t(w), t(b) if b is not None else None, stride=stride, dilation=dil, groups=groups))


def conv_cases():
    def add(cid, x, w, b=None, strides=None, dil=None, groups=None, pad_type=None, pad=None):
        r = x.ndim - 2
        s = list(strides) if strides is not None else [1] * r
        d = list(dil) if dil is not None else [1] * r
        g = groups or 1
        k_eff = [(w.shape[2 + i] - 1) * d[i] + 1 for i in range(r)]
        pt = pad_type or "valid"
        if pt == "valid":
            pads = [(0, 0)] * r
        elif pt == "custom":
            pads = [(pad[2 * i], pad[2 * i + 1]) for i in range(r)]
        else:
            pads = [same_pads(x.shape[2 + i], k_eff[i], s[i], pt == "same_lower") for i in range(r)]
        inputs = {"x": x, "weight": w, "bias": b,
                  "strides": i32(*s) if strides is not None else None,
                  "dilations": i32(*d) if dil is not None else None,
                  "groups": scalar_i(g) if groups is not None else None,
                  "pad": i32(*pad) if pad is not None else None}

        def f(dd):
            return convnd(dd["x"], dd["weight"], dd.get("bias"), s, d, g, pads)
        both(cid, "conv", inputs, f, ["x", "weight", "bias"], strings={"pad_type": pt} if pad_type else None)

    add("conv1d_basic", rnd([2, 4, 11]), rnd([6, 4, 3]), rnd([6]))
    add("conv1d_stride_dil_custom", rnd([2, 4, 11]), rnd([6, 4, 3]), rnd([6]), strides=[2], dil=[2], pad_type="custom", pad=[1, 2])
    add("conv1d_same_s2", rnd([1, 3, 10]), rnd([4, 3, 4]), None, strides=[2], pad_type="same")
    add("conv2d_valid", rnd([1, 3, 7, 6]), rnd([5, 3, 3, 3]), rnd([5]))
    add("conv2d_groups_same", rnd([1, 4, 9, 8]), rnd([6, 2, 3, 3]), rnd([6]), strides=[2, 1], groups=2, pad_type="same")
    add("conv2d_same_even_k_s2", rnd([1, 2, 9, 8]), rnd([3, 2, 4, 4]), None, strides=[2, 2], pad_type="same")
    add("conv2d_same_lower", rnd([1, 2, 9, 8]), rnd([3, 2, 4, 2]), rnd([3]), strides=[2, 3], pad_type="same_lower")
    add("conv2d_depthwise", rnd([2, 4, 6, 7]), rnd([4, 1, 3, 3]), rnd([4]), groups=4, pad_type="custom", pad=[1, 1, 1, 1])
    add("conv2d_depthwise_mult", rnd([1, 3, 6, 5]), rnd([6, 1, 2, 3]), None, groups=3, strides=[1, 2])
    add("conv2d_dilated_custom", rnd([1, 3, 10, 9]), rnd([4, 3, 3, 2]), rnd([4]), dil=[2, 3], pad_type="custom", pad=[2, 0, 1, 3])
    add("conv2d_1x1", rnd([2, 8, 4, 5]), rnd([3, 8, 1, 1]), rnd([3]))
    V.err("conv_bad_groups", "conv", {"x": rnd([1, 4, 5, 5]), "weight": rnd([6, 3, 3, 3]), "groups": scalar_i(2)})
    V.err("conv_bad_pad_type", "conv", {"x": rnd([1, 2, 5, 5]), "weight": rnd([3, 2, 3, 3])}, strings={"pad_type": "reflect"})
    V.err("conv_too_small", "conv", {"x": rnd([1, 2, 2, 2]), "weight": rnd([3, 2, 3, 3])})

    # conv_transpose
    def full_tconv(x, w, s, d, g):
        r = x.ndim - 2
        fn = F.conv_transpose1d if r == 1 else F.conv_transpose2d
        return fn(t(x), t(w), None, stride=s, dilation=d, groups=g).numpy().astype(np.float64)

    def tadd(cid, x, w, b=None, strides=None, dil=None, groups=None, pad_type=None, pad=None, output_shape=None):
        r = x.ndim - 2
        s = list(strides) if strides is not None else [1] * r
        d = list(dil) if dil is not None else [1] * r
        g = groups or 1
        pt = pad_type or "valid"
        k_eff = [(w.shape[2 + i] - 1) * d[i] + 1 for i in range(r)]
        full = [(x.shape[2 + i] - 1) * s[i] + k_eff[i] for i in range(r)]
        if pt == "valid":
            pb, out = [0] * r, list(full)
        elif pt == "custom":
            pb = [pad[2 * i] for i in range(r)]
            out = [full[i] - pad[2 * i] - pad[2 * i + 1] for i in range(r)]
        else:  # same
            target = [x.shape[2 + i] * s[i] for i in range(r)] if output_shape is None else list(output_shape[-r:])
            pb = [max(0, full[i] - target[i]) // 2 for i in range(r)]
            out = target
        if output_shape is not None:
            out = list(output_shape[-r:])
        inputs = {"x": x, "weight": w, "bias": b,
                  "strides": i32(*s) if strides is not None else None,
                  "dilations": i32(*d) if dil is not None else None,
                  "groups": scalar_i(g) if groups is not None else None,
                  "pad": i32(*pad) if pad is not None else None,
                  "output_shape": i32(*output_shape) if output_shape is not None else None}

        def f(dd):
            y = full_tconv(dd["x"], dd["weight"], s, d, g)
            big = np.zeros(list(y.shape[:2]) + [max(full[i], pb[i] + out[i]) for i in range(r)])
            big[(slice(None), slice(None)) + tuple(slice(0, full[i]) for i in range(r))] = y
            res = big[(slice(None), slice(None)) + tuple(slice(pb[i], pb[i] + out[i]) for i in range(r))]
            if dd.get("bias") is not None:
                res = res + np.asarray(dd["bias"], np.float64).reshape([1, -1] + [1] * r)
            return res.astype(np.float32)
        both(cid, "conv_transpose", inputs, f, ["x", "weight", "bias"], strings={"pad_type": pt} if pad_type else None)

    tadd("convT1d_s2", rnd([2, 4, 7]), rnd([4, 3, 3]), rnd([3]), strides=[2])
    tadd("convT1d_custom_dil", rnd([1, 3, 6]), rnd([3, 2, 3]), None, strides=[3], dil=[2], pad_type="custom", pad=[2, 1])
    tadd("convT2d_s2_groups", rnd([1, 4, 5, 6]), rnd([4, 3, 3, 3]), rnd([6]), strides=[2, 2], groups=2, pad_type="custom", pad=[1, 1, 1, 1])
    tadd("convT2d_same", rnd([1, 3, 4, 5]), rnd([3, 2, 4, 3]), rnd([2]), strides=[2, 2], pad_type="same")
    tadd("convT2d_output_shape", rnd([1, 3, 4, 5]), rnd([3, 2, 3, 3]), rnd([2]), strides=[2, 2], pad_type="custom",
         pad=[1, 1, 1, 1], output_shape=[1, 2, 8, 10])
    tadd("convT2d_valid_dil", rnd([2, 2, 3, 4]), rnd([2, 3, 2, 2]), None, dil=[2, 1], strides=[1, 2])
    # cross-check of the custom-pad + output_shape reading against torch's own padding/output_padding
    x, w, b = rnd([1, 3, 4, 5]), rnd([3, 2, 3, 3]), rnd([2])
    y = n(F.conv_transpose2d(t(x), t(w), t(b), stride=2, padding=1, output_padding=1))
    V.add("convT2d_torch_output_padding_fp32", "conv_transpose",
          {"x": x, "weight": w, "bias": b, "strides": i32(2, 2), "pad": i32(1, 1, 1, 1), "output_shape": i32(*y.shape)},
          [y], strings={"pad_type": "custom"}, tol=TOL32)
    V.err("convT_bad_weight", "conv_transpose", {"x": rnd([1, 4, 5]), "weight": rnd([3, 2, 3])})


# ---------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------
def pool_cases():
    def pads_for(x, k, s, pt, pad):
        r = x.ndim - 2
        if pt == "valid":
            return [(0, 0)] * r
        if pt == "custom":
            return [(pad[2 * i], pad[2 * i + 1]) for i in range(r)]
        return [same_pads(x.shape[2 + i], k[i], s[i], pt == "same_lower") for i in range(r)]

    def ref(kind, x, k, s, pt, pad, ceil, exclude):
        r = x.ndim - 2
        pads = pads_for(x, k, s, pt, pad)
        sym = all(pb == pe for pb, pe in pads) and all(pb <= k[i] // 2 for i, (pb, _) in enumerate(pads))
        xt = t(x)
        if kind == "max":
            fn = F.max_pool1d if r == 1 else F.max_pool2d
            if sym:
                return n(fn(xt, k, s, padding=[p[0] for p in pads], ceil_mode=ceil))
            flat = sum([[pb, pe] for pb, pe in reversed(pads)], [])
            return n(fn(F.pad(xt, flat, value=-np.inf), k, s, ceil_mode=ceil))
        if kind == "avg":
            fn = F.avg_pool1d if r == 1 else F.avg_pool2d
            if sym:
                return n(fn(xt, k, s, padding=[p[0] for p in pads], ceil_mode=ceil, count_include_pad=not exclude))
            assert not ceil
            flat = sum([[pb, pe] for pb, pe in reversed(pads)], [])
            num = fn(F.pad(xt, flat), k, s)  # mean including padding
            if not exclude:
                return n(num)
            cnt = fn(F.pad(torch.ones_like(xt), flat), k, s)
            return n(num / cnt)
        # l2
        flat = sum([[pb, pe] for pb, pe in reversed(pads)], [])
        fn = F.avg_pool1d if r == 1 else F.avg_pool2d
        sq = fn(F.pad(xt, flat) ** 2, k, s, ceil_mode=ceil)
        return n(torch.sqrt(sq * float(np.prod(k))))

    def add(cid, kind, x, k, s=None, pt="valid", pad=None, ceil=None, exclude=None):
        r = x.ndim - 2
        ss = list(s) if s is not None else [1] * r
        inputs = {"x": x, "kernel_sizes": i32(*k), "strides": i32(*s) if s is not None else None,
                  "pad": i32(*pad) if pad is not None else None,
                  "ceil_mode": scalar_b(ceil) if ceil is not None else None}
        if kind == "avg" and exclude is not None:
            inputs["exclude_padding_from_average"] = scalar_b(exclude)

        def f(dd):
            return ref(kind, dd["x"], list(k), ss, pt, pad, bool(ceil), bool(exclude))
        both(cid, f"{kind}_pool", inputs, f, ["x"], strings={"pad_type": pt})

    x2 = rnd([2, 3, 7, 8])
    add("maxpool2d_k3s2_pad1", "max", x2, [3, 3], [2, 2], "custom", [1, 1, 1, 1])
    add("maxpool2d_ceil", "max", x2, [3, 2], [2, 2], "custom", [1, 1, 1, 1], ceil=True)
    add("maxpool2d_ceil_nopad", "max", x2, [2, 3], [2, 2], "valid", ceil=True)
    add("maxpool2d_same", "max", x2, [3, 3], [2, 3], "same")
    add("maxpool1d_asym", "max", rnd([2, 3, 9]), [3], [2], "custom", [2, 0])
    add("avgpool2d_incl_pad", "avg", x2, [3, 3], [2, 2], "custom", [1, 1, 1, 1], exclude=False)
    add("avgpool2d_excl_pad", "avg", x2, [3, 3], [2, 2], "custom", [1, 1, 1, 1], exclude=True)
    add("avgpool2d_ceil_incl", "avg", x2, [3, 3], [2, 2], "custom", [1, 1, 1, 1], ceil=True, exclude=False)
    add("avgpool2d_ceil_excl", "avg", x2, [2, 3], [3, 2], "custom", [1, 1, 1, 1], ceil=True, exclude=True)
    add("avgpool2d_same_excl", "avg", x2, [2, 3], [2, 2], "same", exclude=True)
    add("avgpool2d_same_incl", "avg", x2, [3, 2], [2, 2], "same", exclude=False)
    add("avgpool1d_valid", "avg", rnd([1, 4, 10]), [4], [3])
    add("l2pool2d_valid", "l2", x2, [2, 2], [2, 2])
    add("l2pool2d_pad", "l2", x2, [3, 3], [2, 1], "custom", [1, 1, 0, 2])
    add("l2pool1d_same", "l2", rnd([2, 2, 9]), [3], [2], "same")
    V.err("maxpool_bad_kernel", "max_pool", {"x": rnd([1, 2, 5, 5]), "kernel_sizes": i32(3, 3, 3)}, strings={"pad_type": "valid"})


def main():
    linear_cases()
    matmul_cases()
    einsum_cases()
    sdpa_cases()
    conv_cases()
    pool_cases()
    linear_mixed_cases()
    os.makedirs(OUT, exist_ok=True)
    np.savez_compressed(os.path.join(OUT, "linalg.npz"), **V.arrays)
    with open(os.path.join(OUT, "linalg.json"), "w") as fh:
        json.dump({"cases": V.cases}, fh, indent=1)
        fh.write("\n")
    with open(os.path.join(OUT, "linalg_strings.json"), "w") as fh:
        json.dump({"cases": V.string_cases}, fh, indent=1)
        fh.write("\n")
    size = os.path.getsize(os.path.join(OUT, "linalg.npz"))
    print(f"linalg: {len(V.cases)} cases, linalg_strings: {len(V.string_cases)} cases, "
          f"{len(V.arrays)} arrays, npz {size} bytes")


if __name__ == "__main__":
    main()
