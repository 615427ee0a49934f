#!/usr/bin/env bash
# Cleave's demo: sets up, builds, then trains a small GPT-style model
# (4 layers, d=128, 4 heads, T=64, byte vocabulary) on a generated English-like
# corpus on the CPU, writes the trained weights back into the ONNX model, and
# generates text with it through an inference plan (checked against
# onnxruntime).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
build="${CLEAVE_BUILD_DIR:-$root/build}"
bin="$build/bin"
py="$root/.venv/bin/python"
demo="$build/demo"
steps="${CLEAVE_DEMO_STEPS:-400}"
mkdir -p "$demo"

echo "== generating the corpus and the model"
"$py" "$root/tools/models/make_corpus.py" -o "$demo/corpus.bin" --text "$demo/corpus.txt"
"$py" "$root/tools/models/make_gpt.py" --preset tiny --batch 4 -o "$demo/gpt.onnx"

echo "== compiling the training step (AdamW, cosine schedule, clipping)"
"$bin/cleave-compile" "$demo/gpt.onnx" --train \
  --loss=cross_entropy:logits,labels --optimizer=adamw --lr=2e-3 \
  --lr-schedule=cosine --warmup-steps=30 --total-steps="$steps" --min-lr=1e-4 \
  --clip-grad-norm=1.0 --weight-decay=0.01 \
  -o "$demo/gpt-train.cleave" --print-stats

echo "== training $steps steps on the CPU"
rm -rf "$demo/checkpoints"
"$bin/cleave-run" "$demo/gpt-train.cleave" --steps "$steps" \
  --tokens "$demo/corpus.bin" --log-every 25 --log-json "$demo/train.jsonl" \
  --save-every "$steps" --checkpoint-dir "$demo/checkpoints" \
  --export-onnx "$demo/gpt-trained.onnx"

echo "== generating text with the trained model (inference plan)"
"$bin/cleave-compile" "$demo/gpt-trained.onnx" -o "$demo/gpt-infer.cleave" --print-stats
"$py" - "$demo" "$bin/cleave-run" <<'PY'
import json, os, subprocess, sys
import numpy as np
import onnxruntime as ort
demo, run = sys.argv[1], sys.argv[2]
losses = [json.loads(l)["loss"] for l in open(os.path.join(demo, "train.jsonl"))]
print("loss: first %.3f, last %.3f" % (losses[0], losses[-1]))
B, T = 4, 64
text = list(b"The cat ")
ids = np.zeros((B, T), dtype=np.int64)
for _ in range(56):
    n = len(text)
    ids[0, :n] = text
    np.save(os.path.join(demo, "prompt.npy"), ids)
    subprocess.run([run, os.path.join(demo, "gpt-infer.cleave"), os.path.join(demo, "prompt.npy"),
                    "--output-dir", demo], check=True)
    logits = np.load(os.path.join(demo, "logits.npy"))
    text.append(int(np.argmax(logits[0, n - 1])))
print("generated: %r" % bytes(text).decode("utf-8", "replace"))
want = ort.InferenceSession(os.path.join(demo, "gpt-trained.onnx"),
                            providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})[0]
err = float(np.abs(logits - want).max())
print("inference logits %s, max |cleave - onnxruntime| = %.3g" % (logits.shape, err))
sys.exit(0 if np.allclose(logits, want, rtol=1e-3, atol=1e-4) else 1)
PY
