#!/usr/bin/env python3
"""Time one AdamW training step of a GPT-2 (the architecture of make_models.py's
gpt2_tied, scaled up), or with --model of a real-model suite model (e.g.
resnet18), with PyTorch on the CPU: forward, cross-entropy loss, backward,
optimizer.step() and zero_grad(), in eager mode and with torch.compile. Prints one JSON
line per mode, {"mode": ..., "step_ms": <median>, ...}.

--export PATH writes the same model (same seed, weights and shapes) to ONNX the way
make_models.py does (dynamo exporter, opset 18, input "input_ids", output "logits", every
parameter its own initializer) so that other implementations can time the identical step:

  python test/models/bench_torch.py [--layers 4 --embd 128 --heads 4 --vocab 512
                                     --batch 8 --seq 64 --steps 20 --warmup 3]
  python test/models/bench_torch.py --export gpt2_bench.onnx --modes none

Mode "cleave" (with --cleave-bin DIR, the folder of cleave-compile and cleave-run) times
Cleave's compiled AdamW step of the same exported model on the same batch in the same
run, so the three figures are comparable:

  python test/models/bench_torch.py --modes eager,compile,cleave --cleave-bin build/bin
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import torch
import transformers

import make_models as mm

SEED = 1234


def build(args) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, str]:
    """The model, its input, its labels and the input's name."""
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    if args.model != "gpt":
        case = mm.MODELS[args.model](gen)
        mm.make_distinct(case.model, gen)  # as make_models.py exports it
        return case.model, case.input, case.labels, case.input_name
    cfg = mm.gpt2_config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads,
                         vocab_size=args.vocab, n_positions=args.seq, tied=True)
    model = mm.Logits(transformers.GPT2LMHeadModel(cfg), "input_ids")
    mm.make_distinct(model, gen)
    input_ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    labels = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
    return model, input_ids, labels, "input_ids"


def time_steps(model, input_ids, labels, args, compiled: bool) -> dict:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.1)

    def loss_of(x, y):
        return mm.cross_entropy(model(x), y)

    def opt_step():
        opt.step()

    if compiled:
        loss_of = torch.compile(loss_of)
        opt_step = torch.compile(opt_step)

    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = loss_of(input_ids, labels)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        elapsed = time.perf_counter() - start
        if i >= args.warmup:
            times.append(elapsed * 1e3)
    return {"step_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
            "steps": args.steps, "final_loss": round(loss.item(), 5)}


def time_cleave(model, input_ids, labels, input_name, args) -> dict:
    """Exports `model`, compiles its AdamW step with Cleave and runs it on the same
    batch every step (a dataset of exactly one batch)."""
    bin_dir = Path(args.cleave_bin)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        mm.export(model, input_ids, input_name, mm.state_tensors(model.model),
                  tmp / "model.onnx", max_bytes=None)
        np.save(tmp / "input.npy", input_ids.numpy())
        np.save(tmp / "labels.npy", labels.numpy())
        subprocess.run([str(bin_dir / "cleave-compile"), str(tmp / "model.onnx"), "--train",
                        "--loss=cross_entropy:logits,labels", "--optimizer=adamw",
                        "--lr=1e-3", "--weight-decay=0.1", "-o", str(tmp / "step.cleave")],
                       check=True, capture_output=True)
        subprocess.run([str(bin_dir / "cleave-run"), str(tmp / "step.cleave"),
                        "--steps", str(args.warmup + args.steps),
                        "--threads", str(args.threads),
                        "--data", "%s=%s" % (input_name, tmp / "input.npy"),
                        "--data", "labels=%s" % (tmp / "labels.npy"),
                        "--log-json", str(tmp / "log.jsonl")],
                       check=True, capture_output=True)
        log = [json.loads(line) for line in (tmp / "log.jsonl").read_text().splitlines()]
    times = [e["step_ms"] for e in log[args.warmup:]]
    return {"step_ms": round(statistics.median(times), 3), "min_ms": round(min(times), 3),
            "steps": args.steps, "final_loss": round(log[-1]["loss"], 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt",
                        choices=["gpt", *sorted(mm.MODELS)],
                        help="gpt (the options below) or a model of the real-model suite "
                             "(make_models.py), e.g. resnet18")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default="eager,compile",
                        help="comma-separated: eager, compile, cleave (or none)")
    parser.add_argument("--cleave-bin", metavar="DIR",
                        help="folder of cleave-compile and cleave-run (mode cleave)")
    parser.add_argument("--export", type=Path, metavar="PATH",
                        help="write the model to this ONNX file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model, input_ids, labels, input_name = build(args)
    if args.export:
        state = mm.state_tensors(model.model)
        mm.export(model, input_ids, input_name, state, args.export, max_bytes=None)
        print(json.dumps({"export": str(args.export), "input_ids": list(input_ids.shape),
                          "parameters": len(state),
                          "parameter_elements": sum(s.tensor.numel() for s in state)}))
    config = {"model": args.model, "threads": args.threads}
    if args.model == "gpt":
        config.update(layers=args.layers, embd=args.embd, heads=args.heads,
                      vocab=args.vocab, batch=args.batch, seq=args.seq)
    for mode in filter(None, args.modes.split(",")):
        if mode == "none":
            continue
        if mode not in ("eager", "compile", "cleave"):
            parser.error(f"unknown mode {mode!r}")
        if mode == "cleave" and not args.cleave_bin:
            parser.error("mode cleave needs --cleave-bin")
        fresh = build(args)[0]  # every mode starts from the same weights
        try:
            if mode == "cleave":
                result = time_cleave(fresh, input_ids, labels, input_name, args)
            else:
                result = time_steps(fresh, input_ids, labels, args,
                                    compiled=mode == "compile")
        except Exception as e:  # torch.compile needs a working C++ toolchain
            result = {"step_ms": None, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
        print(json.dumps({"mode": mode, **result, **config}), flush=True)


if __name__ == "__main__":
    main()
