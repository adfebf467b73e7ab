#!/usr/bin/env bash
# Memory and decode speed of a Gemma-style decoder with a >= 500 MB per-layer embedding table,
# bound as mapped static inputs (table mode) or fed per token by a provider (provider mode).
# Issue #17. A benchmark, not a test: numbers go to bench/.work/ple-<date>/results.md.
#
#   bash bench/ple_memory.sh                     # generates the models once (tools/make_gemma_ple_fixtures.py --bench)
#   FORGE_IR=/path/to/forge-ir bash bench/ple_memory.sh
#
# Runs (each a fresh process; peak RSS = getrusage ru_maxrss, the `peak_rss_bytes` of
# `generate --json`, and /usr/bin/time's %M when present):
#   1. table mode, short prompt (8 ids) + 16 decode steps
#   2. table mode, long prompt (192 distinct ids) + 16 decode steps  -> RSS growth = rows touched
#   3. table mode, 8 ids + 48 decode steps                           -> no growth per call
#   4. table mode, 192 copies of one id + 16 decode steps            -> growth is per distinct row
#   5-8. the same in provider mode
#   9. control: one `run` call with the table passed as an ordinary --input .npy (a copy)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=bench/.work/gemma_ple
PY=tools/.venv/bin/python
if [ ! -f "$WORK/gemma_ple_provider.mlpackage/Manifest.json" ]; then
    "$PY" tools/make_gemma_ple_fixtures.py --bench "$WORK"
fi
if [ -z "${FORGE_IR:-}" ]; then
    swift build -c release --product forge-ir >/dev/null
    FORGE_IR=.build/release/forge-ir
fi
OUT=bench/.work/ple-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
{ echo "date: $(date -u)"; echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; echo "nproc: $(nproc)";
  echo "load before: $(cat /proc/loadavg)"; } > "$OUT/env.txt"

ids() { "$PY" -c "import sys; n=int(sys.argv[1]); print(','.join(str((i * 7919 + 13) % 65536) for i in range(n)))" "$1"; }
SHORT=$(ids 8)
LONG=$(ids 192)
SAME=$("$PY" -c "print(','.join(['13'] * 192))")

gen() {  # name model contract prompt max_tokens
    local name=$1 model=$2 contract=$3 prompt=$4 n=$5
    /usr/bin/time -f %M -o "$OUT/$name.time" "$FORGE_IR" generate "$WORK/$model" --contract "$WORK/$contract" \
        --prompt-ids "$prompt" --max-tokens "$n" --json > "$OUT/$name.json" 2> "$OUT/$name.err" || { cat "$OUT/$name.err"; exit 1; }
}
gen table_short gemma_ple_table.mlpackage gemma_ple_table.json "$SHORT" 17
gen table_long gemma_ple_table.mlpackage gemma_ple_table.json "$LONG" 17
gen table_decode48 gemma_ple_table.mlpackage gemma_ple_table.json "$SHORT" 49
gen table_same gemma_ple_table.mlpackage gemma_ple_table.json "$SAME" 17
gen provider_short gemma_ple_provider.mlpackage gemma_ple_provider.json "$SHORT" 17
gen provider_long gemma_ple_provider.mlpackage gemma_ple_provider.json "$LONG" 17
gen provider_decode48 gemma_ple_provider.mlpackage gemma_ple_provider.json "$SHORT" 49
gen provider_same gemma_ple_provider.mlpackage gemma_ple_provider.json "$SAME" 17

# Control: the table given as an ordinary input (read into memory, held as Int32) for one call.
if [ ! -f "$WORK/ple_table.npy" ]; then
    "$PY" - "$WORK" <<'EOF'
import sys, numpy as np
w = sys.argv[1]
q = np.memmap(w + "/ple_table.bin", dtype=np.int8, mode="r").reshape(65536, -1)
out = np.lib.format.open_memmap(w + "/ple_table.npy", mode="w+", dtype=np.int8, shape=q.shape)
out[:] = q
out.flush()
EOF
fi
mkdir -p "$OUT/inputs"
"$PY" - "$OUT/inputs" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/input_ids.npy", np.array([[13]], dtype=np.int32))
m = np.full((1, 1, 1, 256), -1e4, dtype=np.float16); m[..., 0] = 0
np.save(d + "/causal_mask.npy", m)
np.save(d + "/position_ids.npy", np.array([[0]], dtype=np.int32))
np.save(d + "/cache_offset.npy", np.array([0], dtype=np.int32))
EOF
RUNIN=()
for n in input_ids causal_mask position_ids cache_offset; do RUNIN+=(--input "$n=$OUT/inputs/$n.npy"); done
/usr/bin/time -f %M -o "$OUT/run_static.time" "$FORGE_IR" run "$WORK/gemma_ple_table.mlpackage" "${RUNIN[@]}" \
    --static-input "ple_table=$WORK/ple_table.npy" --static-input "ple_scale=$WORK/ple_scale.npy" --json > "$OUT/run_static.json"
/usr/bin/time -f %M -o "$OUT/run_copy.time" "$FORGE_IR" run "$WORK/gemma_ple_table.mlpackage" "${RUNIN[@]}" \
    --input "ple_table=$WORK/ple_table.npy" --input "ple_scale=$WORK/ple_scale.npy" --max-memory 8G --json > "$OUT/run_copy.json"
echo "load after: $(cat /proc/loadavg)" >> "$OUT/env.txt"

"$PY" - "$OUT" "$WORK" <<'EOF'
import json, os, sys
out, work = sys.argv[1], sys.argv[2]
MiB = 1 << 20
table = os.path.getsize(work + "/ple_table.bin")
def du(p):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(p) for f in fs)
model_t, model_p = du(work + "/gemma_ple_table.mlpackage"), du(work + "/gemma_ple_provider.mlpackage")
states = 16 * 2 * 256 * 64 * 2
def load(name):
    j = json.load(open(f"{out}/{name}.json"))
    t = open(f"{out}/{name}.time").read().split()
    return j, int(t[-1]) * 1024 if t else None
rows = []
for mode in ("table", "provider"):
    for run, what in (("short", "8-token prompt + 16 decode steps"), ("long", "192-token prompt + 16 decode steps"),
                      ("decode48", "8-token prompt + 48 decode steps"),
                      ("same", "192 × the same id + 16 decode steps")):
        j, tm = load(f"{mode}_{run}")
        rows.append((mode, what, j["peak_rss_bytes"] / MiB, (tm or 0) / MiB, j["decode_tok_s"], j["prefill_tok_s"]))
lines = [f"table: int8 [65536, 8192] = {table / MiB:.0f} MiB; scales fp32 [65536] = 0.25 MiB; "
         f"package (weights) {model_t / MiB:.1f} MiB (table mode), {model_p / MiB:.1f} MiB (provider mode); KV states {states / MiB:.1f} MiB",
         "", "| mode | run | peak RSS (getrusage) | peak RSS (/usr/bin/time) | decode tok/s | prefill tok/s |", "|---|---|---|---|---|---|"]
for m, w, r, t, d, p in rows:
    lines.append(f"| {m} | {w} | {r:.1f} MiB | {t:.1f} MiB | {d:.1f} | {p:.1f} |")
for name, what in (("run_static", "one `run` call, table bound with --static-input (mapped)"),
                   ("run_copy", "one `run` call, table passed with --input (read into memory)")):
    t = open(f"{out}/{name}.time").read().split()
    lines.append(f"| table | {what} | | {int(t[-1]) / 1024:.1f} MiB | | |")
open(out + "/results.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print(open(out + "/env.txt").read())
EOF
