"""What the import tests' model writers share (make_*_models.py): a writer
of small ONNX models into one folder at a fixed opset and IR version, and
the value-info shorthand.

    from onnx_models import F, I64, vi, writer
    save = writer(sys.argv[1], opset=17, ir_version=8)
    save("add", [helper.make_node("Add", ["a", "b"], ["c"])],
         [vi("a", F, [2]), vi("b", F, [2])], [vi("c", F, [2])])
"""
import os

import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def writer(out, opset, ir_version):
    """save(name, nodes, inputs, outputs, inits=(), opset=opset) writing
    OUT/name.onnx; creates `out`."""
    os.makedirs(out, exist_ok=True)
    default_opset = opset

    def save(name, nodes, inputs, outputs, inits=(), opset=default_opset):
        graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = ir_version
        onnx.save(model, os.path.join(out, name + ".onnx"))
    return save


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)
