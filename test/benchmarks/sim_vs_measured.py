#!/usr/bin/env python3
"""cleave-sim's prediction of a multi-rank CPU run against the run itself.

Compiles the small GPT (tools/models/make_gpt.py --layers 2 --d-model 64
--heads 2 --seq 32 --vocab 256 --batch 4) as an AdamW training step on one
rank, at --mesh dp=2,tp=2 (4 ranks) and at --mesh pp=2 --microbatches=2
(2 ranks), predicts each step's time with `cleave-sim --cluster cpu` (the
figures of test/benchmarks/calibrate_cpu.py) and measures it with
`cleave-run --ranks N --steps 1000 --synthetic` (ranks as threads, one
OpenBLAS thread each: a device of the cpu preset is one core running one
rank). The measured figure is the median of the steps' times (the JSON
log's step_ms) after the first 10, taken over --rounds runs alternating
the configurations. A run lasts 1.5-2 s: on the development machine the
host's speed swings by up to a fifth over about 0.7 s (calibrate_cpu.py),
so a run of 50 steps (0.1 s) measured one phase of it. The machine is shared: before each run the script
waits (up to --quiet-wait s) until other processes use less than --quiet
of the CPU, and a run during which they used more (the machine's CPU time
from /proc/stat less the run's own) is run again, up to --tries times; the
share they took of the kept run is printed. The two cores' joint GEMM
throughput moves with the host's other tenants (between one and two cores'
worth), so each run is also predicted with the capacity measured just
before it (two processes at once against one, each running for 0.5 s
the f32 GEMM the runtime calls: oneDNN's where it loads). With
--calibrate each round's predictions use figures
test/benchmarks/calibrate_cpu.py measures just before the round, instead of
the preset's: the host's state (its other tenants, where its scheduler
puts the two cores) moves its speed by a fifth from one few minutes to the
next (the small GPT's one-rank step: 1.6 ms at 16:30 UTC on 12-05, 1.9 ms
steadily from 16:40), and some figures by several times from hour to
hour (on 12-05 the development machine changed from an AMD EPYC VM to an
Intel Xeon one, whose OpenBLAS build falls back to SSE3 kernels; the
runtime's GEMMs are oneDNN's there).

    sim_vs_measured.py [--build build] [--work DIR] [--rounds 3]
        [--blas-threads 1] [--cluster cpu | --calibrate]
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=1000)
ap.add_argument("--cluster", default="cpu")
ap.add_argument("--calibrate", action="store_true",
                help="before each round run test/benchmarks/calibrate_cpu.py and predict the round with the "
                     "figures it measures then (instead of --cluster's)")
ap.add_argument("--calibrate-seconds", type=float, default=1.0,
                help="calibrate_cpu.py --seconds: the least time each of its measured runs lasts")
ap.add_argument("--quiet", type=float, default=0.1,
                help="before each run, wait until other processes use less than this share of the CPU; "
                     "run again when they used more during it")
ap.add_argument("--tries", type=int, default=4, help="runs per measurement at most")
ap.add_argument("--quiet-wait", type=float, default=60,
                help="the longest wait for a quiet machine, seconds")
ap.add_argument("--blas-threads", default="1",
                help="OPENBLAS_NUM_THREADS and OMP_NUM_THREADS for cleave-run, threads per rank "
                     "('default' leaves them unset)")
args = ap.parse_args()
if args.steps <= 10 or args.rounds < 1:
    ap.error("--steps must be more than 10 (the first 10 are left out) and --rounds at least 1")
BIN = os.path.join(args.build, "bin")
WORK = args.work or tempfile.mkdtemp(prefix="cleave-simvs-")
os.makedirs(WORK, exist_ok=True)
ENV = dict(os.environ)
if args.blas_threads != "default":
    ENV["OPENBLAS_NUM_THREADS"] = args.blas_threads
    ENV["OMP_NUM_THREADS"] = args.blas_threads

CONFIGS = [
    ("1 rank", 1, []),
    ("dp=2 x tp=2", 4, ["--mesh", "dp=2,tp=2"]),
    ("pp=2, 2 microbatches", 2, ["--mesh", "pp=2", "--microbatches=2"]),
]


def busy_fraction(seconds=0.5):
    """The share of the machine's CPU time used over `seconds`."""
    def sample():
        v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet():
    """Waits (at most --quiet-wait seconds) until other processes use less
    than --quiet of the CPU; returns the busy share last seen."""
    deadline = time.time() + args.quiet_wait
    while True:
        b = busy_fraction()
        if b < args.quiet or time.time() > deadline:
            return b
        time.sleep(1)


def cpu_ticks():
    """(busy, total) CPU ticks of the whole machine (/proc/stat)."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def child_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# The f32 GEMM the runtime calls (runtime/src/Gemm.cpp): oneDNN's
# dnnl_sgemm where libdnnl.so.2 loads, else OpenBLAS's cblas_sgemm.
SGEMM = """
import ctypes, sys, time
import numpy as np
P, I, L, F, C = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_float, ctypes.c_char
n = 256
a = np.ones((n, n), np.float32); b = np.ones((n, n), np.float32); c = np.zeros((n, n), np.float32)
try:
    f = ctypes.CDLL("libdnnl.so.2").dnnl_sgemm
    f.argtypes = [C, C, L, L, L, F, P, L, P, L, F, P, L]
    args = (b"N", b"N", n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
except OSError:
    f = ctypes.CDLL(sys.argv[1]).cblas_sgemm
    f.argtypes = [I, I, I, I, I, I, F, P, I, P, I, F, P, I]
    args = (101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
f(*args)
t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < 0.5:
    f(*args); k += 1
print(2.0 * n ** 3 * k / (time.perf_counter() - t0))
"""


def gemm_capacity():
    """Cores' worth of the runtime's f32 GEMM throughput with every core
    running one at once, over one alone (calibrate_cpu.py's
    compute_capacity, now)."""
    out = subprocess.run(["ldd", os.path.join(BIN, "cleave-run")], capture_output=True, text=True).stdout
    lib = [l.split("=>")[1].split("(")[0].strip() for l in out.splitlines() if "openblas" in l and "=>" in l][0]

    def run(copies):
        procs = [subprocess.Popen([sys.executable, "-c", SGEMM, lib], stdout=subprocess.PIPE, text=True, env=ENV)
                 for _ in range(copies)]
        return [float(p.communicate()[0]) for p in procs]
    alone = run(1)[0]
    return sum(run(os.cpu_count())) / alone


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    return r.stdout + r.stderr


def calibrate(round_):
    """Runs calibrate_cpu.py; returns the path of the description it prints
    (the whole of its report for the first round, its check after)."""
    out = sh([sys.executable, os.path.join(ROOT, "test/benchmarks/calibrate_cpu.py"), "--build", args.build,
              "--work", os.path.join(WORK, "calibration"), "--seconds", str(args.calibrate_seconds)])
    path = os.path.join(WORK, "calibrated%d.json" % round_)
    with open(path, "w") as f:
        f.write(out[out.index("\n{") + 1:])
    report = out[:out.index("\n{")]
    print(report if round_ == 0 else "round %d: %s" % (
        round_ + 1, [l for l in report.splitlines() if l.startswith("check")][0]))
    return path


def predict(plan, cluster):
    out = sh([os.path.join(BIN, "cleave-sim"), plan, "--cluster", cluster])
    return float(re.search(r"step time ([0-9.]+) ms", out).group(1))


def main():
    gpt = os.path.join(WORK, "gpt.onnx")
    sh([sys.executable, os.path.join(ROOT, "tools/models/make_gpt.py"), "--layers", "2", "--d-model", "64",
        "--heads", "2", "--seq", "32", "--vocab", "256", "--batch", "4", "-o", gpt])
    plans = []
    for name, ranks, extra in CONFIGS:
        plan = os.path.join(WORK, "plan%d.cleave" % len(plans))
        sh([os.path.join(BIN, "cleave-compile"), gpt, "--train", "--loss=cross_entropy:logits,labels",
            "--optimizer=adamw", *extra, "-o", plan])
        plans.append(dict(name=name, ranks=ranks, plan=plan, predicted=[], measured=[]))
    hz = os.sysconf("SC_CLK_TCK")
    for r in range(args.rounds):
        # The host's speed moves by a fifth from one few minutes to the
        # next: with --calibrate each round is predicted with figures
        # measured just before it.
        if args.calibrate:
            args.cluster = calibrate(r)
        for p in plans:
            p["predicted"].append(predict(p["plan"], args.cluster))
            log = os.path.join(WORK, "log.jsonl")
            cmd = [os.path.join(BIN, "cleave-run"), p["plan"], "--steps", str(args.steps), "--synthetic",
                   "--log-every", "1", "--log-json", log]
            if p["ranks"] > 1:
                cmd += ["--ranks", str(p["ranks"])]
            # A run during which other processes took more than --quiet of
            # the CPU measures them too: it is run again (--tries times).
            for attempt in range(args.tries):
                wait_quiet()
                capacity = gemm_capacity()
                b0, t0, c0, w0 = *cpu_ticks(), child_seconds(), time.time()
                sh(cmd)
                b1, t1, c1, w1 = *cpu_ticks(), child_seconds(), time.time()
                others = max(0.0, ((b1 - b0) / hz - (c1 - c0)) / ((t1 - t0) / hz))
                if others < args.quiet:
                    break
            p.setdefault("others", []).append(others)
            # The prediction with the GEMM capacity measured just before.
            now = os.path.join(WORK, "now.json")
            # --cluster's description (a preset name or a file) with it.
            if os.path.isfile(args.cluster):
                with open(args.cluster) as f:
                    desc = json.load(f)
            else:
                name, _, nodes = args.cluster.partition(":")
                desc = {"preset": name, **({"nodes": int(nodes)} if nodes else {})}
            desc["compute_capacity"] = round(min(capacity, os.cpu_count()), 3)
            with open(now, "w") as f:
                json.dump(desc, f)
            out = sh([os.path.join(BIN, "cleave-sim"), p["plan"], "--cluster", now])
            p.setdefault("now", []).append(float(re.search(r"step time ([0-9.]+) ms", out).group(1)))
            p.setdefault("capacity", []).append(capacity)
            times = [json.loads(line)["step_ms"] for line in open(log)][10:]
            p["measured"].append(statistics.median(times))
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    print("cleave-sim --cluster %s against cleave-run (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=%s, %d cores, load %s), "
          "median step over %d rounds" % (args.cluster, args.blas_threads, os.cpu_count(), load, args.rounds))
    print("%-22s %5s %10s %10s %7s  %-30s %s" % (
        "configuration", "ranks", "predicted", "measured", "error", "rounds (ms)", "others' CPU"))
    for p in plans:
        errors = [a / b - 1 for a, b in zip(p["predicted"], p["measured"])]
        print("%-22s %5d %7.2f ms %7.2f ms %+6.1f%%  %-30s %s" % (
            p["name"], p["ranks"], statistics.median(p["predicted"]), statistics.median(p["measured"]),
            100 * statistics.median(errors), "/".join("%.2f" % x for x in p["measured"]),
            "/".join("%.0f%%" % (100 * b) for b in p["others"])))
    if args.calibrate:
        print("Each round against its own calibration (predicted / measured ms, error):")
        for p in plans:
            print("%-22s %5d %s" % (p["name"], p["ranks"], "  ".join(
                "%.2f/%.2f %+.0f%%" % (a, b, 100 * (a / b - 1)) for a, b in zip(p["predicted"], p["measured"]))))
    print("With the GEMM capacity measured just before each run (cores' worth: %s):" %
          "/".join("%.2f" % c for p in plans for c in p["capacity"]))
    for p in plans:
        errors = [a / b - 1 for a, b in zip(p["now"], p["measured"])]
        print("%-22s %5d predicted %-30s error %s, median %+.1f%%" % (
            p["name"], p["ranks"], "/".join("%.2f" % x for x in p["now"]),
            "/".join("%+.0f%%" % (100 * e) for e in errors), 100 * statistics.median(errors)))

if __name__ == "__main__":
    main()
