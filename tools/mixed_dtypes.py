"""mixed_dtypes fixture: a MIL Builder program (iOS18) whose constants and inputs cover many
dtypes, plus int4 / uint8 weights from linear_quantize_weights and uint4 / uint2 weights from
palettize_weights(mode="uniform").

The program is converted with pass_pipeline=EMPTY (so that const-folding does not collapse
cast(const) chains and every dtype survives as its own const) and compute_precision=FLOAT32
(explicit fp16 ops are written by hand).
"""

import numpy as np

import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

TARGET = ct.target.iOS18


def _try_input(spec_kwargs, notes, label):
    """Try converting a one-op program with an input of the given dtype; record refusals."""
    try:
        @mb.program(input_specs=[mb.TensorSpec(**spec_kwargs)], opset_version=TARGET)
        def p(x):
            return mb.identity(x=x, name="y")

        ml = ct.convert(p, convert_to="mlprogram", minimum_deployment_target=TARGET,
                        compute_precision=ct.precision.FLOAT32, skip_model_load=True,
                        pass_pipeline=ct.PassPipeline.EMPTY)
        spec = ml.get_spec()
        arr = spec.description.input[0].type.multiArrayType
        got = ct.proto.FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(arr.dataType)
        ops = [op.type for op in spec.mlProgram.functions["main"].block_specializations["CoreML8"].operations]
        want = types.builtin_to_string(spec_kwargs["dtype"])
        kept = (want, got) in {("fp32", "FLOAT32"), ("fp16", "FLOAT16"), ("int32", "INT32"), ("int8", "INT8")}
        notes[label] = (f"accepted (description {got}, shape {list(arr.shape)}, ops {ops})" if kept else
                        f"changed: description dtype {got} + cast inserted (ops {ops})")
        return kept
    except Exception as e:
        notes[label] = f"refused: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return False


def build_mixed_dtypes():
    notes = {}
    rng = np.random.RandomState(11)

    # probe which input dtypes / ranks coremltools accepts as model inputs
    scalar_ok = _try_input({"shape": (), "dtype": types.fp32}, notes, "input fp32 scalar (rank 0)")
    _try_input({"shape": (4,), "dtype": types.int8}, notes, "input int8")
    _try_input({"shape": (4,), "dtype": types.bool}, notes, "input bool")
    _try_input({"shape": (4,), "dtype": types.int16}, notes, "input int16")
    _try_input({"shape": (4,), "dtype": types.uint8}, notes, "input uint8")

    specs = [
        mb.TensorSpec(shape=(1, 32), dtype=types.fp32),  # a
        mb.TensorSpec(shape=(1, 32), dtype=types.fp16),  # b
        mb.TensorSpec(shape=(4,), dtype=types.int32),    # c
        mb.TensorSpec(shape=(() if scalar_ok else (1,)), dtype=types.fp32),  # s
    ]

    def w(shape, scale=0.2):
        return (rng.randn(*shape) * scale).astype(np.float16)

    weights = {name: w((8, 32)) for name in ("w_int4", "w_uint8", "w_uint4", "w_uint2", "w_fp16")}
    const_fp32_blob = rng.randn(1, 32).astype(np.float32)
    const_fp32_inline = np.array([0.5], dtype=np.float32)
    const_fp16_inline = np.array([1.5, -2.0, 0.25], dtype=np.float16)
    bias_fp16_blob = rng.randn(40).astype(np.float16)
    int32_blob = np.arange(12, dtype=np.int32) * 3 - 5
    int32_inline = np.array([1, -2, 3, -4], dtype=np.int32)
    int8_blob = (np.arange(12) - 6).astype(np.int8)
    int8_inline = np.array([-128, -1, 0, 127], dtype=np.int8)
    uint8_blob = (np.arange(12) * 20).astype(np.uint8)
    uint8_inline = np.array([0, 1, 128, 255], dtype=np.uint8)
    int16_blob = (np.arange(12) * 1000 - 6000).astype(np.int16)
    int16_inline = np.array([-32768, -1, 1, 32767], dtype=np.int16)
    uint16_blob = (np.arange(12) * 5000).astype(np.uint16)
    uint16_inline = np.array([0, 1, 40000, 65535], dtype=np.uint16)
    bool_inline = np.array([True, False, True, True])
    bool_long = np.array([True, False] * 6)  # 12 bools: still inline (bool never goes to weight.bin)

    @mb.program(input_specs=specs, opset_version=TARGET)
    def prog(a, b, c, s):
        # fp16 linear path with compressed weights
        a16 = mb.cast(x=a, dtype="fp16", name="a_fp16")
        h = mb.add(x=a16, y=b, name="h")
        ys = []
        for name, wv in weights.items():
            wc = mb.const(val=wv, name=name)
            ys.append(mb.linear(x=h, weight=wc, name=f"lin_{name}"))
        lin = mb.concat(values=ys, axis=-1, name="lin_cat")
        lin = mb.add(x=lin, y=mb.const(val=bias_fp16_blob, name="bias_fp16_blob"), name="lin_bias")
        lin = mb.mul(x=lin, y=mb.const(val=const_fp16_inline[:1], name="fp16_inline_1"), name="lin_scaled")
        f16x3 = mb.const(val=const_fp16_inline, name="fp16_inline_3")
        out_fp16 = mb.add(x=mb.reduce_sum(x=lin, axes=[-1], keep_dims=True, name="lin_sum"),
                          y=f16x3, name="out_fp16")  # [1, 3]

        # fp32 path
        f = mb.mul(x=a, y=mb.const(val=const_fp32_blob, name="fp32_blob"), name="f_mul")
        f = mb.add(x=f, y=mb.const(val=const_fp32_inline, name="fp32_inline"), name="f_add")
        out_fp32 = mb.mul(x=f, y=s, name="out_fp32")

        # integer path: every integer const is gathered with input-dependent indices (so no
        # pass can constant-fold it), then cast to int32 and accumulated.
        i4 = mb.mod(x=c, y=np.int32(4), name="idx4")
        i12 = mb.mod(x=c, y=np.int32(12), name="idx12")
        acc = mb.add(x=c, y=mb.const(val=int32_inline, name="int32_inline"), name="i_add0")
        acc = mb.add(x=acc, y=mb.gather(x=mb.const(val=int32_blob, name="int32_blob"), indices=i12, axis=0,
                                        name="g_int32_blob"), name="i_add1")
        consts = [
            (int8_blob, "int8_blob", i12), (uint8_blob, "uint8_blob", i12),
            (int16_blob, "int16_blob", i12), (uint16_blob, "uint16_blob", i12),
            (int8_inline, "int8_inline", i4), (uint8_inline, "uint8_inline", i4),
            (int16_inline, "int16_inline", i4), (uint16_inline, "uint16_inline", i4),
        ]
        for k, (v, name, ix) in enumerate(consts):
            g = mb.gather(x=mb.const(val=v, name=name), indices=ix, axis=0, name=f"g_{name}")
            acc = mb.add(x=acc, y=mb.cast(x=g, dtype="int32", name=f"g_{name}_i32"), name=f"i_add{k + 2}")
        # bool consts: a 4-element one and a 12-element one (bool never goes to weight.bin)
        c_pos = mb.greater(x=c, y=np.int32(0), name="c_pos")
        cond = mb.logical_and(x=mb.const(val=bool_inline, name="bool_inline"), y=c_pos, name="cond")
        cond12 = mb.logical_or(x=mb.tile(x=cond, reps=[3], name="cond_tiled"),
                               y=mb.const(val=bool_long, name="bool_12"), name="cond12")
        out_int32 = mb.select(cond=cond12, a=mb.tile(x=acc, reps=[3], name="acc_tiled"),
                              b=mb.const(val=np.int32(-1), name="int32_scalar"), name="out_int32")
        return out_fp16, out_fp32, out_int32

    ml = ct.convert(
        prog, convert_to="mlprogram", minimum_deployment_target=TARGET,
        compute_precision=ct.precision.FLOAT32, skip_model_load=True,
        pass_pipeline=ct.PassPipeline.EMPTY,
    )

    oc = ct.optimize.coreml
    q_cfg = oc.OptimizationConfig(op_name_configs={
        "w_int4": oc.OpLinearQuantizerConfig(mode="linear", dtype="int4", granularity="per_block",
                                             block_size=16, weight_threshold=16),
        "w_uint8": oc.OpLinearQuantizerConfig(mode="linear", dtype="uint8", granularity="per_channel",
                                              weight_threshold=16),
    })
    ml = oc.linear_quantize_weights(ml, config=q_cfg)
    p_cfg = oc.OptimizationConfig(op_name_configs={
        "w_uint4": oc.OpPalettizerConfig(mode="uniform", nbits=4, granularity="per_tensor",
                                         weight_threshold=16),
        "w_uint2": oc.OpPalettizerConfig(mode="uniform", nbits=2, granularity="per_grouped_channel",
                                         group_size=4, weight_threshold=16),
    })
    ml = oc.palettize_weights(ml, config=p_cfg)
    return ml, notes
