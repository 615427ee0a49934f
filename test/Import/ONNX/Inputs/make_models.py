#!/usr/bin/env python3
"""Writes the small ONNX models the importer's lit tests read.

usage: make_models.py OUTDIR
Each model is named after what it shows; hostile external-data cases live
in their own folders so their files can escape in different ways.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opset=17, folder=None,
         ir=8, opsets=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)] + list(opsets))
    model.ir_version = ir
    path = os.path.join(folder or OUT, name + ".onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)
    return path


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


F = TensorProto.FLOAT
I64 = TensorProto.INT64

# An MLP: MatMul + Add (broadcast) + Relu + Gemm; w1 is large (resource blob).
rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((16, 128)).astype(np.float32), "w1")
b1 = numpy_helper.from_array(np.zeros(128, np.float32), "b1")
w2 = numpy_helper.from_array(rng.standard_normal((10, 128)).astype(np.float32), "w2")
b2 = numpy_helper.from_array(np.ones(10, np.float32), "b2")
save("mlp", [
    helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
    helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
    helper.make_node("Relu", ["hb"], ["a"], name="relu"),
    helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", transB=1),
], [vi("x", F, [4, 16])], [vi("y", F, [4, 10])], [w1, b1, w2, b2])

# A symbolic batch dimension.
save("symbolic", [helper.make_node("Relu", ["x"], ["y"], name="r")],
     [vi("x", F, ["batch", 3])], [vi("y", F, ["batch", 3])])

# PyTorch-style shape chain: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
c_neg1 = numpy_helper.from_array(np.array([-1], np.int64), "minus_one")
idx0 = numpy_helper.from_array(np.array(0, np.int64), "zero")
ax0 = numpy_helper.from_array(np.array([0], np.int64), "axes0")
save("shape_chain", [
    helper.make_node("Shape", ["x"], ["s"], name="shape"),
    helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
    helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
    helper.make_node("Concat", ["n1", "minus_one"], ["shp"], name="cat", axis=0),
    helper.make_node("Reshape", ["x", "shp"], ["y"], name="reshape"),
], [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], [c_neg1, idx0, ax0])

# Ops the importer does not support, reported together.
save("unsupported", [
    helper.make_node("Unique", ["x"], ["u"], name="unique_1"),
    helper.make_node("Unique", ["x"], ["u2"], name="unique_2"),
    helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
], [vi("x", F, [4])], [vi("u", F, [None]), vi("nz", I64, [1, None])])

# A non-constant Reshape shape.
save("dynamic_reshape", [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
     [vi("x", F, [2, 3]), vi("s", I64, [2])], [vi("y", F, [3, 2])])

# Broadcasting, comparison, select and casts.
save("elementwise", [
    helper.make_node("Mul", ["x", "y"], ["m"], name="mul"),
    helper.make_node("Less", ["m", "x"], ["lt"], name="less"),
    helper.make_node("Where", ["lt", "m", "x"], ["w"], name="where"),
    helper.make_node("Cast", ["w"], ["o"], name="cast", to=TensorProto.FLOAT16),
    helper.make_node("LeakyRelu", ["x"], ["lr"], name="leaky", alpha=0.1),
], [vi("x", F, [2, 3]), vi("y", F, [3])],
    [vi("o", TensorProto.FLOAT16, [2, 3]), vi("lr", F, [2, 3])])

# Softmax, LayerNormalization and reductions.
g = numpy_helper.from_array(np.ones(8, np.float32), "gamma")
bt = numpy_helper.from_array(np.zeros(8, np.float32), "beta")
save("norms", [
    helper.make_node("Softmax", ["x"], ["sm"], name="softmax", axis=-1),
    helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"],
                     name="ln", axis=-1, epsilon=1e-5),
    helper.make_node("ReduceMean", ["x"], ["rm"], name="mean", axes=[1],
                     keepdims=1),
    helper.make_node("ArgMax", ["x"], ["am"], name="argmax", axis=1, keepdims=0),
], [vi("x", F, [4, 8])],
    [vi("sm", F, [4, 8]), vi("ln", F, [4, 8]), vi("rm", F, [4, 1]),
     vi("am", I64, [4])], [g, bt])

# Conv + bias, MaxPool with ceil_mode, AveragePool with padding.
wc = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "wc")
bc = numpy_helper.from_array(np.zeros(4, np.float32), "bc")
save("conv_pool", [
    helper.make_node("Conv", ["x", "wc", "bc"], ["c"], name="conv",
                     pads=[1, 1, 1, 1], strides=[1, 1]),
    helper.make_node("MaxPool", ["c"], ["mp"], name="maxpool",
                     kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    helper.make_node("AveragePool", ["c"], ["ap"], name="avgpool",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
], [vi("x", F, [1, 3, 7, 7])],
    [vi("mp", F, [1, 4, 4, 4]), vi("ap", F, [1, 4, 4, 4])], [wc, bc])

# Losses.
save("loss", [
    helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["l"],
                     name="sce", reduction="mean", ignore_index=-100),
], [vi("logits", F, [4, 10]), vi("labels", I64, [4])], [vi("l", F, [])])

# Old opset (converted to 13 by libonnx).
save("old_opset", [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)],
     [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=11)

# Not a model: random bytes and a truncated model.
with open(os.path.join(OUT, "random.onnx"), "wb") as f:
    f.write(bytes(rng.integers(0, 256, 300, dtype=np.uint8)))
data = open(os.path.join(OUT, "mlp.onnx"), "rb").read()
with open(os.path.join(OUT, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])


# External data: one good case and the hostile ones, each in its own folder.
def external_model(case, location, offset=None, length=None, make_file=None):
    folder = os.path.join(OUT, "ext", case)
    os.makedirs(folder, exist_ok=True)
    t = TensorProto()
    t.name = "w"
    t.data_type = F
    t.dims.extend([4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    if make_file:
        make_file(folder)
    save("model", [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
         [vi("x", F, [4])], [vi("y", F, [4])], [t], folder=folder)


def write_weights(folder, name="weights.bin", nbytes=16):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(np.arange(nbytes // 4, dtype=np.float32).tobytes())


def secret(_):
    path = os.path.join(OUT, "ext", "secret.bin")
    write_weights(os.path.dirname(path), "secret.bin")
    return path


def relink(fn):
    def make(folder):
        target = os.path.join(folder, "weights.bin")
        if os.path.lexists(target):
            os.remove(target)
        fn(folder, target)
    return make


external_model("good", "weights.bin", make_file=write_weights)
external_model("offset_good", "weights.bin", offset=16, length=16,
               make_file=lambda d: write_weights(d, nbytes=32))
external_model("absolute", os.path.abspath(os.path.join(OUT, "ext", "secret.bin")),
               make_file=secret)
external_model("dotdot", "../secret.bin", make_file=secret)
external_model("symlink", "weights.bin", make_file=relink(
    lambda d, t: os.symlink(secret(d), t)))
external_model("hardlink", "weights.bin", make_file=relink(
    lambda d, t: os.link(secret(d), t)))
external_model("offset_beyond", "weights.bin", offset=64, make_file=write_weights)
external_model("length_beyond", "weights.bin", offset=8, length=16,
               make_file=write_weights)
external_model("missing", "nothere.bin")
external_model("directory", "sub", make_file=lambda d: os.makedirs(
    os.path.join(d, "sub"), exist_ok=True))


# Models that break the rules of ONNX in ways libonnx 1.12's checker cannot
# see in files of IR version 10 and newer (it skips them), each written at
# IR version 8 (name_ir8) and 10 (name_ir10): Cleave's own checks refuse
# both alike.
def hostile(name, nodes, inputs, outputs, inits=(), **kw):
    for ir in (8, 10):
        save(f"{name}_ir{ir}", nodes, inputs, outputs, inits, ir=ir, **kw)


def gemm(**attrs):
    return [helper.make_node("Gemm", ["a", "b"], ["y"], name="g", **attrs)]


ab = [vi("a", F, [2, 3]), vi("b", F, [3, 4])]
hostile("gemm_transa_string", gemm(transA="yes"), ab, [vi("y", F, [2, 4])])
hostile("gemm_transa_2", gemm(transA=2), ab, [vi("y", F, [2, 4])])
hostile("gemm_unknown_attr", gemm(transC=1), ab, [vi("y", F, [2, 4])])


def conv(**attrs):
    return [helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)]


xw = [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 2, 2])]
hostile("conv_auto_pad", conv(auto_pad="SIDEWAYS"), xw, [vi("y", F, [1, 1, 3, 3])])
hostile("conv_pads_count", conv(pads=[0, 0, 0]), xw, [vi("y", F, [1, 1, 3, 3])])
hostile("maxpool_no_kernel", [helper.make_node("MaxPool", ["x"], ["y"], name="mp")],
        xw[:1], [vi("y", F, [1, 1, 4, 4])])
relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
hostile("opset99", relu, [vi("x", F, [2])], [vi("y", F, [2])], opset=99)
hostile("duplicate_output", [
    helper.make_node("Relu", ["x"], ["y"], name="r1"),
    helper.make_node("Neg", ["x"], ["y"], name="r2"),
], [vi("x", F, [2])], [vi("y", F, [2])])
hostile("duplicate_input", relu, [vi("x", F, [2]), vi("x", F, [2])], [vi("y", F, [2])])
hostile("duplicate_initializer", [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [vi("x", F, [2])], [vi("y", F, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")] * 2)
hostile("undefined_output", relu, [vi("x", F, [2])], [vi("y", F, [2]), vi("z", F, [2])])
hostile("undefined_input", [helper.make_node("Relu", ["nothere"], ["y"], name="r")],
        [vi("x", F, [2])], [vi("y", F, [2])])
hostile("initializer_type", [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [vi("x", F, [2]), vi("w", F, [2])], [vi("y", F, [2])],
        [numpy_helper.from_array(np.ones(2, np.float16), "w")])
then_branch = helper.make_graph(
    [helper.make_node("Neg", ["x"], ["inner"], name="neg"),
     helper.make_node("Identity", ["inner"], ["t"], name="id")],
    "then", [], [vi("t", F, [2])])
else_branch = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["e"], name="eid")],
    "else", [], [vi("e", F, [2])])
hostile("subgraph_name_outside", [
    helper.make_node("If", ["c"], ["out"], name="if1",
                     then_branch=then_branch, else_branch=else_branch),
    helper.make_node("Add", ["out", "inner"], ["y"], name="after"),
], [vi("c", TensorProto.BOOL, []), vi("x", F, [2])], [vi("y", F, [2])])
# An attribute of an optimizer (training domain, not checked against a
# schema before import): the converter's read refuses it.
save("momentum_mode_int_ir10", [
    helper.make_node("Momentum", ["r", "t", "x", "g", "v"], ["xn", "vn"],
                     name="mom", domain="ai.onnx.preview.training", alpha=0.9,
                     beta=0.5, mode=1, norm_coefficient=0.0)],
    [vi("r", F, []), vi("t", I64, []), vi("x", F, [2]), vi("g", F, [2]),
     vi("v", F, [2])],
    [vi("xn", F, [2]), vi("vn", F, [2])], ir=10,
    opsets=[helper.make_opsetid("ai.onnx.preview.training", 1)])
