#!/usr/bin/env python3
"""Writes the ONNX backend node tests of the installed onnx package as test folders.

onnx ships the generators of its node tests, not their data:
`onnx.backend.test.case.node.collect_testcases()` builds every case's model
and data sets. This script writes them in the layout of the ONNX test data,

    OUT/<test>/model.onnx
    OUT/<test>/test_data_set_<k>/input_<j>.pb, output_<j>.pb

so that run_conformance.py runs them like Debian's libonnx-testdata set.
A stamp file records the onnx version; when it matches, nothing is redone.
"""

import argparse
import os
import shutil
import sys
import warnings


def write_value(path, value, value_info):
    from onnx import TensorProto, numpy_helper
    t = value_info.type
    if t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, value_info.name)
    elif t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, value_info.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, value_info.name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, value_info.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory to write the tests into")
    p.add_argument("--force", action="store_true", help="rewrite even when the stamp matches")
    args = p.parse_args()

    import onnx

    stamp = os.path.join(args.out, ".onnx-version")
    if not args.force and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == onnx.__version__:
                print("onnx %s node tests already in %s" % (onnx.__version__, args.out))
                return 0
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    from onnx.backend.test.case import node  # slow: builds every case

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own overflow warnings
        cases = node.collect_testcases()
    written = 0
    for case in cases:
        if case.kind != "node" or case.model is None:
            continue
        test_dir = os.path.join(args.out, case.name)
        os.makedirs(test_dir)
        with open(os.path.join(test_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for k, (inputs, outputs) in enumerate(case.data_sets or []):
            data_dir = os.path.join(test_dir, "test_data_set_%d" % k)
            os.makedirs(data_dir)
            for j, value in enumerate(inputs):
                write_value(os.path.join(data_dir, "input_%d.pb" % j), value, graph.input[j])
            for j, value in enumerate(outputs):
                write_value(os.path.join(data_dir, "output_%d.pb" % j), value, graph.output[j])
        written += 1
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print("wrote %d onnx %s node tests to %s" % (written, onnx.__version__, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
