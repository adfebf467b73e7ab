#!/usr/bin/env python3
"""forge-ir vs ONNX Runtime on the same torch encoder, alternating rounds, same machine (issue 18).

  tools/.venv/bin/python bench/compare_onnxruntime.py [--rounds 3] [--repeat 20] [--threads 2]
                                                      [--forge-ir PATH] [--markdown] [--json-out F]

Inputs: models-ir/large/bert6_384{.mlpackage,.onnx,_inputs.npz,_torch.npz} from
tools/make_bert_encoder.py (made on demand when missing; transformers' BertModel, 6 layers,
hidden 384, S=128, seeded random weights, fp32). Per round, alternately:
  forge-ir run PKG --inputs IN.npz --repeat N --threads T --json   (median call time after one warm-up)
  onnxruntime InferenceSession(ONNX, intra_op_num_threads=T, inter_op 1, sequential,
              ORT_ENABLE_ALL graph optimizations): one warm-up call, then N timed calls, median
The table gives per engine the median over rounds of the per-round medians (ms per call), the
spread (min-max over rounds), and forge-ir's speed relative to ONNX Runtime (ort ms / forge-ir
ms: > 1 = forge-ir faster). Both outputs are checked against torch (max |diff|). Ratios are only
meaningful on an otherwise idle machine; the load average before and after is printed.
Needs tools/requirements-bench.txt (onnxruntime) in tools/.venv.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LARGE = os.path.join(ROOT, "models-ir", "large")
BASE = os.path.join(LARGE, "bert6_384")

import numpy as np  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def forge_round(exe, repeat, threads, out_dir):
    r = subprocess.run([exe, "run", BASE + ".mlpackage", "--inputs", BASE + "_inputs.npz", "--repeat", str(repeat),
                        "--threads", str(threads), "--json", "--out", out_dir], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"forge-ir run failed ({r.returncode}): {r.stderr}")
    j = json.loads(r.stdout)
    return float(j["seconds"]), np.load(os.path.join(out_dir, "last_hidden_state.npy"))


def ort_round(sess, feeds, repeat):
    out = sess.run(None, feeds)[0]  # warm-up
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = sess.run(None, feeds)[0]
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--forge-ir", default=os.environ.get("FORGE_IR", os.path.join(ROOT, ".build", "release", "forge-ir")))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    if not all(os.path.exists(BASE + s) for s in (".mlpackage", ".onnx", "_inputs.npz", "_torch.npz")):
        print("== making the encoder: tools/make_bert_encoder.py", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_bert_encoder.py")], check=True,
                       stdout=subprocess.DEVNULL)
    if not os.access(args.forge_ir, os.X_OK):
        sys.exit(f"no forge-ir at {args.forge_ir} (swift build -c release)")
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(BASE + ".onnx", so, providers=["CPUExecutionProvider"])
    inp = np.load(BASE + "_inputs.npz")
    feeds = {i.name: inp[i.name].astype(np.int64 if i.type == "tensor(int64)" else np.int32) for i in sess.get_inputs()}
    ref = np.load(BASE + "_torch.npz")["last_hidden_state"]
    print(f"load average before: {loadavg()}; onnxruntime {ort.__version__}; threads {args.threads}; "
          f"{args.rounds} rounds x {args.repeat} calls", file=sys.stderr)
    fr, orr = [], []
    with tempfile.TemporaryDirectory(prefix="cmp_ort_") as tmp:
        for k in range(args.rounds):
            f, fo = forge_round(args.forge_ir, args.repeat, args.threads, tmp)
            o, oo = ort_round(sess, feeds, args.repeat)
            fr.append(f)
            orr.append(o)
            print(f"round {k + 1}/{args.rounds}: forge-ir {f * 1e3:.2f} ms, onnxruntime {o * 1e3:.2f} ms", file=sys.stderr)
    fd, od = float(np.abs(fo - ref).max()), float(np.abs(oo - ref).max())
    fm, om = float(np.median(fr)), float(np.median(orr))
    rows = [("forge-ir (fp32 mlpackage)", fm, min(fr), max(fr), fd), ("onnxruntime (fp32 onnx)", om, min(orr), max(orr), od)]
    if args.markdown:
        print("| engine | ms / call (median of rounds) | spread | max abs diff vs torch |\n|---|--:|--:|--:|")
        for n, m, lo, hi, d in rows:
            print(f"| {n} | {m * 1e3:.2f} | {lo * 1e3:.2f}–{hi * 1e3:.2f} | {d:.2e} |")
    else:
        for n, m, lo, hi, d in rows:
            print(f"{n:28s} {m * 1e3:9.2f} ms/call  (rounds {lo * 1e3:.2f}-{hi * 1e3:.2f})  max|diff vs torch| {d:.2e}")
    print(f"forge-ir speed vs onnxruntime: {om / fm:.2f}x  ({args.threads} threads; load average after: {loadavg()})")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"forge_ir_s": fr, "onnxruntime_s": orr, "ratio": om / fm, "threads": args.threads,
                       "max_abs_diff": {"forge_ir": fd, "onnxruntime": od}}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
