"""Builds models-ir/hostile/: structured mutations of small valid ML Programs, one or more per
class of hostile input of issue #11, and manifest.json saying what each must produce.

Every model starts as a program made with coremltools' MIL Builder and converted by
coremltools 9 (so its protobuf is exactly what coremltools writes); then one thing is broken
with coremltools' own protobuf classes (Model_pb2 / MIL_pb2), or, where protobuf's Python
runtime refuses to build the message (nesting thousands deep), by encoding the wire format by
hand. .npz archives are written with numpy/zipfile and then patched byte by byte.

manifest.json lists, per case: the class, the file, the CLI arguments to run (MODEL is the
file), and what is expected: {"exit": 1, "stderr": "<substring>"} (a typed error) or
{"exit": 0} (a valid result). The robustness suite (Tests/ForgeCLITests/HostileInputTests)
runs each under a timeout, an address-space limit and --max-memory.

Run with the tools venv:  tools/.venv/bin/python tools/make_hostile_fixtures.py
"""
import json
import os
import shutil
import struct
import sys
import zipfile
import io

import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.proto import Model_pb2, MIL_pb2

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models-ir")
OUT = os.path.join(ROOT, "hostile")
CASES = []


def case(cls, name, args, exit_code, stderr=None, note=""):
    c = {"class": cls, "name": name, "args": args, "exit": exit_code}
    if stderr:
        c["stderr"] = stderr
    if note:
        c["note"] = note
    CASES.append(c)


# ---------------------------------------------------------------- base programs

def convert(prog):
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   compute_precision=ct.precision.FLOAT32, skip_model_load=True)
    return m


def inline_spec():
    """y = relu((x + 1) * 2), x: fp32 [1, 4]; every constant inline (one .mlmodel file)."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def prog(x):
        a = mb.add(x=x, y=np.float32(1.0), name="a")
        b = mb.mul(x=a, y=np.float32(2.0), name="b")
        return mb.relu(x=b, name="c")
    return convert(prog).get_spec()


def ops(spec, fn="main"):
    f = spec.mlProgram.functions[fn]
    return f.block_specializations[f.opset].operations


def block(spec, fn="main"):
    f = spec.mlProgram.functions[fn]
    return f.block_specializations[f.opset]


def find(spec, out_name):
    for op in ops(spec):
        if any(o.name == out_name for o in op.outputs):
            return op
    raise KeyError(out_name)


def save_spec(spec, name):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(spec.SerializeToString() if not isinstance(spec, bytes) else spec)
    return name


# ---------------------------------------------------------------- wire format by hand

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def num(msg_cls, name):
    return msg_cls.DESCRIPTOR.fields_by_name[name].number


def with_extra_ops(spec, extra_op_bytes):
    """The serialized spec with `extra_op_bytes` (encoded Operations) appended to main's block.
    Each enclosing message is re-encoded by hand so the nested bytes never pass through
    protobuf's Python parser (which refuses deep nesting)."""
    fn = spec.mlProgram.functions["main"]
    opset = fn.opset
    blk = MIL_pb2.Block()
    blk.CopyFrom(fn.block_specializations[opset])
    block_bytes = blk.SerializeToString() + b"".join(field(num(MIL_pb2.Block, "operations"), o) for o in extra_op_bytes)
    f = MIL_pb2.Function()
    f.CopyFrom(fn)
    del f.block_specializations[opset]
    entry = field(1, opset.encode()) + field(2, block_bytes)
    function_bytes = f.SerializeToString() + field(num(MIL_pb2.Function, "block_specializations"), entry)
    p = MIL_pb2.Program()
    p.CopyFrom(spec.mlProgram)
    del p.functions["main"]
    program_bytes = p.SerializeToString() + field(num(MIL_pb2.Program, "functions"), field(1, b"main") + field(2, function_bytes))
    m = Model_pb2.Model()
    m.CopyFrom(spec)
    m.ClearField("mlProgram")
    return m.SerializeToString() + field(num(Model_pb2.Model, "mlProgram"), program_bytes)


def nested_cond_op(depth):
    """cond { cond { … identity … } } nested `depth` deep, as Operation bytes."""
    op_type = num(MIL_pb2.Operation, "type")
    blocks = num(MIL_pb2.Operation, "blocks")
    operations = num(MIL_pb2.Block, "operations")
    inner = field(op_type, b"identity")
    for _ in range(depth):
        blk = field(operations, inner)
        inner = field(op_type, b"cond") + field(blocks, blk)
    return inner


def nested_list_type_op(depth):
    """An op whose output type is list<list<…<fp32>…>> nested `depth` deep."""
    tensor = MIL_pb2.ValueType()
    tensor.tensorType.dataType = MIL_pb2.FLOAT32
    tensor.tensorType.rank = 0
    vt = tensor.SerializeToString()
    list_type = num(MIL_pb2.ValueType, "listType")
    list_elem = num(MIL_pb2.ListType, "type")
    for _ in range(depth):
        vt = field(list_type, field(list_elem, vt))
    nvt = field(num(MIL_pb2.NamedValueType, "name"), b"deep_list") + field(num(MIL_pb2.NamedValueType, "type"), vt)
    return field(num(MIL_pb2.Operation, "type"), b"make_list") + field(num(MIL_pb2.Operation, "outputs"), nvt)


# ---------------------------------------------------------------- classes

def nesting():
    spec = inline_spec()
    save_spec(with_extra_ops(spec, [nested_cond_op(5000)]), "deep_cond_5000.mlmodel")
    for verb in ["dump", "diagnose"]:
        case("deep nesting", "deep_cond_5000.mlmodel", [verb, "MODEL"], 1, "nested deeper than the limit of 200")
    save_spec(with_extra_ops(spec, [nested_list_type_op(5000)]), "deep_list_type_5000.mlmodel")
    case("deep nesting", "deep_list_type_5000.mlmodel", ["dump", "MODEL"], 1, "nested deeper than the limit of 200")
    # Deep enough for the decoder's own limit (64 blocks), shallow enough for the wire scan.
    save_spec(with_extra_ops(spec, [nested_cond_op(70)]), "deep_cond_70.mlmodel")
    case("deep nesting", "deep_cond_70.mlmodel", ["dump", "MODEL"], 1, "blocks nested deeper than 64")


def set_dims(tt, dims):
    del tt.dimensions[:]
    tt.rank = len(dims)
    for d in dims:
        tt.dimensions.add().constant.size = d


def overflow():
    # An op output whose type's element count overflows: [2^32, 2^32] fp32.
    spec = inline_spec()
    set_dims(find(spec, "b").outputs[0].type.tensorType, [1 << 32, 1 << 32])
    save_spec(spec, "overflow_dims_2p32.mlmodel")
    for verb in ["dump", "diagnose"]:
        case("overflowing counts", "overflow_dims_2p32.mlmodel", [verb, "MODEL"], 1, "overflows")
    # Rank 64 of 2s: 2^64 elements.
    spec = inline_spec()
    set_dims(find(spec, "a").outputs[0].type.tensorType, [2] * 64)
    save_spec(spec, "overflow_rank64.mlmodel")
    case("overflowing counts", "overflow_rank64.mlmodel", ["dump", "MODEL"], 1, "overflows")
    # The model description: an input shape whose product overflows (the program is valid).
    spec = inline_spec()
    arr = spec.description.input[0].type.multiArrayType
    del arr.shape[:]
    arr.shape.extend([1 << 40, 1 << 40])
    save_spec(spec, "overflow_description.mlmodel")
    case("overflowing counts", "overflow_description.mlmodel", ["dump", "MODEL"], 1, "overflows")

    # reshape to [2^31-1, 2^31-1, 4] and tile by reps 2^31-1: caught when the op runs. Built
    # with valid constants (coremltools checks them), then the constant is patched.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def reshape_prog(x):
        return mb.reshape(x=x, shape=np.array([4, 1, 1], dtype=np.int32), name="r")
    spec = convert_raw(reshape_prog).get_spec()
    patch_ints(spec, "r", "shape", [2147483647, 2147483647, 4])
    save_spec(spec, "reshape_2p31.mlmodel")
    case("overflowing counts", "reshape_2p31.mlmodel", ["run", "MODEL", "--input", "x=INPUTS/x_1x4_fp32.npy"], 1, "reshape")

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def tile_prog(x):
        return mb.tile(x=x, reps=np.array([2, 1], dtype=np.int32), name="t")
    spec = convert_raw(tile_prog).get_spec()
    patch_ints(spec, "t", "reps", [2147483647, 2147483647])
    save_spec(spec, "tile_2p31.mlmodel")
    case("overflowing counts", "tile_2p31.mlmodel", ["run", "MODEL", "--input", "x=INPUTS/x_1x4_fp32.npy"], 1, "tile")
    # reps of 2^31-1 on one axis only: 8.6e9 floats (34 GB), no overflow: refused by the budget.
    spec = convert_raw(tile_prog).get_spec()
    patch_ints(spec, "t", "reps", [2147483647, 1])
    save_spec(spec, "tile_budget.mlmodel")
    case("allocation from declared sizes", "tile_budget.mlmodel", ["run", "MODEL", "--input", "x=INPUTS/x_1x4_fp32.npy"], 1, "memory budget")

    # Constant folding: tile of a constant by huge reps, which optimize's const_elimination tries to fold.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def fold_prog(x):
        t = mb.tile(x=np.ones((1, 4), dtype=np.float32), reps=np.array([1, 1], dtype=np.int32), name="t")
        return mb.add(x=x, y=t, name="y")
    spec = convert_raw(fold_prog).get_spec()
    patch_ints(spec, "t", "reps", [2147483647, 1])
    save_spec(spec, "fold_tile_2p31.mlmodel")
    case("allocation from declared sizes", "fold_tile_2p31.mlmodel",
         ["optimize", "MODEL", "-o", "TMP/out.mlpackage", "--passes", "const_elimination"], 0,
         note="const_elimination leaves an op it cannot fold (over the budget) in place")


def convert_raw(prog):
    """Converted without coremltools' graph passes (so constant ops stay as written)."""
    return ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                      compute_precision=ct.precision.FLOAT32, skip_model_load=True,
                      pass_pipeline=ct.PassPipeline.EMPTY)


def patch_ints(spec, op_out, input_name, values):
    """Sets the int32 constant bound to `input_name` of the op producing `op_out`."""
    op = find(spec, op_out)
    arg = op.inputs[input_name].arguments[0]
    if arg.WhichOneof("binding") == "value":
        val = arg.value
        tt = val.type.tensorType
    else:
        c = find(spec, arg.name)
        val = c.attributes["val"]
        tt = c.outputs[0].type.tensorType
        set_dims(tt, [len(values)])
    set_dims(val.type.tensorType, [len(values)])
    del val.immediateValue.tensor.ints.values[:]
    val.immediateValue.tensor.ints.values.extend(values)


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def zip_stored(name, data):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(name, data)
    return bytearray(buf.getvalue())


def zip_deflated(name, data):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, data)
    return bytearray(buf.getvalue())


def cd_offset(z):
    eocd = z.rfind(b"PK\x05\x06")
    return struct.unpack_from("<I", z, eocd + 16)[0], eocd


def allocation():
    inputs = os.path.join(OUT, "inputs")
    os.makedirs(inputs, exist_ok=True)
    np.save(os.path.join(inputs, "x_1x4_fp32.npy"), np.array([[1, 2, 3, 4]], dtype=np.float32))
    # A tiny .npz whose deflate member declares 4 GiB uncompressed.
    z = zip_deflated("x.npy", npy_bytes(np.zeros((1, 4), np.float32)))
    cd, _ = cd_offset(z)
    struct.pack_into("<I", z, cd + 24, 0xFFFF_FFF0)
    struct.pack_into("<I", z, 22, 0xFFFF_FFF0)  # local header's copy
    open(os.path.join(OUT, "npz_declares_4gib.npz"), "wb").write(z)
    case("allocation from declared sizes", "npz_declares_4gib.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL"], 1, "uncompressed bytes")
    # A deflate bomb: 64 MiB of zeros in a 64 KiB member (the declared size is honest).
    bomb = npy_bytes(np.zeros((64 << 20,), np.uint8))
    z = zip_deflated("x.npy", bomb)
    open(os.path.join(OUT, "npz_deflate_bomb.npz"), "wb").write(z)
    case("allocation from declared sizes", "npz_deflate_bomb.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL", "--max-memory", "16M"], 1, "memory budget")
    # The same bomb declaring 1000 bytes: inflation stops at the declared size.
    z = zip_deflated("x.npy", bomb)
    cd, _ = cd_offset(z)
    struct.pack_into("<I", z, cd + 24, 1000)
    struct.pack_into("<I", z, 22, 1000)
    open(os.path.join(OUT, "npz_bomb_lies.npz"), "wb").write(z)
    case("allocation from declared sizes", "npz_bomb_lies.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL"], 1, "more than the 1000 bytes it declares")
    # An .npy whose header declares (2^31, 2^31) fp32 and holds 16 bytes.
    txt = npy_bytes(np.zeros((1, 4), np.float32))
    header_len = struct.unpack_from("<H", txt, 8)[0]
    header = txt[10:10 + header_len].decode().replace("(1, 4)", "(2147483648, 2147483648)").rstrip()
    total = 10 + len(header) + 1
    header = header + " " * ((64 - total % 64) % 64) + "\n"
    out = bytes(txt[:8]) + struct.pack("<H", len(header)) + header.encode() + bytes(txt[10 + header_len:])
    open(os.path.join(OUT, "npy_huge_shape.npy"), "wb").write(out)
    case("allocation from declared sizes", "npy_huge_shape.npy", ["run", "MODELS/tiny_inline.mlmodel", "--input", "x=MODEL"], 1, "shape [2147483648, 2147483648]")
    # /dev/zero as the model specification.
    case("allocation from declared sizes", "/dev/zero", ["dump", "/dev/zero"], 1, "character device")


def zip_edges():
    # Central-directory entry at the very end of the file (after the EOCD), its zip64 extra empty:
    # the sizes it says are in the extra are not there.
    data = npy_bytes(np.array([[1, 2, 3, 4]], dtype=np.float32))
    z = zip_stored("x.npy", data)
    cd, eocd = cd_offset(z)
    entry = bytearray(z[cd:eocd])
    struct.pack_into("<I", entry, 20, 0xFFFF_FFFF)  # compressed size → in zip64 extra
    struct.pack_into("<I", entry, 24, 0xFFFF_FFFF)  # uncompressed size → in zip64 extra
    name_len = struct.unpack_from("<H", entry, 28)[0]
    extra = struct.pack("<HH", 1, 0)                # zip64 extra with no data
    entry = entry[:46 + name_len] + extra
    struct.pack_into("<H", entry, 30, len(extra))
    eocd_rec = bytearray(z[eocd:eocd + 22])
    new_cd = cd + 22
    struct.pack_into("<I", eocd_rec, 16, new_cd)
    struct.pack_into("<I", eocd_rec, 12, len(entry))
    out = bytes(z[:cd]) + bytes(eocd_rec) + bytes(entry)
    open(os.path.join(OUT, "npz_zip64_extra_empty_at_eof.npz"), "wb").write(out)
    case("zip edge cases", "npz_zip64_extra_empty_at_eof.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL"], 1, "member 'x.npy'")
    # The same with a 4-byte (short) zip64 extra.
    entry2 = bytearray(entry[:46 + name_len]) + struct.pack("<HHI", 1, 4, 0x1234)
    struct.pack_into("<H", entry2, 30, 8)
    struct.pack_into("<I", eocd_rec, 12, len(entry2))
    out = bytes(z[:cd]) + bytes(eocd_rec) + bytes(entry2)
    open(os.path.join(OUT, "npz_zip64_extra_short_at_eof.npz"), "wb").write(out)
    case("zip edge cases", "npz_zip64_extra_short_at_eof.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL"], 1, "member 'x.npy'")
    # An extra field whose length runs past the end of the file.
    entry3 = bytearray(entry[:46 + name_len]) + struct.pack("<HH", 0x5455, 400)
    struct.pack_into("<H", entry3, 30, 404)
    struct.pack_into("<I", eocd_rec, 12, len(entry3))
    out = bytes(z[:cd]) + bytes(eocd_rec) + bytes(entry3)
    open(os.path.join(OUT, "npz_extra_past_eof.npz"), "wb").write(out)
    case("zip edge cases", "npz_extra_past_eof.npz", ["run", "MODELS/tiny_inline.mlmodel", "--inputs", "MODEL"], 1, "member 'x.npy'")


def conversions():
    """y = x - 1 (fp16), j = i + 1 (int32): an fp16 input and an int32 input."""
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp16), mb.TensorSpec(shape=(1, 2), dtype=types.int32)],
                opset_version=ct.target.iOS18)
    def prog(x, i):
        y = mb.sub(x=x, y=np.float16(1.0), name="y")
        j = mb.add(x=i, y=np.int32(1), name="j")
        return y, j
    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   compute_precision=ct.precision.FLOAT16, skip_model_load=True)
    save_spec(m.get_spec(), "fp16_int32_inputs.mlmodel")
    inputs = os.path.join(OUT, "inputs")
    # fp64 values whose direct fp16 rounding differs from rounding through fp32 (double rounding),
    # and fp32 values that are not fp16 values.
    x64 = np.array([[1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11 + 2.0 ** -20, 3.0, -2.5]], dtype=np.float64)
    x32 = x64.astype(np.float32)
    np.save(os.path.join(inputs, "x_fp64.npy"), x64)
    np.save(os.path.join(inputs, "x_fp32.npy"), x32)
    np.save(os.path.join(inputs, "i_int32.npy"), np.array([[5, -7]], dtype=np.int32))
    np.save(os.path.join(inputs, "i_int64_small.npy"), np.array([[5, -7]], dtype=np.int64))
    np.save(os.path.join(inputs, "i_int64_big.npy"), np.array([[1 << 40, 5]], dtype=np.int64))
    # Reference, from numpy: Core ML rounds the input to fp16 once, computes in fp32, stores fp16.
    ref = {}
    for tag, x in [("fp64", x64), ("fp32", x32)]:
        h = x.astype(np.float16)  # numpy rounds float64 → float16 directly (correctly rounded)
        ref["y_from_" + tag] = (h.astype(np.float32) - np.float32(1.0)).astype(np.float16).astype(float).tolist()
    ref["j_from_int64_small"] = [[6, -6]]
    with open(os.path.join(OUT, "fp16_int32_inputs.reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    case("silent input conversions", "fp16_int32_inputs.mlmodel",
         ["run", "MODEL", "--input", "x=INPUTS/x_fp64.npy", "--input", "i=INPUTS/i_int64_big.npy"], 1, "--allow-lossy-inputs")
    case("silent input conversions", "fp16_int32_inputs.mlmodel",
         ["run", "MODEL", "--input", "x=INPUTS/x_fp64.npy", "--input", "i=INPUTS/i_int64_big.npy", "--allow-lossy-inputs"], 0, "warning")


def verifier():
    spec = inline_spec()
    for k in list(spec.mlProgram.functions.keys()):
        del spec.mlProgram.functions[k]
    save_spec(spec, "no_functions.mlmodel")
    case("accepted but invalid", "no_functions.mlmodel", ["dump", "MODEL"], 1, "has no functions")

    spec = inline_spec()
    del block(spec).outputs[:]
    save_spec(spec, "no_outputs.mlmodel")
    for verb in ["dump", "diagnose"]:
        case("accepted but invalid", "no_outputs.mlmodel", [verb, "MODEL"], 1, "returns no outputs")

    spec = inline_spec()
    arr = spec.description.input[0].type.multiArrayType
    del arr.shape[:]
    arr.shape.extend([-3, 4])
    save_spec(spec, "negative_description_dim.mlmodel")
    case("accepted but invalid", "negative_description_dim.mlmodel", ["dump", "MODEL"], 1, "negative dimension -3")

    spec = inline_spec()
    arr = spec.description.input[0].type.multiArrayType
    r = arr.shapeRange.sizeRanges.add(); r.lowerBound = 1; r.upperBound = 1
    r = arr.shapeRange.sizeRanges.add(); r.lowerBound = 10; r.upperBound = 2
    save_spec(spec, "rangedim_lower_above_upper.mlmodel")
    for verb in ["dump", "diagnose"]:
        case("accepted but invalid", "rangedim_lower_above_upper.mlmodel", [verb, "MODEL"], 1, "lower bound 10 above upper bound 2")

    spec = inline_spec()
    arr = spec.description.input[0].type.multiArrayType
    arr.enumeratedShapes.SetInParent()
    save_spec(spec, "empty_enumerated_shapes.mlmodel")
    case("accepted but invalid", "empty_enumerated_shapes.mlmodel", ["dump", "MODEL"], 1, "EnumeratedShapes lists no shapes")

    spec = inline_spec()
    find(spec, "b").type = "frobnicate"
    save_spec(spec, "unknown_op_type.mlmodel")
    for verb in ["dump", "diagnose"]:
        case("accepted but invalid", "unknown_op_type.mlmodel", [verb, "MODEL"], 1, "unknown op type 'frobnicate'")
    case("accepted but invalid", "unknown_op_type.mlmodel", ["optimize", "MODEL", "-o", "TMP/o.mlpackage"], 1, "unknown op type 'frobnicate'")

    # Packages with a weight blob.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 16), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def prog(x):
        return mb.add(x=x, y=np.arange(16, dtype=np.float32).reshape(1, 16), name="y")
    base = os.path.join(OUT, "_base.mlpackage")
    if os.path.exists(base):
        shutil.rmtree(base)
    convert(prog).save(base)

    def package(name, mutate_spec=None, mutate_weights=None):
        dst = os.path.join(OUT, name)
        if os.path.exists(dst):
            shutil.rmtree(dst)
        shutil.copytree(base, dst)
        spec_path = os.path.join(dst, "Data", "com.apple.CoreML", "model.mlmodel")
        w_path = os.path.join(dst, "Data", "com.apple.CoreML", "weights", "weight.bin")
        if mutate_spec:
            s = Model_pb2.Model()
            s.ParseFromString(open(spec_path, "rb").read())
            mutate_spec(s)
            open(spec_path, "wb").write(s.SerializeToString())
        if mutate_weights:
            w = bytearray(open(w_path, "rb").read())
            mutate_weights(w)
            open(w_path, "wb").write(w)
        return name

    def blob_value(s):
        for op in ops(s):
            if op.type == "const" and op.attributes["val"].WhichOneof("value") == "blobFileValue":
                return op.attributes["val"].blobFileValue
        raise KeyError("no blob")

    def payload_into_header(w):
        # record at 64: data offset → 0 (the header), size unchanged (64 bytes = 16 fp32).
        struct.pack_into("<Q", w, 64 + 16, 0)
    package("blob_payload_overlaps_header.mlpackage", mutate_weights=payload_into_header)
    case("accepted but invalid", "blob_payload_overlaps_header.mlpackage", ["dump", "MODEL"], 1, "overlaps the 64-byte weight file header")

    def count_zero(w):
        struct.pack_into("<I", w, 0, 0)
    package("blob_header_count_zero.mlpackage", mutate_weights=count_zero)
    case("accepted but invalid", "blob_header_count_zero.mlpackage", ["dump", "MODEL"], 1, "the header declares 0 blobs")

    def outside(s):
        blob_value(s).fileName = "@model_path/../../../outside_weight.bin"
    package("weight_path_outside.mlpackage", mutate_spec=outside)
    shutil.copy(os.path.join(base, "Data", "com.apple.CoreML", "weights", "weight.bin"), os.path.join(OUT, "outside_weight.bin"))
    case("accepted but invalid", "weight_path_outside.mlpackage", ["dump", "MODEL"], 1, "weight path leaves the model's folder")

    def absolute(s):
        blob_value(s).fileName = "/etc/passwd"
    package("weight_path_absolute.mlpackage", mutate_spec=absolute)
    case("accepted but invalid", "weight_path_absolute.mlpackage", ["dump", "MODEL"], 1, "weight path leaves the model's folder")
    # The unmodified package: a valid result for every verb.
    package("valid_blob.mlpackage")
    case("valid", "valid_blob.mlpackage", ["dump", "MODEL"], 0)
    case("valid", "valid_blob.mlpackage", ["diagnose", "MODEL"], 0)
    shutil.rmtree(base)


def messages():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def prog(x):
        ids = mb.cast(x=x, dtype="int32", name="ids")
        return mb.gather(x=np.arange(8, dtype=np.float32).reshape(4, 2), indices=ids, axis=0, name="rows")
    save_spec(convert(prog).get_spec(), "cast_then_gather.mlmodel")
    np.save(os.path.join(OUT, "inputs", "x_ids_out_of_range.npy"), np.array([1, 7], dtype=np.float32))
    case("messages", "cast_then_gather.mlmodel", ["run", "MODEL", "--input", "x=INPUTS/x_ids_out_of_range.npy"], 1,
         "indices derive from input 'x' through cast")


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "inputs"))
    nesting()
    overflow()
    allocation()
    zip_edges()
    conversions()
    verifier()
    messages()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"generator": "tools/make_hostile_fixtures.py", "coremltools": ct.__version__, "cases": CASES}, f, indent=1)
    total = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(OUT) for n in ns)
    print(len(CASES), "cases,", total, "bytes in", OUT)


if __name__ == "__main__":
    sys.exit(main())
