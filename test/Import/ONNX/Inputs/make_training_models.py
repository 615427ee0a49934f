#!/usr/bin/env python3
"""Writes the ONNX models of the ai.onnx.preview.training import tests.

usage: make_training_models.py OUTDIR
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
F = TensorProto.FLOAT
I64 = TensorProto.INT64
TRAINING = "ai.onnx.preview.training"


def save(name, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid(TRAINING, 1)])
    model.ir_version = 8
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# Nesterov momentum on two tensors.
save("momentum", [
    helper.make_node("Momentum", ["r", "t", "x1", "x2", "g1", "g2", "v1", "v2"],
                     ["x1n", "x2n", "v1n", "v2n"], name="mom", domain=TRAINING,
                     alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.01)],
    [vi("r", F, []), vi("t", I64, []), vi("x1", F, [2]), vi("x2", F, [3]),
     vi("g1", F, [2]), vi("g2", F, [3]), vi("v1", F, [2]), vi("v2", F, [3])],
    [vi("x1n", F, [2]), vi("x2n", F, [3]), vi("v1n", F, [2]), vi("v2n", F, [3])])

# Momentum without its required attributes.
save("momentum_no_mode", [
    helper.make_node("Momentum", ["r", "t", "x", "g", "v"], ["xn", "vn"],
                     name="mom", domain=TRAINING, alpha=0.9, beta=0.5,
                     norm_coefficient=0.0)],
    [vi("r", F, []), vi("t", I64, []), vi("x", F, [2]), vi("g", F, [2]),
     vi("v", F, [2])],
    [vi("xn", F, [2]), vi("vn", F, [2])])

# Gradient of a non-scalar y (differentiated as its sum) evaluated at other
# tensors than xs/zs: the nodes between them and y are imported again.
save("gradient_rebound", [
    helper.make_node("Mul", ["a", "z"], ["c"], name="mul"),
    helper.make_node("Add", ["c", "b"], ["y"], name="add"),
    helper.make_node("Gradient", ["p", "q"], ["dy_da"], name="grad",
                     domain=TRAINING, xs=["a"], zs=["z"], y="y")],
    [vi("a", F, [3]), vi("b", F, [3]), vi("z", F, [3]), vi("p", F, [3]),
     vi("q", F, [3])],
    [vi("y", F, [3]), vi("dy_da", F, [3])])

# Gradient of a tensor that does not exist.
save("gradient_bad_y", [
    helper.make_node("Gradient", ["a"], ["g"], name="grad", domain=TRAINING,
                     xs=["a"], y="nope")],
    [vi("a", F, [])], [vi("g", F, [])])
