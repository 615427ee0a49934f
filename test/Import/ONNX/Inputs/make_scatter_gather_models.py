#!/usr/bin/env python3
"""Writes the ONNX models of the scatter / GatherND / TopK import tests.

usage: make_scatter_gather_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_models import F, I64, vi, writer

OUT = sys.argv[1]
save = writer(OUT, opset=18, ir_version=8)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


# ScatterElements with an accumulating reduction.
save("scatter_elements", [
    helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="se",
                     axis=1, reduction="add")],
    [vi("x", F, [2, 5]), vi("i", I64, [2, 3]), vi("u", F, [2, 3])],
    [vi("y", F, [2, 5])])

# ScatterND over the first dimension of a 4x4x4 tensor.
save("scatter_nd", [
    helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="snd",
                     reduction="mul")],
    [vi("x", F, [4, 4, 4]), vi("i", I64, [2, 1]), vi("u", F, [2, 4, 4])],
    [vi("y", F, [4, 4, 4])])

# GatherND with one batch dimension.
save("gather_nd", [
    helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=1)],
    [vi("x", F, [2, 3, 4]), vi("i", I64, [2, 5, 1])],
    [vi("y", F, [2, 5, 4])])

# TopK with a constant K.
save("top_k", [
    helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk", axis=1,
                     largest=0)],
    [vi("x", F, [3, 6])], [vi("v", F, [3, 2]), vi("i", I64, [3, 2])],
    [i64("k", [2])])

# Errors ------------------------------------------------------------------

save("scatter_bad_updates", [
    helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="se")],
    [vi("x", F, [2, 5]), vi("i", I64, [2, 3]), vi("u", F, [2, 2])],
    [vi("y", F, [2, 5])])

save("scatter_const_index", [
    helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="se")],
    [vi("x", F, [2, 5]), vi("u", F, [1, 1])], [vi("y", F, [2, 5])],
    [i64("i", [[5]])])

save("gather_nd_batch", [
    helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=1)],
    [vi("x", F, [2, 3, 4]), vi("i", I64, [3, 1])], [vi("y", F, [3, 3, 4])])

save("top_k_dynamic", [
    helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")],
    [vi("x", F, [3, 6]), vi("k", I64, [1])],
    [vi("v", F, [3, None]), vi("i", I64, [3, None])])

save("top_k_big", [
    helper.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")],
    [vi("x", F, [3, 6])], [vi("v", F, [3, 9]), vi("i", I64, [3, 9])],
    [i64("k", [9])])
