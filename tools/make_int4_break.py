"""Hostile int4 linear packages for forge-ir's int4 GEMV (session 6 break helper).

For each case (K, N, block, mode): a one-op program y = linear(x, W, b) with x fp32 [M, K],
W int4-quantized by coremltools (linear_quantize_weights, per_block along K, linear_symmetric
or linear = with zero points), saved as <out>/<name>.mlpackage with <name>_inputs.npz and
<name>_ref.npy: numpy x @ Wd.T + b where Wd is coremltools' own constexpr value inference of
the quantized weight (the dequantized weight Core ML uses). Usage: make_int4_break.py OUTDIR
"""
import sys, os, json
import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
import coremltools.optimize.coreml as cto

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
cases = []
for (K, N, block, mode, M) in [(32, 7, 32, "linear_symmetric", 1), (48, 13, 16, "linear", 1), (96, 33, 32, "linear", 1),
                               (192, 17, 64, "linear_symmetric", 1), (384, 9, 128, "linear", 1), (256, 65, 128, "linear", 3),
                               (64, 1, 16, "linear", 5), (160, 31, 32, "linear_symmetric", 2), (4096, 3, 32, "linear", 1)]:
    name = f"i4_k{K}_n{N}_b{block}_{'sym' if mode == 'linear_symmetric' else 'zp'}_m{M}"
    W = rng.standard_normal((N, K)).astype(np.float32)
    W[:, :block] *= 10  # one block much larger than the rest
    b = rng.standard_normal(N).astype(np.float32)

    @mb.program(input_specs=[mb.TensorSpec(shape=(M, K), dtype=types.fp32)], opset_version=ct.target.iOS18)
    def prog(x):
        return mb.linear(x=x, weight=W, bias=b, name="y")

    ml = ct.convert(prog, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                    minimum_deployment_target=ct.target.iOS18)
    cfg = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(
        mode=mode, dtype="int4", granularity="per_block", block_size=block, weight_threshold=0))
    q = cto.linear_quantize_weights(ml, config=cfg)
    p = q._mil_program
    Wd = None
    for op in p.functions["main"].operations:
        if op.op_type.startswith("constexpr"):
            Wd = op.materialized_val_inference()
            kind = op.op_type
    assert Wd is not None, name
    Wd = np.asarray(Wd, np.float32)
    xs = {"x": rng.standard_normal((M, K)).astype(np.float32)}
    q.save(f"{out}/{name}.mlpackage")
    np.savez(f"{out}/{name}_inputs.npz", **xs)
    ref = xs["x"].astype(np.float64) @ Wd.astype(np.float64).T + b
    np.save(f"{out}/{name}_ref.npy", ref.astype(np.float32))
    # NaN / inf activations
    xn = xs["x"].copy(); xn[0, 1] = np.nan
    np.savez(f"{out}/{name}_nan.npz", x=xn)
    xi = xs["x"].copy(); xi[0, 0] = np.inf
    np.savez(f"{out}/{name}_inf.npz", x=xi)
    refi = xi.astype(np.float64) @ Wd.astype(np.float64).T + b
    np.save(f"{out}/{name}_inf_ref.npy", refi.astype(np.float32))
    # activations with a large common offset (post-activation rows all of one sign)
    xb = (xs["x"] + 1000).astype(np.float32)
    np.savez(f"{out}/{name}_big.npz", x=xb)
    np.save(f"{out}/{name}_big_ref.npy", (xb.astype(np.float64) @ Wd.astype(np.float64).T + b).astype(np.float32))
    cases.append(name)
    print(name, kind, float(np.abs(Wd - W).max()))
json.dump(cases, open(f"{out}/cases.json", "w"))
