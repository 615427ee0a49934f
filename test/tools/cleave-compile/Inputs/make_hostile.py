"""Writes ONNX models that declare more than a machine holds or are deeper
than any real model (resource-limits.test):

  make_hostile.py DIR

  deep.onnx     a chain of 20,000 Relu nodes on a [4] tensor
  huge_out.onnx Expand of a [1] input to a [2^20, 2^18] f32 output (1 TiB)
  huge_tmp.onnx the same Expand summed by ReduceSum to a scalar: the 1 TiB
                tensor is a temporary of one kernel, not a plan buffer
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main(out):
    nodes, prev = [], "x"
    for i in range(20000):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    save(helper.make_graph(
        nodes, "deep", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4])]),
        os.path.join(out, "deep.onnx"))
    dims = [1 << 20, 1 << 18]
    shape = numpy_helper.from_array(np.array(dims, dtype=np.int64), "shape")
    save(helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], "huge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], [shape]),
        os.path.join(out, "huge_out.onnx"))
    save(helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["big"], name="expand"),
         helper.make_node("ReduceSum", ["big"], ["y"], name="sum", keepdims=0)],
        "huge_tmp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape]),
        os.path.join(out, "huge_tmp.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
