#!/usr/bin/env python3
"""Simulates the GPT runs of Narayanan et al. (SC'21) Table 1 and compares
the simulated TFLOP/s per GPU with the published ones.

For each row of ../shared/calibration/megatron-sc21-table1.csv (or --table):
  - the row's GPT (tools/models/make_gpt.py with separate q/k/v so that
    tensor parallelism splits heads; its weight matrices declared but absent,
    --absent-weights) at sequence length 2048, vocabulary 51200;
  - laid out as the paper's runs were (PAPER_RUNS below, from the
    published launch settings): their microbatch size, virtual pipeline
    stages, and, for the rows without a pipeline, the gradient all-reduce
    overlapping the backward in 25 MB buckets (--overlap-collectives);
  - compiled by cleave-compile as a bf16 AdamW training step with full
    recomputation and drawn weights (--init-parameters), over the mesh
    dp x pp x tp of the row with pp = p * v stage programs (v chunks per
    pipeline rank, cut after every l / (p v) layers as Megatron lays out its
    virtual stages) at 2 microbatches, without kernel code (--emit=sim);
  - simulated by cleave-sim on the DGX A100 preset with as many nodes as the
    row's GPUs need, replaying the stage programs as the (interleaved) 1F1B
    schedule of p ranks over the row's m = global batch / (dp * microbatch
    size) microbatches (--schedule). A row with p = 1 is compiled at its m
    microbatches (gradient accumulation, unrolled) when m <= 4; otherwise
    at 1 and 2, and its step at m microbatches is the first plus m - 1
    times the difference.
The TFLOP/s per GPU are the paper's formula, 96 B s l h^2 (1 + s / 6h +
V / 16 l h), over the simulated step time and the GPUs.

--fit searches the A100's bf16 GEMM efficiency (max) and the fused kernels'
share of memory bandwidth for the least mean absolute error, simulating the
compiled plans again with each candidate (a JSON cluster starting from the
preset); --gpu KEY=VALUE sets such fields for a plain run.

--planner runs the planner (cleave-compile --auto, 80 GB per GPU) on each
row's model, GPUs and global batch, compiles its choice the same way and
prints both layouts' simulated TFLOP/s per GPU and the search's time.

    sc21_calibration.py [--build build] [--rows 1,2,3] [--chunks N]
        [--microbatch-size N] [--work DIR] [--fit] [--planner]
        [--gpu kernel_bandwidth_fraction=0.8]
"""

import argparse
import csv
import itertools
import json
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
                help="virtual stages per pipeline rank (default: as the paper's run)")
ap.add_argument("--microbatch-size", type=int, default=0, help="(default: as the paper's run)")
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--vocab", type=int, default=51200)
ap.add_argument("--dropout", type=float, default=0.1,
                help="the GPT's training-mode dropout (Megatron-LM's attention and hidden dropout, 0.1 in the paper's runs); 0 for none")
ap.add_argument("--cluster", default="dgx-a100-80gb")
ap.add_argument("--gpu", action="append", default=[], metavar="KEY=VALUE",
                help="override a field of the preset's gpu (e.g. kernel_bandwidth_fraction=0.8)")
ap.add_argument("--fit", action="store_true")
ap.add_argument("--planner", action="store_true",
                help="also run cleave-compile --auto on each row and simulate its choice beside the paper's layout")
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


# What the table leaves out, as the paper's runs set it (the published
# launch settings of Table 1, Megatron-LM's examples/sc21/run_table_1.sh):
# the microbatch size, the layers per virtual pipeline stage (None: no
# interleaving) and whether the data-parallel gradient all-reduce overlaps
# the backward (PyTorch's DistributedDataParallel, 25 MB buckets, for the
# rows without a pipeline; Megatron's own, after the backward, for the
# others).
PAPER_RUNS = {
    "1.7": (16, None, True),
    "3.6": (16, None, True),
    "7.5": (16, None, True),
    "18.4": (8, None, True),
    "39.1": (4, None, False),
    "76.1": (2, 5, False),
    "145.6": (2, 5, False),
    "310.1": (1, 3, False),
    "529.6": (1, 1, False),
    "1008.0": (1, None, False),
}
DDP_BUCKET_MB = 25


def paper_layout(row):
    """The row's layout as the paper ran it: its microbatch size, virtual
    stages and gradient overlap (PAPER_RUNS, unless --microbatch-size or
    --chunks say otherwise), full recomputation."""
    l, t, p, n = int(row["layers"]), int(row["tensor_parallel"]), int(row["pipeline_parallel"]), int(row["gpus"])
    dp = n // (t * p)
    mbs, per_virtual, overlap = PAPER_RUNS.get(row["params_billion"], (1, None, False))
    b = args.microbatch_size or mbs
    if args.chunks:
        v = args.chunks
    else:
        v = (l // p) // per_virtual if p > 1 and per_virtual else 1
    return dict(t=t, p=p, dp=dp, b=b, m=int(row["global_batch"]) // (dp * b), v=v, recompute="full",
                sp=False, zero=0, bucket=DDP_BUCKET_MB if overlap else None)


def model_args(row):
    return ["--layers", row["layers"], "--d-model", row["hidden_size"], "--heads", row["attention_heads"],
            "--seq", str(args.seq), "--vocab", str(args.vocab), "--separate-qkv", "--absent-weights",
            "--dropout", str(args.dropout)]


COMPILE = ["--train", "--loss=cross_entropy:logits,labels", "--optimizer=adamw", "--precision=bf16",
           "--init-parameters=normal:0.02",
           # Attention spelled out as bf16 GEMMs and a softmax, as Megatron
           # ran it (Cleave's fused CUDA attention kernels are f32).
           "--no-fused-attention"]


def compile_row(row, layout, tag="paper"):
    """Compiles the row's plans at `layout`; returns how to simulate them."""
    l = int(row["layers"])
    t, p, dp, b, m, v = (layout[k] for k in ("t", "p", "dp", "b", "m", "v"))
    n = int(row["gpus"])

    def build(microbatches, extra):
        name = os.path.join(WORK, "gpt-%sB-%s-m%d" % (row["params_billion"], tag, microbatches))
        subprocess.run([args.python, os.path.join(ROOT, "tools", "models", "make_gpt.py")] + model_args(row) +
                       ["--batch", str(microbatches * dp * b), "-o", name + ".onnx"],
                       check=True, stdout=subprocess.DEVNULL)
        cmd = [os.path.join(BIN, "cleave-compile"), name + ".onnx"] + COMPILE + [
               "--recompute=" + layout["recompute"], "--emit=sim",
               "--microbatches=%d" % microbatches, "-o", name + ".cleave"] + extra
        if layout["sp"]:
            cmd.append("--sequence-parallel")
        if layout["zero"]:
            cmd.append("--zero=%d" % layout["zero"])
        if layout.get("bucket") is not None:
            cmd += ["--overlap-collectives", "--bucket-mb=%g" % layout["bucket"]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("row %s: cleave-compile failed:\n%s\n%s" % (row["params_billion"], " ".join(cmd), r.stderr))
        return name + ".cleave"

    def mesh(axes):
        return ",".join("%s=%d" % (k, x) for k, x in axes if x > 1) or "dp=1"

    start = time.time()
    if p > 1:
        stages = p * v
        per = l // stages
        cut = ["h%d" % (per * (i + 1) - 1) for i in range(stages - 1)]
        schedule = "interleaved:%d" % v if v > 1 else "1f1b"
        plans = [(build(2, ["--mesh", mesh([("dp", dp), ("pp", stages), ("tp", t)]), "--schedule=1f1b",
                            "--stage-boundaries=" + ",".join(cut)]),
                  "%s,pp=%d,microbatches=%d" % (schedule, p, m))]
    else:
        axes = ["--mesh", mesh([("dp", dp), ("tp", t)])]
        # Gradient accumulation is unrolled: up to 4 microbatches compile
        # whole, more are extrapolated from 1 and 2.
        plans = [(build(m, axes), None)] if m <= 4 else [(build(1, axes), None), (build(2, axes), None)]
    return dict(row=row, dp=dp, v=v, m=m, n=n, plans=plans, compile=time.time() - start)


def plan_row(row):
    """cleave-compile --auto on the row's model (its batch symbolic), GPUs
    and global batch within 80 GB: the chosen layout, its predicted step and
    the search's time."""
    name = os.path.join(WORK, "gpt-%sB-auto.onnx" % row["params_billion"])
    subprocess.run([args.python, os.path.join(ROOT, "tools", "models", "make_gpt.py")] + model_args(row) +
                   ["--batch", "1", "--dynamic-batch", "-o", name], check=True, stdout=subprocess.DEVNULL)
    nodes = (int(row["gpus"]) + 7) // 8
    cmd = [os.path.join(BIN, "cleave-compile"), name] + COMPILE + [
        "--auto", "--global-batch", row["global_batch"], "--cluster", "%s:%d" % (args.cluster, nodes),
        "--max-memory=80G", "--emit=none"]
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.time() - start
    if r.returncode != 0:
        raise SystemExit("row %s: cleave-compile --auto failed:\n%s\n%s" % (row["params_billion"], " ".join(cmd), r.stderr))
    chose = re.search(r"--auto chose (.*) \(predicted step ([0-9.]+) ms", r.stderr)
    opts, predicted = chose.group(1), float(chose.group(2)) / 1e3
    get = lambda pattern, default: int(re.search(pattern, opts).group(1)) if re.search(pattern, opts) else default
    t, p = get(r"tp=(\d+)", 1), get(r"pp=(\d+)", 1)
    dp = int(row["gpus"]) // (t * p)
    m = get(r"--microbatches=(\d+)", 1)
    layout = dict(t=t, p=p, dp=dp, m=m, b=int(row["global_batch"]) // (dp * m),
                  v=get(r"interleaved:(\d+)", 1),
                  recompute=re.search(r"--recompute=(\w+)", opts).group(1) if "--recompute" in opts else "none",
                  sp="--sequence-parallel" in opts, zero=get(r"--zero=(\d+)", 0),
                  bucket=float(re.search(r"--bucket-mb=([0-9.]+)", opts).group(1))
                  if "--overlap-collectives" in opts else None)
    return layout, predicted, seconds, opts


def cluster_file(gpu):
    """A cluster description: the preset with the row's nodes and `gpu`'s
    fields."""
    path = os.path.join(WORK, "cluster-%d.json" % abs(hash(json.dumps(gpu, sort_keys=True))))
    with open(path, "w") as f:
        json.dump({"preset": args.cluster, "gpu": gpu}, f)
    return path


def simulate(c, gpu):
    row = c["row"]
    nodes = (c["n"] + 7) // 8
    cluster = cluster_file(gpu) if gpu else args.cluster
    steps, report = [], ""
    for plan, schedule in c["plans"]:
        cmd = [os.path.join(BIN, "cleave-sim"), plan, "--cluster", cluster, "--trace-commands=false"]
        if gpu:
            # JSON descriptions give their nodes themselves.
            with open(cluster) as f:
                desc = json.load(f)
            desc["nodes"] = nodes
            with open(cluster, "w") as f:
                json.dump(desc, f)
        else:
            cmd[3] = "%s:%d" % (args.cluster, nodes)
        if schedule:
            cmd.append("--schedule=" + schedule)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("row %s: cleave-sim failed:\n%s\n%s" % (row["params_billion"], " ".join(cmd), r.stderr))
        steps.append(float(re.search(r"step time ([0-9.]+) ms", r.stdout).group(1)) / 1e3)
        report = report or r.stdout
    step = steps[0] if len(steps) == 1 else steps[0] + (c["m"] - 1) * (steps[1] - steps[0])
    l, h = int(row["layers"]), int(row["hidden_size"])
    s, V, B = args.seq, args.vocab, int(row["global_batch"])
    flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    bubble = re.search(r"simulated bubble ([0-9.]+)%", report)
    energy = re.search(r"energy per step ([0-9.e+-]+) kWh .*cost per step ([0-9.e+-]+)", report)
    return dict(step=step, tflops=flops / step / c["n"] / 1e12,
                bubble=float(bubble.group(1)) if bubble else 0.0,
                kwh=float(energy.group(1)) * (step / steps[0]) if energy else 0.0,
                cost=float(energy.group(2)) * (step / steps[0]) if energy else 0.0)


def errors(compiled, gpu):
    out = []
    for c in compiled:
        res = simulate(c, gpu)
        pub = float(c["row"]["tflops_per_gpu"])
        out.append((res, (res["tflops"] - pub) / pub))
    return out


def parse_gpu(items):
    gpu = {}
    for item in items:
        k, v = item.split("=", 1)
        gpu[k] = float(v)
    return gpu


compiled = []
for row in rows():
    compiled.append(compile_row(row, paper_layout(row)))
    print("compiled %sB in %.1f s" % (row["params_billion"], compiled[-1]["compile"]), file=sys.stderr, flush=True)

if args.planner:
    # The planner's choice against the paper's layout, both compiled and
    # simulated alike.
    print("| params | paper's layout | simulated TFLOP/s | planner's choice | predicted TFLOP/s | simulated | vs paper's | search s |")
    print("|---|---|---|---|---|---|---|---|")
    for c in compiled:
        row = c["row"]
        paper = simulate(c, {})
        layout, predicted, seconds, opts = plan_row(row)
        print("planned %sB in %.1f s: %s" % (row["params_billion"], seconds, opts), file=sys.stderr, flush=True)
        mine = simulate(compile_row(row, layout, tag="auto"), {})
        pl = paper_layout(row)
        describe = lambda x: "t=%d p=%d dp=%d v=%d b=%d m=%d %s%s%s%s" % (
            x["t"], x["p"], x["dp"], x["v"], x["b"], x["m"], x["recompute"], " sp" if x["sp"] else "",
            " zero=%d" % x["zero"] if x["zero"] else "",
            " overlap:%gM" % x["bucket"] if x.get("bucket") is not None else "")
        print("| %sB | %s | %.1f | %s | %.1f | %.1f | %+.1f%% | %.1f |" % (
            row["params_billion"], describe(pl), paper["tflops"], describe(layout),
            mine["tflops"] * mine["step"] / predicted, mine["tflops"],
            100 * (mine["tflops"] / paper["tflops"] - 1), seconds), flush=True)
    sys.exit(0)

gpu = parse_gpu(args.gpu)
if args.fit:
    best = None
    effs = [round(0.6 + 0.025 * i, 3) for i in range(13)]  # 0.600 .. 0.900
    # Fused kernels: 60% to 85% of HBM bandwidth (a streaming kernel on an
    # A100 reaches about 85%, BabelStream's triad).
    for eff, share in itertools.product(effs, [0.6, 0.7, 0.8, 0.85]):
        cand = dict(gpu, kernel_bandwidth_fraction=share)
        cand["gemm_efficiency"] = {"half": {"max": eff, "half_gflops": 2}}
        errs = [abs(e) for _, e in errors(compiled, cand)]
        mae = sum(errs) / len(errs)
        print("fit: gemm max %.2f, kernel bandwidth %.2f: mean absolute error %.1f%%, largest %.1f%%" % (
            eff, share, 100 * mae, 100 * max(errs)), file=sys.stderr, flush=True)
        if best is None or mae < best[0]:
            best = (mae, cand)
    gpu = best[1]
    print("best: %s" % json.dumps(gpu))

print("| params | t | p | dp | v | m | published TFLOP/s | simulated | error | step s | bubble | kWh per step | cost per step | compile s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
errs = []
for c, (res, err) in zip(compiled, errors(compiled, gpu)):
    row = c["row"]
    errs.append(abs(err))
    print("| %sB | %s | %s | %d | %d | %d | %s | %.1f | %+.1f%% | %.2f | %.1f%% | %.3g | %.3g | %.1f |" % (
        row["params_billion"], row["tensor_parallel"], row["pipeline_parallel"], c["dp"], c["v"], c["m"],
        row["tflops_per_gpu"], res["tflops"], err * 100, res["step"], res["bubble"], res["kwh"], res["cost"],
        c["compile"]), flush=True)
print("mean absolute error %.1f%%, largest %.1f%% over %d rows" % (
    100 * sum(errs) / len(errs), 100 * max(errs), len(errs)))
