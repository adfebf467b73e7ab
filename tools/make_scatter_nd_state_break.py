"""A stateful scatter_nd KV write for hostile-input checks of StateUpdateFusion (session 6 break helper).

cache: state fp16 [1, 2, 8, 4]; inputs idx int32 [N, 3] (N flexible), upd fp16 [N, 4];
r = read_state(cache); w = scatter_nd(r, idx, upd, mode = update); coreml_update_state(cache, w);
y = upd * 1 (output; the state is read back with --state-out). Also writes inputs: ok, dup (duplicate rows), neg, oob,
badupd (updates [N, 5]). Usage: make_scatter_nd_state_break.py OUTDIR
"""
import sys, os
import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types, get_new_symbol

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = get_new_symbol()

@mb.program(input_specs=[mb.StateTensorSpec((1, 2, 8, 4), dtype=types.fp16), mb.TensorSpec((n, 3), dtype=types.int32),
                         mb.TensorSpec((n, 4), dtype=types.fp16)], opset_version=ct.target.iOS18)
def prog(cache, idx, upd):
    r = mb.read_state(input=cache)
    w = mb.scatter_nd(data=r, indices=idx, updates=upd, mode="update")
    mb.coreml_update_state(state=cache, value=w)
    y = mb.mul(x=upd, y=np.float16(1), name="y")
    return y

rd = ct.RangeDim(1, 8)
prog.functions["main"].inputs["idx"]  # flexible N: set through the input types below
ml = ct.convert(prog, convert_to="mlprogram", inputs=[ct.TensorType(name="idx", shape=(rd, 3), dtype=np.int32),
                                                         ct.TensorType(name="upd", shape=(rd, 4), dtype=np.float16)],
 minimum_deployment_target=ct.target.iOS18, compute_precision=ct.precision.FLOAT16)
ml.save(f"{out}/snd_state.mlpackage")
rng = np.random.default_rng(3)
def save(name, idx, upd):
    np.savez(f"{out}/{name}.npz", idx=np.array(idx, np.int32), upd=np.array(upd, np.float16))
save("ok", [[0, 0, 3], [0, 1, 7]], rng.standard_normal((2, 4)))
save("dup", [[0, 1, 2], [0, 1, 2], [0, 1, 2]], [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]])
save("neg", [[0, 0, -1]], rng.standard_normal((1, 4)))
save("oob", [[0, 0, 8]], rng.standard_normal((1, 4)))
save("oob2", [[0, 0, 2], [0, 0, 2147483647]], rng.standard_normal((2, 4)))
save("badupd", [[0, 0, 1]], rng.standard_normal((1, 5)))
save("zero", np.zeros((0, 3)), np.zeros((0, 4)))
