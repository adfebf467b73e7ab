#!/usr/bin/env bash
# Decode speed of every recipe fixture against the memory-bandwidth bound, side by side in one
# run (tools/make_recipe_fixtures.py; the seed-layout package when models-ir/large/ has it).
#
#   bash bench/recipes.sh [-n 64] [-r 3]        -> a markdown table on stdout
#
# Per recipe: the detected contract, whether `generate` reproduces the torch greedy ids of the
# fixture's JSON, decode tok/s (forge-ir bench, -p 16), the bound (read bandwidth measured by
# the same bench run ÷ weight + live KV bytes per token) and the fraction of it.
set -euo pipefail
cd "$(dirname "$0")/.."
N=32; R=3
while [ $# -gt 0 ]; do case "$1" in -n) N=$2; shift 2;; -r) R=$2; shift 2;; *) echo "usage: $0 [-n N] [-r R]" >&2; exit 64;; esac; done
swift build -c release --product forge-ir >/dev/null
BIN=.build/release/forge-ir
PY=${PYTHON:-python3}
echo "| recipe | contract | greedy ids = torch | decode tok/s | bound tok/s | % of bound |"
echo "|---|---|---|---:|---:|---:|"
for pkg in models-ir/recipes/*.mlpackage models-ir/large/seed_layout.mlpackage; do
  [ -d "$pkg" ] || continue
  name=$(basename "$pkg" .mlpackage); ref="${pkg%.mlpackage}.json"
  prompt=$($PY -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" "$ref")
  want=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['greedy_ids'])" "$ref")
  got=$($BIN generate "$pkg" --prompt-ids "$prompt" --max-tokens 17 --json 2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['token_ids'])")
  same=$([ "$want" = "$got" ] && echo yes || echo "NO")
  $BIN bench "$pkg" -p 16 -n "$N" -r "$R" --json | $PY -c "
import json,sys
d=json.load(sys.stdin)
print('| %s | %s | %s | %.1f ± %.1f | %.1f | %.0f %% |' % ('$name', d['contract'], '$same', d['decode_tok_s'], d['decode_tok_s_sd'],
      d['decode_bound_tok_s'], 100 * d['decode_fraction_of_bound']))"
done
echo
echo "threads: $(nproc) · read bandwidth: measured by each bench run (all cores summing 256 MiB, best of 3)"
