#!/usr/bin/env bash
# Builds the bundle that tools/gpu-check.sh runs on a GPU machine: CUDA and
# CPU plans compiled here (this machine has LLVM 22 and the CUDA toolkit; the
# GPU machine need not), the data they read, a copy of cleave-run and the
# check's helper scripts.
#
#   tools/gpu-bundle.sh [--out DIR] [--batch B] [--gpt-steps N]
#   rsync -a DIR gpu-host:cleave-bundle/ && ssh gpu-host \
#     'cd cleave && tools/gpu-check.sh --bundle ~/cleave-bundle'
#
# Needs tools/setup.sh and tools/build.sh (cleave-compile, cleave-run, .venv
# with onnx) and the ONNX node tests (/usr/share/libonnx-testdata). Exits 3
# with a message when cleave-compile cannot compile for --target=cuda yet.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_BUILD_DIR:-$root/build}"
py="${CLEAVE_PYTHON:-$root/.venv/bin/python}"
nodes="${CLEAVE_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}"
out="$root/build/gpu-bundle"
batch=8          # GPT-2-small batch (T = 1024)
gpt_steps=20     # steps the small GPT trains on both backends
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --gpt-steps) gpt_steps="$2"; shift 2 ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-bundle.sh: $*" >&2; exit "${code:-1}"; }
compile="$build/bin/cleave-compile"
for f in "$compile" "$build/bin/cleave-run" "$py"; do
  [ -x "$f" ] || code=2 die "missing $f; run tools/setup.sh and tools/build.sh first"
done
[ -d "$nodes" ] || code=2 die "ONNX node tests not found at $nodes (set CLEAVE_NODE_TESTS)"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The CUDA target is being integrated into cleave-compile: check it first.
if ! "$compile" "$nodes/test_add/model.onnx" --target=cuda -o "$tmp/probe.cleave" \
     >"$tmp/probe.log" 2>&1; then
  echo "gpu-bundle.sh: this cleave-compile cannot compile for --target=cuda yet:" >&2
  sed 's/^/  /' "$tmp/probe.log" >&2
  echo "gpu-bundle.sh: build a cleave-compile with the CUDA target (lib/Target/CUDA) and rerun" >&2
  exit 3
fi

rm -rf "$out"; mkdir -p "$out/bin" "$out/conformance" "$out/gpt" "$out/gpt2" "$out/scripts"
echo "== conformance subset"
while read -r t; do
  case "$t" in ''|'#'*) continue ;; esac
  d="$out/conformance/$t"; mkdir -p "$d/inputs"
  if "$compile" "$nodes/$t/model.onnx" --target=cpu -o "$d/cpu.cleave" >"$d/compile.log" 2>&1 &&
     "$compile" "$nodes/$t/model.onnx" --target=cuda -o "$d/cuda.cleave" >>"$d/compile.log" 2>&1; then
    cp "$nodes/$t"/test_data_set_0/input_*.pb "$d/inputs/" 2>/dev/null || true
    echo "  $t"
  else
    echo "does not compile (see compile.log)" >"$d/SKIPPED"
    echo "  $t: SKIPPED (does not compile; see $d/compile.log)"
  fi
done <"$root/test/gpu/conformance-subset.txt"

echo "== small GPT training step (bf16), CPU and CUDA plans"
"$py" "$root/tools/models/make_corpus.py" -o "$out/gpt/corpus.bin" --text "$tmp/corpus.txt"
"$py" "$root/tools/models/make_gpt.py" --preset tiny --batch 4 -o "$tmp/gpt.onnx"
train_flags=(--train --loss=cross_entropy:logits,labels --optimizer=adamw --lr=2e-3
  --clip-grad-norm=1.0 --weight-decay=0.01 --precision=bf16)
for target in cpu cuda; do
  "$compile" "$tmp/gpt.onnx" "${train_flags[@]}" --target=$target \
    -o "$out/gpt/train-$target.cleave"
done
echo "$gpt_steps" >"$out/gpt/steps"

echo "== GPT-2-small training step (bf16, T=1024, batch $batch), CUDA plan"
"$py" "$root/tools/models/make_gpt.py" --preset gpt2-small --batch "$batch" \
  --external-data -o "$tmp/gpt2.onnx"
"$compile" "$tmp/gpt2.onnx" "${train_flags[@]}" --target=cuda \
  -o "$out/gpt2/train-cuda.cleave" --print-stats
cat >"$out/gpt2/config.json" <<JSON
{"layers": 12, "d_model": 768, "heads": 12, "seq": 1024, "vocab": 50257, "batch": $batch}
JSON

cp "$build/bin/cleave-run" "$out/bin/"
cp "$root"/test/gpu/*.py "$root/test/gpu/conformance-subset.txt" "$out/scripts/"
{
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "cleave-run needs: $(ldd "$build/bin/cleave-run" | awk '{print $1}' | tr '\n' ' ')"
} >"$out/MANIFEST"
echo "bundle written to $out ($(du -sh "$out" | cut -f1))"
