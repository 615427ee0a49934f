"""Recovery time after a fault, for the small GPT on CPU ranks, in one run.

The 2-layer, d=64 GPT (make_gpt.py, batch 2 per rank, T = 32, AdamW) is
compiled for --mesh dp=2 and trained with --ranks 2 --max-restarts 1,
checkpointing every --save-every steps, once per fault kind: a crash (a
simulated rank death its peer finds at once) and a hang (found after
--comm-timeout). The fault is injected --after steps past a checkpoint, so
that many steps of work are lost.

cleave-run's lines are read as they arrive (stdout and stderr merged, each
flushed when written) and timed here:
  detection  the fault's line to the restart line (every rank stopped, the
             checkpoint chosen: its SHA-256s checked);
  restart    the restart line to the "resuming from" line (a fresh world,
             the ranks' executors, the checkpoint's shards read: the load);
  first step the "resuming from" line to the first step's line after it.
The goal (issue 46): fault to first step <= 5 s plus the work lost (the
steps lost times the median step time of the run).

  bench_recovery.py CLEAVE_BIN_DIR WORK_DIR [--save-every 10] [--after 5]
      [--comm-timeout 2] [--json OUT.json]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")

ap = argparse.ArgumentParser()
ap.add_argument("bin_dir")
ap.add_argument("work")
ap.add_argument("--save-every", type=int, default=10)
ap.add_argument("--after", type=int, default=5,
                help="steps past the last checkpoint when the fault comes")
ap.add_argument("--comm-timeout", type=float, default=2.0)
ap.add_argument("--json", help="write the results here")
args = ap.parse_args()
W = args.work
os.makedirs(W, exist_ok=True)
py = sys.executable
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
exe = lambda name: os.path.join(args.bin_dir, name)

corpus = os.path.join(W, "corpus.bin")
model = os.path.join(W, "gpt.onnx")
plan = os.path.join(W, "gpt-dp2.cleave")
subprocess.run([py, os.path.join(ROOT, "tools/models/make_corpus.py"), "-o",
                corpus, "--bytes", "200000", "--seed", "0"], check=True,
               stdout=subprocess.DEVNULL)
subprocess.run([py, os.path.join(ROOT, "tools/models/make_gpt.py"),
                "--layers", "2", "--d-model", "64", "--heads", "2", "--seq",
                "32", "--vocab", "256", "--batch", "4", "-o", model],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([exe("cleave-compile"), model, "--train",
                "--loss=cross_entropy:logits,labels", "--optimizer=adamw",
                "--lr=3e-3", "--clip-grad-norm=1.0", "--mesh", "dp=2", "-o",
                plan], check=True, stderr=subprocess.DEVNULL)

fault_step = 2 * args.save_every + args.after + 1
steps = fault_step + args.save_every


def measure(kind):
    ck = os.path.join(W, "ck-" + kind)
    shutil.rmtree(ck, ignore_errors=True)
    cmd = [exe("cleave-run"), plan, "--ranks", "2", "--steps", str(steps),
           "--tokens", corpus, "--save-every", str(args.save_every),
           "--checkpoint-dir", ck, "--comm-timeout", str(args.comm_timeout),
           "--max-restarts", "1", "--log-json", os.path.join(W, kind + ".jsonl"),
           "--inject-fault", f"rank=1,step={fault_step},kind={kind}"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env, bufsize=1)
    t = {}
    lost = None
    for line in p.stdout:
        now = time.monotonic()
        if "injected fault" in line:
            t["fault"] = now
        elif "restart 1 of 1" in line:
            t["restart"] = now
            lost = int(re.search(r"(\d+) steps? lost", line)[1])
        elif "resuming from" in line and "restart" in t:
            t["resumed"] = now
        elif re.match(r"\s*step\s+\d+", line) and "resumed" in t and \
                "first" not in t:
            t["first"] = now
    if p.wait() != 0 or len(t) != 4:
        sys.exit(f"bench_recovery.py: the {kind} run failed: {cmd}")
    with open(os.path.join(W, kind + ".jsonl")) as f:
        step_ms = statistics.median(json.loads(l)["step_ms"] for l in f)
    r = {"detection_s": t["restart"] - t["fault"],
         "restart_load_s": t["resumed"] - t["restart"],
         "first_step_s": t["first"] - t["resumed"],
         "total_s": t["first"] - t["fault"],
         "steps_lost": lost, "step_ms": step_ms}
    r["goal_s"] = 5.0 + lost * step_ms / 1000
    return r


results = {kind: measure(kind) for kind in ("crash", "hang")}
print(f"Recovery of the small GPT (dp=2, --ranks 2, checkpoints every "
      f"{args.save_every} steps, fault at step {fault_step}, "
      f"--comm-timeout {args.comm_timeout:g}):")
print(f"{'fault':<6} {'detection':>10} {'restart+load':>13} {'first step':>11} "
      f"{'total':>8} {'lost':>5} {'goal':>8} {'total/goal':>11}")
for kind, r in results.items():
    print(f"{kind:<6} {r['detection_s']:>9.3f}s {r['restart_load_s']:>12.3f}s "
          f"{r['first_step_s']:>10.3f}s {r['total_s']:>7.3f}s "
          f"{r['steps_lost']:>5} {r['goal_s']:>7.3f}s "
          f"{r['total_s'] / r['goal_s']:>11.2f}")
if args.json:
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
