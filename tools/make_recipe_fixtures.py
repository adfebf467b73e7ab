#!/usr/bin/env python3
"""Packages made by the public Core ML LLM recipes, with torch fp32 greedy references.

Usage:  tools/.venv/bin/python tools/make_recipe_fixtures.py [--out models-ir/recipes] [--only NAME ...]
        tools/.venv/bin/python tools/make_recipe_fixtures.py --only seed_layout   # -> models-ir/large/
        tools/.venv/bin/python tools/make_recipe_fixtures.py --bench [--only NAME ...]  # -> models-ir/large/bench/

``--bench`` builds the same recipes (same modules, same conversion) at bench size (BENCH_SIZES:
hidden 1024, 8 layers, vocab 32000, ~300 MB fp16 each) for bench/recipes.sh, without torch
references (the JSON carries only the prompt): the committed ~1 MB fixtures measure interpreter
overhead, not memory bandwidth.

Every fixture is a tiny model with seeded random weights, converted with coremltools 9.0 the
way its recipe does, plus ``<name>.json``: the prompt, the greedy ids torch picks over the
prefill and 16 S=1 decode steps (fp32 compute, the package's fp16-rounded or dequantized
weights), and each step's top-1 / top-2 logit margin (the prompt is chosen so that every margin
is >= MIN_MARGIN, decisive against the package's fp16 KV rounding).

Recipes:
  apple_llama31_fp16 / apple_llama31_int4
      Apple's "On Device Llama 3.1 with Core ML" article (machinelearning.apple.com/research/
      core-ml-on-device-llama) and the coremltools stateful-model guide: transformers'
      ``LlamaForCausalLM`` (4.44, sdpa attention) under the article's ``SliceUpdateKeyValueCache``
      (one stacked [L, 1, KV, CTX, D] ``keyCache`` / ``valueCache`` buffer, slice-assign write at
      ``past = causalMask.shape[-1] - inputIds.shape[-1]``, reads ``[:end]``), inputs
      ``inputIds`` [1, S] and ``causalMask`` [1, 1, S, END] (two RangeDims, -inf additive),
      macOS15 target. int4: ``linear_quantize_weights`` with ``OpLinearQuantizerConfig(
      mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=32)``.
  prefill_decode
      coremltools' multifunction guide: the same module converted twice (a static S=8
      ``prefill`` and an S=1 ``decode``), merged with ``MultiFunctionDescriptor`` /
      ``save_multifunction`` (shared states). Module: fixed-window mask [1, 1, S, CTX], inputs
      ``input_ids``, ``position_ids``, ``causal_mask``, ``current_pos`` (ANEMLL-style names),
      stacked states written with ``slice_update`` at ``current_pos``.
  sdpa_seed
      The seed's four inputs (input_ids, causal_mask, position_ids, cache_offset), per-layer
      states, attention through ``torch.nn.functional.scaled_dot_product_attention`` (GQA by
      ``repeat_interleave``), converted for iOS18 to MIL ``scaled_dot_product_attention``.
  explicit_kv
      Pre-iOS 18 export (iOS17 target): no states; ``key_cache`` / ``value_cache`` fp16
      [L, 1, KV, CTX, D] are inputs and the updated caches outputs ``key_cache_out`` /
      ``value_cache_out``; the seed's four inputs otherwise.
  seed_layout  (not committed: models-ir/large/)
      The seed's contract at its real layout: 36 layers, 2 KV heads, head_dim 128, CTX 2048,
      vocab 151936 tied, hidden 256 (tools/stateful_llama.py's module).
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import coremltools as ct  # noqa: E402

warnings.filterwarnings("ignore")

FIXED_DATE = "2025-01-01 00:00:00"
DATE_KEY = "com.github.apple.coremltools.conversion_date"
N_DECODE = 16
PROMPT_LEN = 7
MIN_MARGIN = 0.25

# The small shared sizes of the committed fixtures.
VOCAB, HIDDEN, N_HEADS, N_KV, HEAD_DIM, INTER, N_LAYERS, CTX = 512, 128, 4, 2, 32, 256, 2, 64
# --bench: the same structure at a size where decode reads weights from memory, not cache.
BENCH_SIZES = dict(VOCAB=32000, HIDDEN=1024, N_HEADS=16, N_KV=4, HEAD_DIM=64, INTER=2816, N_LAYERS=8, CTX=512)
BENCH = False


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def init_weights(module, seed, logit_std=None):
    """Seeded N(0, 1/fan_in) linears, N(0, 1) embeddings, norms near 1; the output projection
    (lm_head, or the tied embedding) scaled so logits spread widely (decisive margins)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            if logit_std is not None and "lm_head" in name:
                p.mul_(logit_std)
    return module


SUCCESSOR = 3.0
MIN_DISTINCT = 10


def add_successor(embed, lm_head, seed, beta=SUCCESSOR):
    """Adds to lm_head row y beta * unit(embed[pred(y)]) for a seeded permutation succ = pred^-1:
    the current token pulls its successor up, so greedy runs do not collapse into a repeated
    id, while attention over the cache still decides many steps (beta 3 vs logit std 4)."""
    with torch.no_grad():
        perm = torch.randperm(embed.shape[0], generator=torch.Generator().manual_seed(seed))
        pred = torch.empty_like(perm)
        pred[perm] = torch.arange(embed.shape[0])
        rows = embed[pred]
        lm_head.add_(beta * rows / rows.norm(dim=1, keepdim=True))


def round_fp16(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.half().float())
    return module


def fix_metadata(mlmodel):
    mlmodel.user_defined_metadata[DATE_KEY] = FIXED_DATE
    return mlmodel


def save(mlmodel, path):
    tmp = path[: -len(".mlpackage")] + ".tmp.mlpackage"
    shutil.rmtree(tmp, ignore_errors=True)
    mlmodel.save(tmp)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)


def write_json(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


LAST_LOGITS = {}


def greedy(step, prompt):
    """step(ids, past) -> logits [S, vocab] (fp32 numpy). Returns (ids, margins); the last-row
    logits of every call are left in LAST_LOGITS["rows"] ([17, vocab])."""
    ids, margins, rows = [], [], []
    logits = step(list(prompt), 0)
    past = len(prompt)
    for k in range(N_DECODE + 1):
        row = logits[-1].astype(np.float64)
        rows.append(logits[-1].astype(np.float32))
        order = np.argsort(-row)
        ids.append(int(order[0]))
        margins.append(float(row[order[0]] - row[order[1]]))
        if k == N_DECODE:
            break
        logits = step([ids[-1]], past)
        past += 1
    LAST_LOGITS["rows"] = np.stack(rows)
    return ids, margins


def decisive_prompt(run, vocab, seed, min_distinct=MIN_DISTINCT):
    """The first seeded random prompt whose greedy run has every margin >= MIN_MARGIN and at
    least ``min_distinct`` distinct ids (not a collapsed repetition)."""
    rng = np.random.default_rng(seed)
    if BENCH:  # no reference: a seeded prompt, no torch runs
        LAST_LOGITS["rows"] = np.zeros((0,), dtype=np.float32)
        return [int(x) for x in rng.integers(0, vocab, PROMPT_LEN)], [], [0.0]
    best = None
    for attempt in range(200):
        prompt = [int(x) for x in rng.integers(0, vocab, PROMPT_LEN)]
        ids, margins = run(prompt)
        if len(set(ids)) < min_distinct:
            continue
        if best is None or min(margins) > min(best[2]):
            best = (prompt, ids, margins)
        if min(margins) >= MIN_MARGIN:
            return prompt, ids, margins
    raise SystemExit(f"no decisive prompt in 200 tries (best min margin {min(best[2]) if best else None})")


def reference(name, recipe, contract, prompt, ids, margins, extra=None, out=None):
    """The JSON reference; also writes <out>/<name>_logits.npy, each call's last-row logits."""
    if out is not None:
        np.save(os.path.join(out, name + "_logits.npy"), LAST_LOGITS["rows"])
    obj = {
        "recipe": recipe,
        "contract": contract,
        "prompt_ids": prompt,
        "decode_steps": N_DECODE,
        "greedy_ids": ids,
        "margins": [round(m, 4) for m in margins],
        "min_margin": round(min(margins), 4),
        "reference": "torch 2.7 fp32 compute with the package's weights (fp16-rounded or dequantized), fp32 KV cache",
    }
    obj.update(extra or {})
    return obj


def mask_growing(s, end):
    """Apple's recipe: [1, 1, S, END] additive, 0 where column <= past + row, -inf after."""
    past = end - s
    m = torch.full((1, 1, s, end), float("-inf"))
    for r in range(s):
        m[0, 0, r, : past + r + 1] = 0
    return m


def mask_window(s, past, ctx, neg=-1e4):
    m = torch.full((1, 1, s, ctx), neg)
    for r in range(s):
        m[0, 0, r, : past + r + 1] = 0
    return m


# ---------------------------------------------------------------------------------------------
# (a) Apple's Llama 3.1 recipe
# ---------------------------------------------------------------------------------------------

def apple_modules():
    from transformers.cache_utils import Cache
    from transformers.models.llama.modeling_llama import LlamaConfig, LlamaForCausalLM

    class SliceUpdateKeyValueCache(Cache):
        """The article's cache: (#layers, batch, #kv_heads, context, head_dim) tensors."""

        def __init__(self, *, shape, dtype=torch.float32):
            super().__init__()
            self.past_seen_tokens = 0
            self.k = torch.zeros(shape, dtype=dtype)
            self.v = torch.zeros(shape, dtype=dtype)

        def update(self, k_state, v_state, layer_idx, cache_kwargs=None):
            position = cache_kwargs.get("cache_position", None)
            assert position is not None, "cache_position required to update cache."
            begin, end = self.past_seen_tokens, self.past_seen_tokens + position.shape[-1]
            self.k[layer_idx, :, : k_state.shape[1], begin:end, :] = k_state
            self.v[layer_idx, :, : v_state.shape[1], begin:end, :] = v_state
            k_state = self.k[layer_idx, :, :, :end, :]
            v_state = self.v[layer_idx, :, :, :end, :]
            return k_state, v_state

        def get_seq_length(self, _=0):
            return self.past_seen_tokens

        def get_max_length(self):
            return None

    class KvCacheStateLlamaForCausalLM(nn.Module):
        """The article's wrapper: the caches registered as buffers named keyCache / valueCache."""

        def __init__(self, config, *, batch_size=1, context_size=CTX):
            super().__init__()
            self.model = LlamaForCausalLM(config)
            self.kv_cache_shape = (config.num_hidden_layers, batch_size, config.num_key_value_heads,
                                   context_size, config.hidden_size // config.num_attention_heads)
            self.kv_cache = SliceUpdateKeyValueCache(shape=self.kv_cache_shape)
            self.register_buffer("keyCache", self.kv_cache.k)
            self.register_buffer("valueCache", self.kv_cache.v)

        @torch.no_grad()
        def forward(self, input_ids, causal_mask):
            self.kv_cache.past_seen_tokens = causal_mask.shape[-1] - input_ids.shape[-1]
            return self.model(input_ids=input_ids, attention_mask=causal_mask,
                              past_key_values=self.kv_cache, use_cache=True).logits

        def reset(self):
            self.kv_cache.k.zero_()
            self.kv_cache.v.zero_()

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
                         num_hidden_layers=N_LAYERS, num_attention_heads=N_HEADS,
                         num_key_value_heads=N_KV, max_position_embeddings=CTX, rms_norm_eps=1e-5,
                         rope_theta=500000.0, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"  # what from_pretrained picks with torch >= 2.1.1
    return KvCacheStateLlamaForCausalLM, config


def apple_step(model):
    def step(ids, past):
        s = len(ids)
        with torch.no_grad():
            out = model(torch.tensor([ids], dtype=torch.int32), mask_growing(s, past + s))
        return out[0].float().numpy()
    return step


def apple_convert(model):
    model.reset()
    ex = (torch.zeros((1, 2), dtype=torch.int32), mask_growing(2, 5))
    traced = torch.jit.trace(model.eval(), ex)
    model.reset()
    query_length = ct.RangeDim(lower_bound=1, upper_bound=CTX, default=1)
    end_step_dim = ct.RangeDim(lower_bound=1, upper_bound=CTX, default=1)
    inputs = [
        ct.TensorType(shape=(1, query_length), dtype=np.int32, name="inputIds"),
        ct.TensorType(shape=(1, 1, query_length, end_step_dim), dtype=np.float16, name="causalMask"),
    ]
    states = [
        ct.StateType(wrapped_type=ct.TensorType(shape=model.kv_cache_shape, dtype=np.float16), name="keyCache"),
        ct.StateType(wrapped_type=ct.TensorType(shape=model.kv_cache_shape, dtype=np.float16), name="valueCache"),
    ]
    outputs = [ct.TensorType(dtype=np.float16, name="logits")]
    return ct.convert(traced, inputs=inputs, states=states, outputs=outputs,
                      minimum_deployment_target=ct.target.macOS15, skip_model_load=True)


def dequantized_weights(mlmodel):
    """Every constexpr_blockwise_shift_scale result of the quantized program, as float32."""
    from coremltools.converters.mil.mil.ops.defs.iOS18 import constexpr_blockwise_shift_scale  # noqa: F401
    out = []
    prog = mlmodel._mil_program
    for op in prog.functions["main"].find_ops(op_type="constexpr_blockwise_shift_scale"):
        data = op.data.val.astype(np.float32)
        scale = op.scale.val.astype(np.float32)
        off = op.offset.val.astype(np.float32) if op.offset is not None else None
        # Broadcast each scale over its block (the op's semantics: data blocks along each axis).
        reps = [d // s for d, s in zip(data.shape, scale.shape)]
        sc = scale
        for ax, r in enumerate(reps):
            sc = np.repeat(sc, r, axis=ax)
        if off is not None:
            o = off
            for ax, r in enumerate(reps):
                o = np.repeat(o, r, axis=ax)
            data = data - o
        out.append((data * sc).astype(np.float16).astype(np.float32))
    return out


def load_dequantized(model, weights):
    """Replace each 2-D parameter by the dequantized tensor of its shape closest to it."""
    used = set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() != 2:
                continue
            best, best_err = None, None
            for i, w in enumerate(weights):
                if i in used or tuple(w.shape) != tuple(p.shape):
                    continue
                err = float(np.abs(w - p.numpy()).max())
                if best_err is None or err < best_err:
                    best, best_err = i, err
            if best is None:
                raise SystemExit(f"int4: no quantized weight for parameter {name} {tuple(p.shape)}")
            used.add(best)
            p.copy_(torch.from_numpy(weights[best]))
    return len(used)


def make_apple(out):
    Wrapper, config = apple_modules()
    torch.manual_seed(0)
    model = Wrapper(config)
    init_weights(model, seed=31, logit_std=4.0)
    add_successor(model.model.model.embed_tokens.weight, model.model.lm_head.weight, seed=31)
    round_fp16(model)
    model.eval()
    contract = {"token_ids": "inputIds", "mask": "causalMask [1,1,S,END] additive -inf, END = past + S",
                "write_offset": "causalMask.shape[-1] - S", "positions": "from the mask's last dimension",
                "kv": "stacked states keyCache / valueCache [L,1,KV,CTX,D]", "functions": "one, S and END RangeDim(1, CTX)"}

    def run(prompt):
        model.reset()
        return greedy(apple_step(model), prompt)

    prompt, ids, margins = decisive_prompt(run, VOCAB, seed=1)
    fp16 = fix_metadata(apple_convert(model))
    save(fp16, os.path.join(out, "apple_llama31_fp16.mlpackage"))
    write_json(os.path.join(out, "apple_llama31_fp16.json"),
               reference("apple_llama31_fp16", "Apple On Device Llama 3.1 with Core ML (fp16)", contract, prompt, ids, margins, out=out))

    op_config = ct.optimize.coreml.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int4",
                                                           granularity="per_block", block_size=32)
    config_q = ct.optimize.coreml.OptimizationConfig(global_config=op_config)
    int4 = fix_metadata(ct.optimize.coreml.linear_quantize_weights(fp16, config=config_q))
    n = 0 if BENCH else load_dequantized(model, dequantized_weights(int4))
    prompt, ids, margins = decisive_prompt(run, VOCAB, seed=2)
    save(int4, os.path.join(out, "apple_llama31_int4.mlpackage"))
    write_json(os.path.join(out, "apple_llama31_int4.json"),
               reference("apple_llama31_int4", "Apple On Device Llama 3.1 with Core ML (int4 per-block 32)", contract,
                         prompt, ids, margins, {"dequantized_parameters": n}, out=out))


# ---------------------------------------------------------------------------------------------
# a small hand-written Llama used by (b), (c), (e)
# ---------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * self.weight


class Block(nn.Module):
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


def rope_tables():
    inv = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM))
    ang = torch.arange(CTX, dtype=torch.float64).unsqueeze(-1) * inv
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate(x, cos, sin):
    h = HEAD_DIM // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin


class SmallLlama(nn.Module):
    """kv: "stacked_slice" (states, slice_update at an offset), "per_layer_sdpa" (states,
    index_copy -> scatter, F.scaled_dot_product_attention), "explicit" (caches in / out)."""

    def __init__(self, kv):
        super().__init__()
        self.kv = kv
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Block() for _ in range(N_LAYERS)])
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        cos, sin = rope_tables()
        self.register_buffer("cos_table", cos, persistent=False)
        self.register_buffer("sin_table", sin, persistent=False)
        if kv == "stacked_slice":
            self.register_buffer("keyCache", torch.zeros(N_LAYERS, 1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))
            self.register_buffer("valueCache", torch.zeros(N_LAYERS, 1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))
        elif kv == "per_layer_sdpa":
            for i in range(N_LAYERS):
                self.register_buffer(f"key_cache_{i}", torch.zeros(1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))
                self.register_buffer(f"value_cache_{i}", torch.zeros(1, N_KV, CTX, HEAD_DIM, dtype=torch.float16))

    def reset(self, dtype=torch.float16):
        for name, b in list(self.named_buffers()):
            if "ache" in name:
                setattr(self, name, torch.zeros(b.shape, dtype=dtype))

    def body(self, input_ids, mask, position_ids, write, read):
        """write(i, k, v) stores the new rows; read(i) -> (keys, values) [1, KV, CTX, D]."""
        rep = N_HEADS // N_KV
        h = self.embed_tokens(input_ids)
        cos = self.cos_table[position_ids[0]].unsqueeze(0).unsqueeze(0)
        sin = self.sin_table[position_ids[0]].unsqueeze(0).unsqueeze(0)
        mask = mask.to(torch.float32)
        for i, layer in enumerate(self.layers):
            x = layer.input_layernorm(h)
            q = layer.q_proj(x).view(1, -1, N_HEADS, HEAD_DIM).transpose(1, 2)
            k = layer.k_proj(x).view(1, -1, N_KV, HEAD_DIM).transpose(1, 2)
            v = layer.v_proj(x).view(1, -1, N_KV, HEAD_DIM).transpose(1, 2)
            q = rotate(q, cos, sin)
            k = rotate(k, cos, sin)
            write(i, k, v)
            keys, vals = read(i)
            keys, vals = keys.to(torch.float32), vals.to(torch.float32)
            if self.kv == "per_layer_sdpa":
                keys = keys.repeat_interleave(rep, dim=1)
                vals = vals.repeat_interleave(rep, dim=1)
                attn = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
            else:
                keys = keys[:, :, None].expand(1, N_KV, rep, CTX, HEAD_DIM).reshape(1, N_HEADS, CTX, HEAD_DIM)
                vals = vals[:, :, None].expand(1, N_KV, rep, CTX, HEAD_DIM).reshape(1, N_HEADS, CTX, HEAD_DIM)
                scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(HEAD_DIM) + mask
                attn = torch.matmul(torch.softmax(scores, dim=-1), vals)
            attn = attn.transpose(1, 2).reshape(1, -1, N_HEADS * HEAD_DIM)
            h = h + layer.o_proj(attn)
            x = layer.post_attention_layernorm(h)
            h = h + layer.down_proj(F.silu(layer.gate_proj(x)) * layer.up_proj(x))
        return self.lm_head(self.norm(h))


class StackedSliceLlama(SmallLlama):
    """(b): input_ids, position_ids, causal_mask [1,1,S,CTX], current_pos [1]."""

    def __init__(self):
        super().__init__("stacked_slice")

    def forward(self, input_ids, position_ids, causal_mask, current_pos):
        s = input_ids.shape[1]
        pos = current_pos[0]

        def write(i, k, v):
            self.keyCache[i : i + 1, :, :, pos : pos + s, :] = k.to(self.keyCache.dtype).unsqueeze(0)
            self.valueCache[i : i + 1, :, :, pos : pos + s, :] = v.to(self.valueCache.dtype).unsqueeze(0)

        def read(i):
            return self.keyCache[i], self.valueCache[i]

        return self.body(input_ids, causal_mask, position_ids, write, read)


class SdpaSeedLlama(SmallLlama):
    """(c): the seed's four inputs, per-layer states, F.scaled_dot_product_attention."""

    def __init__(self):
        super().__init__("per_layer_sdpa")

    def forward(self, input_ids, causal_mask, position_ids, cache_offset):
        s = input_ids.shape[1]
        idx = cache_offset.to(torch.int64) + torch.arange(s, dtype=torch.int64)

        def write(i, k, v):
            kc, vc = getattr(self, f"key_cache_{i}"), getattr(self, f"value_cache_{i}")
            kc.index_copy_(2, idx, k.to(kc.dtype))
            vc.index_copy_(2, idx, v.to(vc.dtype))

        def read(i):
            return getattr(self, f"key_cache_{i}"), getattr(self, f"value_cache_{i}")

        return self.body(input_ids, causal_mask, position_ids, write, read)


class ExplicitKVLlama(SmallLlama):
    """(e): caches are inputs; the updated caches are outputs (no states)."""

    def __init__(self):
        super().__init__("explicit")

    def forward(self, input_ids, causal_mask, position_ids, cache_offset, key_cache, value_cache):
        s = input_ids.shape[1]
        idx = cache_offset.to(torch.int64) + torch.arange(s, dtype=torch.int64)
        keys_out, vals_out = [], []

        def write(i, k, v):
            keys_out.append(key_cache[i].index_copy(2, idx, k.to(key_cache.dtype)))
            vals_out.append(value_cache[i].index_copy(2, idx, v.to(value_cache.dtype)))

        def read(i):
            return keys_out[i], vals_out[i]

        logits = self.body(input_ids, causal_mask, position_ids, write, read)
        return logits, torch.stack(keys_out), torch.stack(vals_out)


def seed_inputs(ids, past, mask_dtype=torch.float16):
    s = len(ids)
    return (torch.tensor([ids], dtype=torch.int32), mask_window(s, past, CTX).to(mask_dtype),
            torch.arange(past, past + s, dtype=torch.int32).unsqueeze(0), torch.tensor([past], dtype=torch.int32))


def small_model(cls, seed):
    torch.manual_seed(0)
    m = cls()
    init_weights(m, seed=seed, logit_std=4.0)
    add_successor(m.embed_tokens.weight, m.lm_head.weight, seed=seed)
    return round_fp16(m).eval()


# ---------------------------------------------------------------------------------------------
# (b) prefill / decode multifunction
# ---------------------------------------------------------------------------------------------

PREFILL_S = 8


def make_prefill_decode(out):
    model = small_model(StackedSliceLlama, seed=41)

    def step(ids, past):
        s = len(ids)
        with torch.no_grad():
            lg = model(torch.tensor([ids], dtype=torch.int32), torch.arange(past, past + s, dtype=torch.int32).unsqueeze(0),
                       mask_window(s, past, CTX), torch.tensor([past], dtype=torch.int32))
        return lg[0].float().numpy()

    def run(prompt):
        model.reset(torch.float32)
        return greedy(step, prompt)

    prompt, ids, margins = decisive_prompt(run, VOCAB, seed=3)
    model.reset(torch.float16)
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=(N_LAYERS, 1, N_KV, CTX, HEAD_DIM), dtype=np.float16), name=n)
              for n in ("keyCache", "valueCache")]
    tmp = tempfile.mkdtemp()
    paths = {}
    for fname, s in (("prefill", PREFILL_S), ("decode", 1)):
        ex = (torch.zeros((1, s), dtype=torch.int32), torch.arange(s, dtype=torch.int32).unsqueeze(0),
              mask_window(s, 0, CTX), torch.tensor([0], dtype=torch.int32))
        traced = torch.jit.trace(model, ex)
        model.reset(torch.float16)
        inputs = [ct.TensorType(name="input_ids", shape=(1, s), dtype=np.int32),
                  ct.TensorType(name="position_ids", shape=(1, s), dtype=np.int32),
                  ct.TensorType(name="causal_mask", shape=(1, 1, s, CTX), dtype=np.float16),
                  ct.TensorType(name="current_pos", shape=(1,), dtype=np.int32)]
        ml = ct.convert(traced, inputs=inputs, states=states, outputs=[ct.TensorType(name="logits", dtype=np.float16)],
                        minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
        paths[fname] = os.path.join(tmp, fname + ".mlpackage")
        fix_metadata(ml).save(paths[fname])
    desc = ct.utils.MultiFunctionDescriptor()
    desc.add_function(paths["prefill"], src_function_name="main", target_function_name="prefill")
    desc.add_function(paths["decode"], src_function_name="main", target_function_name="decode")
    desc.default_function_name = "decode"
    dst = os.path.join(out, "prefill_decode.mlpackage")
    tmp_dst = os.path.join(out, "prefill_decode.tmp.mlpackage")
    shutil.rmtree(tmp_dst, ignore_errors=True)
    ct.utils.save_multifunction(desc, tmp_dst)
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp_dst, dst)
    shutil.rmtree(tmp, ignore_errors=True)
    contract = {"token_ids": "input_ids", "positions": "position_ids", "mask": "causal_mask [1,1,S,CTX] additive -1e4",
                "write_offset": "current_pos", "kv": "stacked states keyCache / valueCache [L,1,KV,CTX,D]",
                "functions": f"prefill (S={PREFILL_S}) + decode (S=1), shared states"}
    write_json(os.path.join(out, "prefill_decode.json"),
               reference("prefill_decode", "coremltools multifunction prefill/decode", contract, prompt, ids, margins,
                         {"prefill_width": PREFILL_S}, out=out))


# ---------------------------------------------------------------------------------------------
# (c) SDPA with the seed's four inputs, (e) explicit KV inputs / outputs
# ---------------------------------------------------------------------------------------------

def seed_ct_inputs(S):
    return [ct.TensorType(name="input_ids", shape=(1, S), dtype=np.int32),
            ct.TensorType(name="causal_mask", shape=(1, 1, S, CTX), dtype=np.float16),
            ct.TensorType(name="position_ids", shape=(1, S), dtype=np.int32),
            ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32)]


def make_sdpa_seed(out):
    from tiny_llama import register_index_copy_converter
    register_index_copy_converter()
    model = small_model(SdpaSeedLlama, seed=51)

    def step(ids, past):
        with torch.no_grad():
            return model(*seed_inputs(ids, past, torch.float32))[0].float().numpy()

    def run(prompt):
        model.reset(torch.float32)
        return greedy(step, prompt)

    prompt, ids, margins = decisive_prompt(run, VOCAB, seed=4)
    model.reset(torch.float16)
    traced = torch.jit.trace(model, seed_inputs([0, 0], 0))
    model.reset(torch.float16)
    S = ct.RangeDim(1, CTX, default=1, symbol="S")
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=(1, N_KV, CTX, HEAD_DIM), dtype=np.float16), name=f"{k}_cache_{i}")
              for i in range(N_LAYERS) for k in ("key", "value")]
    ml = ct.convert(traced, inputs=seed_ct_inputs(S), states=states, outputs=[ct.TensorType(name="logits", dtype=np.float16)],
                    minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
    save(fix_metadata(ml), os.path.join(out, "sdpa_seed.mlpackage"))
    contract = {"token_ids": "input_ids", "positions": "position_ids", "mask": "causal_mask [1,1,S,CTX] additive -1e4",
                "write_offset": "cache_offset", "kv": "per-layer states [1,KV,CTX,D]", "functions": "one, S RangeDim(1, CTX)",
                "attention": "MIL scaled_dot_product_attention"}
    write_json(os.path.join(out, "sdpa_seed.json"),
               reference("sdpa_seed", "torch scaled_dot_product_attention -> MIL scaled_dot_product_attention (iOS18)",
                         contract, prompt, ids, margins, out=out))


def make_explicit_kv(out):
    from tiny_llama import register_index_copy_converter
    register_index_copy_converter()
    model = small_model(ExplicitKVLlama, seed=61)
    shape = (N_LAYERS, 1, N_KV, CTX, HEAD_DIM)
    cache = {}

    def step(ids, past):
        with torch.no_grad():
            lg, k, v = model(*seed_inputs(ids, past, torch.float32), cache["k"], cache["v"])
        cache["k"], cache["v"] = k, v
        return lg[0].float().numpy()

    def run(prompt):
        cache["k"], cache["v"] = torch.zeros(shape), torch.zeros(shape)
        return greedy(step, prompt)

    prompt, ids, margins = decisive_prompt(run, VOCAB, seed=5)
    ex = seed_inputs([0, 0], 0) + (torch.zeros(shape, dtype=torch.float16), torch.zeros(shape, dtype=torch.float16))
    traced = torch.jit.trace(model, ex)
    S = ct.RangeDim(1, CTX, default=1, symbol="S")
    inputs = seed_ct_inputs(S) + [ct.TensorType(name="key_cache", shape=shape, dtype=np.float16),
                                  ct.TensorType(name="value_cache", shape=shape, dtype=np.float16)]
    outputs = [ct.TensorType(name="logits", dtype=np.float16), ct.TensorType(name="key_cache_out", dtype=np.float16),
               ct.TensorType(name="value_cache_out", dtype=np.float16)]
    ml = ct.convert(traced, inputs=inputs, outputs=outputs, minimum_deployment_target=ct.target.iOS17, skip_model_load=True)
    save(fix_metadata(ml), os.path.join(out, "explicit_kv.mlpackage"))
    contract = {"token_ids": "input_ids", "positions": "position_ids", "mask": "causal_mask [1,1,S,CTX] additive -1e4",
                "write_offset": "cache_offset", "kv": "explicit inputs key_cache / value_cache -> outputs key_cache_out / value_cache_out",
                "functions": "one, S RangeDim(1, CTX)"}
    write_json(os.path.join(out, "explicit_kv.json"),
               reference("explicit_kv", "pre-iOS 18 export: KV caches as inputs and outputs", contract, prompt, ids, margins, out=out))


# ---------------------------------------------------------------------------------------------
# (d) the seed's contract at its real layout (large: models-ir/large/)
# ---------------------------------------------------------------------------------------------

def make_seed_layout(out):
    import stateful_llama as sl
    spec = sl.LlamaSpec(vocab=151936, hidden=256, n_heads=4, n_kv=2, head_dim=128, inter=512, n_layers=36,
                        ctx=2048, eps=1e-6, rope_theta=1e6, tie_embeddings=True)
    torch.manual_seed(0)
    model = sl.StatefulLlama(spec)
    init_weights(model, seed=71)
    with torch.no_grad():  # tied: scale the shared table's logits through the final norm instead
        model.norm.weight.mul_(3.0)
    model.round_weights_to_fp16().eval()

    def step(ids, past):
        inp = sl.make_inputs(ids, past, spec.ctx)
        return sl.torch_call(model, inp).numpy().astype(np.float32)[0]

    def run(prompt):
        model.reset_caches(torch.float32)
        return greedy(step, prompt)

    prompt, ids, margins = decisive_prompt(run, spec.vocab, seed=6, min_distinct=1)
    ml = fix_metadata(sl.convert(model, [0, 1], ct=ct))
    save(ml, os.path.join(out, "seed_layout.mlpackage"))
    contract = {"token_ids": "input_ids", "positions": "position_ids", "mask": "causal_mask [1,1,S,2048] additive -1e4",
                "write_offset": "cache_offset", "kv": "per-layer states [1,2,2048,128] x 36", "functions": "one, S RangeDim(1, 2048)"}
    write_json(os.path.join(out, "seed_layout.json"),
               reference("seed_layout", "the seed's contract at its real layout", contract, prompt, ids, margins, out=out))


RECIPES = {
    "apple_llama31": make_apple,
    "prefill_decode": make_prefill_decode,
    "sdpa_seed": make_sdpa_seed,
    "explicit_kv": make_explicit_kv,
    "seed_layout": make_seed_layout,
}
LARGE = {"seed_layout"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="folder (default models-ir/recipes, models-ir/large for seed_layout)")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--bench", action="store_true", help="bench-size variants into models-ir/large/bench/, no torch references")
    a = ap.parse_args()
    root = os.path.dirname(HERE)
    names = a.only or [n for n in RECIPES if n not in LARGE]
    if a.bench:
        global BENCH
        BENCH = True
        globals().update(BENCH_SIZES)
    for n in names:
        out = a.out or (os.path.join(root, "models-ir", "large", "bench") if a.bench else
                        os.path.join(root, "models-ir", "large" if n in LARGE else "recipes"))
        os.makedirs(out, exist_ok=True)
        print(f"{n} -> {out}", flush=True)
        RECIPES[n](out)


if __name__ == "__main__":
    main()
