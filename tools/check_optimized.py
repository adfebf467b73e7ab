#!/usr/bin/env python3
"""coremltools acceptance of a package written by `forge-ir optimize`.

Usage:  tools/.venv/bin/python tools/check_optimized.py OPTIMIZED.mlpackage [--quantized-out OUT.mlpackage]

1. loads the package with `ct.models.MLModel(path, skip_model_load=True)` and prints the op
   counts of its MIL program (coremltools' milproto loader);
2. runs `ct.optimize.coreml.linear_quantize_weights` (linear_symmetric int8, per_block,
   block_size 32 — the configuration of the tiny_llama_int8 fixture, weight_threshold 512),
   saves the result and loads it back (skip_model_load=True), printing how many weights became
   `constexpr_blockwise_shift_scale`.
Exits 1 on the first failure (with the exception), 0 when both succeed.
"""

import argparse
import os
import shutil
import sys
import tempfile
import traceback
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import coremltools as ct  # noqa: E402
import coremltools.optimize.coreml as cto  # noqa: E402

from check_package import load_program  # noqa: E402


def op_counts(path):
    prog = load_program(path)
    counts = Counter()

    def walk(block):
        for op in block.operations:
            counts[op.op_type] += 1
            for b in op.blocks:
                walk(b)

    for f in prog.functions.values():
        walk(f)
    return counts


def show(counts, keys):
    return ", ".join(f"{k} {counts.get(k, 0)}" for k in keys)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("package")
    ap.add_argument("--quantized-out", help="where to save the quantized package (default: a temporary folder)")
    args = ap.parse_args()
    keys = ["slice_update", "scatter", "read_state", "write_state", "coreml_update_state", "linear", "constexpr_blockwise_shift_scale"]
    try:
        model = ct.models.MLModel(args.package, skip_model_load=True)
        counts = op_counts(args.package)
        print(f"load: OK (spec version {model.get_spec().specificationVersion}, {sum(counts.values())} ops; {show(counts, keys)})")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print(f"load: FAILED: {type(e).__name__}: {e}")
        return 1
    tmp = None
    out = args.quantized_out
    if not out:
        tmp = tempfile.mkdtemp(prefix="forge-ir-quant-")
        out = os.path.join(tmp, "quantized.mlpackage")
    try:
        config = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(
            mode="linear_symmetric", dtype="int8", granularity="per_block", block_size=32, weight_threshold=512))
        quantized = cto.linear_quantize_weights(model, config=config)
        if os.path.exists(out):
            shutil.rmtree(out)
        quantized.save(out)
        ct.models.MLModel(out, skip_model_load=True)
        qcounts = op_counts(out)
        print(f"linear_quantize_weights (int8, per_block 32): OK, saved {out} ({show(qcounts, keys)})")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print(f"linear_quantize_weights: FAILED: {type(e).__name__}: {e}")
        return 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
