"""Blocking time of a checkpoint save, synchronous against --async-checkpoint,
in one run.

GPT-2-small (make_gpt.py --preset gpt2-small: 12 layers, d = 768, vocabulary
50257, 124M parameters) at T = --seq (default 32), batch 1, compiled with
AdamW: its fp32 states (parameters, Adam's m and v) are 1.49 GB. It trains
for --steps steps on a token stream twice, saving every --save-every steps
into a fresh directory: synchronously, then with --async-checkpoint.

What a save blocks is measured from cleave-run's step lines as they arrive
(each is flushed when its step ends, before that step's save): the time from
step k's line to step k+1's, less step k+1's own time (step_ms of the JSON
log), is what ran between the two steps, the save of step k included. The
median of that gap over steps that do not save is the baseline (data and
logging); a save's blocking time is its gap less the baseline. Saves of the
last step have no next step and are not counted. The async run's own
figure (the "step waited" of its messages) is printed beside it.

With --async-checkpoint the thread writing a checkpoint (and hashing it)
shares the cores with the steps, so on a small machine it also slows the
steps that follow; the step times of both runs are printed too.

  bench_checkpoint.py CLEAVE_BIN_DIR WORK_DIR [--steps 13] [--save-every 4]
      [--seq 32] [--json OUT.json]
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
ap.add_argument("--steps", type=int, default=13)
ap.add_argument("--save-every", type=int, default=4)
ap.add_argument("--seq", type=int, default=32)
ap.add_argument("--preset", default="gpt2-small",
                help="make_gpt.py preset (tiny for a smoke run)")
ap.add_argument("--json", help="write the results here")
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
exe = lambda name: os.path.join(args.bin_dir, name)


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


model = os.path.join(args.work, "gpt.onnx")
plan = os.path.join(args.work, "gpt-train.cleave")
corpus = os.path.join(args.work, "corpus.bin")
if not os.path.exists(plan):
    run([sys.executable, os.path.join(ROOT, "tools/models/make_gpt.py"), "--preset", args.preset,
         "--seq", str(args.seq), "-o", model])
    run([sys.executable, os.path.join(ROOT, "tools/models/make_corpus.py"), "-o", corpus,
         "--bytes", "200000"])
    run([exe("cleave-compile"), model, "--train", "--loss=cross_entropy:logits,labels",
         "--optimizer=adamw", "--lr=1e-4", "-o", plan])


def train(label, extra):
    """Runs the plan; returns per-step (line arrival time, step_ms) and the
    saves' messages."""
    ckpt = os.path.join(args.work, "ckpt-" + label)
    shutil.rmtree(ckpt, ignore_errors=True)
    log = os.path.join(args.work, label + ".jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = [exe("cleave-run"), plan, "--steps", str(args.steps), "--tokens", corpus,
           "--save-every", str(args.save_every), "--checkpoint-dir", ckpt,
           "--log-json", log] + extra
    print("+ " + " ".join(cmd), file=sys.stderr)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrivals = {}
    for line in p.stdout:
        m = re.match(r"\s*step\s+(\d+)", line)
        if m:
            arrivals[int(m.group(1))] = time.monotonic()
    err = p.stderr.read()
    if p.wait() != 0:
        sys.exit(f"bench_checkpoint.py: {label} run failed:\n{err}")
    with open(log) as f:
        step_ms = {r["step"]: r["step_ms"] for r in map(json.loads, f)}
    shutil.rmtree(ckpt, ignore_errors=True)
    gaps = {k: (arrivals[k + 1] - arrivals[k]) * 1e3 - step_ms[k + 1]
            for k in arrivals if k + 1 in arrivals}
    saves = [k for k in gaps if k % args.save_every == 0]
    base = statistics.median([g for k, g in gaps.items() if k not in saves] or [0.0])
    blocked = [gaps[k] - base for k in saves]
    waited = [float(x) for x in re.findall(r"the step waited ([0-9.]+) ms", err)]
    written = [float(x) for x in re.findall(r"written in ([0-9.]+) s", err)]
    return {"blocked_ms": blocked, "mean_blocked_ms": statistics.mean(blocked),
            "baseline_gap_ms": base, "reported_wait_ms": waited, "write_s": written,
            "median_step_ms": statistics.median(step_ms.values())}


sync = train("sync", [])
async_ = train("async", ["--async-checkpoint"])
ratio = async_["mean_blocked_ms"] / sync["mean_blocked_ms"]
print(f"model: {args.preset} at T={args.seq}, AdamW fp32 states; {args.steps} steps, "
      f"a save every {args.save_every}; {os.cpu_count()} cores")
for label, r in (("synchronous", sync), ("--async-checkpoint", async_)):
    print(f"{label:>20}: blocked {r['mean_blocked_ms']:9.1f} ms per save "
          f"({', '.join('%.0f' % b for b in r['blocked_ms'])}); median step {r['median_step_ms']:.0f} ms")
if async_["reported_wait_ms"]:
    print(f"{'':>20}  the async saves' own figure: "
          f"{', '.join('%.0f' % w for w in async_['reported_wait_ms'])} ms waited; "
          f"written in {', '.join('%.2f' % w for w in async_['write_s'])} s")
print(f"async / sync blocking time: {ratio:.3f} (goal <= 0.10)")
if args.json:
    with open(args.json, "w") as f:
        json.dump({"sync": sync, "async": async_, "ratio": ratio}, f, indent=1)
