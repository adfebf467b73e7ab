#!/usr/bin/env bash
# Manual check of `forge-ir optimize --fix` on the catalogue fixtures: each fixed package is
# loaded by coremltools 9 (MLModel(skip_model_load=True) + milproto load, tools/check_package.py)
# and run through coremltools' default pass pipeline (tools/check_coremltools_pipeline.py).
# The original packages go through the pipeline check too, to show what the fix changed.
# Then specialize_sequence on the Apple-recipe fixtures (every function static) must load too.
# Usage: bash tools/check_fixes.sh [forge-ir binary]   (default .build/debug/forge-ir)
set -u
cd "$(dirname "$0")/.."
BIN=${1:-.build/debug/forge-ir}
PY=tools/.venv/bin/python
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for m in diag/cat_gather_index_narrowed diag/cat_rmsnorm_eps_scaled diag/cat_log_softmax diag/cat_slice_update_short \
         diag/cat_state_write_5d diag/cat_rank0_expand_dims coremltools_crash_end_index diag/apple_recipe_llama; do
    name=$(basename "$m")
    "$BIN" optimize "models-ir/$m.mlpackage" -o "$OUT/$name.mlpackage" --fix > /dev/null 2>&1 || { echo "$name: optimize --fix FAILED"; continue; }
    if "$PY" tools/check_package.py "$OUT/$name.mlpackage" --no-raw > /dev/null 2>"$OUT/err"; then load=loads; else load="LOAD FAILED: $(tail -1 "$OUT/err")"; fi
    before=$("$PY" tools/check_coremltools_pipeline.py "models-ir/$m.mlpackage" 2>/dev/null | tail -1)
    after=$("$PY" tools/check_coremltools_pipeline.py "$OUT/$name.mlpackage" 2>/dev/null | tail -1)
    echo "$name: coremltools 9 $load; default pipeline before: $before; after: $after"
done
# specialize_sequence on the Apple-recipe packages: prefill S=7 (END=7) and two decode points.
for m in recipes/apple_llama31_fp16 recipes/apple_llama31_int4; do
    name=$(basename "$m")_static
    "$BIN" optimize "models-ir/$m.mlpackage" -o "$OUT/$name.mlpackage" --passes specialize_sequence \
        --pass-option specialize_sequence.sizes=7:7,1:8,1:9 > /dev/null 2>&1 || { echo "$name: optimize FAILED"; continue; }
    if "$PY" tools/check_package.py "$OUT/$name.mlpackage" --no-raw > "$OUT/summary.json" 2>"$OUT/err"; then
        load="loads functions $("$PY" -c 'import json,sys; print(", ".join(sorted(json.load(open(sys.argv[1]))["functions"])))' "$OUT/summary.json")"
    else load="LOAD FAILED: $(tail -1 "$OUT/err")"; fi
    echo "$name: coremltools 9 $load"
done
