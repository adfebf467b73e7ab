#!/usr/bin/env bash
# Runs the whole test suite. Installs the one system dependency (libprotobuf-c-dev) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! pkg-config --exists libprotobuf-c zlib 2>/dev/null; then
  echo "installing libprotobuf-c-dev…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq libprotobuf-c-dev zlib1g-dev pkg-config >/dev/null
fi
swift build --build-tests
swift test --skip-build

# Fuzz smoke run (issue #11): a few seconds of each libFuzzer target of FuzzTesting/. Opt-in,
# because the sanitized release build of the whole package takes longer than the test suite;
# skipped with a message when the toolchain has no libFuzzer runtime.
if [ "${FORGE_IR_FUZZ_SMOKE:-0}" = 1 ]; then
  if swift build -c release -Xswiftc -sanitize=fuzzer,address --package-path FuzzTesting >/dev/null 2>&1; then
    for t in FuzzMILText FuzzModelLoader FuzzNPY FuzzRun; do
      FUZZ_NO_BUILD=1 bash scripts/fuzz.sh "$t" 5 2>&1 | grep -E "^(stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" || true
      if [ -n "$(ls -A "FuzzTesting/.work/artifacts-$t" 2>/dev/null)" ]; then echo "fuzz smoke: $t has findings in FuzzTesting/.work/artifacts-$t" >&2; exit 1; fi
    done
  else
    echo "fuzz smoke: skipped (the toolchain cannot build with -sanitize=fuzzer,address: no libFuzzer runtime?)" >&2
  fi
else
  echo "fuzz smoke: skipped (FORGE_IR_FUZZ_SMOKE=1 runs 5 s of each FuzzTesting/ target; see scripts/fuzz.sh)" >&2
fi
