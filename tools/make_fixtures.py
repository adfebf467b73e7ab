#!/usr/bin/env python3
"""Regenerate every fixture under models-ir/ (deterministic: fixed seeds, fixed metadata).

Usage:  tools/.venv/bin/python tools/make_fixtures.py [--out models-ir] [--only NAME ...]

See tools/NOTES.md for what each fixture is and the pitfalls met.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

import tiny_llama as tl  # noqa: E402
from spec_reference import reference_json  # noqa: E402

FIXED_DATE = "2025-01-01 00:00:00"
DATE_KEY = "com.github.apple.coremltools.conversion_date"
TARGET = ct.target.iOS18

warnings.filterwarnings("ignore")


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def dumps_compact(obj, indent=0):
    """JSON with 2-space indentation, but lists of scalars (or of such lists) on one line."""
    pad = "  " * indent

    def flat(x):
        if isinstance(x, list):
            return all(not isinstance(e, (dict, list)) or (isinstance(e, list) and flat(e)) for e in x)
        return not isinstance(x, dict)

    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad}  {json.dumps(k)}: {dumps_compact(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if flat(obj):
            return json.dumps(obj)
        items = [pad + "  " + dumps_compact(v, indent + 1) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj)


def fix_metadata(mlmodel):
    md = mlmodel.user_defined_metadata
    if DATE_KEY in md:
        md[DATE_KEY] = FIXED_DATE


def fix_manifest(pkg, fixture_name):
    """Replace the random item UUIDs of Manifest.json by name-derived ones, and re-serialize
    the spec with deterministic (sorted) map order, so that regenerating gives identical bytes."""
    mpath = os.path.join(pkg, "Manifest.json")
    with open(mpath) as f:
        manifest = json.load(f)
    # git keeps no empty folder: an item whose folder is empty (the weights of a model without
    # blobs) would be missing from a clone, and coremltools refuses a manifest item that is missing.
    for key in [k for k, e in manifest["itemInfoEntries"].items()
                if os.path.isdir(os.path.join(pkg, "Data", e["path"])) and not os.listdir(os.path.join(pkg, "Data", e["path"]))]:
        os.rmdir(os.path.join(pkg, "Data", manifest["itemInfoEntries"][key]["path"]))
        del manifest["itemInfoEntries"][key]
    remap = {}
    for key, entry in manifest["itemInfoEntries"].items():
        remap[key] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"forge-ir/{fixture_name}/{entry['path']}"))
    manifest["itemInfoEntries"] = {remap[k]: v for k, v in manifest["itemInfoEntries"].items()}
    manifest["rootModelIdentifier"] = remap[manifest["rootModelIdentifier"]]
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=4, sort_keys=True)  # same layout as coremltools' writer
        f.write("\n")
    root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    deterministic_spec(os.path.join(pkg, "Data", root["path"]))


def deterministic_spec(model_file):
    """Python protobuf writes map entries in hash order; rewrite with sorted map keys."""
    spec = ct.utils.load_spec(model_file)
    with open(model_file, "wb") as f:
        f.write(spec.SerializeToString(deterministic=True))


def save_package(mlmodel, out_dir, name):
    path = os.path.join(out_dir, name + ".mlpackage")
    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(mlmodel)
    mlmodel.save(path)
    fix_manifest(path, name)
    return path


def write_reference(out_dir, file_name):
    path = os.path.join(out_dir, file_name)
    ref = reference_json(path)
    stem = file_name.rsplit(".", 1)[0]
    with open(os.path.join(out_dir, "reference", stem + ".json"), "w") as f:
        f.write(dumps_compact(ref) + "\n")
    return ref


def op_counts(mlmodel):
    ref_ops = {}
    for fn_name, fn in mlmodel._mil_program.functions.items():
        counts = {}
        for op in fn.operations:
            counts[op.op_type] = counts.get(op.op_type, 0) + 1
        ref_ops[fn_name] = counts
    return ref_ops


# ---------------------------------------------------------------------------------------------
# tiny llama
# ---------------------------------------------------------------------------------------------

LLAMA_SEED = 1234
PREFILL_TOKENS = [17, 200, 3, 99, 42, 128, 7]
N_DECODE = 5


def make_llama(kv_write):
    torch.manual_seed(0)
    m = tl.TinyLlama(kv_write=kv_write).init_weights(LLAMA_SEED).round_weights_to_fp16().eval()
    return m


def convert_llama(kv_write, s_fixed=None):
    """Trace + convert the tiny llama. s_fixed=None -> S is RangeDim(1, CTX, default=1)."""
    tl.register_index_copy_converter()
    m = make_llama(kv_write)
    s_trace = 7 if s_fixed is None else s_fixed
    ex = tl.make_inputs(PREFILL_TOKENS[:s_trace] if s_trace <= 7 else list(range(s_trace)), 0)
    ex_t = tuple(torch.from_numpy(ex[k]) for k in ("input_ids", "causal_mask", "position_ids", "cache_offset"))
    traced = torch.jit.trace(m, ex_t, check_trace=False)
    S = ct.RangeDim(1, tl.CTX, default=1, symbol="S") if s_fixed is None else s_fixed
    inputs = [
        ct.TensorType(name="input_ids", shape=(1, S), dtype=np.int32),
        ct.TensorType(name="causal_mask", shape=(1, 1, S, tl.CTX), dtype=np.float16),
        ct.TensorType(name="position_ids", shape=(1, S), dtype=np.int32),
        ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32),
    ]
    states = [
        ct.StateType(
            wrapped_type=ct.TensorType(shape=(1, tl.N_KV, tl.CTX, tl.HEAD_DIM), dtype=np.float16),
            name=f"{kind}_cache_{i}",
        )
        for i in range(tl.N_LAYERS)
        for kind in ("key", "value")
    ]
    mlmodel = ct.convert(
        traced,
        inputs=inputs,
        outputs=[ct.TensorType(name="logits", dtype=np.float16)],
        states=states,
        convert_to="mlprogram",
        minimum_deployment_target=TARGET,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=True,
    )
    return mlmodel


def run_reference(model, out_npz):
    """Prefill S=7 at offset 0, then 5 greedy S=1 decode steps; fp32 caches."""
    for i in range(tl.N_LAYERS):
        setattr(model, f"key_cache_{i}", torch.zeros(1, tl.N_KV, tl.CTX, tl.HEAD_DIM, dtype=torch.float32))
        setattr(model, f"value_cache_{i}", torch.zeros(1, tl.N_KV, tl.CTX, tl.HEAD_DIM, dtype=torch.float32))
    data = {}
    calls = [(PREFILL_TOKENS, 0)]
    tokens = list(PREFILL_TOKENS)
    k = 0
    start = 0
    ids = PREFILL_TOKENS
    while True:
        inp = tl.make_inputs(ids, start)
        logits = tl.torch_call(model, inp).numpy().astype(np.float32)
        for key, val in inp.items():
            data[f"call{k}_{key}"] = val
        data[f"call{k}_logits"] = logits
        nxt = int(np.argmax(logits[0, -1]))
        start += len(ids)
        k += 1
        if k > N_DECODE:
            break
        ids = [nxt]
        tokens.append(nxt)
    for i in range(tl.N_LAYERS):
        data[f"final_key_cache_{i}"] = getattr(model, f"key_cache_{i}").numpy().astype(np.float32)
        data[f"final_value_cache_{i}"] = getattr(model, f"value_cache_{i}").numpy().astype(np.float32)
    np.savez_compressed(out_npz, **data)
    mx = max(float(np.abs(data[f"call{j}_logits"]).max()) for j in range(N_DECODE + 1))
    return tokens, mx


def sanitized_param_map(model):
    return {name.replace(".", "_"): p for name, p in model.named_parameters()}


def dequantized_weights_from_package(pkg_path):
    """{const-output-name: fp32 array} for every constexpr_blockwise_shift_scale of the package,
    computed in numpy from the package's stored data/scale/offset (read back with coremltools'
    milproto loader)."""
    from check_package import load_program

    prog = load_program(pkg_path)
    out = {}
    for fn in prog.functions.values():
        for op in fn.operations:
            if op.op_type != "constexpr_blockwise_shift_scale":
                continue
            data = np.asarray(op.data.val).astype(np.float32)
            scale = np.asarray(op.scale.val).astype(np.float32)
            offset = None if op.offset is None else np.asarray(op.offset.val).astype(np.float32)
            reps = [d // s for d, s in zip(data.shape, scale.shape)]
            sc = scale
            for ax, r in enumerate(reps):
                sc = np.repeat(sc, r, axis=ax)
            if offset is not None:
                of = offset
                for ax, r in enumerate(reps):
                    of = np.repeat(of, r, axis=ax)
                data = data - of
            out[op.outputs[0].name] = sc * data
    return out


def apply_dequantized(model, deq):
    params = sanitized_param_map(model)
    used = []
    for const_name, w in deq.items():
        base = const_name
        for suffix in ("_quantized",):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        for suffix in ("_to_fp16",):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
        if base not in params:
            raise KeyError(f"cannot map quantized const {const_name!r} to a torch parameter")
        p = params[base]
        assert tuple(p.shape) == w.shape, (const_name, p.shape, w.shape)
        assert float(np.abs(p.detach().numpy() - w).max()) < 0.1, const_name
        with torch.no_grad():
            p.copy_(torch.from_numpy(w))
        used.append(base)
    return sorted(used)


def gen_tiny_llama(out_dir, log):
    ref_dir = os.path.join(out_dir, "reference")
    # fp16
    ml = convert_llama("scatter")
    p16 = save_package(ml, out_dir, "tiny_llama_fp16")
    log["tiny_llama_fp16"] = write_reference(out_dir, "tiny_llama_fp16.mlpackage")["functions"][0]["op_counts"]
    toks, mx = run_reference(make_llama("scatter"), os.path.join(ref_dir, "tiny_llama_fp16_run.npz"))
    log["tiny_llama_fp16_run"] = {"tokens": toks, "max_abs_logit": mx}

    # int8 (per-block 32, symmetric)
    cfg = ct.optimize.coreml.OptimizationConfig(
        global_config=ct.optimize.coreml.OpLinearQuantizerConfig(
            mode="linear_symmetric", dtype="int8", granularity="per_block", block_size=32,
            weight_threshold=512,
        )
    )
    ml8 = ct.optimize.coreml.linear_quantize_weights(ml, config=cfg)
    p8 = save_package(ml8, out_dir, "tiny_llama_int8")
    log["tiny_llama_int8"] = write_reference(out_dir, "tiny_llama_int8.mlpackage")["functions"][0]["op_counts"]
    m8 = make_llama("scatter")
    deq = dequantized_weights_from_package(p8)
    log["tiny_llama_int8_dequantized_params"] = apply_dequantized(m8, deq)
    toks, mx = run_reference(m8, os.path.join(ref_dir, "tiny_llama_int8_run.npz"))
    log["tiny_llama_int8_run"] = {"tokens": toks, "max_abs_logit": mx}

    # dynamic end (slice assignment -> slice_update with run-time begin/end)
    mld = convert_llama("slice")
    save_package(mld, out_dir, "tiny_llama_dynamic_end")
    log["tiny_llama_dynamic_end"] = write_reference(out_dir, "tiny_llama_dynamic_end.mlpackage")["functions"][0]["op_counts"]
    toks, mx = run_reference(make_llama("slice"), os.path.join(ref_dir, "tiny_llama_dynamic_end_run.npz"))
    log["tiny_llama_dynamic_end_run"] = {"tokens": toks, "max_abs_logit": mx}


# ---------------------------------------------------------------------------------------------
# multifunction: prefill (S = RangeDim) + decode (S = 1) of the tiny llama
# ---------------------------------------------------------------------------------------------

def gen_multifunction(out_dir, log):
    tmp = tempfile.mkdtemp(prefix="forge_mf_")
    try:
        pre = convert_llama("scatter")
        dec = convert_llama("scatter", s_fixed=1)
        fix_metadata(pre)
        fix_metadata(dec)
        pre_path = os.path.join(tmp, "prefill.mlpackage")
        dec_path = os.path.join(tmp, "decode.mlpackage")
        pre.save(pre_path)
        dec.save(dec_path)
        desc = ct.utils.MultiFunctionDescriptor()
        desc.add_function(pre_path, src_function_name="main", target_function_name="prefill")
        desc.add_function(dec_path, src_function_name="main", target_function_name="decode")
        desc.default_function_name = "decode"
        path = os.path.join(out_dir, "multifunction.mlpackage")
        if os.path.exists(path):
            shutil.rmtree(path)
        ct.utils.save_multifunction(desc, path)
        fix_manifest(path, "multifunction")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = write_reference(out_dir, "multifunction.mlpackage")
    log["multifunction"] = {f["name"]: f["op_counts"] for f in ref["functions"]}


# ---------------------------------------------------------------------------------------------
# enumerated shapes
# ---------------------------------------------------------------------------------------------

class EmbedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.proj = torch.nn.Linear(16, 32)

    def forward(self, input_ids):
        return self.proj(self.embed(input_ids))


def gen_enumerated(out_dir, log):
    torch.manual_seed(7)
    m = EmbedLinear().eval()
    traced = torch.jit.trace(m, torch.zeros(1, 16, dtype=torch.int32), check_trace=False)
    ml = ct.convert(
        traced,
        inputs=[ct.TensorType(name="input_ids", dtype=np.int32,
                              shape=ct.EnumeratedShapes(shapes=[(1, 1), (1, 16), (1, 32)], default=(1, 16)))],
        outputs=[ct.TensorType(name="hidden")],
        convert_to="mlprogram",
        minimum_deployment_target=TARGET,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=True,
    )
    save_package(ml, out_dir, "enumerated_shapes")
    log["enumerated_shapes"] = write_reference(out_dir, "enumerated_shapes.mlpackage")["functions"][0]["op_counts"]


# ---------------------------------------------------------------------------------------------
# not an ML Program (neuralNetwork)
# ---------------------------------------------------------------------------------------------

def gen_not_mlprogram(out_dir, log):
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    rng = np.random.RandomState(3)
    builder = NeuralNetworkBuilder(
        [("x", datatypes.Array(4))], [("y", datatypes.Array(3))], disable_rank5_shape_mapping=True
    )
    builder.add_inner_product(
        name="fc", W=rng.randn(3, 4).astype(np.float32), b=rng.randn(3).astype(np.float32),
        input_channels=4, output_channels=3, has_bias=True, input_name="x", output_name="fc_out",
    )
    builder.add_activation(name="relu", non_linearity="RELU", input_name="fc_out", output_name="y")
    spec = builder.spec
    spec.description.metadata.author = "forge-ir fixtures"
    spec.description.metadata.shortDescription = "tiny neuralNetwork model (not an ML Program)"
    path = os.path.join(out_dir, "not_mlprogram.mlmodel")
    ct.utils.save_spec(spec, path)
    deterministic_spec(path)
    ref = write_reference(out_dir, "not_mlprogram.mlmodel")
    log["not_mlprogram"] = {"model_type": ref["model_type"], "spec_version": ref["specification_version"]}


# ---------------------------------------------------------------------------------------------
# single-file ML Program with inline constants only
# ---------------------------------------------------------------------------------------------

def gen_tiny_inline(out_dir, log):
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=TARGET)
    def prog(x):
        w = np.array([[0.5, -1.0, 0.25, 2.0], [1.5, 0.0, -0.5, 1.0]], dtype=np.float32)  # 8 elements
        b = np.array([0.1, -0.2], dtype=np.float32)
        y = mb.linear(x=x, weight=w, bias=b, name="fc")
        y = mb.relu(x=y, name="act")
        return mb.mul(x=y, y=np.float32(3.0), name="y")

    ml = ct.convert(
        prog, convert_to="mlprogram", minimum_deployment_target=TARGET,
        compute_precision=ct.precision.FLOAT16, skip_model_load=True,
    )
    fix_metadata(ml)
    spec = ml.get_spec()
    path = os.path.join(out_dir, "tiny_inline.mlmodel")
    try:
        ct.utils.save_spec(spec, path)
        log["tiny_inline_save"] = "ct.utils.save_spec"
    except Exception as e:  # pragma: no cover - documented in NOTES.md
        log["tiny_inline_save"] = f"save_spec refused ({type(e).__name__}: {e}); wrote SerializeToString()"
        with open(path, "wb") as f:
            f.write(spec.SerializeToString())
    deterministic_spec(path)
    ref = write_reference(out_dir, "tiny_inline.mlmodel")
    assert ref["blob_count"] == 0, "tiny_inline must not reference weight.bin"
    log["tiny_inline"] = ref["functions"][0]["op_counts"]


# ---------------------------------------------------------------------------------------------
# mixed dtypes
# ---------------------------------------------------------------------------------------------

def gen_mixed_dtypes(out_dir, log):
    from mixed_dtypes import build_mixed_dtypes

    ml, notes = build_mixed_dtypes()
    log["mixed_dtypes_notes"] = notes
    save_package(ml, out_dir, "mixed_dtypes")
    log["mixed_dtypes"] = write_reference(out_dir, "mixed_dtypes.mlpackage")["functions"][0]["op_counts"]


# ---------------------------------------------------------------------------------------------

GENERATORS = {
    "tiny_llama": gen_tiny_llama,
    "multifunction": gen_multifunction,
    "enumerated_shapes": gen_enumerated,
    "not_mlprogram": gen_not_mlprogram,
    "tiny_inline": gen_tiny_inline,
    "mixed_dtypes": gen_mixed_dtypes,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "models-ir"))
    ap.add_argument("--only", nargs="*", choices=sorted(GENERATORS))
    ap.add_argument("--log", help="write a JSON summary (op counts, notes) here")
    args = ap.parse_args()
    out_dir = os.path.abspath(args.out)
    os.makedirs(os.path.join(out_dir, "reference"), exist_ok=True)
    log = {}
    for name, fn in GENERATORS.items():
        if args.only and name not in args.only:
            continue
        print(f"[make_fixtures] {name}", file=sys.stderr)
        fn(out_dir, log)
    text = dumps_compact(log)
    if args.log:
        with open(args.log, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
