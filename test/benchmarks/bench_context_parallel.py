#!/usr/bin/env python3
"""Activation memory per rank under context parallelism, from the plans.

For a 4-layer GPT (d = 256, 8 heads, batch 1, vocabulary 256; ONNX Attention
nodes, so no [T, T] mask constant; weights declared but absent and drawn
at compile time) at T = 2,048 ... 131,072 tokens, compiles the AdamW
training step at cp = 1, 2, 4, 8 (--mesh cp=N) with each attention
partitioning (--context-parallel=all-to-all, ring) and --report, and
prints, per (T, cp, partitioning):
  - the activations each rank keeps from forward for backward (the plan's
    memory planner, bytes held);
  - that figure against cp = 1's divided by cp (1.00 = the sequence split
    divides every kept activation);
  - Korthikanti et al.'s per-layer formula with fused attention (the
    scores term gone), 34 s b h per layer at 16 bits with dropout masks,
    taken at s / cp and at 4 bytes per element (this model is fp32 and
    has no dropout), times the layers, beside Cleave's figure;
  - the bytes each rank sends per step for attention: all-to-all's
    all_to_alls (REFERENCE.md: 4 per attention forward, each
    b s h / cp (cp - 1) / cp; the backward exchanges 5 operands in and 3
    results out), the ring's collective_permutes (k and v, each
    b s h_kv / cp, cp - 1 times forward; k, v, dk and dv cp - 1 times
    backward and dk, dv once more).

    bench_context_parallel.py [--build build] [--seqs 2048,8192,32768,131072]
        [--cps 1,2,4,8] [--modes all-to-all,ring]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

LAYERS, D, HEADS, VOCAB = 4, 256, 8, 256


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    p.add_argument("--build", default=os.path.join(root, "build"))
    p.add_argument("--seqs", default="2048,8192,32768,131072")
    p.add_argument("--cps", default="1,2,4,8")
    p.add_argument("--modes", default="all-to-all,ring")
    args = p.parse_args()
    compile_ = os.path.join(args.build, "bin", "cleave-compile")
    seqs = [int(s) for s in args.seqs.split(",")]
    cps = [int(c) for c in args.cps.split(",")]
    modes = args.modes.split(",")
    print("%8s %3s %10s %22s %12s %22s %8s %16s" % (
        "T", "cp", "attention", "activations per rank", "x cp / cp=1",
        "formula (fused, fp32)", "ratio", "attention bytes"))
    with tempfile.TemporaryDirectory(prefix="cleave-cp-") as work:
        for seq in seqs:
            model = os.path.join(work, "gpt-%d.onnx" % seq)
            subprocess.run([sys.executable, os.path.join(root, "tools", "models", "make_gpt.py"),
                            "--layers", str(LAYERS), "--d-model", str(D), "--heads", str(HEADS),
                            "--seq", str(seq), "--vocab", str(VOCAB), "--batch", "1",
                            "--attention-op", "--absent-weights", "-o", model],
                           check=True, stdout=subprocess.DEVNULL)
            base = None
            for cp in cps:
                for mode in (modes if cp > 1 else ["-"]):
                    cmd = [compile_, model, "--train", "--loss=cross_entropy:logits,labels",
                           "--optimizer=adamw", "--init-parameters=normal:0.02", "--report",
                           "--emit=none", "-o", os.devnull]
                    if cp > 1:
                        cmd += ["--mesh", "cp=%d" % cp, "--context-parallel=" + mode]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stderr
                    held = int(re.search(r"^\s+activations\s+(\d+)", out, re.M).group(1))
                    sent = sum(int(m.group(1)) for m in re.finditer(
                        r"^\s+cp\s+(?:all_to_all|collective_permute)\s+\d+\s+(\d+)", out, re.M))
                    if base is None:
                        base = held * cp
                    formula = 34 * (seq // cp) * 1 * D * LAYERS * 2
                    print("%8d %3d %10s %22d %12.3f %22d %8.3f %16s" % (
                        seq, cp, mode, held, held * cp / base, formula, held / formula,
                        sent if cp > 1 else "-"))
            os.remove(model)


if __name__ == "__main__":
    main()
