#!/usr/bin/env python3
"""Simulates the GPT runs of Narayanan et al. (SC'21) Table 1 and compares
the simulated TFLOP/s per GPU with the published ones.

For each row of ../shared/calibration/megatron-sc21-table1.csv (or --table):
  - the row's GPT (tools/models/make_gpt.py with separate q/k/v so that
    tensor parallelism splits heads; its weight matrices declared but absent,
    --absent-weights) at sequence length 2048, vocabulary 51200, microbatch
    --microbatch-size (default 1);
  - compiled by cleave-compile as a bf16 AdamW training step with full
    recomputation and drawn weights (--init-parameters), over the mesh
    dp x pp x tp of the row with pp = p * v stage programs (v chunks per
    pipeline rank, cut after every l / (p v) layers as Megatron lays out its
    virtual stages), one microbatch, without kernel code (--emit=none);
  - simulated on the DGX A100 preset with as many nodes as the row's GPUs
    need, replaying the stage programs as the interleaved 1F1B schedule of
    p ranks over the row's m = global batch / (dp * microbatch size)
    microbatches (--sim-schedule). Rows with p = 1 replay one stage.
The TFLOP/s per GPU are the paper's formula, 96 B s l h^2 (1 + s / 6h +
V / 16 l h) over the simulated step time and the GPUs.

    sc21_calibration.py [--build build] [--rows 1,2,3] [--chunks N]
        [--microbatch-size 1] [--work DIR] [--keep]
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--table", default=os.path.join(ROOT, "..", "shared", "calibration", "megatron-sc21-table1.csv"))
ap.add_argument("--rows", default=None, help="1-based rows to run (default: all)")
ap.add_argument("--chunks", type=int, default=0,
                help="virtual stages per pipeline rank (default: the fewest, at least 2, "
                     "that divide the layers per rank)")
ap.add_argument("--microbatch-size", type=int, default=1)
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--vocab", type=int, default=51200)
ap.add_argument("--cluster", default="dgx-a100-80gb")
ap.add_argument("--work", default=None)
ap.add_argument("--python", default=sys.executable)
args = ap.parse_args()
BIN = os.path.join(args.build, "bin")
WORK = args.work or tempfile.mkdtemp(prefix="cleave-sc21-")
os.makedirs(WORK, exist_ok=True)


def rows():
    with open(args.table) as f:
        lines = [l for l in f if not l.startswith("#")]
    out = list(csv.DictReader(lines))
    if args.rows:
        keep = {int(x) for x in args.rows.split(",")}
        out = [r for i, r in enumerate(out, 1) if i in keep]
    return out


def chunks_for(layers_per_rank):
    if args.chunks:
        return args.chunks
    for v in range(2, layers_per_rank + 1):
        if layers_per_rank % v == 0:
            return v
    return 1


def simulate(row):
    l, h, a = int(row["layers"]), int(row["hidden_size"]), int(row["attention_heads"])
    t, p, n = int(row["tensor_parallel"]), int(row["pipeline_parallel"]), int(row["gpus"])
    batch = int(row["global_batch"])
    dp = n // (t * p)
    b = args.microbatch_size
    m = batch // (dp * b)
    v = chunks_for(l // p) if p > 1 else 1
    stages = p * v
    nodes = (n + 7) // 8
    base = [os.path.join(BIN, "cleave-compile"), "--train", "--loss=cross_entropy:logits,labels",
            "--optimizer=adamw", "--precision=bf16", "--recompute=full", "--init-parameters=normal:0.02",
            "--emit=none", "--simulate", "--cluster", "%s:%d" % (args.cluster, nodes)]

    def run(microbatches, extra):
        """Compiles the model at `microbatches` microbatches of b rows per
        data-parallel rank and simulates it; returns the step time and the
        report."""
        model = os.path.join(WORK, "gpt-%sB-m%d.onnx" % (row["params_billion"], microbatches))
        subprocess.run([args.python, os.path.join(ROOT, "tools", "models", "make_gpt.py"),
                        "--layers", str(l), "--d-model", str(h), "--heads", str(a), "--seq", str(args.seq),
                        "--vocab", str(args.vocab), "--batch", str(microbatches * dp * b), "--separate-qkv",
                        "--absent-weights", "-o", model], check=True, stdout=subprocess.DEVNULL)
        cmd = base + [model, "--microbatches=%d" % microbatches] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("row %s: cleave-compile failed:\n%s\n%s" % (row["params_billion"], " ".join(cmd), r.stderr))
        return float(re.search(r"step time ([0-9.]+) ms", r.stderr).group(1)) / 1e3, r.stderr

    start = time.time()
    if p > 1:
        # Stage programs as Megatron's virtual stages, at 2 microbatches (the
        # first one's steps are replayed; the last backward's extra work,
        # finishing the weight gradients, happens once).
        per = l // stages
        cut = ["h%d.residual_2" % (per * (i + 1) - 1) for i in range(stages - 1)]
        schedule = "interleaved:%d" % v if v > 1 else "1f1b"
        step, report = run(2, ["--mesh", "dp=%d,pp=%d,tp=%d" % (dp, stages, t), "--schedule=1f1b",
                               "--stage-boundaries=" + ",".join(cut),
                               "--sim-schedule", "%s,pp=%d,microbatches=%d" % (schedule, p, m)])
    else:
        # No pipeline: gradient accumulation over m microbatches, each the
        # same; the step at 1 and 2 microbatches gives the rest.
        mesh = ["--mesh", "dp=%d,tp=%d" % (dp, t)]
        one, report = run(1, mesh)
        two, _ = run(2, mesh)
        step = one + (m - 1) * (two - one)
    seconds = time.time() - start
    bubble = re.search(r"simulated bubble ([0-9.]+)%", report)
    s, V = args.seq, args.vocab
    flops = 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return dict(dp=dp, v=v, m=m, step=step, tflops=flops / step / n / 1e12,
                bubble=float(bubble.group(1)) if bubble else 0.0, compile=seconds, report=report)


print("| params | t | p | dp | v | m | published TFLOP/s | simulated | error | step s | bubble | compile s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
errors = []
for row in rows():
    res = simulate(row)
    pub = float(row["tflops_per_gpu"])
    err = (res["tflops"] - pub) / pub
    errors.append(abs(err))
    print("| %sB | %s | %s | %d | %d | %d | %.0f | %.1f | %+.1f%% | %.2f | %.1f%% | %.1f |" % (
        row["params_billion"], row["tensor_parallel"], row["pipeline_parallel"], res["dp"], res["v"],
        res["m"], pub, res["tflops"], err * 100, res["step"], res["bubble"], res["compile"]), flush=True)
print("mean absolute error %.1f%%, largest %.1f%% over %d rows" % (
    100 * sum(errors) / len(errors), 100 * max(errors), len(errors)))
