#!/usr/bin/env python3
"""Accuracy cost of Q8_0 (or int16) activations in torch, independent of forge-ir (issue 18).

  tools/.venv/bin/python tools/q8_activation_reference.py [--forge-ir PATH] [--prompts 6] [--max-tokens 64] [--bits 8|16]

Builds the torch StatefulLlama with the weights dequantized from the SmolLM2-135M int8 package
(tools/convert_smollm2.py's functions) and runs, teacher-forced over the same ids as
tools/check_int8_activations.py (chat prompt + forge-ir's greedy fp32 answer), two variants:
fp32 activations, and every linear's input (q/k/v/o/gate/up/down and the tied LM head)
quantized per row and block of 32 as llama.cpp's quantize_row_q8_0 does (d = max|x|/127,
q = round(x/d), x ~ q·d; products then exact in fp32 -- what an int32 block sum times s_w·d
computes up to fp32 rounding). Prints the top-1 agreement of the two, on fp32 logits and on
logits rounded to fp16 (the package's logits dtype), so forge-ir's `--int8-activations` figure
can be compared with what the quantization itself costs. `--bits 16` emulates forge-ir's
`--activations int16` instead: d = max|x|/32767 per block of 32, q = round(x/d) (fp32 d).
"""

import argparse
import json
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import check_int8_activations as c8  # noqa: E402
import convert_smollm2 as cs  # noqa: E402
import stateful_llama as sl  # noqa: E402


def q8(x):
    """llama.cpp quantize_row_q8_0 (reference) then dequantized, per block of 32 of the last axis
    (QMAX 127; 32767 for the int16 mode)."""
    shp = x.shape
    b = x.reshape(*shp[:-1], shp[-1] // 32, 32)
    amax = b.abs().amax(-1, keepdim=True)
    d = amax / QMAX
    idv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = torch.round(b * idv)
    return (q * d.to(torch.float16).to(torch.float32)).reshape(shp) if Q8_FP16_D else (q * d).reshape(shp)


Q8_FP16_D = False
QMAX = 127.0
ENABLED = {"on": False, "kinds": ("lm_head", "down", "other")}
_orig_linear = F.linear


def kind(w):
    n, k = w.shape
    return "lm_head" if n > 8192 else "down" if k > n else "other"


def linear(x, w, b=None):
    if ENABLED["on"] and x.shape[-1] % 32 == 0 and kind(w) in ENABLED["kinds"]:
        x = q8(x)
    return _orig_linear(x, w, b)


def main():
    global Q8_FP16_D, QMAX
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forge-ir", default=os.path.join(ROOT, ".build", "release", "forge-ir"))
    ap.add_argument("--prompts", type=int, default=len(c8.PROMPTS_ALL))
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--only", default="lm_head,down,other",
                    help="which linears get Q8 inputs: lm_head, down (down_proj), other (q/k/v/o/gate/up)")
    ap.add_argument("--fp16-scales", action="store_true", help="round d to fp16 as llama.cpp's block_q8_0 stores it")
    ap.add_argument("--bits", type=int, choices=(8, 16), default=8, help="activation integer width (8: Q8_0, 16: int16)")
    args = ap.parse_args()
    Q8_FP16_D = args.fp16_scales
    QMAX = 127.0 if args.bits == 8 else 32767.0
    ENABLED["kinds"] = tuple(args.only.split(","))
    torch.set_grad_enabled(False)
    F.linear = linear
    torch.nn.modules.linear.F.linear = linear
    sl.F.linear = linear

    meta, _tok, tensors = cs.load_gguf(cs.find_gguf())
    spec = cs.spec_for(meta, cs.CTX_LARGE)
    m = cs.stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    cs.apply_package_weights(m, c8.INT8)
    agree = agree16 = total = 0
    for text in c8.PROMPTS_ALL[: args.prompts]:
        g = json.loads(c8.forge(args.forge_ir, "generate", c8.INT8, "--tokenizer", c8.TOKENIZER, "--chat", text,
                                "--max-tokens", str(args.max_tokens), "--json"))
        ids = g["prompt_ids"] + g["token_ids"]
        out = []
        for on in (False, True):
            ENABLED["on"] = on
            m.reset_caches(torch.float16)
            out.append(sl.torch_call(m, sl.make_inputs(ids, 0, spec.ctx)).numpy().astype(np.float32)[0])
        a, b = out
        n = int((a.argmax(-1) == b.argmax(-1)).sum())
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        n16 = int((a16.argmax(-1) == b16.argmax(-1)).sum())
        agree, agree16, total = agree + n, agree16 + n16, total + len(ids)
        print(f"{text!r}: torch {args.bits}-bit-activation top-1 {n}/{len(ids)} (fp16 logits {n16}/{len(ids)}); "
              f"max|Δlogit| {float(np.abs(a - b).max()):.3f}", flush=True)
    print(f"\ntorch, {'Q8_0' if args.bits == 8 else 'int16'} activations vs fp32 activations, teacher-forced top-1: {agree}/{total} = "
          f"{100 * agree / total:.2f}% (fp32 logits), {100 * agree16 / total:.2f}% (logits rounded to fp16)")


if __name__ == "__main__":
    main()
