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
  * Fused kernels: a chain of 32 Softmax ops compiled by cleave-compile and
    timed by cleave-run --print-stats at [1, 16] (the per-kernel overhead)
    and [256, 1024] floats (the share of the copy bandwidth a generated
    kernel reaches, reading and writing 1 MiB).
  * Capacity: cores' worth of GEMM throughput when every core runs an
    sgemm at once (each in its own process), over one alone
    (compute_capacity), and the same for the softmax chain run by
    cleave-run (kernel_capacity): what ranks computing at once get
    together.
  * Switches: a program of 32 rounds of two softmaxes over [128, 512]
    floats and an all-reduce of the result over 2-rank groups, on twice
    as many ranks as cores, timed, and simulated by cleave-sim with the
    figures above (no switch cost): what the run takes beyond the
    simulation, per blocking all-reduce, is the compute a rank loses each
    time it blocks while threads outnumber cores (switch_overhead_us).
  * Collectives: a one-all_reduce program on 2 ranks of the local
    communicator at 4 KiB (the latency) and 4 MiB (the bandwidth: ring
    all-reduce sends 2(n-1)/n S), and at 4 KiB over the 2-rank axis of a
    mesh of twice as many ranks as cores (shared_latency_us: a peer must be
    scheduled first). Mean times, not the fastest: a step meets the
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


def softmax_chain(rows, cols, n=32):
    t = f"tensor<{rows}x{cols}xf32>"
    body = "".join(f"    %{i + 1} = cleave.softmax %{i} dim = 1 : {t}\n" for i in range(n))
    text = (f"func.func @main(%0: {t} {{cleave.name = \"x\"}}) -> {t} {{\n{body}"
            f"    return %{n} : {t}\n}}\n")
    plan = compile_mlir(f"softmax_{rows}x{cols}", text)
    x = os.path.join(WORK, f"x_{rows}x{cols}.npy")
    np.save(x, np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
    return run_stats(plan, [x]) / n, rows * cols * 4 * 2, plan, x


def all_reduce(elems, groups=1):
    """Mean time of an all-reduce over the 2-rank axis r of a mesh of
    `groups` x 2 ranks."""
    t = f"tensor<{elems}xf32>"
    text = (f'module {{\n  cleave.mesh @mesh axes = ["g", "r"] shape = [{groups}, 2]\n'
            f'  func.func @main(%x: {t} {{cleave.name = "x"}}) -> {t} {{\n'
            f'    %y = cleave.all_reduce sum %x over @mesh ["r"] : {t}\n'
            f"    return %y : {t}\n  }}\n}}\n")
    plan = compile_mlir(f"all_reduce_{groups}x{elems}", text)
    x = os.path.join(WORK, f"ar_{elems}.npy")
    np.save(x, np.ones(elems, np.float32))
    return median_of_runs(plan, [x], 2 * groups)


def median_of_runs(plan, inputs, ranks):
    """The median over --runs runs of each run's mean time: ranks that are
    threads on shared cores meet the host's scheduler, and one run's mean
    moves by 2-5x from run to run."""
    return statistics.median(run_stats(plan, inputs, ranks, mean=True) for _ in range(ARGS.runs))


def switch_program(groups, rounds=32):
    t = "tensor<128x512xf32>"
    body = []
    for i in range(rounds):
        body.append(f"    %a{i} = cleave.softmax %x{i} dim = 1 : {t}")
        body.append(f"    %b{i} = cleave.softmax %a{i} dim = 1 : {t}")
        body.append(f'    %x{i + 1} = cleave.all_reduce sum %b{i} over @mesh ["r"] : {t}')
    text = (f'module {{\n  cleave.mesh @mesh axes = ["g", "r"] shape = [{groups}, 2]\n'
            f'  func.func @main(%x0: {t} {{cleave.name = "x"}}) -> {t} {{\n' + "\n".join(body) +
            f"\n    return %x{rounds} : {t}\n  }}\n}}\n")
    plan = compile_mlir("switch", text)
    x = os.path.join(WORK, "switch_x.npy")
    np.save(x, np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32))
    return plan, x, rounds


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

    small, _, _, _ = softmax_chain(1, 16)
    large, moved, chain, chain_x = softmax_chain(256, 1024)
    fraction = min(1.0, moved / max(large - small, 1e-9) / bandwidth)
    memory = max(bandwidth, moved / max(large - small, 1e-9))
    print(f"kernels: {small * 1e6:.1f} us per kernel at 64 bytes, {large * 1e6:.1f} us at {moved} bytes "
          f"-> {moved / (large - small) / 1e9:.2f} GB/s, {fraction:.2f} of the copy bandwidth")

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

    lat = all_reduce(1024)
    big = all_reduce(1 << 20)
    n = 2
    sent = 2 * (n - 1) / n * (4 << 20)
    steps = 2 * (n - 1)
    latency = lat / steps
    link_bw = sent / max(big - lat, 1e-9)
    print(f"all_reduce on 2 ranks: {lat * 1e6:.1f} us at 4 KiB, {big * 1e6:.1f} us at 4 MiB "
          f"-> latency {latency * 1e6:.1f} us per step, {link_bw / 1e9:.2f} GB/s per rank")
    shared = all_reduce(1024, groups=cores)
    print(f"all_reduce over 2 of {2 * cores} ranks: {shared * 1e6:.1f} us at 4 KiB -> "
          f"{shared / steps * 1e6:.1f} us per step")

    # The switch cost: run the switch program, simulate it without one.
    plan, x, rounds = switch_program(cores)
    measured = median_of_runs(plan, [x], 2 * cores)
    partial = {
        "preset": "cpu", "gpus_per_node": cores, "cores_per_node": cores,
        "compute_capacity": round(devices, 3), "kernel_capacity": round(kernel_devices, 3),
        "gpu": {"peak_tflops": {"fp32": peak / 1e12}, "memory_gbps": moved / (large - small) / 1e9,
                "kernel_bandwidth_fraction": 1.0, "kernel_overhead_us": small * 1e6,
                "switch_overhead_us": 0},
        "intra_node": {"gbps": link_bw / 1e9, "latency_us": latency * 1e6,
                       "shared_latency_us": shared / steps * 1e6},
    }
    path = os.path.join(WORK, "partial.json")
    with open(path, "w") as f:
        json.dump(partial, f)
    out = subprocess.run([os.path.join(BIN, "cleave-sim"), plan, "--cluster", path], check=True,
                         capture_output=True, text=True).stdout
    simulated = float(re.search(r"step time ([0-9.]+) ms", out).group(1)) / 1e3
    switch = max(0.0, (measured - simulated) / rounds)
    print(f"switch program on {2 * cores} ranks: {measured * 1e3:.3f} ms run, {simulated * 1e3:.3f} ms "
          f"simulated without switches -> {switch * 1e6:.1f} us per blocking all-reduce")

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
            "kernel_overhead_us": round(small * 1e6, 2),
            "gemm_overhead_us": round(overhead * 1e6, 2),
            "switch_overhead_us": round(switch * 1e6, 1),
        },
        "intra_node": {"gbps": round(link_bw / 1e9, 2), "latency_us": round(latency * 1e6, 2),
                       "shared_latency_us": round(shared / steps * 1e6, 2)},
    }
    print(json.dumps(desc, indent=2))


if __name__ == "__main__":
    main()
