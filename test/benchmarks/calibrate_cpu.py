#!/usr/bin/env python3
"""Measures this machine's figures for the `cpu` cluster preset of cleave-sim.

Prints each measurement and, last, a cluster description (JSON, starting
from the `cpu` preset) with the fitted figures, for
lib/Simulate/Cluster.cpp's cpuPreset or `cleave-sim --cluster FILE`:

  * GEMM: cblas_sgemm of the OpenBLAS library cleave-run links (through
    ctypes, one thread: a device of the preset is one core running one
    rank, and ranks run with OPENBLAS_NUM_THREADS=1) at
    shapes from 32x64x64 to 1024^3, fastest of --repeat calls; fitted to
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
      - a sum over the inner dimension of [8, 16384] floats, one chain of
        additions per row (serial_gadds, after its bytes);
      - exp, tanh and erf of 32768 floats (transcendental_gops: functions
        per second, after their bytes);
      - transposes of [32, 64, 32] (outer two dimensions) and [128, 256],
        and a gather of 512 rows of a [256, 64] table (permuted_gbps).
  * Capacity: cores' worth of GEMM throughput when every core runs an
    sgemm at once (each in its own process), over one alone
    (compute_capacity), and the same for the softmax chain run by
    cleave-run (kernel_capacity): what ranks computing at once get
    together.
  * Switches: a program of 32 rounds of a GEMM ([128, 128] by [128, 64],
    a rank's share of a tensor-parallel layer) and an all-reduce of its
    32 KiB result over 2-rank groups, on twice as many ranks as cores,
    timed, and simulated by cleave-sim with the figures above (no switch
    cost; GEMMs are what the cost model knows best): what the run takes
    beyond the simulation (when more than the runs' interquartile range),
    per blocking all-reduce, is the compute a rank loses each time it
    blocks while threads outnumber cores (switch_overhead_us).
  * Collectives: programs of 16 chained all_reduces against one (the
    difference is 15 all-reduces, without a run's fixed cost) on 2 ranks
    of the local communicator at 4 KiB (the latency) and 4 MiB (the
    bandwidth: ring all-reduce sends 2(n-1)/n S), and at 4 KiB over the
    2-rank axis of a mesh of twice as many ranks as cores
    (shared_latency_us: a peer must be scheduled first). Mean times, not the fastest: a step meets the
    scheduler's delays too.
Everything runs with OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 (a
device is one core).

    calibrate_cpu.py [--build build] [--work /tmp/cal] [--repeat 20] [--runs 7]
"""

import argparse
import ctypes
import json
import os
import re
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
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--runs", type=int, default=7,
                   help="runs of each multi-rank measurement (collectives, switches); the median is kept")
    return p.parse_args()


ARGS = args_()
BIN = os.path.join(ARGS.build, "bin")
WORK = ARGS.work or tempfile.mkdtemp(prefix="cleave-cal-")
os.makedirs(WORK, exist_ok=True)


def openblas():
    out = subprocess.run(["ldd", os.path.join(BIN, "cleave-run")], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "openblas" in line and "=>" in line:
            lib = ctypes.CDLL(line.split("=>")[1].split("(")[0].strip())
            f = lib.cblas_sgemm
            P, I, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
            f.argtypes = [I, I, I, I, I, I, F, P, I, P, I, F, P, I]
            return lib, f, line.split("=>")[1].split("(")[0].strip()
    sys.exit("cleave-run links no OpenBLAS")


def time_gemm(sgemm, M, N, K):
    a = np.ones((M, K), np.float32)
    b = np.ones((K, N), np.float32)
    c = np.zeros((M, N), np.float32)
    args = (101, 111, 111, M, N, K, 1.0, a.ctypes.data, K, b.ctypes.data, N, 0.0, c.ctypes.data, N)
    for _ in range(3):
        sgemm(*args)
    best = float("inf")
    for _ in range(ARGS.repeat):
        t0 = time.perf_counter()
        sgemm(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def run_stats(plan, inputs, ranks=1, mean=False):
    cmd = [os.path.join(BIN, "cleave-run"), plan, *inputs, "--no-output", "--print-stats",
           "--warmup", "3", "--repeat", str(ARGS.repeat)]
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
           "--warmup", "3", "--repeat", str(10 * ARGS.repeat)]
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


def profile_program(name, inputs, body, results):
    """Seconds of each kernel of a one-function program, timed alone by
    cleave-run --profile-json: `inputs` [(name, shape)] (filled with
    1.0001), `body` lines of cleave ops, `results` [(value, shape)]."""
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
    profile = os.path.join(WORK, name + ".json")
    subprocess.run([os.path.join(BIN, "cleave-run"), plan, *paths, "--no-output", "--warmup", "3",
                    "--repeat", str(10 * ARGS.repeat), "--profile-json", profile],
                   check=True, capture_output=True)
    seconds = [c["ms"] / 1e3 for c in json.load(open(profile))["commands"] if c["kind"] == "kernel"]
    if len(seconds) != len(body):
        sys.exit(f"calibration program {name}: {len(seconds)} kernels for {len(body)} ops")
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
    permuted : (bytes, s) of transposes of [32, 64, 32] (outer two
               dimensions) and [128, 256], and a gather of 512 rows of a
               [256, 64] table."""
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
    inputs += [("t3", [32, 64, 32]), ("t2", [128, 256])]
    body += [f"%t3t = cleave.transpose %t3 perm = [1, 0, 2] : {tensor([32, 64, 32])} -> {tensor([64, 32, 32])}",
             f"%t2t = cleave.transpose %t2 perm = [1, 0] : {tensor([128, 256])} -> {tensor([256, 128])}"]
    results += [("%t3t", [64, 32, 32]), ("%t2t", [256, 128])]
    seconds = profile_program("kernels", inputs, body, results)
    big = profile_program("kernels_memory", [("a", [16 << 20]), ("b", [16 << 20])],
                          [f"%y = cleave.binary mul %a, %b : {tensor([16 << 20])}"], [("%y", [16 << 20])])
    gather = profile_gather()
    k = len(PRODUCT_SIZES)
    products = [(12 * n, t) for n, t in zip(PRODUCT_SIZES + [16 << 20], seconds[:k] + big)]
    total = sum((8 * n for n in [UNARY_N] * len(TRANSCENDENTALS)))
    unary = (UNARY_N * len(TRANSCENDENTALS), total, sum(seconds[k + 1:k + 1 + len(TRANSCENDENTALS)]))
    transposes = seconds[k + 1 + len(TRANSCENDENTALS):]
    permuted = (2 * 4 * (32 * 64 * 32 + 128 * 256) + gather[0], sum(transposes) + gather[1])
    return products, (8 * 16384, 8 * 16384 * 4 + 32, seconds[k]), unary, permuted


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
    profile = os.path.join(WORK, "gather.json")
    subprocess.run([os.path.join(BIN, "cleave-run"), plan, t, i, "--no-output", "--warmup", "3",
                    "--repeat", str(10 * ARGS.repeat), "--profile-json", profile],
                   check=True, capture_output=True)
    ms = [c["ms"] for c in json.load(open(profile))["commands"] if c["kind"] == "kernel"]
    return 2 * 512 * 64 * 4, sum(ms) / 1e3


def softmax_chain(rows, cols, n=32):
    t = f"tensor<{rows}x{cols}xf32>"
    body = "".join(f"    %{i + 1} = cleave.softmax %{i} dim = 1 : {t}\n" for i in range(n))
    text = (f"func.func @main(%0: {t} {{cleave.name = \"x\"}}) -> {t} {{\n{body}"
            f"    return %{n} : {t}\n}}\n")
    plan = compile_mlir(f"softmax_{rows}x{cols}", text)
    x = os.path.join(WORK, f"x_{rows}x{cols}.npy")
    np.save(x, np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
    return run_stats(plan, [x]) / n, rows * cols * 4 * 2, plan, x


def all_reduce(elems, groups=1, chain=16):
    """Time of one all-reduce over the 2-rank axis r of a mesh of `groups`
    x 2 ranks: a program of `chain` all-reduces, each of the previous
    one's result, against one of a single all-reduce (the difference leaves
    out what a run costs besides its commands)."""
    t = f"tensor<{elems}xf32>"
    x = os.path.join(WORK, f"ar_{elems}.npy")
    np.save(x, np.ones(elems, np.float32))
    times = []
    for n in (1, chain):
        body = "".join(f'    %x{i + 1} = cleave.all_reduce sum %x{i} over @mesh ["r"] : {t}\n'
                       for i in range(n))
        text = (f'module {{\n  cleave.mesh @mesh axes = ["g", "r"] shape = [{groups}, 2]\n'
                f'  func.func @main(%x0: {t} {{cleave.name = "x"}}) -> {t} {{\n{body}'
                f"    return %x{n} : {t}\n  }}\n}}\n")
        plan = compile_mlir(f"all_reduce_{groups}x{elems}_{n}", text)
        times.append(median_of_runs(plan, [x], 2 * groups))
    return max(times[1] - times[0], 1e-9) / (chain - 1)


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


SGEMM_ALONE = """
import ctypes, sys, time
import numpy as np
lib = ctypes.CDLL(sys.argv[1]); f = lib.cblas_sgemm
P, I, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
f.argtypes = [I, I, I, I, I, I, F, P, I, P, I, F, P, I]
n = 512
a = np.ones((n, n), np.float32); b = np.ones((n, n), np.float32); c = np.zeros((n, n), np.float32)
args = (101, 111, 111, n, n, n, 1.0, a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
f(*args)
t0 = time.perf_counter(); k = 0
while time.perf_counter() - t0 < 2.0:
    f(*args); k += 1
print(2.0 * n ** 3 * k / (time.perf_counter() - t0))
"""


def concurrent_gemm(path, copies):
    procs = [subprocess.Popen([sys.executable, "-c", SGEMM_ALONE, path], stdout=subprocess.PIPE, text=True)
             for _ in range(copies)]
    return [float(p.communicate()[0]) for p in procs]


def main():
    lib, sgemm, path = openblas()
    lib.openblas_get_num_threads.restype = ctypes.c_int
    print(f"OpenBLAS threads: {lib.openblas_get_num_threads()}, cores: {os.cpu_count()}")
    shapes = [(32, 64, 64), (128, 64, 64), (128, 192, 64), (128, 256, 64), (128, 64, 256),
              (256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
    xs, ys = [], []
    print("GEMM (M N K): seconds, GFLOP/s")
    for M, N, K in shapes:
        t = time_gemm(sgemm, M, N, K)
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
    permuted = perm_bytes / max(perm_t - 3 * small, 1e-9)
    print(f"transposes and a gather: {perm_bytes} B in {perm_t * 1e6:.1f} us -> {permuted / 1e9:.1f} GB/s permuted")
    _, _, chain, chain_x = softmax_chain(256, 1024)

    cores = os.cpu_count()
    alone = concurrent_gemm(path, 1)[0]
    together = concurrent_gemm(path, cores)
    devices = sum(together) / alone
    print(f"sgemm 512^3: {alone / 1e9:.1f} GFLOP/s alone, "
          + ", ".join(f"{x / 1e9:.1f}" for x in together)
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
    print(f"all_reduce over 2 of {2 * cores} ranks: {shared * 1e6:.1f} us at 4 KiB (one step)")

    # The switch cost: run the switch program, simulate it without one.
    plan, inputs = switch_program(cores)
    runs = sorted(run_stats(plan, inputs, 2 * cores, mean=True) for _ in range(ARGS.runs))
    measured = statistics.median(runs)
    quartiles = statistics.quantiles(runs, n=4) if len(runs) > 1 else [measured] * 3
    partial = {
        "preset": "cpu", "gpus_per_node": cores, "cores_per_node": cores,
        "compute_capacity": round(devices, 3), "kernel_capacity": round(kernel_devices, 3),
        "gpu": {"peak_tflops": {"fp32": peak / 1e12}, "memory_gbps": kernel_bw / 1e9,
                "kernel_bandwidth_fraction": 1.0, "kernel_overhead_us": small * 1e6,
                "cache_mib": cache / (1 << 20), "cache_gbps": cache_bw / 1e9,
                "serial_gadds": serial / 1e9, "attention_tile_gemms": True,
                "permuted_gbps": permuted / 1e9, "transcendental_gops": transcendental / 1e9,
                "gemm_efficiency": {"fp32": {"max": 1.0, "half_gflops": half / 1e9}},
                "gemm_overhead_us": overhead * 1e6, "switch_overhead_us": 0},
        "intra_node": {"gbps": link_bw / 1e9, "latency_us": latency * 1e6,
                       "shared_latency_us": shared * 1e6, "one_shot_kib": 64},
    }

    def simulate(switch_us):
        partial["gpu"]["switch_overhead_us"] = switch_us
        path = os.path.join(WORK, "partial.json")
        with open(path, "w") as f:
            json.dump(partial, f)
        out = subprocess.run([os.path.join(BIN, "cleave-sim"), plan, "--cluster", path], check=True,
                             capture_output=True, text=True).stdout
        return float(re.search(r"step time ([0-9.]+) ms", out).group(1)) / 1e3

    # The switch cost the simulator needs to match the run (it charges it
    # as compute, shared with the node's other ranks): bisection, the
    # simulated time growing with it.
    # Only a difference beyond the runs' spread (their interquartile range)
    # is fitted: the simulated time grows slowly with the switch cost where
    # ranks wait anyway, so noise would come out as tens of us.
    simulated = simulate(0)
    spread = quartiles[2] - quartiles[0]
    lo, hi = 0.0, 0.0
    if measured > simulated + spread:
        hi = 1.0
        while simulate(hi) < measured and hi < 1e4:
            hi *= 2
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if simulate(mid) < measured else (lo, mid)
    switch = (lo + hi) / 2 * 1e-6
    print(f"switch program on {2 * cores} ranks: {measured * 1e3:.3f} ms run (interquartile range "
          f"{spread * 1e3:.3f} ms), {simulated * 1e3:.3f} ms simulated without switches -> "
          f"{switch * 1e6:.1f} us per blocking all-reduce")

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
            "serial_gadds": round(serial / 1e9, 3),
            "permuted_gbps": round(permuted / 1e9, 2),
            "transcendental_gops": round(transcendental / 1e9, 3),
            "attention_tile_gemms": True,
            "kernel_overhead_us": round(small * 1e6, 2),
            "gemm_overhead_us": round(overhead * 1e6, 2),
            "switch_overhead_us": round(switch * 1e6, 1),
        },
        "intra_node": {"gbps": round(link_bw / 1e9, 2), "latency_us": round(latency * 1e6, 2),
                       "shared_latency_us": round(shared * 1e6, 2), "one_shot_kib": 64},
    }
    print(json.dumps(desc, indent=2))


if __name__ == "__main__":
    main()
