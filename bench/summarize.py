#!/usr/bin/env python3
"""Summarize an alternating benchmark run written by bench/compare_llamacpp.sh.

  python3 bench/summarize.py RESULTS_DIR [--markdown]

RESULTS_DIR holds round<k>-llamacpp.json (llama-bench -o json), round<k>-forge-ir.json
(forge-ir bench --json), optionally round<k>-pytorch.json (bench/torch_bench.py) and
round<k>-<engine>.stat ("peak_rss_kib user_s sys_s elapsed_s foreign_cores": /usr/bin/time and
the CPU other processes used during the run). Prints per-round figures, then one
table (the README's): per engine the ISA its kernels ran at, tokens/s as the median over rounds
of each round's median repetition, with the spread (lowest–highest round), the forge-ir /
llama.cpp ratios of those medians (and the range of the per-round ratios), and the peak RSS
(forge-ir's against its package size). RESULTS_DIR/isa.txt (written by compare_llamacpp.sh)
names llama.cpp's ISA (a -march=native build: the CPU's). Also writes RESULTS_DIR/summary.json.
Standard library only.
"""

import glob
import json
import os
import re
import statistics
import sys

FOREIGN_LIMIT = 0.15  # cores used by other processes during a run above which its round is flagged

ENGINES = [("llamacpp", "llama.cpp Q8_0"), ("forge-ir", "forge-ir int8 (fp32 activations)"),
           ("forge-ir-q16", "forge-ir int8, --activations int16"),
           ("forge-ir-q8", "forge-ir int8, --activations int8"), ("pytorch", "PyTorch eager fp32")]
FORGE = ("forge-ir", "forge-ir-q16", "forge-ir-q8")


def load_round(path, engine):
    with open(path) as f:
        data = json.load(f)
    out = {"pp": [], "tg": [], "tgd": [], "depth": None, "rss": None, "size": None, "n_prompt": None, "n_gen": None,
           "threads": None}
    if engine == "llamacpp":
        for t in data:
            if t["n_prompt"] > 0 and t["n_gen"] == 0:
                out["pp"] = list(t["samples_ts"])
                out["n_prompt"] = t["n_prompt"]
            elif t["n_gen"] > 0 and t["n_prompt"] == 0:
                out["tg"] = list(t["samples_ts"])
                out["n_gen"] = t["n_gen"]
            out["size"] = t["model_size"]
            out["threads"] = t["n_threads"]
            out["build"] = t.get("build_commit")
            out["model_type"] = t.get("model_type")
    else:
        out["pp"] = list(data.get("prefill_samples_tok_s") or [])
        out["tg"] = list(data.get("decode_samples_tok_s") or [])
        out["rss"] = data.get("peak_rss_bytes")
        out["size"] = data.get("model_size_bytes")
        out["n_prompt"] = data.get("n_prompt")
        out["n_gen"] = data.get("n_gen")
        out["threads"] = data.get("threads")
        out["kernel_isa"] = data.get("kernel_isa")
        out["simd_level"] = data.get("simd_level")
        out["activations"] = data.get("activations") or ("int8" if data.get("int8_activations") else "fp32")
    depth_file = path[: -len(".json")] + "-depth.json"
    if os.path.exists(depth_file):
        with open(depth_file) as f:
            dd = json.load(f)
        if engine == "llamacpp":
            for t in dd:
                if t["n_gen"] > 0 and t["n_prompt"] == 0:
                    out["tgd"] = list(t["samples_ts"])
                    out["depth"] = t.get("n_depth")
        else:
            out["tgd"] = list(dd.get("decode_samples_tok_s") or [])
            out["depth"] = dd.get("n_depth")
            out["rss_depth"] = dd.get("peak_rss_bytes")
    stat_file = path[: -len(".json")] + ".stat"
    out["foreign"] = None
    if os.path.exists(stat_file):
        fields = open(stat_file).read().split()
        if fields and fields[0].isdigit():
            out["process_rss"] = int(fields[0]) * 1024
        if len(fields) >= 5:
            out["foreign"] = float(fields[4])
    return out


def stats(x):
    if not x:
        return None, None
    return statistics.median(x), (statistics.stdev(x) if len(x) > 1 else 0.0)


def over_rounds(rs, key):
    """(median over rounds of the per-round medians, lowest round, highest round), or Nones."""
    per = [statistics.median(r[key]) for r in rs if r[key]]
    if not per:
        return None, None, None
    return statistics.median(per), min(per), max(per)


def fmt(m, lo, hi):
    return "—" if m is None else f"{m:.1f} ({lo:.1f}–{hi:.1f})"


def mib(b):
    return "—" if b is None else f"{b / 1048576:.1f} MiB"


ISA_TXT = {}


def isa_of(engine, r):
    """The ISA an engine's kernels ran at: forge-ir's simd level (+ VNNI when its int8 route used
    it), llama.cpp's from isa.txt (its -march=native build)."""
    if engine == "llamacpp":
        return ISA_TXT.get("llamacpp", "native")
    level = r.get("simd_level")
    if level is None:
        return "—"
    vals = set((r.get("kernel_isa") or {}).values())
    name = {0: "portable", 1: "AVX2+FMA", 2: "AVX-512"}.get(level, str(level))
    return name + (" + VNNI" if r.get("activations") in ("int8", "int16") and any("vnni" in v for v in vals) else "")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    markdown = "--markdown" in sys.argv
    isa_file = os.path.join(d, "isa.txt")
    if os.path.exists(isa_file):
        for line in open(isa_file):
            if ":" in line:
                k, v = line.split(":", 1)
                ISA_TXT[k.strip()] = v.strip()
    rounds = sorted({int(m.group(1)) for p in glob.glob(os.path.join(d, "round*-*.json"))
                     if (m := re.search(r"round(\d+)-", os.path.basename(p)))})
    results = {e: [] for e, _ in ENGINES}
    for k in rounds:
        for e, _ in ENGINES:
            p = os.path.join(d, f"round{k}-{e}.json")
            if os.path.exists(p):
                results[e].append(load_round(p, e))
    if not results["llamacpp"] or not results["forge-ir"]:
        sys.exit(f"{d}: no llama.cpp or forge-ir results")

    P = results["forge-ir"][0]["n_prompt"]
    N = results["forge-ir"][0]["n_gen"]
    print(f"per round (tokens/s, mean of the round's repetitions; [cores used by other processes meanwhile]):")
    clean = []
    for i, k in enumerate(rounds):
        parts = []
        dirty = False
        for e, label in ENGINES:
            if i < len(results[e]):
                r = results[e][i]
                f = r.get("foreign")
                if f is not None and f > FOREIGN_LIMIT and e in ("llamacpp",) + FORGE:
                    dirty = True
                ftext = "" if f is None else f" [{f:.2f}]"
                dtext = f", tg{N}@d{r['depth']} {stats(r['tgd'])[0] or 0:.1f}" if r["tgd"] else ""
                parts.append(f"{label}: pp{P} {stats(r['pp'])[0] or 0:.1f}, tg{N} {stats(r['tg'])[0] or 0:.1f}{dtext}{ftext}")
        clean.append(not dirty)
        print(f"  round {k}{' (LOADED)' if dirty else ''}: " + " | ".join(parts))
    print()
    n_clean = sum(clean)
    if 0 < n_clean < len(rounds):
        print(f"table over the {n_clean} round(s) where other processes used ≤ {FOREIGN_LIMIT} core during both engines' runs")
        for e, _ in ENGINES:
            results[e] = [r for r, c in zip(results[e], clean) if c] if len(results[e]) == len(clean) else results[e]
        rounds = [k for k, c in zip(rounds, clean) if c]
    elif n_clean == 0 and any(r.get("foreign") is not None for r in results["forge-ir"]):
        print(f"WARNING: every round ran beside other processes using > {FOREIGN_LIMIT} core: figures are low and noisy")

    D = next((r["depth"] for r in results["forge-ir"] if r["depth"]), None)
    summary = {"rounds": len(rounds), "rounds_clean": n_clean, "n_prompt": P, "n_gen": N, "n_depth": D, "engines": {}}
    rows = []
    for e, label in ENGINES:
        rs = results[e]
        if not rs:
            continue
        pp = [x for r in rs for x in r["pp"]]
        tg = [x for r in rs for x in r["tg"]]
        tgd = [x for r in rs for x in r["tgd"]]
        (ppm, pplo, pphi), (tgm, tglo, tghi), (tgdm, tgdlo, tgdhi) = (over_rounds(rs, k) for k in ("pp", "tg", "tgd"))
        pps, tgs, tgds = stats(pp)[1], stats(tg)[1], stats(tgd)[1]
        rss = max((r.get("rss") or r.get("process_rss") or 0) for r in rs) or None
        foreign = [r["foreign"] for r in rs if r.get("foreign") is not None]
        size = rs[0]["size"]
        summary["engines"][e] = {
            "prefill_tok_s": ppm, "prefill_tok_s_sd": pps, "decode_tok_s": tgm, "decode_tok_s_sd": tgs,
            "prefill_samples_tok_s": pp, "decode_samples_tok_s": tg, "peak_rss_bytes": rss, "model_size_bytes": size,
            "threads": rs[0]["threads"], "foreign_cores_max": max(foreign) if foreign else None,
            "decode_depth_tok_s": tgdm, "decode_depth_tok_s_sd": tgds, "decode_depth_samples_tok_s": tgd,
            "kernel_isa": rs[0].get("kernel_isa"), "simd_level": rs[0].get("simd_level"),
        }
        if e == "llamacpp":
            summary["engines"][e]["build_commit"] = rs[0].get("build")
        summary["engines"][e]["isa"] = isa_of(e, rs[0])
        rss_text = mib(rss)
        if e in FORGE and rss and size and size >= 64 << 20:
            rss_text += f" ({rss / size:.2f}×)"
        rows.append([label, isa_of(e, rs[0]), fmt(ppm, pplo, pphi), fmt(tgm, tglo, tghi), fmt(tgdm, tgdlo, tgdhi), rss_text])

    lc, fi = summary["engines"]["llamacpp"], summary["engines"]["forge-ir"]

    def ratio(e, key, samples_key):
        f = summary["engines"][e]
        if not lc[key] or f[key] is None:
            return None, None, None
        per_round = []
        for a, b in zip(results[e], results["llamacpp"]):
            ma, mb = stats(a[samples_key])[0], stats(b[samples_key])[0]  # per-round medians
            if ma and mb:
                per_round.append(ma / mb)
        return f[key] / lc[key], min(per_round), max(per_round)

    def rfmt(r, lo, hi):
        return "—" if r is None else f"{r:.2f}× ({lo:.2f}–{hi:.2f})"

    for e in FORGE:
        if e not in summary["engines"]:
            continue
        pr, prlo, prhi = ratio(e, "prefill_tok_s", "pp")
        dr, drlo, drhi = ratio(e, "decode_tok_s", "tg")
        ddr, ddrlo, ddrhi = ratio(e, "decode_depth_tok_s", "tgd")
        key = "" if e == "forge-ir" else "_" + e.split("-")[-1]
        summary["ratio_prefill" + key] = pr
        summary["ratio_decode" + key] = dr
        summary["ratio_decode_depth" + key] = ddr
        summary["ratio_prefill_per_round" + key] = [prlo, prhi]
        summary["ratio_decode_per_round" + key] = [drlo, drhi]
        summary["ratio_decode_depth_per_round" + key] = [ddrlo, ddrhi]
        rows.append([dict(ENGINES)[e].split(" (")[0] + " / llama.cpp", "", rfmt(pr, prlo, prhi), rfmt(dr, drlo, drhi),
                     rfmt(ddr, ddrlo, ddrhi), ""])
    if "pytorch" in summary["engines"] and summary["engines"]["pytorch"]["prefill_tok_s"]:
        pt = summary["engines"]["pytorch"]
        rows.append(["forge-ir / PyTorch", "", f"{fi['prefill_tok_s'] / pt['prefill_tok_s']:.2f}×",
                     f"{fi['decode_tok_s'] / pt['decode_tok_s']:.2f}×", "", ""])
    header = ["engine", "ISA", f"pp{P} t/s", f"tg{N} t/s", f"tg{N} @ d{D} t/s" if D else "tg @ depth", "peak RSS"]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    if markdown:
        print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
        print("| " + " | ".join(("-" * w) if i == 0 else ("-" * (w - 1) + ":") for i, w in enumerate(widths)) + " |")
        for r in rows:
            print("| " + " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |")
    else:
        print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
        for r in rows:
            print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print()
    n_samples = len(fi["prefill_samples_tok_s"] or fi["decode_samples_tok_s"])
    print(f"tokens/s: median over {len(rounds)} alternating rounds of each round's median repetition "
          f"({n_samples} repetitions in all), (lowest–highest round); ratios of those medians (range of the per-round ratios)")
    if fi["peak_rss_bytes"] and fi["model_size_bytes"]:
        r = fi["peak_rss_bytes"] / fi["model_size_bytes"]
        summary["forge_ir_rss_over_package"] = r
        print(f"forge-ir peak RSS {mib(fi['peak_rss_bytes'])} = {r:.2f}× its package ({mib(fi['model_size_bytes'])})")
    for e in FORGE:
        isa = summary["engines"].get(e, {}).get("kernel_isa")
        if isa:
            print(f"{e} kernel ISA (simd level {summary['engines'][e]['simd_level']}): " + ", ".join(f"{k} {v}" for k, v in sorted(isa.items())))
    lrss = lc.get("peak_rss_bytes")
    if lrss:
        print(f"llama-bench process peak RSS {mib(lrss)} (GGUF {mib(lc['model_size_bytes'])}, mmap'ed)")
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
