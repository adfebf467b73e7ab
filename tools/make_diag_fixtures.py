#!/usr/bin/env python3
"""Fixtures for `forge-ir diagnose`: one small package per finding kind, in models-ir/diag/.

Usage:  tools/.venv/bin/python tools/make_diag_fixtures.py [--out models-ir/diag] [--only NAME ...]

Each is a MIL Builder program (iOS18, FLOAT16 unless noted) that shows exactly one problem;
the expected finding is in EXPECTED (also checked by Tests/PassesTests/DiagnoseTests.swift).
RUNTIME_EXPECTED lists the stateful-LLM fixtures whose finding needs a run of the interpreter
(`diagnose --precision fp16` / `--dynamic`; checked by Tests/PassesTests/RuntimeDiagnoseTests.swift).
Kinds coremltools refuses to build are made by the Swift tests instead.
"""

import argparse
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import coremltools as ct  # noqa: E402
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol  # noqa: E402

from make_fixtures import fix_manifest, fix_metadata  # noqa: E402

warnings.filterwarnings("ignore")
TARGET = ct.target.iOS18

# fixture -> the one finding code diagnose must report (besides notes)
EXPECTED = {
    "reshape_s1": "shape_error",
    "slice_zero_s1": "zero_dimension",
    "cast_int8_length": "cast_overflow",
    "state_window_overflow": "index_out_of_range",
    "squeeze_no_axes": "squeeze_flexible",
    "state_output_alias": "state_output_alias",
    "range_lower_zero": "range_lower_bound_zero",
    "constraint_mismatch": "flexible_constraint_mismatch",
    "enumerated_stateful": "enumerated_shapes_with_state",
    "mask_beyond_fp16": "fp16_constant_out_of_range",
}


def save(prog, out_dir, name, inputs=None, states=None, precision=ct.precision.FLOAT16, **kw):
    ml = ct.convert(
        prog, convert_to="mlprogram", minimum_deployment_target=TARGET, compute_precision=precision,
        inputs=inputs, skip_model_load=True, **kw,
    )  # states of a MIL program come from its StateTensorSpec inputs (`states=` is torch-only)
    path = os.path.join(out_dir, name + ".mlpackage")
    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(ml)
    ml.save(path)
    fix_manifest(path, "diag/" + name)
    return path


def seq_input(name, lo, hi, last, default=None, dtype=np.float16):
    return ct.TensorType(name=name, shape=(1, ct.RangeDim(lo, hi, default=default or lo), last), dtype=dtype)


def gen_reshape_s1(out):
    # [1, S, 3] -> [2, -1]: 3*S elements split in two rows only works for even S.
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 3), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        y = mb.reshape(x=x, shape=[2, -1], name="rows")
        return mb.mul(x=y, y=np.float16(2.0), name="out")

    save(prog, out, "reshape_s1", inputs=[seq_input("x", 1, 16, 3, default=2)])


def gen_slice_zero_s1(out):
    # logits[:, 1:, :] (a shifted-target slice) is empty at S = 1.
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        y = mb.slice_by_index(x=x, begin=[0, 1, 0], end=[1, 0, 8], end_mask=[True, True, True], name="shifted")
        return mb.mul(x=y, y=np.float16(2.0), name="out")

    save(prog, out, "slice_zero_s1", inputs=[seq_input("x", 1, 16, 8, default=4)])


def gen_cast_int8_length(out):
    # The sequence length, taken from shape(x), cast to int8: wraps past 127.
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 4), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        s = mb.shape(x=x, name="shape_x")
        n = mb.gather(x=s, indices=1, axis=0, name="seq_len")
        n8 = mb.cast(x=n, dtype="int8", name="seq_len_int8")
        n32 = mb.cast(x=n8, dtype="int32", name="seq_len_back")
        nf = mb.cast(x=n32, dtype="fp16", name="seq_len_fp16")
        return mb.mul(x=x, y=nf, name="out")

    save(prog, out, "cast_int8_length", inputs=[seq_input("x", 1, 256, 4, default=8)])


def gen_state_window_overflow(out):
    # Writes S rows at cache_offset into a 16-row state, but S goes up to 32.
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16),
                             mb.TensorSpec(shape=(1,), dtype=types.int32),
                             mb.StateTensorSpec(shape=(1, 16, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(x, cache_offset, cache):
        s = mb.shape(x=x)
        n = mb.gather(x=s, indices=1, axis=0)
        r = mb.range_1d(start=0, end=n, step=1)
        idx = mb.add(x=cache_offset, y=r, name="idx")
        old = mb.read_state(input=cache)
        new = mb.scatter(data=old, indices=idx, updates=x, axis=1, mode="update", name="write_window")
        mb.coreml_update_state(state=cache, value=new)
        red = mb.reduce_sum(x=new, axes=[1], keep_dims=True)
        return mb.add(x=x, y=red, name="out")

    save(prog, out, "state_window_overflow",
         inputs=[seq_input("x", 1, 32, 8), ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32)],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 16, 8), dtype=np.float16), name="cache")])


def gen_squeeze_no_axes(out):
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        y = mb.squeeze(x=x, name="squeezed")
        return mb.mul(x=y, y=np.float16(2.0), name="out")

    save(prog, out, "squeeze_no_axes", inputs=[seq_input("x", 1, 16, 8, default=4)])


def gen_state_output_alias(out):
    # The value written to the state is also returned: a known Core ML runtime crash.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp16),
                             mb.StateTensorSpec(shape=(1, 4), dtype=types.fp16)], opset_version=TARGET)
    def prog(x, acc):
        old = mb.read_state(input=acc)
        new = mb.add(x=old, y=x, name="new_acc")
        mb.coreml_update_state(state=acc, value=new)
        return new

    save(prog, out, "state_output_alias", outputs=[ct.TensorType(name="new_acc")],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 4), dtype=np.float16), name="acc")])


def gen_range_lower_zero(out):
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        return mb.mul(x=x, y=np.float16(2.0), name="out")

    save(prog, out, "range_lower_zero", inputs=[seq_input("x", 0, 16, 8, default=4)])


def gen_constraint_mismatch(out):
    # a and b are added (so their S must be equal) but declared with different ranges.
    S = get_new_symbol()
    T = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16),
                             mb.TensorSpec(shape=(1, T, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(a, b):
        return mb.add(x=a, y=b, name="out")

    save(prog, out, "constraint_mismatch", inputs=[seq_input("a", 1, 64, 8), seq_input("b", 1, 32, 8)])


def gen_enumerated_stateful(out):
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S, 8), dtype=types.fp16),
                             mb.StateTensorSpec(shape=(1, 8), dtype=types.fp16)], opset_version=TARGET)
    def prog(x, acc):
        old = mb.read_state(input=acc)
        tot = mb.reduce_sum(x=x, axes=[1], name="tot")
        new = mb.add(x=old, y=tot, name="new_acc")
        mb.coreml_update_state(state=acc, value=new)
        return mb.mul(x=x, y=np.float16(1.0), name="out")

    save(prog, out, "enumerated_stateful",
         inputs=[ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(1, 1, 8), (1, 16, 8)], default=(1, 1, 8)), dtype=np.float16)],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 8), dtype=np.float16), name="acc")])


def gen_mask_beyond_fp16(out):
    # An fp32 program where a -1e9 mask constant feeds an fp16 add.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp32)], opset_version=TARGET)
    def prog(x):
        xh = mb.cast(x=x, dtype="fp16", name="x_fp16")
        mask = mb.const(val=np.array([[0.0, 0.0, -1e9, -1e9]], dtype=np.float32), name="mask")
        mh = mb.cast(x=mask, dtype="fp16", name="mask_fp16")
        y = mb.add(x=xh, y=mh, name="masked")
        return mb.cast(x=y, dtype="fp32", name="out")

    save(prog, out, "mask_beyond_fp16", precision=ct.precision.FLOAT32,
         pass_pipeline=ct.PassPipeline.EMPTY)


# LLM-contract fixtures for the runtime checks: fixture -> (finding code, diagnose option).
# Static diagnose reports nothing above a note on them; the option runs the interpreter.
RUNTIME_EXPECTED = {
    "fp16_rmsnorm_overflow": ("fp16_overflow", "--precision fp16"),
    "s1_position_range": ("s1_mismatch", "--dynamic"),
}

LLM_CTX, LLM_D, LLM_VOCAB = 16, 8, 32


def llm_contract_program(name, emb, pos_table, norm, positions_from_range):
    """A one-layer stateful LLM with forge-ir's contract (input_ids, causal_mask [1,1,S,16] fp16,
    position_ids, cache_offset; state kv [1,16,8] fp16; logits [1,S,32]):
        h = emb[input_ids] + pos_table[positions]      positions = position_ids, or range(S) (the bug)
        y = norm(h)                                    naive fp16 RMSNorm (x*x -> mean -> +eps -> rsqrt -> mul), or h
        kv[cache_offset + range(S)] = y                scatter into the state
        a = softmax(y @ kv^T / sqrt(8) + mask) @ kv
        logits = linear(a + y)
    """
    S = get_new_symbol()
    rng = np.random.default_rng(7)
    w_norm = (1.0 + 0.1 * rng.standard_normal(LLM_D)).astype(np.float16)
    w_out = (0.5 * rng.standard_normal((LLM_VOCAB, LLM_D))).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S), dtype=types.int32),
                             mb.TensorSpec(shape=(1, 1, S, LLM_CTX), dtype=types.fp16),
                             mb.TensorSpec(shape=(1, S), dtype=types.int32),
                             mb.TensorSpec(shape=(1,), dtype=types.int32),
                             mb.StateTensorSpec(shape=(1, LLM_CTX, LLM_D), dtype=types.fp16)], opset_version=TARGET)
    def prog(input_ids, causal_mask, position_ids, cache_offset, kv):
        n = mb.gather(x=mb.shape(x=input_ids), indices=1, axis=0, name="seq_len")
        rows = mb.range_1d(start=0, end=n, step=1, name="rows")
        tok = mb.gather(x=emb, indices=input_ids, axis=0, name="tok_emb")
        if positions_from_range:
            # The bug: positions 0..S-1 of this call instead of position_ids.
            pos = mb.expand_dims(x=mb.gather(x=pos_table, indices=rows, axis=0, name="pos_emb_rows"), axes=[0], name="pos_emb")
        else:
            pos = mb.gather(x=pos_table, indices=position_ids, axis=0, name="pos_emb")
        h = mb.add(x=tok, y=pos, name="h")
        if norm:
            sq = mb.mul(x=h, y=h, name="norm_sq")
            ms = mb.reduce_mean(x=sq, axes=[-1], keep_dims=True, name="norm_mean")
            v = mb.add(x=ms, y=np.float16(1e-5), name="norm_var")
            r = mb.rsqrt(x=v, name="norm_rsqrt")
            y = mb.mul(x=mb.mul(x=h, y=r, name="norm_x"), y=w_norm, name="y")
        else:
            y = mb.identity(x=h, name="y")
        idx = mb.add(x=cache_offset, y=rows, name="kv_idx")
        old = mb.read_state(input=kv)
        new = mb.scatter(data=old, indices=idx, updates=y, axis=1, mode="update", name="kv_write")
        mb.coreml_update_state(state=kv, value=new)
        mask = mb.squeeze(x=causal_mask, axes=[1], name="mask")
        scores = mb.matmul(x=y, y=new, transpose_y=True, name="scores")
        scores = mb.add(x=mb.mul(x=scores, y=np.float16(1 / np.sqrt(LLM_D)), name="scores_scaled"), y=mask, name="scores_masked")
        probs = mb.softmax(x=scores, axis=-1, name="probs")
        att = mb.matmul(x=probs, y=new, name="att")
        res = mb.add(x=att, y=y, name="res")
        return mb.linear(x=res, weight=w_out, name="logits")

    seq = ct.RangeDim(1, LLM_CTX, default=1, symbol="S")
    return prog, dict(
        inputs=[ct.TensorType(name="input_ids", shape=(1, seq), dtype=np.int32),
                ct.TensorType(name="causal_mask", shape=(1, 1, seq, LLM_CTX), dtype=np.float16),
                ct.TensorType(name="position_ids", shape=(1, seq), dtype=np.int32),
                ct.TensorType(name="cache_offset", shape=(1,), dtype=np.int32)],
        outputs=[ct.TensorType(name="logits", dtype=np.float16)],
        states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, LLM_CTX, LLM_D), dtype=np.float16), name="kv")],
    )


def gen_fp16_rmsnorm_overflow(out):
    # Embedding rows with one entry of magnitude 300..600 (every token): the naive RMSNorm's
    # x*x exceeds 65504 in fp16 (|x| > 256) for every row; fp32 is fine.
    rng = np.random.default_rng(1)
    emb = rng.uniform(-4, 4, size=(LLM_VOCAB, LLM_D))
    emb[:, 0] = rng.choice([-1, 1], LLM_VOCAB) * rng.uniform(300, 600, LLM_VOCAB)
    pos = 0.1 * rng.standard_normal((LLM_CTX, LLM_D))
    prog, kw = llm_contract_program("fp16_rmsnorm_overflow", emb.astype(np.float16), pos.astype(np.float16), norm=True,
                                    positions_from_range=False)
    save(prog, out, "fp16_rmsnorm_overflow", pass_pipeline=ct.PassPipeline.EMPTY, **kw)


def gen_s1_position_range(out):
    # Learned positions gathered with range(S) instead of position_ids: right for a prefill from
    # offset 0, wrong for every later call (a decode step at S=1 uses position 0).
    rng = np.random.default_rng(2)
    emb = rng.standard_normal((LLM_VOCAB, LLM_D))
    pos = rng.standard_normal((LLM_CTX, LLM_D))
    prog, kw = llm_contract_program("s1_position_range", emb.astype(np.float16), pos.astype(np.float16), norm=False,
                                    positions_from_range=True)
    save(prog, out, "s1_position_range", pass_pipeline=ct.PassPipeline.EMPTY, **kw)


def gen_apple_recipe_llama(out):
    # The package Apple's Llama 3.1 Core ML article makes (tools/apple_recipe_llama.py): separate
    # RangeDims for S and END, past = END - S, stacked 5-D caches written at [layer, :, :2, past:END, :].
    # Its concat of scalar shape entries crashed diagnose (SIGILL in the concat shape rule).
    import apple_recipe_llama as arl
    model = arl.StatefulLlama()
    refs = arl.references(model)
    arl.convert(model, os.path.join(out, "apple_recipe_llama.mlpackage"))
    np.savez_compressed(os.path.join(out, "apple_recipe_llama.refs.npz"), **refs)


# Fixtures of other checks (their tests name what they expect).
OTHER = ["apple_recipe_llama"]

GENERATORS = {name: globals()["gen_" + name] for name in list(EXPECTED) + list(RUNTIME_EXPECTED) + OTHER}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "models-ir", "diag"))
    ap.add_argument("--only", nargs="*", choices=sorted(GENERATORS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, fn in GENERATORS.items():
        if args.only and name not in args.only:
            continue
        try:
            fn(args.out)
            print(f"[make_diag_fixtures] {name}: ok", file=sys.stderr)
        except Exception as e:  # report what coremltools refuses, keep going
            print(f"[make_diag_fixtures] {name}: coremltools refused: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
