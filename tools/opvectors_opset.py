#!/usr/bin/env python3
"""Op vectors for the kernels added for the whole MIL opset (issue 12): recurrent, image
resizing, run-time quantization, space/batch rearrangements, reverse_sequence, random
(degenerate distributions) and the iOS18 sparse compression ops.

Writes `models-ir/opvectors/opset.json` + `opset.npz`, run by
`Tests/InterpreterTests/OpsetKernelTests.swift` through `OpVectors.run(family: "opset")`.

Every expected value comes from torch or numpy (torch modules/functions where torch has the
op; otherwise numpy code spelling out the MIL op reference formula); nothing from forge-ir.
Each op has fp32 cases and fp16 cases (fp16 inputs, `precision: fp16`, the expected value
computed in fp32 from the fp16 inputs and rounded to fp16, compared at fp16 tolerances), and
edge cases (size-1 and empty dimensions, negative axes, every mode flag).

Run: tools/.venv/bin/python tools/opvectors_opset.py
"""
import json
import os

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "models-ir", "opvectors")
rng = np.random.default_rng(12)
torch.manual_seed(12)

DTYPES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16", np.dtype(np.int32): "int32",
          np.dtype(np.bool_): "bool", np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8"}


class Vectors:
    def __init__(self):
        self.cases, self.arrays, self.ids = [], {}, set()

    def put(self, key, v):
        v = np.array(v, order="C")
        if v.dtype == np.float64:
            v = v.astype(np.float32)
        if v.dtype == np.int64:
            v = v.astype(np.int32)
        assert v.dtype in DTYPES, (key, v.dtype)
        self.arrays[key] = v
        return key, v

    def add(self, cid, op, inputs, outputs, strings=None, variadic=None, atol=None, rtol=None,
            precision=None, out_dtypes=None, expect_error=False):
        assert cid not in self.ids, cid
        self.ids.add(cid)
        c = {"id": cid, "op": op, "inputs": {}, "outputs": []}
        for name, v in inputs.items():
            c["inputs"][name] = self.put(f"{cid}__{name}", v)[0]
        if variadic:
            c["variadic"] = {n: [self.put(f"{cid}__{n}{i}", v)[0] for i, v in enumerate(vs)] for n, vs in variadic.items()}
        for i, o in enumerate(outputs):
            if expect_error:
                c["outputs"].append({"key": f"{cid}__out{i}", "dtype": o})
                continue
            key, o = self.put(f"{cid}__out{i}", o)
            c["outputs"].append({"key": key, "dtype": out_dtypes[i] if out_dtypes else DTYPES[o.dtype]})
        for k, v in (("strings", strings), ("atol", atol), ("rtol", rtol), ("precision", precision)):
            if v is not None:
                c[k] = v
        if expect_error:
            c["expect_error"] = True
        self.cases.append(c)

    def both(self, cid, op, inputs, ref, strings=None, float_inputs=(), atol32=1e-5, rtol32=1e-5, **kw):
        """An fp32 case and an fp16 case (the float inputs in `float_inputs` cast to fp16, the
        reference recomputed from the fp16 values in fp32 and rounded to fp16)."""
        outs = ref({k: v for k, v in inputs.items()})
        self.add(cid + "_fp32", op, inputs, outs, strings=strings, atol=atol32, rtol=rtol32, **kw)
        h = {k: (np.asarray(v).astype(np.float16) if k in float_inputs else v) for k, v in inputs.items()}
        outs16 = ref({k: (np.asarray(v).astype(np.float32) if k in float_inputs else v) for k, v in h.items()})
        outs16 = [np.asarray(o).astype(np.float16) if np.asarray(o).dtype.kind == "f" else o for o in outs16]
        self.add(cid + "_fp16", op, h, outs16, strings=strings, atol=2e-3, rtol=2e-3, precision="fp16", **kw)

    def err(self, cid, op, inputs, strings=None, n_out=1):
        self.add(cid, op, inputs, ["fp32"] * n_out, strings=strings, expect_error=True)


V = Vectors()


def f32(*shape, lo=-2, hi=2):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i32(*a):
    return np.array(a, dtype=np.int32)


# --------------------------------------------------------------------------------------------
# recurrent: torch modules; MIL gate order i, f, o, z (lstm) and r, o, z (gru)

def ifzo_to_ifoz(w):
    i, f, z, o = np.split(w, 4)
    return np.concatenate([i, f, o, z])


def lstm_case(cid, S, B, I, H, direction="forward", output_sequence=True, bias=True):
    bidir = direction == "bidirectional"
    m = torch.nn.LSTM(I, H, 1, bias=bias, bidirectional=bidir)
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    x = f32(S, B, I)
    D = 2 if bidir else 1
    h0, c0 = f32(D, B, H), f32(D, B, H)
    xt = torch.from_numpy(x[::-1].copy() if direction == "reverse" else x)
    out, (hn, cn) = m(xt, (torch.from_numpy(h0), torch.from_numpy(c0)))
    out = out.detach().numpy()
    hn, cn = hn.detach().numpy(), cn.detach().numpy()
    if not output_sequence:
        out = (np.concatenate([out[-1:, :, :H], out[:1, :, H:]], axis=2) if bidir else out[-1:])
    to2d = lambda a: np.concatenate(list(a), axis=1)  # [D, B, H] -> [B, D*H]
    inputs = {"x": x, "initial_h": to2d(h0), "initial_c": to2d(c0),
              "weight_ih": ifzo_to_ifoz(sd["weight_ih_l0"]), "weight_hh": ifzo_to_ifoz(sd["weight_hh_l0"]),
              "output_sequence": np.array(output_sequence)}
    if bias:
        inputs["bias"] = ifzo_to_ifoz(sd["bias_ih_l0"] + sd["bias_hh_l0"])
    if bidir:
        inputs["weight_ih_back"] = ifzo_to_ifoz(sd["weight_ih_l0_reverse"])
        inputs["weight_hh_back"] = ifzo_to_ifoz(sd["weight_hh_l0_reverse"])
        if bias:
            inputs["bias_back"] = ifzo_to_ifoz(sd["bias_ih_l0_reverse"] + sd["bias_hh_l0_reverse"])
    V.add(cid, "lstm", inputs, [out, to2d(hn), to2d(cn)], strings={"direction": direction}, atol=1e-5, rtol=1e-4)


lstm_case("lstm_fwd_seq", 4, 2, 3, 5)
lstm_case("lstm_rev_seq", 3, 1, 2, 4, direction="reverse")
lstm_case("lstm_fwd_last_nobias", 3, 2, 3, 2, output_sequence=False, bias=False)
lstm_case("lstm_bidir_seq", 3, 2, 3, 4, direction="bidirectional")
lstm_case("lstm_bidir_last", 4, 1, 2, 3, direction="bidirectional", output_sequence=False)
lstm_case("lstm_size1", 1, 1, 1, 1)


def act(name, v):
    return {"sigmoid": lambda a: 1 / (1 + np.exp(-a)), "tanh": np.tanh, "relu": lambda a: np.maximum(a, 0),
            "hard_sigmoid": lambda a: np.clip(0.2 * a + 0.5, 0, 1), "linear": lambda a: a,
            "scaled_tanh": np.tanh}[name](v)


def lstm_peephole(cid, S, B, I, H, clip, ra, ca, oa, fp16=False):
    # numpy spelling of the MIL lstm formula with peephole and cell clipping (float64)
    x, wih, whh, b, p = f32(S, B, I), f32(4 * H, I), f32(4 * H, H), f32(4 * H), f32(3 * H)
    h0, c0 = f32(B, H), f32(B, H)
    if fp16:
        x, wih, whh, b, p, h0, c0 = [a.astype(np.float16) for a in (x, wih, whh, b, p, h0, c0)]
    X, Wi, Wh, Bv, P = [a.astype(np.float64) for a in (x, wih, whh, b, p)]
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    outs = []
    for t in range(S):
        g = X[t] @ Wi.T + h @ Wh.T + Bv
        gi, gf, go, gz = np.split(g, 4, axis=1)
        i = act(ra, gi + P[:H] * c)
        f = act(ra, gf + P[H:2 * H] * c)
        z = act(ca, gz)
        c = np.clip(f * c + i * z, -clip, clip)
        o = act(ra, go + P[2 * H:] * c)
        h = o * act(oa, c)
        outs.append(h)
    res = [np.stack(outs), h, c]
    inputs = {"x": x, "initial_h": h0, "initial_c": c0, "weight_ih": wih, "weight_hh": whh, "bias": b, "peephole": p,
              "clip": np.array(clip, dtype=x.dtype), "output_sequence": np.array(True)}
    strings = {"recurrent_activation": ra, "cell_activation": ca, "activation": oa}
    if fp16:
        V.add(cid, "lstm", inputs, [r.astype(np.float16) for r in res], strings=strings, atol=2e-3, rtol=2e-3, precision="fp16")
    else:
        V.add(cid, "lstm", inputs, res, strings=strings, atol=1e-5, rtol=1e-4)


lstm_peephole("lstm_peephole_clip", 4, 2, 3, 3, 0.3, "sigmoid", "tanh", "tanh")
lstm_peephole("lstm_acts_hard_relu", 3, 1, 2, 2, 50.0, "hard_sigmoid", "relu", "linear")
lstm_peephole("lstm_acts_scaled_tanh", 3, 1, 2, 2, 5.0, "sigmoid", "scaled_tanh", "relu")
lstm_peephole("lstm_peephole_fp16", 3, 2, 3, 2, 1.0, "sigmoid", "tanh", "tanh", fp16=True)


def gru_case(cid, S, B, I, H, direction="forward", output_sequence=True, ra="sigmoid", a="tanh", reset_after=False, fp16=False):
    x, wih, whh, bh, bi, h0 = f32(S, B, I), f32(3 * H, I), f32(3 * H, H), f32(3 * H), f32(3 * H), f32(B, H)
    if fp16:
        x, wih, whh, bh, bi, h0 = [v.astype(np.float16) for v in (x, wih, whh, bh, bi, h0)]
    X, Wi, Wh, Bh, Bi = [v.astype(np.float64) for v in (x, wih, whh, bh, bi)]
    h = h0.astype(np.float64)
    outs = []
    order = range(S - 1, -1, -1) if direction == "reverse" else range(S)
    for t in order:
        gx = X[t] @ Wi.T + (Bi if reset_after else 0)
        r = act(ra, gx[:, :H] + h @ Wh[:H].T + Bh[:H])
        z = act(ra, gx[:, 2 * H:] + h @ Wh[2 * H:].T + Bh[2 * H:])
        if reset_after:
            o = act(a, gx[:, H:2 * H] + r * (h @ Wh[H:2 * H].T + Bh[H:2 * H]))
        else:
            o = act(a, gx[:, H:2 * H] + (r * h) @ Wh[H:2 * H].T + Bh[H:2 * H])
        h = (1 - z) * o + z * h
        outs.append(h)
    seq = np.stack(outs) if output_sequence else h[None]
    inputs = {"x": x, "initial_h": h0, "weight_ih": wih, "weight_hh": whh, "bias": bh, "output_sequence": np.array(output_sequence)}
    if reset_after:
        inputs["input_bias"] = bi
        inputs["reset_after"] = np.array(True)
    strings = {"direction": direction, "recurrent_activation": ra, "activation": a}
    if fp16:
        V.add(cid, "gru", inputs, [seq.astype(np.float16), h.astype(np.float16)], strings=strings, atol=2e-3, rtol=2e-3, precision="fp16")
    else:
        V.add(cid, "gru", inputs, [seq, h], strings=strings, atol=1e-5, rtol=1e-4)


gru_case("gru_fwd", 4, 2, 3, 3)
gru_case("gru_rev_last", 3, 1, 2, 2, direction="reverse", output_sequence=False)
gru_case("gru_acts", 3, 2, 2, 3, ra="tanh", a="sigmoid")
gru_case("gru_reset_after", 3, 2, 3, 2, reset_after=True)
gru_case("gru_fp16", 3, 1, 2, 2, fp16=True)

# gru reset_after against torch.nn.GRU (torch's gate order r, z, n -> MIL r, o, z)
m = torch.nn.GRU(3, 2)
sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
rz = lambda w: np.concatenate([w[:2], w[4:6], w[2:4]])
x, h0 = f32(4, 2, 3), f32(1, 2, 2)
out, hn = m(torch.from_numpy(x), torch.from_numpy(h0))
V.add("gru_reset_after_torch", "gru",
      {"x": x, "initial_h": h0[0], "weight_ih": rz(sd["weight_ih_l0"]), "weight_hh": rz(sd["weight_hh_l0"]),
       "input_bias": rz(sd["bias_ih_l0"]), "bias": rz(sd["bias_hh_l0"]), "reset_after": np.array(True), "output_sequence": np.array(True)},
      [out.detach().numpy(), hn.detach().numpy()[0]], atol=1e-5, rtol=1e-4)

for cid, nl, direction, outseq in [("rnn_tanh", "tanh", "forward", True), ("rnn_relu_rev", "relu", "reverse", False)]:
    m = torch.nn.RNN(3, 4, nonlinearity=nl)
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    x, h0 = f32(3, 2, 3), f32(1, 2, 4)
    out, hn = m(torch.from_numpy(x[::-1].copy() if direction == "reverse" else x), torch.from_numpy(h0))
    out = out.detach().numpy()
    V.add(cid, "rnn", {"x": x, "initial_h": h0[0], "weight_ih": sd["weight_ih_l0"], "weight_hh": sd["weight_hh_l0"],
                       "bias": sd["bias_ih_l0"] + sd["bias_hh_l0"], "output_sequence": np.array(outseq)},
          [out if outseq else out[-1:], hn.detach().numpy()[0]], strings={"direction": direction, "activation": nl}, atol=1e-5, rtol=1e-4)
V.err("lstm_bad_direction", "lstm", {"x": f32(2, 1, 2), "initial_h": f32(1, 2), "initial_c": f32(1, 2), "weight_ih": f32(8, 2),
                                      "weight_hh": f32(8, 2)}, strings={"direction": "sideways"}, n_out=3)
V.err("rnn_bad_weight", "rnn", {"x": f32(2, 1, 2), "initial_h": f32(1, 3), "weight_ih": f32(3, 5), "weight_hh": f32(3, 3)}, n_out=2)

# --------------------------------------------------------------------------------------------
# image resizing


def grid(mode, xin, xout):
    """The MIL op reference's grid-point formulas (resize_bilinear sampling_mode)."""
    i = np.arange(xout, dtype=np.float64)
    if mode == "STRICT_ALIGN_CORNERS":
        g = np.zeros(xout) if xout == 1 else i * (xin - 1) / (xout - 1)
    elif mode == "ALIGN_CORNERS":
        g = np.full(xout, (xin - 1) / 2) if xout == 1 else i * (xin - 1) / (xout - 1)
    elif mode == "DEFAULT":
        g = np.zeros(xout) if xout == 1 else i * (xin - xin / xout) / (xout - 1)
    elif mode == "OFFSET_CORNERS":
        d = max(1, xin - 1) / xout
        g = 0.5 * d + i * d
    else:
        g = (i + 0.5) * xin / xout - 0.5
    return np.clip(g, 0, xin - 1)


def interp_matrix(g, xin):
    m = np.zeros((len(g), xin))
    for k, p in enumerate(g):
        i0 = min(int(np.floor(p)), xin - 1)
        i1 = min(i0 + 1, xin - 1)
        m[k, i0] += 1 - (p - i0)
        m[k, i1] += p - i0
    return m


def resize_ref(x, oh, ow, mode):
    h, w = x.shape[-2:]
    return np.einsum("ah,...hw,bw->...ab", interp_matrix(grid(mode, h, oh), h), x.astype(np.float64), interp_matrix(grid(mode, w, ow), w))


for mode in ["STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", "UNALIGN_CORNERS"]:
    for (shape, oh, ow) in [((1, 2, 3, 4), 5, 7), ((2, 3, 5), 1, 2)]:
        cid = f"resize_bilinear_{mode.lower()}_{len(shape)}d"
        V.both(cid, "resize_bilinear", {"x": f32(*shape), "target_size_height": np.int32(oh), "target_size_width": np.int32(ow)},
               lambda d, oh=oh, ow=ow, mode=mode: [resize_ref(d["x"], oh, ow, mode)], strings={"sampling_mode": mode}, float_inputs=("x",))
# the op reference's worked example: Xin = 2, Xout = 5
V.add("resize_bilinear_doc_example", "resize_bilinear", {"x": np.array([0, 1], np.float32).reshape(1, 1, 2), "target_size_height": np.int32(1),
      "target_size_width": np.int32(5)}, [np.array([0.1, 0.3, 0.5, 0.7, 0.9], np.float32).reshape(1, 1, 1, 5)[0]], strings={"sampling_mode": "OFFSET_CORNERS"})

for align, half in [(True, False), (False, True), (False, False)]:
    for (sh, sw) in [(2.0, 3.0), (0.5, 1.5)]:
        x = f32(1, 2, 4, 6)
        oh, ow = int(np.floor(4 * sh)), int(np.floor(6 * sw))
        if align or half:
            ref = lambda d, oh=oh, ow=ow, align=align: [torch.nn.functional.interpolate(torch.from_numpy(d["x"].astype(np.float32)), size=(oh, ow),
                                                        mode="bilinear", align_corners=align).numpy()]
        else:
            ref = lambda d, oh=oh, ow=ow: [resize_ref(d["x"], oh, ow, "DEFAULT")]
        V.both(f"upsample_bilinear_a{int(align)}_h{int(half)}_{sh}_{sw}", "upsample_bilinear",
               {"x": x, "scale_factor_height": np.float32(sh), "scale_factor_width": np.float32(sw), "align_corners": np.array(align),
                "half_pixel_centers": np.array(half)}, ref, float_inputs=("x",))

for (sh, sw) in [(2, 3), (1, 1)]:
    x = f32(1, 2, 3, 2)
    V.both(f"upsample_nearest_{sh}_{sw}", "upsample_nearest_neighbor",
           {"x": x, "scale_factor_height": np.int32(sh), "scale_factor_width": np.int32(sw)},
           lambda d, sh=sh, sw=sw: [torch.nn.functional.interpolate(torch.from_numpy(d["x"].astype(np.float32)), scale_factor=(sh, sw), mode="nearest").numpy()],
           float_inputs=("x",))
x = f32(2, 3, 5)
V.both("resize_nearest_neighbor_same", "resize_nearest_neighbor", {"x": x, "target_size_height": np.int32(3), "target_size_width": np.int32(10)},
       lambda d: [np.repeat(d["x"], 2, axis=-1)], float_inputs=("x",))
V.both("resize_nearest_neighbor_default_grid", "resize_nearest_neighbor", {"x": f32(1, 2, 1), "target_size_height": np.int32(3), "target_size_width": np.int32(1)},
       lambda d: [d["x"][:, [0, 1, 1], :]], float_inputs=("x",))   # DEFAULT grid 0, 0.67, 1.33→1 to the nearest input
V.both("resize_linear_last_axis", "resize", {"x": f32(2, 3, 4), "shape": i32(0, 7), "resized_dims": np.int32(1)},
       lambda d: [resize_ref(d["x"][:, :, None, :], 1, 7, "DEFAULT")[:, :, 0, :]], strings={"interpolation_mode": "LINEAR", "sampling_mode": "DEFAULT"}, float_inputs=("x",))
V.both("resize_linear_2d_keep", "resize", {"x": f32(1, 2, 3, 4), "shape": i32(1, 0, 6), "resized_dims": np.int32(2)},
       lambda d: [resize_ref(d["x"], 3, 6, "ALIGN_CORNERS")], strings={"interpolation_mode": "LINEAR", "sampling_mode": "ALIGN_CORNERS"}, float_inputs=("x",))
V.both("resize_nearest_2d", "resize", {"x": f32(1, 1, 2, 1), "shape": i32(1, 1, 3, 2), "resized_dims": np.int32(2)},
       lambda d: [d["x"][:, :, [0, 1, 1], :][:, :, :, [0, 0]]], strings={"interpolation_mode": "NEAREST_NEIGHBOR", "sampling_mode": "DEFAULT"}, float_inputs=("x",))
V.err("resize_bilinear_bad_mode", "resize_bilinear", {"x": f32(1, 2, 2), "target_size_height": np.int32(2), "target_size_width": np.int32(2)}, strings={"sampling_mode": "SIDEWAYS"})

x = f32(2, 1, 5, 6)
V.both("crop", "crop", {"x": x, "crop_height": i32(1, 2), "crop_width": i32(0, 3)}, lambda d: [d["x"][:, :, 1:3, 0:3]], float_inputs=("x",))
V.both("crop_empty", "crop", {"x": x, "crop_height": i32(2, 3), "crop_width": i32(0, 0)}, lambda d: [d["x"][:, :, 2:2, :]], float_inputs=("x",))
V.err("crop_too_much", "crop", {"x": x, "crop_height": i32(3, 3), "crop_width": i32(0, 0)})


def crop_resize_ref(x, boxes, idx, th, tw, pad):
    """tf.image.crop_and_resize (ALIGN_CORNERS over the box, pad outside) in numpy."""
    out = []
    h, w = x.shape[2:]
    for (y1, x1, y2, x2), b in zip(boxes, idx):
        ys = [y1 + (y2 - y1) * i / (th - 1) for i in range(th)] if th > 1 else [(y1 + y2) / 2]
        xs = [x1 + (x2 - x1) * i / (tw - 1) for i in range(tw)] if tw > 1 else [(x1 + x2) / 2]
        o = np.zeros((x.shape[1], th, tw))
        for a, yy in enumerate(ys):
            for c, xx in enumerate(xs):
                if yy < 0 or yy > h - 1 or xx < 0 or xx > w - 1:
                    o[:, a, c] = pad
                    continue
                y0, x0 = int(np.floor(yy)), int(np.floor(xx))
                y1_, x1_ = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
                fy, fx = yy - y0, xx - x0
                img = x[b].astype(np.float64)
                top = img[:, y0, x0] * (1 - fx) + img[:, y0, x1_] * fx
                bot = img[:, y1_, x0] * (1 - fx) + img[:, y1_, x1_] * fx
                o[:, a, c] = top * (1 - fy) + bot * fy
        out.append(o)
    return np.stack(out)


x = f32(2, 2, 5, 6)
boxes = np.array([[0.5, 1.0, 3.5, 4.0], [4.0, 5.0, 1.0, 0.0], [1.0, 1.0, 6.0, 2.0]], np.float32)
idx = np.array([1, 0, 1], np.int32)
V.both("crop_resize_ios17_align", "crop_resize", {"x": x, "boxes": boxes, "box_indices": idx, "target_height": np.int32(3), "target_width": np.int32(4),
                                                  "pad_value": np.float32(-1)},
       lambda d: [crop_resize_ref(d["x"], d["boxes"].astype(np.float64), idx, 3, 4, -1)], strings={"sampling_mode": "ALIGN_CORNERS", "box_coordinate_mode": "CORNERS_HEIGHT_FIRST"},
       float_inputs=("x", "boxes"))
# iOS15 roi [N, 1, 5, 1, 1] with batch index, normalized, width-first corners
roi = np.array([[1, 0.2, 0.1, 0.8, 0.9], [0, 0.0, 0.0, 1.0, 1.0]], np.float32).reshape(2, 1, 5, 1, 1)
bx = np.array([[0.1 * 4, 0.2 * 5, 0.9 * 4, 0.8 * 5], [0, 0, 4, 5]])  # to [y1, x1, y2, x2] pixels: y·(H-1), x·(W-1)
V.both("crop_resize_roi_normalized_wfirst", "crop_resize", {"x": x, "roi": roi, "target_height": np.int32(2), "target_width": np.int32(2),
                                                             "normalized_coordinates": np.array(True)},
       lambda d: [crop_resize_ref(d["x"], bx, [1, 0], 2, 2, 0)[:, None]], strings={"sampling_mode": "ALIGN_CORNERS", "box_coordinate_mode": "CORNERS_WIDTH_FIRST"},
       float_inputs=("x",))
roi4 = np.array([1.0, 1.0, 2.0, 3.0], np.float32).reshape(1, 1, 4, 1, 1)   # center-size, one crop per image
V.both("crop_resize_roi_center_size_1x1", "crop_resize", {"x": x, "roi": roi4, "target_height": np.int32(1), "target_width": np.int32(1)},
       lambda d: [crop_resize_ref(d["x"], np.array([[0.0, -0.5, 2.0, 2.5]] * 2), [0, 1], 1, 1, 0)[None]],
       strings={"sampling_mode": "ALIGN_CORNERS", "box_coordinate_mode": "CENTER_SIZE_HEIGHT_FIRST"}, float_inputs=("x",))


def grid_sample(x, g, mode, padding, align):
    return torch.nn.functional.grid_sample(torch.from_numpy(x.astype(np.float32)), torch.from_numpy(g.astype(np.float32)),
                                           mode=mode, padding_mode=padding, align_corners=align).numpy()


x = f32(2, 2, 4, 5)
g = rng.uniform(-1.4, 1.4, size=(2, 3, 4, 2)).astype(np.float32)
for mode in ["bilinear", "nearest"]:
    for pad in ["constant", "border", "reflection"]:
        for align in [True, False]:
            tp = {"constant": "zeros"}.get(pad, pad)
            V.both(f"resample_{mode}_{pad}_a{int(align)}", "resample",
                   {"x": x, "coordinates": g, "padding_value": np.float32(0), "align_corners": np.array(align)},
                   lambda d, mode=mode, tp=tp, align=align: [grid_sample(d["x"], d["coordinates"], mode, tp, align)],
                   strings={"sampling_mode": mode, "padding_mode": pad, "coordinates_mode": "normalized_minus_one_to_one"}, float_inputs=("x", "coordinates"))
# unnormalized and zero-to-one coordinates: the same points in other units
gu = ((g + 1) / 2 * np.array([4, 3], np.float32)).astype(np.float32)     # align_corners: pixels = (u+1)/2·(size−1)
V.add("resample_unnormalized", "resample", {"x": x, "coordinates": gu, "padding_value": np.float32(0), "align_corners": np.array(True)},
      [grid_sample(x, g, "bilinear", "zeros", True)], strings={"sampling_mode": "bilinear", "padding_mode": "constant", "coordinates_mode": "unnormalized"}, atol=1e-5)
V.add("resample_zero_to_one", "resample", {"x": x, "coordinates": ((g + 1) / 2).astype(np.float32), "padding_value": np.float32(0), "align_corners": np.array(False)},
      [grid_sample(x, g, "bilinear", "zeros", False)], strings={"sampling_mode": "bilinear", "padding_mode": "constant", "coordinates_mode": "normalized_zero_to_one"}, atol=1e-5)


def symmetric_ref(x, g):
    """resample nearest + symmetric padding, unnormalized coordinates: numpy (edge repeated)."""
    b, c, h, w = x.shape
    out = np.zeros((b, c) + g.shape[1:3], np.float32)
    def fold(i, n):
        p = 2 * n
        k = i % p
        return p - 1 - k if k >= n else k
    for bi in range(b):
        for i in range(g.shape[1]):
            for j in range(g.shape[2]):
                xx, yy = int(np.round(g[bi, i, j, 0])), int(np.round(g[bi, i, j, 1]))
                out[bi, :, i, j] = x[bi, :, fold(yy, h), fold(xx, w)]
    return out


gs = np.array([-2.0, -1.0, 6.0, 0.0, 2.0, 5.0, 7.0, 9.0], np.float32).reshape(1, 2, 2, 2)
xs = f32(1, 2, 4, 5)
V.add("resample_nearest_symmetric", "resample", {"x": xs, "coordinates": gs, "padding_value": np.float32(0), "align_corners": np.array(True)},
      [symmetric_ref(xs, gs)], strings={"sampling_mode": "nearest", "padding_mode": "symmetric", "coordinates_mode": "unnormalized"})
V.add("resample_constant_value", "resample", {"x": xs, "coordinates": np.full((1, 1, 2, 2), 5.0, np.float32), "padding_value": np.float32(6.5), "align_corners": np.array(True)},
      [np.full((1, 2, 1, 2), 6.5, np.float32)], strings={"sampling_mode": "bilinear", "padding_mode": "constant", "coordinates_mode": "normalized_minus_one_to_one"})

# affine = grid_sample over torch.nn.functional.affine_grid (theta = [[a0, a1, a2], [b0, b1, b2]])
theta = np.array([[0.8, -0.3, 0.1, 0.2, 1.1, -0.2], [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]], np.float32)
x = f32(2, 3, 4, 5)
for align in [True, False]:
    ag = torch.nn.functional.affine_grid(torch.from_numpy(theta.reshape(2, 2, 3)), (2, 3, 3, 6), align_corners=align).numpy()
    V.add(f"affine_a{int(align)}", "affine", {"x": x, "transform_matrix": theta, "output_height": np.int32(3), "output_width": np.int32(6),
                                              "padding_value": np.float32(0), "align_corners": np.array(align)},
          [grid_sample(x, ag, "bilinear", "zeros", align)], atol=1e-5,
          strings={"sampling_mode": "bilinear", "padding_mode": "constant", "coordinates_mode": "normalized_minus_one_to_one"})

# --------------------------------------------------------------------------------------------
# quantize / dequantize: torch.quantize_per_tensor / per_channel (round half to even)

for dt, tdt, npdt in [("int8", torch.qint8, np.int8), ("uint8", torch.quint8, np.uint8)]:
    x = f32(2, 3, 4, lo=-3, hi=3)
    zp = 3 if dt == "int8" else 128
    q = torch.quantize_per_tensor(torch.from_numpy(x), 0.03, zp, tdt).int_repr().numpy()
    V.add(f"quantize_tensor_{dt}", "quantize", {"input": x, "scale": np.float32(0.03), "zero_point": np.array(zp, npdt)}, [q],
          strings={"output_dtype": dt}, out_dtypes=[dt])
    V.add(f"dequantize_tensor_{dt}", "dequantize", {"input": q, "scale": np.float32(0.03), "zero_point": np.array(zp, npdt)},
          [(q.astype(np.float64) - zp) * np.float32(0.03)], atol=1e-6)
    for axis in [1, -1]:
        n = x.shape[axis]
        scale = rng.uniform(0.01, 0.05, n).astype(np.float32)
        zps = rng.integers(-5, 5, n) + (0 if dt == "int8" else 128)
        qc = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scale.astype(np.float64)), torch.from_numpy(zps), axis % 3, tdt).int_repr().numpy()
        V.add(f"quantize_axis{axis}_{dt}", "quantize", {"input": x, "scale": scale, "zero_point": zps.astype(npdt), "axis": np.int32(axis)}, [qc],
              strings={"output_dtype": dt}, out_dtypes=[dt])
        shp = [1, 1, 1]
        shp[axis % 3] = n
        V.add(f"dequantize_axis{axis}_{dt}", "dequantize", {"input": qc, "scale": scale, "zero_point": zps.astype(npdt), "axis": np.int32(axis)},
              [(qc.astype(np.float64) - zps.reshape(shp)) * scale.reshape(shp)], atol=1e-6)
xh = (f32(3, 5, lo=-2, hi=2)).astype(np.float16)
V.add("quantize_fp16_no_zero_point", "quantize", {"input": xh, "scale": np.float16(0.02)},
      [torch.quantize_per_tensor(torch.from_numpy(xh.astype(np.float32)), float(np.float16(0.02)), 0, torch.qint8).int_repr().numpy()],
      strings={"output_dtype": "int8"}, out_dtypes=["int8"], precision="fp16")
V.add("quantize_clips", "quantize", {"input": np.array([-1000, -1.5, 0.5, 1.5, 2.5, 1000], np.float32), "scale": np.float32(1)},
      [np.array([-128, -2, 0, 2, 2, 127], np.int8)], strings={"output_dtype": "int8"}, out_dtypes=["int8"])
V.add("quantize_empty", "quantize", {"input": np.zeros((0, 3), np.float32), "scale": np.float32(1)}, [np.zeros((0, 3), np.int8)],
      strings={"output_dtype": "int8"}, out_dtypes=["int8"])
V.add("dequantize_fp16", "dequantize", {"input": np.array([[-3, 0, 5]], np.int8), "scale": np.float16(0.1), "zero_point": np.int8(1)},
      [((np.array([[-3, 0, 5]]) - 1) * np.float32(np.float16(0.1))).astype(np.float16)], precision="fp16", atol=1e-3)
V.err("quantize_bad_dtype", "quantize", {"input": f32(2), "scale": np.float32(1)}, strings={"output_dtype": "int4"})
V.err("dequantize_vector_no_axis", "dequantize", {"input": np.zeros((2, 3), np.int8), "scale": np.ones(3, np.float32)})

# --------------------------------------------------------------------------------------------
# space / batch, reverse_sequence

x = f32(2, 3, 4, 6)
for f in [1, 2]:
    V.both(f"pixel_unshuffle_{f}", "pixel_unshuffle", {"x": x, "downscale_factor": np.int32(f)},
           lambda d, f=f: [torch.nn.functional.pixel_unshuffle(torch.from_numpy(d["x"].astype(np.float32)), f).numpy()], float_inputs=("x",))
V.err("pixel_unshuffle_indivisible", "pixel_unshuffle", {"x": f32(1, 1, 3, 4), "downscale_factor": np.int32(2)})


def space_to_batch_ref(x, bs, pads):
    """TensorFlow space_to_batch_nd in NCHW: pad, split H and W into blocks, blocks to batch."""
    n, c, h, w = x.shape
    p = np.pad(x, ((0, 0), (0, 0), tuple(pads[0]), tuple(pads[1])))
    H, W = p.shape[2] // bs[0], p.shape[3] // bs[1]
    r = p.reshape(n, c, H, bs[0], W, bs[1]).transpose(3, 5, 0, 1, 2, 4)
    return r.reshape(bs[0] * bs[1] * n, c, H, W)


def batch_to_space_ref(x, bs, crops):
    n, c, h, w = x.shape
    on = n // (bs[0] * bs[1])
    r = x.reshape(bs[0], bs[1], on, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(on, c, h * bs[0], w * bs[1])
    return r[:, :, crops[0][0]:h * bs[0] - crops[0][1], crops[1][0]:w * bs[1] - crops[1][1]]


x = f32(2, 2, 3, 5)
for bs, pads in [((1, 2), ((0, 0), (1, 0))), ((3, 1), ((0, 3), (0, 0)))]:
    V.both(f"space_to_batch_{bs[0]}x{bs[1]}", "space_to_batch", {"x": x, "block_shape": np.array(bs, np.int32), "paddings": np.array(pads, np.int32)},
           lambda d, bs=bs, pads=pads: [space_to_batch_ref(d["x"], bs, pads)], float_inputs=("x",))
xb = f32(6, 2, 2, 3)
for bs, crops in [((2, 3), ((0, 1), (2, 0))), ((1, 1), ((0, 0), (0, 0)))]:
    V.both(f"batch_to_space_{bs[0]}x{bs[1]}", "batch_to_space", {"x": xb, "block_shape": np.array(bs, np.int32), "crops": np.array(crops, np.int32)},
           lambda d, bs=bs, crops=crops: [batch_to_space_ref(d["x"], bs, crops)], float_inputs=("x",))
V.err("space_to_batch_indivisible", "space_to_batch", {"x": x, "block_shape": i32(2, 2), "paddings": np.zeros((2, 2), np.int32)})


def reverse_sequence_ref(x, lengths, seq_axis, batch_axis):
    out = x.copy()
    for b, l in enumerate(lengths):
        idx = [slice(None)] * x.ndim
        idx[batch_axis] = b
        sl = np.moveaxis(out[tuple(idx)], seq_axis - (1 if seq_axis > batch_axis else 0), 0)
        sl[:l] = sl[:l][::-1].copy()
    return out


x = f32(3, 4, 5)
V.both("reverse_sequence_s1_b0", "reverse_sequence", {"x": x, "lengths": i32(4, 0, 2), "seq_axis": np.int32(1), "batch_axis": np.int32(0)},
       lambda d: [reverse_sequence_ref(d["x"], [4, 0, 2], 1, 0)], float_inputs=("x",))
V.both("reverse_sequence_neg_axes", "reverse_sequence", {"x": x, "lengths": i32(1, 3, 3, 1, 2), "seq_axis": np.int32(-3), "batch_axis": np.int32(-1)},
       lambda d: [reverse_sequence_ref(d["x"], [1, 3, 3, 1, 2], 0, 2)], float_inputs=("x",))
xi = rng.integers(-9, 9, size=(2, 3)).astype(np.int32)
V.add("reverse_sequence_int", "reverse_sequence", {"x": xi, "lengths": i32(3, 2), "seq_axis": np.int32(1), "batch_axis": np.int32(0)},
      [reverse_sequence_ref(xi, [3, 2], 1, 0)])
V.err("reverse_sequence_long", "reverse_sequence", {"x": xi, "lengths": i32(4, 2), "seq_axis": np.int32(1), "batch_axis": np.int32(0)})

# --------------------------------------------------------------------------------------------
# random: degenerate distributions are exact (seeded draws cannot match a device)

V.add("random_uniform_point", "random_uniform", {"shape": i32(2, 3), "low": np.float32(1.5), "high": np.float32(1.5), "seed": np.int32(7)},
      [np.full((2, 3), 1.5, np.float32)])
V.add("random_normal_zero_sd", "random_normal", {"shape": i32(4), "mean": np.float32(-2), "stddev": np.float32(0)}, [np.full(4, -2, np.float32)])
V.add("random_bernoulli_1", "random_bernoulli", {"shape": i32(3, 1), "prob": np.float32(1)}, [np.ones((3, 1), np.float32)])
V.add("random_bernoulli_0", "random_bernoulli", {"shape": i32(0, 2), "prob": np.float32(0)}, [np.zeros((0, 2), np.float32)])
V.add("random_categorical_one_class", "random_categorical", {"x": f32(2, 1), "size": np.int32(5), "seed": np.int32(1)}, [np.zeros((2, 5), np.float32)])
V.add("random_categorical_certain", "random_categorical", {"x": np.array([[0, 0, 1, 0]], np.float32), "size": np.int32(3)},
      [np.full((1, 3), 2, np.float32)], strings={"mode": "probs"})
V.err("random_uniform_negative_shape", "random_uniform", {"shape": i32(2, -1)})

# --------------------------------------------------------------------------------------------
# iOS18 sparse compression (numpy spelling of coremltools' decompress formulas)

mask = rng.random((4, 6)) < 0.4
dense = rng.integers(-8, 8, size=(4, 6)).astype(np.int8)
nz = dense[mask]
scale = rng.uniform(0.01, 0.1, size=(2, 3)).astype(np.float32)
off = rng.integers(-2, 2, size=(2, 3)).astype(np.int8)
deq = (dense.astype(np.float32) - np.repeat(np.repeat(off, 2, 0), 2, 1)) * np.repeat(np.repeat(scale, 2, 0), 2, 1)
V.add("sparse_blockwise_shift_scale", "constexpr_sparse_blockwise_shift_scale",
      {"data_mask": mask, "nonzero_data": nz, "scale": scale, "offset": off}, [mask.astype(np.uint8), deq[mask]], out_dtypes=["uint1", "fp32"], atol=1e-6)
V.add("sparse_blockwise_shift_scale_fp16", "constexpr_sparse_blockwise_shift_scale",
      {"data_mask": mask, "nonzero_data": nz, "scale": scale.astype(np.float16)},
      [mask.astype(np.uint8), (dense.astype(np.float32) * np.repeat(np.repeat(scale.astype(np.float16).astype(np.float32), 2, 0), 2, 1))[mask].astype(np.float16)],
      out_dtypes=["uint1", "fp16"], precision="fp16", atol=1e-3)
lut = rng.uniform(-1, 1, size=(2, 1, 4, 1)).astype(np.float32)          # per-row-block 2-bit palette, scalar entries
idx_dense = rng.integers(0, 4, size=(4, 6)).astype(np.uint8)
values = np.take_along_axis(np.repeat(lut[:, :, :, 0], 2, 0).repeat(6, 1), idx_dense[:, :, None].astype(np.int64), 2)[:, :, 0]
V.add("lut_to_sparse_scalar", "constexpr_lut_to_sparse", {"indices_mask": mask, "indices_nonzero_data": idx_dense[mask], "lut": lut},
      [mask.astype(np.uint8), values[mask]], out_dtypes=["uint1", "fp32"])
lutv = rng.uniform(-1, 1, size=(1, 1, 4, 2)).astype(np.float32)         # vector palettization along axis 0
vals = lutv[0, 0][idx_dense.astype(np.int64)]                          # [4, 6, 2]
dense_v = vals.transpose(0, 2, 1).reshape(8, 6)                        # each index expands to 2 rows
mask_v = np.repeat(mask, 2, axis=0)
V.add("lut_to_sparse_vector", "constexpr_lut_to_sparse", {"indices_mask": mask, "indices_nonzero_data": idx_dense[mask], "lut": lutv, "vector_axis": np.int32(0)},
      [mask_v.astype(np.uint8), dense_v[mask_v]], out_dtypes=["uint1", "fp32"])
V.add("sparse_to_dense_ios18", "constexpr_sparse_to_dense", {"nonzero_data": deq[mask], "mask": mask}, [np.where(mask, deq, 0)], atol=1e-6)


# --------------------------------------------------------------------------------------------
# non_maximum_suppression: numpy greedy NMS as tf.image.non_max_suppression (coremltools' test
# reference), Core ML's padding (-1 indices, zeros) and its "best box when none survives"


def nms_ref(boxes, scores, iou_t, score_t, max_boxes, per_class):
    n, nb, k = scores.shape

    def iou(a, b):
        ay1, ax1, ay2, ax2 = a[1] - a[3] / 2, a[0] - a[2] / 2, a[1] + a[3] / 2, a[0] + a[2] / 2
        by1, bx1, by2, bx2 = b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2
        ih = max(0, min(ay2, by2) - max(ay1, by1))
        iw = max(0, min(ax2, bx2) - max(ax1, bx1))
        inter = ih * iw
        return inter / ((ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter)

    def greedy(cands, best, bx):
        order = sorted([i for i in cands if best[i] > score_t], key=lambda i: (-best[i], i))
        kept = []
        for i in order:
            if len(kept) < max_boxes and all(iou(bx[j], bx[i]) <= iou_t for j in kept):
                kept.append(i)
        return kept

    o1, o2 = np.zeros((n, max_boxes, 4)), np.zeros((n, max_boxes, k))
    o3, o4 = -np.ones((n, max_boxes), np.int32), np.zeros(n, np.int32)
    for b in range(n):
        bx, best, cls = boxes[b].astype(np.float64), scores[b].max(-1), scores[b].argmax(-1)
        if per_class:
            ids = sorted(sum((greedy([i for i in range(nb) if cls[i] == c], best, bx) for c in sorted(set(cls))), []), key=lambda i: (-best[i], i))
        else:
            ids = greedy(range(nb), best, bx)
        if not ids:
            ids = [int(np.argmax(best))]
        ids = ids[:max_boxes]
        o1[b, :len(ids)], o2[b, :len(ids)], o3[b, :len(ids)], o4[b] = bx[ids], scores[b][ids], ids, len(ids)
    return [o1, o2, o3, o4]


nb_boxes = np.concatenate([rng.uniform(0, 10, size=(2, 12, 2)), rng.uniform(1, 5, size=(2, 12, 2))], -1).astype(np.float32)
nb_scores = rng.permutation(2 * 12 * 3).reshape(2, 12, 3).astype(np.float32) / 72
for per_class in [False, True]:
    for (iou_t, score_t, mb_) in [(0.3, 0.2, 5), (0.7, 0.0, 20)]:
        V.add(f"nms_pc{int(per_class)}_{iou_t}_{score_t}_{mb_}", "non_maximum_suppression",
              {"boxes": nb_boxes, "scores": nb_scores, "iou_threshold": np.float32(iou_t), "score_threshold": np.float32(score_t),
               "max_boxes": np.int32(mb_), "per_class_suppression": np.array(per_class)},
              nms_ref(nb_boxes, nb_scores, iou_t, score_t, mb_, per_class), atol=1e-6)
V.add("nms_none_survive", "non_maximum_suppression",
      {"boxes": nb_boxes[:1], "scores": nb_scores[:1], "iou_threshold": np.float32(0.5), "score_threshold": np.float32(2.0), "max_boxes": np.int32(3)},
      nms_ref(nb_boxes[:1], nb_scores[:1], 0.5, 2.0, 3, False), atol=1e-6)


# iOS17 scatter ops (they carry validate_indices): negative indices are out of bounds
for op in ["scatter", "scatter_along_axis"]:
    V.err(f"{op}_ios17_negative_index", op, {"data": f32(2, 3), "indices": np.array([-1, 0], np.int32) if op == "scatter" else np.array([[-1, 0, 1], [1, 1, 0]], np.int32),
                                              "updates": f32(2, 3), "validate_indices": np.array(True)})
V.err("scatter_nd_ios17_negative_index", "scatter_nd", {"data": f32(2, 3), "indices": np.array([[0, -1]], np.int32), "updates": f32(1), "validate_indices": np.array(False)})


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "opset.json"), "w") as f:
        json.dump({"cases": V.cases}, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez_compressed(os.path.join(OUT, "opset.npz"), **V.arrays)
    size = os.path.getsize(os.path.join(OUT, "opset.npz"))
    print(json.dumps({"cases": len(V.cases), "arrays": len(V.arrays), "npz_bytes": size, "ops": sorted({c["op"] for c in V.cases})}))


if __name__ == "__main__":
    main()
