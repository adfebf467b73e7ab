#!/usr/bin/env python3
"""Per-op test vectors for the compressed-weight `constexpr_*` kernels and `slice_update`.

Writes `models-ir/opvectors/constexpr.json` + `constexpr.npz` (read by
`Tests/InterpreterTests/OpVectors.swift`, `OpVectors.run(family: "constexpr")`, run by
`ConstexprKernelTests`).

Every expected value is computed here in numpy straight from the semantics written down in
`/work/shared/docs/coreml-format-facts.md` §7 (constexpr ops) and §8 (slice_update); nothing
comes from forge-ir:
  * constexpr_blockwise_shift_scale: b[k] = data.shape[k] / scale.shape[k] (must divide);
    out[i] = scale[i // b] * (data[i] - offset[i // b]); output dtype = scale dtype.
  * constexpr_affine_dequantize: out = scale * (q - zero_point), vector scale/zp along `axis`.
  * constexpr_lut_to_dense iOS18: out[i] = lut[i0//G0, .., indices[i], :]; with VECTOR_SIZE > 1
    the vector is written contiguously along `vector_axis` (that dim is multiplied by V).
    iOS16: `indices` is an LSB-first packed bit stream of nbits = log2(len(lut)), `shape` given.
  * constexpr_sparse_to_dense: walk the mask row-major, each set bit takes the next
    nonzero_data value, 0 elsewhere. iOS16: mask is LSB-first packed bits plus `shape`.
  * constexpr_cast: fp16 -> output_dtype (fp32).
  * slice_update: x with the region x[slice_by_index(begin, end, stride, masks)] replaced by
    update; begin_mask -> begin 0, end_mask -> end = dim, squeeze_mask -> single index at
    begin (dimension dropped in `update`).

Run: tools/.venv/bin/python tools/opvectors_constexpr.py
"""
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "models-ir", "opvectors")

rng = np.random.default_rng(20250607)

cases = []
arrays = {}


by_content = {}


def put(cid, name, v):
    """Stores an array; identical arrays (dtype, shape, bytes) share one npz member."""
    v = np.ascontiguousarray(v)
    sig = (v.dtype.str, v.shape, v.tobytes())
    if sig in by_content:
        return by_content[sig]
    key = f"{cid}.{name}"
    assert key not in arrays, key
    arrays[key] = v
    by_content[sig] = key
    return key


def case(cid, op, inputs, expected, out_dtype="fp32", strings=None, atol=1e-5, rtol=1e-5, expect_error=False):
    assert all(c["id"] != cid for c in cases), cid
    c = {"id": cid, "op": op, "inputs": {n: put(cid, n, v) for n, v in inputs.items()}}
    if strings:
        c["strings"] = strings
    if expected is None:
        expected = np.zeros([1], np.float32)  # never compared (error case)
    c["outputs"] = [{"key": put(cid, "out", expected), "dtype": out_dtype}]
    c["atol"], c["rtol"] = atol, rtol
    if expect_error:
        c["expect_error"] = True
    cases.append(c)


def pack_bits(values, nbits):
    """LSB-first bit stream: element i occupies bits [i*n, (i+1)*n), bit k = bit k%8 of byte k//8."""
    values = np.asarray(values).reshape(-1).astype(np.int64)
    nbytes = (len(values) * nbits + 7) // 8
    out = np.zeros(nbytes, np.uint8)
    for i, v in enumerate(values):
        for b in range(nbits):
            if (int(v) >> b) & 1:
                k = i * nbits + b
                out[k // 8] |= np.uint8(1 << (k % 8))
    return out


# ---------------------------------------------------------------- blockwise_shift_scale
def blockwise_ref(data, scale, offset=None):
    """Loop-free but formula-literal: expand scale/offset by repeating each block."""
    b = [d // s for d, s in zip(data.shape, scale.shape)]
    s = scale.astype(np.float64)
    o = None if offset is None else offset.astype(np.float64)
    for ax, r in enumerate(b):
        s = np.repeat(s, r, axis=ax)
        if o is not None:
            o = np.repeat(o, r, axis=ax)
    d = data.astype(np.float64)
    out = s * (d - o) if o is not None else s * d
    return out.astype(scale.dtype)


def bss(cid, data, scale, offset=None, **kw):
    inputs = {"data": data, "scale": scale}
    if offset is not None:
        inputs["offset"] = offset
    out_dtype = "fp16" if scale.dtype == np.float16 else "fp32"
    tol = dict(atol=1e-3, rtol=1e-3) if out_dtype == "fp16" else dict(atol=1e-6, rtol=1e-6)
    tol.update(kw)
    case(cid, "constexpr_blockwise_shift_scale", inputs, blockwise_ref(data, scale, offset), out_dtype, **tol)


def i8(shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape).astype(np.int8)


def u8(shape, lo=0, hi=255):
    return rng.integers(lo, hi + 1, size=shape).astype(np.uint8)


def sc(shape, dt=np.float32):
    return (rng.uniform(0.001, 0.05, size=shape)).astype(dt)


bss("bss_int8_block32_last_axis", i8([8, 64], -127, 127), sc([8, 2]))
bss("bss_int8_block4_last_axis_offset", i8([4, 16]), sc([4, 4]), i8([4, 4], -8, 8))
bss("bss_int8_per_channel", i8([6, 10]), sc([6, 1]))
bss("bss_int8_per_channel_offset", i8([6, 10]), sc([6, 1]), i8([6, 1], -20, 20))
bss("bss_int8_block_first_axis", i8([16, 6]), sc([4, 6]))
bss("bss_int8_block_first_axis_offset", i8([16, 6]), sc([4, 6]), i8([4, 6], -5, 5))
bss("bss_int8_3d", i8([2, 6, 8]), sc([2, 3, 2]))
bss("bss_int8_3d_offset", i8([2, 6, 8]), sc([2, 3, 2]), i8([2, 3, 2], -10, 10))
bss("bss_uint8_offset_per_block", u8([8, 16]), sc([8, 2]), u8([8, 2], 100, 160))
bss("bss_uint8_offset_per_channel", u8([6, 12]), sc([6, 1]), u8([6, 1]))
bss("bss_uint8_no_offset", u8([4, 8]), sc([4, 2]))
bss("bss_uint8_extremes_offset", np.array([[0, 255, 128, 127], [255, 0, 1, 254]], np.uint8),
    np.array([[0.5], [0.25]], np.float32), np.array([[255], [0]], np.uint8))
bss("bss_int8_extremes", np.array([[-128, 127, 0, -1]], np.int8), np.array([[0.5, 2.0]], np.float32),
    np.array([[127, -128]], np.int8))
bss("bss_int8_fp16_scale_block32", i8([8, 64], -127, 127), sc([8, 2], np.float16))
bss("bss_int8_fp16_scale_offset", i8([4, 16]), sc([4, 4], np.float16), i8([4, 4], -8, 8))
bss("bss_uint8_fp16_scale_offset", u8([6, 8]), sc([6, 1], np.float16), u8([6, 1], 120, 136))
bss("bss_fp32_scale_float_data", rng.standard_normal([4, 8]).astype(np.float32), sc([4, 2]),
    rng.standard_normal([4, 2]).astype(np.float32), atol=1e-6, rtol=1e-5)
case("bss_err_scale_not_dividing", "constexpr_blockwise_shift_scale",
     {"data": i8([8, 30]), "scale": sc([8, 4])}, None, expect_error=True)
case("bss_err_scale_not_dividing_axis0", "constexpr_blockwise_shift_scale",
     {"data": i8([8, 32]), "scale": sc([3, 1])}, None, expect_error=True)
case("bss_err_scale_not_dividing_uint8", "constexpr_blockwise_shift_scale",
     {"data": u8([6, 10]), "scale": sc([6, 3]), "offset": u8([6, 3])}, None, expect_error=True)
case("bss_err_offset_shape", "constexpr_blockwise_shift_scale",
     {"data": i8([4, 8]), "scale": sc([4, 2]), "offset": i8([4, 1])}, None, expect_error=True)


# ---------------------------------------------------------------- affine_dequantize
def affine_ref(q, zp, scale, axis):
    s = scale.astype(np.float64)
    z = zp.astype(np.float64)
    shape = [1] * q.ndim
    if s.size > 1 or z.size > 1:
        shape[axis] = q.shape[axis]
    s = np.broadcast_to(s.reshape(shape) if s.size > 1 else s.reshape([1] * q.ndim), q.shape)
    z = np.broadcast_to(z.reshape(shape) if z.size > 1 else z.reshape([1] * q.ndim), q.shape)
    return (s * (q.astype(np.float64) - z)).astype(scale.dtype)


def aff(cid, q, zp, scale, axis, **kw):
    out_dtype = "fp16" if scale.dtype == np.float16 else "fp32"
    tol = dict(atol=1e-3, rtol=1e-3) if out_dtype == "fp16" else dict(atol=1e-6, rtol=1e-6)
    tol.update(kw)
    case(cid, "constexpr_affine_dequantize",
         {"quantized_data": q, "zero_point": zp, "scale": scale, "axis": np.array(axis, np.int32)},
         affine_ref(q, zp, scale, axis), out_dtype, **tol)


aff("affine_int8_scalar", i8([6, 5]), np.array(3, np.int8), np.array(0.02, np.float32), 0)
aff("affine_uint8_scalar", u8([6, 5]), np.array(128, np.uint8), np.array(0.03, np.float32), 1)
aff("affine_int8_per_axis0", i8([6, 5]), i8([6], -10, 10), sc([6]), 0)
aff("affine_int8_per_axis1", i8([6, 5]), i8([5], -10, 10), sc([5]), 1)
aff("affine_uint8_per_axis0", u8([4, 7]), u8([4], 100, 150), sc([4]), 0)
aff("affine_uint8_per_axis1", u8([4, 7]), u8([7]), sc([7]), 1)
aff("affine_int8_per_axis0_zero_zp", i8([8, 3], -127, 127), np.zeros([8], np.int8), sc([8]), 0)
aff("affine_int8_fp16_scale_axis0", i8([6, 5]), i8([6], -10, 10), sc([6], np.float16), 0)
aff("affine_uint8_scalar_scale_vector_zp_axis1", u8([3, 4]), u8([4]), np.array(0.1, np.float32), 1)
aff("affine_int8_3d_axis1", i8([2, 3, 4]), i8([3], -4, 4), sc([3]), 1)
case("affine_err_vector_length", "constexpr_affine_dequantize",
     {"quantized_data": i8([6, 5]), "zero_point": i8([4]), "scale": sc([4]), "axis": np.array(0, np.int32)},
     None, expect_error=True)


# ---------------------------------------------------------------- lut_to_dense iOS18
def lut18_ref(indices, lut, vector_axis=None):
    k = indices.ndim
    groups = [indices.shape[a] // lut.shape[a] for a in range(k)]
    v = lut.shape[k + 1]
    vals = np.zeros(indices.shape + (v,), lut.dtype)
    for pos in np.ndindex(*indices.shape):
        g = tuple(pos[a] // groups[a] for a in range(k))
        vals[pos] = lut[g + (int(indices[pos]),)]
    if v == 1:
        return vals[..., 0]
    ax = vector_axis % k
    moved = np.moveaxis(vals, -1, ax + 1)  # [.., d_ax, V, ..]
    shape = list(indices.shape)
    shape[ax] *= v
    return moved.reshape(shape)


def lut18(cid, indices, lut, vector_axis=None):
    inputs = {"indices": indices, "lut": lut}
    if vector_axis is not None:
        inputs["vector_axis"] = np.array(vector_axis, np.int32)
    out_dtype = "fp16" if lut.dtype == np.float16 else "fp32"
    case(cid, "constexpr_lut_to_dense", inputs, lut18_ref(indices, lut, vector_axis), out_dtype, atol=0, rtol=0)


lut18("lut18_4bit_per_tensor", u8([8, 12], 0, 15), rng.standard_normal([1, 1, 16, 1]).astype(np.float32))
lut18("lut18_4bit_per_tensor_fp16", u8([4, 6], 0, 15), rng.standard_normal([1, 1, 16, 1]).astype(np.float16))
lut18("lut18_2bit_grouped_rows16", u8([64, 8], 0, 3), rng.standard_normal([4, 1, 4, 1]).astype(np.float32))
lut18("lut18_2bit_grouped_cols", u8([4, 8], 0, 3), rng.standard_normal([1, 2, 4, 1]).astype(np.float32))
lut18("lut18_3d_grouped", u8([2, 4, 6], 0, 7), rng.standard_normal([2, 2, 1, 8, 1]).astype(np.float32))
lut18("lut18_8bit_per_tensor", u8([5, 7]), rng.standard_normal([1, 1, 256, 1]).astype(np.float32))
lut18("lut18_vector_axis0", u8([3, 5], 0, 3), rng.standard_normal([1, 1, 4, 2]).astype(np.float32), 0)
lut18("lut18_vector_axis1", u8([3, 5], 0, 3), rng.standard_normal([1, 1, 4, 2]).astype(np.float32), 1)
lut18("lut18_vector_axis0_grouped", u8([4, 3], 0, 3), rng.standard_normal([2, 1, 4, 2]).astype(np.float32), 0)
lut18("lut18_vector_axis_neg1", u8([2, 3], 0, 1), rng.standard_normal([1, 1, 2, 3]).astype(np.float32), -1)
case("lut18_err_lut_not_dividing", "constexpr_lut_to_dense",
     {"indices": u8([6, 4], 0, 3), "lut": rng.standard_normal([4, 1, 4, 1]).astype(np.float32)},
     None, expect_error=True)
case("lut18_err_index_out_of_lut", "constexpr_lut_to_dense",
     {"indices": np.array([[0, 1], [5, 2]], np.uint8), "lut": rng.standard_normal([1, 1, 4, 1]).astype(np.float32)},
     None, expect_error=True)


# ---------------------------------------------------------------- lut_to_dense iOS16
def lut16(cid, shape, nbits, shape_dtype=np.uint32, lut_dtype=np.float32):
    n = int(np.prod(shape))
    idx = rng.integers(0, 1 << nbits, size=n)
    lut = rng.standard_normal(1 << nbits).astype(lut_dtype)
    packed = pack_bits(idx, nbits)
    assert len(packed) == (nbits * n + 7) // 8
    expected = lut[idx].reshape(shape)
    out_dtype = "fp16" if lut_dtype == np.float16 else "fp32"
    case(cid, "constexpr_lut_to_dense",
         {"indices": packed, "lut": lut, "shape": np.array(shape, shape_dtype)}, expected, out_dtype, atol=0, rtol=0)


lut16("lut16_1bit", [5, 7], 1)                   # 35 bits -> 5 bytes, padding
lut16("lut16_2bit", [6, 5], 2, np.int32)         # 60 bits -> 8 bytes
lut16("lut16_4bit", [8, 8], 4)
lut16("lut16_4bit_odd", [3, 5], 4, np.int32)     # odd count, half byte padding
lut16("lut16_8bit", [4, 9], 8)
lut16("lut16_4bit_fp16", [2, 3, 4], 4, np.uint32, np.float16)
# fixed low-nibble-first check: byte 0x21 -> element0 = 1, element1 = 2
case("lut16_4bit_nibble_order", "constexpr_lut_to_dense",
     {"indices": np.array([0x21, 0xF0], np.uint8), "lut": np.arange(16, dtype=np.float32) * 10,
      "shape": np.array([2, 2], np.uint32)},
     np.array([[10, 20], [0, 150]], np.float32), atol=0, rtol=0)


# ---------------------------------------------------------------- sparse_to_dense
def sparse_ref(mask_bits, nz, shape):
    flat = np.zeros(int(np.prod(shape)), nz.dtype)
    flat[np.flatnonzero(mask_bits.reshape(-1))] = nz  # row-major walk, next value per set bit
    return flat.reshape(shape)


def sparse18(cid, shape, density=0.4, dt=np.float32):
    mask = (rng.uniform(size=shape) < density).astype(np.uint8)
    nz = rng.standard_normal(int(mask.sum())).astype(dt)
    case(cid, "constexpr_sparse_to_dense", {"nonzero_data": nz, "mask": mask}, sparse_ref(mask, nz, shape),
         "fp16" if dt == np.float16 else "fp32", atol=0, rtol=0)


def sparse16(cid, shape, density=0.4, shape_dtype=np.uint32, dt=np.float32):
    mask = (rng.uniform(size=shape) < density).astype(np.uint8)
    nz = rng.standard_normal(int(mask.sum())).astype(dt)
    case(cid, "constexpr_sparse_to_dense",
         {"nonzero_data": nz, "mask": pack_bits(mask, 1), "shape": np.array(shape, shape_dtype)},
         sparse_ref(mask, nz, shape), "fp16" if dt == np.float16 else "fp32", atol=0, rtol=0)


sparse18("sparse18_2d", [6, 8])
sparse18("sparse18_3d", [2, 3, 5], 0.6)
sparse18("sparse18_fp16", [4, 4], 0.5, np.float16)
sparse16("sparse16_2d", [6, 8])
sparse16("sparse16_odd_bits", [3, 7], 0.5, np.int32)  # 21 bits -> 3 bytes
sparse16("sparse16_3d", [2, 3, 4], 0.3)
case("sparse16_bit_order", "constexpr_sparse_to_dense",
     {"nonzero_data": np.array([1, 2, 3], np.float32), "mask": np.array([0b00000101, 0b1], np.uint8),
      "shape": np.array([3, 3], np.uint32)},
     np.array([[1, 0, 2], [0, 0, 0], [0, 0, 3]], np.float32), atol=0, rtol=0)

# ---------------------------------------------------------------- constexpr_cast
src = (rng.standard_normal([4, 6]) * 10).astype(np.float16)
src[0, :4] = [np.float16(65504), np.float16(-0.0), np.float16(6e-8), np.float16(1 / 3)]
case("cast_fp16_to_fp32", "constexpr_cast", {"source_val": src}, src.astype(np.float32), "fp32",
     strings={"output_dtype": "fp32"}, atol=0, rtol=0)


# ---------------------------------------------------------------- slice_update
def slice_ref(x, update, begin, end, stride=None, bm=None, em=None, sm=None):
    r = x.ndim
    stride = stride or [1] * r
    bm, em, sm = bm or [False] * r, em or [False] * r, sm or [False] * r
    idx = []
    for a in range(r):
        if sm[a]:
            idx.append(0 if bm[a] else begin[a])
        else:
            idx.append(slice(None if bm[a] else begin[a], None if em[a] else end[a], stride[a]))
    out = x.copy()
    assert out[tuple(idx)].shape == update.shape, (out[tuple(idx)].shape, update.shape)
    out[tuple(idx)] = update
    return out


def su(cid, x, update, begin, end, stride=None, bm=None, em=None, sm=None, expect_error=False):
    inputs = {"x": x, "update": update, "begin": np.array(begin, np.int32), "end": np.array(end, np.int32)}
    if stride is not None:
        inputs["stride"] = np.array(stride, np.int32)
    for n, m in (("begin_mask", bm), ("end_mask", em), ("squeeze_mask", sm)):
        if m is not None:
            inputs[n] = np.array(m, np.bool_)
    expected = None if expect_error else slice_ref(x, update, begin, end, stride, bm, em, sm)
    dt = "int32" if x.dtype == np.int32 else "fp32"
    case(cid, "slice_update", inputs, expected, dt, atol=0, rtol=0, expect_error=expect_error)


def fx(shape):
    return rng.standard_normal(shape).astype(np.float32)


def ix(shape):
    return rng.integers(-1000, 1000, size=shape).astype(np.int32)


T, F = True, False
su("su_kv_window_axis2", fx([1, 2, 8, 4]), fx([1, 2, 1, 4]), [0, 0, 3, 0], [0, 0, 4, 0],
   [1, 1, 1, 1], [F, F, F, F], [T, T, F, T], [F, F, F, F])
su("su_kv_window_axis2_len3", fx([1, 2, 8, 4]), fx([1, 2, 3, 4]), [0, 0, 5, 0], [0, 0, 8, 0],
   [1, 1, 1, 1], [F, F, F, F], [T, T, F, T], [F, F, F, F])
su("su_kv_window_no_optional", fx([1, 2, 8, 4]), fx([1, 2, 1, 4]), [0, 0, 0, 0], [1, 2, 1, 4])
su("su_negative_begin", fx([1, 2, 8, 4]), fx([1, 2, 2, 4]), [0, 0, -3, 0], [1, 2, -1, 4])
su("su_negative_begin_end_mask", fx([1, 2, 8, 4]), fx([1, 2, 2, 4]), [0, 0, -2, 0], [0, 0, 0, 0],
   None, None, [T, T, T, T])
su("su_begin_mask_ignores_begin", fx([1, 2, 8, 4]), fx([1, 1, 5, 4]), [0, 1, 6, 3], [0, 2, 5, 0],
   None, [T, F, T, T], [T, F, F, T])
su("su_masks_partial_inner", fx([1, 2, 8, 4]), fx([1, 2, 8, 2]), [0, 0, 0, 1], [0, 0, 0, 3],
   None, [T, T, T, F], [T, T, T, F])
su("su_squeeze_axis2", fx([1, 2, 8, 4]), fx([1, 2, 4]), [0, 0, 5, 0], [0, 0, 6, 0],
   [1, 1, 1, 1], [F, F, F, F], [T, T, F, T], [F, F, T, F])
su("su_squeeze_axis2_negative", fx([1, 2, 8, 4]), fx([1, 2, 4]), [0, 0, -1, 0], [0, 0, 0, 0],
   None, None, [T, T, F, T], [F, F, T, F])
su("su_squeeze_two_axes", fx([1, 2, 8, 4]), fx([2, 4]), [0, 0, 2, 0], [1, 0, 3, 0],
   None, None, [F, T, F, T], [T, F, T, F])
su("su_stride2", fx([1, 2, 8, 4]), fx([1, 2, 4, 4]), [0, 0, 1, 0], [1, 2, 8, 4], [1, 1, 2, 1])
su("su_stride2_two_axes", fx([1, 2, 8, 4]), fx([1, 2, 4, 2]), [0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 2, 2],
   None, [T, T, T, T])
su("su_int32_window", ix([1, 2, 8, 4]), ix([1, 2, 1, 4]), [0, 0, 7, 0], [0, 0, 8, 0],
   [1, 1, 1, 1], [F, F, F, F], [T, T, F, T], [F, F, F, F])
su("su_int32_stride2", ix([4, 6]), ix([2, 3]), [1, 0], [4, 6], [2, 2])
su("su_full_replace", fx([2, 3]), fx([2, 3]), [0, 0], [2, 3])
su("su_err_update_shape", fx([1, 2, 8, 4]), fx([1, 2, 2, 4]), [0, 0, 3, 0], [0, 0, 4, 0],
   [1, 1, 1, 1], [F, F, F, F], [T, T, F, T], [F, F, F, F], expect_error=True)
su("su_err_update_shape_inner", fx([1, 2, 8, 4]), fx([1, 2, 1, 3]), [0, 0, 3, 0], [0, 0, 4, 0],
   None, None, [T, T, F, T], None, expect_error=True)

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "constexpr.json"), "w") as f:
    json.dump({"cases": cases}, f, indent=1)
np.savez_compressed(os.path.join(OUT, "constexpr.npz"), **arrays)
size = os.path.getsize(os.path.join(OUT, "constexpr.npz"))
print(f"{len(cases)} cases, {len(arrays)} arrays, constexpr.npz {size} bytes")
assert size < 100_000
