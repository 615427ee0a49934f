#!/usr/bin/env bash
# Cleave's test suite: sets up, builds, and runs every test (lit, GoogleTest,
# and the ONNX conformance run over Debian's libonnx-testdata node tests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh"
# As many tests at once as there are cores; the suites that use every core
# themselves declare it (PROCESSORS, test/CMakeLists.txt) and run alone.
ctest --test-dir "${CLEAVE_BUILD_DIR:-$root/build}" -j"$(nproc)" \
  --output-on-failure "$@"
