#!/usr/bin/env python3
"""The CPU's fused attention against the spelled-out plan, in one run.

Two models, each compiled twice by cleave-compile (the default, where
attention and its gradient are fused commands that hold a tile of the
scores at a time, and --no-fused-attention, where they are GEMMs and a
softmax over the whole B x H x T x T score matrix):

  - one ONNX Attention node (opset 23), q, k, v of 1 x H x T x 64 with a
    causal mask, run forward by `cleave-run --repeat` (the minimum time);
  - the GPT of tools/models/make_gpt.py --attention-op at T tokens, its
    AdamW training step run by `cleave-run --synthetic` (the median step
    time after the first two).

For each it prints the time and the plan's arena (cleave-compile
--print-stats: the peak of live bytes the plan holds), fused against
spelled out. Threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS as set, else
every core.

    bench_attention.py [--build build] [--seq 1024] [--heads 12] [--steps 12]
"""

import argparse
import os
import re
import sys
import tempfile

import benchlib
from benchlib import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--head-size", type=int, default=64)
ap.add_argument("--repeat", type=int, default=20)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--gpt-layers", type=int, default=2)
ap.add_argument("--gpt-d-model", type=int, default=256)
ap.add_argument("--gpt-heads", type=int, default=4)
ap.add_argument("--work", default=None)
args = ap.parse_args()
BIN = os.path.join(args.build, "bin")
WORK = args.work or tempfile.mkdtemp(prefix="cleave-bench-attention-")
os.makedirs(WORK, exist_ok=True)


def compile_plan(model, out, extra):
    return benchlib.compile_plan(BIN, model, out, extra)[0]


def attention_model(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    shape = [1, args.heads, args.seq, args.head_size]
    graph = helper.make_graph(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)],
        "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    onnx.save(model, path)
    rng = np.random.default_rng(0)
    inputs = []
    for n in "qkv":
        p = os.path.join(WORK, n + ".npy")
        np.save(p, rng.standard_normal(shape, dtype=np.float32))
        inputs.append(p)
    return inputs


def forward_ms(plan, inputs):
    text = run([os.path.join(BIN, "cleave-run"), plan, *inputs, "--print-stats", "--warmup", "2",
                "--repeat", str(args.repeat), "--no-output"])
    m = re.search(r"run time: min ([0-9.]+) ms", text)
    if not m:
        sys.exit("cannot read the run time:\n" + text)
    return float(m[1])


def step_ms(plan):
    return benchlib.step_ms(BIN, plan, args.steps)


rows = []
model = os.path.join(WORK, "attention.onnx")
inputs = attention_model(model)
label = "Attention 1x%dx%dx%d causal, forward" % (args.heads, args.seq, args.head_size)
result = {}
for name, extra in (("fused", []), ("spelled out", ["--no-fused-attention"])):
    plan = os.path.join(WORK, "attention-%s.cleave" % name.replace(" ", "-"))
    arena = compile_plan(model, plan, extra)
    result[name] = (forward_ms(plan, inputs), arena)
rows.append((label, result))

gpt = os.path.join(WORK, "gpt.onnx")
run([sys.executable, os.path.join(ROOT, "tools", "models", "make_gpt.py"), "--layers", str(args.gpt_layers),
     "--d-model", str(args.gpt_d_model), "--heads", str(args.gpt_heads), "--seq", str(args.seq),
     "--vocab", "256", "--batch", "1", "--separate-qkv", "--attention-op", "-o", gpt])
label = "GPT %d layers, d=%d, %d heads, T=%d, AdamW step" % (args.gpt_layers, args.gpt_d_model,
                                                             args.gpt_heads, args.seq)
result = {}
for name, extra in (("fused", []), ("spelled out", ["--no-fused-attention"])):
    plan = os.path.join(WORK, "gpt-%s.cleave" % name.replace(" ", "-"))
    arena = compile_plan(gpt, plan, ["--train", "--loss=cross_entropy:logits,labels", "--optimizer=adamw"] + extra)
    result[name] = (step_ms(plan), arena)
rows.append((label, result))

print("| model | fused ms | spelled-out ms | time ratio | fused arena MiB | spelled-out arena MiB | arena ratio |")
print("|---|---|---|---|---|---|---|")
for label, r in rows:
    (ft, fa), (st, sa) = r["fused"], r["spelled out"]
    print("| %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f |" % (label, ft, st, ft / st, fa / 2**20, sa / 2**20, fa / sa))
print("threads: OMP_NUM_THREADS=%s OPENBLAS_NUM_THREADS=%s, %d cores" % (
    os.environ.get("OMP_NUM_THREADS", "(unset)"), os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"), os.cpu_count()))
