#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` and `llama-quantize` (CPU only) from the source vendored in the
# llama-cpp-python sdist (PyPI), into bench/.work/ (git-ignored). Idempotent: skips what exists.
#
#   bash bench/build_llamacpp.sh            # ~10-15 min on 2 cores the first time
#
# Env: LLAMA_CPP_PYTHON_VERSION (default pinned below), PYTHON (default tools/.venv/bin/python,
# else python3), JOBS (default nproc), LLAMA_ISA (default native: -DGGML_NATIVE=ON; avx2: ggml's
# AVX2 + FMA + F16C kernels only, no AVX-512 even where the CPU has it, into a build folder of
# its own, ...-avx2 — what llama.cpp runs on an AVX2-only machine).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
WORK="$HERE/.work"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.16}"
PY="${PYTHON:-$ROOT/tools/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
JOBS="${JOBS:-$(nproc)}"
SRC="$WORK/llama_cpp_python-$VERSION"
ISA="${LLAMA_ISA:-native}"
case "$ISA" in
    native) BUILD="$WORK/llama.cpp-build-$VERSION"; ISA_FLAGS=(-DGGML_NATIVE=ON) ;;
    avx2) BUILD="$WORK/llama.cpp-build-$VERSION-avx2"
          ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                     -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
                     -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
    *) echo "LLAMA_ISA must be native or avx2, not '$ISA'" >&2; exit 64 ;;
esac
BIN="$BUILD/bin"

if [ -x "$BIN/llama-bench" ] && [ -x "$BIN/llama-quantize" ]; then
    echo "llama.cpp already built: $BIN"
    exit 0
fi
mkdir -p "$WORK"

if ! command -v cmake >/dev/null; then
    echo "cmake not found: installing it with apt-get" >&2
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq cmake >/dev/null
    else echo "run: sudo apt-get install -y cmake" >&2; exit 1; fi
fi

if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    echo "downloading the llama-cpp-python $VERSION sdist (pip download --no-binary llama-cpp-python; PyPI ships only the sdist)"
    "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$WORK/sdist"
    tar -xzf "$WORK/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
fi
LLAMA="$SRC/vendor/llama.cpp"
[ -f "$LLAMA/CMakeLists.txt" ] || { echo "no vendored llama.cpp in $SRC" >&2; exit 1; }

t0=$(date +%s)
cmake -S "$LLAMA" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    "${ISA_FLAGS[@]}" -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >/dev/null
cmake --build "$BUILD" --config Release -j "$JOBS" --target llama-bench llama-quantize
t1=$(date +%s)
echo "built llama-bench and llama-quantize in $((t1 - t0)) s: $BIN"
"$BIN/llama-bench" --help 2>&1 | head -1 || true
