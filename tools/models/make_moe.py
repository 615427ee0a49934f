#!/usr/bin/env python3
"""Writes one mixture-of-experts layer as ONNX, in the form PyTorch exports
transformers' MoE blocks with the "batched_mm" experts implementation
(Mixtral's, Qwen2-MoE's; see test/models/mixtral.onnx):

  router:   logits = x Wr^T (Gemm), probabilities = softmax(logits),
            weights, ids = TopK(probabilities, k), weights /= sum(weights)
  dispatch: each token repeated k times (Unsqueeze, Expand, Reshape)
  experts:  GatherND of each row's expert weights (E x 2I x D), MatMul
            with the row as a column, the SwiGLU (gate and up halves),
            GatherND of the down projections (E x D x I), MatMul
  combine:  rows times their weights, summed over the k choices

`--train --loss=mse:y,target` trains it (the loss adds the target input).
Weights are drawn from a fixed seed. With `--batch B`, x and y are
B x tokens/B x d (sequences of tokens, flattened around the layer as
transformers do), so that each batch row is a group of its own for
--moe-capacity-factor. `--form gshard --capacity C` writes GShard's einsum
MoE instead (top-1 gating, C slots per expert and batch row, dispatch and
combine masks, experts as einsums batched over E).

    make_moe.py [--tokens 4096] [--batch 0] [--d-model 512]
        [--intermediate 64] [--experts 8] [--top-k 2] [--seed 0] -o moe.onnx
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(tokens, d, inter, experts, k, seed, batch=0):
    rng = np.random.default_rng(seed)
    f32 = np.float32

    def init(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(f32), name)

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    inits = [
        init("router.weight", (experts, d), d ** -0.5),
        init("experts.gate_up_proj", (experts, 2 * inter, d), d ** -0.5),
        init("experts.down_proj", (experts, d, inter), inter ** -0.5),
        ints("k", [k]),
        ints("last", [-1]),
        ints("one", [1]),
        ints("rows_shape", [tokens * k]),
        ints("rep_shape", [tokens * k, d]),
        ints("expand_shape", [tokens, k, d]),
        ints("tkd_shape", [tokens, k, d]),
        ints("zero", [0]),
        ints("inter", [inter]),
        ints("two_inter", [2 * inter]),
    ]
    n = helper.make_node
    nodes = [
        # Router.
        n("Gemm", ["xt", "router.weight"], ["logits"], transB=1),
        n("Softmax", ["logits"], ["probs"], axis=-1),
        n("TopK", ["probs", "k"], ["top", "ids"], axis=-1, largest=1,
          sorted=1),
        n("ReduceSum", ["top", "last"], ["top_sum"], keepdims=1),
        n("Div", ["top", "top_sum"], ["route_weights"]),
        # Dispatch: each token k times, the ids flattened.
        n("Unsqueeze", ["xt", "one"], ["x1"]),
        n("Expand", ["x1", "expand_shape"], ["xk"]),
        n("Reshape", ["xk", "rep_shape"], ["rows"]),
        n("Reshape", ["ids", "rows_shape"], ["row_ids"]),
        n("Unsqueeze", ["row_ids", "last"], ["row_ids1"]),
        n("Unsqueeze", ["rows", "last"], ["rows_col"]),
        # Experts: gathered gate/up weights times each row, SwiGLU, then
        # the gathered down projections.
        n("GatherND", ["experts.gate_up_proj", "row_ids1"], ["w1"]),
        n("MatMul", ["w1", "rows_col"], ["h1"]),
        n("Squeeze", ["h1", "last"], ["h"]),
        n("Slice", ["h", "zero", "inter", "one"], ["gate"]),
        n("Slice", ["h", "inter", "two_inter", "one"], ["up"]),
        n("Sigmoid", ["gate"], ["gate_sig"]),
        n("Mul", ["gate", "gate_sig"], ["gate_silu"]),
        n("Mul", ["gate_silu", "up"], ["act"]),
        n("Unsqueeze", ["act", "last"], ["act_col"]),
        n("GatherND", ["experts.down_proj", "row_ids1"], ["w2"]),
        n("MatMul", ["w2", "act_col"], ["o1"]),
        n("Squeeze", ["o1", "last"], ["o"]),
        # Combine.
        n("Reshape", ["route_weights", "rows_shape"], ["rw"]),
        n("Unsqueeze", ["rw", "last"], ["rw1"]),
        n("Mul", ["o", "rw1"], ["weighted"]),
        n("Reshape", ["weighted", "tkd_shape"], ["per_choice"]),
        n("ReduceSum", ["per_choice", "one"], ["yt"], keepdims=0),
    ]
    shape = [tokens, d]
    if batch:
        # Sequences: flattened to tokens around the layer.
        shape = [batch, tokens // batch, d]
        inits += [ints("flat_shape", [tokens, d]), ints("seq_shape", shape)]
        nodes.insert(0, n("Reshape", ["x", "flat_shape"], ["xt"]))
        nodes.append(n("Reshape", ["yt", "seq_shape"], ["y"]))
    else:
        nodes.insert(0, n("Identity", ["x"], ["xt"]))
        nodes.append(n("Identity", ["yt"], ["y"]))
    return finish("moe_layer", nodes, inits, shape)


def finish(name, nodes, inits, shape):
    """The checked opset-17 model of `nodes`: input x, output y of `shape`."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_gshard(tokens, d, inter, experts, capacity, seed, batch):
    """GShard's einsum MoE (Lepikhin et al. 2020) with Switch's top-1
    gating: each batch row (a group of tokens/batch tokens) gives each expert
    `capacity` slots, taken in token order; the dispatch mask G x S x E x C
    moves the tokens into E x G x C x D, the experts (ReLU MLPs) run as
    einsums batched over E, and the gate-weighted combine mask brings the
    results back. Tokens past capacity are dropped (zero)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    seq = tokens // batch

    def init(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(f32), name)

    def ints(name, value):
        return numpy_helper.from_array(np.array(value, dtype=np.int64), name)

    def const(name, value):
        return helper.make_node(
            "Constant", [], [name],
            value=numpy_helper.from_array(np.array(value, dtype=f32), name))

    inits = [
        init("router.weight", (d, experts), d ** -0.5),
        init("experts.wi", (experts, d, inter), d ** -0.5),
        init("experts.wo", (experts, inter, d), inter ** -0.5),
        ints("one", [1]), ints("last", [-1]), ints("seq_axis", 1),
        ints("experts", experts), ints("capacity", capacity),
    ]
    n = helper.make_node
    nodes = [
        const("off_on", [0.0, 1.0]), const("slots", float(capacity)),
        const("one_f", 1.0),
        # Gating: top-1 of the softmax; each token's place among its
        # group's tokens routed to the same expert (an inclusive cumsum).
        n("Einsum", ["x", "router.weight"], ["logits"], equation="GSM,ME->GSE"),
        n("Softmax", ["logits"], ["probs"], axis=-1),
        n("TopK", ["probs", "one"], ["gate", "choice"], axis=-1),
        n("Squeeze", ["choice", "last"], ["expert"]),
        n("OneHot", ["expert", "experts", "off_on"], ["routed"], axis=-1),
        n("CumSum", ["routed", "seq_axis"], ["count"]),
        n("Mul", ["count", "routed"], ["place_e"]),
        n("ReduceSum", ["place_e", "last"], ["place1"], keepdims=0),
        n("Sub", ["place1", "one_f"], ["place"]),
        n("Less", ["place", "slots"], ["kept"]),
        n("Cast", ["kept"], ["kept_f"], to=TensorProto.FLOAT),
        n("Cast", ["place"], ["place_i"], to=TensorProto.INT64),
        n("OneHot", ["place_i", "capacity", "off_on"], ["slot"], axis=-1),
        n("Unsqueeze", ["kept_f", "last"], ["kept_1"]),
        n("Mul", ["slot", "kept_1"], ["kept_slot"]),
        n("Einsum", ["routed", "kept_slot"], ["dispatch"],
          equation="GSE,GSC->GSEC"),
        n("Squeeze", ["gate", "last"], ["gate_s"]),
        n("Einsum", ["dispatch", "gate_s"], ["combine"],
          equation="GSEC,GS->GSEC"),
        # Dispatch, experts, combine.
        n("Einsum", ["dispatch", "x"], ["dispatched"],
          equation="GSEC,GSM->EGCM"),
        n("Einsum", ["dispatched", "experts.wi"], ["h_pre"],
          equation="EGCM,EMH->EGCH"),
        n("Relu", ["h_pre"], ["h"]),
        n("Einsum", ["h", "experts.wo"], ["expert_out"],
          equation="EGCH,EHM->EGCM"),
        n("Einsum", ["combine", "expert_out"], ["y"],
          equation="GSEC,EGCM->GSM"),
    ]
    return finish("gshard_moe_layer", nodes, inits, [batch, seq, d])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--intermediate", type=int, default=64)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--form", choices=["batched_mm", "gshard"],
                   default="batched_mm")
    p.add_argument("--capacity", type=int, default=0,
                   help="--form gshard: slots per expert and batch row")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    if a.form == "gshard":
        if a.batch < 1 or a.tokens % a.batch or a.capacity < 1:
            p.error("--form gshard needs --batch dividing --tokens and "
                    "--capacity >= 1")
        onnx.save(build_gshard(a.tokens, a.d_model, a.intermediate,
                               a.experts, a.capacity, a.seed, a.batch),
                  a.output)
        return
    if not 1 <= a.top_k <= a.experts:
        p.error("--top-k must be between 1 and --experts")
    if a.batch < 0 or (a.batch and a.tokens % a.batch):
        p.error("--batch must divide --tokens")
    model = build(a.tokens, a.d_model, a.intermediate, a.experts, a.top_k,
                  a.seed, a.batch)
    onnx.save(model, a.output)


if __name__ == "__main__":
    main()
