#!/usr/bin/env python3
"""Writes small ONNX models of opsets 18 to 24 for the importer's lit test
(newer-opsets.test): If with a condition known at import time, shape
computations of function bodies (Split, Mod, And, CastLike), ops of the new
opsets, new element types, and malformed models that libonnx 1.12's checker
cannot see (its opsets end at 17).

usage: make_newer_opset_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_models import F, I64, vi, writer

OUT = sys.argv[1]
save = writer(OUT, opset=21, ir_version=10)


def const(name, array):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(array), name))


def branch(name, op, out):
    return helper.make_graph([helper.make_node(op, ["x", "x"], [out])], name, [],
                             [vi(out, F, [2, 3])])


# If on rank(x) == 2, folded at import time: only the then branch (Add) is
# imported. The shape [3, 2] comes from Split and Mod of Shape(x).
save("if_known", [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Size", ["s"], ["rank"]),
    const("two", np.int64(2)),
    helper.make_node("Equal", ["rank", "two"], ["is2d"]),
    helper.make_node("If", ["is2d"], ["y"],
                     then_branch=branch("then", "Add", "t"),
                     else_branch=branch("else", "Sub", "e")),
    helper.make_node("Split", ["s"], ["a", "b"], num_outputs=2),
    const("four", np.array([4], np.int64)),
    helper.make_node("Mod", ["b", "four"], ["bm"]),
    helper.make_node("Concat", ["bm", "a"], ["shape"], axis=0),
    helper.make_node("Reshape", ["y", "shape"], ["z"]),
], [vi("x", F, [2, 3])], [vi("z", F, [3, 2])])

# If on a value known only at run time.
save("if_dynamic", [
    helper.make_node("If", ["c"], ["y"],
                     then_branch=branch("then", "Add", "t"),
                     else_branch=branch("else", "Sub", "e")),
], [vi("c", TensorProto.BOOL, []), vi("x", F, [2, 3])], [vi("y", F, [2, 3])])

# QuantizeLinear per axis to int8 (opset 21).
save("quantize", [
    helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1),
], [vi("x", F, [2, 3]), vi("scale", F, [3]), vi("zp", TensorProto.INT8, [3])],
   [vi("q", TensorProto.INT8, [2, 3])])

# Element types newer than libonnx 1.12: refused by name.
save("float8", [helper.make_node("Identity", ["x"], ["y"])],
     [vi("x", TensorProto.FLOAT8E4M3FN, [4])],
     [vi("y", TensorProto.FLOAT8E4M3FN, [4])])
save("int4", [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4)],
     [vi("x", F, [4])], [vi("y", TensorProto.INT4, [4])])
save("complex", [helper.make_node("Identity", ["x"], ["y"])],
     [vi("x", TensorProto.COMPLEX64, [4])],
     [vi("y", TensorProto.COMPLEX64, [4])])
save("bitcast_width", [helper.make_node("BitCast", ["x"], ["y"], name="bc",
                                        to=TensorProto.INT16)],
     [vi("x", F, [4])], [vi("y", TensorProto.INT16, [4])], opset=26)
save("e8m0_round_mode", [helper.make_node("Cast", ["x"], ["y"], name="c",
                                          to=TensorProto.FLOAT8E8M0,
                                          round_mode="even")],
     [vi("x", F, [4])], [vi("y", TensorProto.FLOAT8E8M0, [4])], opset=25)

# Malformed models at opset 22, past libonnx's checker: an input that no
# node produces, a Conv with a stride of 0.
save("undefined_input", [helper.make_node("Relu", ["nothere"], ["y"])],
     [vi("x", F, [2])], [vi("y", F, [2])], opset=22)
save("conv_stride0", [
    helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", strides=[1, 0]),
], [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 2, 2])],
   [vi("y", F, [1, 1, 3, 3])], opset=22)

# The LLM ops' refusals: RotaryEmbedding with caches for another rotary
# dimension, GroupNormalization with groups that do not divide the
# channels, SwiGLU with operands of two shapes.
save("rotary_cache", [helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rope")],
     [vi("x", F, [1, 2, 3, 8]), vi("c", F, [1, 3, 3]), vi("s", F, [1, 3, 3])],
     [vi("y", F, [1, 2, 3, 8])], opset=23)
save("group_norm_groups", [helper.make_node("GroupNormalization", ["x", "g", "b"], ["y"], name="gn",
                                            num_groups=3)],
     [vi("x", F, [1, 4, 2]), vi("g", F, [4]), vi("b", F, [4])], [vi("y", F, [1, 4, 2])])
save("swiglu_shapes", [helper.make_node("SwiGLU", ["a", "b"], ["y"], name="glu")],
     [vi("a", F, [2, 4]), vi("b", F, [4])], [vi("y", F, [2, 4])], opset=28)

# Control flow unrolled at import time: a Loop of 3 iterations carrying a
# sum and scanning out each partial sum; a Scan over the rows of x in
# reverse; a Loop whose trip count is a graph input (refused) and one whose
# condition comes from data (refused).
B = TensorProto.BOOL
loop_body = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
     helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
     helper.make_node("Identity", ["acc_out"], ["partial"])],
    "loop_body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2])],
    [vi("cond_out", B, []), vi("acc_out", F, [2]), vi("partial", F, [2])])
save("loop_static", [const("m", np.array(3, np.int64)), const("c", np.array(True)),
                     helper.make_node("Loop", ["m", "c", "x"], ["sum", "partials"], body=loop_body)],
     [vi("x", F, [2])], [vi("sum", F, [2]), vi("partials", F, [3, 2])])
# The trip count as ONNX's Range function computes it: Cast(Relu(Ceil(
# (limit - start) / delta))) of constants, 3 here.
save("loop_relu_trip", [const("span", np.array(2.2, np.float32)), const("c", np.array(True)),
                        helper.make_node("Ceil", ["span"], ["ceil"]),
                        helper.make_node("Relu", ["ceil"], ["relu"]),
                        helper.make_node("Cast", ["relu"], ["m"], to=TensorProto.INT64),
                        helper.make_node("Loop", ["m", "c", "x"], ["sum", "partials"], body=loop_body)],
     [vi("x", F, [2])], [vi("sum", F, [2]), vi("partials", F, [3, 2])])
save("loop_dynamic", [const("c", np.array(True)),
                      helper.make_node("Loop", ["m", "c", "x"], ["sum", "partials"], name="loop",
                                       body=loop_body)],
     [vi("m", I64, []), vi("x", F, [2])], [vi("sum", F, [2]), vi("partials", F, [None, 2])])
data_body = helper.make_graph(
    [helper.make_node("ReduceSum", ["acc_in"], ["s"], keepdims=0),
     helper.make_node("Less", ["s", "ten"], ["cond_out"]),
     helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])],
    "data_body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2])],
    [vi("cond_out", B, []), vi("acc_out", F, [2])],
    [numpy_helper.from_array(np.array(10.0, np.float32), "ten")])
save("loop_data", [const("c", np.array(True)),
                   helper.make_node("Loop", ["", "c", "x"], ["y"], name="until", body=data_body)],
     [vi("x", F, [2])], [vi("y", F, [2])])
scan_body = helper.make_graph(
    [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
     helper.make_node("Mul", ["row", "s_out"], ["y"])],
    "scan_body", [vi("s_in", F, [4]), vi("row", F, [4])], [vi("s_out", F, [4]), vi("y", F, [4])])
save("scan_reverse", [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], num_scan_inputs=1,
                                       scan_input_directions=[1], scan_output_axes=[1], body=scan_body)],
     [vi("s0", F, [4]), vi("x", F, [3, 4])], [vi("s", F, [4]), vi("ys", F, [4, 3])])
# A 1-D sin_cache beside position ids: refused by name (it was read past its
# rank).
save("rotary_sin_rank", [helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="rope1")],
     [vi("x", F, [1, 2, 3, 8]), vi("c", F, [16, 4]), vi("s", F, [4]), vi("p", I64, [1, 3])],
     [vi("y", F, [1, 2, 3, 8])], opset=23)
