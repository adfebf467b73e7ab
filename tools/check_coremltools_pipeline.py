#!/usr/bin/env python3
"""Run coremltools' default MIL pass pipeline on a saved ML Program package and report whether
it goes through.

Usage:  tools/.venv/bin/python tools/check_coremltools_pipeline.py PKG [--pipeline DEFAULT]

Loads PKG (skip_model_load=True), converts its MIL program back to a pymil Program with
coremltools' milproto loader (as tools/check_package.py does), then applies
`ct.PassPipeline.<pipeline>` with
`coremltools.converters.mil.mil.passes.pass_pipeline.PassPipelineManager.apply_pipeline`.
Prints `OK (<n> ops after <pipeline>)` and exits 0, or `FAILED in <pass>: <error>` and exits 1.
"""

import argparse
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import coremltools as ct  # noqa: E402
from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager  # noqa: E402

from check_package import load_program  # noqa: E402


def count_ops(prog):
    n = 0

    def walk(block):
        nonlocal n
        for op in block.operations:
            n += 1
            for b in op.blocks:
                walk(b)

    for f in prog.functions.values():
        walk(f)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("package")
    ap.add_argument("--pipeline", default="DEFAULT", help="attribute of ct.PassPipeline (default: DEFAULT)")
    args = ap.parse_args()
    prog = load_program(args.package)
    before = count_ops(prog)
    pipeline = getattr(ct.PassPipeline, args.pipeline)
    try:
        PassPipelineManager.apply_pipeline(prog, pipeline)
    except Exception as e:  # noqa: BLE001 - report whatever the pipeline raises
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{os.path.basename(fr.filename)}:{fr.name}" for fr in reversed(tb) if "/passes/defs/" in fr.filename), "?")
        print(f"FAILED in {where}: {type(e).__name__}: {e}")
        return 1
    print(f"OK ({before} ops before, {count_ops(prog)} after {args.pipeline})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
