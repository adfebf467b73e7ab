#!/usr/bin/env bash
# Creates tools/.venv and installs the pinned fixture-generator requirements.
# Usage: bash tools/setup_venv.sh   (then: tools/.venv/bin/python tools/make_fixtures.py)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
if [ ! -x "$here/.venv/bin/python" ]; then
    "$py" -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements.txt"
"$here/.venv/bin/python" - <<'PY'
import coremltools, torch, numpy, google.protobuf
print("coremltools", coremltools.__version__, "torch", torch.__version__,
      "numpy", numpy.__version__, "protobuf", google.protobuf.__version__)
PY
