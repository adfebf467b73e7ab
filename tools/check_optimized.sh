#!/usr/bin/env bash
# coremltools acceptance of `forge-ir optimize` (issue 5). Manual check: needs tools/.venv
# (bash tools/setup_venv.sh); CI has no Python.
#
#   tools/check_optimized.sh [OUT_DIR]
#
# 1. builds the CLI (FORGE_IR=/path/to/forge-ir skips the build; SCRATCH=... picks the
#    build folder, default .build);
# 2. models-ir/coremltools_crash_end_index.mlpackage: coremltools' default pass pipeline on the
#    original (expected: FAILED … Cannot delete op 'end_1' …), then on the optimized package
#    (expected: OK);
# 3. models-ir/tiny_llama_dynamic_end.mlpackage: optimize, then in coremltools: the package loads
#    (skip_model_load=True), its default pipeline runs, and linear_quantize_weights (per_block
#    int8, block 32) succeeds and saves;
# 4. tools/check_fuse_dequant.py: fuse_dequant's output (dequantize → blockwise / affine,
#    transpose and reshape folded) loads in coremltools with exact values.
set -u
cd "$(dirname "$0")/.."
PY=tools/.venv/bin/python
OUT=${1:-$(mktemp -d /tmp/forge-ir-check-XXXXXX)}
mkdir -p "$OUT"
if [ -z "${FORGE_IR:-}" ]; then
  SCRATCH=${SCRATCH:-.build}
  swift build --scratch-path "$SCRATCH" --product forge-ir >/dev/null || exit 1
  FORGE_IR="$(swift build --scratch-path "$SCRATCH" --show-bin-path)/forge-ir"
fi
quiet() { grep -v -e '^Failed to load' -e 'Running MIL' -e 'Running compression' -e '^$'; }
status=0

echo "== coremltools_crash_end_index: original"
$PY tools/check_coremltools_pipeline.py models-ir/coremltools_crash_end_index.mlpackage 2>&1 | quiet
echo "== coremltools_crash_end_index: forge-ir optimize"
"$FORGE_IR" optimize models-ir/coremltools_crash_end_index.mlpackage -o "$OUT/crash_optimized.mlpackage" || status=1
echo "== coremltools_crash_end_index: optimized"
$PY tools/check_coremltools_pipeline.py "$OUT/crash_optimized.mlpackage" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== tiny_llama_dynamic_end: forge-ir optimize"
"$FORGE_IR" optimize models-ir/tiny_llama_dynamic_end.mlpackage -o "$OUT/tiny_llama_dynamic_end_optimized.mlpackage" || status=1
echo "== tiny_llama_dynamic_end: optimized, in coremltools"
$PY tools/check_coremltools_pipeline.py "$OUT/tiny_llama_dynamic_end_optimized.mlpackage" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
$PY tools/check_optimized.py "$OUT/tiny_llama_dynamic_end_optimized.mlpackage" \
    --quantized-out "$OUT/tiny_llama_dynamic_end_optimized_int8.mlpackage" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== fuse_dequant output in coremltools (tools/check_fuse_dequant.py)"
$PY tools/check_fuse_dequant.py "$FORGE_IR" "$OUT" 2>&1 | quiet
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== result: $([ $status -eq 0 ] && echo OK || echo FAILED) (packages in $OUT)"
exit $status
