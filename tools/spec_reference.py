"""Reference JSON for a Core ML model, computed by walking its protobuf spec with coremltools'
own generated protobuf classes (independent of the Swift code under test).

Schema: see tools/NOTES.md ("Reference JSON").
"""

import json
import os
import sys
from collections import Counter

import coremltools as ct
from coremltools.proto import FeatureTypes_pb2, MIL_pb2

_ARRAY_DTYPES = {
    FeatureTypes_pb2.ArrayFeatureType.FLOAT32: "fp32",
    FeatureTypes_pb2.ArrayFeatureType.DOUBLE: "fp64",
    FeatureTypes_pb2.ArrayFeatureType.FLOAT16: "fp16",
    FeatureTypes_pb2.ArrayFeatureType.INT32: "int32",
    FeatureTypes_pb2.ArrayFeatureType.INT8: "int8",
}


def model_file_and_dir(path):
    """(path of the protobuf file, folder that '@model_path' resolves to)."""
    if os.path.isdir(path):
        with open(os.path.join(path, "Manifest.json")) as f:
            manifest = json.load(f)
        root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
        model_file = os.path.join(path, "Data", root["path"])
        return model_file, os.path.dirname(model_file)
    return path, os.path.dirname(os.path.abspath(path))


def load_model_spec(path):
    model_file, _ = model_file_and_dir(path)
    return ct.utils.load_spec(model_file)


def iter_ops(block):
    for op in block.operations:
        yield op
        for b in op.blocks:
            yield from iter_ops(b)


def iter_values(value):
    """Yield every MILSpec.Value nested in `value` (immediate tuples/lists/dicts included)."""
    yield value
    if value.WhichOneof("value") == "immediateValue":
        iv = value.immediateValue
        kind = iv.WhichOneof("value")
        if kind in ("tuple", "list"):
            for v in getattr(iv, kind).values:
                yield from iter_values(v)
        elif kind == "dictionary":
            for kv in iv.dictionary.values:
                yield from iter_values(kv.key)
                yield from iter_values(kv.value)


def iter_op_values(op):
    for v in op.attributes.values():
        yield from iter_values(v)
    for arg in op.inputs.values():
        for b in arg.arguments:
            if b.WhichOneof("binding") == "value":
                yield from iter_values(b.value)


def function_block(fn):
    return fn.block_specializations[fn.opset]


def mil_dims(value_type):
    """Dims of a MIL ValueType (tensor, or state wrapping a tensor): int or None."""
    vt = value_type
    if vt.WhichOneof("type") == "stateType":
        vt = vt.stateType.wrappedType
    if vt.WhichOneof("type") != "tensorType":
        return None
    dims = []
    for d in vt.tensorType.dimensions:
        dims.append(d.constant.size if d.WhichOneof("dimension") == "constant" else None)
    return dims


def find_value_type(fn, name):
    for nvt in fn.inputs:
        if nvt.name == name:
            return nvt.type
    for op in iter_ops(function_block(fn)):
        for nvt in op.outputs:
            if nvt.name == name:
                return nvt.type
    return None


def feature_json(fd, mil_function=None):
    ft = fd.type
    kind = ft.WhichOneof("Type")
    arr = None
    if kind == "multiArrayType":
        arr = ft.multiArrayType
    elif kind == "stateType":
        arr = ft.stateType.arrayType
    if arr is None:
        return {"name": fd.name, "dtype": kind, "shape": None, "shape_range": None,
                "enumerated_shapes": None, "default_shape": None}
    shape_range = None
    enumerated = None
    flex = arr.WhichOneof("ShapeFlexibility")
    if flex == "shapeRange":
        shape_range = [[int(r.lowerBound), int(r.upperBound)] for r in arr.shapeRange.sizeRanges]
    elif flex == "enumeratedShapes":
        enumerated = [[int(d) for d in s.shape] for s in arr.enumeratedShapes.shapes]
    default_shape = [int(d) for d in arr.shape] if len(arr.shape) else None
    if default_shape is not None:
        shape = []
        for i, d in enumerate(default_shape):
            flexible = False
            if shape_range is not None and i < len(shape_range) and shape_range[i][0] != shape_range[i][1]:
                flexible = True
            if enumerated is not None and len({tuple(s)[i] for s in enumerated if len(s) > i}) > 1:
                flexible = True
            shape.append(None if flexible else d)
    else:
        shape = None
        if mil_function is not None:
            vt = find_value_type(mil_function, fd.name)
            if vt is not None:
                shape = mil_dims(vt)
    return {
        "name": fd.name,
        "dtype": _ARRAY_DTYPES.get(arr.dataType, str(arr.dataType)),
        "shape": shape,
        "shape_range": shape_range,
        "enumerated_shapes": enumerated,
        "default_shape": default_shape,
    }


def reference_json(path):
    spec = load_model_spec(path)
    _, model_dir = model_file_and_dir(path)
    desc = spec.description
    model_type = spec.WhichOneof("Type")
    md = desc.metadata
    out = {
        "specification_version": spec.specificationVersion,
        "model_type": model_type,
    }
    metadata = {
        "author": md.author,
        "short_description": md.shortDescription,
        "version_string": md.versionString,
        "license": md.license,
        "user_defined": dict(sorted(md.userDefined.items())),
    }
    if model_type != "mlProgram":
        out.update({
            "default_function": None,
            "inputs": [feature_json(f) for f in desc.input],
            "outputs": [feature_json(f) for f in desc.output],
            "states": [feature_json(f) for f in desc.state],
            "functions": [],
            "metadata": metadata,
            "blob_count": 0,
            "weight_file_bytes": 0,
        })
        return out

    prog = spec.mlProgram
    default = desc.defaultFunctionName
    if not default and len(prog.functions) == 1:
        default = next(iter(prog.functions.keys()))
    fdescs = {f.name: f for f in desc.functions}

    functions = []
    for name in sorted(prog.functions.keys()):
        fn = prog.functions[name]
        if name in fdescs:
            fd = fdescs[name]
            ins, outs, sts = fd.input, fd.output, fd.state
        else:
            ins, outs, sts = desc.input, desc.output, desc.state
        counts = Counter(op.type for op in iter_ops(function_block(fn)))
        functions.append({
            "name": name,
            "opset": fn.opset,
            "inputs": [feature_json(f, fn) for f in ins],
            "outputs": [feature_json(f, fn) for f in outs],
            "states": [feature_json(f, fn) for f in sts],
            "op_counts": dict(sorted(counts.items())),
        })

    default_fn = prog.functions[default] if default in prog.functions else None
    if len(desc.input) or len(desc.output) or not desc.functions:
        ins, outs, sts = desc.input, desc.output, desc.state
    else:
        fd = fdescs[default]
        ins, outs, sts = fd.input, fd.output, fd.state

    blobs = set()
    for fn in prog.functions.values():
        for op in iter_ops(function_block(fn)):
            for v in iter_op_values(op):
                if v.WhichOneof("value") == "blobFileValue":
                    blobs.add((v.blobFileValue.fileName, v.blobFileValue.offset))
    files = {b[0] for b in blobs}
    weight_bytes = 0
    for fname in files:
        local = fname.replace("@model_path", model_dir, 1)
        weight_bytes += os.path.getsize(local)

    out.update({
        "default_function": default,
        "inputs": [feature_json(f, default_fn) for f in ins],
        "outputs": [feature_json(f, default_fn) for f in outs],
        "states": [feature_json(f, default_fn) for f in sts],
        "functions": functions,
        "metadata": metadata,
        "blob_count": len(blobs),
        "weight_file_bytes": weight_bytes,
    })
    return out


if __name__ == "__main__":
    print(json.dumps(reference_json(sys.argv[1]), indent=2))
