#!/usr/bin/env python3
"""onnxruntime's com.microsoft.MoE nodes for test/Import/ONNX/moe-contrib.test.

    make_moe_contrib_models.py OUT_DIR
        writes the models, their inputs (x.npy, router.npy, and x3.npy for
        the 3-D case) and the refused models into OUT_DIR;
    make_moe_contrib_models.py --reference DIR
        runs each model that onnxruntime's CPU kernel takes with an
        onnxruntime that has one (1.22 or newer: the pinned 1.20.1 does not)
        and writes its output as DIR/<case>.npy: the committed references in
        Inputs/moe. SwiGLU with fc1 and fc3 apart (swiglu_fusion = 0) and
        concatenated (2), which that kernel refuses, hold the interleaved
        case's weights rearranged: their reference is its output;
    make_moe_contrib_models.py check OUT_DIR RESULTS_DIR
        compares cleave-run's outputs (RESULTS_DIR/<case>/y.npy) with the
        references.

Weights and inputs come from a fixed seed, so the models are the same on
every run.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T, D, I, E = 6, 8, 12, 4
HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCES = os.path.join(HERE, "moe")


def weights(rng, fused):
    f = 2 if fused else 1
    return {
        "w1": rng.standard_normal((E, f * I, D)).astype(np.float32) * 0.5,
        "b1": rng.standard_normal((E, f * I)).astype(np.float32) * 0.1,
        "w2": rng.standard_normal((E, D, I)).astype(np.float32) * 0.3,
        "b2": rng.standard_normal((E, D)).astype(np.float32) * 0.1,
    }


def model(inputs, w, x_shape, elem=TensorProto.FLOAT, **attrs):
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    node = helper.make_node("MoE", inputs, ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node], "moe",
        [helper.make_tensor_value_info("x", elem, x_shape),
         helper.make_tensor_value_info("router", elem, [T, E])],
        [helper.make_tensor_value_info("y", elem, x_shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def cases():
    """name -> (model, x input file, reference case)."""
    rng = np.random.default_rng(11)
    full = ["x", "router", "w1", "b1", "w2", "b2"]
    plain = ["x", "router", "w1", "", "w2", ""]
    out = {}
    w = weights(rng, False)
    out["silu_normalized"] = (model(full, w, [T, D], k=2, activation_type="silu",
                                    normalize_routing_weights=1), "x", None)
    w = weights(rng, False)
    out["relu_top1_3d"] = (model(plain, {"w1": w["w1"], "w2": w["w2"]}, [2, 3, D], k=1,
                                 activation_type="relu"), "x3", None)
    w = weights(rng, False)
    out["gelu"] = (model(full, w, [T, D], k=2, activation_type="gelu"), "x", None)
    w = weights(rng, False)
    out["identity_top3"] = (model(full, w, [T, D], k=3, activation_type="identity",
                                  normalize_routing_weights=1), "x", None)
    w = weights(rng, True)
    swiglu = dict(k=2, activation_type="swiglu", normalize_routing_weights=1,
                  activation_alpha=1.5, activation_beta=0.5, swiglu_limit=3.0)
    out["swiglu_interleaved"] = (model(full, w, [T, D], swiglu_fusion=1, **swiglu), "x", None)
    # The same experts with the gate and linear halves concatenated, and
    # apart (fc1 the gate, fc3 the linear half).
    gate, lin = w["w1"][:, 0::2], w["w1"][:, 1::2]
    bgate, blin = w["b1"][:, 0::2], w["b1"][:, 1::2]
    concat = dict(w, w1=np.concatenate([gate, lin], 1), b1=np.concatenate([bgate, blin], 1))
    out["swiglu_concatenated"] = (model(full, concat, [T, D], swiglu_fusion=2, **swiglu), "x",
                                  "swiglu_interleaved")
    apart = {"w1": gate.copy(), "b1": bgate.copy(), "w2": w["w2"], "b2": w["b2"],
             "w3": lin.copy(), "b3": blin.copy()}
    out["swiglu_apart"] = (model(full + ["w3", "b3"], apart, [T, D], swiglu_fusion=0,
                                 **swiglu), "x", "swiglu_interleaved")
    return out


def refused():
    rng = np.random.default_rng(5)
    full = ["x", "router", "w1", "b1", "w2", "b2"]
    w = weights(rng, False)
    old = dict(w, w1=np.ascontiguousarray(w["w1"].transpose(0, 2, 1)))
    return {
        "sparse_mixer": model(full, w, [T, D], k=2, activation_type="silu", use_sparse_mixer=1),
        "old_layout": model(full, old, [T, D], k=2, activation_type="silu"),
        "k_too_large": model(full, w, [T, D], k=5, activation_type="silu"),
        "unknown_activation": model(full, w, [T, D], k=2, activation_type="relu2"),
        "double": model(full, {k: v.astype(np.float64) for k, v in w.items()}, [T, D],
                        TensorProto.DOUBLE, k=2, activation_type="silu"),
    }


def write(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(3)
    np.save(os.path.join(out_dir, "x.npy"), rng.standard_normal((T, D)).astype(np.float32))
    np.save(os.path.join(out_dir, "router.npy"), rng.standard_normal((T, E)).astype(np.float32))
    np.save(os.path.join(out_dir, "x3.npy"),
            np.load(os.path.join(out_dir, "x.npy")).reshape(2, 3, D))
    for name, (m, _, _) in cases().items():
        onnx.save(m, os.path.join(out_dir, name + ".onnx"))
    for name, m in refused().items():
        onnx.save(m, os.path.join(out_dir, name + ".onnx"))


def reference(ref_dir):
    import tempfile
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as work:
        write(work)
        for name, (m, xin, same_as) in cases().items():
            if same_as:
                continue
            s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            y = s.run(None, {"x": np.load(os.path.join(work, xin + ".npy")),
                             "router": np.load(os.path.join(work, "router.npy"))})[0]
            np.save(os.path.join(ref_dir, name + ".npy"), y)
            print("%s: onnxruntime %s" % (name, ort.__version__))


def check(out_dir, results):
    worst = 0.0
    for name, (_, _, same_as) in cases().items():
        want = np.load(os.path.join(REFERENCES, (same_as or name) + ".npy"))
        got = np.load(os.path.join(results, name, "y.npy"))
        err = float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))
        worst = max(worst, err)
        print("%s: %s" % (name, "ok" if err < 1e-5 else "DIFFERS by %.3g" % err))
    sys.exit(0 if worst < 1e-5 else 1)


if __name__ == "__main__":
    if sys.argv[1] == "--reference":
        reference(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        write(sys.argv[1])
