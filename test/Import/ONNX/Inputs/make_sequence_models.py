#!/usr/bin/env python3
"""Writes the ONNX models of the sequence-op import tests (sequence.test).

usage: make_sequence_models.py OUTDIR
         writes the models below, and x.npy, the input of numeric.onnx
       make_sequence_models.py check OUTDIR CLEAVE_OUTPUT_DIR
         compares cleave-run's outputs of numeric.onnx with onnxruntime's
         (exact: the ops only move data); exit 1 on a difference
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_models import F, I64, vi, writer

if sys.argv[1] == "check":
    import onnxruntime
    out, got_dir = sys.argv[2], sys.argv[3]
    session = onnxruntime.InferenceSession(os.path.join(out, "numeric.onnx"))
    want = session.run(None, {"x": np.load(os.path.join(out, "x.npy"))})
    for o, w in zip(session.get_outputs(), want):
        got = np.load(os.path.join(got_dir, o.name + ".npy"))
        if got.shape != w.shape or got.dtype != w.dtype or \
                not np.array_equal(got, w):
            sys.exit("%s differs from onnxruntime's:\n%s\n%s" % (o.name, got, w))
        print("%s matches onnxruntime %s" % (o.name, list(w.shape)))
    sys.exit(0)

OUT = sys.argv[1]
save = writer(OUT, opset=17, ir_version=8)


def seq(name, elem):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


# torch.chunk as PyTorch exports it: SplitToSequence by a scalar size (the
# last piece shorter), SequenceAt at constant positions (one negative).
save("split_chunks", [
    helper.make_node("SplitToSequence", ["x", "size"], ["s"], name="split",
                     axis=-1),
    helper.make_node("SequenceAt", ["s", "zero"], ["a"], name="at0"),
    helper.make_node("SequenceAt", ["s", "last"], ["b"], name="at1")],
    [vi("x", F, [4, 6])], [vi("a", F, [4, 4]), vi("b", F, [4, 2])],
    [i64("size", 4), i64("zero", 0), i64("last", -1)])

# No split: pieces of one, squeezed (keepdims = 0), stacked again on a new
# last axis (a transpose) and counted.
save("split_stack", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split", axis=0,
                     keepdims=0),
    helper.make_node("ConcatFromSequence", ["s"], ["y"], name="stack",
                     axis=-1, new_axis=1),
    helper.make_node("SequenceLength", ["s"], ["n"], name="len")],
    [vi("x", F, [3, 2])], [vi("y", F, [2, 3]), vi("n", I64, [])])

# SequenceConstruct and ConcatFromSequence along an existing axis.
save("construct_concat", [
    helper.make_node("SequenceConstruct", ["a", "b"], ["s"], name="make"),
    helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=1)],
    [vi("a", F, [2, 3]), vi("b", F, [2, 1])], [vi("y", F, [2, 4])])

# A known integer tensor (a shape) splits into constants: the Reshape's
# target shape is still known at import.
save("split_shape", [
    helper.make_node("Shape", ["x"], ["shape"], name="shape"),
    helper.make_node("SplitToSequence", ["shape", "sizes"], ["s"],
                     name="split"),
    helper.make_node("SequenceAt", ["s", "one"], ["tail"], name="at"),
    helper.make_node("Reshape", ["v", "tail"], ["y"], name="reshape")],
    [vi("x", F, [2, 3, 4]), vi("v", F, [12])], [vi("y", F, [3, 4])],
    [i64("sizes", [1, 2]), i64("one", 1)])

# Every op at once, run against onnxruntime: uneven sizes, positions from
# both ends, a construct of pieces in another order, a stack on a new axis.
save("numeric", [
    helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], name="split",
                     axis=1),
    helper.make_node("SequenceAt", ["s", "last"], ["a"], name="at_last"),
    helper.make_node("SequenceAt", ["s", "zero"], ["b"], name="at_first"),
    helper.make_node("SequenceConstruct", ["a", "b"], ["t"], name="make"),
    helper.make_node("ConcatFromSequence", ["t"], ["y"], name="cat", axis=1),
    helper.make_node("SplitToSequence", ["x"], ["rows"], name="rows",
                     keepdims=0),
    helper.make_node("ConcatFromSequence", ["rows"], ["z"], name="stack",
                     axis=1, new_axis=1),
    helper.make_node("SequenceLength", ["s"], ["n"], name="len")],
    [vi("x", F, [4, 6])],
    [vi("y", F, [4, 4]), vi("z", F, [6, 4]), vi("n", I64, [])],
    [i64("sizes", [1, 2, 3]), i64("last", -1), i64("zero", 0)])
np.save(os.path.join(OUT, "x.npy"),
        np.arange(24, dtype=np.float32).reshape(4, 6) * 0.5 - 3)

# Errors ------------------------------------------------------------------

save("dynamic_split", [
    helper.make_node("SplitToSequence", ["x", "size"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "zero"], ["y"], name="at")],
    [vi("x", F, [4, 6]), vi("size", I64, [])], [vi("y", F, [2, 6])],
    [i64("zero", 0)])

save("dynamic_position", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")],
    [vi("x", F, [4, 6]), vi("p", I64, [])], [vi("y", F, [1, 6])])

save("position_range", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")],
    [vi("x", F, [4, 6])], [vi("y", F, [1, 6])], [i64("p", 4)])

# Opset 18 is past libonnx's shape inference, so Cleave's own check answers.
save("bad_sizes", [
    helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "zero"], ["y"], name="at")],
    [vi("x", F, [4, 6])], [vi("y", F, [1, 6])],
    [i64("sizes", [1, 2]), i64("zero", 0)], opset=18)

save("over_sizes", [
    helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "zero"], ["y"], name="at")],
    [vi("x", F, [4, 6])], [vi("y", F, [3, 6])],
    [i64("sizes", [3, 2]), i64("zero", 0)], opset=18)

# Pieces of one of a 100000-long axis: refused, not unrolled.
save("too_long", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
    helper.make_node("SequenceAt", ["s", "zero"], ["y"], name="at")],
    [vi("x", F, [100000, 1])], [vi("y", F, [1, 1])], [i64("zero", 0)])

save("sequence_to_tensor_op", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split"),
    helper.make_node("Identity", ["s"], ["y"], name="ident"),
    helper.make_node("SequenceAt", ["y", "zero"], ["z"], name="at")],
    [vi("x", F, [4, 6])], [vi("z", F, [1, 6])], [i64("zero", 0)])

save("sequence_output", [
    helper.make_node("SplitToSequence", ["x"], ["s"], name="split")],
    [vi("x", F, [4, 6])], [seq("s", F)])

save("concat_mismatch", [
    helper.make_node("SequenceConstruct", ["a", "b"], ["s"], name="make"),
    helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=0)],
    [vi("a", F, [2, 3]), vi("b", F, [2, 1])], [vi("y", F, [4, 3])])
