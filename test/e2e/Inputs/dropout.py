#!/usr/bin/env python3
"""Models and checks of dropout.test.

  dropout.py models OUTDIR   two training-mode Dropouts (ratio 0.25) of one
                             [64, 1024] input, with masks; a ratio of 1; a
                             training_mode that is a graph input
  dropout.py stats DIR       checks the outputs cleave-run wrote to DIR
  dropout.py seeds DIR7 DIR8 the same node's masks at seeds 7 and 8 differ
"""
import os
import sys

import numpy as np


def models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(out, exist_ok=True)
    F = TensorProto.FLOAT

    def save(name, nodes, inputs, outputs, inits=()):
        graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, os.path.join(out, name + ".onnx"))

    def vi(name, elem, shape):
        return helper.make_tensor_value_info(name, elem, shape)

    ratio = numpy_helper.from_array(np.array(0.25, np.float32), "ratio")
    train = numpy_helper.from_array(np.array(True), "train")
    shape = [64, 1024]
    save("two", [helper.make_node("Dropout", ["x", "ratio", "train"], ["y1", "m1"], name="d1"),
                 helper.make_node("Dropout", ["x", "ratio", "train"], ["y2", "m2"], name="d2")],
         [vi("x", F, shape)],
         [vi("y1", F, shape), vi("m1", TensorProto.BOOL, shape),
          vi("y2", F, shape), vi("m2", TensorProto.BOOL, shape)], [ratio, train])
    # Two nodes sharing an int seed, at seeds 7 and 8.
    for seed in (7, 8):
        save("seed%d" % seed,
             [helper.make_node("Dropout", ["x", "ratio", "train"], ["y1", "m1"], name="d1", seed=seed),
              helper.make_node("Dropout", ["x", "ratio", "train"], ["y2", "m2"], name="d2", seed=seed)],
             [vi("x", F, shape)],
             [vi("y1", F, shape), vi("m1", TensorProto.BOOL, shape),
              vi("y2", F, shape), vi("m2", TensorProto.BOOL, shape)], [ratio, train])
    one = numpy_helper.from_array(np.array(1.0, np.float32), "ratio")
    save("ratio_one", [helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], name="drop_all")],
         [vi("x", F, shape)], [vi("y", F, shape)], [one, train])
    save("mode_input", [helper.make_node("Dropout", ["x", "ratio", "mode"], ["y"], name="drop_mode")],
         [vi("x", F, shape), vi("mode", TensorProto.BOOL, [])], [vi("y", F, shape)], [ratio])
    np.save(os.path.join(out, "x.npy"), np.ones(shape, np.float32))


def stats(d):
    y1, m1 = np.load(os.path.join(d, "y1.npy")), np.load(os.path.join(d, "m1.npy"))
    y2, m2 = np.load(os.path.join(d, "y2.npy")), np.load(os.path.join(d, "m2.npy"))
    ok = True

    def check(what, good, detail):
        nonlocal ok
        ok &= bool(good)
        print("%s: %s (%s)" % (what, "ok" if good else "WRONG", detail))

    # 65,536 draws: the standard deviation of a fraction is about 0.0017.
    dropped = 1 - m1.mean()
    check("dropped fraction", abs(dropped - 0.25) < 0.01, "%.4f" % dropped)
    kept = np.unique(y1[m1])
    check("kept values", kept.size == 1 and kept[0] == np.float32(1 / 0.75), kept[:4])
    check("mask", np.array_equal(m1, y1 != 0) and np.array_equal(m2, y2 != 0), "mask == (y != 0)")
    # Independent draws agree with probability f^2 + (1 - f)^2 (0.625 at
    # f = 0.25; the standard deviation of the fraction is about 0.002).
    agree = dropped ** 2 + (1 - dropped) ** 2
    rows = (m1[:, 1:] == m1[:, :-1]).mean()
    check("neighbours along rows", abs(rows - agree) < 0.01, "%.4f agree, independent %.4f" % (rows, agree))
    cols = (m1[1:, :] == m1[:-1, :]).mean()
    check("neighbours along columns", abs(cols - agree) < 0.01, "%.4f agree, independent %.4f" % (cols, agree))
    nodes = (m1 == m2).mean()
    check("two nodes", abs(nodes - agree) < 0.01, "%.4f agree, independent %.4f" % (nodes, agree))
    print("dropout statistics", "ok" if ok else "WRONG")
    sys.exit(0 if ok else 1)


def seeds(a, b):
    """The seed moves a node's mask: the same node at two seeds draws
    independently."""
    m7, m8 = np.load(os.path.join(a, "m1.npy")), np.load(os.path.join(b, "m1.npy"))
    dropped = 1 - m7.mean()
    agree, same = dropped ** 2 + (1 - dropped) ** 2, (m7 == m8).mean()
    good = abs(same - agree) < 0.01
    print("seeds 7 and 8: %.4f agree, independent %.4f: %s" % (same, agree, "ok" if good else "WRONG"))
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    {"models": models, "stats": stats, "seeds": seeds}[sys.argv[1]](*sys.argv[2:])
