"""Run harvested coremltools op-test cases through `forge-ir run` and judge them.

    tools/.venv/bin/python tools/conformance/judge.py --cases tools/conformance/.work/cases \
        --forge .build/debug/forge-ir [--jobs 2] [--out tools/conformance/.work] [--filter SUBSTR]

Each case (see harvest_plugin.py) is run as `forge-ir run model.mlpackage --inputs inputs.npz
--out DIR --precision P` (stateful cases chain `--state-in/--state-out` across the calls of one
test, states starting from zeros), P the precision of the backend the test converted for
(`dtype` of compare_backend): fp16 backend → `--precision fp16`, fp32 backend → `fp32` (Core
ML's CPU path). It passes as coremltools' compare_backend judges: every expected output exists,
has the expected shape (compare_shapes: expected () may come back as (1,)) and is allclose
(NaN equal to NaN, as assert_allclose), with at most the test's allow_mismatch_ratio of elements
outside, at

- the test's own atol/rtol for an **fp32 case**: an fp32 program on the fp32 backend;
- coremltools' fp16 runtime tolerances (compare_backend's dtype="fp16" rule: atol = max(100·atol,
  0.5), rtol = max(100·rtol, 0.05); also its rule for compute units other than CPU_ONLY) for an
  **fp16 case**: the fp16 backend, or a program the test typed fp16 itself (issue 12: "judge fp32
  cases at the test's own tolerances and fp16 cases at coremltools' runtime tolerances").

A program is *typed fp16* when the saved model's ML program holds an fp16 value anywhere: a
function input of type fp16, an op output typed fp16 (const and constexpr outputs, ops of nested
blocks included), or an fp16 immediate among an op's attributes or argument bindings (the
parameters of constexpr ops). On the fp32 backend coremltools inserts no fp16 cast
(FP16ComputePrecision runs only for the fp16 backend), so every such value is one the test wrote.
The run precision does not change: an fp16-typed program on the fp32 backend still runs at the
default precision (fp32 intermediates, Core ML's CPU path).

Every case is also judged *strictly*, keyed on the backend alone (the fp32 backend at the test's
own tolerances whatever the program's types), and both verdicts are recorded (`status`,
`strict_status`) and tabled, so nothing the rule admits is hidden.

A negative case (the test wraps the prediction in pytest.raises: invalid indices and the like)
passes when forge-ir refuses it or its values differ from the given ones.

Writes <out>/results.json (one record per case) and <out>/table.md (per op type: cases that
contain it, passed under the rule and strictly; const and the cast ops the fp16 conversion
inserts are not counted as ops under test), and prints the overall figure and its parts: the fp16
backend (the only ML Program backend coremltools' own test run uses unless
INCLUDE_MIL_FP32_UNIT_TESTS=1), the fp32 backend's fp32 programs, and the fp32 backend's programs
the test typed fp16 itself.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import tempfile

import numpy as np


def tolerances(meta, fp16_case):
    """compare_backend's tolerances: the test's own, widened for an fp16 case (or a compute unit
    other than CPU_ONLY) to atol = max(100·atol, 0.5), rtol = max(100·rtol, 0.05)."""
    atol, rtol = meta["atol"], meta["rtol"]
    if fp16_case or meta.get("compute_unit", "CPU_ONLY") != "CPU_ONLY":
        atol, rtol = max(atol * 100.0, 5e-1), max(rtol * 100.0, 5e-2)
    return atol, rtol


def is_fp16_case(meta):
    """The issue's fp16 case: the fp16 backend, or a program the test typed fp16 itself."""
    return meta["precision"] == "fp16" or meta["fp16_typed"]


def judge(meta, outdir):
    """Both verdicts of one run: (status, detail) at the rule (fp16 case → fp16 tolerances) and
    strictly (fp16 tolerances for the fp16 backend only); plus the largest error of any output."""
    rule = judge_outputs(meta, outdir, *tolerances(meta, is_fp16_case(meta)))
    strict = judge_outputs(meta, outdir, *tolerances(meta, meta["precision"] == "fp16"))
    meta["max_err"], meta["max_err_fp16_ulps"] = largest_error(meta, outdir)
    return rule, strict


def largest_error(meta, outdir):
    """The largest |got − expected| over every output (NaN = NaN), absolute and in fp16 ulps at the
    output's scale (the fp16 spacing at the largest |expected| of that output, at least 2^-14):
    how far a case that passes only at the fp16 tolerances is from its expected values, in units
    of the rounding an fp16 value of that size carries. (None, None) when an output is missing or
    not numeric."""
    worst_abs, worst_ulps = 0.0, 0.0
    expected = np.load(os.path.join(meta["_dir"], "expected.npz"))
    for name in expected.files:
        path = os.path.join(outdir, name + ".npy")
        if not os.path.exists(path) or expected[name].dtype.kind not in "biuf":
            return None, None
        e = expected[name].astype(np.float64)
        got = np.load(path)
        if got.size != e.size or got.dtype.kind not in "biuf" or not e.size:
            return None, None
        g = got.astype(np.float64).reshape(e.shape)
        with np.errstate(invalid="ignore"):
            err = np.where(np.isnan(g) & np.isnan(e), 0.0, np.abs(g - e))
        err = np.where(np.isnan(err), np.inf, err)
        finite = np.abs(e[np.isfinite(e)])
        scale = min(max(float(finite.max()) if finite.size else 0.0, 2.0 ** -14), 32768.0)
        worst_abs = max(worst_abs, float(err.max()))
        worst_ulps = max(worst_ulps, float(err.max()) / float(np.spacing(np.float16(scale))))
    return worst_abs, worst_ulps


def judge_outputs(meta, outdir, atol, rtol):
    expected = np.load(os.path.join(meta["_dir"], "expected.npz"))
    worst = None
    for name in expected.files:
        exp = expected[name]
        path = os.path.join(outdir, name + ".npy")
        if not os.path.exists(path):
            return "error", "output %s not written" % name
        got = np.load(path)
        if meta.get("also_compare_shapes", True):
            if not (exp.shape == () and got.shape == (1,)) and got.shape != exp.shape:
                return "mismatch", "%s: shape %s, expected %s" % (name, list(got.shape), list(exp.shape))
        if exp.dtype.kind in "US" or exp.dtype == object:
            return "error", "%s: string output not compared" % name
        try:
            g = got.astype(np.float64).reshape(exp.shape)
        except ValueError:
            return "mismatch", "%s: %d values, expected %d" % (name, got.size, exp.size)
        e = exp.astype(np.float64)
        close = np.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
        bad = int(np.sum(~close))
        if bad and bad / max(1, e.size) > meta.get("allow_mismatch_ratio", 0.0):
            with np.errstate(invalid="ignore"):
                err = np.abs(g - e)
            err = np.where(np.isnan(err), np.inf, err)
            i = int(np.argmax(err))
            worst = "%s: %d/%d values off (max |err| %.3g at flat %d: got %.6g expected %.6g; atol %g rtol %g)" % (
                name, bad, e.size, float(err.flat[i]), i, float(g.flat[i]), float(e.flat[i]), atol, rtol)
            return "mismatch", worst
    return "pass", None


def holds_fp16(meta):
    """True when the case's saved ML program holds an fp16 value anywhere (see the module doc):
    a function input typed fp16, an op output typed fp16 (consts, constexprs, nested blocks), or
    an fp16 immediate among an op's attributes or argument bindings."""
    from coremltools.proto import MIL_pb2, Model_pb2

    spec = Model_pb2.Model()
    with open(os.path.join(meta["_dir"], "model.mlpackage", "Data", "com.apple.CoreML", "model.mlmodel"), "rb") as f:
        spec.ParseFromString(f.read())
    fp16 = MIL_pb2.DataType.Value("FLOAT16")

    def typed(vtype):
        kind = vtype.WhichOneof("type")
        if kind == "tensorType":
            return vtype.tensorType.dataType == fp16
        if kind == "listType":
            return typed(vtype.listType.type)
        if kind == "stateType":
            return typed(vtype.stateType.wrappedType)
        return False

    def op_holds(op):
        if any(typed(o.type) for o in op.outputs):
            return True
        if any(typed(v.type) for v in op.attributes.values()):
            return True
        if any(b.WhichOneof("binding") == "value" and typed(b.value.type)
               for arg in op.inputs.values() for b in arg.arguments):
            return True
        return any(op_holds(inner) for blk in op.blocks for inner in blk.operations)

    fns = spec.mlProgram.functions.values()
    if any(typed(i.type) for f in fns for i in f.inputs):
        return True
    return any(op_holds(op) for f in fns for b in f.block_specializations.values() for op in b.operations)


def precision_of(meta, choice):
    """The forge-ir precision a case runs at: `backend` (default) the precision of the backend the
    test converted for — fp16: `--precision fp16`; fp32: `--precision fp32`, Core ML's CPU path —
    else the forced one."""
    if choice in ("fp32", "fp16"):
        return choice
    return "fp16" if meta["precision"] == "fp16" else "fp32"


def run_case(meta, forge, state_dir=None, first=True, precision=None):
    d = meta["_dir"]
    with tempfile.TemporaryDirectory(prefix="forgeconf_") as tmp:
        out = os.path.join(tmp, "out")
        cmd = [forge, "run", os.path.join(d, "model.mlpackage"), "--inputs", os.path.join(d, "inputs.npz"), "--out", out]
        if precision:
            cmd += ["--precision", precision]
        if state_dir is not None:
            if not first:
                cmd += ["--state-in", state_dir]
            cmd += ["--state-out", state_dir]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return (("error", "timeout (120 s)"),) * 2
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
            if p.returncode < 0:
                return (("crash", "signal %d: %s" % (-p.returncode, msg)),) * 2
            kind = "no_kernel" if "no kernel" in msg else "error"
            return ((kind, msg),) * 2
        return judge(meta, out)


def ops_under_test(meta):
    ops = [t for t in meta.get("op_types", []) if t != "const"]
    core = sorted(set(t for t in ops if t != "cast"))
    return core or sorted(set(ops)) or ["const"]


def negative_tests(root):
    """Tests that wrap the prediction in pytest.raises (they expect Core ML to refuse the case
    or to differ from the given outputs): under the recorder they fail with "DID NOT RAISE"."""
    path = os.path.join(os.path.dirname(os.path.abspath(root)), "pytest_outcomes.jsonl")
    neg = set()
    if os.path.exists(path):
        for line in open(path):
            r = json.loads(line)
            if r.get("outcome") == "failed" and "DID NOT RAISE" in r.get("message", ""):
                neg.add(r["test"])
    return neg


def load_cases(root, filt):
    cases = []
    neg = negative_tests(root)
    for cid in sorted(os.listdir(root)):
        p = os.path.join(root, cid, "case.json")
        if not os.path.exists(p):
            continue
        with open(p) as f:
            meta = json.load(f)
        meta["_dir"] = os.path.join(root, cid)
        meta["negative"] = meta["test"] in neg
        if filt and filt not in meta["test"] and not any(filt == o for o in meta.get("op_types", [])):
            continue
        cases.append(meta)
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--forge", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--precision", default="backend", choices=["backend", "fp32", "fp16"],
                    help="forge-ir --precision: backend (default): the precision of the test's backend "
                         "(fp16 backend: fp16; fp32 backend: fp32, Core ML's CPU path); fp32/fp16: forced")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    cases = load_cases(a.cases, a.filter)
    chains = collections.defaultdict(list)
    singles = []
    for m in cases:
        if m.get("unsupported"):
            m["status"], m["detail"] = "not_run", m["unsupported"]
        elif m.get("state_chain"):
            chains[m["state_chain"]].append(m)
        else:
            singles.append(m)

    def settle(m, verdicts):
        (m["status"], m["detail"]), (m["strict_status"], m["strict_detail"]) = (
            negative_verdict(v) if m["negative"] else v for v in verdicts)

    def do_single(m):
        m["run_precision"] = precision_of(m, a.precision)
        m["fp16_typed"] = m["precision"] == "fp32" and holds_fp16(m)
        settle(m, run_case(m, a.forge, precision=m["run_precision"]))

    def do_chain(ms):
        ms.sort(key=lambda m: m["call"])
        with tempfile.TemporaryDirectory(prefix="forgeconf_state_") as sd:
            for i, m in enumerate(ms):
                m["run_precision"] = precision_of(m, a.precision)
                m["fp16_typed"] = m["precision"] == "fp32" and holds_fp16(m)
                settle(m, run_case(m, a.forge, state_dir=sd, first=(i == 0), precision=m["run_precision"]))

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(do_single, m) for m in singles] + [ex.submit(do_chain, ms) for ms in chains.values()]
        for f in futs:
            f.result()
    report(a, cases)


def negative_verdict(verdict):
    """A negative case: the test expects an error or a mismatch, so forge-ir refusing or differing passes it."""
    status, detail = verdict
    if status in ("error", "mismatch", "no_kernel"):
        return "pass", "negative case: %s (%s)" % (status, detail)
    if status == "pass":
        return "mismatch", "negative case: the test expects an error or different values"
    return verdict


def per_op_table(run):
    per_op = collections.OrderedDict()
    for m in run:
        for op in ops_under_test(m):
            row = per_op.setdefault(op, {"cases": 0, "pass": 0, "strict": 0, "fail": collections.Counter()})
            row["cases"] += 1
            row["strict"] += m["strict_status"] == "pass"
            if m["status"] == "pass":
                row["pass"] += 1
            else:
                row["fail"][m["status"]] += 1
    lines = ["| op | cases | pass | strict | failing (kind) |", "|---|--:|--:|--:|---|"]
    for op in sorted(per_op):
        r = per_op[op]
        fails = ", ".join("%s %d" % (k, v) for k, v in sorted(r["fail"].items()))
        lines.append("| `%s` | %d | %d | %d | %s |" % (op, r["cases"], r["pass"], r["strict"], fails))
    p = sum(m["status"] == "pass" for m in run)
    q = sum(m["strict_status"] == "pass" for m in run)
    lines.append("| **all** | **%d** | **%d (%.1f %%)** | %d (%.1f %%) | |" % (
        len(run), p, 100.0 * p / max(1, len(run)), q, 100.0 * q / max(1, len(run))))
    return lines


def figure(label, ms):
    p = sum(m["status"] == "pass" for m in ms)
    q = sum(m["strict_status"] == "pass" for m in ms)
    n = max(1, len(ms))
    return "\n  %s: %d/%d (%.2f %%), strict %d/%d (%.2f %%)" % (label, p, len(ms), 100.0 * p / n, q, len(ms), 100.0 * q / n)


def report(a, cases):
    run = [m for m in cases if m["status"] != "not_run"]
    lines = per_op_table(run)
    not_run = collections.Counter(m["detail"].split(":")[0] for m in cases if m["status"] == "not_run")
    summary = "conformance: %d recorded cases not run (%s)" % (
        sum(not_run.values()), ", ".join("%s: %d" % kv for kv in not_run.items()) or "none")
    summary += figure("all", run)
    summary += figure("fp16 cases (fp16 backend or program typed fp16): fp16 runtime tolerances",
                      [m for m in run if is_fp16_case(m)])
    summary += figure("fp32 cases (fp32 programs, fp32 backend): the test's tolerances", [m for m in run if not is_fp16_case(m)])
    summary += figure("fp16 backend (coremltools' default test configuration)", [m for m in run if m["precision"] == "fp16"])
    summary += figure("fp32 backend (opt-in, INCLUDE_MIL_FP32_UNIT_TESTS=1), fp32 programs",
                      [m for m in run if m["precision"] != "fp16" and not m["fp16_typed"]])
    summary += figure("fp32 backend, programs the test typed fp16 itself", [m for m in run if m["fp16_typed"]])
    admitted = [m for m in run if m["status"] == "pass" and m["strict_status"] != "pass" and not m["negative"]]
    if admitted:
        ulps = [m["max_err_fp16_ulps"] for m in admitted if m["max_err_fp16_ulps"] is not None]
        summary += "\n  passing only at the fp16 tolerances: %d cases, largest error %.3g fp16 ulps at the output's scale" % (
            len(admitted), max(ulps) if ulps else float("nan"))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump([{k: v for k, v in m.items() if k != "_dir"} for m in cases], f, indent=1)
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write("\n".join(lines) + "\n\n" + summary + "\n")
    if not a.quiet:
        print("\n".join(lines))
        for m in run:
            if m["status"] != "pass" or m["strict_status"] != "pass":
                print("%s %-9s %s %s %s%s\n     %s" % (
                    "FAIL" if m["status"] != "pass" else "STRICT-ONLY", m["strict_status"], m["id"], m["run_precision"],
                    "fp16-typed " if m["fp16_typed"] else "", m["test"],
                    m["detail"] if m["status"] != "pass" else m["strict_detail"]))
    print(summary)


if __name__ == "__main__":
    main()
