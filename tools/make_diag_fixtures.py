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


# ---------------------------------------------------------------------------------------------
# The catalogue (Sources/Passes/Diagnosis/Catalogue.swift): fixture -> the one finding code
# diagnose must report (infos included for the info-level patterns). REFS: numpy references of
# the fixtures whose fix pass is checked numerically, in models-ir/diag/<name>.refs.npz.
CATALOGUE_EXPECTED = {
    "cat_state_mixed_flexibility": "state_mixed_flexibility",
    "cat_state_range_int_input": "state_range_int_input",
    "cat_enumerated_combinations": "enumerated_shapes_combinations",
    "cat_gather_index_narrowed": "gather_index_narrowed",
    "cat_narrowing_cast": "narrowing_cast_on_input",
    "cat_gather_table_uint16": "gather_table_over_uint16",
    "cat_quant_scale_zero": "quantization_scale_invalid",
    "cat_rmsnorm_eps_scaled": "rmsnorm_eps_scaled",
    "cat_state_dim_32": "state_dim_not_multiple_of_32",
    "cat_log_softmax": "fp16_log_softmax",
    "cat_slice_update_short": "slice_update_rank",
    "cat_state_write_5d": "state_write_runtime_end",
    "cat_rank0_expand_dims": "rank0_expand_dims_swap",
    "cat_unsupported_op": "unsupported_op",
}


def refs(out_dir, name, **arrays):
    np.savez_compressed(os.path.join(out_dir, name + ".refs.npz"), **arrays)


def gen_cat_state_mixed_flexibility(out):
    # coremltools#2548: a fixed input and a RangeDim input next to a state (the repro).
    F = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(5,), dtype=types.fp32), mb.TensorSpec(shape=(F,), dtype=types.fp32),
                             mb.StateTensorSpec(shape=(5,), dtype=types.fp16)], opset_version=TARGET)
    def prog(fixed_tensor, flex_tensor, acc):
        old = mb.read_state(input=acc)
        new = mb.add(x=old, y=mb.cast(x=fixed_tensor, dtype="fp16"), name="new_acc")
        mb.coreml_update_state(state=acc, value=new)
        s = mb.reduce_sum(x=flex_tensor, axes=[0], keep_dims=True, name="flex_sum")
        return mb.add(x=mb.cast(x=new, dtype="fp32"), y=s, name="out")

    save(prog, out, "cat_state_mixed_flexibility", precision=ct.precision.FLOAT32,
         inputs=[ct.TensorType(name="fixed_tensor", shape=(5,), dtype=np.float32),
                 ct.TensorType(name="flex_tensor", shape=(ct.RangeDim(1, 1024),), dtype=np.float32)],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(5,), dtype=np.float16), name="acc")],
         pass_pipeline=ct.PassPipeline.EMPTY)


def gen_cat_state_range_int_input(out):
    # coremltools#2500: RangeDim int ids next to a state (sum of embedded ids into an accumulator).
    S = get_new_symbol()
    table = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 100).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S), dtype=types.int32),
                             mb.StateTensorSpec(shape=(1, 32), dtype=types.fp16)], opset_version=TARGET)
    def prog(input_ids, acc):
        e = mb.gather(x=table, indices=input_ids, axis=0, name="emb")
        tot = mb.reduce_sum(x=e, axes=[1], name="tot")
        old = mb.read_state(input=acc)
        new = mb.add(x=old, y=tot, name="new_acc")
        mb.coreml_update_state(state=acc, value=new)
        return mb.mul(x=new, y=np.float16(1.0), name="out")

    save(prog, out, "cat_state_range_int_input", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="input_ids", shape=(1, ct.RangeDim(1, 16, default=1)), dtype=np.int32)],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 32), dtype=np.float16), name="acc")])


def gen_cat_enumerated_combinations(out):
    # coremltools#2271: two inputs, each with its own EnumeratedShapes.
    A = get_new_symbol()
    B = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, A), dtype=types.fp16), mb.TensorSpec(shape=(1, B), dtype=types.fp16)],
                opset_version=TARGET)
    def prog(a, b):
        sa = mb.reduce_sum(x=a, axes=[1], keep_dims=True)
        sb = mb.reduce_sum(x=b, axes=[1], keep_dims=True)
        return mb.add(x=sa, y=sb, name="out")

    save(prog, out, "cat_enumerated_combinations", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="a", shape=ct.EnumeratedShapes(shapes=[(1, 4), (1, 8)], default=(1, 4)), dtype=np.float16),
                 ct.TensorType(name="b", shape=ct.EnumeratedShapes(shapes=[(1, 2), (1, 16)], default=(1, 2)), dtype=np.float16)])


def gen_cat_gather_index_narrowed(out):
    # coremltools#2222: token ids cast int32 -> int16 before an embedding of 40000 rows.
    rows = 40000
    table = np.stack([np.arange(rows) % 2048, np.arange(rows) // 2048], axis=1).astype(np.float16)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.int32)], opset_version=TARGET)
    def prog(input_ids):
        ids16 = mb.cast(x=input_ids, dtype="int16", name="ids_int16")
        return mb.gather(x=table, indices=ids16, axis=0, name="emb")

    save(prog, out, "cat_gather_index_narrowed", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="input_ids", shape=(1, 4), dtype=np.int32)], outputs=[ct.TensorType(name="emb")])
    ids = np.array([[5, 32767, 32768, 39999]], dtype=np.int32)
    refs(out, "cat_gather_index_narrowed", input_ids=ids, emb=table[ids].astype(np.float32))


def gen_cat_narrowing_cast(out):
    @mb.program(input_specs=[mb.TensorSpec(shape=(4,), dtype=types.int32)], opset_version=TARGET)
    def prog(x):
        x8 = mb.cast(x=x, dtype="int8", name="x_int8")
        x32 = mb.cast(x=x8, dtype="int32", name="x_back")
        return mb.cast(x=mb.add(x=x32, y=np.int32(1)), dtype="fp32", name="out")

    save(prog, out, "cat_narrowing_cast", pass_pipeline=ct.PassPipeline.EMPTY, precision=ct.precision.FLOAT32,
         inputs=[ct.TensorType(name="x", shape=(4,), dtype=np.int32)])


def gen_cat_gather_table_uint16(out):
    # executorch PR#7616: an input-indexed table of 70000 rows (ANE gathers take uint16 indices).
    table = (np.arange(70000) % 1000).astype(np.float16).reshape(70000, 1)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.int32)], opset_version=TARGET)
    def prog(input_ids):
        return mb.gather(x=table, indices=input_ids, axis=0, name="emb")

    save(prog, out, "cat_gather_table_uint16", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="input_ids", shape=(1, 4), dtype=np.int32)], outputs=[ct.TensorType(name="emb")])


def gen_cat_quant_scale_zero(out):
    # coremltools#2853: a blockwise int8 weight whose scale is 0 for channel 2 and NaN for channel 5.
    rng = np.random.default_rng(3)
    data = rng.integers(-127, 128, size=(8, 32), dtype=np.int8)
    scale = np.full((8, 1), 0.01, dtype=np.float16)
    scale[2, 0] = 0
    scale[5, 0] = np.nan

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        w = mb.constexpr_blockwise_shift_scale(data=data, scale=scale, name="w")
        return mb.linear(x=x, weight=w, name="out")

    save(prog, out, "cat_quant_scale_zero", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="x", shape=(1, 32), dtype=np.float16)])


def gen_cat_rmsnorm_eps_scaled(out):
    # coremltools#2821: torch's rms_norm converted by coremltools 9 (eps added to the max-scaled
    # mean). eps = 0.1 so that eps * max^2 is visible; fp32 so the numeric check is tight.
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

        def forward(self, x):
            return torch.nn.functional.rms_norm(x, (8,), self.weight, eps=0.1)

    m = M().eval()
    x = torch.tensor(np.random.default_rng(4).uniform(-8, 8, size=(1, 3, 8)).astype(np.float32))
    traced = torch.jit.trace(m, x)
    ml = ct.convert(traced, inputs=[ct.TensorType(name="x", shape=(1, 3, 8), dtype=np.float32)],
                    outputs=[ct.TensorType(name="out")], minimum_deployment_target=TARGET,
                    compute_precision=ct.precision.FLOAT32, skip_model_load=True)
    path = os.path.join(out, "cat_rmsnorm_eps_scaled.mlpackage")
    if os.path.exists(path):
        shutil.rmtree(path)
    fix_metadata(ml)
    ml.save(path)
    fix_manifest(path, "diag/cat_rmsnorm_eps_scaled")
    with torch.no_grad():
        refs(out, "cat_rmsnorm_eps_scaled", x=x.numpy(), out=m(x).numpy())


def gen_cat_state_dim_32(out):
    # coremltools#2631: a state of width 24 (not a multiple of 32).
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 24), dtype=types.fp16),
                             mb.StateTensorSpec(shape=(1, 24), dtype=types.fp16)], opset_version=TARGET)
    def prog(x, acc):
        old = mb.read_state(input=acc)
        new = mb.add(x=old, y=x, name="new_acc")
        mb.coreml_update_state(state=acc, value=new)
        return mb.mul(x=new, y=np.float16(1.0), name="out")

    save(prog, out, "cat_state_dim_32", pass_pipeline=ct.PassPipeline.EMPTY,
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 24), dtype=np.float16), name="acc")])


def gen_cat_log_softmax(out):
    # coremltools#2728: log(softmax(x)) in fp16 (coremltools stores log's epsilon 1e-45 as an fp32
    # const); the -40 logit's probability underflows fp16.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        p = mb.softmax(x=x, axis=-1, name="probs")
        return mb.log(x=p, epsilon=np.float32(1e-45), name="logp")

    save(prog, out, "cat_log_softmax", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="x", shape=(1, 4), dtype=np.float16)], outputs=[ct.TensorType(name="logp")])
    x = np.array([[2.0, -40.0, 0.5, 3.0]], dtype=np.float16)
    xf = x.astype(np.float64)
    lse = np.log(np.exp(xf - xf.max()).sum()) + xf.max()
    refs(out, "cat_log_softmax", x=x, logp=(xf - lse).astype(np.float32))


def _truncate_const(path, names, keep):
    """Edit the saved spec: the int32 / bool consts in `names` keep their first `keep` entries."""
    from coremltools.proto import Model_pb2
    spec_path = os.path.join(path, "Data", "com.apple.CoreML", "model.mlmodel")
    spec = Model_pb2.Model()
    with open(spec_path, "rb") as f:
        spec.ParseFromString(f.read())
    for f in spec.mlProgram.functions.values():
        for op in f.block_specializations[f.opset].operations:
            if op.type != "const" or op.outputs[0].name not in names:
                continue
            val = op.attributes["val"]
            t = val.immediateValue.tensor
            if t.ints.values:
                vals = list(t.ints.values)[:keep]
                del t.ints.values[:]
                t.ints.values.extend(vals)
            else:
                vals = list(t.bools.values)[:keep]
                del t.bools.values[:]
                t.bools.values.extend(vals)
            for typ in (val.type.tensorType, op.outputs[0].type.tensorType):
                typ.dimensions[0].constant.size = keep
    with open(spec_path, "wb") as f:
        f.write(spec.SerializeToString())


def gen_cat_slice_update_short(out):
    # coreai-models#275: slice_update begin/end with 3 entries on a rank-4 tensor (built with full
    # bounds, then the saved spec's begin/end/masks cut to 3 entries; coremltools refuses to build it).
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 4, 3), dtype=types.fp16),
                             mb.TensorSpec(shape=(1, 2, 1, 3), dtype=types.fp16)], opset_version=TARGET)
    def prog(x, u):
        b = mb.const(val=np.array([0, 0, 2, 0], dtype=np.int32), name="su_begin")
        e = mb.const(val=np.array([1, 2, 3, 3], dtype=np.int32), name="su_end")
        return mb.slice_update(x=x, update=u, begin=b, end=e, name="out")

    path = save(prog, out, "cat_slice_update_short", pass_pipeline=ct.PassPipeline.EMPTY,
                inputs=[ct.TensorType(name="x", shape=(1, 2, 4, 3), dtype=np.float16),
                        ct.TensorType(name="u", shape=(1, 2, 1, 3), dtype=np.float16)])
    _truncate_const(path, {"su_begin", "su_end"}, 3)
    fix_manifest(path, "diag/cat_slice_update_short")
    x = (np.arange(24).reshape(1, 2, 4, 3) / 4).astype(np.float16)
    u = -np.ones((1, 2, 1, 3), dtype=np.float16)
    y = x.copy()
    y[0:1, 0:2, 2:3, :] = u
    refs(out, "cat_slice_update_short", x=x, u=u, out=y.astype(np.float32))


def gen_cat_state_write_5d(out):
    # coremltools#2325: a 5-D [2, 1, 4, 16, 8] cache written at [1, :, :2, pos:pos+1, :].
    shape = (2, 1, 4, 16, 8)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 1, 8), dtype=types.fp16), mb.TensorSpec(shape=(1,), dtype=types.int32),
                             mb.StateTensorSpec(shape=shape, dtype=types.fp16)], opset_version=TARGET)
    def prog(k, pos, cache):
        p1 = mb.add(x=pos, y=np.int32(1), name="pos_1")
        begin = mb.concat(values=(np.array([1, 0, 0], dtype=np.int32), pos, np.array([0], dtype=np.int32)), axis=0, name="begin")
        end = mb.concat(values=(np.array([2, 1, 2], dtype=np.int32), p1, np.array([8], dtype=np.int32)), axis=0, name="end")
        old = mb.read_state(input=cache)
        new = mb.slice_update(x=old, update=k, begin=begin, end=end, squeeze_mask=[True, False, False, False, False],
                              name="cache_write")
        mb.coreml_update_state(state=cache, value=new)
        return mb.reduce_sum(x=new, axes=[3], name="out")

    save(prog, out, "cat_state_write_5d", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="k", shape=(1, 2, 1, 8), dtype=np.float16), ct.TensorType(name="pos", shape=(1,), dtype=np.int32)],
         states=[ct.StateType(wrapped_type=ct.TensorType(shape=shape, dtype=np.float16), name="cache")])
    cache = np.zeros(shape, dtype=np.float32)
    r = {}
    for call, p in enumerate([3, 7]):
        k = ((np.arange(16).reshape(1, 2, 1, 8) + 1) * (call + 1) / 8).astype(np.float16)
        cache[1, :, :2, p:p + 1, :] = k.astype(np.float32)
        r[f"call{call}.k"] = k
        r[f"call{call}.pos"] = np.array([p], dtype=np.int32)
        r[f"call{call}.out"] = cache.sum(axis=3)
        r[f"call{call}.cache"] = cache.copy()
    refs(out, "cat_state_write_5d", **r)


def gen_cat_rank0_expand_dims(out):
    # coremltools' rank0_expand_dims_swap: n + 1 (rank 0) used by expand_dims and by a stack;
    # no slice_update. The default pipeline fails with "Cannot delete op".
    S = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, S), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        n = mb.gather(x=mb.shape(x=x), indices=np.int32(1), axis=0, name="n")
        m = mb.add(x=n, y=np.int32(1), name="n_plus_1")
        e = mb.expand_dims(x=m, axes=[0], name="n_plus_1_1d")
        shape_a = mb.concat(values=(e, np.array([4], dtype=np.int32)), axis=0, name="shape_a")
        shape_b = mb.stack(values=(m, np.int32(4)), axis=0, name="shape_b")
        a = mb.fill(shape=shape_a, value=np.float16(1.0), name="a")
        b = mb.fill(shape=shape_b, value=np.float16(2.0), name="b")
        return mb.add(x=a, y=b, name="out")

    save(prog, out, "cat_rank0_expand_dims", pass_pipeline=ct.PassPipeline.EMPTY,
         inputs=[ct.TensorType(name="x", shape=(1, ct.RangeDim(1, 16, default=2)), dtype=np.float16)])
    x = np.ones((1, 3), dtype=np.float16)
    refs(out, "cat_rank0_expand_dims", x=x, out=np.full((4, 4), 3.0, dtype=np.float32))


def gen_cat_unsupported_op(out):
    # An op coremltools 9 registers but forge-ir has no kernel for: `torch_upsample_nearest_neighbor`,
    # a coremltools "torch" dialect op (its frontend lowers it before writing; ct.convert refuses to
    # write it: "Core ML only support core opset"). So the package is written with a core
    # upsample_nearest_neighbor and its spec is edited: op type renamed, its scale factors
    # replaced by the dialect op's int32 output_height / output_width consts. `diagnose` names it
    # (unsupported_op) and `run` refuses the same op.
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 4, 4), dtype=types.fp16)], opset_version=TARGET)
    def prog(x):
        mb.const(val=np.int32(8), name="output_height")
        mb.const(val=np.int32(8), name="output_width")
        y = mb.upsample_nearest_neighbor(x=x, scale_factor_height=2.0, scale_factor_width=2.0, name="up")
        return mb.add(x=y, y=np.float16(1.0), name="out")

    path = save(prog, out, "cat_unsupported_op", pass_pipeline=ct.PassPipeline.EMPTY,
                inputs=[ct.TensorType(name="x", shape=(1, 1, 4, 4), dtype=np.float16)])
    ml = ct.models.MLModel(path, skip_model_load=True)
    spec = ml.get_spec()
    block = spec.mlProgram.functions["main"].block_specializations[next(iter(spec.mlProgram.functions["main"].block_specializations))]
    keep = []
    for op in block.operations:
        if op.type == "const" and op.outputs[0].name.startswith("up_scale_factor"):
            continue
        if op.type == "upsample_nearest_neighbor":
            op.type = "torch_upsample_nearest_neighbor"
            for k in list(op.inputs.keys()):
                if k != "x":
                    del op.inputs[k]
            for k in ["output_height", "output_width"]:
                op.inputs[k].arguments.add().name = k
        keep.append(op)
    del block.operations[:]
    block.operations.extend(keep)
    edited = ct.models.MLModel(spec, weights_dir=ml.weights_dir, skip_model_load=True)
    tmp = path[: -len(".mlpackage")] + "_edited.mlpackage"
    edited.save(tmp)
    shutil.rmtree(path)
    os.rename(tmp, path)
    fix_manifest(path, "diag/cat_unsupported_op")


# Fixtures of other checks (their tests name what they expect).
OTHER = ["apple_recipe_llama"]

GENERATORS = {name: globals()["gen_" + name] for name in list(EXPECTED) + list(RUNTIME_EXPECTED) + OTHER + list(CATALOGUE_EXPECTED)}


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
