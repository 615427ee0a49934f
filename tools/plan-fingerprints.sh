#!/usr/bin/env bash
# Compiles a fixed set of plans (the demo's training and inference steps and
# the partition tests' layouts) and prints one `sha256  name` line per plan.
# A refactor that must not change behaviour keeps every line: run this before
# and after and compare the two outputs (or pass --compare FILE).
#
#   tools/plan-fingerprints.sh [--compare FILE] [--keep DIR]
#
# The models are generated into $CLEAVE_FP_MODELS (default
# /tmp/cleave-fp-models), the same path in every checkout: a plan records its
# source model's absolute path, so the models must not move between runs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${CLEAVE_BUILD_DIR:-$root/build}"
bin="$build/bin"
py="${CLEAVE_PYTHON:-$root/.venv/bin/python}"
models="${CLEAVE_FP_MODELS:-/tmp/cleave-fp-models}"
compare=""
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
while [ $# -gt 0 ]; do
  case "$1" in
    --compare) compare="$2"; shift 2 ;;
    --keep) out="$2"; mkdir -p "$out"; trap - EXIT; shift 2 ;;
    *) echo "plan-fingerprints: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

mkdir -p "$models"
[ -f "$models/demo.onnx" ] ||
  "$py" "$root/tools/models/make_gpt.py" --preset tiny --batch 4 -o "$models/demo.onnx" >/dev/null
[ -f "$models/gpt.onnx" ] ||
  "$py" "$root/tools/models/make_gpt.py" --layers 6 --d-model 32 --heads 2 --seq 16 \
    --vocab 128 --batch 8 -o "$models/gpt.onnx" >/dev/null
[ -f "$models/mlp.onnx" ] ||
  "$py" "$root/test/e2e/Inputs/e2e.py" mlp "$models/mlp.onnx" "$models" >/dev/null

demo=("$models/demo.onnx" --train --loss=cross_entropy:logits,labels --optimizer=adamw
  --lr=2e-3 --lr-schedule=cosine --warmup-steps=30 --total-steps=400 --min-lr=1e-4
  --clip-grad-norm=1.0 --weight-decay=0.01)
gpt=("$models/gpt.onnx" --train --loss=cross_entropy:logits,labels --optimizer=adamw
  --lr=3e-3 --clip-grad-norm=1.0)
mlp=("$models/mlp.onnx" --train --loss=mse:y,target --optimizer=adamw --lr=0.01
  --clip-grad-norm=1.0)
fc='--shard=h[0-9]+\.mlp\.c_fc\.weight=[{}, {"tp"}]'

compile() {
  local name=$1; shift
  "$bin/cleave-compile" "$@" -o "$out/$name.cleave" >/dev/null 2>&1 ||
    { echo "plan-fingerprints: compiling $name failed" >&2; return 1; }
}
compile demo-train "${demo[@]}"
compile demo-infer "$models/demo.onnx"
compile mlp "${mlp[@]}"
compile mlp-dp2tp2-z3 "${mlp[@]}" --mesh dp=2,tp=2 --zero=3 '--shard=w1=[{}, {"tp"}]'
compile gpt "${gpt[@]}"
compile gpt-dp2 "${gpt[@]}" --mesh dp=2
compile gpt-dp2-overlap "${gpt[@]}" --mesh dp=2 --overlap-collectives --bucket-mb=0.1
compile gpt-tp2 "${gpt[@]}" --mesh tp=2 "$fc"
compile gpt-tp2-auto "${gpt[@]}" --mesh tp=2
compile gpt-dp2tp2 "${gpt[@]}" --mesh dp=2,tp=2 "$fc"
compile gpt-dp2-z1 "${gpt[@]}" --mesh dp=2 --zero=1
compile gpt-dp2-z2 "${gpt[@]}" --mesh dp=2 --zero=2
compile gpt-dp2tp2-z3 "${gpt[@]}" --mesh dp=2,tp=2 --zero=3 "$fc"
compile gpt-bf16-dp2tp2 "${gpt[@]}" --precision=bf16 --mesh dp=2,tp=2 "$fc"
compile gpt-bf16-recompute "${gpt[@]}" --precision=bf16 --recompute=selective
compile gpt-lowp-z2 "${gpt[@]}" --precision=bf16 --low-precision-parameters \
  --low-precision-gradients --mesh dp=2 --zero=2
compile gpt-pp2-1f1b "${gpt[@]}" --mesh pp=2 --microbatches=4 --schedule=1f1b
compile gpt-pp2-interleaved "${gpt[@]}" --mesh pp=2 --microbatches=4 --schedule=interleaved:2
compile gpt-dp2-pp2 "${gpt[@]}" --mesh dp=2,pp=2 --microbatches=2
compile gpt-sync-local4 "${gpt[@]}" --data-parallel=2 --sync=local:4
compile gpt-sp "${gpt[@]}" --mesh tp=2 --sequence-parallel
compile gpt-cuda "${gpt[@]}" --mesh dp=2 --target=cuda --cuda-host-kernels

(cd "$out" && sha256sum -- *.cleave | sed 's/\.cleave$//') > "$out/fingerprints.txt"
cat "$out/fingerprints.txt"
if [ -n "$compare" ]; then
  if diff -u "$compare" "$out/fingerprints.txt" >&2; then
    echo "plan-fingerprints: every plan is byte-identical to $compare" >&2
  else
    echo "plan-fingerprints: plans differ from $compare" >&2
    exit 1
  fi
fi
