#!/usr/bin/env python3
"""Writes small ONNX models for the lit tests of the importer's converters
for ConvTranspose, Resize/Upsample, RNN/GRU/LSTM, LRN/MVN/ReverseSequence/
BatchNormalization (training) and the window functions.

usage: make_more_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_models import F, I64, vi, writer

OUT = sys.argv[1]
save = writer(OUT, opset=17, ir_version=8)


def init(name, array):
    return numpy_helper.from_array(array, name)


rng = np.random.default_rng(0)

# ConvTranspose, stride 2: the input is dilated by reshape + pad + reshape,
# the filter transposed and reversed, then a plain convolution.
save("convtranspose", [
    helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv",
                     strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
], [vi("x", F, [1, 2, 3, 3])], [vi("y", F, [1, 4, 6, 6])],
    [init("w", rng.standard_normal((2, 4, 3, 3)).astype(np.float32))])

# Resize: linear per axis (gather, multiply by weights, sum); nearest is a
# gather only.
save("resize", [
    helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up_linear",
                     mode="linear"),
    helper.make_node("Resize", ["y", "", "scales"], ["z"], name="up_nearest",
                     mode="nearest"),
], [vi("x", F, [1, 1, 2, 3])], [vi("z", F, [1, 1, 8, 12])],
    [init("scales", np.array([1, 1, 2, 2], np.float32))])

# LSTM over 2 steps: one input projection, then per step R, gates, state.
save("lstm", [
    helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"],
                     name="lstm", hidden_size=3),
], [vi("x", F, [2, 1, 4])],
    [vi("y", F, [2, 1, 1, 3]), vi("yh", F, [1, 1, 3]), vi("yc", F, [1, 1, 3])],
    [init("w", rng.standard_normal((1, 12, 4)).astype(np.float32)),
     init("r", rng.standard_normal((1, 12, 3)).astype(np.float32)),
     init("b", rng.standard_normal((1, 24)).astype(np.float32))])

# GRU, bidirectional, linear_before_reset.
save("gru", [
    helper.make_node("GRU", ["x", "w", "r"], ["y", "yh"], name="gru",
                     hidden_size=2, direction="bidirectional",
                     linear_before_reset=1),
], [vi("x", F, [2, 1, 3])], [vi("y", F, [2, 2, 1, 2]), vi("yh", F, [2, 1, 2])],
    [init("w", rng.standard_normal((2, 6, 3)).astype(np.float32)),
     init("r", rng.standard_normal((2, 6, 2)).astype(np.float32))])

# LRN (windowed sum of squares), MVN, ReverseSequence, BatchNormalization
# in training mode, HannWindow (a constant).
save("norms_more", [
    helper.make_node("LRN", ["x"], ["a"], name="lrn", size=3),
    helper.make_node("MeanVarianceNormalization", ["a"], ["b"], name="mvn"),
    helper.make_node("BatchNormalization", ["b", "s", "bias", "m", "v"],
                     ["c", "rm", "rv"], name="bn", training_mode=1),
], [vi("x", F, [2, 4, 3, 3])],
    [vi("c", F, [2, 4, 3, 3]), vi("rm", F, [4]), vi("rv", F, [4])],
    [init("s", np.ones(4, np.float32)), init("bias", np.zeros(4, np.float32)),
     init("m", np.zeros(4, np.float32)), init("v", np.ones(4, np.float32))])

save("sequence", [
    helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="revseq",
                     batch_axis=1, time_axis=0),
    helper.make_node("HannWindow", ["n"], ["w"], name="hann"),
], [vi("x", F, [4, 2, 3]), vi("lens", I64, [2])],
    [vi("y", F, [4, 2, 3]), vi("w", F, [4])],
    [init("n", np.array(4, np.int64))])

# Folding non-finite floats: Where's fold reads both views of each element,
# and the integer view of -inf and inf must be defined (saturating).
save("fold_nonfinite", [
    helper.make_node("Where", ["c", "a", "b"], ["w"]),
    helper.make_node("Add", ["w", "x"], ["y"]),
], [vi("x", F, [2])], [vi("y", F, [2])], [
    init("c", np.array([True, False])),
    init("a", np.array([-np.inf, 1.0], np.float32)),
    init("b", np.array([2.0, np.inf], np.float32)),
])
