#!/usr/bin/env bash
# Configures (once) and builds Cleave in build/ with clang-22, lld and ccache.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_BUILD_DIR:-$root/build}"
export CCACHE_BASEDIR="$root"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DCLEAVE_PYTHON="$root/.venv/bin/python"
fi
ninja -C "$build" -j"${CLEAVE_JOBS:-$(nproc)}"
