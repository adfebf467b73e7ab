"""Writes models-ir/opvectors/mil_ops.json: every core MIL op coremltools 9 registers, with the
opsets (iOS15…iOS18) that define it. Read by OpsetKernelTests.testEveryOpHasAKernel.

Run: tools/.venv/bin/python tools/mil_op_list.py
"""
import json
import os

import coremltools.converters.mil.mil.ops.defs  # noqa: F401  (registers the ops)
from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ops = {}
for name, versions in SSAOpRegistry.core_ops.items():
    if name.startswith("_"):
        continue
    vs = sorted({t.name for t, cls in versions.items() if cls is not None})
    if vs:
        ops[name] = vs
with open(os.path.join(ROOT, "models-ir", "opvectors", "mil_ops.json"), "w") as f:
    json.dump({"source": "coremltools 9.0 SSAOpRegistry.core_ops", "ops": ops}, f, indent=1, sort_keys=True)
    f.write("\n")
print(len(ops), "ops")
