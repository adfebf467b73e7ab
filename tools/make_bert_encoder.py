#!/usr/bin/env python3
"""A 6-layer BERT-style encoder (MiniLM-L6 geometry) as Core ML and ONNX, for bench/compare_onnxruntime.py.

  tools/.venv/bin/python tools/make_bert_encoder.py [--out-dir models-ir/large] [--seq 128]

The module is transformers' own `BertModel` (BertConfig: hidden 384, 6 layers, 12 heads,
intermediate 1536, GELU, vocab 30522 -- the geometry of sentence-transformers/all-MiniLM-L6-v2),
with seeded random weights (torch.manual_seed(0); no download), eager attention, wrapped as
(input_ids int32 [1,S], attention_mask int32 [1,S]) -> last_hidden_state fp32 [1,S,384].
The same traced module goes to
  bert6_384.mlpackage  coremltools 9 `ct.convert` (mlprogram, iOS17, compute_precision FLOAT32, fixed S)
  bert6_384.onnx       torch.onnx.export (TorchScript exporter, opset 17, fixed S)
  bert6_384_inputs.npz input_ids (fixed seed, < vocab) and an all-ones attention_mask
  bert6_384_torch.npz  the torch fp32 output (last_hidden_state) for these inputs
Deterministic for a given torch/coremltools version. Needs tools/requirements*.txt (transformers
from requirements-large.txt, onnx from requirements-bench.txt). Writes into an ignored folder.
"""

import argparse
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402


class Encoder(torch.nn.Module):
    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids.long(), attention_mask=attention_mask.long()).last_hidden_state


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "models-ir", "large"))
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    import coremltools as ct
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                     intermediate_size=1536, hidden_act="gelu", max_position_embeddings=512,
                     attn_implementation="eager")
    bert = BertModel(cfg, add_pooling_layer=False).eval()
    model = Encoder(bert).eval()
    s = args.seq
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, cfg.vocab_size, size=(1, s), dtype=np.int32)
    mask = np.ones((1, s), dtype=np.int32)
    ex = (torch.from_numpy(ids), torch.from_numpy(mask))
    os.makedirs(args.out_dir, exist_ok=True)
    with torch.no_grad():
        ref = model(*ex).numpy().astype(np.float32)
        traced = torch.jit.trace(model, ex, check_trace=False)
    base = os.path.join(args.out_dir, "bert6_384")
    np.savez(base + "_inputs.npz", input_ids=ids, attention_mask=mask)
    np.savez(base + "_torch.npz", last_hidden_state=ref)

    ml = ct.convert(traced, inputs=[ct.TensorType(name="input_ids", shape=(1, s), dtype=np.int32),
                                    ct.TensorType(name="attention_mask", shape=(1, s), dtype=np.int32)],
                    outputs=[ct.TensorType(name="last_hidden_state", dtype=np.float32)],
                    convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                    compute_precision=ct.precision.FLOAT32, skip_model_load=True)
    pkg = base + ".mlpackage"
    tmp = base + ".tmp.mlpackage"
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    ml.save(tmp)
    shutil.rmtree(pkg, ignore_errors=True)
    os.rename(tmp, pkg)

    onnx_path = base + ".onnx"
    with torch.no_grad():
        torch.onnx.export(model, ex, onnx_path + ".tmp", input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False)
    os.replace(onnx_path + ".tmp", onnx_path)
    print(f"wrote {pkg}, {onnx_path}, {base}_inputs.npz, {base}_torch.npz (S={s}, |ref| max {np.abs(ref).max():.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
