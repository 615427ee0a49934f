#!/usr/bin/env python3
"""Models and checks for gemm-epilogue.test (GEMM bias/GELU epilogues).

  gemm_epilogue.py models OUTDIR   writes the models below and x.npy, xb.npy
    mlp_tanh.onnx     x[4,16] MatMul+Add, Gelu(approximate=tanh) (opset 20),
                      MatMul+Add -> y[4,10]
    mlp_tanh_ops.onnx the same with the tanh GELU spelled out in Mul, Add,
                      Tanh nodes as PyTorch exports it before opset 20
    mlp_erf.onnx      the same with the exact (erf) Gelu (opset 20)
    mlp_kappa.onnx    mlp_tanh_ops with 0.0447 for 0.044715: not GELU
    mlp_escape.onnx   mlp_tanh with the GELU's input also an output
    nobias.onnx       x[4,16] MatMul, Gelu(approximate=tanh) -> y[4,32]
    batched.onnx      xb[3,4,16] x w[3,16,8] (batched MatMul) + b[8] -> y
    shared.onnx       MatMul whose result feeds the bias Add and an output
    rowbias.onnx      MatMul + a bias of shape [4,1] (along M, not N)
  gemm_epilogue.py compare GOT.npy WANT.npy RTOL ATOL
                    exit 1 unless same shape and dtype and allclose
  gemm_epilogue.py ort MODEL.onnx IN.npy OUT.npy
                    onnxruntime's output matches OUT.npy (rtol 1e-4, atol 1e-5)
"""
import math
import os
import sys

import numpy as np


def models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    F = TensorProto.FLOAT

    def init(name, shape, scale=0.5):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name)

    def scalar(name, value):
        return numpy_helper.from_array(np.array(value, np.float32), name)

    def save(name, nodes, inputs, outputs, inits, opset=17):
        graph = helper.make_graph(nodes, name, inputs, outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 9 if opset >= 20 else 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(out, name + ".onnx"))

    x = helper.make_tensor_value_info("x", F, [4, 16])
    y = helper.make_tensor_value_info("y", F, [4, 10])
    weights = [init("w1", (16, 32)), init("b1", (32,)), init("w2", (32, 10)),
               init("b2", (10,))]

    def mlp(name, gelu_nodes, extra_inits=(), opset=17):
        nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
                 helper.make_node("Add", ["h", "b1"], ["hb"], name="fc1_bias")]
        nodes += gelu_nodes
        nodes += [helper.make_node("MatMul", ["g", "w2"], ["h2"], name="fc2"),
                  helper.make_node("Add", ["h2", "b2"], ["y"], name="fc2_bias")]
        save(name, nodes, [x], [y], weights + list(extra_inits), opset)

    mlp("mlp_tanh", [helper.make_node("Gelu", ["hb"], ["g"], approximate="tanh")],
        opset=20)
    mlp("mlp_erf", [helper.make_node("Gelu", ["hb"], ["g"])], opset=20)
    # PyTorch's opset-17 export of gelu(approximate='tanh').
    def tanh_ops(kappa):
        return [
            helper.make_node("Mul", ["hb", "hb"], ["sq"]),
            helper.make_node("Mul", ["hb", "sq"], ["cube"]),
            helper.make_node("Mul", ["kappa", "cube"], ["kc"]),
            helper.make_node("Add", ["hb", "kc"], ["s"]),
            helper.make_node("Mul", ["beta", "s"], ["inner"]),
            helper.make_node("Tanh", ["inner"], ["t"]),
            helper.make_node("Add", ["one", "t"], ["t1"]),
            helper.make_node("Mul", ["hb", "t1"], ["xt"]),
            helper.make_node("Mul", ["half", "xt"], ["g"]),
        ], [scalar("kappa", kappa), scalar("beta", math.sqrt(2 / math.pi)),
            scalar("one", 1.0), scalar("half", 0.5)]

    mlp("mlp_tanh_ops", *tanh_ops(0.044715))
    mlp("mlp_kappa", *tanh_ops(0.0447))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Gelu", ["hb"], ["g"], approximate="tanh"),
             helper.make_node("MatMul", ["g", "w2"], ["h2"]),
             helper.make_node("Add", ["h2", "b2"], ["y"])]
    save("mlp_escape", nodes, [x], [y, helper.make_tensor_value_info("hb", F, [4, 32])],
         weights, 20)

    save("nobias", [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Gelu", ["h"], ["y"], approximate="tanh"),
    ], [x], [helper.make_tensor_value_info("y", F, [4, 32])],
        [init("w1", (16, 32))], 20)
    xb = helper.make_tensor_value_info("xb", F, [3, 4, 16])
    save("batched", [
        helper.make_node("MatMul", ["xb", "wb"], ["h"]),
        helper.make_node("Add", ["h", "bb"], ["y"]),
    ], [xb], [helper.make_tensor_value_info("y", F, [3, 4, 8])],
        [init("wb", (3, 16, 8)), init("bb", (8,))])
    save("shared", [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["y"]),
    ], [x], [helper.make_tensor_value_info("y", F, [4, 32]),
             helper.make_tensor_value_info("h", F, [4, 32])],
        [init("w1", (16, 32)), init("b1", (32,))])
    save("rowbias", [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "br"], ["y"]),
    ], [x], [helper.make_tensor_value_info("y", F, [4, 32])],
        [init("w1", (16, 32)), init("br", (4, 1))])
    np.save(os.path.join(out, "x.npy"), rng.standard_normal((4, 16)).astype(np.float32))
    np.save(os.path.join(out, "xb.npy"),
            rng.standard_normal((3, 4, 16)).astype(np.float32))


def compare(got, want, rtol, atol):
    got, want = np.load(got), np.load(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        sys.exit("mismatch: got %s %s, want %s %s" % (got.shape, got.dtype, want.shape, want.dtype))
    err = float(np.abs(got.astype(np.float64) - want).max())
    if not np.allclose(got, want, rtol=float(rtol), atol=float(atol)):
        sys.exit("values differ: max abs error %.3g" % err)
    print("match: %s %s, max abs error %s" % (got.shape, got.dtype, "0" if err == 0 else "%.1e" % err))


def ort(model, inp, out):
    import onnxruntime
    sess = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = sess.run(None, {sess.get_inputs()[0].name: np.load(inp)})[0]
    got = np.load(out)
    err = float(np.abs(got - want).max())
    print("max |cleave - onnxruntime| = %.1e" % err)
    sys.exit(0 if np.allclose(got, want, rtol=1e-4, atol=1e-5) else 1)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "models":
        models(sys.argv[2])
    elif cmd == "compare":
        compare(*sys.argv[2:6])
    elif cmd == "ort":
        ort(*sys.argv[2:5])
    else:
        sys.exit("unknown command " + cmd)
