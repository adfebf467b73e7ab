"""Per-op test vectors for the elementwise / activation / reduction / normalization kernels.

Writes, in the format read by Tests/InterpreterTests/OpVectors.swift:

    models-ir/opvectors/elementwise.json + .npz          binary/unary math, comparisons, logical,
                                                         activations, clip/threshold, cast, select
    models-ir/opvectors/reduction.json + .npz            reduce_*
    models-ir/opvectors/norm.json + .npz                 layer/batch/instance/l2/local_response norm
    models-ir/opvectors/elementwise_strings.json + .npz  cases with a string input (gelu mode,
                                                         cast dtype, output_dtype); each case has an
                                                         extra "strings": {name: value}, run by
                                                         Tests/InterpreterTests/ElementwiseKernelTests.swift

Expected values come from numpy / torch only (semantics of the MIL op reference, i.e.
coremltools' value inference). fp32 cases are computed in float64 from the float32 inputs and
rounded to float32 (floor_div / mod directly in float32, as numpy does); fp16 cases are computed
in float32 from the fp16 inputs and rounded to fp16 (the harness rounds the kernel's output to
fp16 too).

Run: tools/.venv/bin/python tools/opvectors_elementwise.py
"""

import json
import math
import os
import warnings

import numpy as np
import torch
import torch.nn.functional as F

warnings.simplefilter("ignore")
np.seterr(all="ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "models-ir", "opvectors")
RNG = np.random.default_rng(20250101)

DT = {np.float32: "fp32", np.float16: "fp16", np.int32: "int32", np.bool_: "bool",
      np.int8: "int8", np.uint8: "uint8", np.int16: "int16", np.uint16: "uint16"}
TOL = {"fp32": (1e-6, 1e-5), "fp16": (1e-3, 2e-3)}


class Family:
    def __init__(self, name):
        self.name = name
        self.cases = []
        self.arrays = {}
        self.ids = set()
        self.by_content = {}

    def key(self, arr):
        """Identical arrays (dtype, shape, bytes) are stored once, under a short key."""
        arr = np.array(arr, order="C", copy=True)  # (np.ascontiguousarray makes 0-d arrays 1-d)
        h = (arr.dtype.str, arr.shape, arr.tobytes())
        if h not in self.by_content:
            k = f"a{len(self.by_content)}"
            self.by_content[h] = k
            self.arrays[k] = arr
        return self.by_content[h]

    def case(self, op, inputs, outputs, tag="", atol=None, rtol=None, precision=None,
             strings=None, expect_error=False):
        """inputs: {name: np array}; outputs: [np array] (dtype gives the MIL dtype)."""
        base = f"{op}_{tag}" if tag else op
        cid, k = base, 1
        while cid in self.ids:
            k += 1
            cid = f"{base}_{k}"
        self.ids.add(cid)
        c = {"id": cid, "op": op, "inputs": {}, "outputs": []}
        for name, arr in inputs.items():
            c["inputs"][name] = self.key(np.asarray(arr))
        out_dts = []
        for i, arr in enumerate(outputs):
            arr = np.asarray(arr)
            key = self.key(arr)
            dt = DT[arr.dtype.type]
            out_dts.append(dt)
            c["outputs"].append({"key": key, "dtype": dt})
        fl = "fp16" if "fp16" in out_dts else "fp32"
        if precision is None:
            precision = "fp16" if fl == "fp16" else "fp32"
        c["precision"] = precision
        c["atol"] = atol if atol is not None else TOL[fl][0]
        c["rtol"] = rtol if rtol is not None else TOL[fl][1]
        if strings:
            c["strings"] = strings
        if expect_error:
            c["expect_error"] = True
        self.cases.append(c)

    def save(self):
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, self.name + ".json"), "w") as f:
            json.dump({"cases": self.cases}, f, indent=1, sort_keys=True)
            f.write("\n")
        np.savez_compressed(os.path.join(OUT, self.name + ".npz"), **self.arrays)
        size = os.path.getsize(os.path.join(OUT, self.name + ".npz"))
        print(f"{self.name}: {len(self.cases)} cases, npz {size} bytes")


_MEMO = {}


def _memo(kind, args, make):
    """Random inputs are shared between cases asking for the same (kind, shape, range, dtype, k):
    fewer distinct arrays keep the npz small. Pass a different `k` for a second, independent
    array of the same description (e.g. x and y of a binary op)."""
    key = (kind,) + tuple(tuple(a) if isinstance(a, list) else a for a in args)
    if key not in _MEMO:
        _MEMO[key] = make()
    return _MEMO[key].copy()


def rnd(shape, lo=-3.0, hi=3.0, dtype=np.float32, k=0):
    return _memo("rnd", (shape, lo, hi, dtype, k), lambda: RNG.uniform(lo, hi, size=shape).astype(dtype))


def nonzero(shape, lo=0.5, hi=3.0, dtype=np.float32, k=0):
    return _memo("nz", (shape, lo, hi, dtype, k),
                 lambda: (RNG.uniform(lo, hi, size=shape) * RNG.choice([-1.0, 1.0], size=shape)).astype(dtype))


def ints(shape, lo=-20, hi=20, k=0):
    return _memo("int", (shape, lo, hi, k), lambda: RNG.integers(lo, hi, size=shape, endpoint=True).astype(np.int32))


def nonzero_ints(shape, hi, k=0):
    return _memo("nzint", (shape, hi, k),
                 lambda: (RNG.integers(1, hi, size=shape, endpoint=True) * RNG.choice([-1, 1], size=shape)).astype(np.int32))


def apply(f, *xs):
    """fp32 inputs: compute in float64, round to float32. fp16: float32, round to fp16."""
    dt = xs[0].dtype
    if dt == np.float16:
        return np.asarray(f(*[x.astype(np.float32) for x in xs]), dtype=np.float32).astype(np.float16)
    return np.asarray(f(*[x.astype(np.float64) for x in xs]), dtype=np.float64).astype(np.float32)


def apply_native(f, *xs):
    """Computed in the storage float type (float32 for fp16 inputs)."""
    dt = xs[0].dtype
    if dt == np.float16:
        return np.asarray(f(*[x.astype(np.float32) for x in xs])).astype(np.float16)
    return np.asarray(f(*xs)).astype(np.float32)


def t64(f):
    """A torch function as a numpy function (float64 / float32 as given)."""
    return lambda *xs: f(*[torch.from_numpy(np.ascontiguousarray(x)) for x in xs]).numpy()


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0], dtype=np.float32)

# Broadcast shape pairs (x, y): name, shapes.
BCAST = [
    ("same", [2, 3, 4], [2, 3, 4]),
    ("scalar_y", [2, 3, 4], []),
    ("scalar_x", [], [3, 4]),
    ("trailing", [2, 3, 4], [4]),
    ("middle", [2, 3, 4], [2, 1, 4]),
    ("rank_expand", [3, 1], [2, 1, 4]),
    ("both", [2, 1, 4], [1, 3, 1]),
    ("column", [3, 5], [3, 1]),
    ("empty", [2, 0, 3], [3]),
    ("size1", [1, 1, 1], [1]),
    ("rank0", [], []),
]


# ---------------------------------------------------------------------------------------------
def elementwise():
    fam = Family("elementwise")

    # --- binary arithmetic -------------------------------------------------------------------
    arith = {
        "add": (np.add, rnd, rnd),
        "sub": (np.subtract, rnd, rnd),
        "mul": (np.multiply, rnd, rnd),
        "real_div": (np.divide, rnd, nonzero),
        "pow": (np.power, lambda s, dtype=np.float32, k=0: rnd(s, 0.1, 3.0, dtype, k), lambda s, dtype=np.float32, k=0: rnd(s, -2, 2, dtype, k)),
        "maximum": (np.maximum, rnd, rnd),
        "minimum": (np.minimum, rnd, rnd),
        "floor_div": (np.floor_divide, lambda s, dtype=np.float32, k=0: rnd(s, -10, 10, dtype, k), nonzero),
        "mod": (np.mod, lambda s, dtype=np.float32, k=0: rnd(s, -10, 10, dtype, k), nonzero),
    }
    native = {"floor_div", "mod"}
    for op, (f, gx, gy) in arith.items():
        ap = apply_native if op in native else apply
        for tag, sx, sy in BCAST:
            x, y = gx(sx, k=0), gy(sy, k=1)
            fam.case(op, {"x": x, "y": y}, [ap(f, x, y)], tag=f"fp32_{tag}")
        for tag, sx, sy in [("same", [2, 3, 4], [2, 3, 4]), ("trailing", [3, 5], [5]), ("scalar", [4, 3], [])]:
            x, y = gx(sx, dtype=np.float16, k=0), gy(sy, dtype=np.float16, k=1)
            fam.case(op, {"x": x, "y": y}, [ap(f, x, y)], tag=f"fp16_{tag}")
        # NaN / inf / zeros, every pair.
        a = np.repeat(SPECIAL, len(SPECIAL)).astype(np.float32)
        b = np.tile(SPECIAL, len(SPECIAL)).astype(np.float32)
        fam.case(op, {"x": a, "y": b}, [ap(f, a, b)], tag="fp32_special")

    # exact floor_div / mod sign cases
    a = np.array([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 6.0, -6.0, 1e-3, -1e-3], dtype=np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, -3.0, 3.0, 5.0, 5.0], dtype=np.float32)
    for op, f in [("floor_div", np.floor_divide), ("mod", np.mod)]:
        fam.case(op, {"x": a, "y": b}, [apply_native(f, a, b)], tag="fp32_signs")

    # int32
    int_ops = {
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
        "minimum": np.minimum, "floor_div": np.floor_divide, "mod": np.mod,
    }
    for op, f in int_ops.items():
        for tag, sx, sy in [("same", [2, 3, 4], [2, 3, 4]), ("trailing", [3, 4], [4]), ("scalar", [5], []),
                            ("both", [2, 1, 3], [4, 1])]:
            x = ints(sx)
            y = ints(sy, k=1) if op not in ("floor_div", "mod") else nonzero_ints(sy, 7)
            fam.case(op, {"x": x, "y": y}, [f(x, y).astype(np.int32)], tag=f"int32_{tag}")
    x = np.array([7, -7, 7, -7, 0, 5, -5, 6, -6, 2147483647], dtype=np.int32)
    y = np.array([2, 2, -2, -2, 3, 0, 0, -3, 4, -1], dtype=np.int32)
    for op in ("floor_div", "mod"):
        fam.case(op, {"x": x, "y": y}, [int_ops[op](x, y).astype(np.int32)], tag="int32_signs_zero")
    # int32 overflow wraps
    x = np.array([2147483647, -2147483648, 65536], dtype=np.int32)
    y = np.array([1, -1, 65536], dtype=np.int32)
    fam.case("add", {"x": x, "y": y}, [np.add(x, y)], tag="int32_wrap")
    fam.case("mul", {"x": x, "y": y}, [np.multiply(x, y)], tag="int32_wrap")
    # int32 pow (non-negative exponents), real_div (numpy truediv then astype int32)
    x, y = ints([12], -5, 5), ints([12], 0, 4)
    fam.case("pow", {"x": x, "y": y}, [np.power(x, y).astype(np.int32)], tag="int32")
    x, y = ints([3, 4]), nonzero_ints([4], 6)
    fam.case("real_div", {"x": x, "y": y}, [(x / y).astype(np.int32)], tag="int32_trunc")
    # pow with negative base, integral exponent; zero base
    x = np.array([-2.0, -2.0, -1.5, 0.0, 0.0, 0.0, -3.0, 2.0], dtype=np.float32)
    y = np.array([2.0, 3.0, 2.0, 0.0, 2.0, -1.0, 0.5, -3.0], dtype=np.float32)
    fam.case("pow", {"x": x, "y": y}, [apply(np.power, x, y)], tag="fp32_negative_base")

    # --- comparisons -------------------------------------------------------------------------
    cmp = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
           "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal}
    for op, f in cmp.items():
        for tag, sx, sy in [("same", [2, 3, 4], [2, 3, 4]), ("scalar", [3, 4], []), ("trailing", [2, 3, 4], [4]),
                            ("both", [3, 1], [1, 4]), ("empty", [0, 4], [4])]:
            x = ints(sx, -2, 2).astype(np.float32)
            y = ints(sy, -2, 2, k=1).astype(np.float32)
            fam.case(op, {"x": x, "y": y}, [f(x, y)], tag=f"fp32_{tag}")
        x = ints([2, 5], -2, 2).astype(np.float16)
        y = ints([5], -2, 2, k=1).astype(np.float16)
        fam.case(op, {"x": x, "y": y}, [f(x, y)], tag="fp16")
        x, y = ints([3, 4], -2, 2), ints([4], -2, 2, k=1)
        fam.case(op, {"x": x, "y": y}, [f(x, y)], tag="int32")
        a = np.repeat(SPECIAL, len(SPECIAL)).astype(np.float32)
        b = np.tile(SPECIAL, len(SPECIAL)).astype(np.float32)
        fam.case(op, {"x": a, "y": b}, [f(a, b)], tag="fp32_special")

    # --- logical -----------------------------------------------------------------------------
    for op, f in [("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)]:
        for tag, sx, sy in [("same", [2, 3, 4], [2, 3, 4]), ("trailing", [3, 4], [4]), ("scalar", [5], []), ("both", [3, 1], [1, 2])]:
            x = ints(sx, 0, 1).astype(bool)
            y = ints(sy, 0, 1, k=1).astype(bool)
            fam.case(op, {"x": x, "y": y}, [f(x, y)], tag=tag)
    x = RNG.integers(0, 1, size=[3, 4], endpoint=True).astype(bool)
    fam.case("logical_not", {"x": x}, [np.logical_not(x)])
    fam.case("logical_not", {"x": np.zeros([0, 2], bool)}, [np.zeros([0, 2], bool)], tag="empty")

    # --- unary -------------------------------------------------------------------------------
    def erf64(x):
        return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.astype(np.float64)

    unary = {
        # op: (numpy function, low, high, special-values meaningful)
        "abs": (np.abs, -5, 5, True),
        "acos": (np.arccos, -0.99, 0.99, True),
        "asin": (np.arcsin, -0.99, 0.99, True),
        "atan": (np.arctan, -5, 5, True),
        "atanh": (np.arctanh, -0.99, 0.99, True),
        "ceil": (np.ceil, -5, 5, True),
        "cos": (np.cos, -5, 5, True),
        "cosh": (np.cosh, -4, 4, True),
        "erf": (erf64, -3, 3, True),
        "exp": (np.exp, -6, 6, True),
        "exp2": (np.exp2, -6, 6, True),
        "floor": (np.floor, -5, 5, True),
        "round": (np.round, -5, 5, True),
        "sign": (np.sign, -5, 5, True),
        "sin": (np.sin, -5, 5, True),
        "sinh": (np.sinh, -4, 4, True),
        "sqrt": (np.sqrt, 0, 9, True),
        "square": (np.square, -5, 5, True),
        "tan": (np.tan, -1.4, 1.4, True),
        "tanh": (np.tanh, -4, 4, True),
    }
    for op, (f, lo, hi, special) in unary.items():
        x = rnd([2, 3, 5], lo, hi)
        fam.case(op, {"x": x}, [apply(f, x)], tag="fp32")
        x16 = rnd([4, 6], lo, hi, np.float16)
        fam.case(op, {"x": x16}, [apply(f, x16)], tag="fp16")
        if special:
            fam.case(op, {"x": SPECIAL}, [apply(f, SPECIAL)], tag="fp32_special")
        fam.case(op, {"x": np.zeros([2, 0], np.float32)}, [np.zeros([2, 0], np.float32)], tag="empty")
        fam.case(op, {"x": np.array(0.25, np.float32)}, [apply(f, np.array(0.25, np.float32))], tag="rank0")
    # round: halves go to even
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.5], dtype=np.float32)
    fam.case("round", {"x": x}, [apply(np.round, x)], tag="halves")
    # int32 forms
    for op, f in [("abs", np.abs), ("sign", np.sign), ("square", np.square)]:
        x = ints([3, 4])
        fam.case(op, {"x": x}, [f(x).astype(np.int32)], tag="int32")

    # epsilon ops: y = f(x + eps)
    eps_ops = {"rsqrt": (lambda v: 1.0 / np.sqrt(v), 1e-12), "inverse": (np.reciprocal, 1e-4),
               "log": (np.log, 1e-45)}
    for op, (f, default) in eps_ops.items():
        x = rnd([3, 5], 0.1, 5)
        e = np.array(1e-3, np.float32)
        fam.case(op, {"x": x, "epsilon": e}, [apply(lambda v, e: f(v + e), x, e)], tag="fp32_eps")
        d = np.float32(default)
        fam.case(op, {"x": x}, [apply(lambda v: f(v + np.float64(d)), x)], tag="fp32_default_eps")
        x16 = rnd([3, 5], 0.1, 5, np.float16)
        e16 = np.array(1e-2, np.float16)
        fam.case(op, {"x": x16, "epsilon": e16}, [apply(lambda v, e: f(v + e), x16, e16)], tag="fp16_eps")
        fam.case(op, {"x": x16}, [apply(lambda v: f(v + np.float32(np.float16(default))), x16)], tag="fp16_default_eps")
        xs = np.array([0.0, np.inf, np.nan, 1.0, 4.0, -0.0], np.float32)
        fam.case(op, {"x": xs}, [apply(lambda v: f(v + np.float64(d)), xs)], tag="fp32_special")

    # clip / threshold
    for dt in (np.float32, np.float16):
        x = rnd([3, 7], -4, 4, dt)
        a, b = np.array(-1.5, dt), np.array(2.25, dt)
        fam.case("clip", {"x": x, "alpha": a, "beta": b}, [apply(lambda v, a, b: np.minimum(np.maximum(v, a), b), x, a, b)], tag=DT[dt])
        fam.case("threshold", {"x": x, "alpha": a}, [apply(np.maximum, x, a)], tag=DT[dt])
    a, b = np.array(-1.0, np.float32), np.array(1.0, np.float32)
    fam.case("clip", {"x": SPECIAL, "alpha": a, "beta": b}, [apply(lambda v, a, b: np.minimum(np.maximum(v, a), b), SPECIAL, a, b)], tag="special")
    fam.case("threshold", {"x": SPECIAL, "alpha": a}, [apply(np.maximum, SPECIAL, a)], tag="special")
    x = ints([4, 3])
    fam.case("threshold", {"x": x, "alpha": np.array(2, np.int32)}, [np.maximum(x, 2).astype(np.int32)], tag="int32")

    # --- activations -------------------------------------------------------------------------
    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    acts = {
        "relu": (lambda v: np.maximum(v, 0), {}),
        "relu6": (lambda v: np.minimum(np.maximum(v, 0), 6), {}),
        "sigmoid": (sigmoid, {}),
        "silu": (t64(F.silu), {}),
        "softplus": (t64(F.softplus), {}),
        "softsign": (lambda v: v / (1 + np.abs(v)), {}),
        "gelu": (t64(F.gelu), {}),  # mode absent = EXACT
        "elu": (lambda v, alpha: t64(lambda t: F.elu(t, float(alpha)))(v), {"alpha": 0.7}),
        "leaky_relu": (lambda v, alpha: np.where(v < 0, v * alpha, v), {"alpha": 0.15}),
        "thresholded_relu": (lambda v, alpha: np.where(v < alpha, 0, v), {"alpha": 0.8}),
        # The op reference's definition: x >= 0 ? min(beta, x) : min(beta, alpha * x). (coremltools'
        # value inference, min(max(x, 0), beta) + min(min(x, 0) * alpha, beta), agrees only for beta >= 0.)
        "clamped_relu": (lambda v, alpha, beta: np.where(v >= 0, np.minimum(beta, v), np.minimum(beta, alpha * v)),
                         {"alpha": 0.3, "beta": 2.5}),
        "sigmoid_hard": (lambda v, alpha, beta: np.minimum(np.maximum(alpha * v + beta, 0), 1), {"alpha": 0.25, "beta": 0.4}),
        "scaled_tanh": (lambda v, alpha, beta: alpha * np.tanh(v * beta), {"alpha": 1.7, "beta": 0.6}),
        "linear_activation": (lambda v, alpha, beta: alpha * v + beta, {"alpha": -1.3, "beta": 0.45}),
    }
    for op, (f, params) in acts.items():
        for dt, shape, tag in [(np.float32, [2, 3, 8], "fp32"), (np.float16, [3, 9], "fp16"),
                               (np.float32, [1, 1], "size1"), (np.float32, [0, 3], "empty")]:
            x = rnd(shape, -7, 7, dt)
            ps = {k: np.array(v, dt) for k, v in params.items()}
            fam.case(op, {"x": x, **ps}, [apply(f, x, *ps.values())], tag=tag)
        # clamped_relu with negative beta: the min applies to the negative branch too
        if op == "clamped_relu":
            x = rnd([10], -4, 4)
            ps = {"alpha": np.array(2.0, np.float32), "beta": np.array(-1.0, np.float32)}
            fam.case(op, {"x": x, **ps}, [apply(f, x, *ps.values())], tag="neg_beta")
        sp = SPECIAL if op not in ("silu", "gelu", "elu") else SPECIAL[np.isfinite(SPECIAL) | np.isnan(SPECIAL)]
        ps = {k: np.array(v, np.float32) for k, v in params.items()}
        fam.case(op, {"x": sp, **ps}, [apply(f, sp, *ps.values())], tag="special")
    # large magnitudes (overflow-free forms)
    big = np.array([-100, -30, -10, 10, 30, 100], np.float32)
    for op in ("sigmoid", "softplus", "silu"):
        f = acts[op][0]
        fam.case(op, {"x": big}, [apply(f, big)], tag="large")

    # prelu: alpha per channel (axis 1)
    for shape in ([2, 3, 5], [2, 4, 3, 2], [1, 2, 2, 2, 3]):
        for dt in (np.float32, np.float16):
            x = rnd(shape, -3, 3, dt)
            alpha = rnd([shape[1]], 0.05, 0.9, dt)
            ab = alpha.reshape([1, -1] + [1] * (len(shape) - 2))
            fam.case("prelu", {"x": x, "alpha": alpha}, [apply(lambda v, a: np.maximum(v, 0) + np.minimum(v, 0) * a, x, ab)],
                     tag=f"{DT[dt]}_rank{len(shape)}")
    # softplus_parametric: alpha_c * log(1 + exp(beta_c * x))
    for dt in (np.float32, np.float16):
        x = rnd([2, 3, 2, 4], -4, 4, dt)
        a, b = rnd([3], 0.5, 2, dt), rnd([3], -1.5, 1.5, dt)
        ab, bb = a.reshape([1, 3, 1, 1]), b.reshape([1, 3, 1, 1])
        fam.case("softplus_parametric", {"x": x, "alpha": a, "beta": b},
                 [apply(lambda v, a, b: a * np.log1p(np.exp(b * v)), x, ab, bb)], tag=DT[dt])

    # softmax
    def softmax_ref(axis):
        return lambda v: t64(lambda t: torch.softmax(t, dim=axis))(v)

    for shape, axis, tag in [([2, 3, 7], None, "default_axis"), ([2, 3, 7], 1, "axis1"), ([2, 3, 7], -3, "axis_neg3"),
                             ([4, 37], -1, "long_row"), ([3, 1], -1, "size1_axis"), ([2, 0, 3], 1, "empty"),
                             ([5], 0, "rank1"), ([2, 5, 3], -2, "middle")]:
        for dt in (np.float32, np.float16):
            x = rnd(shape, -6, 6, dt)
            inp = {"x": x} if axis is None else {"x": x, "axis": np.array(axis, np.int32)}
            fam.case("softmax", inp, [apply(softmax_ref(-1 if axis is None else axis), x)], tag=f"{DT[dt]}_{tag}")
    # masked rows (-inf), large values
    x = rnd([3, 6], -3, 3)
    x[0, 2:] = -np.inf
    x[1, :] = [1000, 999, -1000, 0, 1000, 5]
    fam.case("softmax", {"x": x}, [apply(softmax_ref(-1), x)], tag="fp32_masked")
    x = np.array([[np.nan, 1, 2], [-np.inf, -np.inf, -np.inf]], np.float32)
    fam.case("softmax", {"x": x}, [np.full([2, 3], np.nan, np.float32)], tag="fp32_nan_rows")

    # --- cast (no dtype input: the declared output dtype is the target) ----------------------
    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.5, 2.9, 100.25, -100.75], np.float32)
    fam.case("cast", {"x": x}, [x.astype(np.int32)], tag="fp32_to_int32")
    x = rnd([3, 4], -100, 100)
    fam.case("cast", {"x": x}, [x.astype(np.float16)], tag="fp32_to_fp16", precision="fp32")
    x = ints([2, 5], -1000, 1000)
    fam.case("cast", {"x": x}, [x.astype(np.float32)], tag="int32_to_fp32")
    x = np.array([True, False, True])
    fam.case("cast", {"x": x}, [x.astype(np.float32)], tag="bool_to_fp32")
    x = np.array([0.0, -0.0, 1.0, np.nan, -3.0], np.float32)
    fam.case("cast", {"x": x}, [x.astype(bool)], tag="fp32_to_bool")
    x = np.array([300, -300, 127, -128, 255, 70000, -1], np.int32)
    for dt in (np.int8, np.uint8, np.int16, np.uint16):
        fam.case("cast", {"x": x}, [x.astype(dt)], tag=f"int32_to_{DT[dt]}")
    x = np.array([3.9, -3.9, 127.5, 200.5, -1.5, 0.0], np.float32)
    for dt in (np.int8, np.uint8, np.int16, np.uint16):
        fam.case("cast", {"x": x}, [x.astype(dt)], tag=f"fp32_to_{DT[dt]}")
    x = rnd([2, 3], -5, 5, np.float16)
    fam.case("cast", {"x": x}, [x.astype(np.float32)], tag="fp16_to_fp32")
    fam.case("cast", {"x": x}, [x.astype(np.int32)], tag="fp16_to_int32")

    # --- identity, select --------------------------------------------------------------------
    x = rnd([2, 3])
    fam.case("identity", {"x": x}, [x])
    x = ints([4])
    fam.case("identity", {"x": x}, [x], tag="int32")
    for tag, sc, sa, sb in [("same", [2, 3, 4], [2, 3, 4], [2, 3, 4]), ("cond_bcast", [3, 1], [2, 3, 4], [2, 3, 4]),
                            ("scalar_b", [2, 3, 4], [2, 3, 4], []), ("trailing", [2, 3, 4], [4], [3, 4]),
                            ("all_bcast", [2, 1, 1], [1, 3, 1], [1, 1, 4]), ("scalar_cond", [], [2, 3], [2, 3]),
                            ("empty", [0, 3], [3], [])]:
        c = ints(sc, 0, 1).astype(bool)
        a, b = rnd(sa), rnd(sb, k=1)
        fam.case("select", {"cond": c, "a": a, "b": b}, [np.where(c, a, b).astype(np.float32)], tag=f"fp32_{tag}")
    c = RNG.integers(0, 1, size=[3, 4], endpoint=True).astype(bool)
    a, b = ints([3, 4]), ints([4], k=1)
    fam.case("select", {"cond": c, "a": a, "b": b}, [np.where(c, a, b).astype(np.int32)], tag="int32")
    a, b = rnd([3, 4], dtype=np.float16), np.array(-np.inf, np.float16)
    fam.case("select", {"cond": c, "a": a, "b": b}, [np.where(c, a, b).astype(np.float16)], tag="fp16_mask")
    a, b = RNG.integers(0, 1, size=[4], endpoint=True).astype(bool), np.array(True)
    fam.case("select", {"cond": c, "a": a, "b": b}, [np.where(c, a, b)], tag="bool")

    # --- errors ------------------------------------------------------------------------------
    fam.case("add", {"x": rnd([2, 3]), "y": rnd([4])}, [np.zeros([1], np.float32)], tag="bad_broadcast", expect_error=True)
    fam.case("softmax", {"x": rnd([2, 3]), "axis": np.array(2, np.int32)}, [np.zeros([1], np.float32)], tag="bad_axis", expect_error=True)
    fam.case("prelu", {"x": rnd([2, 3, 4]), "alpha": rnd([2])}, [np.zeros([1], np.float32)], tag="bad_alpha", expect_error=True)
    return fam


# ---------------------------------------------------------------------------------------------
def reductions():
    fam = Family("reduction")

    def lse(v, axis=None, keepdims=False):
        t = torch.from_numpy(np.ascontiguousarray(v))
        dims = tuple(range(v.ndim)) if axis is None else axis
        return torch.logsumexp(t, dim=dims, keepdim=keepdims).numpy()

    ops = {
        "reduce_sum": (np.sum, -3, 3),
        "reduce_mean": (np.mean, -3, 3),
        "reduce_max": (np.max, -3, 3),
        "reduce_min": (np.min, -3, 3),
        "reduce_prod": (np.prod, 0.5, 1.6),
        "reduce_l1_norm": (lambda v, axis=None, keepdims=False: np.sum(np.abs(v), axis=axis, keepdims=keepdims), -3, 3),
        "reduce_l2_norm": (lambda v, axis=None, keepdims=False: np.sqrt(np.sum(np.square(v), axis=axis, keepdims=keepdims)), -3, 3),
        "reduce_log_sum": (lambda v, axis=None, keepdims=False: np.log(np.sum(v, axis=axis, keepdims=keepdims)), 0.1, 3),
        "reduce_log_sum_exp": (lse, -3, 3),
        "reduce_sum_square": (lambda v, axis=None, keepdims=False: np.sum(np.square(v), axis=axis, keepdims=keepdims), -3, 3),
    }
    layouts = [
        ("all", [2, 3, 4], None, None),
        ("axis1", [2, 3, 4], [1], None),
        ("last_keep", [2, 3, 4], [-1], True),
        ("noncontig", [2, 3, 4], [0, 2], False),
        ("noncontig_keep", [2, 3, 4, 2], [-4, 2], True),
        ("leading", [2, 3, 4], [0, 1], None),
        ("long_row", [3, 37], [-1], False),
        ("long_row_keep", [2, 100], [1], True),
        ("rank1", [9], [0], None),
        ("size1_axis", [3, 1, 2], [1], True),
    ]
    for op, (f, lo, hi) in ops.items():
        for tag, shape, axes, keep in layouts:
            x = rnd(shape, lo, hi)
            inp = {"x": x}
            if axes is not None:
                inp["axes"] = np.array(axes, np.int32)
            if keep is not None:
                inp["keep_dims"] = np.array(keep)
            ax = tuple(axes) if axes is not None else None
            want = apply(lambda v: f(v, axis=ax, keepdims=bool(keep)), x)
            fam.case(op, inp, [want], tag=f"fp32_{tag}", atol=2e-6, rtol=2e-5)
        x16 = rnd([3, 20], lo, hi, np.float16)
        fam.case(op, {"x": x16, "axes": np.array([-1], np.int32)}, [apply(lambda v: f(v, axis=(1,)), x16)], tag="fp16_last")
        fam.case(op, {"x": x16, "axes": np.array([0], np.int32), "keep_dims": np.array(True)},
                 [apply(lambda v: f(v, axis=(0,), keepdims=True), x16)], tag="fp16_first_keep")
        # empty: the reduced-away dims are 0 → output shape keeps a 0 → empty output
        x = np.zeros([2, 0, 3], np.float32)
        fam.case(op, {"x": x, "axes": np.array([2], np.int32)}, [np.zeros([2, 0], np.float32)], tag="empty_output")

    # reducing over a 0-sized axis
    x = np.zeros([2, 0, 3], np.float32)
    ax = {"axes": np.array([1], np.int32)}
    fam.case("reduce_sum", {"x": x, **ax}, [np.sum(x, axis=1)], tag="empty_axis")
    fam.case("reduce_prod", {"x": x, **ax}, [np.prod(x, axis=1)], tag="empty_axis")
    fam.case("reduce_mean", {"x": x, **ax}, [np.mean(x, axis=1).astype(np.float32)], tag="empty_axis")
    fam.case("reduce_sum_square", {"x": x, **ax}, [np.sum(x, axis=1)], tag="empty_axis")
    fam.case("reduce_log_sum_exp", {"x": x, **ax}, [lse(x, axis=(1,))], tag="empty_axis")
    fam.case("reduce_max", {"x": x, **ax}, [np.zeros([2, 3], np.float32)], tag="empty_axis", expect_error=True)
    fam.case("reduce_min", {"x": x, **ax}, [np.zeros([2, 3], np.float32)], tag="empty_axis", expect_error=True)
    # axes = [] reduces nothing (numpy axis=())
    x = rnd([2, 3])
    fam.case("reduce_sum", {"x": x, "axes": np.zeros([0], np.int32)}, [np.sum(x, axis=())], tag="no_axes")
    fam.case("reduce_l2_norm", {"x": x, "axes": np.zeros([0], np.int32)}, [apply(lambda v: np.sqrt(np.square(v)), x)], tag="no_axes")

    # NaN / inf
    x = np.array([[1, np.nan, 3, 0], [np.inf, 1, 2, -1], [-np.inf, -np.inf, -np.inf, -np.inf], [np.inf, -np.inf, 0, 1]], np.float32)
    last = {"axes": np.array([-1], np.int32)}
    for op in ("reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "reduce_log_sum_exp"):
        f = ops[op][0]
        fam.case(op, {"x": x, **last}, [apply(lambda v: f(v, axis=(1,)), x)], tag="special_rows")
        fam.case(op, {"x": x.T.copy(), "axes": np.array([0], np.int32)}, [apply(lambda v: f(v, axis=(0,)), x.T.copy())], tag="special_columns")

    # int32
    int_ops = {
        "reduce_sum": np.sum, "reduce_max": np.max, "reduce_min": np.min, "reduce_prod": np.prod,
        "reduce_l1_norm": lambda v, axis=None, keepdims=False: np.sum(np.abs(v), axis=axis, keepdims=keepdims),
        "reduce_sum_square": lambda v, axis=None, keepdims=False: np.sum(np.square(v), axis=axis, keepdims=keepdims),
        "reduce_mean": np.mean,
    }
    for op, f in int_ops.items():
        x = ints([3, 4], -9, 9) if op != "reduce_prod" else ints([3, 4], -3, 3)
        fam.case(op, {"x": x, "axes": np.array([1], np.int32)}, [f(x, axis=1).astype(np.int32)], tag="int32_axis1")
        fam.case(op, {"x": x}, [np.asarray(f(x)).astype(np.int32)], tag="int32_all")
        fam.case(op, {"x": x, "axes": np.array([0], np.int32), "keep_dims": np.array(True)},
                 [f(x, axis=0, keepdims=True).astype(np.int32)], tag="int32_axis0_keep")

    # argmax / argmin
    for op, f in (("reduce_argmax", np.argmax), ("reduce_argmin", np.argmin)):
        for tag, shape, axis, keep in [("default", [2, 3, 5], None, None), ("axis0", [2, 3, 5], 0, None),
                                       ("axis_neg2_keep", [2, 3, 5], -2, True), ("long", [2, 300], 1, False),
                                       ("rank1", [7], 0, True)]:
            for dt in (np.float32, np.float16):
                x = rnd(shape, -5, 5, dt)
                inp = {"x": x}
                if axis is not None:
                    inp["axis"] = np.array(axis, np.int32)
                if keep is not None:
                    inp["keep_dims"] = np.array(keep)
                a = -1 if axis is None else axis
                want = f(x, axis=a)
                if keep:
                    want = np.expand_dims(want, a)
                fam.case(op, inp, [want.astype(np.int32)], tag=f"{DT[dt]}_{tag}")
        x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [np.nan, 5, np.nan, -5], [0, -1, 7, np.nan]], np.float32)
        fam.case(op, {"x": x}, [f(x, axis=-1).astype(np.int32)], tag="ties_nan")
        x = ints([3, 6], -3, 3)
        fam.case(op, {"x": x, "axis": np.array(0, np.int32)}, [f(x, axis=0).astype(np.int32)], tag="int32")
        fam.case(op, {"x": np.zeros([0, 4], np.float32)}, [np.zeros([0], np.int32)], tag="empty_outer")
        fam.case(op, {"x": np.zeros([3, 0], np.float32)}, [np.zeros([3], np.int32)], tag="empty_axis", expect_error=True)

    fam.case("reduce_sum", {"x": rnd([2, 3]), "axes": np.array([2], np.int32)}, [np.zeros([1], np.float32)], tag="bad_axis", expect_error=True)
    fam.case("reduce_sum", {"x": rnd([2, 3]), "axes": np.array([1, -1], np.int32)}, [np.zeros([1], np.float32)], tag="repeated_axis", expect_error=True)
    return fam


# ---------------------------------------------------------------------------------------------
def norms():
    fam = Family("norm")

    def layer_norm_ref(x, axes, gamma, beta, eps):
        """coremltools' value inference (np_layer_norm)."""
        rank = x.ndim
        axes = [a + rank if a < 0 else a for a in axes]
        ns = [x.shape[i] if i in axes else 1 for i in range(rank)]
        g = np.ones(ns) if gamma is None else np.reshape(gamma, ns)
        b = np.zeros(ns) if beta is None else np.reshape(beta, ns)
        num = x - np.mean(x, axis=tuple(axes), keepdims=True)
        dem = np.sqrt(np.sum(np.square(num), axis=tuple(axes), keepdims=True) / np.prod(ns) + eps)
        return num / dem * g + b

    for tag, shape, axes, g, b, eps in [
        ("last", [2, 5, 16], [-1], True, True, 1e-5),
        ("last2", [2, 5, 16], [1, 2], True, True, 1e-5),
        ("all_default", [3, 4, 5], None, False, False, None),
        ("first", [4, 3, 5], [0], True, True, 1e-3),
        ("noncontig", [2, 3, 16], [0, 2], True, True, 1e-5),
        ("middle", [2, 6, 3], [1], True, False, 1e-5),
        ("gamma_only", [3, 40], [-1], True, False, 1e-6),
        ("beta_only", [3, 40], [-1], False, True, 1e-6),
        ("size1", [4, 1], [-1], True, True, 1e-5),
        ("long_row", [2, 130], [-1], True, True, 1e-5),
    ]:
        for dt in (np.float32, np.float16):
            x = rnd(shape, -3, 3, dt) + dt(0.5)
            ax = axes if axes is not None else list(range(len(shape)))
            nshape = [shape[a if a >= 0 else a + len(shape)] for a in sorted(a if a >= 0 else a + len(shape) for a in ax)]
            inp = {"x": x}
            if axes is not None:
                inp["axes"] = np.array(axes, np.int32)
            gamma = rnd(nshape, 0.5, 1.5, dt) if g else None
            beta = rnd(nshape, -1, 1, dt) if b else None
            if gamma is not None:
                inp["gamma"] = gamma
            if beta is not None:
                inp["beta"] = beta
            e = 1e-5 if eps is None else eps
            if eps is not None:
                inp["epsilon"] = np.array(eps, dt)
            e = np.float32(e) if dt == np.float32 else np.float32(np.float16(e))
            args = [x] + [a for a in (gamma, beta) if a is not None]

            def f(v, *rest, gamma=gamma, beta=beta, ax=ax, e=e):
                it = iter(rest)
                gg = next(it) if gamma is not None else None
                bb = next(it) if beta is not None else None
                return layer_norm_ref(v, ax, gg, bb, e)
            tol = {"atol": 1e-5, "rtol": 1e-4} if dt == np.float32 else {}
            fam.case("layer_norm", inp, [apply(f, *args)], tag=f"{DT[dt]}_{tag}", **tol)
    x = rnd([3, 4])
    fam.case("layer_norm", {"x": x, "axes": np.array([1], np.int32), "gamma": rnd([3])}, [np.zeros([1], np.float32)],
             tag="bad_gamma", expect_error=True)

    # batch_norm
    for shape in ([2, 3, 5], [2, 3, 2, 4], [1, 2, 2, 2, 3]):
        for dt in (np.float32, np.float16):
            c = shape[1]
            x = rnd(shape, -3, 3, dt)
            mean, var = rnd([c], -1, 1, dt), rnd([c], 0.2, 2, dt)
            gamma, beta = rnd([c], 0.5, 1.5, dt), rnd([c], -1, 1, dt)
            bs = [1, c] + [1] * (len(shape) - 2)
            for with_gb in (True, False):
                inp = {"x": x, "mean": mean, "variance": var, "epsilon": np.array(1e-3, dt)}
                if with_gb:
                    inp.update({"gamma": gamma, "beta": beta})
                e = np.array(1e-3, dt)
                ref = lambda v, m, s, g, b, e: g.reshape(bs) * (v - m.reshape(bs)) / np.sqrt(s.reshape(bs) + e) + b.reshape(bs)
                gg = gamma if with_gb else np.ones([c], dt)
                bb = beta if with_gb else np.zeros([c], dt)
                fam.case("batch_norm", inp, [apply(ref, x, mean, var, gg, bb, e)],
                         tag=f"{DT[dt]}_rank{len(shape)}{'_gb' if with_gb else ''}", **({"atol": 1e-5, "rtol": 1e-5} if dt == np.float32 else {}))

    # instance_norm (torch)
    for shape in ([2, 3, 7], [2, 3, 4, 5]):
        for dt in (np.float32, np.float16):
            c = shape[1]
            x = rnd(shape, -3, 3, dt)
            gamma, beta = rnd([c], 0.5, 1.5, dt), rnd([c], -1, 1, dt)
            e = 1e-4
            ref = lambda v, g, b: F.instance_norm(torch.from_numpy(v), weight=torch.from_numpy(g), bias=torch.from_numpy(b), eps=float(np.float32(e) if dt == np.float32 else np.float32(np.float16(e)))).numpy()
            fam.case("instance_norm", {"x": x, "gamma": gamma, "beta": beta, "epsilon": np.array(e, dt)},
                     [apply(ref, x, gamma, beta)], tag=f"{DT[dt]}_rank{len(shape)}", **({"atol": 1e-5, "rtol": 1e-4} if dt == np.float32 else {}))
        x = rnd(shape, -3, 3)
        ref = lambda v: F.instance_norm(torch.from_numpy(v), eps=1e-5).numpy()
        fam.case("instance_norm", {"x": x}, [apply(ref, x)], tag=f"fp32_rank{len(shape)}_default", atol=1e-5, rtol=1e-4)

    # l2_norm: x / sqrt(sum(x^2) + eps) over the last 3 dims
    def l2_ref(v, eps, nd=3):
        axes = tuple(range(max(v.ndim - nd, 0), v.ndim))
        return v / np.sqrt(np.sum(v * v, axis=axes, keepdims=True) + eps)

    for shape in ([2, 3, 4], [2, 2, 3, 4], [2, 1, 2, 3, 2]):
        for dt in (np.float32, np.float16):
            x = rnd(shape, -3, 3, dt)
            e = np.array(1e-4, dt)
            fam.case("l2_norm", {"x": x, "epsilon": e}, [apply(l2_ref, x, e)], tag=f"{DT[dt]}_rank{len(shape)}")
    x = rnd([2, 3, 4])
    fam.case("l2_norm", {"x": x}, [apply(lambda v: l2_ref(v, np.float32(1e-6)), x)], tag="fp32_default_eps")
    x = np.zeros([1, 2, 2], np.float32)
    fam.case("l2_norm", {"x": x, "epsilon": np.array(1e-6, np.float32)}, [x], tag="zeros")
    x = rnd([3, 2, 5])
    fam.case("l2_norm", {"x": x, "axes": np.array([-1], np.int32), "epsilon": np.array(1e-6, np.float32)},
             [apply(lambda v: v / np.sqrt(np.sum(v * v, axis=-1, keepdims=True) + np.float32(1e-6)), x)], tag="fp32_axes_last")

    # local_response_norm (torch: alpha/size * sum over the window, odd sizes centred)
    for shape, size, alpha, beta, k in [([2, 5, 3, 3], 3, 1e-2, 0.75, 1.0), ([1, 7, 4], 5, 0.5, 0.5, 2.0),
                                        ([2, 4, 2, 2], 1, 1e-1, 1.0, 1.0), ([1, 3, 2, 2], 7, 0.2, 0.75, 1.5)]:
        for dt in (np.float32, np.float16):
            x = rnd(shape, -3, 3, dt)
            ref = lambda v: F.local_response_norm(torch.from_numpy(v), size, alpha=alpha, beta=beta, k=k).numpy()
            fam.case("local_response_norm", {"x": x, "size": np.array(size, np.int32), "alpha": np.array(alpha, dt),
                                             "beta": np.array(beta, dt), "k": np.array(k, dt)},
                     [apply(ref, x)], tag=f"{DT[dt]}_rank{len(shape)}_size{size}")
    x = rnd([1, 6, 2, 2])
    ref = lambda v: F.local_response_norm(torch.from_numpy(v), 3).numpy()  # torch defaults = MIL defaults
    fam.case("local_response_norm", {"x": x, "size": np.array(3, np.int32)}, [apply(ref, x)], tag="fp32_defaults")
    return fam


# ---------------------------------------------------------------------------------------------
def strings():
    fam = Family("elementwise_strings")
    modes = {
        "EXACT": lambda t: F.gelu(t),
        "TANH_APPROXIMATION": lambda t: F.gelu(t, approximate="tanh"),
        "SIGMOID_APPROXIMATION": lambda t: t * torch.sigmoid(1.702 * t),
    }
    for mode, f in modes.items():
        for dt in (np.float32, np.float16):
            x = rnd([3, 11], -6, 6, dt)
            fam.case("gelu", {"x": x}, [apply(t64(f), x)], tag=f"{DT[dt]}_{mode.lower()}", strings={"mode": mode})
    fam.case("gelu", {"x": rnd([3])}, [np.zeros([3], np.float32)], tag="bad_mode", strings={"mode": "tanh"}, expect_error=True)

    x = np.array([-2.7, -0.5, 0.0, 0.4, 1.5, 2.9, 100.25, -100.75, 300.0, -129.0], np.float32)
    for name, dt in [("int32", np.int32), ("int8", np.int8), ("uint8", np.uint8), ("int16", np.int16),
                     ("uint16", np.uint16), ("fp16", np.float16), ("fp32", np.float32), ("bool", np.bool_)]:
        fam.case("cast", {"x": x}, [x.astype(dt)], tag=f"fp32_to_{name}", strings={"dtype": name})
    xi = np.array([300, -300, 127, -128, 70000, 0, 1], np.int32)
    for name, dt in [("int8", np.int8), ("uint16", np.uint16), ("fp32", np.float32), ("bool", np.bool_)]:
        fam.case("cast", {"x": xi}, [xi.astype(dt)], tag=f"int32_to_{name}", strings={"dtype": name})
    xb = np.array([True, False])
    fam.case("cast", {"x": xb}, [xb.astype(np.int32)], tag="bool_to_int32", strings={"dtype": "int32"})
    fam.case("cast", {"x": x}, [x], tag="bad_dtype", strings={"dtype": "complex64"}, expect_error=True)

    x = rnd([3, 8], -4, 4)
    fam.case("reduce_argmax", {"x": x}, [np.argmax(x, axis=-1).astype(np.uint16)], tag="uint16", strings={"output_dtype": "uint16"})
    fam.case("reduce_argmin", {"x": x, "axis": np.array(0, np.int32)}, [np.argmin(x, axis=0).astype(np.int32)], tag="int32",
             strings={"output_dtype": "int32"})
    fam.case("reduce_argmax", {"x": x}, [np.zeros([3], np.int32)], tag="bad_dtype", strings={"output_dtype": "int8"}, expect_error=True)
    return fam


def main():
    total = 0
    for fam in (elementwise(), reductions(), norms(), strings()):
        fam.save()
        total += os.path.getsize(os.path.join(OUT, fam.name + ".npz"))
    print(f"total npz {total} bytes")


if __name__ == "__main__":
    main()
