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
  * Devices: cores' worth of GEMM throughput when every core runs an
    sgemm at once (each in its own process), over one alone: how many
    ranks compute at full rate together (gpus_per_node).
  * Collectives: a one-all_reduce program on 2 ranks of the local
    communicator at 4 KiB (the latency) and 4 MiB (the bandwidth: ring
    all-reduce sends 2(n-1)/n S), and at 4 KiB over the 2-rank axis of a
    mesh of twice as many ranks as cores (shared_latency_us: a peer must be
    scheduled first). Mean times, not the fastest: a step meets the
    scheduler's delays too.
Everything runs with OPENBLAS_NUM_THREADS=1.

    calibrate_cpu.py [--build build] [--work /tmp/cal] [--repeat 20]
"""

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def args_():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--work", default=None)
    p.add_argument("--repeat", type=int, default=20)
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


def softmax_chain(rows, cols, n=32):
    t = f"tensor<{rows}x{cols}xf32>"
    body = "".join(f"    %{i + 1} = cleave.softmax %{i} dim = 1 : {t}\n" for i in range(n))
    text = (f"func.func @main(%0: {t} {{cleave.name = \"x\"}}) -> {t} {{\n{body}"
            f"    return %{n} : {t}\n}}\n")
    plan = compile_mlir(f"softmax_{rows}x{cols}", text)
    x = os.path.join(WORK, f"x_{rows}x{cols}.npy")
    np.save(x, np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
    return run_stats(plan, [x]) / n, rows * cols * 4 * 2


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
    return run_stats(plan, [x], 2 * groups, mean=True)


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

    small, _ = softmax_chain(1, 16)
    large, moved = softmax_chain(256, 1024)
    fraction = min(1.0, moved / max(large - small, 1e-9) / bandwidth)
    print(f"kernels: {small * 1e6:.1f} us per kernel at 64 bytes, {large * 1e6:.1f} us at {moved} bytes "
          f"-> {moved / (large - small) / 1e9:.2f} GB/s, {fraction:.2f} of the copy bandwidth")

    cores = os.cpu_count()
    alone = concurrent_gemm(path, 1)[0]
    together = concurrent_gemm(path, cores)
    devices = sum(together) / alone
    print(f"sgemm 512^3: {alone / 1e9:.1f} GFLOP/s alone, "
          + ", ".join(f"{x / 1e9:.1f}" for x in together)
          + f" with {cores} at once -> {devices:.2f} cores' worth")

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

    desc = {
        "preset": "cpu",
        "gpus_per_node": max(1, round(devices)),
        "cores_per_node": cores,
        "gpu": {
            "peak_tflops": {"fp32": round(peak / 1e12, 5)},
            "gemm_efficiency": {"fp32": {"max": 1.0, "half_gflops": round(half / 1e9, 6)}},
            "memory_gbps": round(bandwidth / 1e9, 2),
            "kernel_bandwidth_fraction": round(fraction, 3),
            "kernel_overhead_us": round(small * 1e6, 2),
            "gemm_overhead_us": round(overhead * 1e6, 2),
        },
        "intra_node": {"gbps": round(link_bw / 1e9, 2), "latency_us": round(latency * 1e6, 2),
                       "shared_latency_us": round(shared / steps * 1e6, 2)},
    }
    print(json.dumps(desc, indent=2))


if __name__ == "__main__":
    main()
