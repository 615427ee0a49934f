#!/usr/bin/env python3
"""Train a small GPT on text from Python, plot its loss and generate text.

    PYTHONPATH=build/python_bindings .venv/bin/python \
        python_bindings/examples/train_gpt.py --steps 1500 --png loss.png

Steps, as one would write them in a notebook:
 1. make a character-level GPT (2 layers, d=64, context 32, the 96
    printable ASCII characters) as ONNX with tools/models/make_gpt.py;
 2. compile its training step with cleave.compile (cross-entropy on
    next-character labels, AdamW, cosine schedule);
 3. train with cleave.Trainer on batches of text windows drawn in Python;
 4. plot the loss curve with matplotlib;
 5. export the trained model, compile it for inference and sample text.
Needs matplotlib for the plot (pip install matplotlib).
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "models"))

import cleave  # noqa: E402
import make_corpus  # noqa: E402
import make_gpt  # noqa: E402

VOCAB, CONTEXT, BATCH = 96, 32, 8


def encode(text):
    """Printable ASCII as ids 0..95; anything else becomes a space."""
    codes = np.frombuffer(text.encode("ascii", "replace"), np.uint8).astype(np.int64)
    codes[(codes < 32) | (codes > 127)] = 32
    return codes - 32


def decode(ids):
    return "".join(chr(int(i) + 32) for i in ids)


def batches(corpus, seed):
    """Endless batches of random windows: inputs and next-character labels."""
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(corpus) - CONTEXT - 1, BATCH)
        windows = np.stack([corpus[s:s + CONTEXT + 1] for s in starts])
        yield {"input_ids": windows[:, :-1], "labels": windows[:, 1:]}


def generate(plan, prompt, length, rng, temperature=0.8):
    ids = list(encode(prompt))
    for _ in range(length):
        window = ([0] * CONTEXT + ids)[-CONTEXT:]
        batch = np.tile(np.array(window, np.int64), (BATCH, 1))
        (logits,) = plan.run({"input_ids": batch})
        scores = logits[0, -1] / temperature
        p = np.exp(scores - scores.max())
        ids.append(int(rng.choice(VOCAB, p=p / p.sum())))
    return decode(ids)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--text", help="a training text file (default: 200 kB of "
                   "English-like sentences from tools/models/make_corpus.py)")
    p.add_argument("--png", default="loss.png", help="where to plot the loss")
    p.add_argument("--work", default="gpt-example", help="folder for the models")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)

    # 1. The model.
    import onnx
    model = make_gpt.build(layers=2, d_model=64, heads=4, seq=CONTEXT,
                           vocab=VOCAB, batch=BATCH, seed=args.seed)
    model_path = os.path.join(args.work, "gpt.onnx")
    onnx.save(model, model_path)

    # 2. Its training step.
    plan = cleave.compile(model_path, train=True,
                          loss="cross_entropy:logits,labels",
                          optimizer="adamw", lr=args.lr, lr_schedule="cosine",
                          warmup_steps=20, total_steps=args.steps,
                          clip_grad_norm=1.0)
    print(plan, f"{plan.stats['parameter_bytes'] // 4} parameters")

    # 3. Training, on batches drawn here.
    if args.text:
        with open(args.text, encoding="utf-8", errors="replace") as f:
            corpus = encode(f.read())
    else:
        import random
        rng = random.Random(args.seed)
        corpus = encode(" ".join(make_corpus.sentence(rng) for _ in range(5000)))
    with cleave.Trainer(plan, log_every=max(1, args.steps // 10)) as trainer:
        history = trainer.fit(batches(corpus, args.seed), steps=args.steps)
        trainer.export_onnx(os.path.join(args.work, "trained.onnx"))

    # 4. The loss curve.
    steps = [m["step"] for m in history]
    losses = [m["loss"] for m in history]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
    else:
        smooth = np.convolve(losses, np.ones(10) / 10, mode="valid")
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
        ax.plot(steps, losses, lw=0.8, alpha=0.4, label="loss")
        ax.plot(steps[9:], smooth, lw=1.8, label="mean of 10 steps")
        ax.axhline(np.log(VOCAB), ls="--", lw=0.8, c="gray",
                   label="uniform guess (ln 96)")
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy")
        ax.set_title("Character GPT trained from Python with cleave.Trainer")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png)
        print(f"wrote {args.png}")

    # 5. Text from the trained model.
    inference = cleave.compile(os.path.join(args.work, "trained.onnx"))
    rng = np.random.default_rng(args.seed)
    print("sample:", repr(generate(inference, "Cleave ", 120, rng)))
    print(f"loss: first {losses[0]:.3f}, last 10 steps {np.mean(losses[-10:]):.3f}")


if __name__ == "__main__":
    main()
