#!/usr/bin/env python3
"""Lay out every models-ir/ ML Program package as a compiled model, models-ir/compiled/NAME.mlmodelc.

Compiling needs macOS (coremlc), so these folders are built from what can be done here:

* model.mil            -- forge-ir's printer: `forge-ir dump PKG --mil` (MIL text, nothing elided).
* coremldata.bin       -- the header the public reverse-engineered writers agree on (facts sheet
                          section 10): u32 502, u32 spec version, u32 7 at 0x1C, "generic" at 0x24,
                          spec version byte at 0x2B, u64 payload length at 0x4B, then the
                          ModelDescription protobuf coremltools reads from the package (serialized
                          by coremltools' own protobuf classes, not by our code) at 0x53, then the
                          trailer: one 16-byte record (502 + 12 zero bytes) per function for
                          multi-function models, a single one otherwise.
* metadata.json        -- written from the coremltools spec with the keys seen in real compiled
                          models (inputSchema/outputSchema/stateSchema, functions,
                          mlProgramOperationTypeHistogram counted by walking the spec's MIL ops,
                          const excluded, ...).
* weights/weight.bin   -- the package's weight file, copied (a relative symlink when it is over
                          1 MB, so the repository does not hold two copies).

analytics/coremldata.bin is not written (its format is unknown and forge-ir does not read it).

Usage: tools/.venv/bin/python tools/make_mlmodelc_fixtures.py [--forge-ir .build/debug/forge-ir]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import coremltools as ct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models-ir")
OUT = os.path.join(MODELS, "compiled")

ARRAY_TYPES = {65568: "Float32", 65552: "Float16", 65600: "Double", 131104: "Int32", 131080: "Int8"}


def packages():
    names = []
    for entry in sorted(os.listdir(MODELS)):
        if entry.endswith(".mlpackage"):
            names.append(entry)
    for entry in sorted(os.listdir(os.path.join(MODELS, "diag"))):
        if entry.endswith(".mlpackage"):
            names.append("diag/" + entry)
    return names


def load_spec(pkg):
    """The package's Model spec, parsed by coremltools' protobuf classes. The root model is
    found through Manifest.json (case-insensitively: one fixture's identifier case differs,
    which ct.utils.load_spec refuses)."""
    with open(os.path.join(pkg, "Manifest.json")) as f:
        manifest = json.load(f)
    root = manifest["rootModelIdentifier"].lower()
    entry = {k.lower(): v for k, v in manifest["itemInfoEntries"].items()}[root]
    spec = ct.proto.Model_pb2.Model()
    with open(os.path.join(pkg, "Data", entry["path"]), "rb") as f:
        spec.ParseFromString(f.read())
    return spec


def shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def feature(f, state=False):
    kind = f.type.WhichOneof("Type")
    out = {"name": f.name, "shortDescription": f.shortDescription, "isOptional": "1" if f.type.isOptional else "0"}
    if kind == "stateType":
        a = f.type.stateType.arrayType
        out["type"] = "State"
    elif kind == "multiArrayType":
        a = f.type.multiArrayType
        out["type"] = "MultiArray"
    else:
        out["type"] = {"int64Type": "Int64", "doubleType": "Double", "stringType": "String"}.get(kind, kind)
        return out
    dtype = ARRAY_TYPES.get(a.dataType, "Invalid")
    shape = list(a.shape)
    out["dataType"] = dtype
    out["shape"] = shape_text(shape)
    flex = a.WhichOneof("ShapeFlexibility")
    out["hasShapeFlexibility"] = "1" if flex else "0"
    if flex == "shapeRange":
        ranges = [[r.lowerBound, r.upperBound] for r in a.shapeRange.sizeRanges]
        out["shapeRange"] = "[" + ", ".join(shape_text(r) for r in ranges) + "]"
        out["shapeFlexibility"] = " × ".join(
            str(lo) if lo == hi else f"{lo}...{hi if hi >= 0 else ''}" for lo, hi in ranges)
    elif flex == "enumeratedShapes":
        shapes = [list(s.shape) for s in a.enumeratedShapes.shapes]
        out["enumeratedShapes"] = "[" + ", ".join(shape_text(s) for s in shapes) + "]"
        out["shapeFlexibility"] = " | ".join(" × ".join(str(d) for d in s) for s in shapes)
    out["formattedType"] = f"{out['type']} ({dtype} {' × '.join(str(d) for d in shape)})"
    return out


def camel(op):
    parts = op.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def histogram(spec):
    counts = {}

    def walk(block, tag):
        for op in block.operations:
            if op.type != "const":
                key = f"{tag}.{camel(op.type)}"
                counts[key] = counts.get(key, 0) + 1
            for b in op.blocks:
                walk(b, tag)

    for fn in spec.mlProgram.functions.values():
        ios = {"CoreML5": 15, "CoreML6": 16, "CoreML7": 17, "CoreML8": 18, "CoreML9": 26}.get(fn.opset, 18)
        for key, block in fn.block_specializations.items():
            if key == fn.opset:
                walk(block, f"Ios{ios}")
    return dict(sorted(counts.items()))


def metadata_json(spec, name):
    d = spec.description
    meta = {
        "metadataOutputVersion": "3.0",
        "specificationVersion": spec.specificationVersion,
        "modelType": {"name": "MLModelType_mlProgram"},
        "isUpdatable": "1" if spec.isUpdatable else "0",
        "shortDescription": d.metadata.shortDescription,
        "author": d.metadata.author,
        "license": d.metadata.license,
        "version": d.metadata.versionString,
        "userDefinedMetadata": dict(d.metadata.userDefined),
        "inputSchema": [feature(f) for f in d.input],
        "outputSchema": [feature(f) for f in d.output],
        "stateSchema": [feature(f, state=True) for f in d.state],
        "mlProgramOperationTypeHistogram": histogram(spec),
        "generatedClassName": os.path.basename(name).replace(".mlpackage", ""),
        "method": "predict",
    }
    if len(d.functions) > 0:
        meta["functions"] = [
            {"name": f.name, "inputSchema": [feature(x) for x in f.input], "outputSchema": [feature(x) for x in f.output],
             "stateSchema": [feature(x, state=True) for x in f.state]}
            for f in d.functions]
        meta["defaultFunctionName"] = d.defaultFunctionName
    return [meta]


def coremldata_bin(spec):
    payload = spec.description.SerializeToString()
    header = bytearray(0x53)
    struct.pack_into("<I", header, 0x00, 502)
    struct.pack_into("<I", header, 0x04, spec.specificationVersion)
    struct.pack_into("<I", header, 0x1C, 7)
    header[0x24:0x2B] = b"generic"
    header[0x2B] = spec.specificationVersion & 0xFF
    struct.pack_into("<Q", header, 0x4B, len(payload))
    record = struct.pack("<I", 502) + bytes(12)
    trailer = record * max(1, len(spec.description.functions))
    return bytes(header) + payload + trailer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forge-ir", default=os.path.join(ROOT, ".build", "debug", "forge-ir"))
    args = ap.parse_args()
    if not os.access(args.forge_ir, os.X_OK):
        sys.exit(f"build forge-ir first (swift build): {args.forge_ir} not found")
    os.makedirs(OUT, exist_ok=True)
    for name in packages():
        pkg = os.path.join(MODELS, name)
        dest = os.path.join(OUT, os.path.basename(name).replace(".mlpackage", ".mlmodelc"))
        if name.startswith("diag/"):
            dest = os.path.join(OUT, "diag_" + os.path.basename(name).replace(".mlpackage", ".mlmodelc"))
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        spec = load_spec(pkg)
        mil = subprocess.run([args.forge_ir, "dump", pkg, "--mil"], check=True, capture_output=True, text=True).stdout
        with open(os.path.join(tmp, "model.mil"), "w") as f:
            f.write(mil)
        with open(os.path.join(tmp, "coremldata.bin"), "wb") as f:
            f.write(coremldata_bin(spec))
        with open(os.path.join(tmp, "metadata.json"), "w") as f:
            json.dump(metadata_json(spec, name), f, indent=2, ensure_ascii=False)
            f.write("\n")
        weights = os.path.join(pkg, "Data", "com.apple.CoreML", "weights")
        if os.path.isdir(weights):
            os.makedirs(os.path.join(tmp, "weights"))
            for w in sorted(os.listdir(weights)):
                src = os.path.join(weights, w)
                dst = os.path.join(tmp, "weights", w)
                if os.path.getsize(src) > 1 << 20:
                    os.symlink(os.path.relpath(src, os.path.dirname(os.path.join(dest, "weights", w))), dst)
                else:
                    shutil.copyfile(src, dst)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
        print(f"{name} -> {os.path.relpath(dest, ROOT)}")


if __name__ == "__main__":
    main()
