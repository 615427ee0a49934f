#!/usr/bin/env python3
"""Checks the loss curves of mixed-precision training runs (cleave-run
--log-json files, one JSON object per step).

  check_mixed_precision.py agree REF.jsonl LOW.jsonl
      The low-precision curve follows the fp32 one: per step
      |loss_low - loss_ref| <= 0.05 * loss_ref on all but at most 10% of the
      steps (isolated loss spikes on some batches move by more than that in
      either precision), and the medians of the last 10 steps agree within
      3%.
  check_mixed_precision.py overflow RUN.jsonl
      A run forced into overflow survives: the first step is skipped, the
      loss scale backs off (decreases) while steps are skipped, at least a
      quarter of the steps are applied, every loss is finite and the mean of
      the last 5 losses is below the first loss minus 1.
"""
import json
import math
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def agree(ref_path, low_path):
    ref, low = load(ref_path), load(low_path)
    assert len(ref) == len(low) and ref, (len(ref), len(low))
    bad = []
    for r, l in zip(ref, low):
        assert r["step"] == l["step"]
        if not abs(l["loss"] - r["loss"]) <= 0.05 * abs(r["loss"]):
            bad.append((r["step"], r["loss"], l["loss"]))
    allowed = len(ref) // 10
    if len(bad) > allowed:
        sys.exit("loss curves differ by more than 5%% on %d steps (allowed %d): %s"
                 % (len(bad), allowed, bad))
    tail = lambda xs: sorted(x["loss"] for x in xs[-10:])[len(xs[-10:]) // 2]
    if not abs(tail(low) - tail(ref)) <= 0.03 * tail(ref):
        sys.exit("last-10 median loss %.4f vs %.4f" % (tail(low), tail(ref)))
    print("loss curves agree: %d steps, %d outside 5%% (%s), last-10 median %.4f vs %.4f"
          % (len(ref), len(bad), bad, tail(low), tail(ref)))


def overflow(path):
    run = load(path)
    assert run, "empty log"
    if not run[0].get("skipped"):
        sys.exit("the first step was not skipped")
    scales = [r["loss_scale"] for r in run]
    for prev, cur in zip(run, run[1:]):
        if cur.get("skipped") and not cur["loss_scale"] < prev["loss_scale"]:
            sys.exit("step %d skipped without backing off the scale" % cur["step"])
    applied = sum(1 for r in run if not r.get("skipped"))
    if applied < len(run) // 4:
        sys.exit("only %d of %d steps applied" % (applied, len(run)))
    losses = [r["loss"] for r in run]
    if not all(math.isfinite(x) for x in losses):
        sys.exit("non-finite loss: %s" % losses)
    last = sum(losses[-5:]) / 5
    if not last < losses[0] - 1.0:
        sys.exit("loss did not fall: first %.4f, last-5 mean %.4f" % (losses[0], last))
    print("overflow run survived: %d skipped, scale %g -> %g, loss %.4f -> %.4f"
          % (len(run) - applied, scales[0], scales[-1], losses[0], last))


if __name__ == "__main__":
    if sys.argv[1] == "agree":
        agree(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "overflow":
        overflow(sys.argv[2])
    else:
        sys.exit(__doc__)
