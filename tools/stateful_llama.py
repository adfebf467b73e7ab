"""Config-driven stateful Llama decoder: the tiny fixture's wrapper (tools/tiny_llama.py)
generalised to real model sizes (used by tools/convert_smollm2.py).

Same contract and the same traced op structure as ``tiny_llama.TinyLlama(kv_write="scatter")``:

  inputs   input_ids [1,S] int32, causal_mask [1,1,S,CTX] fp16 additive (0 / -1e4),
           position_ids [1,S] int32, cache_offset [1] int32
  states   key_cache_{i} / value_cache_{i} fp16 [1, n_kv, CTX, head_dim] (registered buffers)
  output   logits [1,S,vocab]

KV write: ``cache.index_copy_(2, cache_offset + arange(S), k)`` -> MIL ``scatter`` through
``tiny_llama.register_index_copy_converter()`` (static window, no run-time end index).
Attention runs over the whole CTX window with the additive mask.

Differences from the tiny module: sizes / eps / rope theta come from a ``LlamaSpec``, and the
lm_head can be tied to the embedding table (``tie_embeddings=True``: logits =
``h @ embed_tokens.weight.T``, no separate lm_head parameter).
All shape arithmetic in the traced code uses Python ints (see NOTES.md: numpy >= 2.4 breaks
coremltools 9.0 on traced ``x.shape[-1] // 2``).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tiny_llama import register_index_copy_converter, torch_call  # noqa: F401  (re-exported)

MASK_NEG = -1e4


@dataclass(frozen=True)
class LlamaSpec:
    vocab: int
    hidden: int
    n_heads: int
    n_kv: int
    head_dim: int
    inter: int
    n_layers: int
    ctx: int
    eps: float
    rope_theta: float
    tie_embeddings: bool = True


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.dim = int(dim)
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # x / sqrt(mean(x^2) + eps), written so that it converts exactly and stays fp16-safe.
        # SmolLM2's residual stream reaches |x| ~ 2.5e4, so the tiny fixture's (x * x).mean()
        # overflows fp16 (x^2 > 65504 from |x| > 256, from layer 2 on). Dividing by m = max|x|
        # first keeps every square <= 1; eps is scaled to match: (eps / m) / m (underflows to 0 in
        # fp16 exactly where it is negligible). The same math as F.rms_norm; coremltools 9's own
        # aten::rms_norm converter also divides by max|x| but adds eps unscaled, which shrinks
        # the norms of large rows (up to 0.3% on SmolLM2's first token) so the package no longer
        # computes this module. The clamp keeps an all-zero row finite.
        m = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4)
        y = x / m
        ms = (y * y).mean(dim=-1, keepdim=True) + (self.eps / m) / m
        return y * torch.rsqrt(ms) * self.weight


class Layer(nn.Module):
    def __init__(self, c: LlamaSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.q_proj = nn.Linear(c.hidden, c.n_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.n_kv * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.n_kv * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.n_heads * c.head_dim, c.hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.gate_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=False)


class StatefulLlama(nn.Module):
    def __init__(self, spec: LlamaSpec):
        super().__init__()
        self.spec = spec
        c = spec
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.n_layers)])
        self.norm = RMSNorm(c.hidden, c.eps)
        if not c.tie_embeddings:
            self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)
        # RoPE as cos/sin tables [CTX, head_dim] computed once in float64 and gathered by
        # position: an fp16 package then holds the tables rounded to fp16 (error <= 2^-11)
        # instead of computing position * inv_freq in fp16, whose angle error grows with the
        # position (~1 rad near 2048, 0.07 on SmolLM2's logits already at position 9).
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim))
        angles = torch.arange(c.ctx, dtype=torch.float64).unsqueeze(-1) * inv_freq  # [CTX, hd/2]
        emb = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos_table", emb.cos().to(torch.float32), persistent=False)
        self.register_buffer("sin_table", emb.sin().to(torch.float32), persistent=False)
        self.reset_caches(torch.float16)

    # ---- weights / caches ------------------------------------------------------------------
    def round_weights_to_fp16(self):
        """Round every parameter to fp16 precision (kept in fp32) -- what the fp16 package stores."""
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(p.half().float())
        return self

    def reset_caches(self, dtype=torch.float16):
        c = self.spec
        for i in range(c.n_layers):
            for kind in ("key", "value"):
                name = f"{kind}_cache_{i}"
                buf = torch.zeros(1, c.n_kv, c.ctx, c.head_dim, dtype=dtype)
                if hasattr(self, name):
                    setattr(self, name, buf)
                else:
                    self.register_buffer(name, buf)

    # ---- forward ---------------------------------------------------------------------------
    def forward(self, input_ids, causal_mask, position_ids, cache_offset):
        c = self.spec
        half = c.head_dim // 2  # Python int
        rep = c.n_heads // c.n_kv
        scale = 1.0 / math.sqrt(c.head_dim)
        s = input_ids.shape[1]
        h = self.embed_tokens(input_ids)  # [1,S,hidden]
        cos = self.cos_table[position_ids[0]].unsqueeze(0).unsqueeze(0)  # [1,1,S,hd]
        sin = self.sin_table[position_ids[0]].unsqueeze(0).unsqueeze(0)
        mask = causal_mask.to(torch.float32)
        idx = cache_offset.to(torch.int64) + torch.arange(s, dtype=torch.int64)

        def rotate_half(x):
            return torch.cat([-x[..., half:], x[..., :half]], dim=-1)

        for i, layer in enumerate(self.layers):
            kc = getattr(self, f"key_cache_{i}")
            vc = getattr(self, f"value_cache_{i}")
            x = layer.input_layernorm(h)
            q = layer.q_proj(x).view(1, -1, c.n_heads, c.head_dim).transpose(1, 2)
            k = layer.k_proj(x).view(1, -1, c.n_kv, c.head_dim).transpose(1, 2)
            v = layer.v_proj(x).view(1, -1, c.n_kv, c.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            kc.index_copy_(2, idx, k.to(kc.dtype))
            vc.index_copy_(2, idx, v.to(vc.dtype))
            keys = kc.to(torch.float32)
            vals = vc.to(torch.float32)
            keys = keys.unsqueeze(2).expand(1, c.n_kv, rep, c.ctx, c.head_dim).reshape(1, c.n_heads, c.ctx, c.head_dim)
            vals = vals.unsqueeze(2).expand(1, c.n_kv, rep, c.ctx, c.head_dim).reshape(1, c.n_heads, c.ctx, c.head_dim)
            scores = torch.matmul(q, keys.transpose(2, 3)) * scale + mask
            probs = torch.softmax(scores, dim=-1)
            attn = torch.matmul(probs, vals)
            attn = attn.transpose(1, 2).reshape(1, -1, c.n_heads * c.head_dim)
            h = h + layer.o_proj(attn)
            x = layer.post_attention_layernorm(h)
            h = h + layer.down_proj(F.silu(layer.gate_proj(x)) * layer.up_proj(x))
        h = self.norm(h)
        if c.tie_embeddings:
            return F.linear(h, self.embed_tokens.weight)
        return self.lm_head(h)


def make_inputs(token_ids, start, ctx):
    """Model inputs (numpy, exact model dtypes) for a call writing tokens at [start, start+S)."""
    s = len(token_ids)
    input_ids = np.asarray(token_ids, dtype=np.int32).reshape(1, s)
    pos = np.arange(start, start + s, dtype=np.int32).reshape(1, s)
    mask = np.full((1, 1, s, ctx), MASK_NEG, dtype=np.float16)
    for r in range(s):
        mask[0, 0, r, : start + r + 1] = 0.0
    return {
        "input_ids": input_ids,
        "causal_mask": mask,
        "position_ids": pos,
        "cache_offset": np.array([start], dtype=np.int32),
    }


def convert(model, example_tokens, *, ct, skip_model_load=True):
    """Trace ``model`` (fp16 caches) on a prefill of ``example_tokens`` and convert it with the
    tiny fixture's recipe: S = one RangeDim(1, CTX, default=1) for every S dim, fp16 states,
    iOS18, compute precision FLOAT16, fp16 logits output."""
    c = model.spec
    register_index_copy_converter()
    model.reset_caches(torch.float16)
    ex = make_inputs(example_tokens, 0, c.ctx)
    ex_t = tuple(torch.from_numpy(ex[k]) for k in ("input_ids", "causal_mask", "position_ids", "cache_offset"))
    with torch.no_grad():
        traced = torch.jit.trace(model, ex_t, check_trace=False)
    model.reset_caches(torch.float16)
    S = ct.RangeDim(1, c.ctx, default=1, symbol="S")
    inputs = [
        ct.TensorType(name="input_ids", shape=(1, S), dtype=np.int32),
        ct.TensorType(name="causal_mask", shape=(1, 1, S, c.ctx), dtype=np.float16),
        ct.TensorType(name="position_ids", shape=(1, S), dtype=np.int32),
        ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32),
    ]
    states = [
        ct.StateType(
            wrapped_type=ct.TensorType(shape=(1, c.n_kv, c.ctx, c.head_dim), dtype=np.float16),
            name=f"{kind}_cache_{i}",
        )
        for i in range(c.n_layers)
        for kind in ("key", "value")
    ]
    return ct.convert(
        traced,
        inputs=inputs,
        outputs=[ct.TensorType(name="logits", dtype=np.float16)],
        states=states,
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS18,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=skip_model_load,
    )


def greedy_run(model, prompt_ids, n_decode):
    """fp32 caches; call 0 = prefill of prompt_ids at offset 0, calls 1..n_decode = S=1 greedy
    decode steps. Returns (data dict in the call{k}_* key format, list of argmax ids per call)."""
    c = model.spec
    model.reset_caches(torch.float32)
    data = {}
    picked = []
    ids = list(prompt_ids)
    start = 0
    for k in range(n_decode + 1):
        inp = make_inputs(ids, start, c.ctx)
        logits = torch_call(model, inp).numpy().astype(np.float32)
        for key, val in inp.items():
            data[f"call{k}_{key}"] = val
        data[f"call{k}_logits"] = logits
        nxt = int(np.argmax(logits[0, -1]))
        picked.append(nxt)
        start += len(ids)
        ids = [nxt]
    return data, picked
