#!/usr/bin/env python3
"""Generate the real-model suite: tiny ONNX exports of real architectures together
with PyTorch's reference numbers for inference and training.

For every model in MODELS this writes, next to this script:

  <name>.onnx   The model exported by torch.onnx (dynamo exporter, opset 18; the
                *_opset23 models at opset 23, with Attention and RMSNormalization) in eval mode:
                static shapes, one self-contained file (no external data), one output,
                "logits". Weights are random (fixed seeds) and made pairwise distinct so
                that every PyTorch parameter and buffer is its own ONNX initializer.
                The exporter's optimizer then runs with the parameters protected,
                except for the mixture-of-experts models (Mixtral, Qwen2-MoE, experts
                implementation "batched_mm"), which stay exactly as
                torch.onnx.export(optimize=False) writes them, sequence ops included.
  <name>_default.onnx
                (GPT-2, Llama, BERT, Qwen2) The same weights exported with
                torch.onnx.export's defaults, its optimizer on: parameters folded into
                transposed copies and constants, as users' files arrive.
  <name>.npz    PyTorch reference numbers (float32 unless noted):
                  input.<input>           the model inputs
                  labels                  int64 cross-entropy targets (-100 = ignored)
                  logits                  eval-mode logits for those inputs
                  grad.<initializer>      gradient of the loss after one forward/backward
                                          in train mode, per trainable parameter
                  losses.<run>            the losses of STEPS optimizer steps in train mode,
                                          all on the same batch, each recorded before that
                                          step's update (losses.<run>[0] is the initial loss)
                  grad_norm.<run>         the global gradient norm of each step, before
                                          clipping
                  running.<initializer>   BatchNorm running mean/variance after the STEPS
                                          steps of the "adamw" run (models with BatchNorm)
                The loss is F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1),
                ignore_index=-100): the mean over the positions that are not ignored.

and manifest.json, which describes every model (ONNX file, inputs, loss spec, which
initializers are parameters, buffers or other constants, the ONNX op types, the optimizer
runs) and the package versions used.

Regenerate everything, or one model (the other manifest entries are kept), with a Python
that has torch, torchvision, transformers, onnxscript and onnx installed:

  python test/models/make_models.py [--only NAME...]
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import json
import re
import sys
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.reference
import onnx_ir as ir
import onnxscript
import onnxscript.optimizer
import torch
import torch.nn.functional as F
import torchvision
import transformers
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

OUT_DIR = Path(__file__).resolve().parent
OPSET = 18
STEPS = 20
IGNORE_INDEX = -100
MAX_FILE_BYTES = 2 * 1024 * 1024

# Optimizer runs as the manifest describes them (make_optimizer builds the torch.optim
# optimizer). The learning rate is constant. "adamw_clip" clips the global gradient norm
# to a bound chosen per model.
RUNS = {
    "sgd": dict(optimizer="momentum", lr=0.05, momentum=0.9, beta1=0.0, beta2=0.0, eps=0.0,
                weight_decay=0.01, clip_grad_norm=0.0),
    "adam": dict(optimizer="adam", lr=1e-3, momentum=0.0, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=0.01, clip_grad_norm=0.0),
    "adamw": dict(optimizer="adamw", lr=1e-3, momentum=0.0, beta1=0.9, beta2=0.999, eps=1e-8,
                  weight_decay=0.1, clip_grad_norm=0.0),
    "adamw_clip": dict(optimizer="adamw", lr=1e-3, momentum=0.0, beta1=0.9, beta2=0.999,
                       eps=1e-8, weight_decay=0.1, clip_grad_norm=None),  # set per model
}
# The largest relative difference between a run's float32 and float64 losses that
# generation accepts (the suite compares Cleave's losses with PyTorch's at 1e-4).
MAX_CONDITIONING = 2e-5
CLIP_FRACTION = 0.3  # adamw_clip bound: this fraction of the initial global grad norm


def make_optimizer(run: dict, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    if run["optimizer"] == "momentum":
        return torch.optim.SGD(params, lr=run["lr"], momentum=run["momentum"],
                               weight_decay=run["weight_decay"])
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[run["optimizer"]]
    return cls(params, lr=run["lr"], betas=(run["beta1"], run["beta2"]), eps=run["eps"],
               weight_decay=run["weight_decay"])


# --------------------------------------------------------------------------- models


class Logits(nn.Module):
    """Calls the wrapped model with one named input and returns only its logits."""

    def __init__(self, model: nn.Module, input_name: str):
        super().__init__()
        self.model = model
        self.input_name = input_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(**{self.input_name: x})
        return out if isinstance(out, torch.Tensor) else out.logits


class SmallResNet(ResNet):
    """torchvision's ResNet (its blocks, _make_layer and forward) with narrower stages."""

    def __init__(self, block, layers, widths, num_classes):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = widths[0]
        self.dilation = 1
        self.groups = 1
        self.base_width = 64
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2)
        self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)
        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)


@dataclasses.dataclass
class Case:
    """A model, its single input and its labels."""

    model: nn.Module  # returns the logits tensor
    input_name: str
    input: torch.Tensor
    labels: torch.Tensor
    description: str
    # Per-run changes to RUNS (a smaller learning rate where the default one makes the
    # training chaotic, so that float32 rounding alone would decide the 20 losses).
    run_overrides: dict = dataclasses.field(default_factory=dict)
    # The exporter's opset: 23 lets it write attention, RMS norm as the
    # Attention and RMSNormalization ops.
    opset: int = OPSET
    # Also export with torch.onnx.export's defaults (its optimizer on), as
    # <name>_default.onnx: what a user who does not protect the parameters gets.
    default_export: bool = False
    # Run the optimizer of torch.onnx.export(optimize=True) on the export,
    # parameters protected (optimize_keeping_state). Without it the file is
    # exactly what torch.onnx.export(optimize=False) writes (the MoE models:
    # their torch.split stays SplitToSequence and SequenceAt, which the
    # optimizer would rewrite into Split).
    optimize: bool = True


LM_BATCH, LM_SEQ, VOCAB = 2, 8, 96
NO_DROPOUT = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def random_tokens(gen: torch.Generator, shape, low: int = 0) -> torch.Tensor:
    return torch.randint(low, VOCAB, shape, generator=gen, dtype=torch.int64)


def gpt2_config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16,
                tied=True) -> transformers.GPT2Config:
    return transformers.GPT2Config(
        n_layer=n_layer, n_embd=n_embd, n_head=n_head, vocab_size=vocab_size,
        n_positions=n_positions, bos_token_id=0, eos_token_id=0, tie_word_embeddings=tied,
        use_cache=False, attn_implementation="eager", **NO_DROPOUT)


def gpt2(tied: bool, opset: int = OPSET) -> Callable[[torch.Generator], Case]:
    def build(gen: torch.Generator) -> Case:
        cfg = gpt2_config(tied=tied)
        if opset >= 23:  # scaled_dot_product_attention: one Attention node
            cfg._attn_implementation = "sdpa"
        model = transformers.GPT2LMHeadModel(cfg)
        return Case(Logits(model, "input_ids"), "input_ids",
                    random_tokens(gen, (LM_BATCH, LM_SEQ)),
                    random_tokens(gen, (LM_BATCH, LM_SEQ)),
                    f"GPT-2 (transformers GPT2LMHeadModel), 2 layers, n_embd 32, 4 heads, "
                    f"vocab {VOCAB}, {'tied' if tied else 'untied'} input/output embeddings"
                    + (f"; exported at opset {opset} (Attention)" if opset >= 23 else ""),
                    opset=opset, default_export=opset < 23)
    return build


def llama(opset: int = OPSET) -> Callable[[torch.Generator], Case]:
    # At opset 23 attention goes through scaled_dot_product_attention, which
    # the exporter writes as one Attention node, and RMSNorm as
    # RMSNormalization.
    def build(gen: torch.Generator) -> Case:
        cfg = transformers.LlamaConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=16,
            bos_token_id=0, eos_token_id=0, pad_token_id=None, tie_word_embeddings=False,
            attention_dropout=0.0, use_cache=False,
            attn_implementation="sdpa" if opset >= 23 else "eager")
        model = transformers.LlamaForCausalLM(cfg)
        return Case(Logits(model, "input_ids"), "input_ids",
                    random_tokens(gen, (LM_BATCH, LM_SEQ)), random_tokens(gen, (LM_BATCH, LM_SEQ)),
                    "Llama (transformers LlamaForCausalLM): RMSNorm, rotary embeddings, SwiGLU "
                    "MLP, grouped-query attention (4 heads, 2 kv heads), 2 layers, hidden 32, "
                    f"intermediate 64, vocab {VOCAB}, untied embeddings"
                    + (f"; exported at opset {opset} (Attention, RMSNormalization)"
                       if opset >= 23 else ""),
                    opset=opset, default_export=opset < 23)
    return build


def qwen2(gen: torch.Generator) -> Case:
    cfg = transformers.Qwen2Config(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=16,
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=True, attention_dropout=0.0,
        use_cache=False, attn_implementation="eager")
    model = transformers.Qwen2ForCausalLM(cfg)
    return Case(Logits(model, "input_ids"), "input_ids",
                random_tokens(gen, (LM_BATCH, LM_SEQ)), random_tokens(gen, (LM_BATCH, LM_SEQ)),
                "Qwen2 (transformers Qwen2ForCausalLM): RMSNorm, rotary embeddings, SwiGLU "
                "MLP, grouped-query attention (4 heads, 2 kv heads) with q/k/v biases, "
                f"2 layers, hidden 32, intermediate 64, vocab {VOCAB}, tied embeddings",
                default_export=True)


# Mixture-of-experts models: 4 experts, top-2. transformers' default experts
# implementation loops over the experts hit (data-dependent shapes, which the
# exporter cannot write); "batched_mm" gathers every token's top-k expert weights
# and multiplies them in one batched MatMul, a static graph that computes every
# token's experts exactly (dropless).
MOE_EXPERTS, MOE_TOP_K = 4, 2


def mixtral(gen: torch.Generator) -> Case:
    cfg = transformers.MixtralConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, num_local_experts=MOE_EXPERTS, num_experts_per_tok=MOE_TOP_K,
        vocab_size=VOCAB, max_position_embeddings=16, bos_token_id=0, eos_token_id=0,
        pad_token_id=None, tie_word_embeddings=False, attention_dropout=0.0,
        router_jitter_noise=0.0, use_cache=False, attn_implementation="eager")
    cfg._experts_implementation = "batched_mm"
    model = transformers.MixtralForCausalLM(cfg)
    return Case(Logits(model, "input_ids"), "input_ids",
                random_tokens(gen, (LM_BATCH, LM_SEQ)), random_tokens(gen, (LM_BATCH, LM_SEQ)),
                "Mixtral (transformers MixtralForCausalLM): RMSNorm, rotary embeddings, "
                "grouped-query attention (4 heads, 2 kv heads), a sparse MoE block per layer "
                f"({MOE_EXPERTS} SwiGLU experts of intermediate 64, softmax router, top-"
                f"{MOE_TOP_K}, top-k weights renormalized), experts implementation "
                "\"batched_mm\" (dropless), 2 layers, hidden 32, "
                f"vocab {VOCAB}, untied embeddings; exported without the optimizer",
                optimize=False)


def qwen2_moe(gen: torch.Generator) -> Case:
    cfg = transformers.Qwen2MoeConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, moe_intermediate_size=32, shared_expert_intermediate_size=64,
        num_experts=MOE_EXPERTS, num_experts_per_tok=MOE_TOP_K, norm_topk_prob=False,
        vocab_size=VOCAB, max_position_embeddings=16, bos_token_id=0, eos_token_id=0,
        tie_word_embeddings=False, attention_dropout=0.0, use_cache=False,
        attn_implementation="eager")
    cfg._experts_implementation = "batched_mm"
    model = transformers.Qwen2MoeForCausalLM(cfg)
    return Case(Logits(model, "input_ids"), "input_ids",
                random_tokens(gen, (LM_BATCH, LM_SEQ)), random_tokens(gen, (LM_BATCH, LM_SEQ)),
                "Qwen2-MoE (transformers Qwen2MoeForCausalLM): RMSNorm, rotary embeddings, "
                "grouped-query attention (4 heads, 2 kv heads) with q/k/v biases, a sparse "
                f"MoE block per layer ({MOE_EXPERTS} SwiGLU experts of intermediate 32, "
                f"softmax router, top-{MOE_TOP_K}, weights not renormalized, plus a shared "
                "SwiGLU expert of intermediate 64 scaled by a sigmoid gate), experts "
                "implementation \"batched_mm\" (dropless), 2 layers, hidden 32, "
                f"vocab {VOCAB}, untied embeddings; exported without the optimizer",
                optimize=False)


BERT_SEQ, BERT_MASKED_PER_ROW, BERT_MASK_ID, BERT_FIRST_WORD = 16, 3, 3, 4


def bert_mlm(gen: torch.Generator) -> Case:
    cfg = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=32, type_vocab_size=2, pad_token_id=0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="eager")
    model = transformers.BertForMaskedLM(cfg)
    tokens = random_tokens(gen, (LM_BATCH, BERT_SEQ), low=BERT_FIRST_WORD)
    input_ids = tokens.clone()
    labels = torch.full_like(tokens, IGNORE_INDEX)
    for row in range(LM_BATCH):  # mask BERT_MASKED_PER_ROW positions per row (~19%)
        pos = torch.randperm(BERT_SEQ, generator=gen)[:BERT_MASKED_PER_ROW]
        labels[row, pos] = tokens[row, pos]
        input_ids[row, pos] = BERT_MASK_ID
    return Case(Logits(model, "input_ids"), "input_ids", input_ids, labels,
                "BERT masked LM (transformers BertForMaskedLM), 2 layers, hidden 32, 4 heads, "
                f"intermediate 64, vocab {VOCAB}, decoder tied to the word embeddings; "
                "attention_mask and token_type_ids take their defaults (all ones, all zeros); "
                f"{BERT_MASKED_PER_ROW} of {BERT_SEQ} positions per row are masked "
                f"(input id {BERT_MASK_ID}) and labelled, the rest are {IGNORE_INDEX}",
                default_export=True)


def vit(gen: torch.Generator) -> Case:
    cfg = transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, num_hidden_layers=2, hidden_size=32,
        num_attention_heads=4, intermediate_size=64, num_labels=10,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="eager")
    model = transformers.ViTForImageClassification(cfg)
    return Case(Logits(model, "pixel_values"), "pixel_values",
                torch.randn(2, 3, 16, 16, generator=gen),
                torch.randint(0, 10, (2,), generator=gen),
                "ViT (transformers ViTForImageClassification), 16x16 images, patch 4, "
                "2 layers, hidden 32, 4 heads, intermediate 64, 10 classes",
                run_overrides={"sgd": {"lr": 0.01}})


def resnet18(gen: torch.Generator) -> Case:
    model = SmallResNet(BasicBlock, [2, 2, 2, 2], widths=(8, 16, 32, 64), num_classes=10)
    return Case(Logits(model, "x"), "pixel_values",
                torch.randn(8, 3, 32, 32, generator=gen),
                torch.randint(0, 10, (8,), generator=gen),
                "ResNet-18 (torchvision ResNet, BasicBlock, layers [2,2,2,2]) with stage "
                "widths 8,16,32,64, BatchNorm2d, 32x32 images, 10 classes",
                run_overrides={"sgd": {"lr": 0.001}, "adam": {"lr": 1e-4},
                               "adamw": {"lr": 1e-4}, "adamw_clip": {"lr": 1e-4}})


MODELS: dict[str, Callable[[torch.Generator], Case]] = {
    "gpt2_tied": gpt2(tied=True),
    "gpt2_untied": gpt2(tied=False),
    "llama": llama(),
    "gpt2_opset23": gpt2(tied=True, opset=23),
    "llama_opset23": llama(opset=23),
    "qwen2": qwen2,
    "bert_mlm": bert_mlm,
    "vit": vit,
    "resnet18": resnet18,
    "mixtral": mixtral,
    "qwen2_moe": qwen2_moe,
}


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


# ------------------------------------------------------------------ distinct weights


def is_norm(module: nn.Module) -> bool:
    return (isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm))
            or type(module).__name__.endswith("RMSNorm"))


@torch.no_grad()
def make_distinct(model: nn.Module, gen: torch.Generator) -> None:
    """Perturbs every parameter and BatchNorm statistic so that no two tensors hold equal
    values (the exporter would otherwise merge them into one initializer): norm scales
    become 1 + 0.1*N(0,1), norm shifts 0.1*N(0,1), other parameters get N(0, 0.02^2) noise,
    running means 0.1*N(0,1) and running variances 1 + 0.1*U(0,1)."""
    seen = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            noise = torch.randn(p.shape, generator=gen)
            if is_norm(module) and name == "weight":
                p.copy_(1 + 0.1 * noise)
            elif is_norm(module) and name == "bias":
                p.copy_(0.1 * noise)
            else:
                p.add_(0.02 * noise)
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.running_mean.copy_(0.1 * torch.randn(module.running_mean.shape, generator=gen))
            module.running_var.copy_(1 + 0.1 * torch.rand(module.running_var.shape, generator=gen))


@dataclasses.dataclass
class StateTensor:
    """A parameter or BatchNorm statistic, with every module path that refers to it."""

    names: list[str]  # first one is the canonical (state-dict) name
    tensor: torch.Tensor
    trainable: bool


def state_tensors(model: nn.Module) -> list[StateTensor]:
    by_id: dict[int, StateTensor] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), StateTensor([], p, p.requires_grad)).names.append(name)
    for module_name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            for stat in ("running_mean", "running_var"):
                t = getattr(module, stat)
                by_id.setdefault(id(t), StateTensor([], t, False)).names.append(
                    f"{module_name}.{stat}")
    return list(by_id.values())


# ------------------------------------------------------------------------- export


def float_initializers(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
              onnx.TensorProto.BFLOAT16)
    return {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer
            if t.data_type in floats}


def match_initializers(state: list[StateTensor],
                       inits: dict[str, np.ndarray]) -> dict[int, str]:
    """Maps each state tensor (by index) to the initializer holding it: by name when the
    name holds the same values, otherwise by identical values. Fails if one is missing or
    ambiguous, or if two state tensors share an initializer."""
    found: dict[int, str] = {}
    for i, s in enumerate(state):
        value = s.tensor.detach().numpy()
        same = lambda n: inits[n].shape == value.shape and np.array_equal(inits[n], value)
        by_name = [n for n in inits for alias in s.names
                   if (n == alias or n.endswith("." + alias)) and same(n)]
        candidates = sorted(set(by_name)) or sorted(n for n in inits if same(n))
        if len(candidates) != 1:
            raise SystemExit(f"error: {s.names[0]}: expected one ONNX initializer with its "
                             f"values, found {candidates or 'none'}")
        found[i] = candidates[0]
    users = collections.defaultdict(list)
    for i, n in found.items():
        users[n].append(state[i].names[0])
    merged = {n: u for n, u in users.items() if len(u) > 1}
    if merged:
        raise SystemExit(f"error: the exporter merged distinct tensors: {merged}")
    return found


def optimize_keeping_state(model: ir.Model, state_names: set[str]) -> None:
    """Runs the optimizer that torch.onnx.export(optimize=True) runs, with the parameters
    and buffers shown to it as graph inputs: it folds constants and applies its rewrite
    rules, but never folds a parameter into a constant, so every parameter stays a
    trainable initializer. (The default pipeline replaces Linear weights by their folded
    transposes, folds position-embedding lookups at constant positions and the expanded
    ViT class token, and fuses BatchNorm into the preceding Conv.)"""
    graph = model.graph
    hidden = []
    for name in sorted(state_names):
        value = graph.initializers.pop(name)
        hidden.append((value, value.const_value))
        value.const_value = None
        graph.inputs.append(value)
    onnxscript.optimizer.optimize_ir(model)
    for value, tensor in hidden:
        graph.inputs.remove(value)
        value.const_value = tensor
        graph.register_initializer(value)


def export(model: nn.Module, example: torch.Tensor, input_name: str,
           state: list[StateTensor], path: Path,
           max_bytes: int | None = MAX_FILE_BYTES, opset: int = OPSET,
           optimize: bool = True) -> onnx.ModelProto:
    """Exports model (one input, returns the logits) in eval mode to one self-contained
    ONNX file in which every tensor of state is its own initializer; checks the file.
    With optimize, runs the exporter's optimizer with the state protected."""
    model.eval()
    program = torch.onnx.export(
        model, (example,), dynamo=True, opset_version=opset, input_names=[input_name],
        output_names=["logits"], optimize=False, verbose=False)
    raw_inits = {name: v.const_value.numpy()
                 for name, v in program.model.graph.initializers.items()
                 if v.const_value is not None and v.const_value.dtype.is_floating_point()}
    state_names = set(match_initializers(state, raw_inits).values())
    if optimize:
        optimize_keeping_state(program.model, state_names)
    for node in program.model.graph:  # source locations of this machine's Python files
        node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)
    program.save(str(path), external_data=False)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    size = path.stat().st_size
    if max_bytes is not None and size >= max_bytes:
        raise SystemExit(f"error: {path.name} is {size} bytes (limit {max_bytes})")
    inits = float_initializers(proto)
    check_no_copies(state, match_initializers(state, inits), inits)
    return proto


def export_default(model: nn.Module, example: torch.Tensor, input_name: str, path: Path,
                   opset: int) -> float:
    """Exports model with torch.onnx.export's defaults (dynamo, its optimizer on) to
    one self-contained file; returns its reference logits' max difference from
    PyTorch's."""
    model.eval()
    program = torch.onnx.export(model, (example,), dynamo=True, opset_version=opset,
                                input_names=[input_name], output_names=["logits"],
                                verbose=False)
    for node in program.model.graph:
        node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)
    program.save(str(path), external_data=False)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    if path.stat().st_size >= MAX_FILE_BYTES:
        raise SystemExit(f"error: {path.name} is too large")
    got = onnx.reference.ReferenceEvaluator(proto).run(None, {input_name: example.numpy()})[0]
    with torch.no_grad():
        want = model(example).numpy()
    return float(np.max(np.abs(got - want)))


def check_no_copies(state: list[StateTensor], names: dict[int, str],
                    inits: dict[str, np.ndarray]) -> None:
    """Fails if a non-state initializer holds a state tensor's values in any order (a
    folded transpose or reshape of a parameter would be a frozen copy of it)."""
    keys = {}
    for s in state:
        keys.setdefault(s.tensor.numel(), []).append(
            (np.sort(s.tensor.detach().numpy().ravel()), s.names[0]))
    state_inits = set(names.values())
    for n, v in inits.items():
        if n in state_inits:
            continue
        for sorted_vals, owner in keys.get(v.size, []):
            if np.array_equal(np.sort(v.ravel().astype(np.float32)), sorted_vals):
                raise SystemExit(f"error: initializer {n} is a copy of {owner}")


# ---------------------------------------------------------------------- reference


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def train_run(exported: nn.Module, case: Case, run: dict, dtype=torch.float32):
    """STEPS steps of one optimizer run from the exported weights, in `dtype`; returns
    the losses, the global gradient norms (before clipping) and the trained model."""
    model = copy.deepcopy(exported).to(dtype).train()
    inputs = case.input.to(dtype) if case.input.is_floating_point() else case.input
    params = trainable(model)
    opt = make_optimizer(run, params)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = cross_entropy(model(inputs), case.labels)
        loss.backward()
        if run["clip_grad_norm"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm=run["clip_grad_norm"])
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        losses.append(loss.item())
        norms.append(norm.item())
        opt.step()
    return np.array(losses, np.float64), np.array(norms, np.float64), model


def describe_values(v: np.ndarray) -> dict:
    if v.size == 1:
        return {"value": v.item()}
    return {"min": float(v.min()), "max": float(v.max())}


def two_significant(x: float) -> float:
    return float(f"{x:.2g}")


# ------------------------------------------------------------------------ driver


def generate(name: str) -> dict:
    seed = seed_of(name)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    case = MODELS[name](gen)
    model = case.model
    make_distinct(model, gen)
    model.eval()
    state = state_tensors(model.model)  # names relative to the wrapped model

    onnx_path = OUT_DIR / f"{name}.onnx"
    proto = export(model, case.input, case.input_name, state, onnx_path, opset=case.opset,
                   optimize=case.optimize)
    inits = float_initializers(proto)
    names = match_initializers(state, inits)
    exported = copy.deepcopy(model)  # every run starts from these weights
    default_export = {}
    if case.default_export:
        default_path = OUT_DIR / f"{name}_default.onnx"
        err = export_default(copy.deepcopy(model), case.input, case.input_name, default_path,
                             case.opset)
        if not err < 1e-4:
            raise SystemExit(f"error: {name}: default export's logits differ by {err}")
        default_export = {"default_export": {"onnx": default_path.name,
                                             "onnx_reference_max_abs_error": err}}

    data: dict[str, np.ndarray] = {f"input.{case.input_name}": case.input.numpy(),
                                   "labels": case.labels.numpy()}
    with torch.no_grad():
        logits = model(case.input)
    data["logits"] = logits.numpy()
    onnx_logits = onnx.reference.ReferenceEvaluator(proto).run(
        None, {case.input_name: case.input.numpy()})[0]
    onnx_err = float(np.max(np.abs(onnx_logits - data["logits"])))
    if not onnx_err < 1e-4:
        raise SystemExit(f"error: {name}: ONNX reference logits differ by {onnx_err}")

    grad_model = copy.deepcopy(exported).train()
    loss = cross_entropy(grad_model(case.input), case.labels)
    loss.backward()
    grad_state = state_tensors(grad_model.model)
    for i, s in enumerate(grad_state):
        if s.trainable:
            data[f"grad.{names[i]}"] = s.tensor.grad.numpy()
    initial_norm = torch.nn.utils.get_total_norm(
        [p.grad for p in trainable(grad_model)]).item()

    runs = {}
    for run_name, run in RUNS.items():
        run = dict(run, **case.run_overrides.get(run_name, {}))
        if run["clip_grad_norm"] is None:
            run["clip_grad_norm"] = two_significant(CLIP_FRACTION * initial_norm)
        losses, norms, trained = train_run(exported, case, run)
        data[f"losses.{run_name}"] = losses.astype(np.float32)
        data[f"grad_norm.{run_name}"] = norms.astype(np.float32)
        # The same run in float64: how far float32 rounding alone moves the losses. A
        # comparison at 1e-4 means something only where this is well below it.
        losses64, norms64, _ = train_run(exported, case, run, torch.float64)
        conditioning = {
            "loss_f32_vs_f64": float(np.max(np.abs(losses - losses64) / np.abs(losses64))),
            "grad_norm_f32_vs_f64": float(np.max(np.abs(norms - norms64) / np.abs(norms64)))}
        if not conditioning["loss_f32_vs_f64"] <= MAX_CONDITIONING:
            raise SystemExit(f"error: {name}: run {run_name} is ill-conditioned: float32 and "
                             f"float64 losses differ by {conditioning['loss_f32_vs_f64']:.1e}")
        if run_name == "adamw":
            for i, s in enumerate(state_tensors(trained.model)):
                if not s.trainable:
                    data[f"running.{names[i]}"] = s.tensor.detach().numpy()
        runs[run_name] = dict(run, steps=STEPS, **conditioning)
    if not runs["adamw_clip"]["clip_grad_norm"] < data["grad_norm.adamw_clip"][0]:
        raise SystemExit(f"error: {name}: clipping does not trigger")

    npz_path = OUT_DIR / f"{name}.npz"
    np.savez_compressed(npz_path, **{k: np.ascontiguousarray(v) for k, v in data.items()})
    if npz_path.stat().st_size >= MAX_FILE_BYTES:
        raise SystemExit(f"error: {npz_path.name} is too large")

    state_inits = set(names.values())
    graph_inputs = [i for i in proto.graph.input if i.name not in
                    {t.name for t in proto.graph.initializer}]
    ops = collections.Counter(
        (n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in proto.graph.node)
    entry = {
        "description": case.description,
        "opset": case.opset,
        "versions": package_versions(),
        "onnx": onnx_path.name,
        "reference": npz_path.name,
        "inputs": [{"name": i.name,
                    "shape": [d.dim_value for d in i.type.tensor_type.shape.dim],
                    "dtype": onnx.helper.tensor_dtype_to_np_dtype(
                        i.type.tensor_type.elem_type).name} for i in graph_inputs],
        "labels": {"name": "labels", "shape": list(case.labels.shape), "dtype": "int64",
                   "ignore_index": IGNORE_INDEX},
        "logits": "logits",
        "logits_shape": list(logits.shape),
        "loss": "cross_entropy:logits,labels",
        "parameters": [names[i] for i, s in enumerate(state) if s.trainable],
        "parameter_elements": sum(s.tensor.numel() for s in state if s.trainable),
        "torch_names": {names[i]: s.names for i, s in enumerate(state)},
        "buffers": [{"name": names[i], "torch_name": s.names[0],
                     "shape": list(s.tensor.shape)}
                    for i, s in enumerate(state) if not s.trainable],
        "other_float_initializers": [{"name": n, "shape": list(v.shape),
                                      "dtype": v.dtype.name,
                                      **describe_values(v)}
                                     for n, v in inits.items() if n not in state_inits],
        "op_types": dict(sorted(ops.items())),
        "initial_loss": float(data["losses.adamw"][0]),
        "initial_grad_norm": initial_norm,
        "onnx_reference_max_abs_error": onnx_err,
        "runs": runs,
        **default_export,
    }
    print(f"{name}: {onnx_path.stat().st_size} B onnx, {npz_path.stat().st_size} B npz, "
          f"{len(entry['parameters'])} parameters, {len(entry['buffers'])} buffers, "
          f"{len(entry['other_float_initializers'])} other float initializers, "
          f"initial loss {entry['initial_loss']:.4f}, grad norm {initial_norm:.4f}, "
          f"onnx error {onnx_err:.2e}", flush=True)
    return entry


def to_json(value) -> str:
    """Indented JSON with lists of numbers on one line."""
    text = json.dumps(value, indent=1)
    return re.sub(r"\[[-+.\deE,\s]*\]", lambda m: "[" + " ".join(m.group(0)[1:-1].split()) + "]",
                  text)


def package_versions() -> dict:
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "torchvision": torchvision.__version__, "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__, "numpy": np.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS),
                        help="regenerate these models")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)

    manifest_path = OUT_DIR / "manifest.json"
    models = {}
    # Regenerating one model keeps the others and the versions they were made
    # with (each entry records its own).
    versions = package_versions()
    if args.only and manifest_path.exists():
        old = json.loads(manifest_path.read_text())
        models = old["models"]
        versions = old["versions"]
    for name in args.only or MODELS:
        models[name] = generate(name)
    manifest = {
        "versions": versions,
        "opset": OPSET,
        "steps": STEPS,
        "notes": [
            "Each run starts from the exported weights and takes every step on the same "
            "batch in train mode; losses.<run>[i] is the loss before step i's update.",
            "Weight decay applies to every parameter (one torch.optim parameter group). "
            "Clipping is torch.nn.utils.clip_grad_norm_: grads *= min(1, max_norm / "
            "(norm + 1e-6)).",
            "BatchNorm trains with batch statistics and updates its running statistics "
            "with momentum 0.1 and the unbiased batch variance.",
        ],
        "models": {k: models[k] for k in MODELS if k in models},
    }
    manifest_path.write_text(to_json(manifest) + "\n")


if __name__ == "__main__":
    sys.exit(main())
