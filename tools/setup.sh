#!/usr/bin/env bash
# Cleave set-up: installs the Debian packages and the pinned Python test
# references that building and testing Cleave need. Idempotent; run as root on
# Debian bookworm (the CUDA toolkit at /usr/local/cuda is not needed yet).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
  clang-format-22
  libclang-rt-22-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev libdnnl2 libgtest-dev
  libopenmpi-dev openmpi-bin libgloo-dev
  cmake ninja-build ccache
  python3-venv python3-pip python3-dev
  libonnx-testdata
  nlohmann-json3-dev libssl-dev libcli11-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python test references, pinned, in a venv of the project's own.
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
# Reinstalled whenever tools/requirements.txt changes (its hash is kept in
# the venv), so a pin moved in the repository reaches every checkout.
stamp="$venv/.cleave-requirements"
want=$(sha256sum "$root/tools/requirements.txt" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -r "$root/tools/requirements.txt"
  echo "$want" > "$stamp"
fi
echo "setup: done"
