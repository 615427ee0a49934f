#!/usr/bin/env python3
"""The router losses of a mixture-of-experts export, from onnxruntime.

    moe_router_losses.py MODEL IDS.npy AUX_COEF Z_COEF PLAIN.jsonl WITH.jsonl

Runs MODEL (input_ids = IDS.npy, one batch) in onnxruntime with each
router's logits, softmax and top-k indices exposed (a TopK over a Softmax),
computes the load-balancing loss (Switch/GShard: E * sum_e f_e P_e, f_e the
fraction of the T * k choices that picked expert e, P_e its mean
probability) and the z-loss (mean over tokens of logsumexp(logits)^2),
summed over the routers, and compares AUX_COEF * aux + Z_COEF * z with the
difference of the first step's loss between WITH.jsonl (trained with
--moe-aux-loss/--moe-z-loss) and PLAIN.jsonl (without): both losses are of
the same parameters, before the first update.
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    model_path, ids_path, aux_coef, z_coef, plain, with_ = sys.argv[1:7]
    aux_coef, z_coef = float(aux_coef), float(z_coef)
    model = onnx.load(model_path)
    producers = {o: n for n in model.graph.node for o in n.output}
    routers = []
    for n in model.graph.node:
        if n.op_type != "TopK":
            continue
        softmax = producers.get(n.input[0])
        if softmax is None or softmax.op_type != "Softmax":
            continue
        routers.append((softmax.input[0], softmax.output[0], n.output[1]))
    names = [name for r in routers for name in r]
    for name in names:
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.load(ids_path)
    values = dict(zip([o.name for o in session.get_outputs()],
                      session.run(None, {"input_ids": ids})))
    aux = z = 0.0
    for logits_name, probs_name, idx_name in routers:
        logits = values[logits_name].astype(np.float64).reshape(-1, values[logits_name].shape[-1])
        probs = values[probs_name].astype(np.float64).reshape(logits.shape)
        idx = values[idx_name].reshape(logits.shape[0], -1)
        t, e = probs.shape
        k = idx.shape[1]
        f = np.bincount(idx.ravel(), minlength=e) / (t * k)
        aux += e * np.sum(f * probs.mean(0))
        m = logits.max(1)
        lse = np.log(np.exp(logits - m[:, None]).sum(1)) + m
        z += np.mean(lse ** 2)
    want = aux_coef * aux + z_coef * z
    first = lambda path: json.loads(open(path).readline())["loss"]
    got = first(with_) - first(plain)
    rel = abs(got - want) / abs(want)
    print("%d routers: aux %.6f, z %.6f; step-1 loss difference %.7f, reference %.7f: %s"
          % (len(routers), aux, z, got, want, "within 1e-3" if rel < 1e-3 else "DIFFERS (%.3g)" % rel))
    sys.exit(0 if rel < 1e-3 else 1)


if __name__ == "__main__":
    main()
