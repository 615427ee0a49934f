"""Bandwidth of the CPU communicators, nccl-tests style, for the cost model.

For each collective (all_reduce sum, all_gather, reduce_scatter) and buffer
size S (float32, bytes per rank of the operand, or of the result for
all_gather), compiles a one-collective program over a mesh of N ranks, runs
it --repeat times and reports the fastest run's time, the algorithm
bandwidth S / t and the bus bandwidth (all-reduce x 2(n-1)/n, all-gather and
reduce-scatter x (n-1)/n, as ../shared/REFERENCE.md and nccl-tests define
it).

  bench_collectives.py CLEAVE_BIN_DIR WORK_DIR [--launcher local|mpi]
      [--ranks N] [--sizes 4K,64K,1M,16M] [--repeat R]
"""
import argparse
import os
import re
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("bin_dir")
ap.add_argument("work")
ap.add_argument("--launcher", default="local", choices=["local", "mpi"])
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--sizes", default="4K,64K,1M,16M")
ap.add_argument("--repeat", type=int, default=20)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
n = args.ranks


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def program(op, elems):
    t = lambda e: f"tensor<{e}xf32>"
    if op == "all_reduce":
        body = f"%y = cleave.all_reduce sum %x over @mesh [\"r\"] : {t(elems)}"
        out = t(elems)
        x = t(elems)
    elif op == "all_gather":
        x, out = t(elems // n), t(elems)
        body = f"%y = cleave.all_gather %x over @mesh [\"r\"] dim = 0 : {x} -> {out}"
    else:
        x, out = t(elems), t(elems // n)
        body = f"%y = cleave.reduce_scatter sum %x over @mesh [\"r\"] dim = 0 : {x} -> {out}"
    return (f'module {{\n  cleave.mesh @mesh axes = ["r"] shape = [{n}]\n'
            f'  func.func @main(%x: {x} {{cleave.name = "x"}}) -> {out} {{\n'
            f"    {body}\n    return %y : {out}\n  }}\n}}\n")


factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
          "reduce_scatter": (n - 1) / n}
print(f"{n} ranks ({args.launcher}), float32, fastest of {args.repeat} runs")
print(f"{'collective':15} {'bytes':>10} {'time (us)':>10} {'algbw GB/s':>11} "
      f"{'busbw GB/s':>11}")
import numpy as np  # noqa: E402

for op in ("all_reduce", "all_gather", "reduce_scatter"):
    for size in args.sizes.split(","):
        nbytes = parse_size(size)
        elems = max(n, nbytes // 4 // n * n)
        d = os.path.join(args.work, f"{op}_{size}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "p.mlir"), "w") as f:
            f.write(program(op, elems))
        subprocess.run([f"{args.bin_dir}/cleave-compile", os.path.join(d, "p.mlir"),
                        "-o", os.path.join(d, "p.cleave")], check=True)
        xe = elems // n if op == "all_gather" else elems
        np.save(os.path.join(d, "x.npy"), np.ones(xe, np.float32))
        cmd = [f"{args.bin_dir}/cleave-run", os.path.join(d, "p.cleave"),
               os.path.join(d, "x.npy"), "--no-output", "--print-stats",
               "--warmup", "3", "--repeat", str(args.repeat)]
        if args.launcher == "mpi":
            cmd = ["mpirun", "--oversubscribe", "-np", str(n)] + cmd
        else:
            cmd += ["--ranks", str(n)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        ms = float(re.search(r"run time: min ([0-9.]+) ms", out).group(1))
        s = elems * 4
        alg = s / (ms / 1e3) / 1e9
        print(f"{op:15} {s:>10} {ms * 1e3:>10.1f} {alg:>11.2f} {alg * factor[op]:>11.2f}")
