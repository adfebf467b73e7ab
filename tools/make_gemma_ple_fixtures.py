#!/usr/bin/env python3
"""Gemma-style decoders with a per-layer embedding (PLE) table, in the two forms public Core ML
conversions of Gemma 3n / Gemma 4 small models use (issue #17), with torch references.

Usage:  tools/.venv/bin/python tools/make_gemma_ple_fixtures.py [--out models-ir/gemma]
        tools/.venv/bin/python tools/make_gemma_ple_fixtures.py --bench bench/.work/gemma_ple   # >= 500 MB table

Both packages share one seeded module (fp16-rounded weights) and one PLE table:

  gemma_ple_table.mlpackage  (table mode, iOS 26 target = specification 10)
      inputs input_ids [1,1] int32, causal_mask [1,1,1,CTX] fp16, position_ids [1,1] int32,
      cache_offset [1] int32, ple_table [VOCAB, LD*L] int8, ple_scale [VOCAB] fp32; the graph
      gathers the token's table row and scale and computes q * s * sqrt(LD) (an int8 graph
      input needs the iOS 26 opset in coremltools 9).
  gemma_ple_table_ios18.mlpackage  (table mode, iOS 18 target)
      the same with ple_table widened to int32 (an iOS 18 input cannot be int8); coremltools'
      default pipeline then runs add_int16_cast, which casts the whole int32 table input to
      int16 in front of its gather with no range check (what `diagnose` flags).
  gemma_ple_provider.mlpackage  (provider mode, iOS 18 target)
      per_layer_raw [1,1,LD*L] fp16 instead of the table inputs: the host feeds q * s for the
      token (the dequantized row); the graph multiplies by sqrt(LD).

The table files: ple_table.npy (int8 [VOCAB, LD*L]), ple_scale.npy (fp32 [VOCAB], per row),
ple_table_int4.bin (packed int4, low nibble first, [VOCAB, LD*L]) with ple_scale_blocks.npy
(fp32 [VOCAB, LD*L/16]: per block of 16) for the provider's int4 path, and the contract files
gemma_ple_table.json / gemma_ple_provider.json / gemma_ple_provider_int4.json.

Decoder (Gemma 3 / 3n layout, small): embedding * sqrt(HIDDEN); per layer RMSNorm (1 + w) ->
GQA attention with RoPE -> post-attention norm -> residual; pre-FFN norm -> GeGLU (tanh gelu) ->
post-FFN norm -> residual; then the per-layer input: gelu(W_gate h) * ple[l] -> W_proj -> norm
-> residual. Final norm, tied LM head (the embedding), softcap tanh(x / 30) * 30. Fixed S = 1,
per-layer fp16 KV states written at cache_offset.

References (reference/<name>.json): the greedy ids torch picks over a token-by-token prefill of
the prompt and 16 decode steps (fp32 compute, the package's fp16 weights), each step's top-1 /
top-2 margin (>= MIN_MARGIN), and each call's last-row logits (<name>_logits.npy). Table mode
and provider mode are the same function (provider: q * s rounded to fp16 on the way in), so
both get their own torch run.
"""

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import coremltools as ct  # noqa: E402

import make_recipe_fixtures as rf  # noqa: E402

SOFTCAP = 30.0
N_DECODE = rf.N_DECODE
MIN_MARGIN = 0.25
INT4_BLOCK = 16


class Sizes:
    def __init__(self, vocab=512, hidden=64, n_heads=2, n_kv=1, head_dim=32, inter=128, layers=2, ld=16, ctx=32):
        self.vocab, self.hidden, self.n_heads, self.n_kv, self.head_dim = vocab, hidden, n_heads, n_kv, head_dim
        self.inter, self.layers, self.ld, self.ctx = inter, layers, ld, ctx

    @property
    def ple_cols(self):
        return self.ld * self.layers


class GemmaNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * (1.0 + self.weight)


class Block(nn.Module):
    def __init__(self, z):
        super().__init__()
        self.input_layernorm = GemmaNorm(z.hidden)
        self.q_proj = nn.Linear(z.hidden, z.n_heads * z.head_dim, bias=False)
        self.k_proj = nn.Linear(z.hidden, z.n_kv * z.head_dim, bias=False)
        self.v_proj = nn.Linear(z.hidden, z.n_kv * z.head_dim, bias=False)
        self.o_proj = nn.Linear(z.n_heads * z.head_dim, z.hidden, bias=False)
        self.post_attention_layernorm = GemmaNorm(z.hidden)
        self.pre_feedforward_layernorm = GemmaNorm(z.hidden)
        self.gate_proj = nn.Linear(z.hidden, z.inter, bias=False)
        self.up_proj = nn.Linear(z.hidden, z.inter, bias=False)
        self.down_proj = nn.Linear(z.inter, z.hidden, bias=False)
        self.post_feedforward_layernorm = GemmaNorm(z.hidden)
        # Gemma 3n's per-layer input: gate from the hidden state, times the layer's PLE slice.
        self.per_layer_input_gate = nn.Linear(z.hidden, z.ld, bias=False)
        self.per_layer_projection = nn.Linear(z.ld, z.hidden, bias=False)
        self.post_per_layer_input_norm = GemmaNorm(z.hidden)


class GemmaPLE(nn.Module):
    """mode "table": forward(input_ids, causal_mask, position_ids, cache_offset, ple_table, ple_scale);
    mode "provider": forward(input_ids, causal_mask, position_ids, cache_offset, per_layer_raw)."""

    def __init__(self, z, mode):
        super().__init__()
        self.z, self.mode = z, mode
        self.embed_tokens = nn.Embedding(z.vocab, z.hidden)
        self.layers = nn.ModuleList([Block(z) for _ in range(z.layers)])
        self.norm = GemmaNorm(z.hidden)
        inv = 1.0 / (10000.0 ** (torch.arange(0, z.head_dim, 2, dtype=torch.float64) / z.head_dim))
        ang = torch.arange(z.ctx, dtype=torch.float64).unsqueeze(-1) * inv
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos_table", emb.cos().float(), persistent=False)
        self.register_buffer("sin_table", emb.sin().float(), persistent=False)
        for i in range(z.layers):
            self.register_buffer(f"key_cache_{i}", torch.zeros(1, z.n_kv, z.ctx, z.head_dim, dtype=torch.float16))
            self.register_buffer(f"value_cache_{i}", torch.zeros(1, z.n_kv, z.ctx, z.head_dim, dtype=torch.float16))

    def reset(self, dtype=torch.float16):
        for name, b in list(self.named_buffers()):
            if "cache" in name:
                setattr(self, name, torch.zeros(b.shape, dtype=dtype))

    def forward(self, input_ids, causal_mask, position_ids, cache_offset, *ple):
        z = self.z
        if self.mode == "table":
            ple_table, ple_scale = ple
            q = ple_table[input_ids[0]].to(torch.float32)            # [1, LD*L] int8 rows -> float
            s = ple_scale[input_ids[0]].to(torch.float32)            # [1]
            per_layer = (q * s.unsqueeze(-1)).unsqueeze(0) * math.sqrt(z.ld)   # [1, 1, LD*L]
        else:
            (raw,) = ple
            per_layer = raw.to(torch.float32) * math.sqrt(z.ld)
        per_layer = per_layer.view(1, 1, z.layers, z.ld)
        h = self.embed_tokens(input_ids) * math.sqrt(z.hidden)
        cos = self.cos_table[position_ids[0]].unsqueeze(0).unsqueeze(0)
        sin = self.sin_table[position_ids[0]].unsqueeze(0).unsqueeze(0)
        mask = causal_mask.to(torch.float32)
        idx = cache_offset.to(torch.int64) + torch.arange(1, dtype=torch.int64)
        rep = z.n_heads // z.n_kv
        half = z.head_dim // 2

        def rotate(x):
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

        for i, layer in enumerate(self.layers):
            x = layer.input_layernorm(h)
            qh = rotate(layer.q_proj(x).view(1, -1, z.n_heads, z.head_dim).transpose(1, 2))
            kh = rotate(layer.k_proj(x).view(1, -1, z.n_kv, z.head_dim).transpose(1, 2))
            vh = layer.v_proj(x).view(1, -1, z.n_kv, z.head_dim).transpose(1, 2)
            kc, vc = getattr(self, f"key_cache_{i}"), getattr(self, f"value_cache_{i}")
            kc.index_copy_(2, idx, kh.to(kc.dtype))
            vc.index_copy_(2, idx, vh.to(vc.dtype))
            keys = kc.to(torch.float32).repeat_interleave(rep, dim=1)
            vals = vc.to(torch.float32).repeat_interleave(rep, dim=1)
            scores = torch.matmul(qh, keys.transpose(2, 3)) / math.sqrt(z.head_dim) + mask
            attn = torch.matmul(torch.softmax(scores, dim=-1), vals)
            attn = attn.transpose(1, 2).reshape(1, -1, z.n_heads * z.head_dim)
            h = h + layer.post_attention_layernorm(layer.o_proj(attn))
            x = layer.pre_feedforward_layernorm(h)
            mlp = layer.down_proj(F.gelu(layer.gate_proj(x), approximate="tanh") * layer.up_proj(x))
            h = h + layer.post_feedforward_layernorm(mlp)
            g = F.gelu(layer.per_layer_input_gate(h), approximate="tanh") * per_layer[:, :, i, :]
            h = h + layer.post_per_layer_input_norm(layer.per_layer_projection(g))
        logits = torch.matmul(self.norm(h), self.embed_tokens.weight.t())
        return torch.tanh(logits / SOFTCAP) * SOFTCAP


def make_weights(z, seed):
    torch.manual_seed(0)
    m = GemmaPLE(z, "table")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(z.hidden) * 0.6)
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
        # The tied head: scale the final norm so logits spread (decisive margins under the cap).
        m.norm.weight.copy_(2.0 + 0.1 * torch.randn(z.hidden, generator=g))
        for p in m.parameters():
            p.copy_(p.half().float())
    return m.state_dict()


def make_table(z, seed):
    """int8 rows q in [-127, 127] and one fp32 scale per row (s = max|row| / 127 of a seeded
    N(0, 1) table, so q * s is the dequantized row)."""
    rng = np.random.default_rng(seed)
    if z.vocab * z.ple_cols > 64 << 20:
        # Large (benchmark) tables: random bytes in chunks, scales seeded alike.
        q = np.empty((z.vocab, z.ple_cols), dtype=np.int8)
        for r in range(0, z.vocab, 4096):
            q[r:r + 4096] = rng.integers(-127, 128, size=(min(4096, z.vocab - r), z.ple_cols), dtype=np.int8)
        s = (rng.uniform(0.5, 1.5, size=z.vocab) / 127.0).astype(np.float32)
        return q, s
    w = rng.standard_normal((z.vocab, z.ple_cols)).astype(np.float32)
    s = (np.abs(w).max(axis=1) / 127.0).astype(np.float32)
    q = np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int8)
    return q, s


def int4_table(w):
    """Per-block(16) symmetric int4 of the dequantized rows: (packed bytes, scales [V, C/16])."""
    v, c = w.shape
    blocks = w.reshape(v, c // INT4_BLOCK, INT4_BLOCK)
    s = (np.abs(blocks).max(axis=2) / 7.0).astype(np.float32)
    s[s == 0] = 1.0
    q = np.clip(np.round(blocks / s[:, :, None]), -8, 7).astype(np.int8).reshape(v, c)
    u = (q.astype(np.int16) & 0xF).astype(np.uint8)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    return packed, s, q


def seed_inputs(z, tok, past, mask_dtype=torch.float16):
    m = torch.full((1, 1, 1, z.ctx), -1e4)
    m[0, 0, 0, : past + 1] = 0
    return (torch.tensor([[tok]], dtype=torch.int32), m.to(mask_dtype),
            torch.tensor([[past]], dtype=torch.int32), torch.tensor([past], dtype=torch.int32))


def ct_inputs(z):
    return [ct.TensorType(name="input_ids", shape=(1, 1), dtype=np.int32),
            ct.TensorType(name="causal_mask", shape=(1, 1, 1, z.ctx), dtype=np.float16),
            ct.TensorType(name="position_ids", shape=(1, 1), dtype=np.int32),
            ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32)]


def ct_states(z):
    return [ct.StateType(wrapped_type=ct.TensorType(shape=(1, z.n_kv, z.ctx, z.head_dim), dtype=np.float16), name=f"{k}_cache_{i}")
            for i in range(z.layers) for k in ("key", "value")]


def convert(model, z, extra_inputs, example_extra, target):
    model.reset(torch.float16)
    traced = torch.jit.trace(model, seed_inputs(z, 0, 0) + example_extra)
    model.reset(torch.float16)
    ml = ct.convert(traced, inputs=ct_inputs(z) + extra_inputs, states=ct_states(z),
                    outputs=[ct.TensorType(name="logits", dtype=np.float16)],
                    minimum_deployment_target=target, skip_model_load=True)
    return rf.fix_metadata(ml)


def greedy_run(model, z, prompt, extra_for):
    """Token-by-token prefill of `prompt` then N_DECODE decode steps; extra_for(tok) -> the
    table or provider inputs of the call. Returns (ids, margins, last-row logits [17, V])."""
    model.reset(torch.float32)
    past = 0
    logits = None
    for t in prompt:
        with torch.no_grad():
            logits = model(*seed_inputs(z, t, past, torch.float32), *extra_for(t))[0, -1].double().numpy()
        past += 1
    ids, margins, rows = [], [], []
    for k in range(N_DECODE + 1):
        order = np.argsort(-logits)
        ids.append(int(order[0]))
        margins.append(float(logits[order[0]] - logits[order[1]]))
        rows.append(logits.astype(np.float32))
        if k == N_DECODE:
            break
        with torch.no_grad():
            logits = model(*seed_inputs(z, ids[-1], past, torch.float32), *extra_for(ids[-1]))[0, -1].double().numpy()
        past += 1
    return ids, margins, np.stack(rows)


def decisive(run, vocab, seed, plen=6, tries=300, min_distinct=6):
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(tries):
        prompt = [int(x) for x in rng.integers(0, vocab, plen)]
        ids, margins, rows = run(prompt)
        if len(set(ids)) < min_distinct:
            continue
        if best is None or min(margins) > min(best[2]):
            best = (prompt, ids, margins, rows)
        if min(margins) >= MIN_MARGIN:
            return prompt, ids, margins, rows
    raise SystemExit(f"no decisive prompt (best min margin {min(best[2]) if best else None})")


def write_json(path, obj):
    rf.write_json(path, obj)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "models-ir", "gemma"))
    ap.add_argument("--bench", default=None, help="write a large (>= 500 MB table) table-mode / provider-mode pair here instead")
    a = ap.parse_args()
    if a.bench:
        return make_bench(a.bench)
    out = a.out
    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    from tiny_llama import register_index_copy_converter
    register_index_copy_converter()
    z = Sizes()
    sd = make_weights(z, seed=17)
    q, s = make_table(z, seed=18)
    np.save(os.path.join(out, "ple_table.npy"), q)
    np.save(os.path.join(out, "ple_scale.npy"), s)
    packed, s4, q4 = int4_table(q.astype(np.float32) * s[:, None])
    packed.tofile(os.path.join(out, "ple_table_int4.bin"))
    np.save(os.path.join(out, "ple_scale_blocks.npy"), s4)

    table_model = GemmaPLE(z, "table")
    table_model.load_state_dict(sd, strict=False)
    table_model.eval()
    prov_model = GemmaPLE(z, "provider")
    prov_model.load_state_dict(sd, strict=False)
    prov_model.eval()

    qt, st = torch.from_numpy(q), torch.from_numpy(s)
    raw16 = (q.astype(np.float32) * s[:, None]).astype(np.float16).astype(np.float32)
    raw4 = (q4.astype(np.float32).reshape(z.vocab, -1, INT4_BLOCK) * s4[:, :, None]).reshape(z.vocab, -1)
    raw4 = raw4.astype(np.float16).astype(np.float32)

    def table_extra(t):
        return (qt, st)

    def prov_extra(rows):
        return lambda t: (torch.from_numpy(rows[t]).view(1, 1, -1),)

    prompt, ids, margins, rows = decisive(lambda p: greedy_run(table_model, z, p, table_extra), z.vocab, seed=7)
    refs = {"gemma_ple_table": (ids, margins, rows)}
    refs["gemma_ple_provider"] = greedy_run(prov_model, z, prompt, prov_extra(raw16))
    refs["gemma_ple_provider_int4"] = greedy_run(prov_model, z, prompt, prov_extra(raw4))
    for name, (i2, m2, _) in refs.items():
        print(f"{name}: ids {i2} min margin {min(m2):.3f}")

    # Table mode, iOS 26 (int8 input).
    ml = convert(table_model, z, [ct.TensorType(name="ple_table", shape=q.shape, dtype=np.int8),
                                  ct.TensorType(name="ple_scale", shape=s.shape, dtype=np.float32)],
                 (qt, st), ct.target.iOS26)
    rf.save(ml, os.path.join(out, "gemma_ple_table.mlpackage"))
    # Table mode, iOS 18 (the table widened to int32).
    ml = convert(table_model, z, [ct.TensorType(name="ple_table", shape=q.shape, dtype=np.int32),
                                  ct.TensorType(name="ple_scale", shape=s.shape, dtype=np.float32)],
                 (qt.to(torch.int32), st), ct.target.iOS18)
    rf.save(ml, os.path.join(out, "gemma_ple_table_ios18.mlpackage"))
    # Provider mode.
    ml = convert(prov_model, z, [ct.TensorType(name="per_layer_raw", shape=(1, 1, z.ple_cols), dtype=np.float16)],
                 (torch.zeros(1, 1, z.ple_cols),), ct.target.iOS18)
    rf.save(ml, os.path.join(out, "gemma_ple_provider.mlpackage"))

    sizes = {"vocab": z.vocab, "hidden": z.hidden, "heads": z.n_heads, "kv_heads": z.n_kv, "head_dim": z.head_dim,
             "intermediate": z.inter, "layers": z.layers, "ld": z.ld, "ctx": z.ctx, "softcap": SOFTCAP}
    shape = f"{z.vocab},{z.ple_cols}"
    write_json(os.path.join(out, "gemma_ple_table.json"),
               {"static_inputs": {"ple_table": "ple_table.npy", "ple_scale": "ple_scale.npy"}})
    write_json(os.path.join(out, "gemma_ple_provider.json"),
               {"provider": {"input": "per_layer_raw", "table": "ple_table.npy", "scale": "ple_scale.npy",
                             "rows_by": "input_ids"}})
    write_json(os.path.join(out, "gemma_ple_provider_int4.json"),
               {"provider": {"input": "per_layer_raw", "table": f"ple_table_int4.bin:int4:{shape}",
                             "scale": "ple_scale_blocks.npy", "rows_by": "input_ids"}})
    for name, (i2, m2, rows2) in refs.items():
        np.save(os.path.join(out, "reference", name + "_logits.npy"), rows2)
        write_json(os.path.join(out, "reference", name + ".json"), {
            "prompt_ids": prompt, "prefill": "token by token (the graph is fixed at S = 1)", "decode_steps": N_DECODE,
            "greedy_ids": i2, "margins": [round(m, 4) for m in m2], "min_margin": round(min(m2), 4), "sizes": sizes,
            "reference": "torch 2.7 fp32 compute with the package's fp16 weights, fp32 KV cache"
                         + ("; per_layer_raw = q * s rounded to fp16" if "provider" in name else "")
                         + ("; int4 rows, per-block(16) scales" if "int4" in name else ""),
        })


def make_bench(out):
    """A benchmark pair with a >= 500 MB int8 table (vocab 65536 x 8192 columns = 512 MiB), no
    references (bench/ple_memory.sh measures memory and speed only)."""
    os.makedirs(out, exist_ok=True)
    from tiny_llama import register_index_copy_converter
    register_index_copy_converter()
    z = Sizes(vocab=65536, hidden=256, n_heads=4, n_kv=1, head_dim=64, inter=512, layers=16, ld=512, ctx=256)
    sd = make_weights(z, seed=17)
    q, s = make_table(z, seed=18)
    np.save(os.path.join(out, "ple_scale.npy"), s)
    q.tofile(os.path.join(out, "ple_table.bin"))
    del q
    shape = f"{z.vocab},{z.ple_cols}"
    for mode in ("table", "provider"):
        m = GemmaPLE(z, mode)
        m.load_state_dict(sd, strict=False)
        m.eval()
        if mode == "table":
            small_q = torch.zeros((z.vocab, z.ple_cols), dtype=torch.int8)
            ml = convert(m, z, [ct.TensorType(name="ple_table", shape=(z.vocab, z.ple_cols), dtype=np.int8),
                                ct.TensorType(name="ple_scale", shape=(z.vocab,), dtype=np.float32)],
                         (small_q, torch.from_numpy(s)), ct.target.iOS26)
            del small_q
        else:
            ml = convert(m, z, [ct.TensorType(name="per_layer_raw", shape=(1, 1, z.ple_cols), dtype=np.float16)],
                         (torch.zeros(1, 1, z.ple_cols),), ct.target.iOS18)
        rf.save(ml, os.path.join(out, f"gemma_ple_{mode}.mlpackage"))
    write_json(os.path.join(out, "gemma_ple_table.json"),
               {"static_inputs": {"ple_table": f"ple_table.bin:int8:{shape}", "ple_scale": "ple_scale.npy"}})
    write_json(os.path.join(out, "gemma_ple_provider.json"),
               {"provider": {"input": "per_layer_raw", "table": f"ple_table.bin:int8:{shape}", "scale": "ple_scale.npy",
                             "rows_by": "input_ids"}})
    print(f"wrote {out}: table {z.vocab * z.ple_cols} bytes")


if __name__ == "__main__":
    main()
