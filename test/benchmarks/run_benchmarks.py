#!/usr/bin/env python3
"""Cleave's benchmarks: Cleave against references measured in the same run.

Prints one table with:
  1. matmul GFLOP/s at 512^3, 1024^3 and (M,K,N) = (2048,768,3072):
     (a) Cleave (a single-MatMul ONNX model, compiled by cleave-compile, timed
         by cleave-run --print-stats), (b) cblas_sgemm called directly through
         ctypes on the same OpenBLAS library cleave-run links, (c) Cleave with
         --no-library-gemm (generated loops);
  2. inference time of the demo model (make_gpt.py --preset tiny), Cleave vs
     onnxruntime (CPUExecutionProvider);
  3. the same for a GPT-2-small-shaped model (124M parameters, T=1024,
     batch 1), with the output checked against onnxruntime;
  4. compile time (wall) of that model and its plan's peak memory;
  5. compile time (wall) of its AdamW training step, with a cold and then a
     warm kernel cache (a cache directory of the run's own);
  6. inference time of ResNet-18 (make_resnet.py: torchvision's graph as
     exported in eval mode, batch 1, 224x224), Cleave vs onnxruntime;
  7. the same for a BERT-base-shaped encoder (make_gpt.py --preset
     bert-base: 12 layers, d=768, T=128, batch 1);
  8. with --torch-python PY (a Python with torch, transformers and
     onnxscript; not in the project's venv): one AdamW training step of the
     HF GPT-2 (4 layers, d=128) and of the real-model suite's ResNet-18 in
     Cleave, PyTorch eager and torch.compile, on the same batch
     (test/models/bench_torch.py, modes alternated, medians of the steps).

    run_benchmarks.py                 # everything (a few minutes)
    run_benchmarks.py --quick         # skips gpt2-small, fewer repeats
    run_benchmarks.py --only matmul   # or tiny, gpt2, resnet, bert, train (repeatable)
    run_benchmarks.py --threads 1     # pin every side to one thread

What is timed:
  * Cleave: the "run time" cleave-run prints with --print-stats: wall time of
    cleave_rt_executor_run alone, i.e. all commands of the plan (kernels,
    GEMMs, copies, fills) over the arena. The inputs are copied into the
    arena once before the warmup runs and the outputs are read after the
    timed runs, so neither is in the figure; process start, plan load and
    executor creation are not in it either.
  * OpenBLAS: one cblas_sgemm call (row-major, no transposes, alpha 1,
    beta 0) on preallocated float32 arrays, wall time around the ctypes call.
  * onnxruntime: wall time of InferenceSession.run, which includes its
    input binding and the allocation of the output array.
Thread counts: OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to --threads
(default: all cores) for cleave-run and for this process (hence the ctypes
OpenBLAS), and onnxruntime gets intra_op_num_threads = --threads. Cleave's
generated kernels' loop nests and its oneDNN GEMMs share one OpenMP team of
OMP_NUM_THREADS threads.
OPENBLAS_CORETYPE is left as found and printed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="skip gpt2-small and use fewer repeats (smoke run)")
    p.add_argument("--torch-python", default=os.environ.get("CLEAVE_TORCH_PYTHON"), metavar="PY",
                   help="a Python with torch, transformers and onnxscript, for row 8 (training step against "
                        "PyTorch; default $CLEAVE_TORCH_PYTHON)")
    p.add_argument("--only", action="append", choices=["matmul", "tiny", "gpt2", "resnet", "bert", "train"],
                   help="run only this part (repeatable); gpt2 covers rows 3 and 4")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="threads for OpenBLAS (Cleave and reference) and onnxruntime (default: all cores, %(default)s)")
    p.add_argument("--build", default=os.environ.get("CLEAVE_BUILD_DIR", os.path.join(ROOT, "build")),
                   help="Cleave build directory (default: %(default)s)")
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep the generated files (default: a temp dir)")
    p.add_argument("--gemm-limit-s", type=float, default=30.0,
                   help="skip a --no-library-gemm shape whose estimated time exceeds this (default %(default)s)")
    return p.parse_args()


ARGS = parse_args()
# Before numpy/onnxruntime load any BLAS: the thread counts for this process
# (the ctypes OpenBLAS reference) and, inherited, for cleave-run.
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import ctypes  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

BIN = os.path.join(ARGS.build, "bin")
COMPILE = os.path.join(BIN, "cleave-compile")
RUN = os.path.join(BIN, "cleave-run")
PY = sys.executable


def log(msg):
    print("[bench] " + msg, file=sys.stderr, flush=True)


class Failure(Exception):
    pass


def sh(cmd, what, env=None):
    """Runs cmd; returns (stdout, stderr, wall seconds); raises Failure with the exact error."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-8:]
        raise Failure("%s failed (exit %d): %s\n    command: %s" % (
            what, r.returncode, "\n    ".join(tail), " ".join(cmd)))
    return r.stdout, r.stderr, wall


# --- Cleave ------------------------------------------------------------------

def cleave_compile(model, plan, extra=(), env=None):
    out, err, wall = sh([COMPILE, model, "-o", plan, "--print-stats", *extra], "cleave-compile " + os.path.basename(model),
                        env=env)
    text = out + err
    m = re.search(r"plan: (\d+) commands \((\d+) kernels, (\d+) gemms, \d+ attentions[^)]*\), arena (\d+) bytes \(constants (\d+)\)"
                  r".*compiled in ([0-9.]+) s", text)
    if not m:
        raise Failure("cannot parse cleave-compile --print-stats output: %r" % text[-400:])
    t = re.search(r"time: (.*)", text)
    return dict(commands=int(m[1]), kernels=int(m[2]), gemms=int(m[3]), arena=int(m[4]),
                constants=int(m[5]), compile_s_reported=float(m[6]), compile_s_wall=wall,
                times=t[1] if t else "")


def cleave_run(plan, inputs, outdir, warmup, repeat):
    cmd = [RUN, plan, *inputs, "--print-stats", "--warmup", str(warmup), "--repeat", str(repeat)]
    cmd += ["--output-dir", outdir] if outdir else ["--no-output"]
    out, err, wall = sh(cmd, "cleave-run " + os.path.basename(plan))
    text = out + err
    m = re.search(r"run time: min ([0-9.]+) ms, mean ([0-9.]+) ms over (\d+) run", text)
    p = re.search(r"peak memory: (\d+) bytes \(arena\), of which (\d+) bytes of constants", text)
    ld = re.search(r"load time: ([0-9.]+) ms \(plan\) \+ ([0-9.]+) ms \(executor\)", text)
    if not (m and p and ld):
        raise Failure("cannot parse cleave-run --print-stats output: %r" % text[-400:])
    return dict(min_ms=float(m[1]), mean_ms=float(m[2]), runs=int(m[3]), arena=int(p[1]),
                load_ms=float(ld[1]) + float(ld[2]), wall_s=wall)


# --- references --------------------------------------------------------------

def openblas_path():
    out = subprocess.run(["ldd", RUN], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "openblas" in line and "=>" in line:
            return line.split("=>")[1].split("(")[0].strip()
    raise Failure("cleave-run does not link an OpenBLAS library (ldd %s)" % RUN)


class OpenBLAS:
    ROW_MAJOR, NO_TRANS = 101, 111

    def __init__(self, path):
        self.path = path
        self.real = os.path.realpath(path)
        self.lib = ctypes.CDLL(path)
        f = self.lib.cblas_sgemm
        P, I, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        f.argtypes = [I, I, I, I, I, I, F, P, I, P, I, F, P, I]
        f.restype = None
        self.sgemm = f
        for name in ("openblas_get_config", "openblas_get_corename"):
            getattr(self.lib, name).restype = ctypes.c_char_p
        self.lib.openblas_set_num_threads(ARGS.threads)

    def config(self):
        return "%s; core %s; %d threads" % (self.lib.openblas_get_config().decode(),
                                            self.lib.openblas_get_corename().decode(),
                                            self.lib.openblas_get_num_threads())

    def time_gemm(self, a, b, c, warmup, repeat):
        M, K = a.shape
        N = b.shape[1]
        args = (self.ROW_MAJOR, self.NO_TRANS, self.NO_TRANS, M, N, K, 1.0, a.ctypes.data, K,
                b.ctypes.data, N, 0.0, c.ctypes.data, N)
        for _ in range(warmup):
            self.sgemm(*args)
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.sgemm(*args)
            ts.append(time.perf_counter() - t0)
        return min(ts) * 1e3, sum(ts) / len(ts) * 1e3


def ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = ARGS.threads
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def time_ort(sess, feeds, warmup, repeat):
    out = None
    for _ in range(warmup):
        out = sess.run(None, feeds)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3, sum(ts) / len(ts) * 1e3, out


# --- the table ---------------------------------------------------------------

ROWS = []  # (section, item, cleave, reference, ratio, note)


def row(section, item, cleave, ref, ratio, note=""):
    ROWS.append((section, item, cleave, ref, ratio, note))


def fmt_ms(mn, mean):
    return "%.2f ms (mean %.2f)" % (mn, mean) if mn < 1000 else "%.3f s (mean %.3f)" % (mn / 1e3, mean / 1e3)


def print_table():
    head = ("#", "benchmark", "Cleave", "reference", "ratio", "notes")
    w = [max(len(str(r[i])) for r in ROWS + [head]) for i in range(5)]
    line = "  ".join("%-*s" % (w[i], head[i]) for i in range(5)) + "  " + head[5]
    print(line)
    print("-" * max(len(line), 100))
    last = None
    for r in ROWS:
        if last is not None and r[0] != last:
            print()
        last = r[0]
        print("  ".join("%-*s" % (w[i], r[i]) for i in range(5)) + "  " + r[5])


# --- 1. matmul -----------------------------------------------------------------

def matmul_model(path, M, K, N):
    g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "matmul",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [M, K]),
                           helper.make_tensor_value_info("B", TensorProto.FLOAT, [K, N])],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [M, N])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="cleave-bench")
    m.ir_version = 8
    onnx.save(m, path)


ROUNDS = 3  # matmul and tiny: Cleave and the reference alternate in rounds


def merge_runs(rs):
    """Merges cleave_run results of equal repeat counts."""
    m = dict(rs[-1])
    m["min_ms"] = min(r["min_ms"] for r in rs)
    m["mean_ms"] = sum(r["mean_ms"] for r in rs) / len(rs)
    m["runs"] = sum(r["runs"] for r in rs)
    return m


def bench_matmul(work, blas):
    shapes = [(512, 512, 512), (1024, 1024, 1024), (2048, 768, 3072)]
    repeats = {512: 30, 1024: 12, 2048: 6} if not ARGS.quick else {512: 10, 1024: 4, 2048: 2}
    rng = np.random.default_rng(0)
    gen_s_per_flop = None  # --no-library-gemm seconds per flop at the last shape
    for M, K, N in shapes:
        name = "%dx%dx%d" % (M, K, N)
        flop = 2.0 * M * K * N
        gf = lambda ms: flop / (ms * 1e-3) / 1e9  # noqa: E731
        n = repeats[M]
        d = os.path.join(work, "mm_" + name)
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "mm.onnx")
        matmul_model(model, M, K, N)
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        np.save(os.path.join(d, "A.npy"), a)
        np.save(os.path.join(d, "B.npy"), b)
        inputs = [os.path.join(d, "A.npy"), os.path.join(d, "B.npy")]
        want = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(want).max()

        def check(out_npy):
            got = np.load(out_npy)
            err = float(np.abs(got - want).max())
            ok = err <= 1e-4 * scale
            return err, ok

        sec = "1 matmul %s" % name
        # (a) Cleave with library GEMM and (b) OpenBLAS directly, alternated
        # over ROUNDS rounds so that load from other work hits both alike.
        c = np.empty((M, N), np.float32)
        per = max(1, n // ROUNDS)
        cleave_ms, cleave_note, bl = None, "", []
        try:
            st = cleave_compile(model, os.path.join(d, "mm.cleave"))
        except Failure as e:
            st, cleave_note = None, "FAILED: " + str(e)
        rs = []
        for k in range(ROUNDS):
            if st is not None and not cleave_note:
                log("matmul %s round %d/%d: Cleave (library gemm), warmup 2, repeat %d" % (name, k + 1, ROUNDS, per))
                try:
                    rs.append(cleave_run(os.path.join(d, "mm.cleave"), inputs, d, 2, per))
                except Failure as e:
                    cleave_note = "FAILED: " + str(e)
            log("matmul %s round %d/%d: OpenBLAS cblas_sgemm via ctypes, warmup 2, repeat %d" % (
                name, k + 1, ROUNDS, per))
            bl.append(blas.time_gemm(a, b, c, 2, per))
        bl_min, bl_mean = min(x[0] for x in bl), sum(x[1] for x in bl) / len(bl)
        if rs and not cleave_note:
            cleave_ms = merge_runs(rs)
            err, ok = check(os.path.join(d, "C.npy"))
            cleave_note = "plan: %d gemm, %d kernel, %d commands; max|err| %.2g%s" % (
                st["gemms"], st["kernels"], st["commands"], err, "" if ok else " WRONG RESULT")
        n = per * ROUNDS
        if cleave_ms:
            row(sec, "Cleave (library GEMM) GFLOP/s",
                "%.1f (mean %.1f)" % (gf(cleave_ms["min_ms"]), gf(cleave_ms["mean_ms"])),
                "OpenBLAS %.1f (mean %.1f)" % (gf(bl_min), gf(bl_mean)),
                "%.2f" % (bl_min / cleave_ms["min_ms"]),
                "best of %d (%d rounds alternated); %s" % (n, ROUNDS, cleave_note))
        else:
            row(sec, "Cleave (library GEMM) GFLOP/s", "-", "OpenBLAS %.1f (mean %.1f)" % (gf(bl_min), gf(bl_mean)),
                "-", cleave_note)
        # (c) Cleave, generated loops. Their rate falls with size (cache), so
        # the time of a shape is estimated from the previous shape's rate; a
        # shape estimated over --gemm-limit-s per run is skipped, and the
        # repeats shrink to fit the limit.
        item = "Cleave --no-library-gemm GFLOP/s"
        ng, ngw = (1, 0) if ARGS.quick else (3, 1)
        if gen_s_per_flop is not None:
            est = gen_s_per_flop * flop
            if est > ARGS.gemm_limit_s:
                row(sec, item, "skipped", "OpenBLAS %.1f" % gf(bl_min), "-",
                    "estimated %.0f s per run at the previous shape's rate (> %.0f s)" % (est, ARGS.gemm_limit_s))
                continue
            ng = max(1, min(ng, int(ARGS.gemm_limit_s // est)))
            ngw = ngw if est * (ng + 1) <= ARGS.gemm_limit_s else 0
        log("matmul %s: Cleave --no-library-gemm, warmup %d, repeat %d" % (name, ngw, ng))
        try:
            plan = os.path.join(d, "mm_gen.cleave")
            st = cleave_compile(model, plan, ["--no-library-gemm"])
            gd = os.path.join(d, "gen")
            os.makedirs(gd, exist_ok=True)
            r = cleave_run(plan, inputs, gd, ngw, ng)
            err, ok = check(os.path.join(gd, "C.npy"))
            gen_s_per_flop = r["mean_ms"] * 1e-3 / flop
            row(sec, item, "%.2f (mean %.2f)" % (gf(r["min_ms"]), gf(r["mean_ms"])),
                "OpenBLAS %.1f" % gf(bl_min), "%.3f" % (bl_min / r["min_ms"]),
                "best of %d, warmup %d (%s per run); plan: %d kernel, %d gemm; max|err| %.2g%s" % (
                    ng, ngw, fmt_ms(r["min_ms"], r["mean_ms"]).split(" (")[0], st["kernels"], st["gemms"], err,
                    "" if ok else " WRONG RESULT"))
        except Failure as e:
            row(sec, item, "-", "OpenBLAS %.1f" % gf(bl_min), "-", "FAILED: " + str(e))


# --- 2./3. models --------------------------------------------------------------

def bench_model(work, preset, sec, warmup, repeat, rounds=1, extra_gen=(), compile_row=None):
    d = os.path.join(work, preset)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    log("%s: generating the model" % preset)
    t0 = time.perf_counter()
    if preset.startswith("resnet"):
        gen = [PY, os.path.join(ROOT, "tools", "models", "make_resnet.py"), "--depth", preset[6:], "-o", model]
    else:
        gen = [PY, os.path.join(ROOT, "tools", "models", "make_gpt.py"), "--preset", preset, "-o", model]
    out, _, _ = sh(gen + list(extra_gen), " ".join(os.path.basename(a) for a in gen[1:]))
    log("  %s (%.1f s)" % (out.strip(), time.perf_counter() - t0))
    m = onnx.load(model, load_external_data=False)
    input_name = m.graph.input[0].name
    shape = [dd.dim_value for dd in m.graph.input[0].type.tensor_type.shape.dim]
    del m
    rng = np.random.default_rng(0)
    if preset.startswith("resnet"):
        ids = rng.standard_normal(shape).astype(np.float32)
    else:
        vocab = {"tiny": 256, "gpt2-small": 50257, "bert-base": 30522}[preset]
        ids = rng.integers(0, vocab, shape).astype(np.int64)
    ids_npy = os.path.join(d, input_name + ".npy")
    np.save(ids_npy, ids)

    # Cleave and onnxruntime alternate over `rounds` rounds (repeat runs each
    # per round), so that load from other work hits both alike.
    plan = os.path.join(d, "model.cleave")
    cl, st, err_text = None, None, None
    log("%s: cleave-compile" % preset)
    try:
        st = cleave_compile(model, plan)
        log("  compiled in %.1f s wall; arena %d bytes" % (st["compile_s_wall"], st["arena"]))
    except Failure as e:
        err_text = str(e)
        log("  " + err_text)
    sess = ort_session(model)
    feeds = {input_name: ids}
    outd = os.path.join(d, "cleave_out")
    os.makedirs(outd, exist_ok=True)
    rs, os_ = [], []
    for k in range(rounds):
        if st is not None and err_text is None:
            log("%s round %d/%d: cleave-run, warmup %d, repeat %d" % (preset, k + 1, rounds, warmup, repeat))
            try:
                rs.append(cleave_run(plan, [ids_npy], outd, warmup, repeat))
            except Failure as e:
                err_text = str(e)
                log("  " + err_text)
        log("%s round %d/%d: onnxruntime, warmup %d, repeat %d" % (preset, k + 1, rounds, warmup, repeat))
        o = time_ort(sess, feeds, warmup, repeat)
        os_.append(o[:2])
        want = o[2][0]
    del sess, o
    if os.path.exists(plan):
        os.remove(plan)  # the gpt2 plan holds every weight (~0.5 GB)
    o_min, o_mean = min(x[0] for x in os_), sum(x[1] for x in os_) / len(os_)
    if rs and err_text is None:
        cl = merge_runs(rs)
        got = np.load(os.path.join(outd, "logits.npy"))
    repeat *= rounds

    item = "%s inference (shape %s)" % (preset, "x".join(map(str, shape)))
    ref = "onnxruntime " + fmt_ms(o_min, o_mean)
    if cl is None:
        row(sec, item, "FAILED", ref, "-", err_text)
    else:
        if got.shape != want.shape:
            check = "WRONG SHAPE %s vs %s" % (got.shape, want.shape)
        else:
            diff = float(np.abs(got.astype(np.float64) - want).max())
            ok = np.allclose(got, want, rtol=1e-3, atol=1e-4)
            check = "max|cleave-ort| %.3g (max|ort| %.3g) %s" % (diff, float(np.abs(want).max()),
                                                                "OK" if ok else "MISMATCH: the time is not valid")
        row(sec, item, fmt_ms(cl["min_ms"], cl["mean_ms"]), ref, "%.2f" % (cl["min_ms"] / o_min),
            "best of %d (%d round(s), warmup %d each); plan load %.0f ms; %s" % (repeat, rounds, warmup, cl["load_ms"], check))
    if compile_row:
        csec = compile_row
        if st is None:
            row(csec, "%s compile time (wall)" % preset, "FAILED", "-", "-", err_text)
        else:
            row(csec, "%s compile time (wall)" % preset, "%.2f s" % st["compile_s_wall"], "-", "-",
                "cleave-compile reports %.2f s; %d commands (%d kernels, %d gemms)" % (
                    st["compile_s_reported"], st["commands"], st["kernels"], st["gemms"]))
            row(csec, "%s plan peak memory (arena)" % preset, "%d B = %.1f MiB" % (st["arena"], st["arena"] / 2**20),
                "-", "-", "of which constants %.1f MiB, activations/io %.1f MiB" % (
                    st["constants"] / 2**20, (st["arena"] - st["constants"]) / 2**20))


def bench_train_compile(work, preset, sec):
    """The training step's compile time, cold and warm kernel cache."""
    model = os.path.join(work, preset, "model.onnx")
    if not os.path.exists(model):
        row(sec, "%s training step compile" % preset, "FAILED", "-", "-", "no model (run with --only gpt2)")
        return
    plan = os.path.join(work, preset, "train.cleave")
    env = dict(os.environ, CLEAVE_CACHE_DIR=os.path.join(work, "kernel-cache-train"))
    shutil.rmtree(env["CLEAVE_CACHE_DIR"], ignore_errors=True)
    train = ["--train", "--loss=cross_entropy:logits,labels", "--optimizer=adamw"]
    for label, goal in (("cold cache", 5.0), ("warm cache", 1.0)):
        log("%s: cleave-compile of the training step, %s" % (preset, label))
        try:
            st = cleave_compile(model, plan, train, env=env)
        except Failure as e:
            row(sec, "%s training step compile, %s" % (preset, label), "FAILED", "-", "-", str(e))
            return
        row(sec, "%s training step compile, %s (wall)" % (preset, label), "%.2f s" % st["compile_s_wall"],
            "goal %.0f s" % goal, "%.2f" % (st["compile_s_wall"] / goal), st["times"])
    if os.path.exists(plan):
        os.remove(plan)


def bench_train_torch(sec):
    """One AdamW step in Cleave, PyTorch eager and torch.compile (bench_torch.py)."""
    if not ARGS.torch_python:
        row(sec, "training step vs PyTorch", "skipped", "-", "-",
            "pass --torch-python PY (a Python with torch, transformers, onnxscript)")
        return
    script = os.path.join(ROOT, "test", "models", "bench_torch.py")
    steps = "10" if ARGS.quick else "30"
    for name, extra, goal in (("GPT-2 4 layers d=128, batch 8x64", [], 0.8),
                              ("ResNet-18 (suite), batch 8, 32x32", ["--model", "resnet18"], 1.0)):
        log("training step vs PyTorch: %s" % name)
        cmd = [ARGS.torch_python, script, *extra, "--modes", "eager,compile,cleave,eager,cleave",
               "--cleave-bin", os.path.join(ARGS.build, "bin"), "--steps", steps, "--threads", str(ARGS.threads)]
        r = subprocess.run(cmd, cwd=os.path.dirname(script), capture_output=True, text=True)
        results = {}
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                e = json.loads(line)
                results.setdefault(e["mode"], []).append(e)
        if r.returncode != 0 or not results.get("cleave") or not results.get("eager"):
            row(sec, "%s training step" % name, "FAILED", "-", "-",
                (r.stderr.strip().splitlines() or ["no output"])[-1][:160])
            continue
        best = {m: min(e["step_ms"] for e in es if e.get("step_ms") is not None)
                for m, es in results.items() if any(e.get("step_ms") is not None for e in es)}
        losses = "/".join("%s %.5f" % (m, es[-1]["final_loss"]) for m, es in results.items() if "final_loss" in es[-1])
        note = "goal <= %.1f x eager; " % goal
        if "compile" in best:
            note += "torch.compile %.1f ms (%.2f); " % (best["compile"], best["cleave"] / best["compile"])
        note += "medians of %s steps, best of %d/%d runs; final loss %s" % (
            steps, len(results["cleave"]), len(results["eager"]), losses)
        row(sec, "%s training step" % name, "%.1f ms" % best["cleave"], "PyTorch eager %.1f ms" % best["eager"],
            "%.2f" % (best["cleave"] / best["eager"]), note)


# --- main ----------------------------------------------------------------------

def main():
    only = set(ARGS.only or ["matmul", "tiny", "gpt2", "resnet", "bert", "train"])
    if ARGS.quick:
        only.discard("gpt2")
    for exe in (COMPILE, RUN):
        if not os.access(exe, os.X_OK):
            sys.exit("missing %s: run tools/build.sh first" % exe)
    blas = OpenBLAS(openblas_path())
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    load0 = open("/proc/loadavg").read().split()[0]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    header = [
        "Cleave benchmarks  (commit %s%s, %s)" % (git, " + local changes" if dirty else "", time.strftime("%Y-%m-%d %H:%M")),
        "machine: %s, %d cores, load average at start %s" % (cpu, os.cpu_count(), load0),
        "threads: OPENBLAS_NUM_THREADS=%s OMP_NUM_THREADS=%s (cleave-run and ctypes OpenBLAS), onnxruntime "
        "intra_op_num_threads=%d; Cleave's kernels and oneDNN GEMMs on OMP_NUM_THREADS OpenMP threads" % (
            os.environ["OPENBLAS_NUM_THREADS"], os.environ["OMP_NUM_THREADS"], ARGS.threads),
        "OPENBLAS_CORETYPE=%s (left as found)" % (repr(os.environ["OPENBLAS_CORETYPE"]) if "OPENBLAS_CORETYPE" in os.environ
                                                   else "(unset)"),
        "OpenBLAS: %s -> %s: %s" % (blas.path, blas.real, blas.config()),
        "onnxruntime %s (CPUExecutionProvider), numpy %s, onnx %s" % (ort.__version__, np.__version__, onnx.__version__),
        "Cleave time = cleave-run --print-stats 'run time' (executor run only: inputs are copied into the arena once "
        "before warmup, outputs read after; no process/plan-load cost);",
        "OpenBLAS time = one cblas_sgemm call via ctypes; onnxruntime time = InferenceSession.run. "
        "Times: min (mean) over the timed runs.",
        "ratio: matmul rows = Cleave GFLOP/s / OpenBLAS GFLOP/s (1 = parity); model rows = Cleave time / onnxruntime "
        "time (< 1: Cleave faster).",
    ]
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split()
    core = blas.lib.openblas_get_corename().decode()
    if "avx512f" in flags and core.lower() not in ("skylakex", "cooperlake", "sapphirerapids"):
        header.insert(5, "NOTE: the CPU has AVX-512 but OpenBLAS runs its '%s' kernels (Cleave's GEMMs and the OpenBLAS "
                         "reference alike; onnxruntime's MLAS is not affected); OPENBLAS_CORETYPE=SkylakeX selects "
                         "AVX-512 ones." % core)
    for h in header:
        log(h)

    work = ARGS.keep or tempfile.mkdtemp(prefix="cleave-bench-")
    os.makedirs(work, exist_ok=True)
    # Compiles use a kernel cache of this run's own, cold at its start.
    os.environ["CLEAVE_CACHE_DIR"] = os.path.join(work, "kernel-cache")
    shutil.rmtree(os.environ["CLEAVE_CACHE_DIR"], ignore_errors=True)
    t_all = time.perf_counter()
    try:
        if "matmul" in only:
            bench_matmul(work, blas)
        if "tiny" in only:
            n = 10 if ARGS.quick else 40
            bench_model(work, "tiny", "2 tiny GPT", 5, n, rounds=ROUNDS)
        if "resnet" in only:
            n = 5 if ARGS.quick else 20
            bench_model(work, "resnet18", "6 ResNet-18", 2, n, rounds=ROUNDS)
        if "bert" in only:
            n = 3 if ARGS.quick else 10
            bench_model(work, "bert-base", "7 BERT-base", 2, n, rounds=ROUNDS)
        if "gpt2" in only:
            bench_model(work, "gpt2-small", "3 gpt2-small", 1, 3, extra_gen=["--external-data"],
                        compile_row="4 gpt2-small compile")
            bench_train_compile(work, "gpt2-small", "5 gpt2-small training compile")
        if "train" in only:
            bench_train_torch("8 training vs PyTorch")
    finally:
        if not ARGS.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    for h in header:
        print(h)
    print()
    print_table()
    load_end = open("/proc/loadavg").read().split()[0]
    print("\n(total %.0f s; load average at start %s, at end %s%s)" % (
        time.perf_counter() - t_all, load0, load_end,
        "; the machine had other work: expect noise" if float(load0) >= 0.5 else ""), flush=True)
    failed = any(r[2] == "FAILED" or "FAILED" in r[5] or "WRONG" in r[5] or "MISMATCH" in r[5] for r in ROWS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
