#!/usr/bin/env bash
# fp16 RMSNorm overflow on the real SmolLM2-135M (issue 6). Manual check, not in CI: needs
# models-ir/large/smollm2-135m-fp16-naive.mlpackage
# (tools/.venv/bin/python tools/convert_smollm2.py --naive-rmsnorm, ~3 min).
#
#   tools/check_fp16_rmsnorm.sh [OUT_DIR]
#
# 1. builds the CLI in release (FORGE_IR=/path/to/forge-ir skips the build; SCRATCH=... picks
#    the build folder, default .build);
# 2. `diagnose --precision fp16 --dynamic` on the naive package: expected one error,
#    fp16_overflow at the square of an RMSNorm, fix fp16_safe_rms_norm; S=1 matches S=16;
# 3. `optimize --passes fp16_safe_rms_norm` → OUT_DIR/smollm2-135m-fp16-naive-safe.mlpackage,
#    then `diagnose --precision fp16` on it: expected no error;
# 4. greedy `generate` (the 16-token chat prompt of NOTES.md, 32 tokens): naive package in fp32
#    mode (the reference), naive in fp16 mode (expected: different), fixed in fp16 mode
#    (expected: the reference tokens), fixed in fp32 mode (expected: the reference tokens).
set -u
cd "$(dirname "$0")/.."
NAIVE=models-ir/large/smollm2-135m-fp16-naive.mlpackage
OUT=${1:-$(mktemp -d /tmp/forge-ir-fp16-XXXXXX)}
mkdir -p "$OUT"
[ -d "$NAIVE" ] || { echo "missing $NAIVE: tools/.venv/bin/python tools/convert_smollm2.py --naive-rmsnorm"; exit 2; }
if [ -z "${FORGE_IR:-}" ]; then
  SCRATCH=${SCRATCH:-.build}
  swift build -c release --scratch-path "$SCRATCH" --product forge-ir >/dev/null || exit 1
  FORGE_IR="$(swift build -c release --scratch-path "$SCRATCH" --show-bin-path)/forge-ir"
fi
PROMPT=1,4093,198,1780,314,260,3575,282,4649,47,2,198,1,520,9531,198
N=${N:-32}
FIXED="$OUT/smollm2-135m-fp16-naive-safe.mlpackage"
status=0

echo "== diagnose --precision fp16 --dynamic: $NAIVE"
"$FORGE_IR" diagnose "$NAIVE" --precision fp16 --dynamic > "$OUT/diagnose_naive.txt"
echo "exit $?"
awk '/^info\[/ { skip = 1; next } /^[^ ]/ { skip = 0 } !skip' "$OUT/diagnose_naive.txt"   # the 61 notes left out
grep -m1 -A3 '^info\[' "$OUT/diagnose_naive.txt"
grep -q '^error\[fp16_overflow\]' "$OUT/diagnose_naive.txt" || { echo "FAILED: no fp16_overflow finding"; status=1; }

echo "== optimize --passes fp16_safe_rms_norm"
"$FORGE_IR" optimize "$NAIVE" -o "$FIXED" --passes fp16_safe_rms_norm | grep -E '^(abs|maximum|real_div|reduce_max|mul|total) |fp16_safe_rms_norm' || status=1

echo "== diagnose --precision fp16: fixed"
"$FORGE_IR" diagnose "$FIXED" --precision fp16 > "$OUT/diagnose_fixed.txt"
echo "exit $?"
grep -A1 '^runtime checks' "$OUT/diagnose_fixed.txt"; tail -1 "$OUT/diagnose_fixed.txt"

gen() {  # model precision name
  "$FORGE_IR" generate "$1" --prompt-ids "$PROMPT" --max-tokens "$N" --precision "$2" --json > "$OUT/$3.json" 2> "$OUT/$3.err"
  python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['token_ids'])))" "$OUT/$3.json"
}
echo "== generate (greedy, $N tokens)"
ref=$(gen "$NAIVE" fp32 naive_fp32);   echo "naive  fp32: $ref"
broken=$(gen "$NAIVE" fp16 naive_fp16); echo "naive  fp16: $broken"
fixed16=$(gen "$FIXED" fp16 fixed_fp16); echo "fixed  fp16: $fixed16"
fixed32=$(gen "$FIXED" fp32 fixed_fp32); echo "fixed  fp32: $fixed32"
[ "$broken" != "$ref" ] || echo "note: the naive package's fp16 tokens match fp32 on this prompt"
[ "$fixed16" = "$ref" ] && echo "OK: fixed fp16 tokens == fp32 tokens" || { echo "FAILED: fixed fp16 tokens differ from fp32"; status=1; }
[ "$fixed32" = "$ref" ] && echo "OK: fixed fp32 tokens == original fp32 tokens" || { echo "FAILED: fixed fp32 tokens differ"; status=1; }
echo "== result: $([ $status = 0 ] && echo OK || echo FAILED) (outputs in $OUT)"
exit $status
