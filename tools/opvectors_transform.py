#!/usr/bin/env python3
"""Per-op test vectors for the tensor transformation / tensor operation kernels.

Writes `models-ir/opvectors/transform.json` + `transform.npz` (read by
`Tests/InterpreterTests/OpVectors.swift`, `OpVectors.run(family: "transform")`) and
`models-ir/opvectors/transform_modes.json` (same format plus `"strings": {input: value}` for
string inputs such as `pad.mode` / `scatter.mode`, which `.npz` cannot hold; run by
`TransformKernelTests`; its arrays live in the same `transform.npz`).

Every expected value comes from numpy / torch (or plain Python loops over numpy arrays that
spell out the MIL op reference formula); nothing comes from forge-ir.

Semantics follow the coremltools MIL op definitions (iOS15..iOS18):
  * reshape: -1 inferred; 0 copies the input dim counted from the right (iOS17; same as iOS15
    when ranks match).
  * slice_by_index: numpy slicing x[b:e:s]; masks -> None; squeeze_mask -> x[b] (0 with
    begin_mask).
  * squeeze with axes ignores listed axes whose size is not 1 (PyTorch behaviour).
  * depth_to_space / space_to_depth: TensorFlow DCR order in NCHW; pixel_shuffle: torch (CRD).
  * scatter*: default mode "add" (coremltools default_inputs); repeated indices applied in order.
  * topk / argsort: numpy stable argsort of x (ascending) or -x (descending), i.e. ties keep
    the lower index first; topk always sorted.
  * one_hot: an index outside [0, depth) gives a row of off_value (TensorFlow).
  * gather & co: negative indices wrap (iOS15/16); outside [-d, d) is an error.

Run: tools/.venv/bin/python tools/opvectors_transform.py
"""
import json
import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "models-ir", "opvectors")

rng = np.random.default_rng(20250101)

DTYPES = {
    np.dtype(np.float32): "fp32",
    np.dtype(np.float16): "fp16",
    np.dtype(np.int32): "int32",
    np.dtype(np.bool_): "bool",
    np.dtype(np.uint16): "uint16",
}


class Vectors:
    def __init__(self):
        self.cases = []
        self.mode_cases = []
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
        assert key not in self.arrays, key
        # identical arrays (axes, masks, shared inputs) are stored once
        sig = (v.dtype.str, v.shape, v.tobytes())
        if sig in self.by_content:
            return self.by_content[sig], v
        self.by_content[sig] = key
        self.arrays[key] = v
        return key, v

    def add(self, cid, op, inputs=None, variadic=None, outputs=(), expect_error=False,
            strings=None, atol=None, rtol=None, out_dtypes=None):
        """outputs: list of expected arrays (or, with expect_error, of dtype names)."""
        assert cid not in self.ids, cid
        self.ids.add(cid)
        c = {"id": cid, "op": op, "inputs": {}, "outputs": []}
        for name, v in (inputs or {}).items():
            key, _ = self._put(f"{cid}__{name}", v)
            c["inputs"][name] = key
        if variadic:
            c["variadic"] = {}
            for name, vs in variadic.items():
                keys = []
                for i, v in enumerate(vs):
                    key, _ = self._put(f"{cid}__{name}{i}", v)
                    keys.append(key)
                c["variadic"][name] = keys
        for i, o in enumerate(outputs):
            key = f"{cid}__out{i}"
            if expect_error:
                c["outputs"].append({"key": key, "dtype": o})
            else:
                key, o = self._put(key, o)
                dt = out_dtypes[i] if out_dtypes else DTYPES[o.dtype]
                c["outputs"].append({"key": key, "dtype": dt})
        if expect_error:
            c["expect_error"] = True
        if atol is not None:
            c["atol"] = atol
        if rtol is not None:
            c["rtol"] = rtol
        if strings:
            c["strings"] = strings
            self.mode_cases.append(c)
        else:
            self.cases.append(c)

    def err(self, cid, op, inputs=None, variadic=None, strings=None, n_out=1):
        self.add(cid, op, inputs=inputs, variadic=variadic, outputs=["fp32"] * n_out,
                 expect_error=True, strings=strings)


V = Vectors()


def i32(*a):
    return np.array(a, dtype=np.int32)


def s32(v):
    return np.array(v, dtype=np.int32)


def sb(v):
    return np.array(v, dtype=np.bool_)


def f32(shape, lo=-4, hi=4):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def f32q(shape):
    """Random fp32 values on a 1/8 grid (compresses well; for the larger tensors)."""
    return (rng.integers(-64, 64, size=shape) / 8).astype(np.float32)


def ints(shape, lo=-50, hi=50):
    return rng.integers(lo, hi, size=shape).astype(np.int32)


def bools(shape):
    return rng.random(shape) < 0.5


def samples(shape):
    """fp32, int32, bool versions of a random tensor."""
    return {"f": f32(shape), "i": ints(shape), "b": bools(shape)}


# ---------------------------------------------------------------- reshape

def reshape_target(xshape, shape):
    out = list(shape)
    for i, s in enumerate(shape):
        if s == 0:
            j = len(xshape) - (len(shape) - i)
            out[i] = xshape[j] if j >= 0 else 1
    return out


for tag, x, shape in [
    ("f_infer", f32((2, 3, 4)), [4, -1]),
    ("i_zero_copy", ints((2, 3, 4)), [0, -1, 2]),
    ("b_flat", bools((2, 3, 4)), [-1]),
    ("f_ios17_zero", f32((2, 50)), [1, 0, -1, 0]),
    ("f_scalar_to_1", np.array(3.5, dtype=np.float32), [1]),
    ("f_to_scalar", f32((1, 1)), []),
    ("f_empty", f32((0, 3)), [3, -1]),
    ("i_size1", ints((1, 6, 1)), [2, 1, 3]),
]:
    V.add(f"reshape_{tag}", "reshape", {"x": x, "shape": s32(shape)},
          outputs=[x.reshape(reshape_target(x.shape, shape))])
V.err("reshape_err_volume", "reshape", {"x": f32((2, 3)), "shape": i32(4, 2)})
V.err("reshape_err_two_infer", "reshape", {"x": f32((2, 3)), "shape": i32(-1, -1)})
V.err("reshape_err_indivisible", "reshape", {"x": f32((2, 3)), "shape": i32(4, -1)})

# ---------------------------------------------------------------- transpose

for tag, x, perm in [
    ("f_201", f32((2, 3, 4)), [2, 0, 1]),
    ("i_neg", ints((2, 3, 4)), [-1, 0, 1]),
    ("b_021", bools((2, 3, 4)), [0, 2, 1]),
    ("f_swap_last_tiled", f32q((3, 37, 41)), [0, 2, 1]),
    ("f_reverse_all", f32((5, 7, 9)), [2, 1, 0]),
    ("f_keep_inner", f32q((8, 40, 24)), [1, 0, 2]),
    ("f_4d", f32((2, 3, 4, 5)), [0, 2, 1, 3]),
    ("f_4d_b", f32((2, 3, 4, 5)), [3, 1, 0, 2]),
    ("f_empty", f32((0, 3)), [1, 0]),
    ("f_size1", f32((1, 5, 1, 3)), [3, 2, 1, 0]),
    ("f_identity", f32((3, 4)), [0, 1]),
    ("h_fp16", f32((4, 6)).astype(np.float16), [1, 0]),
]:
    V.add(f"transpose_{tag}", "transpose", {"x": x, "perm": s32(perm)}, outputs=[np.transpose(x, perm)])
V.err("transpose_err_not_perm", "transpose", {"x": f32((2, 3)), "perm": i32(0, 0)})
V.err("transpose_err_length", "transpose", {"x": f32((2, 3)), "perm": i32(0)})

# ---------------------------------------------------------------- expand_dims / squeeze / flatten2d


def expand(x, axes):
    out_rank = x.ndim + len(axes)
    return np.expand_dims(x, tuple(a + out_rank if a < 0 else a for a in axes))


for tag, x, axes in [
    ("f_0", f32((2, 3)), [0]),
    ("i_last", ints((2, 3)), [-1]),
    ("b_multi", bools((2, 3)), [0, 3]),
    ("f_multi_neg", f32((2, 3)), [-1, -3]),
    ("f_scalar", np.array(1.25, dtype=np.float32), [0]),
    ("f_middle", f32((2, 3)), [1, 2]),
]:
    V.add(f"expand_dims_{tag}", "expand_dims", {"x": x, "axes": s32(axes)}, outputs=[expand(x, axes)])
V.err("expand_dims_err_range", "expand_dims", {"x": f32((2, 3)), "axes": i32(4)})
V.err("expand_dims_err_repeat", "expand_dims", {"x": f32((2, 3)), "axes": i32(0, -4)})


def torch_squeeze(x, axes):
    t = torch.from_numpy(np.ascontiguousarray(x))
    return t.squeeze(tuple(axes)).numpy() if axes is not None else t.squeeze().numpy()


for tag, x, axes in [
    ("f_all", f32((1, 3, 1, 2)), None),
    ("i_last", ints((2, 3, 1)), [-1]),
    ("b_some", bools((1, 3, 1)), [0, 2]),
    ("f_ignore_non1", f32((1, 3, 1)), [0, 1]),
    ("f_to_scalar", f32((1,)), None),
    ("f_neg_pair", f32((1, 1, 4)), [-3, -2]),
]:
    inputs = {"x": x}
    if axes is not None:
        inputs["axes"] = s32(axes)
    V.add(f"squeeze_{tag}", "squeeze", inputs, outputs=[torch_squeeze(x, axes)])
V.err("squeeze_err_range", "squeeze", {"x": f32((1, 3)), "axes": i32(2)})


def flatten2d(x, axis):
    pre = int(np.prod(x.shape[:axis]))
    return x.reshape(pre, -1) if x.size else x.reshape(pre, int(np.prod(x.shape[axis:])))


for tag, x, axis in [
    ("f_default", f32((2, 3, 4)), None),
    ("i_last", ints((2, 3, 4)), -1),
    ("b_zero", bools((2, 3, 4)), 0),
    ("f_rank", f32((2, 3)), 2),
    ("f_1d_neg", f32((3,)), -1),
]:
    inputs = {"x": x}
    if axis is not None:
        inputs["axis"] = s32(axis)
    V.add(f"flatten2d_{tag}", "flatten2d", inputs, outputs=[flatten2d(x, 1 if axis is None else axis)])

# ---------------------------------------------------------------- reverse / tile

for tag, x, axes in [
    ("f_all", f32((2, 3, 4)), None),
    ("i_one", ints((2, 3, 4)), [1]),
    ("b_two_neg", bools((2, 3, 4)), [-1, 0]),
    ("f_empty", f32((0, 4)), [1]),
    ("f_1d", f32((7,)), [0]),
]:
    inputs = {"x": x}
    if axes is not None:
        inputs["axes"] = s32(axes)
    V.add(f"reverse_{tag}", "reverse", inputs,
          outputs=[np.flip(x, axis=tuple(axes) if axes is not None else None).copy()])

for tag, x, reps in [
    ("f_2d", f32((2, 3)), [2, 3]),
    ("i_3d", ints((2, 1, 3)), [1, 4, 2]),
    ("b_2d", bools((3, 2)), [3, 1]),
    ("f_ones", f32((2, 3)), [1, 1]),
    ("f_1d", f32((4,)), [5]),
]:
    V.add(f"tile_{tag}", "tile", {"x": x, "reps": s32(reps)}, outputs=[np.tile(x, reps)])
V.err("tile_err_zero", "tile", {"x": f32((2, 3)), "reps": i32(0, 1)})
V.err("tile_err_length", "tile", {"x": f32((2, 3)), "reps": i32(2)})

# ---------------------------------------------------------------- concat / stack / split


def interleave(vals, axis):
    st = np.stack(vals, axis=axis + 1)
    shape = list(vals[0].shape)
    shape[axis] *= len(vals)
    return st.reshape(shape)


for tag, vals, axis, inter in [
    ("f_axis0", [f32((2, 3)), f32((1, 3)), f32((4, 3))], 0, None),
    ("f_axis_neg", [f32((2, 3, 2)), f32((2, 1, 2))], -2, None),
    ("i_last", [ints((2, 2)), ints((2, 5))], -1, False),
    ("b_axis1", [bools((2, 1, 3)), bools((2, 2, 3))], 1, None),
    ("f_empty_piece", [f32((2, 0)), f32((2, 3))], 1, None),
    ("f_interleave0", [f32((3, 2)), f32((3, 2))], 0, True),
    ("i_interleave_last", [ints((2, 2)), ints((2, 2)), ints((2, 2))], -1, True),
    ("f_single", [f32((2, 3))], 0, None),
    ("f_llm_like", [f32((1, 6, 32)), f32((1, 2, 32))], 1, None),
]:
    inputs = {"axis": s32(axis)}
    if inter is not None:
        inputs["interleave"] = sb(inter)
    exp = interleave(vals, axis if axis >= 0 else axis + vals[0].ndim) if inter else np.concatenate(vals, axis=axis)
    V.add(f"concat_{tag}", "concat", inputs, variadic={"values": vals}, outputs=[exp])
V.err("concat_err_shape", "concat", {"axis": i32(0)}, variadic={"values": [f32((2, 3)), f32((2, 4))]})
V.err("concat_err_axis", "concat", {"axis": i32(2)}, variadic={"values": [f32((2, 3)), f32((2, 3))]})

for tag, vals, axis in [
    ("f_0", [f32((2, 3)), f32((2, 3))], 0),
    ("i_last", [ints((2, 3)), ints((2, 3)), ints((2, 3))], -1),
    ("b_1", [bools((2, 3)), bools((2, 3))], 1),
    ("f_scalars", [np.float32(1.5), np.float32(-2.0)], 0),
]:
    V.add(f"stack_{tag}", "stack", {"axis": s32(axis)}, variadic={"values": [np.asarray(v) for v in vals]},
          outputs=[np.stack(vals, axis=axis)])
V.err("stack_err_shape", "stack", {"axis": i32(0)}, variadic={"values": [f32((2, 3)), f32((3, 2))]})

for tag, x, axis, num, sizes in [
    ("f_num", f32((2, 6, 3)), 1, 3, None),
    ("i_sizes_neg", ints((2, 6)), -1, None, [1, 3, 2]),
    ("b_sizes_zero", bools((5, 2)), 0, None, [2, 0, 3]),
    ("f_both", f32((4, 3)), 0, 2, [1, 3]),
    ("f_one", f32((4, 3)), 1, 1, None),
]:
    inputs = {"x": x, "axis": s32(axis)}
    if num is not None:
        inputs["num_splits"] = s32(num)
    if sizes is not None:
        inputs["split_sizes"] = s32(sizes)
    pieces = np.split(x, np.cumsum(sizes)[:-1] if sizes else num, axis=axis)
    V.add(f"split_{tag}", "split", inputs, outputs=pieces)
V.err("split_err_indivisible", "split", {"x": f32((2, 5)), "axis": i32(1), "num_splits": i32(2)}, n_out=2)
V.err("split_err_sizes", "split", {"x": f32((2, 5)), "axis": i32(1), "split_sizes": i32(2, 2)}, n_out=2)

# ---------------------------------------------------------------- pad


def np_pad(x, pad, mode="constant", cv=0):
    n = len(pad) // 2
    width = [(0, 0)] * (x.ndim - n) + [(pad[2 * i], pad[2 * i + 1]) for i in range(n)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=cv)
    return np.pad(x, width, mode={"reflect": "reflect", "replicate": "edge"}[mode])


for tag, x, p, cv in [
    ("f_last", f32((2, 3)), [1, 2], None),
    ("f_cv", f32((2, 3, 4)), [0, 1, 2, 0], 5.5),
    ("f_all_dims", f32((2, 3)), [1, 1, 2, 2], -1.0),
    ("i_cv", ints((3, 2)), [2, 1], 7),
    ("f_zero", f32((2, 3)), [0, 0], None),
    ("f_empty_dim", f32((0, 3)), [1, 1, 0, 2], 2.0),
]:
    inputs = {"x": x, "pad": s32(p)}
    if cv is not None:
        inputs["constant_val"] = np.array(cv, dtype=x.dtype)
    V.add(f"pad_{tag}", "pad", inputs, outputs=[np_pad(x, p, "constant", cv or 0)])
V.err("pad_err_negative", "pad", {"x": f32((2, 3)), "pad": i32(-1, 0)})
V.err("pad_err_odd", "pad", {"x": f32((2, 3)), "pad": i32(1, 0, 1)})

for mode in ["reflect", "replicate"]:
    for tag, x, p in [
        ("last", f32((2, 5)), [2, 3]),
        ("two", f32((2, 4, 5)), [1, 3, 4, 2]),
        ("all", ints((3, 4)), [2, 1, 3, 0]),
        ("torch_like", f32((1, 2, 6, 7)), [2, 2, 1, 3]),
    ]:
        if mode == "reflect":
            p = [min(v, x.shape[x.ndim - len(p) // 2 + i // 2] - 1) for i, v in enumerate(p)]
        exp = np_pad(x, p, mode)
        if x.dtype == np.float32 and x.ndim == 4:
            # cross-check numpy against torch's padding (torch takes the last dim first)
            tp = [p[2], p[3], p[0], p[1]]
            t = torch.nn.functional.pad(torch.from_numpy(x), tp, mode=mode).numpy()
            assert np.array_equal(t, exp)
        V.add(f"pad_{mode}_{tag}", "pad", {"x": x, "pad": s32(p)}, outputs=[exp], strings={"mode": mode})
_xc = f32((2, 3))
V.add("pad_constant_named", "pad", {"x": _xc, "pad": i32(1, 1), "constant_val": np.float32(3.0)},
      outputs=[np_pad(_xc, [1, 1], "constant", 3.0)], strings={"mode": "constant"})
V.err("pad_reflect_err_too_wide", "pad", {"x": f32((2, 3)), "pad": i32(3, 0)}, strings={"mode": "reflect"})
V.err("pad_err_mode", "pad", {"x": f32((2, 3)), "pad": i32(1, 0)}, strings={"mode": "circular"})

# ---------------------------------------------------------------- depth/space


def depth_to_space_dcr(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth_dcr(x, b):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


# the MIL unit test: [1,4,1,1] [9,5,1,3] -> [[9,5],[1,3]]
assert depth_to_space_dcr(np.array([9, 5, 1, 3], np.float32).reshape(1, 4, 1, 1), 2).ravel().tolist() == [9, 5, 1, 3]
assert space_to_depth_dcr(np.array([[7, 9], [4, 6]], np.float32).reshape(1, 1, 2, 2), 2).ravel().tolist() == [7, 9, 4, 6]

for tag, x, b in [("f_b2", f32((2, 8, 2, 3)), 2), ("i_b3", ints((1, 18, 2, 2)), 3), ("f_mil_example", np.array([9, 5, 1, 3], np.float32).reshape(1, 4, 1, 1), 2)]:
    V.add(f"depth_to_space_{tag}", "depth_to_space", {"x": x, "block_size": s32(b)}, outputs=[depth_to_space_dcr(x, b)])
    y = depth_to_space_dcr(x, b)
    V.add(f"space_to_depth_{tag}", "space_to_depth", {"x": y, "block_size": s32(b)}, outputs=[space_to_depth_dcr(y, b)])
    assert np.array_equal(space_to_depth_dcr(y, b), x)
V.err("depth_to_space_err", "depth_to_space", {"x": f32((1, 6, 2, 2)), "block_size": i32(2)})
V.err("space_to_depth_err", "space_to_depth", {"x": f32((1, 1, 3, 2)), "block_size": i32(2)})

for tag, x, f in [("f_2", f32((2, 8, 3, 2)), 2), ("f_3", f32((1, 9, 2, 2)), 3), ("i_2", ints((1, 4, 2, 3)), 2)]:
    exp = torch.nn.functional.pixel_shuffle(torch.from_numpy(x.astype(np.float32)), f).numpy().astype(x.dtype)
    V.add(f"pixel_shuffle_{tag}", "pixel_shuffle", {"x": x, "upscale_factor": s32(f)}, outputs=[exp])


def sliding(x, axis, size, stride):
    axis = axis % x.ndim
    w = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)  # window dim last
    w = np.take(w, np.arange(0, w.shape[axis], stride), axis=axis)
    return np.moveaxis(w, -1, axis + 1).copy()


for tag, x, axis, size, stride in [
    ("f_mil_example", np.array([9, 5, 1, 3], np.float32).reshape(1, 4, 1, 1), 1, 2, None),
    ("f_stride2", f32((3, 7, 2)), 1, 3, 2),
    ("i_last", ints((2, 6)), -1, 2, 1),
    ("f_whole", f32((4, 3)), 0, 4, 3),
    ("f_stride3", f32((10,)), 0, 2, 3),
]:
    inputs = {"x": x, "axis": s32(axis), "size": s32(size)}
    if stride is not None:
        inputs["stride"] = s32(stride)
    V.add(f"sliding_windows_{tag}", "sliding_windows", inputs, outputs=[sliding(x, axis, size, stride or 1)])
V.err("sliding_windows_err", "sliding_windows", {"x": f32((2, 3)), "axis": i32(1), "size": i32(4)})

# ---------------------------------------------------------------- identity / shape / fill

for tag, x in [("f", f32((2, 3))), ("i", ints((4,))), ("b", bools((2, 2))), ("f_scalar", np.float32(2.5))]:
    x = np.asarray(x)
    V.add(f"identity_{tag}", "identity", {"x": x}, outputs=[x])
for tag, x in [("f", f32((2, 3, 4))), ("b", bools((5,))), ("i_scalar", np.asarray(np.int32(3))), ("f_empty", f32((0, 7)))]:
    V.add(f"shape_{tag}", "shape", {"x": x}, outputs=[np.array(x.shape, dtype=np.int32)])

for tag, shape, value in [
    ("f", [2, 3], np.float32(1.5)),
    ("i", [4], np.int32(7)),
    ("b", [2, 2], np.bool_(True)),
    ("f_default", [3, 1], None),
    ("f_empty", [0, 2], np.float32(1.0)),
]:
    inputs = {"shape": s32(shape)}
    if value is not None:
        inputs["value"] = np.asarray(value)
    v = np.asarray(value) if value is not None else np.float32(0)
    V.add(f"fill_{tag}", "fill", inputs, outputs=[np.full(shape, v, dtype=np.asarray(v).dtype)])

for tag, ref, value in [("i_ref_f", ints((2, 3)), np.float32(2.5)), ("f_ref_i", f32((3,)), np.int32(-4)),
                        ("b_default", bools((2, 2)), None), ("b_value", f32((1, 2)), np.bool_(True))]:
    inputs = {"ref_tensor": ref}
    if value is not None:
        inputs["value"] = np.asarray(value)
    v = np.asarray(value) if value is not None else np.float32(0)
    V.add(f"fill_like_{tag}", "fill_like", inputs, outputs=[np.full(ref.shape, v, dtype=v.dtype)])

# ---------------------------------------------------------------- range_1d

for tag, start, end, step in [
    ("f", 0.5, 3.7, 0.4),
    ("f_neg_step", 2.0, -1.0, -0.75),
    ("f_empty", 3.0, 1.0, 0.5),
    ("i", 2, 11, 3),
    ("i_neg_step", 10, 1, -2),
    ("i_exact", 0, 6, 2),
    ("i_empty", 5, 5, 1),
]:
    dt = np.float32 if isinstance(start, float) else np.int32
    exp = np.arange(dt(start), dt(end), dt(step), dtype=dt)
    V.add(f"range_1d_{tag}", "range_1d",
          {"start": np.asarray(dt(start)), "end": np.asarray(dt(end)), "step": np.asarray(dt(step))}, outputs=[exp])
V.err("range_1d_err_step0", "range_1d", {"start": np.int32(0), "end": np.int32(3), "step": np.int32(0)})

# ---------------------------------------------------------------- band_part


def band(x, lower, upper):
    m, n = x.shape[-2:]
    mm, nn = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    keep = ((lower < 0) | (mm - nn <= lower)) & ((upper < 0) | (nn - mm <= upper))
    return np.where(keep, x, np.zeros_like(x))


for tag, x, lower, upper in [
    ("f_upper_tri", f32((4, 5)), 0, -1),
    ("f_lower_tri", f32((5, 4)), -1, 0),
    ("i_diag", ints((2, 3, 3)), 0, 0),
    ("b_band", bools((2, 4, 6)), 1, 2),
    ("f_default", f32((3, 3)), None, None),
]:
    inputs = {"x": x}
    if lower is not None:
        inputs["lower"] = s32(lower)
        inputs["upper"] = s32(upper)
    V.add(f"band_part_{tag}", "band_part", inputs, outputs=[band(x, -1 if lower is None else lower, -1 if upper is None else upper)])

# ---------------------------------------------------------------- one_hot


def one_hot(ind, depth, axis, on, off, dtype):
    oh = np.arange(depth) == ind[..., None]
    out = np.where(oh, on, off).astype(dtype)
    cut = axis if axis >= 0 else ind.ndim + axis + 1
    return np.moveaxis(out, -1, cut)


for tag, ind, depth, axis, on, off in [
    ("default", i32(1, 0, 3), 4, None, None, None),
    ("axis0", s32([[1, 0], [2, 2]]), 3, 0, None, None),
    ("f_values", i32(1, 0), 4, -1, np.float32(1.0), np.float32(0.1)),
    ("out_of_range_off", i32(1, 5, -1), 4, -1, np.int32(9), np.int32(-2)),
    ("axis_mid", s32([[0, 1, 2], [2, 1, 0]]), 3, 1, np.float32(2.5), np.float32(-1)),
]:
    inputs = {"indices": ind, "one_hot_vector_size": s32(depth)}
    if axis is not None:
        inputs["axis"] = s32(axis)
    if on is not None:
        inputs["on_value"] = np.asarray(on)
        inputs["off_value"] = np.asarray(off)
    dt = np.asarray(on).dtype if on is not None else np.int32
    # torch cross-check where it applies (in-range indices, last axis)
    exp = one_hot(ind, depth, -1 if axis is None else axis, 1 if on is None else on, 0 if off is None else off, dt)
    if axis in (None, -1) and on is None:
        assert np.array_equal(torch.nn.functional.one_hot(torch.from_numpy(ind).long(), depth).numpy(), exp)
    V.add(f"one_hot_{tag}", "one_hot", inputs, outputs=[exp])

# ---------------------------------------------------------------- slice_by_index


def ref_slice(x, begin, end, stride, bm, em, sm):
    idx = []
    for a in range(x.ndim):
        if sm[a]:
            idx.append(0 if bm[a] else begin[a])
        else:
            idx.append(slice(None if bm[a] else begin[a], None if em[a] else end[a], stride[a]))
    return np.asarray(x[tuple(idx)])


def slice_case(cid, x, begin, end, stride=None, bm=None, em=None, sm=None):
    r = x.ndim
    inputs = {"x": x, "begin": s32(begin), "end": s32(end)}
    if stride is not None:
        inputs["stride"] = s32(stride)
    if bm is not None:
        inputs["begin_mask"] = sb(bm)
    if em is not None:
        inputs["end_mask"] = sb(em)
    if sm is not None:
        inputs["squeeze_mask"] = sb(sm)
    exp = ref_slice(x, begin, end, stride or [1] * r, bm or [False] * r, em or [False] * r, sm or [False] * r)
    V.add(cid, "slice_by_index", inputs, outputs=[exp])


x24 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
# the cases of coremltools' TestSliceByIndex.test_builder_eval
slice_case("slice_by_index_mil_1", x24, [1, 1, 1], [2, 2, 2])
slice_case("slice_by_index_mil_2", x24, [1, 1, 1], [2, 3, 4], [1, 1, 2])
slice_case("slice_by_index_mil_3", x24, [-3, -3, -3], [-1, -1, -1])
slice_case("slice_by_index_mil_4", x24, [0, 0, -3], [-1, -2, -2])
slice_case("slice_by_index_mil_5", x24, [-1, -1, -1], [0, 1, -3], [-2, -1, -3])
slice_case("slice_by_index_mil_6", x24, [1, 1, 1], [2, 3, 4], [1, 1, 2], bm=[True, False, True])
slice_case("slice_by_index_mil_7", x24, [1, 1, 1], [2, 3, 4], [1, 1, 2], bm=[True, False, True], em=[True, True, False])
slice_case("slice_by_index_mil_8", x24, [1, 1, 1], [2, 3, 3], [1, 1, 2], bm=[False, False, True], em=[True, False, False], sm=[False, True, False])
slice_case("slice_by_index_mil_9", x24, [1, 1, 1], [2, 2, 0], [1, 1, 1], sm=[False, False, True])
slice_case("slice_by_index_mil_10", x24, [1, 0, 1], [2, 0, 2], [1, 1, 1], bm=[False, True, False], em=[False, True, False])
slice_case("slice_by_index_squeeze_all", x24, [1, -1, 2], [0, 0, 0], sm=[True, True, True])
slice_case("slice_by_index_squeeze_with_begin_mask", x24, [1, 2, 3], [0, 0, 0], bm=[False, True, False], sm=[False, True, False])
slice_case("slice_by_index_neg_stride_masks", x24, [0, 0, 0], [0, 0, 0], [-1, -2, -3], bm=[True] * 3, em=[True] * 3)
slice_case("slice_by_index_clamp", x24, [-10, 1, 2], [10, 100, -100], [1, 1, -1])
slice_case("slice_by_index_empty", x24, [1, 2, 3], [1, 1, 3], [1, 1, 1])
slice_case("slice_by_index_i", ints((5, 6)), [4, -1], [0, 0], [-2, -2])
slice_case("slice_by_index_b", bools((5, 6)), [1, 0], [4, 0], [2, 1], em=[False, True])
slice_case("slice_by_index_zero_dim", f32((0, 4)), [0, 1], [0, 3])
slice_case("slice_by_index_llm_half", f32((1, 4, 64)), [0, 0, 32], [1, 4, 64], em=[True, True, True])
slice_case("slice_by_index_llm_last_token", f32((1, 7, 16)), [0, -1, 0], [1, 0, 16], bm=[True, False, True], em=[True, False, True], sm=[False, True, False])
for k in range(28):
    # every combination of masks, random begin/end/stride (including negative, out of range)
    shape = (4, 5, 6)
    x = f32(shape) if k % 3 else ints(shape)
    begin = [int(v) for v in rng.integers(-8, 8, size=3)]
    end = [int(v) for v in rng.integers(-8, 8, size=3)]
    stride = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in range(3)]
    bm = [bool(v) for v in rng.random(3) < 0.3]
    em = [bool(v) for v in rng.random(3) < 0.3]
    sm = [bool(v) for v in rng.random(3) < 0.2]
    for a in range(3):
        if sm[a]:  # the squeezed index must exist
            begin[a] = int(rng.integers(-shape[a], shape[a]))
    slice_case(f"slice_by_index_rand{k}", x, begin, end, stride, bm, em, sm)
V.err("slice_by_index_err_squeeze_range", "slice_by_index",
      {"x": x24, "begin": i32(0, 3, 0), "end": i32(1, 1, 1), "squeeze_mask": sb([False, True, False])})
V.err("slice_by_index_err_stride0", "slice_by_index", {"x": x24, "begin": i32(0, 0, 0), "end": i32(1, 1, 1), "stride": i32(1, 0, 1)})
V.err("slice_by_index_err_rank", "slice_by_index", {"x": x24, "begin": i32(0, 0), "end": i32(1, 1)})

for tag, x, begin, size in [
    ("f", f32((4, 5)), [1, -3], [2, -1]),
    ("i", ints((3, 4, 5)), [0, 1, 2], [-1, 2, 0]),
    ("b", bools((4, 4)), [3, 0], [1, 4]),
]:
    b = [v + x.shape[a] if v < 0 else v for a, v in enumerate(begin)]
    exp = x[tuple(slice(b[a], x.shape[a] if size[a] == -1 else b[a] + size[a]) for a in range(x.ndim))]
    V.add(f"slice_by_size_{tag}", "slice_by_size", {"x": x, "begin": s32(begin), "size": s32(size)}, outputs=[exp])
V.err("slice_by_size_err_range", "slice_by_size", {"x": f32((4, 5)), "begin": i32(3, 0), "size": i32(2, 1)})

# ---------------------------------------------------------------- gather family


def ref_gather(x, ind, axis, b):
    axis = axis % x.ndim
    if b == 0:
        return np.take(x, ind, axis=axis)
    bshape = x.shape[:b]
    xf = x.reshape((-1,) + x.shape[b:])
    inf = ind.reshape((-1,) + ind.shape[b:])
    res = np.stack([np.take(xf[i], inf[i], axis=axis - b) for i in range(xf.shape[0])])
    return res.reshape(bshape + res.shape[1:])


for tag, x, ind, axis, b in [
    ("f_axis0", f32((5, 3)), s32([[0, 4], [-1, 2]]), None, None),
    ("i_last", ints((2, 3, 4)), i32(3, 0, -4, 1), -1, None),
    ("b_mid", bools((2, 5, 3)), i32(4, 4, 0), 1, None),
    ("f_scalar_index", f32((4, 6)), np.asarray(np.int32(2)), 0, None),
    ("f_scalar_index_last", f32((4, 6)), np.asarray(np.int32(-1)), 1, None),
    ("f_batch1", f32((2, 4, 3)), s32([[0, 3, 1], [2, 2, -1]]), 1, 1),
    ("i_batch1_axis2", ints((2, 3, 5)), s32([[4, 0], [1, 1]]), 2, 1),
    ("f_batch2", f32((2, 3, 4, 2)), ints((2, 3, 5), 0, 4), 2, 2),
    ("f_embedding", f32((32, 16)), s32([[1, 7, 31, 0, 5]]), 0, None),
    ("f_empty_indices", f32((4, 3)), np.zeros((0,), np.int32), 0, None),
]:
    inputs = {"x": x, "indices": ind}
    if axis is not None:
        inputs["axis"] = s32(axis)
    if b is not None:
        inputs["batch_dims"] = s32(b)
    exp = ref_gather(x, ind, 0 if axis is None else axis, b or 0)
    if b is None and axis in (None, 0) and ind.ndim == 1:
        assert np.array_equal(torch.from_numpy(x)[torch.from_numpy(ind).long()].numpy(), exp)
    V.add(f"gather_{tag}", "gather", inputs, outputs=[exp])
V.err("gather_err_index_high", "gather", {"x": f32((5, 3)), "indices": i32(0, 5)})
V.err("gather_err_index_low", "gather", {"x": f32((5, 3)), "indices": i32(-6)})
V.err("gather_err_validate", "gather", {"x": f32((5, 3)), "indices": i32(3), "axis": i32(1), "validate_indices": sb(True)})
V.err("gather_err_axis", "gather", {"x": f32((5, 3)), "indices": i32(0), "axis": i32(2)})

for tag, x, ind, axis in [
    ("f_axis0", f32((3, 4)), s32([[0, 2, 1, -1], [2, 0, 0, 1]]), None),
    ("i_last", ints((2, 3, 4)), ints((2, 3, 6), -4, 4), -1),
    ("b_mid", bools((2, 3, 2)), ints((2, 5, 2), 0, 3), 1),
]:
    inputs = {"x": x, "indices": ind}
    if axis is not None:
        inputs["axis"] = s32(axis)
    exp = np.take_along_axis(x, ind.astype(np.int64), axis=0 if axis is None else axis)
    if ind.min() >= 0:
        tx = torch.from_numpy(x.astype(np.float32))
        assert np.array_equal(torch.gather(tx, 0 if axis is None else axis, torch.from_numpy(ind).long()).numpy(), exp.astype(np.float32))
    V.add(f"gather_along_axis_{tag}", "gather_along_axis", inputs, outputs=[exp])
V.err("gather_along_axis_err_index", "gather_along_axis", {"x": f32((3, 4)), "indices": s32([[0, 3, 1, 1]])})
V.err("gather_along_axis_err_shape", "gather_along_axis", {"x": f32((3, 4)), "indices": s32([[0, 1]])})


def ref_gather_nd(x, ind, b):
    if b == 0:
        return x[tuple(np.moveaxis(ind, -1, 0))]
    bshape = x.shape[:b]
    xf = x.reshape((-1,) + x.shape[b:])
    inf = ind.reshape((-1,) + ind.shape[b:])
    res = np.stack([xf[i][tuple(np.moveaxis(inf[i], -1, 0))] for i in range(xf.shape[0])])
    return res.reshape(bshape + res.shape[1:])


for tag, x, ind, b in [
    ("f_full", f32((3, 4)), s32([[0, 1], [2, -1], [1, 3]]), None),
    ("i_partial", ints((3, 4, 2)), s32([[[2], [0]], [[-1], [1]]]), None),
    ("b_point", bools((2, 3)), i32(1, 2), None),
    ("f_batch1", f32((2, 3, 4)), s32([[[1, 2], [0, 0]], [[2, 3], [1, -1]]]), 1),
]:
    inputs = {"x": x, "indices": ind}
    if b is not None:
        inputs["batch_dims"] = s32(b)
    V.add(f"gather_nd_{tag}", "gather_nd", inputs, outputs=[ref_gather_nd(x, ind, b or 0)])
V.err("gather_nd_err_index", "gather_nd", {"x": f32((3, 4)), "indices": s32([[0, 4]])})
V.err("gather_nd_err_depth", "gather_nd", {"x": f32((3, 4)), "indices": s32([[0, 1, 0]])})

# ---------------------------------------------------------------- scatter family

OPS = {
    "update": lambda a, b: b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": max,
    "min": min,
}


def ref_scatter(data, ind, upd, axis, mode):
    out = data.copy()
    axis = axis % data.ndim
    f = OPS[mode]
    moved = np.moveaxis(out, axis, 0)  # view
    u = upd.reshape(data.shape[:axis] + (ind.size,) + data.shape[axis + 1:])
    umoved = np.moveaxis(u, axis, 0)
    for j, i in enumerate(ind.ravel()):
        moved[i] = np.vectorize(f, otypes=[data.dtype])(moved[i], umoved[j])
    return out


def ref_scatter_along(data, ind, upd, axis, mode):
    out = data.copy()
    axis = axis % data.ndim
    f = OPS[mode]
    for pos in np.ndindex(*ind.shape):
        tgt = list(pos)
        tgt[axis] = ind[pos]
        tgt = tuple(tgt)
        out[tgt] = f(out[tgt], upd[pos])
    return out


def ref_scatter_nd(data, ind, upd, mode):
    out = data.copy()
    f = OPS[mode]
    k = ind.shape[-1]
    rows = ind.reshape(-1, k)
    ups = upd.reshape((rows.shape[0],) + data.shape[k:])
    for r in range(rows.shape[0]):
        tgt = tuple(rows[r])
        out[tgt] = np.vectorize(f, otypes=[data.dtype])(out[tgt], ups[r])
    return out


def f_nz(shape):
    v = f32(shape, 0.5, 3.0)
    return v * np.where(rng.random(shape) < 0.5, -1, 1).astype(np.float32)


for mode in ["update", "add", "sub", "mul", "div", "max", "min", None]:
    m = mode or "add"
    tag = mode or "default"
    # scatter: axis 0 with a repeated and a negative index; axis -1 on ints
    data, ind = f32((4, 3)), i32(1, -1, 1)
    upd = f_nz((3, 3))
    V.add(f"scatter_{tag}_f", "scatter", {"data": data, "indices": ind, "updates": upd},
          outputs=[ref_scatter(data, ind, upd, 0, m)], strings={"mode": mode} if mode else None)
    if mode != "div":
        di, ii = ints((2, 5), -9, 9), i32(4, 0)
        ui = ints((2, 2), -5, 5)
        V.add(f"scatter_{tag}_i_last", "scatter", {"data": di, "indices": ii, "updates": ui, "axis": s32(-1)},
              outputs=[ref_scatter(di, ii, ui, -1, m)], strings={"mode": mode} if mode else None)
    # scatter_along_axis
    data, ind = f32((3, 4)), s32([[0, 2, 1, -1], [2, 0, 0, 1]])
    upd = f_nz((2, 4))
    V.add(f"scatter_along_axis_{tag}_f", "scatter_along_axis",
          {"data": data, "indices": ind, "updates": upd, "axis": s32(0)},
          outputs=[ref_scatter_along(data, ind, upd, 0, m)], strings={"mode": mode} if mode else None)
    # scatter_nd: slices and points, a repeated index
    data, ind = f32((3, 4)), s32([[1], [-1], [1]])
    upd = f_nz((3, 4))
    V.add(f"scatter_nd_{tag}_rows", "scatter_nd", {"data": data, "indices": ind, "updates": upd},
          outputs=[ref_scatter_nd(data, ind, upd, m)], strings={"mode": mode} if mode else None)
    if mode != "div":
        data, ind = ints((2, 3, 2), -9, 9), s32([[0, 1, 1], [1, 2, 0], [0, 1, 1]])
        upd = ints((3,), -5, 5)
        V.add(f"scatter_nd_{tag}_points_i", "scatter_nd", {"data": data, "indices": ind, "updates": upd},
              outputs=[ref_scatter_nd(data, ind, upd, m)], strings={"mode": mode} if mode else None)

# torch cross-check of the numpy loops for the unambiguous cases
_d, _i, _u = f32((3, 4)), s32([[0, 2, 1, 2], [2, 0, 0, 1]]), f32((2, 4))
assert np.allclose(torch.from_numpy(_d).scatter_add(0, torch.from_numpy(_i).long(), torch.from_numpy(_u)).numpy(),
                   ref_scatter_along(_d, _i, _u, 0, "add"))
V.add("scatter_along_axis_add_torch_i", "scatter_along_axis",
      {"data": (di := ints((3, 5))), "indices": (ii := ints((3, 2), 0, 5)), "updates": (ui := ints((3, 2))), "axis": s32(1)},
      outputs=[torch.from_numpy(di).scatter_add(1, torch.from_numpy(ii).long(), torch.from_numpy(ui)).numpy()])
V.add("scatter_multi_dim_indices", "scatter",
      {"data": (d := f32((2, 6))), "indices": (ii := s32([[0, 5], [3, 2]])), "updates": (u := f32((2, 2, 2))), "axis": s32(1)},
      outputs=[ref_scatter(d, ii, u, 1, "update")], strings={"mode": "update"})
V.err("scatter_err_index", "scatter", {"data": f32((4, 3)), "indices": i32(4), "updates": f32((1, 3))})
V.err("scatter_err_updates_shape", "scatter", {"data": f32((4, 3)), "indices": i32(1), "updates": f32((2, 3))})
V.err("scatter_along_axis_err_index", "scatter_along_axis",
      {"data": f32((3, 4)), "indices": s32([[0, 3, 1, -4]]), "updates": f32((1, 4))})
V.err("scatter_nd_err_index", "scatter_nd", {"data": f32((3, 4)), "indices": s32([[3]]), "updates": f32((1, 4))})
V.err("scatter_err_mode", "scatter", {"data": f32((4, 3)), "indices": i32(1), "updates": f32((1, 3))}, strings={"mode": "pow"})
V.err("scatter_err_int_div0", "scatter", {"data": ints((4, 3)), "indices": i32(1), "updates": np.zeros((1, 3), np.int32)},
      strings={"mode": "div"})

# ---------------------------------------------------------------- non_zero

for tag, x in [
    ("f", np.where(rng.random((3, 4)) < 0.5, 0, f32((3, 4))).astype(np.float32)),
    ("i", np.where(rng.random((2, 3, 2)) < 0.5, 0, ints((2, 3, 2))).astype(np.int32)),
    ("b", bools((5,))),
    ("all_zero", np.zeros((2, 3), np.float32)),
]:
    V.add(f"non_zero_{tag}", "non_zero", {"x": x}, outputs=[np.argwhere(x).astype(np.int32)])

# ---------------------------------------------------------------- topk / argsort


def stable_order(x, axis, ascending):
    return np.argsort(x if ascending else -x, axis=axis, kind="stable")


def ref_topk(x, k, axis, ascending):
    idx = stable_order(x, axis, ascending)
    if k != -1:
        idx = np.take(idx, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)


ties = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 5, 5, 0, 1]], dtype=np.float32)
for tag, x, k, axis, asc, sort, ret in [
    ("f_default", f32((3, 7)), None, None, None, None, None),
    ("f_k3", f32((2, 3, 8)), 3, None, None, None, None),
    ("f_ties", ties, 4, -1, None, None, None),
    ("f_ties_asc", ties, 4, -1, True, None, None),
    ("i_axis0", ints((6, 3), -5, 5), 2, 0, None, None, None),
    ("i_all_asc", ints((2, 9), -3, 3), -1, 1, True, None, None),
    ("f_no_indices", f32((4, 5)), 2, -1, None, None, False),
    ("f_unsorted_flag", f32((3, 6)), 3, -1, None, False, None),
    ("f_mid_axis", f32((2, 5, 3)), 2, 1, False, True, True),
    ("f_logits", f32((1, 256), -10, 10), 5, -1, None, None, None),
    ("f_k0", f32((2, 4)), 0, -1, None, None, None),
]:
    inputs = {"x": x}
    for name, v, conv in [("k", k, s32), ("axis", axis, s32), ("ascending", asc, sb), ("sort", sort, sb), ("return_indices", ret, sb)]:
        if v is not None:
            inputs[name] = conv(v)
    vals, idx = ref_topk(x, 1 if k is None else k, -1 if axis is None else axis, bool(asc))
    if tag in ("f_k3", "f_logits", "f_default"):  # distinct values: torch agrees
        tv, ti = torch.topk(torch.from_numpy(x), 1 if k is None else k, dim=-1 if axis is None else axis, largest=not asc)
        assert np.array_equal(tv.numpy(), vals) and np.array_equal(ti.numpy(), idx)
    V.add(f"topk_{tag}", "topk", inputs, outputs=[vals] if ret is False else [vals, idx])
V.add("topk_uint16_indices", "topk", {"x": (x := f32((2, 6))), "k": s32(2)},
      outputs=list(ref_topk(x, 2, -1, False)), out_dtypes=["fp32", "uint16"], strings={"output_indices_dtype": "uint16"})
V.err("topk_err_k", "topk", {"x": f32((2, 3)), "k": i32(4)}, n_out=2)

for tag, x, axis, asc in [
    ("f_default", f32((3, 6)), None, None),
    ("f_ties", ties, -1, None),
    ("f_ties_asc", ties, -1, True),
    ("i_axis0", ints((5, 3), -3, 3), 0, True),
    ("f_mid", f32((2, 4, 3)), 1, False),
]:
    inputs = {"x": x}
    if axis is not None:
        inputs["axis"] = s32(axis)
    if asc is not None:
        inputs["ascending"] = sb(asc)
    exp = stable_order(x, -1 if axis is None else axis, bool(asc)).astype(np.int32)
    V.add(f"argsort_{tag}", "argsort", inputs, outputs=[exp])

# ---------------------------------------------------------------- cumsum


def ref_cumsum(x, axis, exclusive, reverse):
    t = np.flip(x, axis) if reverse else x
    c = np.cumsum(t, axis=axis, dtype=x.dtype)
    if exclusive:
        zero = np.zeros_like(np.take(c, [0], axis=axis))
        c = np.concatenate([zero, np.take(c, np.arange(c.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(c, axis).copy() if reverse else c


for tag, x, axis, exc, rev in [
    ("f_default", f32((4, 3)), None, None, None),
    ("f_last_excl", f32((2, 3, 5)), -1, True, False),
    ("f_rev", f32((2, 6)), 1, False, True),
    ("i_rev_excl", ints((5, 2)), 0, True, True),
    ("i_mid", ints((2, 4, 3)), 1, None, None),
]:
    inputs = {"x": x}
    if axis is not None:
        inputs["axis"] = s32(axis)
    if exc is not None:
        inputs["exclusive"] = sb(exc)
    if rev is not None:
        inputs["reverse"] = sb(rev)
    exp = ref_cumsum(x, 0 if axis is None else axis, bool(exc), bool(rev))
    if not exc and not rev:
        assert np.allclose(torch.cumsum(torch.from_numpy(x), dim=0 if axis is None else axis).numpy(), exp, rtol=1e-5, atol=1e-5)
    V.add(f"cumsum_{tag}", "cumsum", inputs, outputs=[exp])


# ---------------------------------------------------------------- write

def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "transform.json"), "w") as f:
        json.dump({"cases": V.cases}, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(OUT, "transform_modes.json"), "w") as f:
        json.dump({"cases": V.mode_cases}, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez_compressed(os.path.join(OUT, "transform.npz"), **V.arrays)
    size = os.path.getsize(os.path.join(OUT, "transform.npz"))
    ops = sorted({c["op"] for c in V.cases + V.mode_cases})
    print(json.dumps({"cases": len(V.cases), "mode_cases": len(V.mode_cases), "arrays": len(V.arrays),
                      "npz_bytes": size, "ops": ops}))
    assert size < 300_000


if __name__ == "__main__":
    main()
