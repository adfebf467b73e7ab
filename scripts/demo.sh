#!/usr/bin/env bash
# Builds forge-ir and runs the main job on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! pkg-config --exists libprotobuf-c zlib 2>/dev/null; then
  echo "installing libprotobuf-c-dev…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq libprotobuf-c-dev zlib1g-dev pkg-config >/dev/null
fi
swift build -c release --product forge-ir
model=models-ir/tiny_llama_int8.mlpackage
.build/release/forge-ir dump "$model" --summary
