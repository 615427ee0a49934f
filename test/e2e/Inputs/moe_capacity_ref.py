#!/usr/bin/env python3
"""numpy reference of a make_moe.py layer (--batch B) with a capacity per
expert and batch row: routes x as the layer does (softmax router, top-k,
weights renormalized), keeps each expert's first C routed rows of each
batch row in row order (token-major, then choice), C = ceil(F * rows per
batch row / E) clamped to [1, rows], and drops the rest; compares the
result with cleave's y, or (--log) the first step's moe.dropped_rows and
moe.expert_load of a training log whose first batch is X with the
reference's counts.

    moe_capacity_ref.py MODEL.onnx X.npy Y.npy FACTOR
    moe_capacity_ref.py MODEL.onnx X.npy --log LOG.jsonl FACTOR
"""
import json
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    model_path, x_path, y_path, factor = sys.argv[1:5]
    log_path = sys.argv[4] if y_path == "--log" else None
    if log_path:
        factor = sys.argv[5]
    factor = float(factor)
    model = onnx.load(model_path)
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    k = int(w["k"][0])
    router = w["router.weight"].astype(np.float64)
    gate_up = w["experts.gate_up_proj"].astype(np.float64)  # E x 2I x D
    down = w["experts.down_proj"].astype(np.float64)        # E x D x I
    experts, two_inter, _ = gate_up.shape
    inter = two_inter // 2
    x = np.load(x_path).astype(np.float64)                  # B x S x D
    batch, seq, d = x.shape
    rows = seq * k
    capacity = min(max(math.ceil(factor * rows / experts), 1), rows)
    want = np.zeros_like(x)
    dropped = 0
    load = np.zeros(experts, dtype=int)
    for b in range(batch):
        logits = x[b] @ router.T
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        ids = np.argsort(-p, axis=-1, kind="stable")[:, :k]
        top = np.take_along_axis(p, ids, axis=-1)
        top /= top.sum(axis=-1, keepdims=True)
        used = np.zeros(experts, dtype=int)
        for t in range(seq):
            for j in range(k):
                e = ids[t, j]
                used[e] += 1
                load[e] += 1
                if used[e] > capacity:
                    dropped += 1
                    continue
                h = gate_up[e] @ x[b, t]
                gate, up = h[:inter], h[inter:]
                act = gate / (1 + np.exp(-gate)) * up
                want[b, t] += top[t, j] * (down[e] @ act)
    if log_path:
        with open(log_path) as f:
            first = json.loads(f.readline())
        got_dropped = first.get("moe.dropped_rows")
        got_load = first.get("moe.expert_load", [[]])[0]
        ok = got_dropped == dropped and got_load == load.tolist()
        print("step 1: dropped %s, load %s: %s the reference's %d, %s"
              % (got_dropped, got_load, "as" if ok else "NOT as", dropped,
                 load.tolist()))
        sys.exit(0 if ok else 1)
    got = np.load(y_path)
    err = float(np.abs(got - want).max())
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-5)
    print("capacity %d of %d rows per expert and batch row: %d of %d routed "
          "rows dropped; max |cleave - reference| %s 1e-4"
          % (capacity, rows, dropped, batch * rows,
             "within" if ok else "ABOVE (%.3g)" % err))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
