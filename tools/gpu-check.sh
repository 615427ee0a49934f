#!/usr/bin/env bash
# The GPU check: one command on a machine with an NVIDIA H200 or H100.
#
#   tools/gpu-check.sh --bundle DIR [--cleave-run PATH] [--bench-steps N]
#                      [--no-torch] [--results FILE]
#
# DIR comes from tools/gpu-bundle.sh, run on a machine with LLVM 22 and the
# CUDA toolkit (this machine needs neither: only the NVIDIA driver, python3
# and the bundle's cleave-run, which links no LLVM/MLIR library). Steps:
#   1. device      nvidia-smi: GPU name, memory, driver
#   1b. runtime    the runtime's GPU tests (CudaGpu.*, NcclGpu.*: executor,
#                  graph replay, cuBLASLt GEMMs and epilogues, parameter
#                  init, the fused attention kernels against attention in
#                  double, NCCL), from the bundle's cleave-runtime-tests
#   2. conformance a subset of the ONNX node tests, GPU vs CPU outputs
#   3. train       the small GPT, N steps on the GPU and on the CPU, losses
#                  compared with a bf16 tolerance
#   3b. resnet     a small ResNet-18 (convolutions and their gradients,
#                  BatchNorm, pooling), 8 fp32 steps on the GPU and the CPU
#   3c. nccl       one GPU: the NCCL tests of 1b (a one-rank communicator,
#                  every collective); two or more: the small GPT over dp=2
#                  and tp=2, a rank thread per GPU, against CPU ranks
#   4. gpt2        a GPT-2-small training step (124M, T=1024): tokens/s,
#                  model TFLOP/s (6N + 12*L*T*d flop per token), MFU against
#                  989 TFLOP/s (H100/H200 dense bf16), peak memory
#   5. torch       the same model and batch in PyTorch eager and with
#                  torch.compile, when torch is importable
# Every step whose prerequisite is missing says so and counts as FAIL (or
# SKIP for the optional torch step). A table comes last; it is also written
# to --results (default DIR/results/gpu-check-<date>.txt) for the repository
# (test/gpu/results/). Exit status: 0 if no step failed, 1 otherwise, 2 on a
# bad command line.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle="" run="" bench_steps=20 torch=1 results=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="$2"; shift 2 ;;
    --cleave-run) run="$2"; shift 2 ;;
    --bench-steps) bench_steps="$2"; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --results) results="$2"; shift 2 ;;
    -h|--help) sed -n 2,29p "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$bundle" ] || { echo "gpu-check.sh: --bundle DIR is required (build one with tools/gpu-bundle.sh)" >&2; exit 2; }
[ -d "$bundle" ] || { echo "gpu-check.sh: bundle $bundle is not a directory" >&2; exit 2; }
bundle=$(cd "$bundle" && pwd)
run="${run:-$bundle/bin/cleave-run}"
scripts="$bundle/scripts"
[ -d "$scripts" ] || scripts="$root/test/gpu"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
date=$(date -u +%Y-%m-%d)
results="${results:-$bundle/results/gpu-check-$date.txt}"

rows=()   # "step|status|detail"
failed=0
row() { rows+=("$1|$2|$3"); [ "$2" = FAIL ] && failed=1; echo "-- $1: $2 $3"; }
# compare_losses GPU_JSONL CPU_JSONL TOL: prints the two runs' losses and their
# largest relative difference; fails unless that is within TOL and the GPU
# run's loss fell.
compare_losses() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
if len(g) != len(c) or not g:
    print("step counts differ: %d on the GPU, %d on the CPU" % (len(g), len(c))); sys.exit(1)
worst = max(abs(a["loss"] - b["loss"]) / max(abs(b["loss"]), 1e-6) for a, b in zip(g, c))
ok = worst <= tol and g[-1]["loss"] < g[0]["loss"]
print("%d steps, loss %.4f -> %.4f (CPU %.4f -> %.4f), max rel diff %.2e%s" % (
    len(g), g[0]["loss"], g[-1]["loss"], c[0]["loss"], c[-1]["loss"], worst,
    "" if ok else " (tolerance %s, loss must fall)" % sys.argv[3]))
sys.exit(0 if ok else 1)
PY
}

# Prerequisites shared by every step.
pre=""
command -v python3 >/dev/null || pre="python3 not found"
[ -z "$pre" ] && [ ! -x "$run" ] && pre="cleave-run not found at $run (--cleave-run PATH)"
if [ -z "$pre" ] && ! "$run" --help >/dev/null 2>&1 &&
   [ -f "$bundle/lib/cpu-libs.tar.xz" ]; then
  # Missing shared libraries (OpenBLAS): use the bundle's copies.
  mkdir -p "$work/lib" && tar -C "$work/lib" -xJf "$bundle/lib/cpu-libs.tar.xz" &&
    export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -z "$pre" ] && ! "$run" --help >/dev/null 2>&1; then
  pre="$run does not start here: $("$run" --help 2>&1 | head -1)"
fi

echo "== 1. device"
gpu="none"
if ! command -v nvidia-smi >/dev/null; then
  row device FAIL "nvidia-smi not found: no NVIDIA driver on this machine"
elif ! info=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1) || [ -z "$info" ]; then
  row device FAIL "nvidia-smi failed: $info"
else
  gpu=$(echo "$info" | cut -d, -f1 | sed 's/^ *//;s/ *$//')
  case "$gpu" in
    *H100*|*H200*) row device PASS "$info" ;;
    *) row device PASS "$info (not an H100/H200: the MFU figure assumes 989 TFLOP/s)" ;;
  esac
fi
[ -n "$pre" ] && row prerequisites FAIL "$pre"

echo "== 1b. runtime GPU tests"
tests="$bundle/bin/cleave-runtime-tests"
if [ ! -x "$tests" ]; then
  row runtime FAIL "the bundle has no bin/cleave-runtime-tests"
else
  "$tests" --gtest_filter='CudaGpu.*:NcclGpu.*' --gtest_output="json:$work/gtest.json" \
    >"$work/gtest.log" 2>&1
  if detail=$(python3 - "$work/gtest.json" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except Exception as e:
    print("no gtest report (%s)" % e); sys.exit(1)
tests = [t for s in report.get("testsuites", []) for t in s.get("testsuite", [])]
failed = [t["name"] for t in tests if t.get("failures")]
skipped = [t["name"] for t in tests if t.get("result") == "SKIPPED"]
passed = len(tests) - len(failed) - len(skipped)
print("%d passed, %d failed, %d skipped%s%s" % (
    passed, len(failed), len(skipped),
    (" (failed: %s)" % " ".join(failed)) if failed else "",
    (" (skipped: %s)" % " ".join(skipped)) if skipped else ""))
sys.exit(1 if failed or not tests or passed == 0 else 0)
PY
  ); then row runtime PASS "$detail"; else row runtime FAIL "$detail"; fi
fi

echo "== 2. conformance subset (GPU vs CPU)"
if [ -n "$pre" ]; then
  row conformance FAIL "skipped: $pre"
elif [ ! -d "$bundle/conformance" ]; then
  row conformance FAIL "the bundle has no conformance/ directory"
else
  pass=0 fail=0 skip=0 bad=""
  for d in "$bundle"/conformance/*/; do
    t=$(basename "$d")
    if [ -f "$d/SKIPPED" ]; then skip=$((skip + 1)); continue; fi
    mkdir -p "$work/$t/cpu" "$work/$t/gpu"
    if "$run" "$d/cpu.cleave" "$d"/inputs/*.pb --output-dir "$work/$t/cpu" >"$work/$t/cpu.log" 2>&1 &&
       "$run" "$d/cuda.cleave" "$d"/inputs/*.pb --backend cuda --output-dir "$work/$t/gpu" >"$work/$t/gpu.log" 2>&1 &&
       python3 "$scripts/npy_compare.py" "$work/$t/gpu" "$work/$t/cpu" --rtol 1e-4 --atol 1e-5 >"$work/$t/cmp.log" 2>&1; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1)); bad="$bad $t"
      echo "  $t failed:"; cat "$work/$t/gpu.log" "$work/$t/cmp.log" 2>/dev/null | tail -5 | sed 's/^/    /'
    fi
  done
  detail="$pass passed, $fail failed, $skip not compiled${bad:+ (failed:$bad)}"
  if [ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]; then row conformance PASS "$detail"; else row conformance FAIL "$detail"; fi
fi

echo "== 3. small GPT training, GPU vs CPU (bf16 tolerance)"
g="$bundle/gpt"
if [ -n "$pre" ]; then
  row train FAIL "skipped: $pre"
elif [ ! -f "$g/train-cuda.cleave" ] || [ ! -f "$g/train-cpu.cleave" ]; then
  row train FAIL "the bundle has no gpt/train-{cpu,cuda}.cleave"
else
  steps=$(cat "$g/steps" 2>/dev/null || echo 20)
  if "$run" "$g/train-cpu.cleave" --steps "$steps" --tokens "$g/corpus.bin" --log-json "$work/cpu.jsonl" >"$work/train-cpu.log" 2>&1 &&
     "$run" "$g/train-cuda.cleave" --backend cuda --steps "$steps" --tokens "$g/corpus.bin" --log-json "$work/gpu.jsonl" >"$work/train-gpu.log" 2>&1; then
    if detail=$(compare_losses "$work/gpu.jsonl" "$work/cpu.jsonl" 2e-2); then row train PASS "$detail"; else row train FAIL "$detail"; fi
  else
    row train FAIL "cleave-run failed: $(for f in "$work/train-cpu.log" "$work/train-gpu.log"; do [ -f "$f" ] && tail -n 2 "$f"; done | tr '\n' ' ')"
  fi
fi

echo "== 3b. small ResNet-18 training, GPU vs CPU (fp32)"
r="$bundle/resnet"
if [ -n "$pre" ]; then
  row resnet FAIL "skipped: $pre"
elif [ ! -f "$r/train-cuda.cleave" ] || [ ! -f "$r/train-cpu.cleave" ]; then
  row resnet FAIL "the bundle has no resnet/train-{cpu,cuda}.cleave"
else
  data=(--data "pixel_values=$r/x.npy" --data "labels=$r/y.npy")
  if "$run" "$r/train-cpu.cleave" --steps 8 "${data[@]}" --log-json "$work/resnet-cpu.jsonl" >"$work/resnet-cpu.log" 2>&1 &&
     "$run" "$r/train-cuda.cleave" --backend cuda --steps 8 "${data[@]}" --log-json "$work/resnet-gpu.jsonl" >"$work/resnet-gpu.log" 2>&1; then
    # BatchNorm over 4 images amplifies rounding: the emulated CUDA mapping
    # stays within 2e-3 of the CPU lowering over these 8 steps.
    if detail=$(compare_losses "$work/resnet-gpu.jsonl" "$work/resnet-cpu.jsonl" 5e-3); then row resnet PASS "$detail"; else row resnet FAIL "$detail"; fi
  else
    row resnet FAIL "cleave-run failed: $(for f in "$work/resnet-cpu.log" "$work/resnet-gpu.log"; do [ -f "$f" ] && tail -n 2 "$f"; done | tr '\n' ' ')"
  fi
fi

echo "== 3c. NCCL: the communicator on one GPU, dp=2 and tp=2 on two"
# One GPU: the NCCL tests of step 1b (a one-rank communicator running every
# collective). Two or more: the small GPT over dp=2 and over tp=2 with one
# rank thread per GPU, against the same layouts on CPU ranks (fp32).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nccl_tests=$(python3 - "$work/gtest.json" <<'PY' 2>/dev/null || echo "no NcclGpu results"
import json, sys
report = json.load(open(sys.argv[1]))
tests = [t for s in report.get("testsuites", []) for t in s.get("testsuite", [])
         if s.get("name") == "NcclGpu"]
failed = [t["name"] for t in tests if t.get("failures")]
skipped = [t["name"] for t in tests if t.get("result") == "SKIPPED"]
print("NcclGpu %d passed, %d failed, %d skipped" % (
    len(tests) - len(failed) - len(skipped), len(failed), len(skipped)))
PY
)
if [ -n "$pre" ]; then
  row nccl FAIL "skipped: $pre"
elif [ "${gpus:-0}" -lt 2 ]; then
  case "$nccl_tests" in
    *" 0 failed"*) row nccl PASS "$gpus GPU: $nccl_tests; dp/tp over NCCL need two GPUs" ;;
    *) row nccl FAIL "$gpus GPU: $nccl_tests" ;;
  esac
else
  g="$bundle/gpt" detail="" ok=1
  for layout in dp2 tp2; do
    if "$run" "$g/$layout-cpu.cleave" --ranks 2 --steps 10 --tokens "$g/corpus.bin" --log-json "$work/$layout-cpu.jsonl" >"$work/$layout-cpu.log" 2>&1 &&
       "$run" "$g/$layout-cuda.cleave" --backend cuda --ranks 2 --steps 10 --tokens "$g/corpus.bin" --log-json "$work/$layout-gpu.jsonl" >"$work/$layout-gpu.log" 2>&1 &&
       worst=$(python3 - "$work/$layout-gpu.jsonl" "$work/$layout-cpu.jsonl" <<'PY'
import json, sys
g = [json.loads(l) for l in open(sys.argv[1])]
c = [json.loads(l) for l in open(sys.argv[2])]
worst = max(abs(a["loss"] - b["loss"]) / max(abs(b["loss"]), 1e-6) for a, b in zip(g, c))
print("%.2e" % worst)
sys.exit(0 if len(g) == len(c) and g and worst <= 1e-3 else 1)
PY
       ); then
      detail="$detail $layout max rel diff $worst;"
    else
      ok=0; detail="$detail $layout FAILED ($(tail -n 1 "$work/$layout-gpu.log" 2>/dev/null));"
    fi
  done
  if [ "$ok" = 1 ]; then row nccl PASS "$gpus GPUs: $nccl_tests;$detail"; else row nccl FAIL "$gpus GPUs: $nccl_tests;$detail"; fi
fi

echo "== 4. GPT-2-small training step benchmark"
cleave_tps=""
b="$bundle/gpt2"
if [ -n "$pre" ]; then
  row gpt2 FAIL "skipped: $pre"
elif [ ! -f "$b/train-cuda.cleave" ] || [ ! -f "$b/config.json" ]; then
  row gpt2 FAIL "the bundle has no gpt2/train-cuda.cleave and config.json"
elif ! "$run" "$b/train-cuda.cleave" --backend cuda --steps "$bench_steps" --synthetic \
        --log-json "$work/gpt2.jsonl" >"$work/gpt2.log" 2>&1; then
  row gpt2 FAIL "cleave-run failed: $(tail -3 "$work/gpt2.log" | tr '\n' ' ')"
else
  if detail=$(python3 - "$work/gpt2.jsonl" "$b/config.json" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
c = json.load(open(sys.argv[2]))
L, d, T, V = c["layers"], c["d_model"], c["seq"], c["vocab"]
N = V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d  # tied logits
timed = steps[3:] or steps
tps = statistics.median(s["tokens_per_s"] for s in timed)
flops = 6 * N + 12 * L * T * d
tflops = tps * flops / 1e12
peak = max(s.get("peak_bytes", 0) for s in steps)
print("%.0f tokens/s, %.1f TFLOP/s, MFU %.1f%%, peak %.2f GiB (N=%d, batch %d)" % (
    tps, tflops, 100 * tflops / 989, peak / 2**30, N, c["batch"]))
open(sys.argv[1] + ".tps", "w").write("%f" % tps)
PY
  ); then
    row gpt2 PASS "$detail"; cleave_tps=$(cat "$work/gpt2.jsonl.tps")
  else
    row gpt2 FAIL "could not read the step log: $detail"
  fi
fi

echo "== 5. PyTorch eager and torch.compile (same model and batch)"
if [ "$torch" = 0 ]; then
  row torch SKIP "--no-torch"
elif ! command -v python3 >/dev/null || ! python3 -c "import torch" >/dev/null 2>&1; then
  row torch SKIP "PyTorch is not importable here"
elif [ ! -f "$bundle/gpt2/config.json" ]; then
  row torch FAIL "the bundle has no gpt2/config.json"
else
  batch=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['batch'])" "$bundle/gpt2/config.json")
  python3 "$scripts/torch_gpt2.py" --batch "$batch" --steps "$bench_steps" >"$work/torch.jsonl" 2>"$work/torch.log"
  while read -r line; do
    detail=$(python3 - "$line" "${cleave_tps:-0}" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); c = float(sys.argv[2])
if "error" in r:
    print(r["mode"] + "|FAIL|" + r["error"]); sys.exit()
ratio = " (Cleave/PyTorch %.2fx)" % (c / r["tokens_per_s"]) if c else ""
print("%s|PASS|%.0f tokens/s, peak %.2f GiB%s" % (r["mode"], r["tokens_per_s"], r["peak_bytes"] / 2**30, ratio))
PY
    )
    row "torch-${detail%%|*}" "$(echo "$detail" | cut -d'|' -f2)" "$(echo "$detail" | cut -d'|' -f3-)"
  done <"$work/torch.jsonl"
  [ -s "$work/torch.jsonl" ] || row torch FAIL "torch_gpt2.py printed nothing: $(tail -2 "$work/torch.log" | tr '\n' ' ')"
fi

mkdir -p "$(dirname "$results")"
{
  echo "Cleave GPU check, $date, GPU: $gpu"
  [ -f "$bundle/MANIFEST" ] && sed 's/^/bundle /' "$bundle/MANIFEST"
  printf '%-16s %-5s %s\n' step status detail
  for r in "${rows[@]}"; do
    IFS='|' read -r s st de <<<"$r"
    printf '%-16s %-5s %s\n' "$s" "$st" "$de"
  done
} >"$results"
echo
cat "$results"
echo "(written to $results)"
exit "$failed"
