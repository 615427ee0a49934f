"""Writes an ONNX MLP of LAYERS equal layers, h(i+1) = tanh(h(i) W(i) + b(i)),
x and out [B, D], nodes named after their layer ("l2.tanh") so that
--stage-boundaries can cut after each layer:

  make_mlp.py OUT.onnx [LAYERS] [B] [D]
"""
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def main(out, layers=4, b=64, d=256):
    rng = np.random.default_rng(0)
    nodes, inits, h = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32), f"l{i}.w"))
        inits.append(numpy_helper.from_array(np.zeros(d, np.float32), f"l{i}.b"))
        nodes.append(helper.make_node("MatMul", [h, f"l{i}.w"], [f"l{i}.mm"], name=f"l{i}.matmul"))
        nodes.append(helper.make_node("Add", [f"l{i}.mm", f"l{i}.b"], [f"l{i}.pre"], name=f"l{i}.bias"))
        h = "out" if i == layers - 1 else f"h{i + 1}"
        nodes.append(helper.make_node("Tanh", [f"l{i}.pre"], [h], name=f"l{i}.tanh"))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [b, d])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
