#!/usr/bin/env bash
# Build and run one libFuzzer target of FuzzTesting/ for a number of seconds.
#
#   scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags…]     e.g. scripts/fuzz.sh FuzzModelLoader 600
#
# TARGET: FuzzMILText, FuzzModelLoader, FuzzNPY or FuzzRun (see FuzzTesting/README.md).
# Builds FuzzTesting/ in release with -sanitize=fuzzer,address (skipped with FUZZ_NO_BUILD=1),
# seeds the corpus (FuzzTesting/.work/corpus-TARGET, kept between runs) from the committed
# fixtures, runs one job on one core with a 2 GB RSS limit and a 10 s per-input timeout, and
# prints libFuzzer's final statistics (stat::number_of_executed_units = the execution count).
# The loader/npy/run targets set a 256 MiB memory budget and run with -malloc_limit_mb=512, so
# any allocation past the budget is a finding. Crashing inputs are written to
# FuzzTesting/.work/artifacts-TARGET/. Exit status: libFuzzer's (0 = nothing found).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2

[ "${FUZZ_NO_BUILD:-0}" = 1 ] || swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting --product "$target"
bin=FuzzTesting/.build/release/$target
[ -x "$bin" ] || bin=$(ls FuzzTesting/.build/*/release/"$target" 2>/dev/null | head -1)

work=FuzzTesting/.work
corpus=$work/corpus-$target
artifacts=$work/artifacts-$target
mkdir -p "$corpus" "$artifacts"
le32() {
    local n=$1
    printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $(((n >> 8) & 255)))\\x$(printf %02x $(((n >> 16) & 255)))\\x$(printf %02x $(((n >> 24) & 255)))"
}
small() { [ -f "$1" ] && [ "$(stat -c %s "$1")" -le "${2:-65536}" ]; }
seeds=()
dict=()
limits=(-malloc_limit_mb=2048 -max_len=65536)
case "$target" in
    FuzzMILText)
        seeds=(models-ir/miltext/*.mil)
        for m in models-ir/compiled/*.mlmodelc/model.mil; do
            # the larger printed programs are seeds too, up to 64 KB
            if [ "$(stat -c %s "$m")" -le 65536 ]; then seeds+=("$m"); fi
        done
        dict=(-dict=FuzzTesting/FuzzMILText.dict)
        # inputs up to 4 KB (larger seeds are truncated; pass -max_len=N to change it)
        limits=(-malloc_limit_mb=2048 -max_len=4096)
        ;;
    FuzzModelLoader)
        # u32 LE spec length, the spec, then the weight file (none for inline-constant models).
        i=0
        for m in models-ir/*.mlmodel models-ir/hostile/*.mlmodel; do
            small "$m" 12288 || continue
            { le32 "$(stat -c %s "$m")"; cat "$m"; } > "$corpus/seed-$((i++))"
        done
        for p in models-ir/*.mlpackage models-ir/hostile/*.mlpackage; do
            s=$p/Data/com.apple.CoreML/model.mlmodel; w=$p/Data/com.apple.CoreML/weights/weight.bin
            small "$s" 12288 || continue
            if [ -f "$w" ] && ! small "$w" 4096; then continue; fi
            { le32 "$(stat -c %s "$s")"; cat "$s"; [ -f "$w" ] && cat "$w"; } > "$corpus/seed-$((i++))"
        done
        limits=(-malloc_limit_mb=512 -max_len=12288)
        ;;
    FuzzNPY)
        # one selector byte, 0 = .npy, 1 = .npz, then the file.
        i=0
        for f in $(find models-ir -name '*.npy' -size -16k); do { printf '\x00'; cat "$f"; } > "$corpus/seed-$((i++))"; done
        for f in $(find models-ir -name '*.npz' -size -16k); do { printf '\x01'; cat "$f"; } > "$corpus/seed-$((i++))"; done
        limits=(-malloc_limit_mb=512 -max_len=16384)
        ;;
    FuzzRun)
        for m in models-ir/*.mlmodel models-ir/hostile/*.mlmodel; do
            if small "$m" 12288; then seeds+=("$m"); fi
        done
        limits=(-malloc_limit_mb=512 -max_len=12288)
        ;;
    *)
        echo "fuzz.sh: unknown target '$target' (FuzzMILText, FuzzModelLoader, FuzzNPY, FuzzRun)" >&2
        exit 64
        ;;
esac
for s in "${seeds[@]}"; do
    cp "$s" "$corpus/seed-$(echo "$s" | tr '/' '_')"
done

"$bin" "$corpus" "${dict[@]}" -artifact_prefix="$artifacts/" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=10 "${limits[@]}" -print_final_stats=1 "$@"
