"""Writes an ONNX MLP whose skip connections cross pipeline stages:

  make_skip_mlp.py OUT.onnx

  h0 = x;  h(i+1) = tanh(h(i) W(i) + b(i))   for layers l0 .. l5
  except  l4 reads h4 + h1   (a skip over three layers)
  out = h6 + h2                             (a skip to the end)

x and the output are [8, 16]; every node is named after its layer
("l3.matmul"), so stage cuts fall between layers and a cut after l1 or l2
leaves h1 and h2 read by later stages. Weights are drawn with a fixed
seed.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

B, D, LAYERS = 8, 16, 6


def main(out):
    rng = np.random.default_rng(3)
    nodes, inits = [], []
    h = "x"
    hs = ["x"]
    for i in range(LAYERS):
        w = numpy_helper.from_array(
            (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32), f"l{i}.w")
        b = numpy_helper.from_array(
            (0.1 * rng.standard_normal(D)).astype(np.float32), f"l{i}.b")
        inits += [w, b]
        src = h
        if i == 4:
            nodes.append(helper.make_node("Add", [h, hs[1]], [f"l{i}.in"], name=f"l{i}.skip"))
            src = f"l{i}.in"
        nodes.append(helper.make_node("MatMul", [src, f"l{i}.w"], [f"l{i}.mm"], name=f"l{i}.matmul"))
        nodes.append(helper.make_node("Add", [f"l{i}.mm", f"l{i}.b"], [f"l{i}.pre"], name=f"l{i}.bias"))
        nodes.append(helper.make_node("Tanh", [f"l{i}.pre"], [f"h{i + 1}"], name=f"l{i}.tanh"))
        h = f"h{i + 1}"
        hs.append(h)
    nodes.append(helper.make_node("Add", [h, hs[2]], ["out"], name="head.skip"))
    graph = helper.make_graph(
        nodes, "skip_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, D])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main(sys.argv[1])
