#!/usr/bin/env python3
"""Fixtures for `forge-ir compare` and `forge-ir reduce`, in models-ir/compare/.

Usage:  tools/.venv/bin/python tools/make_compare_fixtures.py [--out models-ir/compare]

- mlp_good.mlpackage / mlp_corrupt.mlpackage: a 4-layer fp32 MLP (linear + relu, 32 wide),
  the same weights except row 5 of layer 2's weight (+1.0) in mlp_corrupt; inputs
  mlp.npz. EXPECTED["corrupt_reader"] is the op that reads the corrupted const (found in the
  converted program by walking its ops, not by running forge-ir).
- chain300.mlpackage: 300 elementwise ops (mul / add / tanh) on x [1, 64] with one planted
  `sqrt` of a negative value (NaN from there on); inputs chain300.npz.
  EXPECTED["planted"] is the sqrt op's name.
Writes expected.json next to them (read by Tests/ForgeCLITests/CompareCLITests.swift).
"""

import argparse
import json
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402

from make_fixtures import fix_manifest, fix_metadata  # noqa: E402

warnings.filterwarnings("ignore")
TARGET = ct.target.iOS18


def save(prog, out_dir, name):
    ml = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=TARGET,
                    compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY,
                    skip_model_load=True)
    path = os.path.join(out_dir, name + ".mlpackage")
    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(ml)
    ml.save(path)
    fix_manifest(path, "compare/" + name)
    return ml


def mlp(weights, biases):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32))], opset_version=TARGET)
    def prog(x):
        y = x
        for i, (w, b) in enumerate(zip(weights, biases)):
            y = mb.linear(x=y, weight=w, bias=b, name=f"fc{i}")
            if i < len(weights) - 1:
                y = mb.relu(x=y, name=f"relu{i}")
        return y
    return prog


def reader_of(ml, const_value):
    """Name of the op that reads the const whose value equals const_value."""
    prog = ml._mil_program.functions["main"]
    for op in prog.operations:
        if op.op_type == "const" and op.val.val is not None and np.shape(op.val.val) == const_value.shape \
                and np.array_equal(op.val.val, const_value):
            return [u.name for u in op.outputs[0].child_ops]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "models-ir", "compare"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(16)
    ws = [(rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32) for _ in range(4)]
    bs = [(rng.standard_normal(32) * 0.1).astype(np.float32) for _ in range(4)]
    save(mlp(ws, bs), a.out, "mlp_good")
    bad = [w.copy() for w in ws]
    bad[2][5, :] += 1.0   # one row: fc2's output 5 grows by sum(relu1) > 0 and survives relu2
    ml_bad = save(mlp(bad, bs), a.out, "mlp_corrupt")
    readers = reader_of(ml_bad, bad[2])
    assert readers and len(readers) == 1, readers
    np.savez(os.path.join(a.out, "mlp.npz"), x=rng.standard_normal((1, 32)).astype(np.float32))

    planted = None

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 64))], opset_version=TARGET)
    def chain(x):
        nonlocal planted
        y = x
        for i in range(300):
            if i == 203:
                y = mb.sqrt(x=mb.sub(x=y, y=np.float32(3.0), name=f"op{i}_shift"), name=f"op{i}_planted_sqrt")
                planted = y.op.name
                continue
            k = i % 3
            if k == 0:
                y = mb.mul(x=y, y=np.float32(0.9), name=f"op{i}_mul")
            elif k == 1:
                y = mb.add(x=y, y=np.float32(0.05), name=f"op{i}_add")
            else:
                y = mb.tanh(x=y, name=f"op{i}_tanh")
        return y

    save(chain, a.out, "chain300")
    np.savez(os.path.join(a.out, "chain300.npz"), x=rng.uniform(-1, 1, (1, 64)).astype(np.float32))
    expected = {"corrupt_reader": readers[0], "planted": planted}
    with open(os.path.join(a.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")
    print(expected)


if __name__ == "__main__":
    main()
