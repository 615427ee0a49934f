#!/usr/bin/env bash
# Configures (once) and builds Cleave in build/ with clang-22, lld and ccache.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_BUILD_DIR:-$root/build}"
export CCACHE_BASEDIR="$root"
if [ ! -f "$build/build.ninja" ]; then
  # The `release` preset of CMakePresets.json: clang-22, lld, Release.
  cmake -S "$root" --preset release -B "$build"
fi
ninja -C "$build" -j"${CLEAVE_JOBS:-$(nproc)}"
