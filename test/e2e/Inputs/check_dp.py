"""Trains the hand-written data-parallel MLP (make_dp_mlp.py) for 20 steps at
dp = 1, 2 and 4 with the local communicator, in each variant (sync, async,
zero), and checks:
  - every step's loss equals the dp=1 run's within 1e-5 relative (each rank
    feeds its shard of the same global batch);
  - dp=1 matches a numpy float64 SGD of the same model on a dataset of one
    global batch within 1e-4 relative (the hand-written backward is right);
  - the same configuration run twice gives bitwise the same losses;
  - with weights drawn by the runtime (--init-parameters), the sharded
    weights of `zero` at dp=2 and 4 start from the values dp=1 draws for
    the whole tensors (each shard by its global element indices).

With the launcher `mpi`, dp=2 and dp=4 run as processes under mpirun
instead (and are compared with the local dp=1 run).

  check_dp.py CLEAVE_BIN_DIR WORK_DIR [local|mpi]
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import make_dp_mlp  # noqa: E402

bin_dir, work = sys.argv[1], sys.argv[2]
launcher = sys.argv[3] if len(sys.argv) > 3 else "local"
os.makedirs(work, exist_ok=True)
STEPS, LR = 20, 0.1


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def data(name, samples):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(samples, 4)).astype(np.float32)
    y = rng.normal(size=(samples, 2)).astype(np.float32)
    paths = [os.path.join(work, f"{name}_{v}.npy") for v in "xy"]
    np.save(paths[0], x)
    np.save(paths[1], y)
    return x, y, paths


def train(n, variant, paths, tag, via="local", init=None):
    mlir = os.path.join(work, f"dp{n}_{variant}.mlir")
    plan = os.path.join(work, f"dp{n}_{variant}_{'init' if init else 'model'}.cleave")
    with open(mlir, "w") as f:
        f.write(make_dp_mlp.program(n, variant))
    run([f"{bin_dir}/cleave-compile", mlir, "-o", plan, "--lr", str(LR)] +
        ([f"--init-parameters={init}"] if init else []))
    log = os.path.join(work, f"dp{n}_{variant}_{tag}.jsonl")
    cmd = [f"{bin_dir}/cleave-run", plan, "--steps", str(STEPS), "--data",
           f"x={paths[0]}", "--data", f"y={paths[1]}", "--log-json", log,
           "--comm-timeout", "60"]
    if via == "mpi":
        cmd = ["mpirun", "--oversubscribe", "-np", str(n)] + cmd
    else:
        cmd += ["--ranks", str(n)]
    run(cmd)
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


failures = []
# Absolute check: one global batch of 8 samples, full-batch SGD in numpy.
x8, y8, paths8 = data("batch8", 8)
ref = make_dp_mlp.reference(STEPS, LR, x8, y8, [np.arange(8)] * STEPS)
got = train(1, "sync", paths8, "ref")
err = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
print(f"dp=1 sync vs numpy float64: max relative difference {err:.2e}")
if err > 1e-4:
    failures.append(f"dp=1 differs from numpy by {err:.2e}")

# Data parallel: 64 samples, a different global batch each step.
_, _, paths = data("data64", 64)
base = train(1, "sync", paths, "a")
for variant in ("sync", "async", "zero"):
    for n in ((1, 2, 4) if launcher == "local" else (2, 4)):
        losses = train(n, variant, paths, "a", launcher)
        err = max(abs(a - b) / abs(b) for a, b in zip(losses, base))
        print(f"dp={n} {variant} ({launcher}): max relative difference from dp=1 "
              f"{err:.2e} over {STEPS} steps; last loss {losses[-1]:.6f}")
        if err > 1e-5:
            failures.append(f"dp={n} {variant} differs from dp=1 by {err:.2e}")
        if n == 4:
            again = train(n, variant, paths, "b", launcher)
            same = again == losses
            print(f"dp={n} {variant} ({launcher}): run twice, bitwise equal: "
                  f"{same}")
            if not same:
                failures.append(f"dp={n} {variant} is not deterministic")
# Weights drawn by the runtime: whole tensors at dp=1, shards at dp=2, 4.
INIT = "normal:0.5:3"
base = train(1, "sync", paths, "init", launcher if launcher == "local" else "local", INIT)
for n in ((2, 4)):
    losses = train(n, "zero", paths, "init", launcher, INIT)
    err = max(abs(a - b) / abs(b) for a, b in zip(losses, base))
    print(f"dp={n} zero ({launcher}) with --init-parameters: max relative "
          f"difference from dp=1 {err:.2e}")
    if err > 1e-5:
        failures.append(f"dp={n} zero with drawn weights differs by {err:.2e}")
if failures:
    sys.exit("FAILED: " + "; ".join(failures))
print("PASSED")
