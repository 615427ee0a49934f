"""Measures how much of the gradient all-reduce an asynchronous collective
hides behind compute, on the CPU, in one run.

Two data-parallel training steps of the same MLP (make_dp_mlp.py): `sync`
all-reduces every gradient with a blocking collective after the backward
pass; `async` starts each weight gradient's all-reduce as soon as it is
computed and waits for it only before the update, so the communication
thread reduces it while the compute thread runs the rest of the backward
pass. A third plan, `none`, has no gradient collectives (it doubles each
gradient instead, an elementwise op of the same size): the compute-only
reference. All three run on the same ranks, alternately; the medians give
the time of the blocking reduction (sync - none) and the part of it the
asynchronous plan hides ((sync - async) / (sync - none)). OpenBLAS runs one
thread per rank (OPENBLAS_NUM_THREADS=1) so that ranks do not oversubscribe
the cores.

  bench_overlap.py CLEAVE_BIN_DIR WORK_DIR [--launcher local|mpi]
      [--ranks N] [--dims B,D,H,O] [--steps S] [--rounds R]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e", "Inputs"))
import make_dp_mlp  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bin_dir")
ap.add_argument("work")
ap.add_argument("--launcher", default="local", choices=["local", "mpi"])
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--dims", default="256,1024,1024,1024")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
B, D, H, O = (int(v) for v in args.dims.split(","))
make_dp_mlp.B, make_dp_mlp.D, make_dp_mlp.H, make_dp_mlp.O = B, D, H, O

rng = np.random.default_rng(0)
x, y = os.path.join(args.work, "x.npy"), os.path.join(args.work, "y.npy")
np.save(x, rng.normal(size=(4 * B, D)).astype(np.float32))
np.save(y, rng.normal(size=(4 * B, O)).astype(np.float32))

plans = {}
for variant in ("sync", "async", "none"):
    mlir = os.path.join(args.work, f"{variant}.mlir")
    with open(mlir, "w") as f:
        f.write(make_dp_mlp.program(args.ranks, variant))
    plans[variant] = os.path.join(args.work, f"{variant}.cleave")
    subprocess.run([f"{args.bin_dir}/cleave-compile", mlir, "-o",
                    plans[variant], "--lr", "0.01"], check=True)


def step_ms(variant, tag):
    log = os.path.join(args.work, f"{variant}_{tag}.jsonl")
    cmd = [f"{args.bin_dir}/cleave-run", plans[variant], "--steps",
           str(args.steps), "--data", f"x={x}", "--data", f"y={y}",
           "--log-json", log]
    if args.launcher == "mpi":
        cmd = ["mpirun", "--oversubscribe", "-np", str(args.ranks)] + cmd
    else:
        cmd += ["--ranks", str(args.ranks)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    # The first steps warm up (page faults, thread start).
    return [r["step_ms"] for r in rows[3:]], rows[-1]["loss"]


times = {"sync": [], "async": [], "none": []}
losses = {}
for r in range(args.rounds):
    for variant in ("sync", "async", "none"):
        ms, losses[variant] = step_ms(variant, r)
        times[variant] += ms
grad_bytes = 4 * (D * H + H + H * O + O)
sync_ms = statistics.median(times["sync"])
async_ms = statistics.median(times["async"])
print(f"dp={args.ranks} ({args.launcher}), batch {B}, MLP {D}-{H}-{O}, "
      f"{grad_bytes / 1e6:.1f} MB of gradients all-reduced per step")
print(f"blocking all-reduce:  {sync_ms:8.2f} ms/step (median of "
      f"{len(times['sync'])})")
print(f"overlapped all-reduce: {async_ms:8.2f} ms/step (median of "
      f"{len(times['async'])})")
none_ms = statistics.median(times["none"])
print(f"no gradient collectives: {none_ms:8.2f} ms/step (median of "
      f"{len(times['none'])})")
comm = sync_ms - none_ms
print(f"async / sync: {async_ms / sync_ms:.3f}; blocking reduction "
      f"{comm:.2f} ms/step, of which the asynchronous plan hides "
      f"{(sync_ms - async_ms) / comm * 100 if comm > 0 else float('nan'):.0f}%; "
      f"same final loss (sync, async): {losses['sync'] == losses['async']}")
