#!/usr/bin/env python3
"""Measures this machine's figures for the `cpu` cluster preset of cleave-sim.

Prints each measurement and, last, a cluster description (JSON, starting
from the `cpu` preset) with the fitted figures, for
lib/Simulate/Cluster.cpp's cpuPreset or `cleave-sim --cluster FILE`:

  * GEMM: cleave-run's own GEMM commands (oneDNN's sgemm where
    libdnnl.so.2 loads, else OpenBLAS's: whichever the runtime calls, whose
    speeds differ by up to 5x on a CPU the OpenBLAS build does not know),
    timed alone by cleave-run --profile-json at shapes from 32x64x64 to
    1024^3, one thread (a device of the preset is one core running one
    rank, and ranks run with OPENBLAS_NUM_THREADS=1); fitted to
    the cost model's curve t = flops / (peak * flops / (flops + half)) +
    overhead, i.e. t = (flops + half) / peak + overhead, a straight line in
    flops (least squares).
  * Memory bandwidth: numpy's copy of 256 MiB (bytes read + written / time).
  * Fused kernels, each timed alone by cleave-run --profile-json in a
    program compiled by cleave-compile:
      - products of two vectors (three streams) of 16 floats (the
        per-kernel overhead), of 48 KiB to 768 KiB moved (inside the
        core's L2 cache, read from sysfs: cache_mib; the bandwidth from
        cache, cache_gbps, fitted by least squares) and of 192 MiB (from
        memory: the share of the copy bandwidth a generated kernel
        reaches, kernel_bandwidth_fraction);
      - state copies of 256 B to 64 KiB, each of a value just written
        (the runtime's memmove: copy_gbps, bytes read + written, fitted
        by least squares after the smallest one's time);
      - a sum over the inner dimension of [8, 16384] floats, one chain of
        additions per row (serial_gadds, after its bytes);
      - exp, tanh and erf of 32768 floats (transcendental_gops: functions
        per second, after their bytes);
      - a transpose of [128, 256] and a gather of 512 rows of a [256, 64]
        table (permuted_gbps; a transpose that keeps rows of 64 bytes or
        more together streams, and the plan does not count it permuted).
  * Capacity: cores' worth of GEMM throughput when every core runs a
    512^3 GEMM program in cleave-run at once (each in its own process),
    over one alone
    (compute_capacity), and the same for the softmax chain run by
    cleave-run (kernel_capacity): what ranks computing at once get
    together.
  * Collectives: programs of 16 chained all_reduces against one (the
    difference is 15 all-reduces, without a run's fixed cost) on 2 ranks
    of the local communicator at 4 KiB (the latency) and 4 MiB (the
    bandwidth: ring all-reduce sends 2(n-1)/n S); mean times, not the
    fastest: a step meets the scheduler's delays too.
  * Ranks as threads on fewer cores: the same chains at 4 KiB over the
    2-rank axis of a mesh of twice as many ranks as cores. Their time is
    printed; what the simulator takes is the CPU time (user + system, from
    getrusage) each rank's thread spends in one all-reduce, less its bytes
    at the link's bandwidth (shared_latency_us: a thread's time per
    message step). There the simulator runs a blocking collective as work
    of its members' threads, sharing the cores with the other ranks'
    kernels, and a member waiting for its peer leaves its core to others:
    on 4 threads and 2 cores the cores stay busy through a training step
    (cleave-run's user + system time is 96% of twice its wall time for
    the small GPT at dp=2 x tp=2), so a rendezvous's wait is other
    ranks' work, not idle time.
  * A check, not fitted: a program of 32 rounds of a GEMM ([128, 128] by
    [128, 64], a rank's share of a tensor-parallel layer) and an
    all-reduce of its 32 KiB result over 2-rank groups, on twice as many
    ranks as cores, run and simulated with the figures above.
  switch_overhead_us (compute a rank loses after blocking in a Recv or a
  Wait while threads outnumber cores) is not measured: 0.
Everything runs with OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 (a
device is one core). Every measured run lasts --seconds at least: on the
development machine (2 cores of an Intel Xeon VM, 12-05) the host's speed
swings by up to a fifth over about 0.7 s (the small GPT's one-rank step
goes from 1.42 to 2.0 ms and back, steadily), so a run of 0.1 s measures
one phase of it.

    calibrate_cpu.py [--build build] [--work /tmp/cal] [--seconds 1.5] [--runs 3]
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

# One core per rank: the GEMM library's threads and the kernels' OpenMP
# team (cleave-run leaves an OMP_NUM_THREADS it is given).
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def args_():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--work", default=None)
    p.add_argument("--seconds", type=float, default=1.5,
                   help="the least time each measured run of a program lasts (its --repeat is set from a "
                        "first run of 20): the host's speed swings by up to a fifth over about 0.7 s")
    p.add_argument("--runs", type=int, default=3,
                   help="runs of each multi-rank measurement (collectives, the check); the median is kept")
    return p.parse_args()


ARGS = args_()
BIN = os.path.join(ARGS.build, "bin")
WORK = ARGS.work or tempfile.mkdtemp(prefix="cleave-cal-")
os.makedirs(WORK, exist_ok=True)


def profile_gemms(shapes):
    """Seconds of each GEMM [M, K] x [K, N] of `shapes`, timed alone by
    cleave-run --profile-json (mean over repeat_for's runs): the library
    and the call the runtime makes. Each shape is a program of its own, so
    that its operands are where a run of the same GEMM leaves them (in
    cache when they fit), not evicted by a larger product before it: a
    32x64x64 GEMM run after a 1024^3 one takes 4x as long."""
    seconds = []
    for M, N, K in shapes:
        seconds += profile_program(
            f"gemm_{M}x{N}x{K}", [("a", [M, K]), ("b", [K, N])],
            [f"%y = cleave.contract %a, %b batch = [] x [] contract = [1] x [0] : "
             f"{tensor([M, K])}, {tensor([K, N])} -> {tensor([M, N])}"],
            [("%y", [M, N])], kind="gemm")
    return seconds


REPEATS = {}


def repeat_for(plan, inputs, ranks=1):
    """Runs of `plan` that last --seconds at least, from the mean of a
    first run of 20 (kept per plan and rank count)."""
    key = (plan, ranks)
    if key not in REPEATS:
        first = run_stats(plan, inputs, ranks, mean=True, repeat=20)
        REPEATS[key] = max(20, int(ARGS.seconds / first) + 1)
    return REPEATS[key]


def run_stats(plan, inputs, ranks=1, mean=False, repeat=None):
    """The min or mean run time of `plan` over `repeat` runs (repeat_for's
    unless given)."""
    cmd = [os.path.join(BIN, "cleave-run"), plan, *inputs, "--no-output", "--print-stats",
           "--warmup", "3", "--repeat", str(repeat or repeat_for(plan, inputs, ranks))]
    if ranks > 1:
        cmd += ["--ranks", str(ranks)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    m = re.search(r"run time: min ([0-9.]+) ms, mean ([0-9.]+) ms", out.stdout + out.stderr)
    return float(m.group(2 if mean else 1)) / 1e3


def compile_mlir(name, text):
    src = os.path.join(WORK, name + ".mlir")
    with open(src, "w") as f:
        f.write(text)
    plan = os.path.join(WORK, name + ".cleave")
    subprocess.run([os.path.join(BIN, "cleave-compile"), src, "-o", plan], check=True,
                   capture_output=True)
    return plan


def concurrent_plan(plan, inputs, copies):
    """Mean run time of `plan` in each of `copies` cleave-run processes
    started at once."""
    cmd = [os.path.join(BIN, "cleave-run"), plan, *inputs, "--no-output", "--print-stats",
           "--warmup", "3", "--repeat", str(repeat_for(plan, inputs))]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(copies)]
    return [float(re.search(r"mean ([0-9.]+) ms", p.communicate()[0]).group(1)) / 1e3 for p in procs]


def l2_bytes():
    """The per-core L2 cache's size (sysfs), 1 MiB if unknown."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(base)):
            d = os.path.join(base, index)
            if open(os.path.join(d, "level")).read().strip() == "2":
                size = open(os.path.join(d, "size")).read().strip()
                unit = {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 1)
                return int(size.rstrip("KM")) * unit
    except OSError:
        pass
    return 1 << 20


def tensor(shape):
    return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"


def profile_program(name, inputs, body, results, kind="kernel"):
    """Seconds of each command of `kind` of a one-function program, timed
    alone by cleave-run --profile-json (mean over repeat_for's runs):
    `inputs` [(name, shape)] (filled with 1.0001), `body` lines of cleave
    ops, `results` [(value, shape)]."""
    args = ", ".join(f'%{n}: {tensor(s)} {{cleave.name = "{n}"}}' for n, s in inputs)
    types = ", ".join(tensor(s) for _, s in results)
    text = (f"func.func @main({args}) -> ({types}) {{\n" + "\n".join("  " + l for l in body)
            + f"\n  return {', '.join(v for v, _ in results)} : {types}\n}}\n")
    plan = compile_mlir(name, text)
    paths = []
    for n, shape in inputs:
        path = os.path.join(WORK, f"{name}_{n}.npy")
        np.save(path, np.full(shape, 1.0001, np.float32))
        paths.append(path)
    return profile_plan(plan, paths, kind, len(body))


def profile_plan(plan, inputs, kind, count):
    """Seconds of each of the `count` commands of `kind` of `plan`, timed
    alone by cleave-run --profile-json (mean over repeat_for's runs); the
    runtime's device line is kept in profile_plan.device."""
    profile = plan + ".json"
    out = subprocess.run([os.path.join(BIN, "cleave-run"), plan, *inputs, "--no-output", "--warmup", "3",
                          "--repeat", str(repeat_for(plan, inputs)), "--profile-json", profile,
                          "--print-stats"], check=True, capture_output=True, text=True)
    device = re.search(r"^device: (.*)$", out.stdout, re.M)
    profile_plan.device = device.group(1) if device else "unknown"
    seconds = [c["ms"] / 1e3 for c in json.load(open(profile))["commands"] if c["kind"] == kind]
    if len(seconds) != count:
        sys.exit(f"calibration program {plan}: {len(seconds)} {kind} commands, expected {count}")
    return seconds


PRODUCT_SIZES = [16, 4096, 16384, 32768, 65536]
TRANSCENDENTALS = ["exp", "tanh", "erf"]
UNARY_N = 32768  # elements of the transcendental kernels


def kernel_profile():
    """The kernels' measurements, each kernel alone in its command:
    products : [(bytes, s)] of a * b over PRODUCT_SIZES floats (two
               operands and the result, just written: in cache), then one
               of 16 Mi floats (in a program of its own: it empties the
               caches), from memory;
    sum      : (adds, bytes, s) of a sum over the inner dimension of
               [8, 16384] floats (one chain of additions per row);
    unary    : (functions, bytes, s) of exp, tanh and erf over UNARY_N floats;
    permuted : (bytes, s) of a transpose of [128, 256] and a gather of 512
               rows of a [256, 64] table."""
    inputs, body, results = [], [], []
    for i, n in enumerate(PRODUCT_SIZES):
        inputs += [(f"a{i}", [n]), (f"b{i}", [n])]
        body.append(f"%y{i} = cleave.binary mul %a{i}, %b{i} : {tensor([n])}")
        results.append((f"%y{i}", [n]))
    inputs.append(("r", [8, 16384]))
    body.append(f"%s = cleave.reduce sum %r dims = [1] : {tensor([8, 16384])} -> {tensor([8])}")
    results.append(("%s", [8]))
    for f in TRANSCENDENTALS:
        inputs.append((f"u{f}", [UNARY_N]))
        body.append(f"%{f} = cleave.unary {f} %u{f} : {tensor([UNARY_N])}")
        results.append((f"%{f}", [UNARY_N]))
    inputs += [("t2", [128, 256])]
    body += [f"%t2t = cleave.transpose %t2 perm = [1, 0] : {tensor([128, 256])} -> {tensor([256, 128])}"]
    results += [("%t2t", [256, 128])]
    seconds = profile_program("kernels", inputs, body, results)
    big = profile_program("kernels_memory", [("a", [16 << 20]), ("b", [16 << 20])],
                          [f"%y = cleave.binary mul %a, %b : {tensor([16 << 20])}"], [("%y", [16 << 20])])
    gather = profile_gather()
    k = len(PRODUCT_SIZES)
    products = [(12 * n, t) for n, t in zip(PRODUCT_SIZES + [16 << 20], seconds[:k] + big)]
    total = sum((8 * n for n in [UNARY_N] * len(TRANSCENDENTALS)))
    unary = (UNARY_N * len(TRANSCENDENTALS), total, sum(seconds[k + 1:k + 1 + len(TRANSCENDENTALS)]))
    transposes = seconds[k + 1 + len(TRANSCENDENTALS):]
    permuted = (2 * 4 * 128 * 256 + gather[0], sum(transposes) + gather[1])
    return products, (8 * 16384, 8 * 16384 * 4 + 32, seconds[k]), unary, permuted


COPY_SIZES = [64, 1024, 4096, 16384]  # floats


def profile_copies():
    """[(bytes, s)] of the state copies of a program whose state arguments
    of COPY_SIZES floats are each updated by a product (the copy's source
    was just written, as an optimizer's update is): the runtime's copies
    (memmove), timed alone by cleave-run --profile-json."""
    args, body, types, returns = [], [], [], []
    for i, n in enumerate(COPY_SIZES):
        args.append(f'%s{i}: {tensor([n])} {{cleave.name = "s{i}", cleave.state}}')
        body.append(f"  %y{i} = cleave.binary mul %s{i}, %s{i} : {tensor([n])}")
        types.append(f"{tensor([n])} {{cleave.updates = {i} : i64}}")
        returns.append(f"%y{i}")
    text = (f"func.func @main({', '.join(args)}) -> ({', '.join(types)}) {{\n" + "\n".join(body)
            + f"\n  return {', '.join(returns)} : {', '.join(tensor([n]) for n in COPY_SIZES)}\n}}\n")
    plan = compile_mlir("copies", text)
    paths = []
    for i, n in enumerate(COPY_SIZES):
        path = os.path.join(WORK, f"copies_s{i}.npy")
        np.save(path, np.ones(n, np.float32))
        paths.append(path)
    seconds = profile_plan(plan, paths, "copy", len(COPY_SIZES))
    return [(4 * n, t) for n, t in zip(COPY_SIZES, seconds)]


def profile_gather():
    """(bytes, s) of a gather of 512 rows of a [256, 64] float table (the
    rows read and written; an embedding lookup)."""
    text = ('func.func @main(%t: tensor<256x64xf32> {cleave.name = "t"}, '
            '%i: tensor<512xi64> {cleave.name = "i"}) -> tensor<512x64xf32> {\n'
            '  %g = cleave.gather %t, %i axis = 0 : (tensor<256x64xf32>, tensor<512xi64>) -> tensor<512x64xf32>\n'
            '  return %g : tensor<512x64xf32>\n}\n')
    plan = compile_mlir("gather", text)
    t = os.path.join(WORK, "gather_t.npy")
    i = os.path.join(WORK, "gather_i.npy")
    np.save(t, np.ones((256, 64), np.float32))
    np.save(i, np.random.default_rng(0).integers(0, 256, 512).astype(np.int64))
    return 2 * 512 * 64 * 4, sum(profile_plan(plan, [t, i], "kernel", 1))


def gemm_program(n, chain=4):
    """A plan of `chain` GEMMs [n, n] x [n, n], each of the previous
    product (scaled back by the all-1/n operand), and its inputs."""
    t = tensor([n, n])
    body = "".join(f"    %{i + 1} = cleave.contract %{i}, %w batch = [] x [] contract = [1] x [0] : {t}, {t} -> {t}\n"
                   for i in range(chain))
    text = (f'func.func @main(%0: {t} {{cleave.name = "x"}}, %w: {t} {{cleave.name = "w"}}) -> {t} {{\n{body}'
            f"    return %{chain} : {t}\n}}\n")
    plan = compile_mlir(f"gemm_{n}", text)
    x, w = os.path.join(WORK, f"gemm_{n}_x.npy"), os.path.join(WORK, f"gemm_{n}_w.npy")
    np.save(x, np.ones((n, n), np.float32))
    np.save(w, np.full((n, n), 1.0 / n, np.float32))
    return plan, [x, w]


def softmax_chain(rows, cols, n=32):
    t = f"tensor<{rows}x{cols}xf32>"
    body = "".join(f"    %{i + 1} = cleave.softmax %{i} dim = 1 : {t}\n" for i in range(n))
    text = (f"func.func @main(%0: {t} {{cleave.name = \"x\"}}) -> {t} {{\n{body}"
            f"    return %{n} : {t}\n}}\n")
    plan = compile_mlir(f"softmax_{rows}x{cols}", text)
    x = os.path.join(WORK, f"x_{rows}x{cols}.npy")
    np.save(x, np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
    return run_stats(plan, [x]) / n, rows * cols * 4 * 2, plan, x


def all_reduce_chain(elems, groups, n):
    """A plan of `n` all-reduces over the 2-rank axis r of a mesh of
    `groups` x 2 ranks, each of the previous one's result, and its input."""
    t = f"tensor<{elems}xf32>"
    x = os.path.join(WORK, f"ar_{elems}.npy")
    np.save(x, np.ones(elems, np.float32))
    body = "".join(f'    %x{i + 1} = cleave.all_reduce sum %x{i} over @mesh ["r"] : {t}\n'
                   for i in range(n))
    text = (f'module {{\n  cleave.mesh @mesh axes = ["g", "r"] shape = [{groups}, 2]\n'
            f'  func.func @main(%x0: {t} {{cleave.name = "x"}}) -> {t} {{\n{body}'
            f"    return %x{n} : {t}\n  }}\n}}\n")
    return compile_mlir(f"all_reduce_{groups}x{elems}_{n}", text), x


def all_reduce(elems, groups=1, chain=16):
    """Time of one all-reduce over the 2-rank axis r of a mesh of `groups`
    x 2 ranks: a program of `chain` all-reduces, each of the previous
    one's result, against one of a single all-reduce (the difference leaves
    out what a run costs besides its commands)."""
    times = []
    for n in (1, chain):
        plan, x = all_reduce_chain(elems, groups, n)
        times.append(median_of_runs(plan, [x], 2 * groups))
    return max(times[1] - times[0], 1e-9) / (chain - 1)


def all_reduce_cpu(elems, groups, chain=16):
    """The CPU time one rank's thread spends in one all-reduce over the
    2-rank axis r of a mesh of `groups` x 2 ranks (user + system time of
    cleave-run, from getrusage): programs of `chain` all-reduces against
    one, each run repeat_for's times, the median over --runs."""
    cpu = []
    for n in (1, chain):
        plan, x = all_reduce_chain(elems, groups, n)
        repeat = repeat_for(plan, [x], 2 * groups)
        cmd = [os.path.join(BIN, "cleave-run"), plan, x, "--no-output", "--warmup", "3",
               "--repeat", str(repeat), "--ranks", str(2 * groups)]
        runs = []
        for _ in range(ARGS.runs):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, check=True, capture_output=True)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            runs.append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / repeat)
        cpu.append(statistics.median(runs))
    return max(cpu[1] - cpu[0], 1e-9) / ((chain - 1) * 2 * groups)


def median_of_runs(plan, inputs, ranks):
    """The median over --runs runs of each run's mean time: ranks that are
    threads on shared cores meet the host's scheduler, and one run's mean
    moves by 2-5x from run to run."""
    return statistics.median(run_stats(plan, inputs, ranks, mean=True) for _ in range(ARGS.runs))


def switch_program(groups, rounds=32):
    w, t = "tensor<128x128xf32>", "tensor<128x64xf32>"
    body = []
    for i in range(rounds):
        body.append(f"    %y{i} = cleave.contract %w, %x{i} batch = [] x [] contract = [1] x [0] : {w}, {t} -> {t}")
        body.append(f'    %x{i + 1} = cleave.all_reduce sum %y{i} over @mesh ["r"] : {t}')
    text = (f'module {{\n  cleave.mesh @mesh axes = ["g", "r"] shape = [{groups}, 2]\n'
            f'  func.func @main(%w: {w} {{cleave.name = "w"}}, %x0: {t} {{cleave.name = "x"}}) -> {t} {{\n'
            + "\n".join(body) + f"\n    return %x{rounds} : {t}\n  }}\n}}\n")
    plan = compile_mlir("switch", text)
    # x stays bounded: each round multiplies by 2 (the all-reduce) and by
    # w = 1/256 summed over 128.
    wpath = os.path.join(WORK, "switch_w.npy")
    np.save(wpath, np.full((128, 128), 1 / 256, np.float32))
    x = os.path.join(WORK, "switch_x.npy")
    np.save(x, np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32))
    return plan, [wpath, x]


def main():
    shapes = [(32, 64, 64), (128, 64, 64), (128, 192, 64), (128, 256, 64), (128, 64, 256),
              (256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
    gemm_seconds = profile_gemms(shapes)
    print(f"cleave-run device: {profile_plan.device}; OPENBLAS_NUM_THREADS=1, cores: {os.cpu_count()}")
    xs, ys = [], []
    print("GEMM (M N K): seconds, GFLOP/s")
    for (M, N, K), t in zip(shapes, gemm_seconds):
        f = 2.0 * M * N * K
        xs.append(f)
        ys.append(t)
        print(f"  {M}x{N}x{K}: {t * 1e6:9.1f} us {f / t / 1e9:7.1f}")
    # t = flops / peak + (half / peak + overhead): fit slope and intercept,
    # weighting each shape by 1/t so that small GEMMs count.
    w = 1 / np.array(ys)
    A = np.stack([np.array(xs), np.ones(len(xs))], 1) * w[:, None]
    slope, intercept = np.linalg.lstsq(A, np.array(ys) * w, rcond=None)[0]
    peak = 1 / slope
    overhead = 1e-6
    half = max(0.0, (intercept - overhead) * peak)
    print(f"  fit: peak {peak / 1e9:.1f} GFLOP/s, half at {half / 1e6:.2f} MFLOP, overhead {overhead * 1e6:.1f} us")

    src = np.ones(64 << 20, np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    bandwidth = 2 * src.nbytes / best
    print(f"copy of 256 MiB: {bandwidth / 1e9:.1f} GB/s (read + written)")

    products, (adds, sum_bytes, sum_t), (functions, unary_bytes, unary_t), (perm_bytes, perm_t) = \
        kernel_profile()
    cache = l2_bytes()
    small = products[0][1]
    cached = [(b, t) for b, t in products[1:] if b <= cache]
    # t = overhead + bytes / cache bandwidth over the cached sizes.
    cache_bw = sum(b * b for b, _ in cached) / sum(b * (t - small) for b, t in cached)
    big_bytes, big_t = products[-1]
    kernel_bw = big_bytes / max(big_t - small, 1e-9)
    fraction = min(1.0, kernel_bw / bandwidth)
    memory = max(bandwidth, kernel_bw)
    serial = adds / max(sum_t - small - sum_bytes / cache_bw, 1e-9)
    print("kernels (a * b): " + ", ".join(f"{b} B {t * 1e6:.2f} us" for b, t in products))
    print(f"  overhead {small * 1e6:.2f} us; up to the {cache >> 10} KiB L2: {cache_bw / 1e9:.1f} GB/s; "
          f"from memory {kernel_bw / 1e9:.1f} GB/s, {fraction:.2f} of the copy bandwidth")
    print(f"sum over [8, 16384]: {sum_t * 1e6:.1f} us -> {serial / 1e9:.2f} G serial additions/s")
    n_unary = len(TRANSCENDENTALS)
    transcendental = functions / max(unary_t - n_unary * (small + unary_bytes / n_unary / cache_bw), 1e-9)
    print(f"{', '.join(TRANSCENDENTALS)} over {UNARY_N} floats: {unary_t * 1e6:.1f} us together -> "
          f"{transcendental / 1e9:.2f} G functions/s")
    permuted = perm_bytes / max(perm_t - 2 * small, 1e-9)
    print(f"a transpose and a gather: {perm_bytes} B in {perm_t * 1e6:.1f} us -> {permuted / 1e9:.1f} GB/s permuted")
    copies = profile_copies()
    # t = overhead + 2 bytes / copy bandwidth (read + written), from the
    # smallest copy's time.
    copy_bw = (sum(4 * b * b for b, _ in copies[1:])
               / sum(2 * b * max(t - copies[0][1], 1e-12) for b, t in copies[1:]))
    print("copies (memmove): " + ", ".join(f"{b} B {t * 1e6:.2f} us" for b, t in copies)
          + f" -> {copy_bw / 1e9:.1f} GB/s read + written")
    _, _, chain, chain_x = softmax_chain(256, 1024)

    cores = os.cpu_count()
    gemm, gemm_inputs = gemm_program(512)
    gemm_flops = 4 * 2 * 512 ** 3  # a run: four GEMMs
    alone = concurrent_plan(gemm, gemm_inputs, 1)[0]
    together = concurrent_plan(gemm, gemm_inputs, cores)
    devices = cores * alone / (sum(together) / len(together))
    print(f"GEMM 512^3: {gemm_flops / alone / 1e9:.1f} GFLOP/s alone, "
          + ", ".join(f"{gemm_flops / x / 1e9:.1f}" for x in together)
          + f" with {cores} at once -> {devices:.2f} cores' worth")

    alone_k = concurrent_plan(chain, [chain_x], 1)[0]
    together_k = concurrent_plan(chain, [chain_x], cores)
    kernel_devices = cores * alone_k / (sum(together_k) / len(together_k))
    print(f"softmax chain: {alone_k * 1e3:.3f} ms alone, "
          + ", ".join(f"{x * 1e3:.3f}" for x in together_k)
          + f" ms with {cores} at once -> {kernel_devices:.2f} cores' worth")

    # A 4 KiB all-reduce is staged (one rendezvous: one message step, the
    # preset's one_shot_kib); a 4 MiB one is reduced in place, costed as
    # the ring: 2(n-1) steps and 2(n-1)/n S bytes.
    lat = all_reduce(1024)
    big = all_reduce(1 << 20)
    n = 2
    sent = 2 * (n - 1) / n * (4 << 20)
    latency = lat
    link_bw = sent / max(big - 2 * (n - 1) * latency, 1e-9)
    print(f"all_reduce on 2 ranks: {lat * 1e6:.1f} us at 4 KiB, {big * 1e6:.1f} us at 4 MiB "
          f"-> latency {latency * 1e6:.1f} us per step, {link_bw / 1e9:.2f} GB/s per rank")
    shared = all_reduce(1024, groups=cores)
    # Ranks as threads on fewer cores: a blocking collective is work of its
    # members' threads (the simulator shares the cores between it and the
    # other ranks' kernels), its step the thread's CPU time less the bytes'.
    shared_cpu = all_reduce_cpu(1024, groups=cores)
    shared_step = max(shared_cpu - 4096 / link_bw, 0.0)
    print(f"all_reduce over 2 of {2 * cores} ranks at 4 KiB: {shared * 1e6:.1f} us, of which each "
          f"thread computes {shared_cpu * 1e6:.1f} us -> {shared_step * 1e6:.1f} us per message step")

    # A check of the figures on a program they were not measured on: GEMMs
    # and all-reduces in turn on twice as many ranks as cores.
    plan, inputs = switch_program(cores)
    runs = sorted(run_stats(plan, inputs, 2 * cores, mean=True) for _ in range(ARGS.runs))
    measured = statistics.median(runs)
    quartiles = statistics.quantiles(runs, n=4) if len(runs) > 1 else [measured] * 3
    partial = {
        "preset": "cpu", "gpus_per_node": cores, "cores_per_node": cores,
        "compute_capacity": round(devices, 3), "kernel_capacity": round(kernel_devices, 3),
        "gpu": {"peak_tflops": {"fp32": peak / 1e12}, "memory_gbps": kernel_bw / 1e9,
                "kernel_bandwidth_fraction": 1.0, "kernel_overhead_us": small * 1e6,
                "cache_mib": cache / (1 << 20), "cache_gbps": cache_bw / 1e9, "copy_gbps": copy_bw / 1e9,
                "serial_gadds": serial / 1e9, "attention_tile_gemms": True,
                "permuted_gbps": permuted / 1e9, "transcendental_gops": transcendental / 1e9,
                "gemm_efficiency": {"fp32": {"max": 1.0, "half_gflops": half / 1e9}},
                "gemm_overhead_us": overhead * 1e6, "switch_overhead_us": 0},
        "intra_node": {"gbps": link_bw / 1e9, "latency_us": latency * 1e6,
                       "shared_latency_us": shared_step * 1e6, "one_shot_kib": 64},
    }
    path = os.path.join(WORK, "partial.json")
    with open(path, "w") as f:
        json.dump(partial, f)
    out = subprocess.run([os.path.join(BIN, "cleave-sim"), plan, "--cluster", path], check=True,
                         capture_output=True, text=True).stdout
    simulated = float(re.search(r"step time ([0-9.]+) ms", out).group(1)) / 1e3
    print(f"check, GEMM and all-reduce program on {2 * cores} ranks: {measured * 1e3:.3f} ms run "
          f"(interquartile range {(quartiles[2] - quartiles[0]) * 1e3:.3f} ms), {simulated * 1e3:.3f} ms "
          f"simulated ({100 * (simulated / measured - 1):+.0f}%)")

    desc = {
        "preset": "cpu",
        "gpus_per_node": cores,
        "cores_per_node": cores,
        "compute_capacity": round(devices, 3),
        "kernel_capacity": round(kernel_devices, 3),
        "gpu": {
            "peak_tflops": {"fp32": round(peak / 1e12, 5)},
            "gemm_efficiency": {"fp32": {"max": 1.0, "half_gflops": round(half / 1e9, 6)}},
            "memory_gbps": round(memory / 1e9, 2),
            "kernel_bandwidth_fraction": round(fraction, 3),
            "cache_mib": round(cache / (1 << 20), 3),
            "cache_gbps": round(cache_bw / 1e9, 1),
            "copy_gbps": round(copy_bw / 1e9, 1),
            "serial_gadds": round(serial / 1e9, 3),
            "permuted_gbps": round(permuted / 1e9, 2),
            "transcendental_gops": round(transcendental / 1e9, 3),
            "attention_tile_gemms": True,
            "kernel_overhead_us": round(small * 1e6, 2),
            "gemm_overhead_us": round(overhead * 1e6, 2),
            "switch_overhead_us": 0,
        },
        "intra_node": {"gbps": round(link_bw / 1e9, 2), "latency_us": round(latency * 1e6, 2),
                       "shared_latency_us": round(shared_step * 1e6, 2), "one_shot_kib": 64},
    }
    print(json.dumps(desc, indent=2))


if __name__ == "__main__":
    main()
