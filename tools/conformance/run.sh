#!/usr/bin/env bash
# Conformance of forge-ir against coremltools' own MIL op unit tests (iOS14…iOS18).
#
#   bash tools/conformance/run.sh [--per-test N] [--no-harvest] [--sample]
#
# 1. harvest: runs the installed coremltools wheel's op tests under pytest with a recorder in
#    place of the Core ML prediction (tools/conformance/harvest_plugin.py) → one case folder per
#    prediction in tools/conformance/.work/cases (ignored by git; --per-test 30, the default:
#    3383 cases, 1–1.5 hours on 2 busy cores; --per-test 0: all ~19,700, several hours);
# 2. judge: runs every case through the release `forge-ir run` at its test backend's precision
#    and compares as coremltools' compare_backend does — fp32 cases (fp32 programs, fp32 backend)
#    at the test's tolerances, fp16 cases (fp16 backend, or a program the test typed fp16) at the
#    fp16 runtime tolerances, and every case strictly as well (see judge.py) →
#    tools/conformance/.work/{results.json,table.md};
# 3. --sample: refreshes the committed CI sample models-ir/conformance/ from the results.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=tools/.venv/bin/python
WORK=tools/conformance/.work
PER_TEST=30
HARVEST=1
SAMPLE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --per-test) PER_TEST="$2"; shift 2 ;;
    --no-harvest) HARVEST=0; shift ;;
    --sample) SAMPLE=1; shift ;;
    *) echo "usage: bash tools/conformance/run.sh [--per-test N] [--no-harvest] [--sample]" >&2; exit 64 ;;
  esac
done
# release: the judge runs ~3400 programs (debug kernels are several times slower)
swift build -c release --product forge-ir >/dev/null
FORGE=$(swift build -c release --show-bin-path)/forge-ir
if [ "$HARVEST" = 1 ]; then
  "$PY" tools/conformance/harvest.py --out "$WORK" --per-test "$PER_TEST" --jobs 2
fi
"$PY" tools/conformance/judge.py --cases "$WORK/cases" --forge "$FORGE" --out "$WORK" --jobs 2
if [ "$SAMPLE" = 1 ]; then
  "$PY" tools/conformance/sample.py --results "$WORK/results.json" --cases "$WORK/cases"
fi
