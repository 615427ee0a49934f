"""Weight-only quantized matmuls: DequantizeLinear of an int4, uint4 or
float8 initializer (packed raw_data for the 4-bit types), blocked or per
tensor, feeding a MatMul. Compiles and runs each with Cleave and compares
with numpy (the weights dequantized and multiplied in float64).

usage: quantized_matmul.py CLEAVE_COMPILE CLEAVE_RUN WORKDIR
"""

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper

compile_bin, run_bin, work = sys.argv[1:4]
TP = onnx.TensorProto
rng = np.random.default_rng(3)
M, K, N, BLOCK = 5, 64, 24, 16
failures = 0


def case(name, q, qtype, scale, zero=None, block=0):
    """y = x @ DequantizeLinear(q, scale, zero) with q an initializer."""
    global failures
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    inits = [numpy_helper.from_array(q, "q"), numpy_helper.from_array(scale, "s")]
    dq_inputs = ["q", "s"]
    if zero is not None:
        inits.append(numpy_helper.from_array(zero, "z"))
        dq_inputs.append("z")
    attrs = {"axis": 0}
    if block:
        attrs["block_size"] = block
    nodes = [helper.make_node("DequantizeLinear", dq_inputs, ["w"], **attrs),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TP.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [M, N])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    assert inits[0].data_type == qtype
    onnx.save(model, os.path.join(d, "model.onnx"))
    x = rng.standard_normal((M, K)).astype(np.float32)
    with open(os.path.join(d, "x.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    subprocess.run([compile_bin, os.path.join(d, "model.onnx"), "-o",
                    os.path.join(d, "model.cleave")], check=True,
                   stderr=subprocess.DEVNULL)
    subprocess.run([run_bin, os.path.join(d, "model.cleave"),
                    os.path.join(d, "x.pb"), "--output-dir", d], check=True,
                   stdout=subprocess.DEVNULL)
    got = np.load(os.path.join(d, "y.npy"))
    # Reference: the weights dequantized in float64.
    qf = q.astype(np.float64)
    zf = np.zeros_like(qf) if zero is None else zero.astype(np.float64)
    sf = scale.astype(np.float64)
    if block:
        zf = np.repeat(zf, block, axis=0)[:K] if zero is not None else 0
        sf = np.repeat(sf, block, axis=0)[:K]
    w = (qf - zf) * sf
    want = x.astype(np.float64) @ w
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    ok = err < 1e-5
    failures += not ok
    print("%s: %s (worst relative error %s)" % (
        name, "matches" if ok else "DIFFERS", "below 1e-5" if ok else "%.3g" % err))


q4 = rng.integers(-8, 8, (K, N)).astype(ml_dtypes.int4)
s4 = (rng.uniform(0.01, 0.1, (K // BLOCK, N))).astype(np.float32)
case("int4-blocked", q4, TP.INT4, s4, block=BLOCK)
z4 = rng.integers(-2, 3, (K // BLOCK, N)).astype(ml_dtypes.int4)
case("int4-blocked-zero-point", q4, TP.INT4, s4, z4, block=BLOCK)
u4 = rng.integers(0, 16, (K, N)).astype(ml_dtypes.uint4)
zu = np.full((K // BLOCK, N), 8).astype(ml_dtypes.uint4)
case("uint4-blocked-zero-point", u4, TP.UINT4, s4, zu, block=BLOCK)
f8 = (rng.standard_normal((K, N)) * 100).astype(ml_dtypes.float8_e4m3fn)
case("float8e4m3fn-per-tensor", f8, TP.FLOAT8E4M3FN, np.array(0.01, np.float32))
print("quantized matmuls: %s" % ("all match" if not failures else "%d DIFFER" % failures))
sys.exit(1 if failures else 0)
