#!/usr/bin/env python3
"""Build models-ir/coremltools_crash_end_index.mlpackage: a minimal stateful MIL program that
makes coremltools 9's default pass pipeline fail in `common::rank0_expand_dims_swap` with
"Cannot delete op '<end>' with active output ...".

The program writes one new row into each of two fp16 state caches at a run-time offset. The end
index of both writes is `end = add(off, 1)` of the rank-0 `off = gather(cache_offset, 0)`:
the key write builds its end vector with `concat(..., expand_dims(end, axes=[0]), ...)`, the
value write with `stack((0, 0, end, 0), axis=0)`. rank0_expand_dims_swap rewrites the `add`
feeding the single `expand_dims` and tries to rebuild the other consumers of `end`, but it
cannot re-bind the `stack`'s tuple input, so the old `add` keeps a user and its removal
raises. (The same shape of failure is what users hit with converted KV-cache writes.)

The program is converted with `pass_pipeline=ct.PassPipeline.EMPTY` so that the crashing pass
does not run at save time; the unoptimized program is what gets saved.

Usage:  tools/.venv/bin/python tools/make_crash_fixture.py [OUT.mlpackage]
        (default models-ir/coremltools_crash_end_index.mlpackage, plus its reference JSON in
        models-ir/reference/)
"""

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

TARGET = ct.target.iOS18
CACHE = (1, 2, 8, 4)  # [batch, kv heads, context, head dim]


def build_program():
    @mb.program(
        input_specs=[
            mb.TensorSpec(shape=(1, 2, 1, 4), dtype=types.fp16),      # k: the new row
            mb.TensorSpec(shape=(1, 2, 1, 4), dtype=types.fp16),      # v
            mb.TensorSpec(shape=(1,), dtype=types.int32),             # cache_offset
            mb.StateTensorSpec(shape=CACHE, dtype=types.fp16),        # key_cache
            mb.StateTensorSpec(shape=CACHE, dtype=types.fp16),        # value_cache
        ],
        opset_version=TARGET,
    )
    def prog(k, v, cache_offset, key_cache, value_cache):
        off = mb.gather(x=cache_offset, indices=np.int32(0), axis=0, name="off")  # rank 0
        end = mb.add(x=off, y=np.int32(1), name="end_1")                         # rank 0 + const
        z = np.int32(0)
        # key write: begin/end through concat of expand_dims (the common converter output)
        off_1d = mb.expand_dims(x=off, axes=[0], name="off_1d")
        end_1d = mb.expand_dims(x=end, axes=[0], name="end_1d")
        zeros2 = np.zeros((2,), dtype=np.int32)
        zeros1 = np.zeros((1,), dtype=np.int32)
        k_begin = mb.concat(values=(zeros2, off_1d, zeros1), axis=0, name="k_begin")
        k_end = mb.concat(values=(zeros2, end_1d, zeros1), axis=0, name="k_end")
        # value write: begin/end through stack of rank-0 values (end also feeds this stack)
        v_begin = mb.stack(values=(z, z, off, z), axis=0, name="v_begin")
        v_end = mb.stack(values=(z, z, end, z), axis=0, name="v_end")
        end_mask = (True, True, False, True)
        kc = mb.read_state(input=key_cache, name="key_cache_read")
        k2 = mb.slice_update(x=kc, update=k, begin=k_begin, end=k_end, end_mask=end_mask, name="key_cache_new")
        k3 = mb.coreml_update_state(state=key_cache, value=k2, name="key_cache_written")
        vc = mb.read_state(input=value_cache, name="value_cache_read")
        v2 = mb.slice_update(x=vc, update=v, begin=v_begin, end=v_end, end_mask=end_mask, name="value_cache_new")
        v3 = mb.coreml_update_state(state=value_cache, value=v2, name="value_cache_written")
        out = mb.add(x=mb.reduce_sum(x=k3, axes=[2], keep_dims=False),
                     y=mb.reduce_sum(x=v3, axes=[2], keep_dims=False), name="out")
        return out

    return prog


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "models-ir", "coremltools_crash_end_index.mlpackage")
    out = os.path.normpath(out)
    prog = build_program()
    ml = ct.convert(prog, convert_to="mlprogram", minimum_deployment_target=TARGET,
                    compute_precision=ct.precision.FLOAT16, skip_model_load=True,
                    pass_pipeline=ct.PassPipeline.EMPTY)
    if os.path.exists(out):
        shutil.rmtree(out)
    # same determinism as make_fixtures.py (fixed date, name-derived manifest UUIDs, sorted maps)
    from make_fixtures import fix_manifest, fix_metadata
    fix_metadata(ml)
    ml.save(out)
    fix_manifest(out, os.path.basename(out)[: -len(".mlpackage")])
    # reference JSON next to the other fixtures' (forge-ir dump --json is tested against it)
    ref_dir = os.path.join(os.path.dirname(out), "reference")
    if os.path.isdir(ref_dir):
        from make_fixtures import write_reference
        write_reference(os.path.dirname(out), os.path.basename(out))
    print(out)


if __name__ == "__main__":
    main()
