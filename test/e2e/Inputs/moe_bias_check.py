#!/usr/bin/env python3
"""Checks --moe-bias-update's expert biases against the step's loads.

    moe_bias_check.py LOG.jsonl CHECKPOINT_DIR RATE

For every step N of the JSON log, the checkpoint CHECKPOINT_DIR/step-N
(run with --save-every 1) holds the biases, one '*.expert_bias' tensor per
row of the log's moe.expert_load (taken in name order: meant for models
whose biases' names sort as their routers do, such as one router): the
biases after step N equal those after step N-1 (zeros before step 1) plus
RATE * sign(mean load - load) of step N's load, in f32, exactly. Prints one
line per step and 'biases as the loads say' when every step has its
checkpoint and matches; exits 1 otherwise."""
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from state_checks import read_safetensors  # noqa: E402


def main():
    log, ckdir, rate = sys.argv[1], sys.argv[2], np.float32(float(sys.argv[3]))
    steps = [json.loads(l) for l in open(log) if l.strip()]
    steps = [s for s in steps if "moe.expert_load" in s]
    ok = bool(steps)
    previous = None
    for s in steps:
        n = s["step"]
        path = os.path.join(ckdir, "step-%d" % n, "model.safetensors")
        if not os.path.exists(path):
            print("step %d: no checkpoint %s" % (n, path))
            ok = False
            continue
        state = read_safetensors(path)
        names = sorted(k for k in state if k.endswith(".expert_bias"))
        load = np.asarray(s["moe.expert_load"], np.float32)
        if len(names) != load.shape[0]:
            print("step %d: %d expert biases for %d routers" %
                  (n, len(names), load.shape[0]))
            ok = False
            continue
        bias = np.stack([state[k] for k in names])
        if previous is None:
            previous = np.zeros_like(bias)
        mean = load.sum(axis=1, keepdims=True) / np.float32(load.shape[1])
        want = (previous + rate * np.sign(mean - load)).astype(np.float32)
        same = bias.shape == want.shape and np.array_equal(bias, want)
        print("step %d: load %s, biases %s%s" % (
            n, load.tolist(), bias.tolist(), "" if same else
            " (want %s)" % want.tolist()))
        ok = ok and same
        previous = bias
    print("biases as the loads say" if ok else "biases DIFFER from the loads")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
