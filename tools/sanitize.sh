#!/usr/bin/env bash
# Builds Cleave with AddressSanitizer and UndefinedBehaviorSanitizer in its
# own directory (the `sanitize` preset of CMakePresets.json) and runs the
# subset of the test suite that fits in a few minutes on a small machine:
#   - the runtime's unit tests (cleave-runtime-tests: plan format and
#     validator, executor, collectives, pipelines, entries, tensor files,
#     training loop, cleave-run's command line);
#   - the lit tests of cleave-run (test/tools/cleave-run) and of the
#     resource limits (test/tools/cleave-compile/resource-limits.test);
#   - a few end-to-end lit tests (train-mlp, train-gpt, data-parallel,
#     tensor-parallel, microbatches) that compile with a sanitized
#     cleave-compile and train with a sanitized cleave-run.
# CLEAVE_SANITIZE_BUILD_DIR (build-sanitize), CLEAVE_JOBS (nproc),
# CLEAVE_SANITIZE_TESTS (the lit paths above, relative to test/) and
# CLEAVE_SANITIZE_GTEST_FILTER (*) narrow or widen it.
#
#   tools/sanitize.sh --all   builds everything and runs the whole ctest suite
#                             (lit, the three ONNX conformance runs, the
#                             real-model suite, every GoogleTest binary) with
#                             the sanitized tools: about an hour on 2 cores.
#                             The Python module is not built (the interpreter
#                             is not instrumented) and the fuzz targets have
#                             their own sanitized build (CLEAVE_FUZZ).
set -euo pipefail
all=0
if [ "${1:-}" = "--all" ]; then
  all=1
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
export CCACHE_BASEDIR="$root"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" --preset sanitize -B "$build"
fi
if [ "$all" = 1 ]; then
  ninja -C "$build" -j"${CLEAVE_JOBS:-$(nproc)}"
else
  # What the subset runs (cleave-opt and the other tools are not needed).
  ninja -C "$build" -j"${CLEAVE_JOBS:-$(nproc)}" cleave-compile cleave-run cleave-runtime-tests
fi

# Leaks are not reported: MLIR and libonnx keep global registries alive to
# exit. Allocations that fail return null as they do without ASan, so the
# tools' own refusals of oversized buffers are what is tested. User
# poisoning is off: LLVM's BumpPtrAllocator poisons its slabs in Cleave's
# (instrumented) code but not in the installed, uninstrumented LLVM and
# MLIR that allocate from the same slabs, which reads as use-after-poison.
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:allow_user_poisoning=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
export PATH=/usr/lib/llvm-22/bin:$PATH

start=$(date +%s)
status=0
if [ "$all" = 1 ]; then
  echo "== the whole suite (ctest)"
  ctest --test-dir "$build" -j"${CLEAVE_JOBS:-$(nproc)}" --output-on-failure \
    --timeout 5400 || status=1
  echo "== sanitize.sh --all: $(( $(date +%s) - start )) s of tests, status $status"
  exit $status
fi
echo "== runtime unit tests"
"$build/test/runtime/cleave-runtime-tests" --gtest_brief=1 \
  --gtest_filter="${CLEAVE_SANITIZE_GTEST_FILTER:-*}" || status=1
tests="${CLEAVE_SANITIZE_TESTS:-tools/cleave-run tools/cleave-compile/resource-limits.test e2e/train-mlp.test e2e/train-gpt.test e2e/data-parallel.test e2e/tensor-parallel.test e2e/microbatches.test}"
paths=()
for t in $tests; do paths+=("$build/test/$t"); done
echo "== lit: $tests"
lit -sv "${paths[@]}" || status=1
echo "== sanitize.sh: $(( $(date +%s) - start )) s of tests, status $status"
exit $status
