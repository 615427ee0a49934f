#!/usr/bin/env python3
"""Checks of --sync (local SGD, DiLoCo, delayed gradient reduction).

  sync_checks.py mlp OUT.onnx DATA_DIR
      a tanh MLP regression model at batch 16 (per rank) and a dataset of
      exactly 32 samples: at dp=2 every step's global batch is the whole
      dataset, so the averaged gradient is the full-batch gradient whatever
      the order the samples are dealt in
  sync_checks.py delayed-sgd MODEL.onnx DATA_DIR LOG.jsonl LR RTOL
      the logged losses equal a numpy (float64) run of delayed SGD on the
      full batch: step 0 applies a zero gradient, step k >= 1 applies the
      gradient computed at step k - 1, and step k logs the loss of the
      parameters it starts from
  sync_checks.py close-params A.safetensors B.safetensors RTOL
      every tensor of A equals B's within RTOL of its largest magnitude
  sync_checks.py differ A.safetensors B.safetensors
      some tensor of A differs from B's
"""

import json
import sys

import numpy as np

from state_checks import read_safetensors


def mlp(out, data_dir):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    w1 = (rng.standard_normal((8, 32)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 1)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="fc1_bias"),
        helper.make_node("Tanh", ["hb"], ["a"], name="act"),
        helper.make_node("MatMul", ["a", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 1])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, out)
    x = rng.uniform(-1, 1, (32, 8)).astype(np.float32)
    y = (np.sin(x[:, :1] * 2) + 0.5 * x[:, 1:2] * x[:, 2:3]).astype(np.float32)
    np.save(data_dir + "/x.npy", x)
    np.save(data_dir + "/target.npy", y)


def loss_and_grads(p, x, t):
    h = x @ p["w1"] + p["b1"]
    a = np.tanh(h)
    y = a @ p["w2"]
    d = y - t
    loss = np.mean(d * d)
    dy = 2.0 * d / d.size
    dw2 = a.T @ dy
    da = dy @ p["w2"].T
    dh = da * (1.0 - a * a)
    return loss, {"w1": x.T @ dh, "b1": dh.sum(0), "w2": dw2}


def delayed_sgd(model, data_dir, log, lr, rtol):
    import onnx
    from onnx import numpy_helper
    p = {t.name: numpy_helper.to_array(t).astype(np.float64)
         for t in onnx.load(model).graph.initializer}
    x = np.load(data_dir + "/x.npy").astype(np.float64)
    t = np.load(data_dir + "/target.npy").astype(np.float64)
    got = [r["loss"] for r in map(json.loads, open(log))]
    pending = {k: np.zeros_like(v) for k, v in p.items()}
    worst = 0.0
    for step, g in enumerate(got):
        loss, grads = loss_and_grads(p, x, t)
        worst = max(worst, abs(g - loss) / abs(loss))
        for k in p:
            p[k] = p[k] - lr * pending[k]
        pending = grads
    print("%d steps of delayed SGD, worst relative difference from numpy %s %g"
          % (len(got), "within" if worst <= rtol else "ABOVE", rtol))
    # Step 2 repeats step 1's loss (the same parameters, the same samples
    # dealt in another order): step 1 applied a zero gradient.
    same = len(got) > 1 and abs(got[1] - got[0]) <= 1e-6 * abs(got[0])
    print("step 2 %s step 1's loss" % ("repeats" if same else "does NOT repeat"))
    sys.exit(0 if got and worst <= rtol and same else 1)


def main():
    cmd = sys.argv[1]
    if cmd == "mlp":
        mlp(sys.argv[2], sys.argv[3])
    elif cmd == "delayed-sgd":
        delayed_sgd(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]),
                    float(sys.argv[6]))
    elif cmd in ("close-params", "differ"):
        a, b = read_safetensors(sys.argv[2]), read_safetensors(sys.argv[3])
        assert sorted(a) == sorted(b), (sorted(a), sorted(b))
        worst = max(float(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-30))
                    for k in a)
        if cmd == "differ":
            print("%d tensors, %s" % (len(a), "some differ" if worst > 0 else "all equal"))
            sys.exit(0 if worst > 0 else 1)
        rtol = float(sys.argv[4])
        print("%d tensors, worst relative difference %s %s"
              % (len(a), "within" if worst <= rtol else "ABOVE", sys.argv[4]))
        sys.exit(0 if worst <= rtol else 1)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
