#!/usr/bin/env bash
# Prints the `export` lines that make Cleave's runtime load the strict host
# doubles of libcuda, cuBLASLt and NCCL built in BUILD (default: build/), so
# that CUDA plans compiled with --cuda-host-kernels run where there is no GPU:
#
#   eval "$(tools/cuda-double-env.sh build)"
#   build/bin/cleave-run --backend cuda model.cleave ...
#
# The doubles are test infrastructure (test/doubles/DeviceDouble.h): they
# check host logic and call order, never timing or device numerics.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-${CLEAVE_BUILD_DIR:-$root/build}}
dir="$build/lib/doubles"
for lib in cuda cublaslt nccl; do
  if [ ! -f "$dir/libcleave-$lib-double.so" ]; then
    echo "cuda-double-env.sh: $dir/libcleave-$lib-double.so is missing" \
         "(build the target cleave-$lib-double in $build)" >&2
    exit 1
  fi
done
dir=$(cd "$dir" && pwd)
echo "export CLEAVE_CUDA_DRIVER_LIBRARY=$dir/libcleave-cuda-double.so"
echo "export CLEAVE_CUBLASLT_LIBRARY=$dir/libcleave-cublaslt-double.so"
echo "export CLEAVE_NCCL_LIBRARY=$dir/libcleave-nccl-double.so"
