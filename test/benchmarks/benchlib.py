"""What the A-against-B benchmarks share (bench_attention.py, bench_moe.py):
running a tool, a plan's arena from cleave-compile --print-stats, and the
median step time of a training plan run by cleave-run --synthetic."""

import json
import os
import re
import statistics
import subprocess
import sys


def run(cmd):
    """Runs `cmd`; its stdout and stderr, or exits with them on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout + r.stderr


def compile_plan(bin_dir, model, out, extra):
    """Compiles `model` into `out`; the plan's arena bytes and the
    --print-stats text."""
    text = run([os.path.join(bin_dir, "cleave-compile"), model, "--print-stats", "-o", out] + extra)
    m = re.search(r"arena (\d+) bytes", text)
    if not m:
        sys.exit("cannot read the arena from cleave-compile --print-stats:\n" + text)
    return int(m[1]), text


def step_ms(bin_dir, plan, steps, extra=()):
    """The median step time of `steps` synthetic steps, after the first two."""
    log = plan + ".jsonl"
    run([os.path.join(bin_dir, "cleave-run"), plan, "--synthetic", "--steps", str(steps),
         "--log-every", "1", "--log-json", log] + list(extra))
    times = [json.loads(line)["step_ms"] for line in open(log)][2:]
    return statistics.median(times)
