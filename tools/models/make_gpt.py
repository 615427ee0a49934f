#!/usr/bin/env python3
"""Generates a GPT-2-style decoder-only transformer as an ONNX model.

The graph is what PyTorch exports for GPT-2 (opset 17): token and position
embeddings (Gather), pre-norm blocks with LayerNormalization, fused QKV
projection (MatMul + Add), Split, Reshape/Transpose into heads, scaled
QK^T with a causal mask (Where), Softmax, attention output projection, a
GELU MLP (Erf form), residual Adds, a final LayerNormalization and logits
tied to the token embedding. Weights are random (seeded) with GPT-2's
initialization scale; they are the model's only initializers (constants such
as the causal mask are Constant nodes, as in PyTorch exports).

    make_gpt.py --layers 4 --d-model 128 --heads 4 --seq 64 --vocab 256 -o gpt.onnx
    make_gpt.py --preset gpt2-small -o gpt2.onnx   # 124M parameters

With --experts E (--top-k, --expert-intermediate) each MLP is a mixture of
experts as transformers exports Mixtral's ("batched_mm" experts).

With --encoder (preset bert-base) it is a BERT-style encoder instead: no
causal mask, post-norm blocks (LayerNormalization after each residual Add),
an embedding LayerNormalization, and the same tied output projection (a
masked-language-model head without its extra dense layer).

    make_gpt.py --preset bert-base -o bert.onnx    # 12 layers, d=768, T=128

With --attention-op each layer's attention is one ONNX Attention node
(opset 23, is_causal for the decoder) on the heads, as newer exporters
write it.
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PRESETS = {
    "tiny": dict(layers=4, d_model=128, heads=4, seq=64, vocab=256, batch=2),
    "gpt2-small": dict(layers=12, d_model=768, heads=12, seq=1024, vocab=50257, batch=1),
    "bert-base": dict(layers=12, d_model=768, heads=12, seq=128, vocab=30522, batch=1, encoder=True),
}


def build(layers, d_model, heads, seq, vocab, batch, seed=0, separate_qkv=False, absent_weights=None,
          encoder=False, attention_op=False, dynamic_batch=False, dropout=0.0, experts=0,
          top_k=2, expert_intermediate=0):
    """absent_weights: a file name. The weight matrices are then declared as
    external data in that file, which is not written (a model of any size
    whose plans start from --init-parameters); vectors stay inline.
    dropout: training-mode Dropout at this ratio where Megatron-LM's GPT
    has it: the embeddings' sum, the attention probabilities (not with
    attention_op) and each block's two outputs before their residual Add."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    hd = d_model // heads
    offset = [0]

    def param(name, shape, std=0.02, value=None):
        if value is None and absent_weights:
            t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
            t.data_location = TensorProto.EXTERNAL
            n = 4 * int(np.prod(shape))
            for k, v in (("location", absent_weights), ("offset", str(offset[0])), ("length", str(n))):
                entry = t.external_data.add()
                entry.key, entry.value = k, v
            offset[0] += n
            inits.append(t)
            return name
        if value is None:
            value = (rng.standard_normal(shape) * std).astype(np.float32)
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, inputs, n_out=1, name=None, **attrs):
        name = name or "%s_%d" % (op, len(nodes))
        outs = ["%s_out%d" % (name, i) for i in range(n_out)]
        nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(name, value):
        # Architectural constants are Constant nodes, as PyTorch exports them,
        # so only the weights are initializers (and trainable).
        nodes.append(helper.make_node("Constant", [], [name], name=name,
                                      value=numpy_helper.from_array(np.asarray(value), name)))
        return name

    wte = param("wte", (vocab, d_model))
    wpe = param("wpe", (seq, d_model), std=0.01)
    positions = const("positions", np.arange(seq, dtype=np.int64))
    tok = node("Gather", [wte, "input_ids"], name="embed_tokens")
    pos = node("Gather", [wpe, positions], name="embed_positions")
    x = node("Add", [tok, pos], name="embed_add")
    if dropout:
        ratio = const("dropout_ratio", np.array(dropout, np.float32))
        training = const("dropout_training", np.array(True))

    def drop(t, name):
        return node("Dropout", [t, ratio, training], name=name) if dropout else t

    x = drop(x, "embed_dropout")

    def moe_block(t, p):
        """A mixture of experts in place of the MLP, as transformers exports
        Mixtral's with the "batched_mm" experts: a softmax router, top-k,
        the weights renormalized, each token's rows gathered experts'
        SwiGLU weights times the row, and the weighted sum over the k."""
        # Every token count is -1: the block takes any batch.
        inter = expert_intermediate
        shape = lambda name, v: const(p + name, np.array(v, np.int64))
        flat = node("Reshape", [t, shape("moe_flat", [-1, d_model])], name=p + "moe_flat")
        logits = node("MatMul", [flat, param(p + "moe.router.weight", (d_model, experts))],
                      name=p + "moe_router")
        probs = node("Softmax", [logits], name=p + "moe_softmax", axis=-1)
        top, ids = node("TopK", [probs, shape("moe_k", [top_k])], n_out=2, name=p + "moe_topk",
                        axis=-1)
        total = node("ReduceSum", [top, shape("moe_last", [-1])], name=p + "moe_top_sum",
                     keepdims=1)
        weights = node("Div", [top, total], name=p + "moe_renorm")
        rows = node("Expand", [node("Unsqueeze", [flat, shape("moe_one", [1])], name=p + "moe_rep1"),
                               shape("moe_expand", [1, top_k, 1])], name=p + "moe_rep")
        rows = node("Reshape", [rows, shape("moe_rows", [-1, d_model, 1])],
                    name=p + "moe_rows")
        row_ids = node("Reshape", [ids, shape("moe_row_ids", [-1, 1])],
                       name=p + "moe_row_ids")
        w1 = node("GatherND", [param(p + "moe.experts.gate_up_proj", (experts, 2 * inter, d_model)),
                               row_ids], name=p + "moe_gather_gate_up")
        h = node("MatMul", [w1, rows], name=p + "moe_gate_up")
        h = node("Reshape", [h, shape("moe_h", [-1, 2 * inter])], name=p + "moe_h")
        gate, up = node("Split", [h, shape("moe_split", [inter, inter])], n_out=2,
                        name=p + "moe_split", axis=1)
        act = node("Mul", [node("Mul", [gate, node("Sigmoid", [gate], name=p + "moe_sig")],
                                name=p + "moe_silu"), up], name=p + "moe_act")
        act = node("Reshape", [act, shape("moe_act_col", [-1, inter, 1])],
                   name=p + "moe_act_col")
        w2 = node("GatherND", [param(p + "moe.experts.down_proj", (experts, d_model, inter)),
                               row_ids], name=p + "moe_gather_down")
        o = node("MatMul", [w2, act], name=p + "moe_down")
        o = node("Reshape", [o, shape("moe_o", [-1, top_k, d_model])], name=p + "moe_o")
        o = node("Mul", [o, node("Unsqueeze", [weights, shape("moe_last2", [-1])],
                                 name=p + "moe_w")], name=p + "moe_weighted")
        y = node("ReduceSum", [o, shape("moe_choice_axis", [1])], name=p + "moe_sum", keepdims=0)
        return node("Reshape", [y, shape("moe_seq", [-1, seq, d_model])], name=p + "moe_out")

    def layer_norm(t, name):
        return node("LayerNormalization", [t, param(name + ".weight", None, value=np.ones(d_model, np.float32)),
                                           param(name + ".bias", None, value=np.zeros(d_model, np.float32))],
                    name=name, axis=-1, epsilon=1e-5)

    if encoder:
        x = layer_norm(x, "embed_ln")

    if not encoder and not attention_op:
        mask = const("causal_mask", np.tril(np.ones((seq, seq), dtype=bool)))
        neg = const("neg_inf", np.array(-1e9, dtype=np.float32))
    scale = const("attn_scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    # A symbolic batch: the reshapes copy the input's first dimension (0).
    rows = 0 if dynamic_batch else batch
    heads_shape = const("heads_shape", np.array([rows, seq, heads, hd], dtype=np.int64))
    model_shape = const("model_shape", np.array([rows, seq, d_model], dtype=np.int64))
    split_sizes = const("qkv_split", np.array([d_model] * 3, dtype=np.int64))
    half = const("half", np.array(0.5, dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    rsqrt2 = const("rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    proj_std = 0.02 / np.sqrt(2 * layers)

    for l in range(layers):
        p = "h%d." % l
        # Pre-norm (GPT) normalizes each block's input; post-norm (BERT)
        # its output after the residual Add.
        ln1 = x if encoder else layer_norm(x, p + "ln_1")
        if separate_qkv:
            # One projection each, as Megatron lays out a fused QKV weight
            # for tensor parallelism: splitting the columns splits heads.
            q, k, v = (node("Add", [node("MatMul", [ln1, param(p + "attn.%s.weight" % n, (d_model, d_model))],
                                         name=p + n),
                                    param(p + "attn.%s.bias" % n, None, value=np.zeros(d_model, np.float32))],
                            name=p + n + "_bias") for n in ("q", "k", "v"))
        else:
            qkv = node("MatMul", [ln1, param(p + "attn.c_attn.weight", (d_model, 3 * d_model))], name=p + "qkv")
            qkv = node("Add", [qkv, param(p + "attn.c_attn.bias", None, value=np.zeros(3 * d_model, np.float32))],
                       name=p + "qkv_bias")
            q, k, v = node("Split", [qkv, split_sizes], n_out=3, name=p + "split", axis=-1)
        def to_heads(t, nm, perm):
            r = node("Reshape", [t, heads_shape], name=p + nm + "_reshape")
            return node("Transpose", [r], name=p + nm + "_transpose", perm=perm)
        q = to_heads(q, "q", [0, 2, 1, 3])
        v = to_heads(v, "v", [0, 2, 1, 3])
        if attention_op:
            # opset 23's Attention on B x H x S x D operands.
            k = to_heads(k, "k", [0, 2, 1, 3])
            o = node("Attention", [q, k, v], name=p + "attention",
                     is_causal=0 if encoder else 1, scale=float(1.0 / np.sqrt(hd)))
        else:
            k = to_heads(k, "k", [0, 2, 3, 1])
            s = node("MatMul", [q, k], name=p + "scores")
            s = node("Mul", [s, scale], name=p + "scale")
            if not encoder:
                s = node("Where", [mask, s, neg], name=p + "causal")
            a = drop(node("Softmax", [s], name=p + "softmax", axis=-1), p + "attn_dropout")
            o = node("MatMul", [a, v], name=p + "context")
        o = node("Transpose", [o], name=p + "merge_transpose", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, model_shape], name=p + "merge_reshape")
        o = node("MatMul", [o, param(p + "attn.c_proj.weight", (d_model, d_model), std=proj_std)], name=p + "proj")
        o = node("Add", [o, param(p + "attn.c_proj.bias", None, value=np.zeros(d_model, np.float32))],
                 name=p + "proj_bias")
        x = node("Add", [x, drop(o, p + "proj_dropout")], name=p + "residual_1")
        if encoder:
            x = layer_norm(x, p + "ln_1")
        ln2 = x if encoder else layer_norm(x, p + "ln_2")
        if experts:
            h = moe_block(ln2, p)
            x = node("Add", [x, drop(h, p + "mlp_dropout")], name=p + "residual_2")
            continue
        h = node("MatMul", [ln2, param(p + "mlp.c_fc.weight", (d_model, 4 * d_model))], name=p + "fc")
        h = node("Add", [h, param(p + "mlp.c_fc.bias", None, value=np.zeros(4 * d_model, np.float32))],
                 name=p + "fc_bias")
        # GELU, erf form: 0.5 * h * (1 + erf(h / sqrt(2)))
        g = node("Mul", [h, rsqrt2], name=p + "gelu_scale")
        g = node("Erf", [g], name=p + "gelu_erf")
        g = node("Add", [g, one], name=p + "gelu_add")
        g = node("Mul", [h, g], name=p + "gelu_mul")
        g = node("Mul", [g, half], name=p + "gelu_half")
        h = node("MatMul", [g, param(p + "mlp.c_proj.weight", (4 * d_model, d_model), std=proj_std)],
                 name=p + "mlp_proj")
        h = node("Add", [h, param(p + "mlp.c_proj.bias", None, value=np.zeros(d_model, np.float32))],
                 name=p + "mlp_proj_bias")
        x = node("Add", [x, drop(h, p + "mlp_dropout")], name=p + "residual_2")
        if encoder:
            x = layer_norm(x, p + "ln_2")

    if not encoder:
        x = layer_norm(x, "ln_f")
    wte_t = node("Transpose", [wte], name="lm_head_transpose", perm=[1, 0])
    logits = node("MatMul", [x, wte_t], name="lm_head")
    nodes[-1].output[0] = "logits"

    graph = helper.make_graph(
        nodes, "bert" if encoder else "gpt",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch" if dynamic_batch else batch, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch" if dynamic_batch else batch, seq, vocab])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23 if attention_op else 17)],
                              producer_name="cleave-make-gpt")
    model.ir_version = 8
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for k in ("layers", "d_model", "heads", "seq", "vocab", "batch"):
        p.add_argument("--" + k.replace("_", "-"), type=int)
    p.add_argument("--encoder", action="store_true", default=None,
                   help="a BERT-style encoder (no causal mask, post-norm blocks)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--separate-qkv", action="store_true",
                   help="q, k and v projections of their own (attn.q/k/v.weight) "
                        "instead of the fused c_attn, so that tensor parallelism "
                        "can split heads by splitting their columns")
    p.add_argument("--attention-op", action="store_true",
                   help="each layer's attention as one ONNX Attention node (opset 23) "
                        "instead of MatMul, Softmax and MatMul (opset 17)")
    p.add_argument("--external-data", action="store_true",
                   help="store the weights in a .data file beside the model")
    p.add_argument("--absent-weights", action="store_true",
                   help="declare the weight matrices as external data in <model>.weights "
                        "without writing that file: a model of any size, compiled with "
                        "--init-parameters (planning and simulating large models)")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="a symbolic batch dimension ('batch'), pinned at compile time "
                        "with --input-shape (what cleave-compile --auto needs)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="training-mode Dropout at this ratio where Megatron-LM's GPT has it "
                        "(embeddings, attention probabilities, block outputs)")
    p.add_argument("--experts", type=int, default=0,
                   help="a mixture of experts of this many SwiGLU experts in place of each "
                        "MLP, exported as transformers' \"batched_mm\" experts (Mixtral's "
                        "form; static batch only)")
    p.add_argument("--top-k", type=int, default=2, help="--experts: experts per token")
    p.add_argument("--expert-intermediate", type=int, default=0,
                   help="--experts: each expert's hidden size (default 4 x d-model / top-k)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    cfg = dict(PRESETS[a.preset])
    for k in ("layers", "d_model", "heads", "seq", "vocab", "batch", "encoder"):
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    model = build(seed=a.seed, separate_qkv=a.separate_qkv, attention_op=a.attention_op,
                  dynamic_batch=a.dynamic_batch, dropout=a.dropout, experts=a.experts,
                  top_k=a.top_k,
                  expert_intermediate=a.expert_intermediate or 4 * cfg["d_model"] // a.top_k,
                  absent_weights=os.path.basename(a.output) + ".weights" if a.absent_weights else None,
                  **cfg)
    if a.external_data:
        onnx.save_model(model, a.output, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(a.output) + ".data", size_threshold=1024)
    else:
        onnx.save_model(model, a.output)
    n = sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.data_type == TensorProto.FLOAT)
    if a.absent_weights:
        print("weight matrices declared in %s.weights, which is not written" % os.path.basename(a.output))
    print("wrote %s: %s%d layers, d=%d, %d heads, T=%d, vocab %d, batch %d, %.1fM parameters" % (
        a.output, "encoder, " if cfg.get("encoder") else "", cfg["layers"], cfg["d_model"], cfg["heads"], cfg["seq"], cfg["vocab"], cfg["batch"], n / 1e6))


if __name__ == "__main__":
    main()
