#!/usr/bin/env python3
"""The overhead of Plan.run from Python against cleave-run, same plan, same
run: cleave-run --repeat N --print-stats times the executor's runs inside
one process (min and mean, printed to 1 us); the module's Plan.run is timed
around the call (numpy in, numpy out: input checks, copies in and out, the
GIL). The overhead is the difference of the minima, which a busy machine
disturbs least.

    PYTHONPATH=build/python_bindings .venv/bin/python \
        test/benchmarks/bench_python_run.py --bin build/bin
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import cleave


def mlp(batch, width, layers):
    r = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(layers):
        w = numpy_helper.from_array((r.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i}"]))
        x = f"h{i}"
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True)
    p.add_argument("--repeat", type=int, default=2000)
    args = p.parse_args()
    print("model                      cleave-run min/mean us   Plan.run min/median us   overhead (min - min)")
    for batch, width, layers in [(1, 16, 2), (8, 128, 4), (32, 512, 4)]:
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "m.onnx")
            onnx.save(mlp(batch, width, layers), model)
            plan = cleave.compile(model)
            plan.save(os.path.join(tmp, "m.cleave"))
            x = np.random.default_rng(1).standard_normal((batch, width)).astype(np.float32)
            np.save(os.path.join(tmp, "x.npy"), x)
            out = subprocess.run([os.path.join(args.bin, "cleave-run"), os.path.join(tmp, "m.cleave"),
                                  os.path.join(tmp, "x.npy"), "--no-output", "--warmup", "100",
                                  "--repeat", str(args.repeat), "--print-stats"],
                                 capture_output=True, text=True, check=True)
            m = re.search(r"run time: min ([\d.]+) ms, mean ([\d.]+) ms", out.stderr + out.stdout)
            if not m:
                sys.exit("cannot read cleave-run's run time from:\n" + out.stderr)
            tool_min, tool_mean = float(m.group(1)) * 1e3, float(m.group(2)) * 1e3
            for _ in range(100):
                plan.run([x])
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                plan.run([x])
                times.append(time.perf_counter() - t0)
            times = np.array(times) * 1e6
            name = f"mlp b={batch} d={width} x{layers}"
            print(f"{name:26} {tool_min:10.1f} / {tool_mean:8.1f}   {times.min():10.1f} / {np.median(times):8.1f}"
                  f"   {times.min() - tool_min:+8.1f}")


if __name__ == "__main__":
    main()
