#!/usr/bin/env python3
"""Fits the simulator's GPU figures on published training runs and measures
its error on other published runs it was not fitted on.

Each calibration set is a CSV in test/benchmarks/calibration/ (or a path):
one published run per row with its launch settings (model dims, sequence
length, vocabulary, global batch, microbatch, tp/pp/dp, virtual stages,
sequence parallelism, recompute policy, the gradient all-reduce's overlap,
GPU, nodes, GPUs per node), the published figure (`metric`: tflops_per_gpu,
tokens_per_sec, iteration_seconds or mfu; `published`) and its `source`.
Comment lines (#) above the header say where the numbers come from.

For each row:
  - the row's GPT (tools/models/make_gpt.py with separate q/k/v so that
    tensor parallelism splits heads; its weight matrices declared but absent,
    --absent-weights) at the row's sequence length, vocabulary and dropout;
  - compiled by cleave-compile as a bf16 AdamW training step with the row's
    recompute policy, sequence parallelism and drawn weights
    (--init-parameters), over the mesh dp x pp x tp with pp = p * v stage
    programs (v chunks per pipeline rank, cut after every l / (p v) layers
    as Megatron lays out its virtual stages) at 2 microbatches, without
    kernel code (--emit=sim); rows with a bucket size overlap the gradient
    all-reduce with the backward (--overlap-collectives);
  - simulated by cleave-sim on the row's GPU preset with the row's nodes,
    replaying the stage programs as the (interleaved) 1F1B schedule of p
    ranks over m = global batch / (dp * microbatch) microbatches. A row with
    p = 1 is compiled at its m microbatches (gradient accumulation, unrolled)
    when m <= 4; otherwise at 1 and 2, and its step at m microbatches is the
    first plus m - 1 times the difference.
The simulated step becomes the row's metric: TFLOP/s per GPU by Narayanan et
al.'s 96 B s l h^2 (1 + s/6h + V/16lh) (it counts the recomputed forward),
tokens per second B s / step, MFU by 72 B s l h^2 (1 + s/6h + V/12lh) over
the bf16 peak, or the step itself. A row's error is the simulated throughput
against the published one (+: the simulator is faster).

--fit SETS are the sets the GPU figures are fitted on; with --search the
A100's bf16 GEMM efficiency (max) and the fused kernels' share of memory
bandwidth are searched for the least mean absolute error over the fit rows
only (a JSON cluster starting from the preset); without it the preset is
taken as it is. --validate SETS are then simulated with the same figures.
Both are printed row by row, with the mean and largest absolute error of the
fit and the validation rows apart. Rows Cleave cannot lay out as published
(an axis it has not built, a GPU without a preset) are listed as skipped with
the reason.

--planner runs the planner (cleave-compile --auto within the GPU's memory)
on each row's model, GPUs and global batch, compiles its choice the same way
and prints both layouts' simulated throughput and the search's time.

    calibrate.py --fit megatron-sc21-table1 --validate nemo-megatron-gpt3,mt-nlg-530b
        [--rows SET:1,2,...] [--search] [--gpu KEY=VALUE] [--planner]
        [--jobs N] [--work DIR] [--reuse] [--build build] [--max-fit-error PERCENT]
"""

import argparse
import concurrent.futures
import csv
import glob
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETS_DIR = os.path.join(ROOT, "test", "benchmarks", "calibration")

# The GPUs the calibration sets name: the cluster preset that describes
# their nodes and their memory for the planner.
GPUS = {
    "A100-80GB": ("dgx-a100-80gb", "80G"),
    "H100-80GB": ("dgx-h100", "80G"),
    "H200-141GB": ("hgx-h200", "141G"),
}
METRICS = ("tflops_per_gpu", "tokens_per_sec", "iteration_seconds", "mfu")
RECOMPUTE = ("none", "selective", "full")
INTEGERS = ("nodes", "gpus_per_node", "layers", "hidden_size", "attention_heads", "seq_length", "vocab",
            "global_batch", "micro_batch", "tp", "pp", "dp", "virtual_stages", "sequence_parallel")
COLUMNS = ("name", "source", "gpu", "recompute", "grad_overlap_bucket_mb", "dropout", "metric", "published",
           "notes") + INTEGERS
# Launch settings of axes Cleave has not built: a row that sets one to
# anything but its neutral value is skipped.
UNBUILT = {"cp": "1", "ep": "1", "precision": "bf16"}

COMPILE = ["--train", "--loss=cross_entropy:logits,labels", "--optimizer=adamw", "--precision=bf16",
           "--init-parameters=normal:0.02",
           # Attention spelled out as bf16 GEMMs and a softmax, as Megatron
           # ran it (Cleave's fused CUDA attention kernels are f32).
           "--no-fused-attention"]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit", default="", help="comma-separated calibration sets to fit on")
    ap.add_argument("--validate", default="", help="comma-separated calibration sets to validate on")
    ap.add_argument("--rows", action="append", default=[], metavar="SET:1,2",
                    help="1-based rows of a set to run (default: all); repeatable")
    ap.add_argument("--search", action="store_true",
                    help="search the bf16 GEMM efficiency and kernel bandwidth share on the fit sets")
    ap.add_argument("--gpu", action="append", default=[], metavar="KEY=VALUE",
                    help="override a field of the preset's gpu (e.g. kernel_bandwidth_fraction=0.8)")
    ap.add_argument("--chunks", type=int, default=0, help="virtual stages per pipeline rank (default: the row's)")
    ap.add_argument("--microbatch-size", type=int, default=0, help="(default: the row's)")
    ap.add_argument("--planner", action="store_true",
                    help="also run cleave-compile --auto on each row and simulate its choice beside the row's layout")
    ap.add_argument("--jobs", type=int, default=1, help="compiles and simulations at once")
    ap.add_argument("--max-fit-error", type=float, default=None, metavar="PERCENT",
                    help="exit 1 if the fit rows' mean absolute error exceeds this")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--reuse", action="store_true",
                    help="keep plans compiled by the same command in --work from an earlier run")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    if not args.fit and not args.validate:
        ap.error("name at least one calibration set with --fit or --validate")
    return args


def set_path(name):
    """The CSV of calibration set `name`: a path, a file of SETS_DIR, or the
    one file there whose name contains it."""
    if os.path.isfile(name):
        return name
    exact = os.path.join(SETS_DIR, name if name.endswith(".csv") else name + ".csv")
    if os.path.isfile(exact):
        return exact
    found = sorted(glob.glob(os.path.join(SETS_DIR, "*%s*.csv" % name)))
    if len(found) != 1:
        raise SystemExit("calibrate.py: no single calibration set matches '%s' in %s (%s)" % (
            name, SETS_DIR, ", ".join(os.path.basename(f) for f in found) or "none"))
    return found[0]


def load_set(name, keep):
    path = set_path(name)
    label = os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        reader = csv.DictReader(l for l in f if not l.startswith("#"))
        rows = list(reader)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SystemExit("calibrate.py: %s lacks the columns %s" % (path, ", ".join(missing)))
    for i, row in enumerate(rows, 1):
        row["set"], row["index"] = label, i
        for key in INTEGERS:
            least = 0 if key == "sequence_parallel" else 1
            if not re.fullmatch(r"[0-9]+", row[key] or "") or int(row[key]) < least:
                raise SystemExit("calibrate.py: %s row %d (%s): '%s' must be an integer of at least %d (got '%s')" % (
                    path, i, row["name"], key, least, row[key]))
        for key in ("published",) + (("dropout",) if row["dropout"] else ()):
            try:
                float(row[key])
            except ValueError:
                raise SystemExit("calibrate.py: %s row %d (%s): '%s' must be a number (got '%s')" % (
                    path, i, row["name"], key, row[key]))
    if keep is not None:
        rows = [r for r in rows if r["index"] in keep]
    return label, rows


def row_keep(args):
    """--rows SET:1,2 as {set name or prefix: {1, 2}}."""
    keep = {}
    for spec in args.rows:
        name, _, idx = spec.rpartition(":")
        if not name or not idx:
            raise SystemExit("calibrate.py: --rows expects SET:1,2,... (got '%s')" % spec)
        keep[name] = {int(x) for x in idx.split(",")}
    return keep


def unexpressible(row):
    """Why Cleave cannot lay out `row` as published, or None."""
    for key, neutral in UNBUILT.items():
        if row.get(key) not in (None, "", neutral):
            return "%s=%s: not built in Cleave" % (key, row[key])
    if row["gpu"] not in GPUS:
        return "no cluster preset for GPU %s" % row["gpu"]
    if row["recompute"] not in RECOMPUTE:
        return "recompute policy '%s' unknown" % row["recompute"]
    if row["metric"] not in METRICS:
        return "metric '%s' unknown" % row["metric"]
    l, t, p, dp, v = (int(row[k]) for k in ("layers", "tp", "pp", "dp", "virtual_stages"))
    if t * p * dp != int(row["nodes"]) * int(row["gpus_per_node"]):
        return "tp x pp x dp = %d is not the %s x %s GPUs" % (t * p * dp, row["nodes"], row["gpus_per_node"])
    if l % (p * v):
        return "%d layers do not cut evenly into %d x %d stages" % (l, p, v)
    if int(row["global_batch"]) % (dp * int(row["micro_batch"])):
        return "global batch %s is not a multiple of dp x microbatch" % row["global_batch"]
    if int(row["attention_heads"]) % t:
        return "%s heads do not split over tp=%d" % (row["attention_heads"], t)
    return None


def row_layout(row, args):
    """The row's layout as published (--microbatch-size and --chunks may
    override)."""
    p, dp = int(row["pp"]), int(row["dp"])
    b = args.microbatch_size or int(row["micro_batch"])
    v = args.chunks if args.chunks and p > 1 else int(row["virtual_stages"])
    bucket = row.get("grad_overlap_bucket_mb") or None
    return dict(t=int(row["tp"]), p=p, dp=dp, b=b, m=int(row["global_batch"]) // (dp * b), v=v,
                recompute=row["recompute"], sp=row["sequence_parallel"] == "1", zero=0,
                bucket=float(bucket) if bucket else None)


def model_args(row):
    return ["--layers", row["layers"], "--d-model", row["hidden_size"], "--heads", row["attention_heads"],
            "--seq", row["seq_length"], "--vocab", row["vocab"], "--separate-qkv", "--absent-weights",
            "--dropout", row["dropout"] or "0"]


class Runner:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.join(args.build, "bin")
        self.work = args.work or tempfile.mkdtemp(prefix="cleave-calibrate-")
        os.makedirs(self.work, exist_ok=True)

    def run(self, cmd, what, row):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("%s %s: %s failed:\n%s\n%s" % (row["set"], row["name"], what, " ".join(cmd), r.stderr))
        return r

    def build(self, row, layout, tag, microbatches, extra):
        name = os.path.join(self.work, "%s-%s-%s-m%d" % (row["set"], row["name"], tag, microbatches))
        dp, b = layout["dp"], layout["b"]
        gen = [self.args.python, os.path.join(ROOT, "tools", "models", "make_gpt.py")] + model_args(row) + [
            "--batch", str(microbatches * dp * b), "-o", name + ".onnx"]
        cmd = [os.path.join(self.bin, "cleave-compile"), name + ".onnx"] + COMPILE + [
            "--recompute=" + layout["recompute"], "--emit=sim", "--microbatches=%d" % microbatches,
            "-o", name + ".cleave"] + extra
        if layout["sp"]:
            cmd.append("--sequence-parallel")
        if layout["zero"]:
            cmd.append("--zero=%d" % layout["zero"])
        if layout.get("bucket") is not None:
            cmd += ["--overlap-collectives", "--bucket-mb=%g" % layout["bucket"]]
        stamp = name + ".cmd"
        key = json.dumps([gen, cmd])
        if self.args.reuse and os.path.exists(name + ".cleave") and os.path.exists(stamp):
            with open(stamp) as f:
                if f.read() == key:
                    return name + ".cleave"
        self.run(gen, "make_gpt.py", row)
        self.run(cmd, "cleave-compile", row)
        with open(stamp, "w") as f:
            f.write(key)
        return name + ".cleave"

    def compile(self, row, layout, tag="published"):
        """Compiles the row's plans at `layout`; returns how to simulate them."""
        l = int(row["layers"])
        t, p, dp, m, v = (layout[k] for k in ("t", "p", "dp", "m", "v"))

        def mesh(axes):
            return ",".join("%s=%d" % (k, x) for k, x in axes if x > 1) or "dp=1"

        start = time.time()
        if p > 1:
            stages = p * v
            per = l // stages
            cut = ["h%d" % (per * (i + 1) - 1) for i in range(stages - 1)]
            schedule = "interleaved:%d" % v if v > 1 else "1f1b"
            plans = [(self.build(row, layout, tag, 2,
                                 ["--mesh", mesh([("dp", dp), ("pp", stages), ("tp", t)]), "--schedule=1f1b",
                                  "--stage-boundaries=" + ",".join(cut)]),
                      "%s,pp=%d,microbatches=%d" % (schedule, p, m))]
        else:
            axes = ["--mesh", mesh([("dp", dp), ("tp", t)])]
            # Gradient accumulation is unrolled: up to 4 microbatches compile
            # whole, more are extrapolated from 1 and 2.
            plans = ([(self.build(row, layout, tag, m, axes), None)] if m <= 4 else
                     [(self.build(row, layout, tag, 1, axes), None), (self.build(row, layout, tag, 2, axes), None)])
        return dict(row=row, layout=layout, plans=plans, compile=time.time() - start)

    def cluster_file(self, row, gpu):
        """A cluster description: the row's preset and nodes with `gpu`'s
        fields."""
        preset = GPUS[row["gpu"]][0]
        desc = {"preset": preset, "nodes": int(row["nodes"]), "gpu": gpu}
        if int(row["gpus_per_node"]) != 8:
            desc["gpus_per_node"] = int(row["gpus_per_node"])
        text = json.dumps(desc, sort_keys=True)
        path = os.path.join(self.work, "cluster-%s.json" % hashlib.sha1(text.encode()).hexdigest()[:16])
        if not os.path.exists(path):
            # Simulations at once may want the same file: each writes its own
            # copy and renames it into place.
            tmp = "%s.%d" % (path, threading.get_ident())
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        return path

    def simulate(self, c, gpu):
        row, layout = c["row"], c["layout"]
        cluster = self.cluster_file(row, gpu)
        steps, report = [], ""
        for plan, schedule in c["plans"]:
            cmd = [os.path.join(self.bin, "cleave-sim"), plan, "--cluster", cluster, "--trace-commands=false"]
            if schedule:
                cmd.append("--schedule=" + schedule)
            r = self.run(cmd, "cleave-sim", row)
            steps.append(float(re.search(r"step time ([0-9.]+) ms", r.stdout).group(1)) / 1e3)
            report = report or r.stdout
        step = steps[0] if len(steps) == 1 else steps[0] + (layout["m"] - 1) * (steps[1] - steps[0])
        bubble = re.search(r"simulated bubble ([0-9.]+)%", report)
        return dict(step=step, bubble=float(bubble.group(1)) if bubble else 0.0)


def metric_of(row, step):
    """The row's metric for a step of `step` seconds."""
    l, h, s, V = (int(row[k]) for k in ("layers", "hidden_size", "seq_length", "vocab"))
    B, n = int(row["global_batch"]), int(row["nodes"]) * int(row["gpus_per_node"])
    kind = row["metric"]
    if kind == "iteration_seconds":
        return step
    if kind == "tokens_per_sec":
        return B * s / step
    if kind == "tflops_per_gpu":
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / step / n / 1e12
    peak = {"A100-80GB": 312e12, "H100-80GB": 989.4e12, "H200-141GB": 989.4e12}[row["gpu"]]
    return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / step / n / peak


def error_of(row, step):
    """Simulated throughput against the published one (+: faster)."""
    pub, sim = float(row["published"]), metric_of(row, step)
    return pub / sim - 1 if row["metric"] == "iteration_seconds" else sim / pub - 1


def parse_gpu(items):
    gpu = {}
    for item in items:
        k, _, v = item.partition("=")
        gpu[k] = float(v)
    return gpu


def describe(x):
    return "t=%d p=%d dp=%d v=%d b=%d m=%d %s%s%s%s" % (
        x["t"], x["p"], x["dp"], x["v"], x["b"], x["m"], x["recompute"], " sp" if x["sp"] else "",
        " zero=%d" % x["zero"] if x["zero"] else "", " overlap:%gM" % x["bucket"] if x.get("bucket") is not None else "")


def plan_row(runner, row):
    """cleave-compile --auto on the row's model (its batch symbolic), GPUs
    and global batch within the GPU's memory: the chosen layout, its
    predicted step and the search's time."""
    args = runner.args
    name = os.path.join(runner.work, "%s-%s-auto.onnx" % (row["set"], row["name"]))
    runner.run([args.python, os.path.join(ROOT, "tools", "models", "make_gpt.py")] + model_args(row) +
               ["--batch", "1", "--dynamic-batch", "-o", name], "make_gpt.py", row)
    preset, memory = GPUS[row["gpu"]]
    cmd = [os.path.join(runner.bin, "cleave-compile"), name] + COMPILE + [
        "--auto", "--global-batch", row["global_batch"], "--cluster", "%s:%s" % (preset, row["nodes"]),
        "--max-memory=" + memory, "--emit=none"]
    start = time.time()
    r = runner.run(cmd, "cleave-compile --auto", row)
    seconds = time.time() - start
    chose = re.search(r"--auto chose (.*) \(predicted step ([0-9.]+) ms", r.stderr)
    opts, predicted = chose.group(1), float(chose.group(2)) / 1e3
    get = lambda pattern, default: int(re.search(pattern, opts).group(1)) if re.search(pattern, opts) else default
    t, p = get(r"tp=(\d+)", 1), get(r"pp=(\d+)", 1)
    dp = int(row["nodes"]) * int(row["gpus_per_node"]) // (t * p)
    m = get(r"--microbatches=(\d+)", 1)
    layout = dict(t=t, p=p, dp=dp, m=m, b=int(row["global_batch"]) // (dp * m), v=get(r"interleaved:(\d+)", 1),
                  recompute=re.search(r"--recompute=(\w+)", opts).group(1) if "--recompute" in opts else "none",
                  sp="--sequence-parallel" in opts, zero=get(r"--zero=(\d+)", 0),
                  bucket=float(re.search(r"--bucket-mb=([0-9.]+)", opts).group(1))
                  if "--overlap-collectives" in opts else None)
    return layout, predicted, seconds, opts


def pmap(args, fn, items):
    if args.jobs <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        return list(pool.map(fn, items))


def summary(label, errs):
    if not errs:
        return "%s: no rows" % label
    return "%s: mean absolute error %.1f%%, largest %.1f%% over %d rows" % (
        label, 100 * sum(map(abs, errs)) / len(errs), 100 * max(map(abs, errs)), len(errs))


def main(argv=None):
    args = parse_args(argv)
    runner = Runner(args)
    keep = row_keep(args)
    groups = []  # (role, rows)
    used = set()
    for role, names in (("fit", args.fit), ("validation", args.validate)):
        rows = []
        for name in filter(None, names.split(",")):
            key = next((k for k in keep if k == name or k in os.path.basename(set_path(name))), None)
            used.add(key)
            rows += load_set(name, keep.get(key))[1]
        groups.append((role, rows))
    for key in keep:
        if key not in used:
            raise SystemExit("calibrate.py: --rows names '%s', which is not among the --fit or --validate sets" % key)

    skipped, todo = [], []
    for role, rows in groups:
        for row in rows:
            why = unexpressible(row)
            if why:
                skipped.append((role, row, why))
            else:
                todo.append((role, row))

    def compile_one(item):
        role, row = item
        c = runner.compile(row, row_layout(row, args))
        c["role"] = role
        print("compiled %s %s in %.1f s" % (row["set"], row["name"], c["compile"]), file=sys.stderr, flush=True)
        return c

    compiled = pmap(args, compile_one, todo)

    if args.planner:
        print("| set | run | published layout | simulated | planner's choice | predicted | simulated | vs published | search s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for c in compiled:
            row = c["row"]
            mine_layout, predicted, seconds, opts = plan_row(runner, row)
            print("planned %s %s in %.1f s: %s" % (row["set"], row["name"], seconds, opts), file=sys.stderr, flush=True)
            paper = runner.simulate(c, {})
            mine = runner.simulate(runner.compile(row, mine_layout, tag="auto"), {})
            print("| %s | %s | %s | %.4g | %s | %.4g | %.4g | %+.1f%% | %.1f |" % (
                row["set"], row["name"], describe(c["layout"]), metric_of(row, paper["step"]),
                describe(mine_layout), metric_of(row, predicted), metric_of(row, mine["step"]),
                100 * (paper["step"] / mine["step"] - 1), seconds), flush=True)
        return 0

    gpu = parse_gpu(args.gpu)
    fit_rows = [c for c in compiled if c["role"] == "fit"]
    if args.search:
        if not fit_rows:
            raise SystemExit("calibrate.py: --search needs fit rows (--fit)")
        best = None
        effs = [round(0.6 + 0.025 * i, 3) for i in range(13)]  # 0.600 .. 0.900
        # Fused kernels: 60% to 85% of HBM bandwidth (a streaming kernel on an
        # A100 reaches about 85%, BabelStream's triad).
        for eff, share in itertools.product(effs, [0.6, 0.7, 0.8, 0.85]):
            cand = dict(gpu, kernel_bandwidth_fraction=share)
            cand["gemm_efficiency"] = {"half": {"max": eff, "half_gflops": 2}}
            errs = [abs(error_of(c["row"], r["step"])) for c, r in
                    zip(fit_rows, pmap(args, lambda c: runner.simulate(c, cand), fit_rows))]
            mae = sum(errs) / len(errs)
            print("fit: gemm max %.3f, kernel bandwidth %.2f: mean absolute error %.1f%%, largest %.1f%%" % (
                eff, share, 100 * mae, 100 * max(errs)), file=sys.stderr, flush=True)
            if best is None or mae < best[0]:
                best = (mae, cand)
        gpu = best[1]
        print("best: %s" % json.dumps(gpu))

    results = pmap(args, lambda c: runner.simulate(c, gpu), compiled)
    print("| role | set | run | layout | metric | published | simulated | error | step s | bubble | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errs = {"fit": [], "validation": []}
    for c, res in zip(compiled, results):
        row = c["row"]
        err = error_of(row, res["step"])
        errs[c["role"]].append(err)
        print("| %s | %s | %s | %s | %s | %s | %.4g | %+.1f%% | %.3f | %.1f%% | %.1f |" % (
            c["role"], row["set"], row["name"], describe(c["layout"]), row["metric"], row["published"],
            metric_of(row, res["step"]), 100 * err, res["step"], res["bubble"], c["compile"]), flush=True)
    for role, row, why in skipped:
        print("skipped (%s) %s %s: %s" % (role, row["set"], row["name"], why))
    print(summary("fit", errs["fit"]))
    print(summary("validation", errs["validation"]))
    fit = errs["fit"]
    if args.max_fit_error is not None and fit and 100 * sum(map(abs, fit)) / len(fit) > args.max_fit_error:
        print("calibrate.py: the fit error is above %g%%" % args.max_fit_error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
