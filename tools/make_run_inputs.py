"""Writes models-ir/inputs/<fixture>[.<function>].npz: one set of inputs per fixture function,
for `forge-ir run --inputs` in the CLI tests. Deterministic (fixed seed); numpy only.

Run with the tools venv:  tools/.venv/bin/python tools/make_run_inputs.py
"""
import os

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models-ir")
OUT = os.path.join(ROOT, "inputs")


def llm_inputs(ids, offset, ctx):
    s = len(ids)
    mask = np.full((1, 1, s, ctx), -1e4, dtype=np.float16)
    for r in range(s):
        mask[0, 0, r, : offset + r + 1] = 0
    return {
        "input_ids": np.array([ids], dtype=np.int32),
        "causal_mask": mask,
        "position_ids": np.arange(offset, offset + s, dtype=np.int32)[None, :],
        "cache_offset": np.array([offset], dtype=np.int32),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    sets = {
        "tiny_llama_fp16": llm_inputs([17, 200, 3, 99], 0, 64),
        "tiny_llama_int8": llm_inputs([17, 200, 3, 99], 0, 64),
        "tiny_llama_dynamic_end": llm_inputs([17, 200, 3, 99], 0, 64),
        "multifunction.prefill": llm_inputs([17, 200, 3], 0, 64),
        "multifunction.decode": llm_inputs([42], 3, 64),
        "enumerated_shapes": {"input_ids": rng.integers(0, 64, size=(1, 16), dtype=np.int32)},
        "mixed_dtypes": {
            "a": rng.standard_normal((1, 32)).astype(np.float32),
            "b": rng.standard_normal((1, 32)).astype(np.float16),
            "c": np.array([0, 5, 11, 3], dtype=np.int32),
            "s": np.array([0.5], dtype=np.float32),
        },
        "tiny_inline": {"x": np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32)},
    }
    if os.path.isdir(os.path.join(ROOT, "smollm2_twin_int8.mlpackage")):
        sets["smollm2_twin_int8"] = llm_inputs([1, 504, 28, 9], 0, 256)
    for name, arrays in sets.items():
        path = os.path.join(OUT, name + ".npz")
        np.savez(path, **arrays)
        print("wrote", path)


if __name__ == "__main__":
    main()
