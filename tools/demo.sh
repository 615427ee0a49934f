#!/usr/bin/env bash
# Cleave's demo: sets up, builds, generates a small GPT-style model (4 layers,
# d=128, T=64, byte vocabulary), compiles it for the CPU, runs it and prints
# its outputs, the plan's memory, and the difference to onnxruntime.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
build="${CLEAVE_BUILD_DIR:-$root/build}"
py="$root/.venv/bin/python"
demo="$build/demo"
mkdir -p "$demo"

echo "== generating the model"
"$py" "$root/tools/models/make_gpt.py" --preset tiny -o "$demo/gpt_tiny.onnx"
"$py" - "$demo" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/input_ids.npy", rng.integers(0, 256, (2, 64)).astype(np.int64))
PY

echo "== compiling"
"$build/bin/cleave-compile" "$demo/gpt_tiny.onnx" -o "$demo/gpt_tiny.cleave" --print-stats

echo "== running on the CPU backend"
"$build/bin/cleave-run" "$demo/gpt_tiny.cleave" "$demo/input_ids.npy" \
  --output-dir "$demo" --print-outputs --print-stats --warmup 1 --repeat 5

echo "== checking against onnxruntime"
"$py" - "$demo" <<'PY'
import sys, numpy as np, onnxruntime as ort
d = sys.argv[1]
ids = np.load(d + "/input_ids.npy")
want = ort.InferenceSession(d + "/gpt_tiny.onnx", providers=["CPUExecutionProvider"]).run(None, {"input_ids": ids})[0]
got = np.load(d + "/logits.npy")
err = np.abs(got - want).max()
print("logits %s, max |cleave - onnxruntime| = %.3g" % (got.shape, err))
sys.exit(0 if np.allclose(got, want, rtol=1e-3, atol=1e-4) else 1)
PY
