#!/usr/bin/env python3
"""Writes the ONNX models of train-import.test: what the importer does
differently for a model compiled for training, and old-opset forms.

usage: make_train_import_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
F = TensorProto.FLOAT
I64 = TensorProto.INT64
rng = np.random.default_rng(0)


def save(name, nodes, inputs, outputs, inits=(), opset=17, ir_version=8,
         graph_metadata=None):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    for key, value in (graph_metadata or {}).items():
        entry = graph.metadata_props.add()
        entry.key, entry.value = key, value
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


# Dropout-6 (is_test) with its mask output, whose type is the input's (as
# old model-zoo CNNs declare it).
save("old_dropout",
     [helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.5, is_test=1)],
     [vi("x", F, [2, 3])], [vi("y", F, [2, 3]), vi("mask", F, [2, 3])], opset=6)

# PRelu-6 with a per-channel [C] slope on an N x C x H x W input.
save("old_prelu",
     [helper.make_node("PRelu", ["x", "slope"], ["y"])],
     [vi("x", F, [2, 3, 4, 4])], [vi("y", F, [2, 3, 4, 4])],
     [init("slope", [0.1, 0.2, 0.3])], opset=6)

# Conv + BatchNormalization exported in inference form.
save("conv_bn",
     [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
      helper.make_node("BatchNormalization",
                       ["c", "scale", "bias", "mean", "var"], ["y"],
                       epsilon=1e-5, momentum=0.9),
      helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0)],
     [vi("x", F, [4, 2, 3, 3])], [vi("loss", F, [])],
     [init("w", rng.standard_normal((3, 2, 3, 3))),
      init("scale", [1.1, 0.9, 1.2]), init("bias", [0.1, -0.1, 0.2]),
      init("mean", [0.01, 0.02, 0.03]), init("var", [1.1, 1.2, 1.3])])

# A PyTorch export signature (graph metadata, ONNX IR 10): "w" and "b" are
# parameters, "buf" a buffer, "mask" [2, 4] a constant the exporter folded
# and "three" a scalar constant: only w and b are trained by default.
signature = ("\n# inputs\np_w: PARAMETER target='w'\np_b: PARAMETER target='b'\n"
             "b_buf: BUFFER target='buf' persistent=True\nx: USER_INPUT\n\n"
             "# outputs\nloss: USER_OUTPUT\n")
save("torch_signature",
     [helper.make_node("MatMul", ["x", "w"], ["h"]),
      helper.make_node("Add", ["h", "b"], ["h1"]),
      helper.make_node("Add", ["h1", "mask"], ["h2"]),
      helper.make_node("Mul", ["h2", "buf"], ["h3"]),
      helper.make_node("Pow", ["h3", "three"], ["h4"]),
      helper.make_node("ReduceSum", ["h4"], ["loss"], keepdims=0)],
     [vi("x", F, [2, 4])], [vi("loss", F, [])],
     [init("w", rng.standard_normal((4, 4))), init("b", [0.1, 0.2, 0.3, 0.4]),
      init("mask", np.zeros((2, 4))), init("buf", [1.0, 2.0, 3.0, 4.0]),
      init("three", 3.0)],
     opset=18, ir_version=10,
     graph_metadata={"pkg.torch.export.ExportedProgram.graph_signature": signature})

# A default (optimized) export: the signature names the parameter "w", but
# the file holds its transposed copy "val_0" instead.
folded = ("\n# inputs\np_w: PARAMETER target='w'\np_b: PARAMETER target='b'\n"
          "x: USER_INPUT\n\n# outputs\nloss: USER_OUTPUT\n")
save("torch_signature_folded",
     [helper.make_node("MatMul", ["x", "val_0"], ["h"]),
      helper.make_node("Add", ["h", "b"], ["h1"]),
      helper.make_node("ReduceSum", ["h1"], ["loss"], keepdims=0)],
     [vi("x", F, [2, 4])], [vi("loss", F, [])],
     [init("val_0", rng.standard_normal((4, 4))), init("b", [0.1, 0.2, 0.3, 0.4])],
     opset=18, ir_version=10,
     graph_metadata={"pkg.torch.export.ExportedProgram.graph_signature": folded})

# Without a signature: float initializers of more than one element are
# trained, scalars (the Pow exponent) are not.
save("no_signature",
     [helper.make_node("MatMul", ["x", "w"], ["h"]),
      helper.make_node("Pow", ["h", "three"], ["h4"]),
      helper.make_node("ReduceSum", ["h4"], ["loss"], keepdims=0)],
     [vi("x", F, [2, 4])], [vi("loss", F, [])],
     [init("w", rng.standard_normal((4, 4))), init("three", 3.0)])

# One LayerNorm weight used by two layers (as an exporter that merged equal
# initializers leaves it), and a position table gathered at constant
# positions (which must stay a parameter when training).
save("merged_norm",
     [helper.make_node("Gather", ["pos_table", "positions"], ["pos"]),
      helper.make_node("Add", ["x", "pos"], ["x0"]),
      helper.make_node("LayerNormalization", ["x0", "ln_w", "ln_b1"], ["h"],
                       axis=-1),
      helper.make_node("LayerNormalization", ["h", "ln_w", "ln_b2"], ["y"],
                       axis=-1),
      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", F, [3, 4])], [vi("loss", F, [])],
     [init("pos_table", rng.standard_normal((5, 4))),
      numpy_helper.from_array(np.array([0, 1, 2], np.int64), "positions"),
      init("ln_w", [1.0, 1.0, 1.0, 1.0]), init("ln_b1", [0.1, 0.2, 0.3, 0.4]),
      init("ln_b2", [0.4, 0.3, 0.2, 0.1])])

# Weight and bias both shared by two LayerNormalizations: untied, the second
# node reads two copies.
save("merged_norm_both",
     [helper.make_node("LayerNormalization", ["x", "ln_w", "ln_b"], ["h"],
                       axis=-1),
      helper.make_node("LayerNormalization", ["h", "ln_w", "ln_b"], ["y"],
                       axis=-1),
      helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
     [vi("x", F, [3, 4])], [vi("loss", F, [])],
     [init("ln_w", [1.0, 1.0, 1.0, 1.0]), init("ln_b", [0.1, 0.2, 0.3, 0.4])])


# Default (optimized) PyTorch exports, with the per-node records the dynamo
# exporter writes (`pkg.torch.onnx.fx_node`: the aten call a node computes).
def fx(node, target, *args):
    entry = node.metadata_props.add()
    entry.key = "pkg.torch.onnx.fx_node"
    entry.value = ("%%out : [num_users=1] = call_function[target=torch.ops.aten.%s]"
                   "(args = (%s), kwargs = {})" % (target, ", ".join(args)))
    return node


def torch_signature(*params):
    return {"pkg.torch.export.ExportedProgram.graph_signature":
            "\n# inputs\n" + "".join("p_%s: PARAMETER target='%s'\n" % (p, p) for p in params)
            + "x: USER_INPUT\n\n# outputs\nloss: USER_OUTPUT\n"}


def torch_save(name, nodes, inputs, outputs, inits, params):
    save(name, nodes, inputs, outputs, inits, opset=18, ir_version=10,
         graph_metadata=torch_signature(*params))


# A Linear weight w [3, 4] the optimizer folded into its transpose val_0
# [4, 3]: w is made again and trains; the file's val_0 is its Transpose.
w_folded = rng.standard_normal((3, 4)).astype(np.float32)
torch_save("torch_folded_linear",
           [fx(helper.make_node("MatMul", ["x", "val_0"], ["h"], name="node_linear"),
               "linear.default", "%x", "%p_w", "%p_b"),
            fx(helper.make_node("Add", ["h", "b"], ["h1"], name="node_linear_bias"),
               "linear.default", "%x", "%p_w", "%p_b"),
            helper.make_node("Mul", ["h1", "h1"], ["sq"]),
            helper.make_node("ReduceSum", ["sq"], ["loss"], keepdims=0)],
           [vi("x", F, [2, 4])], [vi("loss", F, [])],
           [init("val_0", w_folded.T), init("b", [0.1, 0.2, 0.3])], ["w", "b"])

# A tied embedding: the Gather reads emb [6, 4], the LM head its transposed
# copy val_1. One parameter, tied as in PyTorch.
emb = rng.standard_normal((6, 4)).astype(np.float32)


def tied(name, copy):
    torch_save(name,
               [fx(helper.make_node("Gather", ["emb", "ids"], ["e"], name="node_embedding"),
                   "embedding.default", "%p_emb", "%ids"),
                fx(helper.make_node("MatMul", ["e", "val_1"], ["logits"], name="node_lm_head"),
                   "linear.default", "%e", "%p_emb"),
                helper.make_node("Mul", ["logits", "logits"], ["sq"]),
                helper.make_node("ReduceSum", ["sq"], ["loss"], keepdims=0)],
               [vi("ids", I64, [2, 3])], [vi("loss", F, [])],
               [init("emb", emb), init("val_1", copy)], ["emb"])


tied("torch_tied_copy", emb.T)
# The same, but the copy is not the embedding's transpose: refused.
tied("torch_tied_mismatch", emb.T + 0.5)

# A position table folded into its rows at the exported positions
# (embedding_1): which parameter it holds, the file cannot say.
torch_save("torch_folded_table",
           [fx(helper.make_node("Add", ["x", "embedding_1"], ["h"], name="node_add"),
               "add.Tensor", "%x", "%embedding_1"),
            helper.make_node("Mul", ["h", "h"], ["sq"]),
            helper.make_node("ReduceSum", ["sq"], ["loss"], keepdims=0)],
           [vi("x", F, [2, 4])], [vi("loss", F, [])],
           [init("embedding_1", rng.standard_normal((1, 4))),
            init("mask", np.zeros((2, 4)))], ["pos"])

# A zero Gemm bias the optimizer dropped: the node still reads p_b.
torch_save("torch_dropped_bias",
           [fx(helper.make_node("Gemm", ["x", "w"], ["h"], name="node_addmm"),
               "addmm.default", "%p_b", "%x", "%p_w"),
            helper.make_node("ReduceSum", ["h"], ["loss"], keepdims=0)],
           [vi("x", F, [2, 4])], [vi("loss", F, [])],
           [init("w", rng.standard_normal((4, 3)))], ["w", "b"])
