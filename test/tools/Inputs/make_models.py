#!/usr/bin/env python3
"""Writes the small ONNX models and tensors the command-line tool tests use.

usage: make_models.py OUTDIR
  OUTDIR/mlp.onnx            x[4,16] -> MatMul+Add+Relu+Gemm(transB) -> y[4,10]
  OUTDIR/x.npy, y_ref.npy    an input for it and numpy's answer
  OUTDIR/x_shape.npy         the input transposed ([16,4] float32)
  OUTDIR/x_f64.npy           the input as float64
  OUTDIR/symbolic.onnx       Relu on x['batch',3]
  OUTDIR/unsupported.onnx    two Unique nodes and one NonZero
  OUTDIR/huge.onnx           imports, but its input has too many elements
  OUTDIR/random.onnx, truncated.onnx   not a model
  OUTDIR/ext/CASE/model.onnx hostile external data (CASE: absolute, dotdot,
                             symlink, hardlink, offset_beyond, length_beyond)
OUTDIR should be absolute so the symlink case points where it should.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.abspath(sys.argv[1])
os.makedirs(OUT, exist_ok=True)
F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits=(), folder=None):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(folder or OUT, name + ".onnx")
    onnx.save(model, path)
    return path


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# The MLP and its numpy reference.
w1 = rng.standard_normal((16, 32)).astype(np.float32)
b1 = rng.standard_normal(32).astype(np.float32)
w2 = rng.standard_normal((10, 32)).astype(np.float32)
b2 = rng.standard_normal(10).astype(np.float32)
save("mlp", [
    helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
    helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
    helper.make_node("Relu", ["hb"], ["a"], name="relu"),
    helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], name="fc2", transB=1),
], [vi("x", F, [4, 16])], [vi("y", F, [4, 10])],
    [numpy_helper.from_array(v, n) for n, v in
     (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))])
x = rng.standard_normal((4, 16)).astype(np.float32)
np.save(os.path.join(OUT, "x.npy"), x)
np.save(os.path.join(OUT, "y_ref.npy"), np.maximum(x @ w1 + b1, 0) @ w2.T + b2)
np.save(os.path.join(OUT, "x_shape.npy"), np.ascontiguousarray(x.T))
np.save(os.path.join(OUT, "x_f64.npy"), x.astype(np.float64))

save("symbolic", [helper.make_node("Relu", ["x"], ["y"], name="r")],
     [vi("x", F, ["batch", 3])], [vi("y", F, ["batch", 3])])

save("unsupported", [
    helper.make_node("Unique", ["x"], ["u"], name="unique_1"),
    helper.make_node("Unique", ["x"], ["u2"], name="unique_2"),
    helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
], [vi("x", F, [4])], [vi("u", F, [None]), vi("nz", TensorProto.INT64, [1, None])])

save("huge", [helper.make_node("Relu", ["x"], ["y"], name="r")],
     [vi("x", F, [1 << 40, 1 << 30])], [vi("y", F, [1 << 40, 1 << 30])])

with open(os.path.join(OUT, "random.onnx"), "wb") as f:
    f.write(bytes(rng.integers(0, 256, 300, dtype=np.uint8)))
data = open(os.path.join(OUT, "mlp.onnx"), "rb").read()
with open(os.path.join(OUT, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])


# Hostile external data, one folder per case; secret.bin sits outside them.
SECRET = os.path.join(OUT, "ext", "secret.bin")
os.makedirs(os.path.dirname(SECRET), exist_ok=True)
with open(SECRET, "wb") as f:
    f.write(np.arange(4, dtype=np.float32).tobytes())


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
        make_file(os.path.join(folder, "weights.bin"))
    save("model", [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
         [vi("x", F, [4])], [vi("y", F, [4])], [t], folder=folder)


def weights(path):
    with open(path, "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())


external_model("absolute", SECRET)
external_model("dotdot", "../secret.bin")
external_model("symlink", "weights.bin", make_file=lambda p: os.symlink(SECRET, p))
external_model("hardlink", "weights.bin", make_file=lambda p: os.link(SECRET, p))
external_model("offset_beyond", "weights.bin", offset=64, make_file=weights)
external_model("length_beyond", "weights.bin", offset=8, length=16,
               make_file=weights)
