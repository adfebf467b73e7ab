#!/usr/bin/env python3
"""A tiny Llama converted exactly as Apple's "On Device Llama 3.1 with Core ML" article does
(machinelearning.apple.com/research/core-ml-on-device-llama, Nov 2024): stacked 5-D KV caches
registered as buffers -> `keyCache` / `valueCache` states [layers, 1, kv_heads, ctx, head_dim],
inputs `inputIds` [1, RangeDim(1..CTX)] and `causalMask` [1, 1, RangeDim(1..CTX), RangeDim(1..CTX)]
(query length and end step are *separate* RangeDims), `past = causalMask.shape[-1] - S`, and the
cache written by slice assignment `keyCache[layer, :, :kv_heads, past:end, :] = k`
(`SliceUpdateKeyValueCache` in the article). The weights are random (seed 0); the architecture
is Llama's (RMSNorm, RoPE, GQA, SwiGLU), written in plain torch so no transformers download is
needed.

Usage:  tools/.venv/bin/python tools/apple_recipe_llama.py [--out models-ir/diag/apple_recipe_llama.mlpackage]
                                                            [--refs models-ir/diag/apple_recipe_llama.refs.npz]

The refs file holds the torch module's logits and caches for a prefill of 5 tokens followed by
two decode calls (S=1), for the numeric tests of forge-ir's passes on this package.
"""

import argparse
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import coremltools as ct  # noqa: E402

from make_fixtures import fix_manifest, fix_metadata  # noqa: E402

warnings.filterwarnings("ignore")

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB, CTX = 2, 32, 4, 2, 8, 64, 64, 16
PROMPT = [3, 17, 42, 5, 9]
DECODE = [11, 60]


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-b, a), dim=-1)


class SliceUpdateKeyValueCache:
    """The article's cache: one [layers, B, kv_heads, ctx, head_dim] tensor per K and V."""

    def __init__(self, shape):
        self.k_cache = torch.zeros(shape, dtype=torch.float32)
        self.v_cache = torch.zeros(shape, dtype=torch.float32)
        self.past_seen_tokens = 0

    def update(self, k, v, layer, end):
        begin = self.past_seen_tokens
        self.k_cache[layer, :, : k.shape[1], begin:end, :] = k
        self.v_cache[layer, :, : v.shape[1], begin:end, :] = v
        return self.k_cache[layer, :, :, :end, :], self.v_cache[layer, :, :, :end, :]


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.q = torch.nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o = torch.nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate = torch.nn.Linear(HIDDEN, FFN, bias=False)
        self.up = torch.nn.Linear(HIDDEN, FFN, bias=False)
        self.down = torch.nn.Linear(FFN, HIDDEN, bias=False)


class StatefulLlama(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.2)
        inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        ang = torch.outer(torch.arange(CTX).float(), inv)
        emb = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos_table", emb.cos(), persistent=False)
        self.register_buffer("sin_table", emb.sin(), persistent=False)
        self.kv_cache = SliceUpdateKeyValueCache((LAYERS, 1, KV_HEADS, CTX, HEAD_DIM))
        self.register_buffer("keyCache", self.kv_cache.k_cache)
        self.register_buffer("valueCache", self.kv_cache.v_cache)

    @torch.no_grad()
    def forward(self, inputIds, causalMask):
        S = inputIds.shape[-1]
        end = causalMask.shape[-1]
        past = end - S
        self.kv_cache.past_seen_tokens = past
        pos = torch.arange(past, end)
        cos = self.cos_table[pos][None, None]
        sin = self.sin_table[pos][None, None]
        h = self.embed(inputIds)
        for i, L in enumerate(self.layers):
            x = L.input_layernorm(h)
            q = L.q(x).view(1, S, HEADS, HEAD_DIM).transpose(1, 2)
            k = L.k(x).view(1, S, KV_HEADS, HEAD_DIM).transpose(1, 2)
            v = L.v(x).view(1, S, KV_HEADS, HEAD_DIM).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k, v = self.kv_cache.update(k, v, i, end)
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causalMask)
            h = h + L.o(a.transpose(1, 2).reshape(1, S, HEADS * HEAD_DIM))
            x = L.post_attention_layernorm(h)
            h = h + L.down(torch.nn.functional.silu(L.gate(x)) * L.up(x))
        return self.lm_head(self.norm(h))


def mask(S, end):
    past = end - S
    m = np.full((1, 1, S, end), -np.inf, dtype=np.float32)
    for i in range(S):
        m[0, 0, i, : past + i + 1] = 0
    return m


def references(model):
    """Logits and caches of the torch module over a prefill and two decode calls (fp32)."""
    model.kv_cache.k_cache.zero_()
    model.kv_cache.v_cache.zero_()
    out = {}
    calls = [PROMPT] + [[t] for t in DECODE]
    end = 0
    for n, ids in enumerate(calls):
        end += len(ids)
        m = mask(len(ids), end)
        logits = model(torch.tensor([ids], dtype=torch.int32), torch.tensor(m))
        out[f"call{n}.inputIds"] = np.array([ids], dtype=np.int32)
        out[f"call{n}.causalMask"] = m.astype(np.float16)
        out[f"call{n}.logits"] = logits.numpy().astype(np.float32)
        out[f"call{n}.keyCache"] = model.kv_cache.k_cache.numpy().copy()
        out[f"call{n}.valueCache"] = model.kv_cache.v_cache.numpy().copy()
    model.kv_cache.k_cache.zero_()
    model.kv_cache.v_cache.zero_()
    return out


def convert(model, path):
    ids = torch.zeros((1, 2), dtype=torch.int32)
    m = torch.zeros((1, 1, 2, 5), dtype=torch.float32)
    traced = torch.jit.trace(model.eval(), [ids, m])
    query_length = ct.RangeDim(lower_bound=1, upper_bound=CTX, default=1)
    end_step_dim = ct.RangeDim(lower_bound=1, upper_bound=CTX, default=1)
    inputs = [
        ct.TensorType(shape=(1, query_length), dtype=np.int32, name="inputIds"),
        ct.TensorType(shape=(1, 1, query_length, end_step_dim), dtype=np.float16, name="causalMask"),
    ]
    shape = (LAYERS, 1, KV_HEADS, CTX, HEAD_DIM)
    states = [
        ct.StateType(wrapped_type=ct.TensorType(shape=shape, dtype=np.float16), name="keyCache"),
        ct.StateType(wrapped_type=ct.TensorType(shape=shape, dtype=np.float16), name="valueCache"),
    ]
    ml = ct.convert(traced, inputs=inputs, outputs=[ct.TensorType(dtype=np.float16, name="logits")], states=states,
                    minimum_deployment_target=ct.target.macOS15, skip_model_load=True)
    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(ml)
    ml.save(path)
    fix_manifest(path, os.path.basename(path))


def main():
    root = os.path.dirname(HERE)
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(root, "models-ir", "diag", "apple_recipe_llama.mlpackage"))
    ap.add_argument("--refs", default=os.path.join(root, "models-ir", "diag", "apple_recipe_llama.refs.npz"))
    args = ap.parse_args()
    model = StatefulLlama()
    refs = references(model)
    convert(model, args.out)
    np.savez_compressed(args.refs, **refs)
    print(f"[apple_recipe_llama] wrote {args.out} and {args.refs}", file=sys.stderr)


if __name__ == "__main__":
    main()
