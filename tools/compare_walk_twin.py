#!/usr/bin/env python3
"""Expected first-diverging op of `forge-ir compare --precision fp32,fp16` on the SmolLM2 twin,
found by a numpy walk over the values `forge-ir run --outputs all` saves in each precision.

Usage:  tools/.venv/bin/python tools/compare_walk_twin.py --forge-ir .build/debug/forge-ir

Walks the fp16 run's values.json in order (op order) and names the first value, present in
both runs, for which numpy.allclose(fp16, fp32, rtol, atol) fails (NaN must match NaN, inf
the same inf), computed in float64. Writes models-ir/compare/twin_fp16_walk.json (checked by
Tests/ForgeCLITests/CompareCLITests.swift).
"""

import argparse
import json
import os
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
MODEL = "models-ir/smollm2_twin_int8.mlpackage"
INPUTS = "models-ir/inputs/smollm2_twin_int8.npz"
ATOL = RTOL = 1e-3


def run(binary, precision, out):
    subprocess.run([binary, "run", MODEL, "--inputs", INPUTS, "--precision", precision, "--out", out,
                    "--outputs", "all"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "values.json")) as f:
        return json.load(f)["values"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forge-ir", required=True)
    a = ap.parse_args()
    binary = os.path.abspath(a.forge_ir)
    with tempfile.TemporaryDirectory() as tmp:
        d32, d16 = os.path.join(tmp, "fp32"), os.path.join(tmp, "fp16")
        ref = {e["name"]: e["file"] for e in run(binary, "fp32", d32)}
        first = None
        compared = 0
        for e in run(binary, "fp16", d16):
            if e["name"] not in ref:
                continue
            c = np.load(os.path.join(d16, e["file"])).astype(np.float64)
            r = np.load(os.path.join(d32, ref[e["name"]])).astype(np.float64)
            compared += 1
            if c.shape != r.shape or not np.allclose(c, r, rtol=RTOL, atol=ATOL, equal_nan=True):
                first = e
                break
    out = {"model": MODEL, "inputs": INPUTS, "atol": ATOL, "rtol": RTOL, "values_walked": compared,
           "first_divergence": first["name"], "op": first["op"], "op_type": first["op_type"]}
    path = os.path.join(ROOT, "models-ir", "compare", "twin_fp16_walk.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
