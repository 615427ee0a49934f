"""Fixtures of the Python module's tests: the build's tools (to compare the
module against), small models, and the small GPT compiled for training."""

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cleave

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The module lives in <build>/python_bindings/cleave; the tools in <build>/bin.
BUILD = os.environ.get(
    "CLEAVE_BUILD_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(cleave.__file__)))))
BIN = os.path.join(BUILD, "bin")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        raise RuntimeError(f"{path} is missing: build Cleave first")
    return path


def run_tool(name, *args, cwd=None):
    """Runs a Cleave tool; returns (stdout, stderr); fails the test on a
    non-zero exit."""
    done = subprocess.run([tool(name), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{name} {' '.join(map(str, args))} failed:\n"
                             f"{done.stderr}")
    return done.stdout, done.stderr


def mlp_model(batch=4, d_in=8, hidden=16, d_out=3, seed=0):
    """y = relu(x W1 + b1) W2 + b2, with a target for an MSE loss."""
    r = np.random.default_rng(seed)
    w1 = numpy_helper.from_array((r.standard_normal((d_in, hidden)) * 0.3).astype(np.float32), "w1")
    b1 = numpy_helper.from_array((r.standard_normal(hidden) * 0.1).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((r.standard_normal((hidden, d_out)) * 0.3).astype(np.float32), "w2")
    b2 = numpy_helper.from_array((r.standard_normal(d_out) * 0.1).astype(np.float32), "b2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "w2"], ["y0"], name="fc2"),
        helper.make_node("Add", ["y0", "b2"], ["y"], name="bias2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d_out])],
        [w1, b1, w2, b2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # What libonnx's checker and onnxruntime read.
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def mlp():
    return mlp_model()


@pytest.fixture(scope="session")
def mlp_path(tmp_path_factory, mlp):
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    onnx.save(mlp, str(path))
    return str(path)


GPT = os.path.join(REPO, "test", "models", "gpt2_tied.onnx")
GPT_OPTIONS = dict(train=True, loss="cross_entropy:logits,labels",
                   optimizer="adamw", lr=1e-3, clip_grad_norm=1.0)


@pytest.fixture(scope="session")
def gpt_plan():
    """The small GPT (2 layers, batch 2, sequence 8, vocabulary 96) compiled
    for training from Python."""
    return cleave.compile(GPT, **GPT_OPTIONS)


@pytest.fixture(scope="session")
def gpt_plan_file(tmp_path_factory, gpt_plan):
    path = tmp_path_factory.mktemp("gpt") / "gpt.cleave"
    gpt_plan.save(path)
    return str(path)


def read_jsonl(path):
    import json
    with open(path) as f:
        return [json.loads(line) for line in f]
