"""pytest plugin: turn coremltools' MIL op unit tests into conformance cases for forge-ir.

coremltools' op tests (coremltools/converters/mil/mil/ops/tests/iOS14…iOS18) build a program
with the MIL builder, convert it with ct.convert and hand the model, the inputs and the
numpy-computed expected outputs to `compare_backend`, which predicts with Core ML on macOS and
does nothing elsewhere. This plugin replaces `compare_backend` by a recorder: each call writes
one case folder

    <out>/cases/<id>/model.mlpackage   the converted model, exactly as ct.convert made it
    <out>/cases/<id>/inputs.npz        the inputs, cast as Core ML's predict would cast them
    <out>/cases/<id>/expected.npz      the expected outputs (keys: the model's output names)
    <out>/cases/<id>/case.json         test id, tolerances, precision, compute unit, op types

Options (environment): FORGE_CONF_OUT (output folder, required), FORGE_CONF_PER_TEST (at most
this many parametrizations per test function and precision, chosen evenly over the
parametrization list; 0 = all).
"""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

_OUT = None
_STATE_IDS = {}
_CALLS = {}


def _sanitize(name):
    from coremltools.converters.mil.mil.passes.defs.preprocess import NameSanitizer

    return NameSanitizer._replace_invalid_char_with_underscore(name)


def _precision_of(item):
    cs = getattr(item, "callspec", None)
    if cs is None:
        return "none"
    for v in cs.params.values():
        p = getattr(v, "precision", None)
        if p is not None:
            return p
        if isinstance(v, tuple) and len(v) == 2 and v[1] in ("fp16", "fp32"):
            return v[1]
    return "none"


def pytest_collection_modifyitems(session, config, items):
    cap = int(os.environ.get("FORGE_CONF_PER_TEST", "30"))
    if cap <= 0:
        return
    groups = {}
    for it in items:
        key = (it.nodeid.split("[")[0], _precision_of(it))
        groups.setdefault(key, []).append(it)
    keep = set()
    for key, its in groups.items():
        n = len(its)
        k = max(1, cap // 2) if key[1] in ("fp16", "fp32") else cap
        if n <= k:
            keep.update(id(i) for i in its)
        else:
            keep.update(id(its[int((j + 0.5) * n / k)]) for j in range(k))
    deselected = [i for i in items if id(i) not in keep]
    items[:] = [i for i in items if id(i) in keep]
    config.hook.pytest_deselected(items=deselected)


_ARRAY_DTYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT32": np.int32, "INT8": np.int8, "UINT8": np.uint8}


def _input_dtypes(spec):
    from coremltools.proto import FeatureTypes_pb2

    names = {}
    for inp in spec.description.input:
        if inp.type.WhichOneof("Type") == "multiArrayType":
            dt = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(inp.type.multiArrayType.dataType)
            names[inp.name] = _ARRAY_DTYPES.get(dt, np.float32)
        else:
            names[inp.name] = None
    return names


def _op_types(spec):
    types = []

    def walk(block):
        for op in block.operations:
            types.append(op.type)
            for b in op.blocks:
                walk(b)

    for f in spec.mlProgram.functions.values():
        for b in f.block_specializations.values():
            walk(b)
    return types


def _opset(spec):
    for f in spec.mlProgram.functions.values():
        return f.opset
    return ""


def capture_compare_backend(
    mlmodel,
    input_key_values,
    expected_outputs,
    dtype="fp32",
    atol=1e-04,
    rtol=1e-05,
    also_compare_shapes=True,
    state=None,
    allow_mismatch_ratio=0.0,
):
    nodeid = os.environ.get("PYTEST_CURRENT_TEST", "unknown").split(" (")[0].strip()
    k = _CALLS.get(nodeid, 0)
    _CALLS[nodeid] = k + 1
    cid = hashlib.sha1(nodeid.encode()).hexdigest()[:16] + "_%d" % k
    d = os.path.join(_OUT, "cases", cid)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    meta = {
        "id": cid,
        "test": nodeid,
        "call": k,
        "precision": dtype,
        "atol": float(atol),
        "rtol": float(rtol),
        "also_compare_shapes": bool(also_compare_shapes),
        "allow_mismatch_ratio": float(allow_mismatch_ratio),
        "compute_unit": getattr(getattr(mlmodel, "compute_unit", None), "name", "CPU_ONLY"),
        "stateful": state is not None,
        "state_chain": None,
        "unsupported": None,
    }
    if state is not None:
        key = (nodeid, id(state))
        meta["state_chain"] = "%s/%d" % (cid.split("_")[0], _STATE_IDS.setdefault(key, len(_STATE_IDS)))
    try:
        spec = mlmodel.get_spec()
        if spec.WhichOneof("Type") != "mlProgram":
            meta["unsupported"] = "not an ML Program (%s)" % spec.WhichOneof("Type")
        else:
            meta["op_types"] = _op_types(spec)
            meta["opset"] = _opset(spec)
            meta["specification_version"] = spec.specificationVersion
            dtypes = _input_dtypes(spec)
            inputs = {}
            for name, v in (input_key_values or {}).items():
                sname = _sanitize(name)
                if not isinstance(v, (np.ndarray, np.generic, float, int, bool)):
                    meta["unsupported"] = "input %s is a %s (image inputs are not run)" % (name, type(v).__name__)
                    break
                # as coremltools' run_core_ml_predict: arrays to float32, scalars to shape [1]
                a = np.asarray(v)
                a = a.astype(np.float32) if a.shape != () else np.array([v], dtype=np.float32)
                target = dtypes.get(sname, np.float32)
                if target is None:
                    meta["unsupported"] = "input %s is not a multi-array" % name
                    break
                inputs[sname] = a.astype(target)
            expected = {}
            for name, v in (expected_outputs or {}).items():
                if isinstance(v, dict):
                    meta["unsupported"] = "classifier output %s" % name
                    break
                expected[_sanitize(name)] = np.asarray(v)
            meta["outputs"] = [o.name for o in spec.description.output]
            if meta["unsupported"] is None:
                mlmodel.save(os.path.join(d, "model.mlpackage"))
                np.savez(os.path.join(d, "inputs.npz"), **inputs)
                np.savez(os.path.join(d, "expected.npz"), **expected)
    except Exception as e:  # a recorder failure must not be taken for an op failure
        meta["unsupported"] = "harvest failed: %s: %s" % (type(e).__name__, e)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return None


def pytest_configure(config):
    global _OUT
    _OUT = os.environ["FORGE_CONF_OUT"]
    os.makedirs(os.path.join(_OUT, "cases"), exist_ok=True)
    import coremltools.converters.mil.testing_utils as tu

    tu.compare_backend = capture_compare_backend
    import coremltools.converters.mil.mil.ops.tests.testing_utils as otu

    otu.compare_backend = capture_compare_backend
    # Stateful tests ask the model for a state first (macOS only): hand them a placeholder, the
    # recorder keys the chain of calls on it.
    import coremltools as ct

    ct.models.MLModel.make_state = lambda self: _StatePlaceholder()


class _StatePlaceholder:
    pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        with open(os.path.join(_OUT, "pytest_outcomes.jsonl"), "a") as f:
            rec = {"test": report.nodeid, "outcome": report.outcome, "when": report.when}
            if report.failed:
                # "DID NOT RAISE": the test expected the prediction to fail (a negative case)
                rec["message"] = report.longreprtext[-2000:]
            f.write(json.dumps(rec) + "\n")
