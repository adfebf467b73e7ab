#!/usr/bin/env bash
# Runs one libFuzzer target of FuzzTesting/ for SECONDS seconds.
#   bash scripts/fuzz.sh FuzzModelLoader|FuzzNPY|FuzzRun SECONDS [libFuzzer options…]
# Builds the target (release, -sanitize=fuzzer,address), seeds FuzzTesting/corpus/<TARGET>/
# from models-ir/ the first time, and runs with an RSS limit of 2 GiB, a single-allocation
# limit of 512 MiB (twice the 256 MiB memory budget the targets set) and a 10 s per-input
# timeout: a crash, a hang or an over-budget allocation is a finding, written to
# FuzzTesting/findings/<TARGET>/. libFuzzer's final statistics (number of executed units)
# are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer options]}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer options]}
shift 2
case "$target" in
  FuzzModelLoader|FuzzNPY|FuzzRun|FuzzMILText) ;;
  *) echo "fuzz.sh: unknown target '$target' (FuzzModelLoader, FuzzNPY, FuzzRun, FuzzMILText)" >&2; exit 64 ;;
esac
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting --product "$target" >&2
bin=FuzzTesting/.build/release/$target
[ -x "$bin" ] || bin=$(ls FuzzTesting/.build/*/release/"$target" 2>/dev/null | head -1)
corpus=FuzzTesting/corpus/$target
findings=FuzzTesting/findings/$target
mkdir -p "$corpus" "$findings"

le32() {
  local n=$1
  printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x$(printf %02x $(((n >> 24) & 255)))"
}
small() { [ -f "$1" ] && [ "$(stat -c %s "$1")" -le 131072 ]; }

if [ -z "$(ls -A "$corpus")" ]; then
  i=0
  case "$target" in
    FuzzModelLoader)
      # u32 spec length, spec, weight file (empty for inline-constant models).
      for m in models-ir/*.mlmodel models-ir/hostile/*.mlmodel; do
        small "$m" || continue
        { le32 "$(stat -c %s "$m")"; cat "$m"; } > "$corpus/seed-$((i++))"
      done
      for p in models-ir/*.mlpackage models-ir/hostile/*.mlpackage; do
        s=$p/Data/com.apple.CoreML/model.mlmodel; w=$p/Data/com.apple.CoreML/weights/weight.bin
        small "$s" || continue
        if [ -f "$w" ] && ! small "$w"; then continue; fi
        { le32 "$(stat -c %s "$s")"; cat "$s"; [ -f "$w" ] && cat "$w"; } > "$corpus/seed-$((i++))"
      done ;;
    FuzzNPY)
      # selector byte 0 (.npy) or 1 (.npz), then the file.
      for f in $(find models-ir -name '*.npy' -size -128k) ; do { printf '\x00'; cat "$f"; } > "$corpus/seed-$((i++))"; done
      for f in $(find models-ir -name '*.npz' -size -128k) ; do { printf '\x01'; cat "$f"; } > "$corpus/seed-$((i++))"; done ;;
    FuzzRun)
      for m in models-ir/*.mlmodel models-ir/hostile/*.mlmodel; do
        small "$m" && cp "$m" "$corpus/seed-$((i++))"
      done ;;
    FuzzMILText)
      for f in $(find models-ir -name '*.mil' -size -128k); do cp "$f" "$corpus/seed-$((i++))"; done ;;
  esac
  echo "fuzz.sh: seeded $corpus with $i inputs from models-ir/" >&2
fi

exec "$bin" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
  -max_len=131072 -artifact_prefix="$findings/" -print_final_stats=1 "$@"
