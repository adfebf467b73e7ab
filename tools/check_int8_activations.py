#!/usr/bin/env python3
"""Accuracy cost of `--activations int8|int16` on the real SmolLM2-135M int8 package (issue 18).

  tools/.venv/bin/python tools/check_int8_activations.py [--forge-ir PATH] [--activations int8|int16]
      [--max-tokens 64] [--json-out F]

For each chat prompt below: the default path (fp32 activations, Core ML's CPU numerics) greedily
generates --max-tokens tokens (`forge-ir generate --tokenizer … --chat TEXT`); then one `forge-ir
run` over prompt + generated ids with each path (teacher forcing: both see the same ids). Every
row's argmax (next-token top-1) is compared between the two paths: the agreement over all rows
of all prompts must be >= 99 %. Also printed: per prompt max |Δ logits|, and the greedy ids of
`generate --activations MODE` against the fp32 ones (first flip). numpy only; exit 1 on failure.
(`--activations int8` is the former `--int8-activations`; the default mode here.)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INT8 = os.path.join(ROOT, "models-ir", "large", "smollm2-135m-int8.mlpackage")
TOKENIZER = os.path.join(ROOT, "models-ir", "tokenizers", "smollm2.json")
CTX = 2048
MASK_NEG = -1e4
AGREE_MIN = 0.99
PROMPTS_ALL = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain in two sentences how a refrigerator works.",
    "List three prime numbers and explain why they are prime.",
    "Give me a recipe for pancakes.",
    "What is the difference between a list and a tuple in Python?",
]
PROMPTS = PROMPTS_ALL


def forge(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"forge-ir {' '.join(args[:3])} failed ({r.returncode}):\n{r.stderr}{r.stdout}")
    return r.stdout


def logits(exe, model, ids, tmp, extra):
    s = len(ids)
    mask = np.full((1, 1, s, CTX), MASK_NEG, dtype=np.float16)
    for r in range(s):
        mask[0, 0, r, : r + 1] = 0.0
    npz, out = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out")
    np.savez(npz, input_ids=np.asarray(ids, dtype=np.int32).reshape(1, s), causal_mask=mask,
             position_ids=np.arange(s, dtype=np.int32).reshape(1, s), cache_offset=np.zeros(1, dtype=np.int32))
    forge(exe, "run", model, "--inputs", npz, "--out", out, *extra)
    lg = np.load(os.path.join(out, "logits.npy"))[0].astype(np.float32)
    shutil.rmtree(out)
    return lg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forge-ir", default=os.environ.get("FORGE_IR", os.path.join(ROOT, ".build", "release", "forge-ir")))
    ap.add_argument("--model", default=INT8)
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS_ALL), help="use the first N prompts")
    ap.add_argument("--activations", choices=("int8", "int16"), default="int8", help="the quantized mode to check")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    mode = ["--activations", args.activations]
    for p in (args.forge_ir, args.model, args.tokenizer):
        if not os.path.exists(p):
            sys.exit(f"missing {p}")
    tmp = tempfile.mkdtemp(prefix="check_int8act_")
    res, agree, total = [], 0, 0
    try:
        for text in PROMPTS[: args.prompts]:
            g = json.loads(forge(args.forge_ir, "generate", args.model, "--tokenizer", args.tokenizer, "--chat", text,
                                 "--max-tokens", str(args.max_tokens), "--json"))
            g8 = json.loads(forge(args.forge_ir, "generate", args.model, "--tokenizer", args.tokenizer, "--chat", text,
                                  "--max-tokens", str(args.max_tokens), *mode, "--json"))
            ids = g["prompt_ids"] + g["token_ids"]
            a = logits(args.forge_ir, args.model, ids, tmp, [])
            b = logits(args.forge_ir, args.model, ids, tmp, mode)
            am, bm = a.argmax(-1), b.argmax(-1)
            n_agree = int((am == bm).sum())
            agree += n_agree
            total += len(ids)
            flip = next((j for j, (x, y) in enumerate(zip(g["token_ids"], g8["token_ids"])) if x != y), None)
            gaps = [float(np.sort(a[k])[-1] - np.sort(a[k])[-2]) for k in np.nonzero(am != bm)[0]]
            r = {"prompt": text, "rows": len(ids), "top1_agree": n_agree, "max_abs_dlogit": float(np.abs(a - b).max()),
                 "fp32_top2_gap_at_disagreements": gaps, "greedy_first_flip": flip,
                 "greedy_tokens": [len(g["token_ids"]), len(g8["token_ids"])],
                 "decode_tok_s": [g.get("decode_tok_s"), g8.get("decode_tok_s")]}
            res.append(r)
            print(f"{text!r}: top-1 {n_agree}/{len(ids)} rows; max|Δlogit| {r['max_abs_dlogit']:.3f}; "
                  f"fp32 top-2 gaps where they differ {[round(x, 3) for x in gaps]}; greedy "
                  + ("ids equal" if flip is None else f"first flip at generated token {flip}")
                  + f"; decode t/s fp32 {g.get('decode_tok_s', 0):.1f}, {args.activations} {g8.get('decode_tok_s', 0):.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    frac = agree / max(total, 1)
    ok = frac >= AGREE_MIN
    print(f"\nteacher-forced top-1 agreement, --activations {args.activations} vs fp32 activations: {agree}/{total} = {100 * frac:.2f}% "
          f"(>= {100 * AGREE_MIN:.0f}%: {'OK' if ok else 'FAIL'})")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"activations": args.activations, "prompts": res, "agree": agree, "rows": total, "fraction": frac, "ok": ok}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
