"""Tiny stateful Llama-style decoder used for the forge-ir fixtures.

2 layers, vocab 256, hidden 64, 4 query heads, 2 KV heads, head_dim 16, RMSNorm, RoPE,
SwiGLU MLP (intermediate 128), untied embeddings, context window CTX = 64.

Per-layer KV caches ``key_cache_{i}`` / ``value_cache_{i}`` are fp16 buffers [1, 2, CTX, 16]
registered on the top-level module (their names are the Core ML state names).

Two KV-write formulations:
  * ``kv_write="scatter"`` (default): ``cache.index_copy_(2, cache_offset + arange(S), k)``.
    coremltools 9.0 has no converter for ``index_copy``; ``register_index_copy_converter()``
    installs one that lowers it to MIL ``scatter(mode="update", axis=2)`` -- a static-window
    write with no run-time end index.
  * ``kv_write="slice"``: ``cache[:, :, off:off+S, :] = k`` -- converts to ``slice_update`` whose
    begin/end vectors are built at run time.

Inputs: input_ids [1,S] int32, causal_mask [1,1,S,CTX] fp16 additive (0 / -1e4),
position_ids [1,S] int32, cache_offset [1] int32. Output: logits [1,S,256].
"""

import math

import numpy as np
import torch
import torch.nn as nn

VOCAB = 256
HIDDEN = 64
N_HEADS = 4
N_KV = 2
HEAD_DIM = 16
INTER = 128
N_LAYERS = 2
CTX = 64
EPS = 1e-5
ROPE_THETA = 10000.0
MASK_NEG = -1e4


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = (x * x).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + EPS) * self.weight


def rotate_half(x):
    # Python-int slice bounds (no traced shape arithmetic).
    x1 = x[..., : HEAD_DIM // 2]
    x2 = x[..., HEAD_DIM // 2 :]
    return torch.cat([-x2, x1], dim=-1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, N_HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, N_KV * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, N_KV * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(N_HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = nn.Linear(INTER, HIDDEN, bias=False)


class TinyLlama(nn.Module):
    def __init__(self, kv_write="scatter", fixed_s=None):
        super().__init__()
        assert kv_write in ("scatter", "slice")
        self.kv_write = kv_write
        self.fixed_s = fixed_s
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(N_LAYERS)])
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        for i in range(N_LAYERS):
            self.register_buffer(f"key_cache_{i}", torch.zeros(1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))
            self.register_buffer(f"value_cache_{i}", torch.zeros(1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))

    # ---- weights -------------------------------------------------------------------------
    def init_weights(self, seed=0):
        g = torch.Generator().manual_seed(seed)

        def randn(*shape, std):
            return torch.randn(*shape, generator=g) * std

        with torch.no_grad():
            self.embed_tokens.weight.copy_(randn(VOCAB, HIDDEN, std=1.0))
            for layer in self.layers:
                for lin in (layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj,
                            layer.gate_proj, layer.up_proj, layer.down_proj):
                    lin.weight.copy_(randn(*lin.weight.shape, std=1.0 / math.sqrt(lin.in_features)))
                layer.input_layernorm.weight.copy_(1.0 + randn(HIDDEN, std=0.1))
                layer.post_attention_layernorm.weight.copy_(1.0 + randn(HIDDEN, std=0.1))
            self.norm.weight.copy_(1.0 + randn(HIDDEN, std=0.1))
            # normalized hidden has rms ~1 -> logits std ~ sqrt(64) * 0.5 = 4, max ~ 12
            self.lm_head.weight.copy_(randn(VOCAB, HIDDEN, std=0.5))
        return self

    def round_weights_to_fp16(self):
        """Round every parameter to fp16 precision (kept in fp32) -- what the fp16 package stores."""
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(p.half().float())
        return self

    def reset_caches(self):
        for i in range(N_LAYERS):
            getattr(self, f"key_cache_{i}").zero_()
            getattr(self, f"value_cache_{i}").zero_()

    # ---- forward -------------------------------------------------------------------------
    def _write(self, cache, new, cache_offset, s):
        if self.kv_write == "scatter":
            idx = cache_offset.to(torch.int64) + torch.arange(s, dtype=torch.int64)
            cache.index_copy_(2, idx, new.to(cache.dtype))
        else:
            off = cache_offset[0]
            cache[:, :, off : off + s, :] = new.to(cache.dtype)

    def forward(self, input_ids, causal_mask, position_ids, cache_offset):
        s = self.fixed_s if self.fixed_s is not None else input_ids.shape[1]
        h = self.embed_tokens(input_ids)  # [1,S,64]
        freqs = position_ids.to(torch.float32).unsqueeze(-1) * self.inv_freq  # [1,S,8]
        emb = torch.cat([freqs, freqs], dim=-1)  # [1,S,16]
        cos = emb.cos().unsqueeze(1)  # [1,1,S,16]
        sin = emb.sin().unsqueeze(1)
        mask = causal_mask.to(torch.float32)
        for i, layer in enumerate(self.layers):
            kc = getattr(self, f"key_cache_{i}")
            vc = getattr(self, f"value_cache_{i}")
            x = layer.input_layernorm(h)
            q = layer.q_proj(x).view(1, -1, N_HEADS, HEAD_DIM).transpose(1, 2)  # [1,4,S,16]
            k = layer.k_proj(x).view(1, -1, N_KV, HEAD_DIM).transpose(1, 2)  # [1,2,S,16]
            v = layer.v_proj(x).view(1, -1, N_KV, HEAD_DIM).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            self._write(kc, k, cache_offset, s)
            self._write(vc, v, cache_offset, s)
            keys = kc.to(torch.float32)
            vals = vc.to(torch.float32)
            rep = N_HEADS // N_KV
            keys = keys.unsqueeze(2).expand(1, N_KV, rep, CTX, HEAD_DIM).reshape(1, N_HEADS, CTX, HEAD_DIM)
            vals = vals.unsqueeze(2).expand(1, N_KV, rep, CTX, HEAD_DIM).reshape(1, N_HEADS, CTX, HEAD_DIM)
            scores = torch.matmul(q, keys.transpose(2, 3)) * (1.0 / math.sqrt(HEAD_DIM)) + mask
            probs = torch.softmax(scores, dim=-1)
            attn = torch.matmul(probs, vals)  # [1,4,S,16]
            attn = attn.transpose(1, 2).reshape(1, -1, N_HEADS * HEAD_DIM)
            h = h + layer.o_proj(attn)
            x = layer.post_attention_layernorm(h)
            h = h + layer.down_proj(torch.nn.functional.silu(layer.gate_proj(x)) * layer.up_proj(x))
        return self.lm_head(self.norm(h))


def make_inputs(token_ids, start):
    """Model inputs (numpy, exact model dtypes) for a call writing tokens at [start, start+S)."""
    s = len(token_ids)
    input_ids = np.asarray(token_ids, dtype=np.int32).reshape(1, s)
    pos = np.arange(start, start + s, dtype=np.int32).reshape(1, s)
    mask = np.full((1, 1, s, CTX), MASK_NEG, dtype=np.float16)
    for r in range(s):
        mask[0, 0, r, : start + r + 1] = 0.0
    return {
        "input_ids": input_ids,
        "causal_mask": mask,
        "position_ids": pos,
        "cache_offset": np.array([start], dtype=np.int32),
    }


def torch_call(model, inp):
    with torch.no_grad():
        return model(
            torch.from_numpy(inp["input_ids"]),
            torch.from_numpy(inp["causal_mask"]),
            torch.from_numpy(inp["position_ids"]),
            torch.from_numpy(inp["cache_offset"]),
        )


def register_index_copy_converter():
    """Torch -> MIL converter for aten::index_copy / index_copy_ (absent in coremltools 9.0).

    index_copy(x, dim, index, source) == scatter(data=x, indices=index, updates=source,
    axis=dim, mode="update"). The in-place variant is found automatically by coremltools and
    gets the usual state write-back (coreml_update_state) when x is a state buffer.
    """
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.frontend.torch.ops import _get_inputs
    from coremltools.converters.mil.frontend.torch.torch_op_registry import (
        _TORCH_OPS_REGISTRY,
        register_torch_op,
    )

    if "index_copy" in _TORCH_OPS_REGISTRY:
        return

    @register_torch_op
    def index_copy(context, node):
        x, dim, index, source = _get_inputs(context, node, expected=4)
        axis = int(dim.val)
        if axis < 0:
            axis += x.rank
        from coremltools.converters.mil.mil import types
        from coremltools.converters.mil.mil.types.type_mapping import builtin_to_string

        if index.dtype != types.int32:
            index = mb.cast(x=index, dtype="int32")
        if source.dtype != x.dtype:
            source = mb.cast(x=source, dtype=builtin_to_string(x.dtype))
        res = mb.scatter(data=x, indices=index, updates=source, axis=axis, mode="update", name=node.name)
        context.add(res)
