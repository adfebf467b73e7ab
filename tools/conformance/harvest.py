"""Harvest coremltools' MIL op unit tests (iOS14…iOS18) into conformance cases.

    tools/.venv/bin/python tools/conformance/harvest.py --out tools/conformance/.work [--per-test 30]
        [--jobs 2] [-k EXPR] [files under ops/tests, e.g. iOS17/test_recurrent.py]

Runs pytest over the installed wheel's op tests with `harvest_plugin` (which records each
`compare_backend` call as a case folder instead of predicting). Both precisions are harvested
(INCLUDE_MIL_FP32_UNIT_TESTS=1), ML Program backend only (PYMIL_TEST_TARGETS=mlprogram), CPU_ONLY.
`--per-test N` keeps at most N parametrizations per test function (N/2 per precision, spread
evenly over the parametrization list: the same parametrizations every run) so a harvest takes
about an hour, not many; 0 keeps all ~19,700 parametrizations.
"""

import argparse
import os
import shutil
import subprocess
import sys

import coremltools

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(coremltools.__file__), "converters", "mil", "mil", "ops", "tests")
DIRS = ["iOS14", "iOS15", "iOS16", "iOS17", "iOS18"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-test", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-k", default=None)
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    paths = a.paths or DIRS
    # split the test files over `jobs` pytest processes (each converts models on one core)
    files = []
    for p in paths:
        full = os.path.join(TESTS, p)
        if os.path.isdir(full):
            files += sorted(os.path.join(p, f) for f in os.listdir(full) if f.startswith("test_") and f.endswith(".py"))
        else:
            files.append(p)
    buckets = [files[i :: a.jobs] for i in range(a.jobs)]
    env = dict(os.environ)
    env.update(
        PYMIL_TEST_TARGETS="mlprogram",
        INCLUDE_MIL_FP32_UNIT_TESTS="1",
        FORGE_CONF_OUT=out,
        FORGE_CONF_PER_TEST=str(a.per_test),
        PYTHONPATH=HERE + os.pathsep + env.get("PYTHONPATH", ""),
        PYTHONHASHSEED="0",
    )
    procs = []
    for i, b in enumerate(buckets):
        if not b:
            continue
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "harvest_plugin", "-p", "no:cacheprovider", "-x" if False else "-q", "--disable-warnings", "-rN"]
        if a.k:
            cmd += ["-k", a.k]
        cmd += b
        log = open(os.path.join(out, "pytest_%d.log" % i), "w")
        procs.append((subprocess.Popen(cmd, cwd=TESTS, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    for p, log in procs:
        p.wait()
        log.close()
    n = len(os.listdir(os.path.join(out, "cases")))
    print("harvested %d cases into %s" % (n, out))


if __name__ == "__main__":
    main()
