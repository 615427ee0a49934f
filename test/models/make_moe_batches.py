#!/usr/bin/env python3
"""Export the real-model suite's mixture-of-experts models (make_models.py's
Mixtral and Qwen2-MoE, the same architecture, seed and weights) at a larger
static batch, without PyTorch references: the expert-parallel tests split the
batch over dp x ep, which the suite's batch of 2 cannot fill.

    make_moe_batches.py [--batch 4]   # writes mixtral_b4.onnx, qwen2_moe_b4.onnx

Needs what make_models.py needs (torch, transformers, onnxscript).
"""
import argparse

import torch

import make_models as mm


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    mm.LM_BATCH = args.batch
    for name in ["mixtral", "qwen2_moe"]:
        seed = mm.seed_of(name)
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        case = mm.MODELS[name](gen)
        mm.make_distinct(case.model, gen)
        case.model.eval()
        state = mm.state_tensors(case.model.model)
        path = mm.OUT_DIR / f"{name}_b{args.batch}.onnx"
        mm.export(case.model, case.input, case.input_name, state, path,
                  opset=case.opset, optimize=case.optimize)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
