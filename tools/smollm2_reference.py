#!/usr/bin/env python3
"""Three-prompt torch reference for the SmolLM2-135M packages (no Core ML conversion).

Builds the stateful torch module of tools/convert_smollm2.py from the GGUF twice -- fp32 compute
with the fp16-rounded weights (what smollm2-135m-fp16.mlpackage holds) and with the weights
dequantized from smollm2-135m-int8.mlpackage -- and runs 3 ChatML prompts x 32 greedy tokens.

Usage (venv with tools/requirements-large.txt; the packages must exist, see tools/NOTES.md):
  tools/.venv/bin/python tools/smollm2_reference.py [--out models-ir/large/smollm2-135m_reference3.npz]
                                                    [--mirror-out models-ir/large/smollm2-135m_reference3_mirror.npz]

Prompts: rendered with the GGUF's own `tokenizer.chat_template` (Jinja; SmolLM2's template adds
its default system message), encoded with models-ir/tokenizers/smollm2.json (no BOS added).
Runs: call 0 = prefill of the prompt at offset 0, calls 1..31 = S=1 greedy decode steps, each fed
the argmax of the previous call; the KV caches are fp16 (the packages' state dtype: K/V are
rounded to fp16 when written, everything else is fp32). EOS is not special: always 32 tokens.

npz keys (i = 0, 1, 2; variant prefix `f16w_` = fp16-rounded weights, `i8w_` = int8-dequantized):
  n_prompts, n_decode                          scalars (3, 32)
  p{i}_text_utf8                               uint8, the user message
  p{i}_prompt_utf8                             uint8, the rendered prompt
  p{i}_prompt_ids                              int32 [P]
  {v}p{i}_ids                                  int32 [32]  greedy ids
  {v}p{i}_prefill_logits                       float32 [P, 49152]  all prefill rows
  {v}p{i}_prefill_last_logits                  float32 [49152]
  {v}p{i}_top2_ids / {v}p{i}_top2_values       [32, 2]  top-2 of the row that picked token j
  {v}p{i}_top2_gap                             float32 [32]  top1 - top2 logit at each generated position
  {v}p{i}_text_utf8                            uint8, the 32 ids decoded (specials kept)
  i8w_p{i}_tf_argmax                           int32 [32]  int8-weight torch, teacher-forced on the
                                               f16w ids (one prefill over prompt + 32 ids): the
                                               torch-side counterpart of check_smollm2.py's int8 check

Second file, models-ir/large/smollm2-135m_reference3_mirror.npz (--mirror-out): the prefill logits
p{i}_prefill_logits float32 [P, 49152] of a "package mirror" -- the fp16-weight module changed to
compute what the converted program computes where the two differ: the RoPE cos/sin tables
rounded to fp16. It tells the package's own deviation from the torch module apart from forge-ir's
(tools/NOTES.md).
"""

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import convert_smollm2 as cs  # noqa: E402
import stateful_llama as sl  # noqa: E402

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain what a CPU cache is in one sentence.",
]
N_DECODE = 32
LARGE = os.path.join(ROOT, "models-ir", "large")
TOKENIZER = os.path.join(ROOT, "models-ir", "tokenizers", "smollm2.json")
INT8_PKG = os.path.join(LARGE, "smollm2-135m-int8.mlpackage")
OUT = os.path.join(LARGE, "smollm2-135m_reference3.npz")
MIRROR_OUT = os.path.join(LARGE, "smollm2-135m_reference3_mirror.npz")

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def render_chat(template, user):
    """The GGUF's Jinja chat template, rendered as transformers does (sandboxed, trim_blocks)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=[{"role": "user", "content": user}],
                                            add_generation_prompt=True)


def greedy(model, prompt_ids, n_tokens):
    """fp16 caches; returns (prefill logits [P,V], list of last-row logits per call, ids)."""
    c = model.spec
    model.reset_caches(torch.float16)
    ids, rows, prefill = list(prompt_ids), [], None
    picked, start = [], 0
    for k in range(n_tokens):
        logits = sl.torch_call(model, sl.make_inputs(ids, start, c.ctx)).numpy().astype(np.float32)[0]
        if k == 0:
            prefill = logits.copy()
        rows.append(logits[-1])
        nxt = int(np.argmax(logits[-1]))
        picked.append(nxt)
        start += len(ids)
        ids = [nxt]
    return prefill, rows, picked


def teacher_forced_argmax(model, prompt_ids, gen_ids):
    """One prefill over prompt + gen_ids; argmax of the rows that predict gen_ids[0..]."""
    model.reset_caches(torch.float16)
    seq = list(prompt_ids) + list(gen_ids)
    logits = sl.torch_call(model, sl.make_inputs(seq, 0, model.spec.ctx)).numpy()[0]
    p = len(prompt_ids)
    return np.argmax(logits[p - 1: p - 1 + len(gen_ids)], axis=-1).astype(np.int32)


def package_mirror(model):
    """The fp16-weight module with the RoPE cos/sin tables rounded to fp16, as the converted
    program holds them. (The RMSNorm needs no mirroring: stateful_llama.RMSNorm is written so that
    it converts exactly; with F.rms_norm, coremltools 9's lowering added eps unscaled.)"""
    model.cos_table = model.cos_table.half().float()
    model.sin_table = model.sin_table.half().float()
    return model


def prefill_logits(model, ids):
    model.reset_caches(torch.float16)
    return sl.torch_call(model, sl.make_inputs(list(ids), 0, model.spec.ctx)).numpy().astype(np.float32)[0]


def top2(row):
    idx = np.argsort(-row)[:2]
    return idx.astype(np.int32), row[idx].astype(np.float32)


def utf8(s):
    return np.frombuffer(s.encode("utf-8"), dtype=np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--mirror-out", default=MIRROR_OUT)
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--int8-package", default=INT8_PKG)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    from tokenizers import Tokenizer

    meta, tok, tensors = cs.load_gguf(cs.find_gguf())
    tk = Tokenizer.from_file(args.tokenizer)
    data = {"n_prompts": np.int32(len(PROMPTS)), "n_decode": np.int32(N_DECODE)}
    prompts = []
    for i, text in enumerate(PROMPTS):
        rendered = render_chat(tok["chat_template"], text)
        ids = tk.encode(rendered, add_special_tokens=False).ids
        assert tk.decode(ids, skip_special_tokens=False) == rendered
        prompts.append(ids)
        data[f"p{i}_text_utf8"] = utf8(text)
        data[f"p{i}_prompt_utf8"] = utf8(rendered)
        data[f"p{i}_prompt_ids"] = np.asarray(ids, dtype=np.int32)
        log(f"prompt {i}: {len(ids)} ids {ids}")

    spec = cs.spec_for(meta, cs.CTX_LARGE)
    m16 = cs.stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    m8 = cs.stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    t = time.time()
    used = cs.apply_package_weights(m8, args.int8_package)
    log(f"int8 weights read back from {args.int8_package}: {len(used)} tensors in {time.time() - t:.0f}s")

    for prefix, model in (("f16w_", m16), ("i8w_", m8)):
        for i, ids in enumerate(prompts):
            t = time.time()
            prefill, rows, picked = greedy(model, ids, N_DECODE)
            t2 = [top2(r) for r in rows]
            k = f"{prefix}p{i}_"
            data[k + "ids"] = np.asarray(picked, dtype=np.int32)
            data[k + "prefill_logits"] = prefill
            data[k + "prefill_last_logits"] = prefill[-1].copy()
            data[k + "top2_ids"] = np.stack([a for a, _ in t2])
            data[k + "top2_values"] = np.stack([b for _, b in t2])
            data[k + "top2_gap"] = (data[k + "top2_values"][:, 0] - data[k + "top2_values"][:, 1]).astype(np.float32)
            text = tk.decode(picked, skip_special_tokens=False)
            data[k + "text_utf8"] = utf8(text)
            log(f"{prefix}p{i} ({time.time() - t:.0f}s): min top-2 gap {data[k + 'top2_gap'].min():.4f} "
                f"at {int(data[k + 'top2_gap'].argmin())}; {text!r}")
    for i, ids in enumerate(prompts):
        tf = teacher_forced_argmax(m8, ids, data[f"f16w_p{i}_ids"])
        data[f"i8w_p{i}_tf_argmax"] = tf
        agree = float((tf == data[f"f16w_p{i}_ids"]).mean())
        same = bool((data[f"i8w_p{i}_ids"] == data[f"f16w_p{i}_ids"]).all())
        d = float(np.abs(data[f"i8w_p{i}_prefill_logits"] - data[f"f16w_p{i}_prefill_logits"]).max())
        log(f"p{i}: int8-weight torch greedy ids == fp16-weight ids: {same}; teacher-forced top-1 "
            f"agreement {agree * 100:.1f}%; prefill max|int8w - f16w| {d:.3f}")
    np.savez_compressed(args.out, **data)
    log(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB)")

    mirror = package_mirror(m16)
    md = {}
    for i, ids in enumerate(prompts):
        md[f"p{i}_prefill_logits"] = prefill_logits(mirror, ids)
        d = np.abs(md[f"p{i}_prefill_logits"] - data[f"f16w_p{i}_prefill_logits"]).max(-1)
        log(f"p{i}: package mirror vs torch module prefill max|diff| {d.max():.4f} (row {int(d.argmax())}), "
            f"last row {d[-1]:.4f}")
    np.savez_compressed(args.mirror_out, **md)
    log(f"wrote {args.mirror_out} ({os.path.getsize(args.mirror_out) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
