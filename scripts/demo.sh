#!/usr/bin/env bash
# Builds forge-ir (release) and runs the main job on the bundled models: the model summary,
# a diagnosis, and greedy generation through the stateful LLM contract.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! pkg-config --exists libprotobuf-c zlib 2>/dev/null; then
  echo "installing libprotobuf-c-dev…" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq libprotobuf-c-dev zlib1g-dev pkg-config >/dev/null
fi
swift build -c release --product forge-ir
bin=.build/release/forge-ir
model=models-ir/tiny_llama_int8.mlpackage
echo "== forge-ir dump $model --summary"
$bin dump "$model" --summary
echo
echo "== forge-ir diagnose $model --seq 1,16,64"
$bin diagnose "$model" --seq 1,16,64
echo
twin=models-ir/smollm2_twin_int8.mlpackage
echo "== forge-ir generate $twin (2 real SmolLM2 layers, vocab cut to 8192: ids, not prose)"
$bin generate "$twin" --prompt-ids 1,4093,198,1780,314,260,3575,282,4649,47 --max-tokens 16
if [ -d models-ir/large/smollm2-135m-int8.mlpackage ]; then
  echo
  echo "== forge-ir generate models-ir/large/smollm2-135m-int8.mlpackage --chat …"
  $bin generate models-ir/large/smollm2-135m-int8.mlpackage --tokenizer models-ir/tokenizers/smollm2.json \
    --chat "What is the capital of France?" --max-tokens 48
else
  echo
  echo "(the full SmolLM2-135M package is not built: see README, 'The real model')"
fi
