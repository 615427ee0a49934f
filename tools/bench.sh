#!/usr/bin/env bash
# Cleave's benchmarks: Cleave against OpenBLAS and onnxruntime, measured in one
# run, printed as one table. Assumes tools/setup.sh and tools/build.sh have
# been run (no setup or build here). Arguments go to the script, e.g.
#   tools/bench.sh --quick          # smoke run, skips gpt2-small
#   tools/bench.sh --only matmul    # or tiny, gpt2, resnet, bert, train
#   tools/bench.sh --threads 1
#   tools/bench.sh --torch-python /path/to/venv/bin/python   # adds the
#       training step against PyTorch (torch, transformers, onnxscript)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_BUILD_DIR:-$root/build}"
py="$root/.venv/bin/python"
for f in "$py" "$build/bin/cleave-compile" "$build/bin/cleave-run"; do
  [ -x "$f" ] || { echo "bench.sh: missing $f; run tools/setup.sh and tools/build.sh first" >&2; exit 2; }
done
exec "$py" "$root/test/benchmarks/run_benchmarks.py" --build "$build" "$@"
