"""Copy a small, stable sample of passing conformance cases into models-ir/conformance/ (for CI).

    tools/.venv/bin/python tools/conformance/sample.py --results tools/conformance/.work/results.json \
        --cases tools/conformance/.work/cases [--max 48] [--out models-ir/conformance]

One case per op type under test (the ops a case runs, const and the fp16 casts aside), the op
types added for issue 12 first, never a stateful chain; the smallest passing case of each op
(by package size, then id) so the sample stays well under 2 MB. The copied case folders are
what `Tests/InterpreterTests/ConformanceSampleTests.swift` runs.
"""
import argparse
import json
import os
import re
import shutil

NEW = ["lstm", "gru", "rnn", "resize", "resize_bilinear", "resize_nearest_neighbor", "upsample_bilinear",
       "upsample_nearest_neighbor", "crop", "crop_resize", "resample", "affine", "pixel_unshuffle", "pixel_shuffle",
       "space_to_batch", "batch_to_space", "quantize", "dequantize", "constexpr_sparse_blockwise_shift_scale",
       "constexpr_lut_to_sparse", "constexpr_sparse_to_dense", "make_list", "list_write", "list_read", "list_gather",
       "list_scatter", "list_length", "reshape_like", "reverse_sequence", "random_uniform", "random_normal",
       "random_bernoulli", "random_categorical", "linear", "instance_norm", "batch_norm", "local_response_norm",
       "l2_norm", "conv", "conv_transpose"]


# Tests whose failure a kernel fix answered: the smallest passing case of each is sampled too.
ALSO = [r"TestLinear::test_linear_ios17_mixed_precision\[.*-float32-int32\]"]  # int32 weight and bias


def size_of(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", default="models-ir/conformance")
    ap.add_argument("--max", type=int, default=48)
    a = ap.parse_args()
    results = [r for r in json.load(open(a.results)) if r["status"] == "pass" and not r.get("stateful")]
    by_op = {}
    for r in results:
        ops = sorted(set(t for t in r.get("op_types", []) if t not in ("const", "cast")))
        for op in ops:
            by_op.setdefault(op, []).append(r)
    order = [o for o in NEW if o in by_op] + sorted(o for o in by_op if o not in NEW)
    chosen, seen = [], set()
    for op in order:
        if len(chosen) >= a.max:
            break
        cands = sorted(by_op[op], key=lambda r: (size_of(os.path.join(a.cases, r["id"])), r["id"]))
        for r in cands:
            if r["id"] not in seen:
                chosen.append((op, r))
                seen.add(r["id"])
                break
    for pattern in ALSO:
        cands = sorted((r for r in results if re.search(pattern, r["test"]) and r["id"] not in seen),
                       key=lambda r: (size_of(os.path.join(a.cases, r["id"])), r["id"]))
        if cands and not any(re.search(pattern, r["test"]) for _, r in chosen):
            op = sorted(set(t for t in cands[0].get("op_types", []) if t not in ("const", "cast")))[0]
            chosen.append((op, cands[0]))
            seen.add(cands[0]["id"])
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    index = []
    for op, r in chosen:
        shutil.copytree(os.path.join(a.cases, r["id"]), os.path.join(a.out, r["id"]))
        index.append({"id": r["id"], "op": op, "test": r["test"]})
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("sampled %d cases, %d bytes into %s" % (len(chosen), size_of(a.out), a.out))


if __name__ == "__main__":
    main()
