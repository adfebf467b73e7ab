#!/usr/bin/env bash
# Build and run one libFuzzer target of FuzzTesting/ for a number of seconds.
#
#   scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags…]     e.g. scripts/fuzz.sh FuzzMILText 600
#
# Builds FuzzTesting/ in release with -sanitize=fuzzer,address, seeds the corpus
# (FuzzTesting/.work/corpus-TARGET, kept between runs) from the committed fixtures, runs one
# job on one core with a 2 GB RSS limit, a 10 s per-input timeout and inputs up to 4 KB
# (larger seeds are truncated; pass -max_len=N to change it), and prints libFuzzer's
# final statistics (stat::number_of_executed_units = the execution count). Crashing inputs are
# written to FuzzTesting/.work/artifacts-TARGET/. Exit status: libFuzzer's (0 = nothing found).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2

swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting --product "$target"
bin=FuzzTesting/.build/release/$target

work=FuzzTesting/.work
corpus=$work/corpus-$target
artifacts=$work/artifacts-$target
mkdir -p "$corpus" "$artifacts"
seeds=()
dict=()
case "$target" in
    FuzzMILText)
        seeds=(models-ir/miltext/*.mil)
        for m in models-ir/compiled/*.mlmodelc/model.mil; do
            # the larger printed programs are seeds too, up to 64 KB
            if [ "$(stat -c %s "$m")" -le 65536 ]; then seeds+=("$m"); fi
        done
        dict=(-dict=FuzzTesting/FuzzMILText.dict)
        ;;
esac
for s in "${seeds[@]}"; do
    cp "$s" "$corpus/seed-$(echo "$s" | tr '/' '_')"
done

"$bin" "$corpus" "${dict[@]}" -artifact_prefix="$artifacts/" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=4096 -print_final_stats=1 "$@"
