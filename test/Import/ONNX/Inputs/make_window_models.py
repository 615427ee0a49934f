#!/usr/bin/env python3
"""Conv and pooling nodes with window attributes that libonnx's shape
inference divides by or sizes with: a stride of 0 stopped the compiler with
SIGFPE inside libonnx before the loader checked them (window-attributes.test).

  make_window_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(path, node, with_weight):
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    inits = [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")] if with_weight else []
    graph = helper.make_graph([node], "g", [x], [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    conv = lambda **a: helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **a)
    pool = lambda op, **a: helper.make_node(op, ["x"], ["y"], name="pool1", **a)
    save(os.path.join(out, "conv_stride0.onnx"), conv(strides=[1, 0]), True)
    save(os.path.join(out, "conv_dilation0.onnx"), conv(dilations=[0, 1]), True)
    save(os.path.join(out, "conv_group0.onnx"), conv(group=0), True)
    save(os.path.join(out, "conv_negative_pad.onnx"), conv(pads=[0, 0, -2, 0]), True)
    save(os.path.join(out, "maxpool_stride0.onnx"), pool("MaxPool", kernel_shape=[2, 2], strides=[0, 0]), False)
    save(os.path.join(out, "avgpool_kernel0.onnx"), pool("AveragePool", kernel_shape=[0, 2]), False)
    # The same Conv inside an If branch.
    branch = helper.make_graph([conv(strides=[0, 1])], "then",
                               [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])])
    cond = helper.make_node("Constant", [], ["c"], name="cond",
                            value=numpy_helper.from_array(np.array(True)))
    if_node = helper.make_node("If", ["c"], ["y"], name="if1", then_branch=branch, else_branch=branch)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
    out_vi = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])
    graph = helper.make_graph([cond, if_node], "g", [x], [out_vi],
                              [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, "if_conv_stride0.onnx"))
    # A LayerNormalization of a scalar: its default axis -1 is outside it.
    scalar = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1])
    ln = helper.make_node("LayerNormalization", ["x", "w"], ["y"], name="ln")
    graph = helper.make_graph([ln], "g", [scalar, w], [out_vi])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(out, "layernorm_scalar.onnx"))


if __name__ == "__main__":
    main()
