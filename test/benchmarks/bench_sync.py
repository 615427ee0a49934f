"""Synchronous or not: local SGD, DiLoCo and delayed gradient reduction on
the small GPT against a straggler, in one run.

The 2-layer, d=64 GPT (make_gpt.py, batch 2 per rank, T = 32) is compiled
for dp=N (--data-parallel) with AdamW (lr 3e-3 or --lr, clipping at 1.0) under each
--sync mode: step (gradients all-reduced every step), local:4 and local:16
(local SGD: parameters averaged every H steps), DiLoCo local:16 (outer
Nesterov, lr 0.7, momentum 0.9) and delayed (each step applies the previous
step's averaged gradients, reduced behind this step's compute). Each plan
trains on the same token stream for the same number of steps (the same
tokens), once as it is and once with rank 1 a straggler
(cleave-run --slow-rank 1:F: after each step, and each sync, it sleeps F - 1
times the wall time the run took on it). Reported per run: the held-out
loss of the trained model (exported to ONNX, evaluated by onnxruntime on
fixed windows of a corpus generated with another seed; with local SGD the
run ends on a sync, so every replica holds the model), the last logged
loss (rank 0's; local SGD logs its replica's own), and the wall time of
the training steps (the sum of the logged step times, syncs and straggler
sleeps included; the median of --repeat runs, alternated). The logs are
kept, and the median run's drawn by tools/loss_svg.py with --svg.

OpenBLAS runs one thread per rank; with more ranks than cores the ranks
share them, so times measure this machine's contention as well.

  bench_sync.py CLEAVE_BIN_DIR WORK_DIR [--ranks N] [--steps S]
      [--slow-factor F] [--repeat R] [--eval-windows W] [--svg OUT.svg]
      [--json OUT.json] [--only MODE,...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")

ap = argparse.ArgumentParser()
ap.add_argument("bin_dir")
ap.add_argument("work")
ap.add_argument("--ranks", type=int, default=4)
ap.add_argument("--steps", type=int, default=192,
                help="training steps (a multiple of 16, so local runs end on a sync)")
ap.add_argument("--slow-factor", type=float, default=2.0)
ap.add_argument("--eval-windows", type=int, default=64)
ap.add_argument("--svg", help="write the loss-against-time picture here")
ap.add_argument("--json", help="write the results here")
ap.add_argument("--only", help="comma-separated modes to run")
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--lr", default="3e-3", help="AdamW's learning rate")
args = ap.parse_args()
if args.steps % 16:
    sys.exit("bench_sync.py: --steps must be a multiple of 16")
os.makedirs(args.work, exist_ok=True)
W = args.work
py = sys.executable
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
T, PER_RANK = 32, 2


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, env=env, **kw)


corpus, heldout = os.path.join(W, "corpus.bin"), os.path.join(W, "heldout.bin")
run([py, os.path.join(ROOT, "tools/models/make_corpus.py"), "-o", corpus,
     "--bytes", "200000", "--seed", "0"], stdout=subprocess.DEVNULL)
run([py, os.path.join(ROOT, "tools/models/make_corpus.py"), "-o", heldout,
     "--bytes", "20000", "--seed", "1"], stdout=subprocess.DEVNULL)
model = os.path.join(W, "gpt.onnx")
run([py, os.path.join(ROOT, "tools/models/make_gpt.py"), "--layers", "2",
     "--d-model", "64", "--heads", "2", "--seq", str(T), "--vocab", "256",
     "--batch", str(PER_RANK), "-o", model], stdout=subprocess.DEVNULL)

COMMON = ["--train", "--loss=cross_entropy:logits,labels", "--optimizer=adamw",
          f"--lr={args.lr}", "--clip-grad-norm=1.0", f"--data-parallel={args.ranks}"]
MODES = [
    ("step", ["--sync=step"]),
    ("local:4", ["--sync=local:4"]),
    ("local:16", ["--sync=local:16"]),
    ("DiLoCo local:16", ["--sync=local:16", "--outer-optimizer=nesterov",
                         "--outer-lr=0.7", "--outer-momentum=0.9"]),
    ("delayed", ["--sync=delayed"]),
]
if args.only:
    keep = args.only.split(",")
    MODES = [m for m in MODES if m[0] in keep]


def slug(name):
    return name.replace(" ", "-").replace(":", "")


# Held-out windows: fixed offsets, input ids and next-token labels.
tokens = np.fromfile(heldout, dtype=np.uint16).astype(np.int64)
starts = np.linspace(0, len(tokens) - T - 2, args.eval_windows).astype(np.int64)
windows = np.stack([tokens[s:s + T + 1] for s in starts])


def heldout_loss(onnx_path):
    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    total, count = 0.0, 0
    for b in range(0, len(windows) - PER_RANK + 1, PER_RANK):
        w = windows[b:b + PER_RANK]
        logits = sess.run(None, {"input_ids": w[:, :-1]})[0].astype(np.float64)
        m = logits.max(-1, keepdims=True)
        logz = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
        picked = np.take_along_axis(logits, w[:, 1:, None], -1)[..., 0]
        total += float((logz - picked).sum())
        count += picked.size
    return total / count


plans = {}
for name, flags in MODES:
    plans[name] = os.path.join(W, slug(name) + ".cleave")
    run([os.path.join(args.bin_dir, "cleave-compile"), model, *COMMON, *flags,
         "-o", plans[name]], stderr=subprocess.DEVNULL)

# Every configuration runs --repeat times, alternating, and its time is the
# median; the losses are bitwise the same each time (checked).
results = {}
for rep in range(args.repeat):
    for name, _ in MODES:
        for straggler in (False, True):
            tag = slug(name) + ("-slow" if straggler else "")
            log = os.path.join(W, f"{tag}.{rep}.jsonl")
            out = os.path.join(W, tag + ".onnx")
            cmd = [os.path.join(args.bin_dir, "cleave-run"), plans[name],
                   "--ranks", str(args.ranks), "--steps", str(args.steps),
                   "--tokens", corpus, "--log-every", "1", "--log-json", log]
            if rep == 0:
                cmd += ["--export-onnx", out, "--onnx-model", model]
            if straggler:
                cmd += ["--slow-rank", f"1:{args.slow_factor:g}"]
            run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            rows = [json.loads(line) for line in open(log)]
            if (name, straggler) not in results:
                results[(name, straggler)] = {
                    "mode": name, "straggler": straggler, "log": log,
                    "tokens": args.steps * args.ranks * PER_RANK * T,
                    "times": [], "losses": [row["loss"] for row in rows],
                    "heldout_loss": heldout_loss(out)}
            r = results[(name, straggler)]
            if r["losses"] != [row["loss"] for row in rows]:
                sys.exit(f"bench_sync.py: {tag}: the losses differ between runs")
            r["times"].append(sum(row["step_ms"] for row in rows) / 1000.0)
            r.setdefault("logs", []).append(log)
            print(f"{tag} #{rep}: held-out loss {r['heldout_loss']:.4f}, "
                  f"{r['times'][-1]:.2f} s", file=sys.stderr)
for r in results.values():
    r["step_seconds"] = statistics.median(r["times"])
    # The picture shows the run of the median time (with an odd count).
    r["log"] = r["logs"][r["times"].index(
        statistics.median_low(r["times"]))]
    r["last_loss"] = r["losses"][-1]
results = list(results.values())

tokens_total = results[0]["tokens"]
print(f"small GPT (2 layers, d=64, T={T}), dp={args.ranks} ({PER_RANK} sequences "
      f"per rank), AdamW {args.lr}, {args.steps} steps = {tokens_total} tokens; "
      f"straggler: rank 1 at {args.slow_factor:g}x")
print()
print("| sync | held-out loss | last logged loss | time (s) | "
      "time with the straggler (s) | slowdown |")
print("|---|---|---|---|---|---|")
by = {(r["mode"], r["straggler"]): r for r in results}
for name, _ in MODES:
    a, b = by[(name, False)], by[(name, True)]
    print(f"| {name} | {a['heldout_loss']:.4f} | {a['last_loss']:.4f} | "
          f"{a['step_seconds']:.2f} | {b['step_seconds']:.2f} | "
          f"{b['step_seconds'] / a['step_seconds']:.2f}x |")
if args.json:
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
if args.svg:
    specs = [f"{r['mode']}{' (straggler)' if r['straggler'] else ''}={r['log']}"
             for r in results]
    run([py, os.path.join(ROOT, "tools/loss_svg.py"), *specs, "-o", args.svg,
         "--smooth", "16", "--title",
         f"small GPT, dp={args.ranks}: loss (rank 0's, mean of 16 steps) "
         f"against wall time; dashed: rank 1 at {args.slow_factor:g}x"])
