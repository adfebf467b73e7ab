#!/usr/bin/env python3
"""Summarise a Core ML model (.mlpackage or .mlmodel) as JSON, for comparing a package written
by forge-ir's Swift writer with the original.

Usage:  tools/.venv/bin/python tools/check_package.py PATH [--no-raw]

Loads PATH with ct.models.MLModel(path, skip_model_load=True), converts its MIL program back
to a pymil Program with coremltools' milproto loader
(coremltools.converters.mil.frontend.milproto.load.load) and prints:

  functions.<name>.op_counts        op types counted on the loaded pymil program
                                    (const ops included; iOS18 constexpr inputs bound
                                    inline become const ops there)
  functions.<name>.raw_op_counts    op types counted on the protobuf (nested blocks included)
  functions.<name>.consts           per const op: dtype, shape, sha256 of the value
                                    (C-order element bytes as numpy holds them; sub-byte
                                    types unpacked one element per byte)
  blobs                             per blob in weight.bin (by metadata offset): mil dtype
                                    code, payload size, padding bits, sha256 of payload
  reference                         the tools/spec_reference.py JSON of the model
"""

import argparse
import hashlib
import json
import os
import struct
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import coremltools as ct  # noqa: E402
from coremltools.converters.mil.frontend.milproto.load import load as milproto_load  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

from spec_reference import function_block, iter_ops, model_file_and_dir, reference_json  # noqa: E402


def load_program(path):
    """pymil Program of an ML Program model, via ct.models.MLModel + the milproto loader."""
    model = ct.models.MLModel(path, skip_model_load=True)
    spec = model.get_spec()
    # The loader opens os.path.join(file_weights_dir, basename(BlobFileValue.fileName)),
    # i.e. it wants the 'weights' folder itself.
    weights_dir = getattr(model, "weights_dir", None)
    if not weights_dir:
        _, model_dir = model_file_and_dir(path)
        weights_dir = os.path.join(model_dir, "weights")
    return milproto_load(spec, spec.specificationVersion, file_weights_dir=weights_dir)


def value_checksum(val):
    arr = np.ascontiguousarray(np.asarray(val))
    if arr.dtype.kind in ("U", "S", "O"):
        data = json.dumps(arr.tolist()).encode()
    else:
        data = arr.tobytes()
    return hashlib.sha256(data).hexdigest()


def parse_weight_file(file_path):
    blobs = {}
    with open(file_path, "rb") as f:
        data = f.read()
    count, version = struct.unpack_from("<II", data, 0)
    off = 64
    for _ in range(count):
        sentinel, dtype, size, payload_off, pad_bits = struct.unpack_from("<IIQQQ", data, off)
        if sentinel != 0xDEADBEEF:
            raise ValueError(f"bad blob sentinel at {off}: {sentinel:#x}")
        payload = data[payload_off : payload_off + size]
        blobs[str(off)] = {
            "mil_dtype": dtype,
            "size": size,
            "padding_bits": pad_bits,
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        off = (payload_off + size + 63) // 64 * 64
    return {"version": version, "count": count, "blobs": blobs}


def summarize(path, raw=True):
    out = {"path": path}
    model_file, model_dir = model_file_and_dir(path)
    spec = ct.utils.load_spec(model_file)
    out["model_type"] = spec.WhichOneof("Type")
    if out["model_type"] != "mlProgram":
        out["reference"] = reference_json(path)
        return out
    prog = load_program(path)
    funcs = {}
    for name in sorted(prog.functions):
        fn = prog.functions[name]
        counts = Counter()
        consts = {}

        def walk(block):
            for op in block.operations:
                counts[op.op_type] += 1
                if op.op_type == "const":
                    v = op.outputs[0]
                    consts[v.name] = {
                        "dtype": types.builtin_to_string(v.dtype),
                        "shape": [int(d) for d in v.shape],
                        "sha256": value_checksum(v.val),
                    }
                for b in op.blocks:
                    walk(b)

        walk(fn)
        entry = {"op_counts": dict(sorted(counts.items()))}
        if raw:
            pfn = spec.mlProgram.functions[name]
            entry["raw_op_counts"] = dict(sorted(Counter(op.type for op in iter_ops(function_block(pfn))).items()))
        entry["consts"] = dict(sorted(consts.items()))
        funcs[name] = entry
    out["functions"] = funcs
    wfile = os.path.join(model_dir, "weights", "weight.bin")
    out["weight_file"] = parse_weight_file(wfile) if os.path.exists(wfile) else None
    out["reference"] = reference_json(path)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--no-raw", action="store_true", help="omit raw protobuf op counts")
    args = ap.parse_args()
    print(json.dumps(summarize(args.path, raw=not args.no_raw), indent=2, sort_keys=False))


if __name__ == "__main__":
    main()
