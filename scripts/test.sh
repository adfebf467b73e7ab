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
