#!/usr/bin/env python3
"""A mixture-of-experts layer's training step: grouped expert GEMMs against
the gathered weights per row, in one run.

One MoE layer as transformers' "batched_mm" experts export it
(tools/models/make_moe.py: a softmax router, top-k, SwiGLU experts, the
weights gathered per routed row and multiplied as a batched
matrix-vector product), compiled twice by cleave-compile into an AdamW
training step on an MSE loss:

  - grouped (the default): --cleave-recognize-composites makes each
    gathered-weights product one cleave.grouped_matmul, a GroupedGemm
    command (rows sorted by expert, one GEMM per expert);
  - gathered (--no-recognize-composites): the program as exported, a copy
    of its expert's weights per routed row, and the scatter-add of their
    gradients.

Each plan runs `cleave-run --synthetic` for --steps steps (the median step
time after the first two). Prints the step time and the plan's arena
(cleave-compile --print-stats: the peak of live bytes the plan holds),
grouped against gathered, and the grouped step's time split by what each
command computes (cleave-run --profile-json): the router (its GEMM,
softmax and top-k), the expert GEMMs (GroupedGemm commands), and the rest
(dispatch and combine: copies of rows, weighting, sums; and the
optimizer). Threads: OMP_NUM_THREADS as set, else every core.

    bench_moe.py [--build build] [--tokens 4096] [--d-model 512]
        [--intermediate 64] [--experts 8] [--top-k 2] [--steps 6]
"""

import argparse
import json
import os
import re
import sys
import tempfile

import benchlib
from benchlib import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--tokens", type=int, default=4096)
ap.add_argument("--d-model", type=int, default=512)
ap.add_argument("--intermediate", type=int, default=64)
ap.add_argument("--experts", type=int, default=8)
ap.add_argument("--top-k", type=int, default=2)
ap.add_argument("--steps", type=int, default=6)
ap.add_argument("--work", default=None)
args = ap.parse_args()
BIN = os.path.join(args.build, "bin")
WORK = args.work or tempfile.mkdtemp(prefix="cleave-bench-moe-")
os.makedirs(WORK, exist_ok=True)


def compile_plan(model, out, extra):
    arena, text = benchlib.compile_plan(BIN, model, out, ["--train", "--loss=mse:y,target",
                                                          "--optimizer=adamw"] + extra)
    grouped = re.search(r"(\d+) grouped gemms", text)
    return arena, int(grouped[1]) if grouped else 0


def step_ms(plan, profile=None):
    return benchlib.step_ms(BIN, plan, args.steps, ["--profile-json", profile] if profile else [])


model = os.path.join(WORK, "moe.onnx")
run([sys.executable, os.path.join(ROOT, "tools", "models", "make_moe.py"), "--tokens", str(args.tokens),
     "--d-model", str(args.d_model), "--intermediate", str(args.intermediate), "--experts",
     str(args.experts), "--top-k", str(args.top_k), "-o", model])
result = {}
profile = os.path.join(WORK, "grouped-profile.json")
for name, extra in (("grouped", []), ("gathered", ["--no-recognize-composites"])):
    plan = os.path.join(WORK, "moe-%s.cleave" % name)
    arena, grouped = compile_plan(model, plan, extra)
    if (name == "grouped") != (grouped > 0):
        sys.exit("the %s plan has %d grouped GEMM commands" % (name, grouped))
    result[name] = (step_ms(plan, profile if name == "grouped" else None), arena)

label = "MoE layer: %d experts, top-%d, %d tokens, d=%d, expert intermediate %d, AdamW step" % (
    args.experts, args.top_k, args.tokens, args.d_model, args.intermediate)
(gt, ga), (st, sa) = result["grouped"], result["gathered"]
print("| layer | grouped ms | gathered ms | speedup | grouped arena MiB | gathered arena MiB | arena ratio |")
print("|---|---|---|---|---|---|---|")
print("| %s | %.1f | %.1f | %.2fx | %.1f | %.1f | %.3f |" % (label, gt, st, st / gt, ga / 2**20, sa / 2**20,
                                                          ga / sa))

# The grouped step by part: each command's mean milliseconds per step.
# The router is its forward GEMM (tokens x experts x d), softmax and top-k
# kernels and their gradients' (GEMMs of the router's weight shape).
prof = json.load(open(profile))
parts = {"router": 0.0, "expert GEMMs": 0.0, "dispatch, combine, optimizer": 0.0}
T, E, D = args.tokens, args.experts, args.d_model
router = re.compile(r"softmax|top_k|^M=%d N=%d K=%d$|^M=%d N=%d K=%d$|^M=%d N=%d K=%d$" % (
    T, E, D, E, D, T, T, D, E))
for c in prof["commands"]:
    ms, kind, text = c["ms"], c["kind"], c["label"]
    if kind == "grouped_gemm":
        parts["expert GEMMs"] += ms
    elif router.search(text):
        parts["router"] += ms
    else:
        parts["dispatch, combine, optimizer"] += ms
total = sum(parts.values())
print()
print("| grouped step, by part (cleave-run --profile-json) | ms | share |")
print("|---|---|---|")
for k, v in parts.items():
    print("| %s | %.1f | %.0f%% |" % (k, v, 100 * v / total if total else 0))
print("threads: OMP_NUM_THREADS=%s, %d cores" % (os.environ.get("OMP_NUM_THREADS", "(unset)"), os.cpu_count()))
