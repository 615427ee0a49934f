#!/usr/bin/env python3
"""Helpers for Cleave's end-to-end training tests.

  e2e.py mlp OUT.onnx DATA_DIR      an MLP regression model and its .npy dataset
  e2e.py loss-below FILE.jsonl X    the mean of the last 10 logged losses is below X
                                    and below the mean of the first 10
  e2e.py same-losses A.jsonl B.jsonl  the losses of the steps in both files are bitwise equal
  e2e.py ort-matches MODEL.onnx IN.npy OUT.npy  onnxruntime's output matches OUT.npy
"""

import json
import sys

import numpy as np


def mlp(out, data_dir):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((8, 32)) * 0.3).astype(np.float32)
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
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.zeros(32, np.float32), "b1"),
         numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, out)
    # Target: a smooth function of the inputs the MLP can fit.
    x = rng.uniform(-1, 1, (512, 8)).astype(np.float32)
    y = (np.sin(x[:, :1] * 2) + 0.5 * x[:, 1:2] * x[:, 2:3]).astype(np.float32)
    np.save(data_dir + "/x.npy", x)
    np.save(data_dir + "/target.npy", y)


def losses(path):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(path))]


def main():
    cmd = sys.argv[1]
    if cmd == "mlp":
        mlp(sys.argv[2], sys.argv[3])
    elif cmd == "loss-below":
        ls = [l for _, l in losses(sys.argv[2])]
        k = max(1, min(10, len(ls) // 3))
        first, last, bound = np.mean(ls[:k]), np.mean(ls[-k:]), float(sys.argv[3])
        print("mean loss of the first %d logged steps %.4f, of the last %d %.4f (bound %.4f)"
              % (k, first, k, last, bound))
        sys.exit(0 if last < bound and last < first else 1)
    elif cmd == "same-losses":
        a, b = dict(losses(sys.argv[2])), dict(losses(sys.argv[3]))
        common = sorted(set(a) & set(b))
        diff = [s for s in common if a[s] != b[s]]
        print("%d common steps, %d differ" % (len(common), len(diff)))
        sys.exit(0 if common and not diff else 1)
    elif cmd == "close-losses":
        a, b = dict(losses(sys.argv[2])), dict(losses(sys.argv[3]))
        rtol = float(sys.argv[4])
        common = sorted(set(a) & set(b))
        worst = max((abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) for s in common), default=0.0)
        print("%d common steps, worst relative difference %s %s"
              % (len(common), "within" if worst <= rtol else "ABOVE", sys.argv[4]))
        sys.exit(0 if common and worst <= rtol else 1)
    elif cmd == "larger-by":
        import os
        diff = os.path.getsize(sys.argv[2]) - os.path.getsize(sys.argv[3])
        least, most = int(sys.argv[4]), int(sys.argv[5])
        ok = least <= diff <= most
        print("larger by %s %d and %d bytes" % ("between" if ok else "NOT between", least, most))
        sys.exit(0 if ok else 1)
    elif cmd == "ort-matches":
        import onnxruntime as ort
        sess = ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
        x = np.load(sys.argv[3])
        want = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        got = np.load(sys.argv[4])
        err = float(np.abs(got - want).max())
        print("max |cleave - onnxruntime| = %.3g" % err)
        sys.exit(0 if np.allclose(got, want, rtol=1e-3, atol=1e-5) else 1)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
