#!/usr/bin/env python3
"""Correctness checks of forge-ir on the real SmolLM2-135M packages (issue 4, "What it must show",
first two bullets), against tools/smollm2_reference.py's torch reference (3 prompts x 32 tokens).

Usage (numpy only; the packages and the reference must exist, see tools/NOTES.md):
  tools/.venv/bin/python tools/check_smollm2.py [--forge-ir PATH] [--json-out results.json]

forge-ir: --forge-ir, else $FORGE_IR, else the first of /tmp/build-check/release/forge-ir,
.build/release/forge-ir that exists.

Checks (all through the forge-ir binary, default precision fp32 = Core ML CPU numerics):
  fp16 package
    greedy     `generate --prompt-ids P --max-tokens 32 --json` ids == the reference's (fp32 torch,
               fp16-rounded weights). At the first differing position j the reference's top-2 gap
               must be < 0.05 (a near-tie flip; the rest of the sequence is then not comparable).
    prefill    `run --inputs X.npz --out DIR` on the prompt (input_ids [1,S] int32, causal_mask
               [1,1,S,2048] fp16 0 / -1e4, position_ids [1,S] int32, cache_offset [1] int32 = 0):
               max |logits.npy - reference prefill logits| over all S rows < 5e-2.
    (diag)     the same logits vs smollm2-135m_reference3_mirror.npz (if present): the torch module
               changed to compute what the converted program computes (RoPE cos/sin tables
               rounded to fp16); separates the package's own deviation from forge-ir's.
               `--prefill-ref mirror` makes this the gating comparison instead.
    (info)     teacher-forced: one `run` over prompt + the 32 reference ids; argmax per generated
               position vs the reference ids, with the reference's and forge-ir's top-2 gaps at
               every disagreement.
  int8 package
    chat       `generate --tokenizer T --chat TEXT --json` answers (printed); prompt ids must equal
               the reference's (the GGUF Jinja template) and the France answer must say "Paris".
    agreement  teacher-forced top-1 (one `run` over prompt + the 32 fp16-weight reference ids)
               vs the reference ids, >= 95% over the 3 prompts.
    (info)     the same vs the int8-weight torch teacher-forced argmax; greedy `--prompt-ids`
               ids vs the int8-weight torch greedy ids.
Exit status 1 when a check fails.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LARGE = os.path.join(ROOT, "models-ir", "large")
FP16 = os.path.join(LARGE, "smollm2-135m-fp16.mlpackage")
INT8 = os.path.join(LARGE, "smollm2-135m-int8.mlpackage")
REF = os.path.join(LARGE, "smollm2-135m_reference3.npz")
MIRROR = os.path.join(LARGE, "smollm2-135m_reference3_mirror.npz")
TOKENIZER = os.path.join(ROOT, "models-ir", "tokenizers", "smollm2.json")
CTX = 2048
MASK_NEG = -1e4
GAP_OK = 0.05
PREFILL_TOL = 5e-2
AGREE_MIN = 0.95
CHAT_MAX_TOKENS = 96


def find_forge_ir(arg):
    if arg:
        return arg
    if os.environ.get("FORGE_IR"):
        return os.environ["FORGE_IR"]
    for p in ("/tmp/build-check/release/forge-ir", os.path.join(ROOT, ".build", "release", "forge-ir")):
        if os.path.exists(p):
            return p
    sys.exit("forge-ir not found: pass --forge-ir or set FORGE_IR (swift build -c release --product forge-ir)")


class Forge:
    def __init__(self, exe, tmp):
        self.exe, self.tmp, self.n = exe, tmp, 0

    def call(self, *args):
        t = time.time()
        r = subprocess.run([self.exe, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"forge-ir {' '.join(args[:3])} … failed ({r.returncode}):\n{r.stderr}{r.stdout}")
        return r.stdout, r.stderr, time.time() - t

    def generate(self, model, *args):
        out, err, dt = self.call("generate", model, *args, "--json")
        return json.loads(out), err.strip().splitlines()[-1] if err.strip() else "", dt

    def logits(self, model, ids):
        """All rows of one prefill call over `ids` at cache offset 0: float32 [S, vocab]."""
        s = len(ids)
        mask = np.full((1, 1, s, CTX), MASK_NEG, dtype=np.float16)
        for r in range(s):
            mask[0, 0, r, : r + 1] = 0.0
        self.n += 1
        npz = os.path.join(self.tmp, f"in{self.n}.npz")
        out = os.path.join(self.tmp, f"out{self.n}")
        np.savez(npz, input_ids=np.asarray(ids, dtype=np.int32).reshape(1, s), causal_mask=mask,
                 position_ids=np.arange(s, dtype=np.int32).reshape(1, s), cache_offset=np.zeros(1, dtype=np.int32))
        _, _, dt = self.call("run", model, "--inputs", npz, "--out", out)
        lg = np.load(os.path.join(out, "logits.npy"))
        assert lg.shape[:2] == (1, s), lg.shape
        shutil.rmtree(out)
        os.remove(npz)
        return lg[0].astype(np.float32), dt


def top2_gap(row):
    a, b = np.sort(row)[-2:][::-1]
    return float(a - b)


def first_diff(a, b):
    for j, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return j
    return None if len(a) == len(b) else min(len(a), len(b))


def utf8(a):
    return bytes(np.asarray(a, dtype=np.uint8)).decode("utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forge-ir")
    ap.add_argument("--fp16", default=FP16)
    ap.add_argument("--int8", default=INT8)
    ap.add_argument("--reference", default=REF)
    ap.add_argument("--mirror", default=MIRROR)
    ap.add_argument("--prefill-ref", choices=["torch", "mirror"], default="torch",
                    help="which prefill reference gates the 5e-2 check (default: the torch module, as issue 4 asks)")
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--json-out", help="write every figure as JSON here")
    args = ap.parse_args()
    exe = find_forge_ir(args.forge_ir)
    for p in (args.fp16, args.int8, args.reference, args.tokenizer):
        if not os.path.exists(p):
            sys.exit(f"missing {p} (see tools/NOTES.md: convert_smollm2.py, smollm2_reference.py)")
    ref = np.load(args.reference)
    mirror = np.load(args.mirror) if os.path.exists(args.mirror) else None
    if args.prefill_ref == "mirror" and mirror is None:
        sys.exit(f"--prefill-ref mirror: missing {args.mirror} (tools/smollm2_reference.py writes it)")
    n_prompts, n_dec = int(ref["n_prompts"]), int(ref["n_decode"])
    tmp = tempfile.mkdtemp(prefix="check_smollm2_")
    fx = Forge(exe, tmp)
    print(f"forge-ir: {exe}\nreference: {args.reference} ({n_prompts} prompts x {n_dec} tokens)\n")
    res = {"forge_ir": exe, "prompts": []}
    ok = True
    try:
        for i in range(n_prompts):
            P = ref[f"p{i}_prompt_ids"].tolist()
            R = ref[f"f16w_p{i}_ids"].tolist()
            gaps = ref[f"f16w_p{i}_top2_gap"]
            R8 = ref[f"i8w_p{i}_ids"].tolist()
            gaps8 = ref[f"i8w_p{i}_top2_gap"]
            text = utf8(ref[f"p{i}_text_utf8"])
            pr = {"prompt": text, "prompt_len": len(P), "ref_ids": R}
            print(f"== prompt {i}: {text!r} ({len(P)} prompt ids)")

            # ---- fp16: greedy ids ---------------------------------------------------------
            g, timing, dt = fx.generate(args.fp16, "--prompt-ids", ",".join(map(str, P)),
                                        "--max-tokens", str(n_dec), "--precision", "fp32")
            ids = g["token_ids"]
            assert g["prompt_ids"] == P
            j = first_diff(ids, R)
            if j is None:
                greedy_ok, note = True, "ids equal"
            else:
                greedy_ok = j < len(R) and j < len(ids) and float(gaps[j]) < GAP_OK
                note = (f"first flip at position {j}: forge-ir {ids[j] if j < len(ids) else None} vs reference "
                        f"{R[j]} (reference top-2 gap {float(gaps[j]):.4f} {'<' if greedy_ok else '>='} {GAP_OK}); "
                        f"equal positions 0..{j - 1}")
            ok &= greedy_ok
            pr["fp16_greedy"] = {"ids": ids, "equal": j is None, "first_diff": j, "ok": greedy_ok,
                                 "ref_gap_at_diff": None if j is None else float(gaps[j]),
                                 "ref_min_gap": float(gaps.min()), "ref_min_gap_pos": int(gaps.argmin()),
                                 "seconds": round(dt, 1), "timing": timing}
            print(f"fp16 greedy: {'OK' if greedy_ok else 'FAIL'} {note} "
                  f"(reference min top-2 gap {gaps.min():.4f} at {int(gaps.argmin())}); {timing}")

            # ---- fp16: prefill logits -------------------------------------------------------
            lg, dt = fx.logits(args.fp16, P)
            want = ref[f"f16w_p{i}_prefill_logits"]
            err = np.abs(lg - want)
            err_last = float(err[-1].max())
            merr = None
            if mirror is not None:
                me = np.abs(lg - mirror[f"p{i}_prefill_logits"])
                merr = {"max_abs_err": float(me.max()), "at_row": int(me.max(-1).argmax()),
                        "max_abs_err_last_row": float(me[-1].max()),
                        "mirror_vs_torch": float(np.abs(mirror[f"p{i}_prefill_logits"] - want).max())}
            gate = float(err.max()) if args.prefill_ref == "torch" else merr["max_abs_err"]
            pre_ok = gate < PREFILL_TOL
            ok &= pre_ok
            r_, c_ = np.unravel_index(int(err.argmax()), err.shape)
            pr["fp16_prefill"] = {"max_abs_err": float(err.max()), "at_row": int(r_), "at_token": int(c_),
                                  "max_abs_err_last_row": err_last, "mean_abs_err": float(err.mean()),
                                  "max_abs_logit": float(np.abs(want).max()),
                                  "argmax_equal_rows": int((lg.argmax(-1) == want.argmax(-1)).sum()),
                                  "rows": len(P), "gated_on": args.prefill_ref, "ok": pre_ok,
                                  "vs_mirror": merr, "seconds": round(dt, 1)}
            print(f"fp16 prefill logits ({args.prefill_ref} gates): {'OK' if pre_ok else 'FAIL'}; vs torch: max|err| "
                  f"{err.max():.4f} (row {r_}, token {c_}), last row {err_last:.4f}, mean {err.mean():.2e}, "
                  f"max|logit| {np.abs(want).max():.1f}; argmax equal on "
                  f"{pr['fp16_prefill']['argmax_equal_rows']}/{len(P)} rows")
            if merr:
                print(f"  vs package mirror: max|err| {merr['max_abs_err']:.4f} (row {merr['at_row']}), last row "
                      f"{merr['max_abs_err_last_row']:.4f}  (mirror vs torch module: {merr['mirror_vs_torch']:.4f})")

            # ---- fp16: teacher-forced (info) ------------------------------------------------
            lg, dt = fx.logits(args.fp16, P + R)
            rows = lg[len(P) - 1: len(P) - 1 + n_dec]
            am = rows.argmax(-1)
            dis = [{"pos": int(k), "forge": int(am[k]), "ref": R[k], "ref_gap": float(gaps[k]),
                    "forge_gap": top2_gap(rows[k])} for k in np.nonzero(am != np.asarray(R))[0]]
            pr["fp16_teacher_forced"] = {"agree": int((am == np.asarray(R)).sum()), "of": n_dec, "disagreements": dis}
            print(f"fp16 teacher-forced top-1: {pr['fp16_teacher_forced']['agree']}/{n_dec}"
                  + "".join(f"; pos {d['pos']}: {d['forge']} vs {d['ref']} (gaps ref {d['ref_gap']:.4f}, "
                            f"forge-ir {d['forge_gap']:.4f})" for d in dis))

            # ---- int8: chat ------------------------------------------------------------------
            c, timing, dt = fx.generate(args.int8, "--tokenizer", args.tokenizer, "--chat", text,
                                        "--max-tokens", str(CHAT_MAX_TOKENS))
            same_prompt = c["prompt_ids"] == P
            chat_ok = same_prompt and (i != 0 or "Paris" in c["text"])
            ok &= chat_ok
            pr["int8_chat"] = {"text": c["text"], "tokens": len(c["token_ids"]), "stop_reason": c["stop_reason"],
                               "prompt_ids_equal_reference": same_prompt, "ok": chat_ok, "timing": timing,
                               "prefill_tok_s": c["prefill_tok_s"], "decode_tok_s": c["decode_tok_s"],
                               "peak_rss_bytes": c["peak_rss_bytes"]}
            print(f"int8 chat: {'OK' if chat_ok else 'FAIL'} (prompt ids {'==' if same_prompt else '!='} reference, "
                  f"{len(c['token_ids'])} tokens, stop: {c['stop_reason']}; {timing})")
            print("  | " + c["text"].strip().replace("\n", "\n  | "))

            # ---- int8: teacher-forced agreement ----------------------------------------------
            lg, dt = fx.logits(args.int8, P + R)
            rows = lg[len(P) - 1: len(P) - 1 + n_dec]
            am = rows.argmax(-1)
            agree = int((am == np.asarray(R)).sum())
            tf8 = ref[f"i8w_p{i}_tf_argmax"]
            agree_t8 = int((am == tf8).sum())
            dis = [{"pos": int(k), "forge": int(am[k]), "ref": R[k], "ref_gap": float(gaps[k]),
                    "forge_gap": top2_gap(rows[k])} for k in np.nonzero(am != np.asarray(R))[0]]
            pr["int8_teacher_forced"] = {"agree": agree, "of": n_dec, "disagreements": dis,
                                         "agree_with_int8_weight_torch": agree_t8, "seconds": round(dt, 1)}
            print(f"int8 teacher-forced top-1 vs fp32 reference: {agree}/{n_dec} ({100 * agree / n_dec:.1f}%)"
                  + "".join(f"; pos {d['pos']}: {d['forge']} vs {d['ref']} (gaps ref {d['ref_gap']:.4f}, "
                            f"forge-ir {d['forge_gap']:.4f})" for d in dis)
                  + f"; vs int8-weight torch: {agree_t8}/{n_dec}")

            # ---- int8: greedy vs int8-weight torch (info) -------------------------------------
            g8, timing, dt = fx.generate(args.int8, "--prompt-ids", ",".join(map(str, P)), "--max-tokens", str(n_dec))
            j8 = first_diff(g8["token_ids"], R8)
            pr["int8_greedy_vs_int8_weight_torch"] = {"ids": g8["token_ids"], "equal": j8 is None, "first_diff": j8,
                                                     "ref_gap_at_diff": None if j8 is None else float(gaps8[j8])}
            print("int8 greedy vs int8-weight torch (info): "
                  + ("ids equal" if j8 is None else
                     f"first flip at {j8}: {g8['token_ids'][j8]} vs {R8[j8]} (torch top-2 gap {float(gaps8[j8]):.4f})")
                  + f"; {timing}\n")
            res["prompts"].append(pr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # ---- summary --------------------------------------------------------------------------
    tot = sum(p["int8_teacher_forced"]["agree"] for p in res["prompts"])
    of = sum(p["int8_teacher_forced"]["of"] for p in res["prompts"])
    agree_ok = tot / of >= AGREE_MIN
    ok &= agree_ok
    res["int8_agreement"] = {"agree": tot, "of": of, "fraction": tot / of, "ok": agree_ok}
    res["ok"] = bool(ok)
    hdr = ("prompt", "fp16 greedy ids", "ref min gap", "fp16 prefill max|err| torch", "vs mirror", "fp16 TF",
           "int8 TF agree", "int8 chat")
    rows = []
    for i, p in enumerate(res["prompts"]):
        g = p["fp16_greedy"]
        rows.append((
            f"{i} ({p['prompt_len']} ids)",
            ("32/32 equal" if g["equal"] else f"flip @{g['first_diff']} gap {g['ref_gap_at_diff']:.3f}")
            + ("" if g["ok"] else " FAIL"),
            f"{g['ref_min_gap']:.3f} @{g['ref_min_gap_pos']}",
            f"{p['fp16_prefill']['max_abs_err']:.4f} (last row {p['fp16_prefill']['max_abs_err_last_row']:.4f})"
            + ("" if p["fp16_prefill"]["ok"] or args.prefill_ref != "torch" else " FAIL"),
            "-" if p["fp16_prefill"]["vs_mirror"] is None else f"{p['fp16_prefill']['vs_mirror']['max_abs_err']:.4f}"
            + ("" if p["fp16_prefill"]["ok"] or args.prefill_ref != "mirror" else " FAIL"),
            f"{p['fp16_teacher_forced']['agree']}/{n_dec}",
            f"{p['int8_teacher_forced']['agree']}/{n_dec}",
            ("Paris" if i == 0 and "Paris" in p["int8_chat"]["text"] else "ok" if p["int8_chat"]["ok"] else "FAIL")
            + f" ({p['int8_chat']['tokens']} tok)",
        ))
    rows.append(("all", "", "", f"< {PREFILL_TOL}" + (" (gates)" if args.prefill_ref == "torch" else ""),
                 f"< {PREFILL_TOL}" + (" (gates)" if args.prefill_ref == "mirror" else ""), "", f"{tot}/{of} = {100 * tot / of:.1f}%"
                 + ("" if agree_ok else " FAIL"), ""))
    w = [max(len(str(r[k])) for r in [hdr] + rows) for k in range(len(hdr))]
    line = lambda r: "| " + " | ".join(str(x).ljust(w[k]) for k, x in enumerate(r)) + " |"  # noqa: E731
    print(line(hdr))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print(line(r))
    print(f"\nresult: {'OK' if ok else 'FAILED'}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
