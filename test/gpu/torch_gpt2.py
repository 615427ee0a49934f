#!/usr/bin/env python3
"""PyTorch baseline for the GPU check: the GPT-2 of tools/models/make_gpt.py
(pre-norm blocks, fused QKV, causal softmax attention, erf GELU MLP, tied
logits), one AdamW training step per iteration with bf16 autocast, in eager
mode and with torch.compile. Prints one JSON object per mode:
    {"mode": "eager", "tokens_per_s": ..., "step_ms": ..., "peak_bytes": ...}
    torch_gpt2.py --layers 12 --d-model 768 --heads 12 --seq 1024 \
        --vocab 50257 --batch 8 --steps 20 --warmup 5 --modes eager,compile
"""

import argparse
import json
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # The caller checks first; this is the fallback.
    print("torch_gpt2.py: PyTorch is not importable: %s" % e, file=sys.stderr)
    sys.exit(3)


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        mask = torch.tril(torch.ones(seq, seq, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        # The same math as the ONNX graph (no fused attention kernel).
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = s.masked_fill(~self.mask[:T, :T], float("-inf"))
        a = torch.softmax(s, dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers, d, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, seq) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.ln(x) @ self.wte.weight.t()


def measure(mode, a):
    torch.manual_seed(0)
    dev = "cuda"
    model = GPT(a.layers, a.d_model, a.heads, a.seq, a.vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01,
                            fused=True)
    fwd = torch.compile(model) if mode == "compile" else model
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    params = sum(p.numel() for p in model.parameters())
    return {"mode": mode, "tokens_per_s": a.batch * a.seq / dt,
            "step_ms": dt * 1e3, "peak_bytes": torch.cuda.max_memory_allocated(),
            "params": params, "loss": float(loss)}


def main():
    p = argparse.ArgumentParser()
    for k, v in dict(layers=12, d_model=768, heads=12, seq=1024, vocab=50257,
                     batch=8, steps=20, warmup=5).items():
        p.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    p.add_argument("--modes", default="eager,compile")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpt2.py: torch.cuda.is_available() is False", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = True
    for mode in a.modes.split(","):
        try:
            print(json.dumps(measure(mode, a)), flush=True)
        except Exception as e:  # e.g. torch.compile without a working triton
            print(json.dumps({"mode": mode, "error": str(e)[:300]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
