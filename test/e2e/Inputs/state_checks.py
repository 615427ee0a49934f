#!/usr/bin/env python3
"""Checks of trained state for train-state.test.

  state_checks.py data DIR                     x.npy for conv_bn.onnx
  state_checks.py onnx-equals-safetensors MODEL.onnx STATE.safetensors NAME...
      each named initializer of MODEL equals the tensor of STATE, and
      differs from its value in the source model given by --source
  state_checks.py untied MODEL.onnx STATE.safetensors NAME
      the nodes of MODEL (checked by onnx.checker) that read the initializer
      NAME, and whether it equals the tensor of STATE
  state_checks.py decay-exempt A.safetensors B.safetensors NAME LR WD
      NAME in A (exempt from weight decay) equals NAME in B (decayed) plus
      LR * WD * its initial value: one AdamW step apart only by the decay
"""

import json
import sys

import numpy as np


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name != "__metadata__" and e["dtype"] == "F32":
            b, end = e["data_offsets"]
            out[name] = np.frombuffer(raw[8 + n + b:8 + n + end],
                                      np.float32).reshape(e["shape"])
    return out


def initializers(path):
    import onnx
    from onnx import numpy_helper
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def main():
    cmd = sys.argv[1]
    if cmd == "data":
        rng = np.random.default_rng(1)
        np.save(sys.argv[2] + "/x.npy",
                rng.standard_normal((8, 2, 3, 3)).astype(np.float32))
        return 0
    if cmd == "onnx-equals-safetensors":
        exported, state = initializers(sys.argv[2]), read_safetensors(sys.argv[3])
        source = initializers(sys.argv[4])
        for name in sys.argv[5:]:
            same = np.array_equal(exported[name], state[name])
            moved = not np.array_equal(exported[name], source[name])
            print("%s: %s the trained state, %s" %
                  (name, "equals" if same else "DIFFERS FROM",
                   "updated" if moved else "NOT UPDATED"))
            if not (same and moved):
                return 1
        return 0
    if cmd == "untied":
        import onnx
        model = onnx.load(sys.argv[2])
        onnx.checker.check_model(model)
        name = sys.argv[4]
        readers = [n.name or "%s#%d" % (n.op_type, i)
                   for i, n in enumerate(model.graph.node) if name in n.input]
        same = np.array_equal(initializers(sys.argv[2])[name],
                              read_safetensors(sys.argv[3])[name])
        print("%s: read by %s; %s the trained state" %
              (name, ", ".join(readers) or "no node",
               "equals" if same else "DIFFERS FROM"))
        return 0 if same and readers else 1
    if cmd == "decay-exempt":
        a, b = read_safetensors(sys.argv[2]), read_safetensors(sys.argv[3])
        name, lr, wd = sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
        source = initializers(sys.argv[7])[name]
        want = b[name] + lr * wd * source
        err = float(np.max(np.abs(a[name] - want)))
        print("%s: exempt - decayed - lr*wd*p0 = %.1e" % (name, err))
        return 0 if err < 1e-6 else 1
    print("unknown command", cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
