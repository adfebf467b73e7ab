#!/usr/bin/env python3
"""coremltools check of what `fuse_dequant` writes.

Usage:  tools/.venv/bin/python tools/check_fuse_dequant.py FORGE_IR_BINARY [OUT_DIR]

Builds with the MIL Builder (saved with pass_pipeline=EMPTY, so that coremltools' own
`dequantize_to_constexpr` does not run):
  * ios18: `matmul(x, transpose(dequantize(int8 W [32, 48], per-row scale + zero point)))` plus
    `matmul(x2, reshape(dequantize(uint8 [24, 32], per-tensor scale + zero point)))`;
  * ios17: `matmul(x, dequantize(int8 W, per-row scale + zero point), transpose_y)`.
(`linear` would not do: coremltools wants its weight to be a const or constexpr op.)
Runs `forge-ir optimize --passes fuse_dequant,dead_code_elimination`, then in coremltools:
loads the result (milproto loader), checks that no `dequantize` / `transpose` / `reshape` is
left, compares every constexpr op's dequantized value (`materialized_val_inference`) with the
numpy reference of the original weight expression (exact), and runs the default pass pipeline.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402
from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager  # noqa: E402

from check_package import load_program  # noqa: E402

rng = np.random.RandomState(5)
Q1 = rng.randint(-128, 128, size=(32, 48)).astype(np.int8)
S1 = (rng.randint(1, 9, size=(32,)) / 64).astype(np.float32)
Z1 = rng.randint(-5, 6, size=(32,)).astype(np.int8)
Q2 = rng.randint(0, 256, size=(24, 32)).astype(np.uint8)
S2 = np.float32(0.03125)
Z2 = np.uint8(128)
REF = {
    "w1t": ((Q1.astype(np.float32) - Z1[:, None]) * S1[:, None]).T,  # transpose folded
    "w2r": ((Q2.astype(np.float32) - np.float32(Z2)) * S2).reshape(4, 6, 32),
}


def build_ios18():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 48), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def prog(x):
        w1 = mb.dequantize(input=Q1, scale=S1, zero_point=Z1, axis=0, name="w1")
        w1t = mb.transpose(x=w1, perm=[1, 0], name="w1t")               # [48, 32]
        y1 = mb.matmul(x=x, y=w1t, name="y1")                           # [1, 32]
        w2 = mb.dequantize(input=Q2, scale=S2, zero_point=Z2, name="w2")
        w2r = mb.reshape(x=w2, shape=[4, 6, 32], name="w2r")
        x2 = mb.reshape(x=mb.slice_by_size(x=x, begin=[0, 0], size=[1, 24]), shape=[4, 1, 6])
        y2 = mb.matmul(x=x2, y=w2r, name="y2")                          # [4, 1, 32]
        return y1, y2
    return prog


def build_ios17():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 48), dtype=types.fp32)], opset_version=ct.target.iOS17)
    def prog(x):
        w = mb.dequantize(input=Q1, scale=S1, zero_point=Z1, axis=0, name="w17")
        return mb.matmul(x=x, y=w, transpose_y=True, name="y")
    return prog


def save(prog, target, path):
    ml = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=target, compute_precision=ct.precision.FLOAT32,
                    skip_model_load=True, pass_pipeline=ct.PassPipeline.EMPTY)
    ml.save(path)


def check(path, expect_ops):
    prog = load_program(path)
    counts = Counter()
    errors = []
    for f in prog.functions.values():
        for op in f.operations:
            counts[op.op_type] += 1
            if op.op_type.startswith("constexpr_"):
                val = op.materialized_val_inference()
                ref = REF.get(op.outputs[0].name)
                if op.outputs[0].name == "w17":
                    ref = (Q1.astype(np.float32) - Z1[:, None]) * S1[:, None]
                if ref is None:
                    errors.append(f"no reference for {op.outputs[0].name}")
                elif val.shape != ref.shape or not np.array_equal(val, ref):
                    errors.append(f"{op.outputs[0].name}: values differ (max |d| {np.max(np.abs(val - ref)) if val.shape == ref.shape else val.shape})")
    for t in ("dequantize", "transpose"):
        if counts.get(t):
            errors.append(f"{counts[t]} {t} left")
    for t in expect_ops:
        if not counts.get(t):
            errors.append(f"no {t}")
    PassPipelineManager.apply_pipeline(prog, ct.PassPipeline.DEFAULT)
    return counts, errors


def main():
    binary = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="forge-ir-fuse-")
    os.makedirs(out, exist_ok=True)
    status = 0
    for name, build, target, expect in [("fuse_ios18", build_ios18, ct.target.iOS18, ["constexpr_blockwise_shift_scale"]),
                                        ("fuse_ios17", build_ios17, ct.target.iOS17, ["constexpr_affine_dequantize"])]:
        src, dst = os.path.join(out, name + ".mlpackage"), os.path.join(out, name + "_opt.mlpackage")
        for p in (src, dst):
            shutil.rmtree(p, ignore_errors=True)
        save(build(), target, src)
        r = subprocess.run([binary, "optimize", src, "-o", dst, "--passes", "fuse_dequant,dead_code_elimination"],
                           capture_output=True, text=True)
        stats = [l for l in r.stdout.splitlines() if l.startswith(("fuse_dequant", "dead_code"))]
        if r.returncode != 0:
            print(f"{name}: forge-ir optimize FAILED: {r.stderr.strip()}")
            status = 1
            continue
        try:
            counts, errors = check(dst, expect)
        except Exception as e:  # noqa: BLE001
            counts, errors = Counter(), [f"{type(e).__name__}: {e}"]
        def wsize(pkg):
            w = os.path.join(pkg, "Data", "com.apple.CoreML", "weights", "weight.bin")
            return os.path.getsize(w) if os.path.exists(w) else 0
        print(f"{name}: {'; '.join(stats)}")
        print(f"  coremltools: {dict(sorted(counts.items()))}; weight.bin {wsize(src)} → {wsize(dst)} bytes")
        print(f"  {'OK: values exact, default pipeline ran' if not errors else 'FAILED: ' + '; '.join(errors)}")
        status |= bool(errors)
    return status


if __name__ == "__main__":
    sys.exit(main())
