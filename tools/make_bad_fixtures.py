"""Builds the malformed ML Program fixtures for the loader's error paths.

Each is a small valid program made with coremltools' MIL Builder (all constants inline,
so a single .mlmodel file holds it), then one field of its protobuf is broken by hand:

  bad_undefined_value.mlmodel  an op input names a value that nothing defines
  bad_cycle.mlmodel            two ops each read the other's output
  bad_unknown_dtype.mlmodel    a tensor type with DataType code 99

Run with the tools venv:  tools/.venv/bin/python tools/make_bad_fixtures.py
"""
import os
import sys

import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models-ir")


def base_spec():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)],
                opset_version=ct.target.iOS18)
    def prog(x):
        a = mb.add(x=x, y=np.float32(1.0), name="a")
        b = mb.mul(x=a, y=np.float32(2.0), name="b")
        return mb.relu(x=b, name="c")

    m = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS18,
                   compute_precision=ct.precision.FLOAT32, skip_model_load=True)
    return m.get_spec()


def ops(spec):
    fn = spec.mlProgram.functions["main"]
    return fn.block_specializations[fn.opset].operations


def find(spec, out_name):
    for op in ops(spec):
        if any(o.name == out_name for o in op.outputs):
            return op
    raise KeyError(out_name)


def save(spec, name):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(spec.SerializeToString())
    print("wrote", path, os.path.getsize(path), "bytes")


def main():
    os.makedirs(OUT, exist_ok=True)

    spec = base_spec()
    find(spec, "b").inputs["x"].arguments[0].name = "nope"
    save(spec, "bad_undefined_value.mlmodel")

    spec = base_spec()
    # a reads b, b reads a: a cycle (in file order: a uses b before b is defined).
    find(spec, "a").inputs["x"].arguments[0].name = "b"
    save(spec, "bad_cycle.mlmodel")

    spec = base_spec()
    find(spec, "c").outputs[0].type.tensorType.dataType = 99
    save(spec, "bad_unknown_dtype.mlmodel")


if __name__ == "__main__":
    sys.exit(main())
