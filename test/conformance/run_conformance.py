#!/usr/bin/env python3
"""ONNX backend node-test conformance run for Cleave's CPU backend.

Compiles every test model under the node-test directory with cleave-compile,
runs it with cleave-run on test_data_set_0's inputs and compares every output
with the expected one (rtol 1e-3, atol 1e-7, NaNs equal, dtypes and shapes
exact).

Cleave compiles for static shapes. Some tests feed values that decide shapes
(a Reshape's target shape, Slice bounds, reduction axes) as graph inputs;
when the compiler reports that such a value must be known at compile time,
the test is compiled again with its small integer-or-scalar inputs frozen to
the test's values (`--freeze-input`), the way a deployment would specialize
the model. Those passes are counted separately in the summary. Each test runs in its own processes, so a crash fails that test only
and is listed. Prints per-op results and the summary line

    conformance: P passed, F failed, U unsupported of N

and exits non-zero when P is below --floor or when a test crashes or times
out (unless --allow-crashes).

`--extra-tests DIR --extra-filter REGEX` also runs the matching tests of
another directory of the same layout (e.g. libonnx-testdata's `simple`
models, such as the Gradient tests). They are listed and counted on their
own line, `extra (DIR): P passed, F failed, U unsupported of N`, so the node
count stays comparable, and every selected extra test must pass.

`--skip-same-as DIR` leaves out the tests whose directory is byte for byte
DIR's test of the same name (the node tests an onnx release regenerated
unchanged): the run over DIR checks them with the same binaries.
"""

import argparse
import collections
import concurrent.futures
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

RTOL, ATOL = 1e-3, 1e-7


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def describe_signal(rc):
    if rc < 0:
        try:
            return "crashed with " + signal.Signals(-rc).name
        except ValueError:
            return "crashed with signal %d" % -rc
    return None


def op_label(test_dir, model):
    ops = [n.op_type for n in model.graph.node]
    base = ops[0] if len(set(ops)) == 1 else (ops[0] if ops else "(none)")
    if os.path.basename(test_dir).endswith("_expanded"):
        return base + " (expanded)"
    return base


def is_frozen_candidate(value_info, data_dir, index):
    """Small inputs (at most 16 elements, rank <= 1) can be shape values."""
    t = value_info.type.tensor_type
    dims = [d.dim_value for d in t.shape.dim]
    return len(dims) <= 1 and (not dims or dims[0] <= 16)


def first_error(stderr):
    """The first error line of a tool's stderr (warnings come before it)."""
    lines = stderr.strip().splitlines()
    errors = [l for l in lines if "error:" in l]
    return (errors or lines or [""])[0]


# ONNX element types 17-26 (float8, int4, float4, int2) that cleave-run
# widens in the .npy files it writes, and numpy's type for each.
NARROW_WIDENED = {17: np.float32, 18: np.float32, 19: np.float32, 20: np.float32,
                  21: np.uint8, 22: np.int8, 23: np.float32, 24: np.float32,
                  25: np.uint8, 26: np.int8}


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def compare(name, got, want):
    if got.dtype != want.dtype:
        return "output '%s': dtype %s, expected %s" % (name, got.dtype, want.dtype)
    if got.shape != want.shape:
        return "output '%s': shape %s, expected %s" % (name, got.shape, want.shape)
    if want.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(w)
        with np.errstate(invalid="ignore"):  # inf - inf: equal infs pass via g == w
            ok = (np.abs(g - w) <= ATOL + RTOL * np.abs(w)) | both_nan | (g == w)
        if not ok.all():
            bad = np.argwhere(~ok)[0]
            idx = tuple(int(i) for i in bad)
            return "output '%s': mismatch at %s: got %r, expected %r (%d of %d differ)" % (
                name, idx, g[idx], w[idx], int((~ok).sum()), ok.size)
    elif not np.array_equal(got, want):
        return "output '%s': values differ" % name
    return None


def run_test(args, test_dir):
    """Returns (status, op, detail); status in passed/failed/unsupported."""
    name = os.path.basename(test_dir)
    try:
        model = onnx.load(os.path.join(test_dir, "model.onnx"))
    except Exception as e:  # a broken test file is a failure, not a crash
        return "failed", "(unreadable)", "cannot load model: %s" % e
    op = op_label(test_dir, model)
    data_dir = os.path.join(test_dir, "test_data_set_0")
    inputs = sorted((f for f in os.listdir(data_dir) if f.startswith("input_")),
                    key=lambda f: int(f[6:-3]))
    outputs = sorted((f for f in os.listdir(data_dir) if f.startswith("output_")),
                     key=lambda f: int(f[7:-3]))
    work = tempfile.mkdtemp(prefix="cleave-conf-" + name + "-")
    try:
        plan = os.path.join(work, "model.cleave")
        frozen = []
        compile_cmd = [args.compile, os.path.join(test_dir, "model.onnx"), "-o", plan] + args.compile_arg
        try:
            c = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=args.timeout)
            if c.returncode != 0 and "computable at import time" in c.stderr:
                graph_inputs = [i for i in model.graph.input
                                if i.name not in {t.name for t in model.graph.initializer}]
                for i, (vi, f) in enumerate(zip(graph_inputs, inputs)):
                    if is_frozen_candidate(vi, data_dir, i):
                        frozen.append(i)
                        compile_cmd += ["--freeze-input", "%s=%s" % (vi.name, os.path.join(data_dir, f))]
                if frozen:
                    c = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "failed", op, "compile timed out"
        inputs = [f for i, f in enumerate(inputs) if i not in frozen]
        crash = describe_signal(c.returncode)
        if crash:
            return "failed", op, "compiler " + crash
        if c.returncode != 0:
            msg = first_error(c.stderr) or "exit %d" % c.returncode
            status = "unsupported" if ("unsupported" in msg or "not supported" in msg) else "failed"
            return status, op, msg
        outdir = os.path.join(work, "out")
        os.mkdir(outdir)
        try:
            r = subprocess.run([args.run, plan] + [os.path.join(data_dir, f) for f in inputs]
                               + ["--output-dir", outdir],
                               capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return "failed", op, "run timed out"
        crash = describe_signal(r.returncode)
        if crash:
            return "failed", op, "runtime " + crash
        if r.returncode != 0:
            return "failed", op, first_error(r.stderr) or "exit %d" % r.returncode
        for f, out in zip(outputs, model.graph.output):
            if not out.type.HasField("tensor_type"):
                return "unsupported", op, "output '%s' is not a tensor" % out.name
            try:
                want = numpy_helper.to_array(onnx.load_tensor(os.path.join(data_dir, f)))
            except Exception as e:  # an expected value numpy cannot hold fails the test
                return "failed", op, "cannot load expected '%s': %s" % (out.name, e)
            elem = out.type.tensor_type.elem_type
            if elem == onnx.TensorProto.BFLOAT16:
                # cleave-run writes f32; onnx < 1.19 gives the uint16 bits,
                # later versions an ml_dtypes bfloat16 array.
                want = bf16_to_f32(want) if want.dtype == np.uint16 else want.astype(np.float32)
            elif elem in NARROW_WIDENED:
                # float8/float4 (ml_dtypes arrays) come back as f32, int4/int2
                # as int8, uint4/uint2 as uint8.
                want = want.astype(NARROW_WIDENED[elem])
            path = os.path.join(outdir, sanitize(out.name) + ".npy")
            if not os.path.exists(path):
                return "failed", op, "output '%s' not written" % out.name
            got = np.load(path)
            err = compare(out.name, got, want)
            if err:
                return "failed", op, err
        return "passed", op, "frozen inputs" if frozen else ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tree_digest(path):
    """SHA-256 of a directory's relative file names and contents."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            digest.update(os.path.relpath(full, path).encode())
            with open(full, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compile", required=True, help="path of cleave-compile")
    p.add_argument("--run", required=True, help="path of cleave-run")
    p.add_argument("--compile-arg", action="append", default=[],
                   help="extra cleave-compile argument (repeatable)")
    p.add_argument("--tests", default="/usr/share/libonnx-testdata/data/node")
    p.add_argument("--filter", default="", help="regex on test names")
    p.add_argument("--floor", type=int, default=0, help="fail if fewer tests pass")
    p.add_argument("--floor-file", help="file holding the floor (overrides --floor)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--report", help="write one line per test here")
    p.add_argument("--allow-crashes", action="store_true",
                   help="do not fail the run for crashes and time-outs")
    p.add_argument("--extra-tests", help="another test directory (e.g. .../data/simple)")
    p.add_argument("--extra-filter", default="",
                   help="regex on the names of the --extra-tests tests to run")
    p.add_argument("--skip-same-as",
                   help="skip the tests whose directory (model and data) is byte for byte "
                        "the one of the same name here: another run checks them")
    args = p.parse_args()

    if args.floor_file:
        with open(args.floor_file) as f:
            args.floor = int(f.read().split()[0])
    tests = sorted(d for d in os.listdir(args.tests)
                   if os.path.isdir(os.path.join(args.tests, d)) and re.search(args.filter, d))
    same = []
    if args.skip_same_as:
        same = [t for t in tests if os.path.isdir(os.path.join(args.skip_same_as, t))
                and tree_digest(os.path.join(args.tests, t))
                == tree_digest(os.path.join(args.skip_same_as, t))]
        tests = [t for t in tests if t not in set(same)]
    extra = []
    if args.extra_tests:
        extra = sorted(d for d in os.listdir(args.extra_tests)
                       if os.path.isdir(os.path.join(args.extra_tests, d))
                       and re.search(args.extra_filter, d))
    results, extra_results = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_test, args, os.path.join(args.tests, t)): (results, t)
                   for t in tests}
        futures.update({pool.submit(run_test, args, os.path.join(args.extra_tests, t)):
                        (extra_results, t) for t in extra})
        for fut in concurrent.futures.as_completed(futures):
            into, t = futures[fut]
            try:
                into[t] = fut.result()
            except Exception as e:  # a test the runner cannot read fails alone
                into[t] = ("failed", "(runner)", "runner error: %s: %s" % (type(e).__name__, e))

    per_op = collections.defaultdict(collections.Counter)
    for t, (status, op, _) in results.items():
        per_op[op][status] += 1
    print("%-36s %6s %6s %6s" % ("op", "passed", "failed", "unsup"))
    for op in sorted(per_op):
        c = per_op[op]
        print("%-36s %6d %6d %6d" % (op, c["passed"], c["failed"], c["unsupported"]))
    crashes = [(t, d) for t, (s, _, d) in sorted(results.items()) if "crashed" in d or "timed out" in d]
    if crashes:
        print("\ncrashes and time-outs:")
        for t, d in crashes:
            print("  %s: %s" % (t, d))
    extra_label = os.path.basename(os.path.normpath(args.extra_tests)) if args.extra_tests else ""
    if extra_results:
        print("\nextra tests (%s):" % args.extra_tests)
        for t in sorted(extra_results):
            s, op, d = extra_results[t]
            print("  %-40s %-12s %s%s" % (t, s, op, (": " + d) if d else ""))
    if args.report:
        with open(args.report, "w") as f:
            for t in sorted(results):
                s, op, d = results[t]
                f.write("%s\t%s\t%s\t%s\n" % (t, s, op, d))
            for t in sorted(extra_results):
                s, op, d = extra_results[t]
                f.write("%s/%s\t%s\t%s\t%s\n" % (extra_label, t, s, op, d))
    counts = collections.Counter(s for s, _, _ in results.values())
    frozen = sum(1 for s, _, d in results.values() if s == "passed" and d == "frozen inputs")
    print("\n%d of the passes compiled with shape-deciding inputs frozen (--freeze-input)" % frozen)
    print("\nconformance: %d passed, %d failed, %d unsupported of %d" % (
        counts["passed"], counts["failed"], counts["unsupported"], len(results)))
    if same:
        print("skipped: %d tests the same byte for byte as %s's (checked there)"
              % (len(same), args.skip_same_as))
    rc = 0
    if args.extra_tests:
        extra_counts = collections.Counter(s for s, _, _ in extra_results.values())
        print("extra (%s): %d passed, %d failed, %d unsupported of %d" % (
            extra_label, extra_counts["passed"], extra_counts["failed"],
            extra_counts["unsupported"], len(extra_results)))
        if extra_counts["passed"] < len(extra_results):
            print("extra (%s): every selected extra test must pass" % extra_label)
            rc = 1
    if crashes and not args.allow_crashes:
        print("conformance: %d crashes or time-outs; there must be none" % len(crashes))
        rc = 1
    if counts["passed"] < args.floor:
        print("conformance: %d passed is below the floor of %d" % (counts["passed"], args.floor))
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
