#!/usr/bin/env bash
# Decode speed of every public-recipe package against the memory-bandwidth bound, side by side
# in one run — the README's "Speed across recipes" table.
#
#   bash bench/recipes.sh [-n 64] [-r 3] [-t 2]      -> a markdown table on stdout
#
# Measured on bench-size variants of each recipe (same modules, same conversion, ~250-300 MB of
# weights: tools/make_recipe_fixtures.py --bench, built on demand into the ignored
# models-ir/large/bench/, ~15 min once) and the seed-layout package (models-ir/large/
# seed_layout.mlpackage, tools/make_recipe_fixtures.py --only seed_layout). The committed ~1 MB
# fixtures fit in cache and would measure interpreter overhead, not bandwidth; for them the
# table only says whether `generate` reproduces the torch greedy ids of their JSON.
#
# Per recipe: the detected contract; the fused sites of one decode plan (`generate --profile`:
# attention sites fused / all, KV-write sites fused / all, and calls that fell back to the
# original ops); decode tok/s (forge-ir bench -p 16 -n N -r R --threads T); the bound = read
# bandwidth ÷ (weight bytes as stored + live KV bytes read per token), the bandwidth measured
# by the same bench run right after its decode test (all cores summing — plainly, and with a
# software prefetch 8 KB ahead — a buffer twice the CPU's
# largest cache and at least 256 MiB, so it streams from memory — 600 MiB on a 300 MiB-L3
# Xeon; best of 3 passes of each: DecodeBound.measureReadBandwidth); and tok/s as a fraction of the bound.
# The last two columns: the same probe over a buffer of the bytes one token reads (weights + live
# KV) — the bound of a model the cache holds (a 246 MB package fits a 300 MiB L3), where the
# memory bound above can be exceeded.
set -euo pipefail
cd "$(dirname "$0")/.."
N=64; R=3; T=2
while [ $# -gt 0 ]; do case "$1" in -n) N=$2; shift 2;; -r) R=$2; shift 2;; -t) T=$2; shift 2;; *) echo "usage: $0 [-n N] [-r R] [-t THREADS]" >&2; exit 64;; esac; done
swift build -c release --product forge-ir >/dev/null
BIN=.build/release/forge-ir
PY=${PYTHON:-python3}
VENV=tools/.venv/bin/python
BENCH=models-ir/large/bench
RECIPES="apple_llama31_fp16 apple_llama31_int4 prefill_decode sdpa_seed explicit_kv"
missing=""
for r in $RECIPES; do [ -d "$BENCH/$r.mlpackage" ] || missing="$missing $r"; done
if [ -n "$missing" ]; then
  [ -x "$VENV" ] || { echo "bench/recipes.sh: $BENCH lacks$missing and tools/.venv is missing (bash tools/setup_venv.sh)" >&2; exit 1; }
  echo "building bench-size recipes:$missing (tools/make_recipe_fixtures.py --bench)" >&2
  only=$(for r in $missing; do case $r in apple_*) echo apple_llama31;; *) echo "$r";; esac; done | sort -u | tr '\n' ' ')
  "$VENV" tools/make_recipe_fixtures.py --bench --only $only >&2
fi
PROBE=$(mktemp)
trap 'rm -f "$PROBE"' EXIT
load0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
echo "| recipe (bench size) | contract | weights MB | fused: attention · KV writes · fallbacks | committed fixture = torch ids | decode tok/s | bound tok/s | % of bound | working-set bound tok/s | % of it |"
echo "|---|---|---:|---|---|---:|---:|---:|---:|---:|"
for name in $RECIPES seed_layout; do
  if [ "$name" = seed_layout ]; then pkg=models-ir/large/seed_layout.mlpackage; small=$pkg; else pkg=$BENCH/$name.mlpackage; small=models-ir/recipes/$name.mlpackage; fi
  [ -d "$pkg" ] || { echo "| $name | (missing: $pkg) | | | | | | | | |"; continue; }
  ref="${small%.mlpackage}.json"
  same="—"
  if [ -f "$ref" ]; then
    prompt=$($PY -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" "$ref")
    want=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['greedy_ids'])" "$ref")
    got=$($BIN generate "$small" --prompt-ids "$prompt" --max-tokens 17 --json 2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['token_ids'])")
    same=$([ "$want" = "$got" ] && echo yes || echo "NO")
  fi
  # The decode plan's fusion report (the last function printed is the decode one).
  fused=$($BIN generate "$pkg" --prompt-ids 1,2,3 --max-tokens 3 --threads "$T" --profile 2>&1 >/dev/null | $PY -c "
import sys, re
lines = sys.stdin.read().split('\n')
start = max(i for i, l in enumerate(lines) if l.startswith('fusion')) if any(l.startswith('fusion') for l in lines) else None
att = wr = '0 of 0'; fell = 0
if start is not None:
    for l in lines[start + 1:]:
        m = re.match(r'(\S+)\s+(\d+ of \d+) · (\d+) / (\d+)', l)
        if not m: continue
        if m.group(1) == 'state_write': wr = m.group(2)
        elif m.group(1) in ('attention', 'scaled_dot_product_attention'):
            att = m.group(2) + ' ' + ('SDPA' if m.group(1) == 'scaled_dot_product_attention' else 'softmax·matmul')
        fell += int(m.group(4))
print('%s · %s · %d' % (att, wr, fell))")
  $BIN bench "$pkg" -p 16 -n "$N" -r "$R" --threads "$T" --json | $PY -c "
import json,sys
d=json.load(sys.stdin)
open('$PROBE', 'w').write('%d MiB probe (largest cache %d MiB), %.1f GB/s' % (d['bandwidth_probe_bytes'] >> 20, d['largest_cache_bytes'] >> 20, d['read_bandwidth_bytes_s'] / 1e9))
print('| %s | %s | %.0f | %s | %s | %.1f ± %.1f | %.1f | %.0f %% | %.1f | %.0f %% |' % ('$name', d['contract'], d['decode_weight_bytes_per_token'] / 1e6, '$fused', '$same',
      d['decode_tok_s'], d['decode_tok_s_sd'], d['decode_bound_tok_s'], 100 * d['decode_fraction_of_bound'],
      d['decode_bound_working_set_tok_s'], 100 * d['decode_fraction_of_working_set_bound']))"
done
load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
echo
echo "threads: $T of $(nproc) · read bandwidth: measured by each bench run (all cores summing a buffer twice the largest cache, best of 3 plain and 3 prefetching passes; the last: $(cat "$PROBE")) · load average $load0 → $load1 during the run (above ~0.5 the machine was shared: figures are low)"
