#!/usr/bin/env bash
# gpu_check.sh: what a change to the f16 tensor-core path owes the GPU, in one
# command on the GPU machine (from a built tree: make all, or any folder that
# holds the test programs and wgpt; Dawn is found beside it, ../third_party):
# bench/gpu_check.sh [--tests build] [--wgpt build/wgpt] [--main-wgpt PATH] [--kernels DIR] [--out DIR]
#                      [--no-compare] [--model "ARGS"]   (wgpt bench's model options; default GPT-2 124M)
# --kernels DIR: this run's kernel files from DIR (WGPT_KERNEL_DIR) instead of
# those built in; without --main-wgpt the same wgpt with its own kernels is
# then the other side: a change to kernels/ alone, measured without a build.
# 1. the test programs that run the subgroup-matrix kernels (test_ops' linear-f16
#    and attention cases, test_attention, test_gpt2_f16, test_linear_f16,
#    test_optimizer) and the f16 mode's fused kernels (test_linear,
#    test_layernorm, test_cross_entropy): their summary lines and the worst
#    errors they print;
# 2. each tensor-core kernel's registers, shared memory and stack (spills), as
#    the driver reports them (WGPT_KERNEL_STATS);
# 3. `wgpt bench --precision f16`, alternating with the other side (--main-wgpt,
#    a wgpt built from main, or --kernels') twice where there is one: the median step of each;
# 4. where the step's GPU time goes (--profile), on both sides;
# 5. bench/compare.sh --no-micro: beside PyTorch (unless --no-compare).
# Raw outputs in --out (default runs/gpu-check-DATE).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tests=build wgpt=build/wgpt main="" kernels="" out="" compare=1 model=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) tests=$2; shift 2 ;;
    --wgpt) wgpt=$2; shift 2 ;;
    --main-wgpt) main=$2; shift 2 ;;
    --kernels) kernels=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-compare) compare=0; shift ;;
    --model) model=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$wgpt" ] || { echo "gpu_check.sh: no wgpt at '$wgpt' (make all, or --wgpt PATH)" >&2; exit 2; }
if [ -n "$kernels" ]; then
  [ -f "$kernels/04_attention_sgm.wgsl" ] || { echo "gpu_check.sh: --kernels '$kernels' holds no kernel files" >&2; exit 2; }
  kernels=$(cd "$kernels" && pwd)
  # the other side: the same wgpt with its built-in kernels, unless --main-wgpt
  [ -n "$main" ] || main=$wgpt
fi
# Runs a command with this side's kernels (--kernels), or as it is.
this() { if [ -n "$kernels" ]; then WGPT_KERNEL_DIR="$kernels" "$@"; else "$@"; fi; }
# And with the other side's: its own (no WGPT_KERNEL_DIR from the caller either).
other() { env -u WGPT_KERNEL_DIR "$@"; }
out=${out:-runs/gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
[ -f scripts/gpu-env.sh ] && . scripts/gpu-env.sh
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$wgpt" info 2>&1 | grep -E '^adapter' | head -1
rc=0

echo "== 1. the subgroup-matrix kernels' tests"
for t in test_ops test_attention test_gpt2_f16 test_linear_f16 test_optimizer test_linear test_layernorm test_cross_entropy; do
  args=""
  [ $t = test_ops ] && args="linear-f16 attention"  # (word-split: the cases whose names hold either)
  this "$tests/$t" $args > "$out/$t.txt" 2>&1 || rc=1
  echo "$t: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.txt" | tr '\n' ' ')"
  grep -E '^ERROR|worst tensor|skipped|epilogue N=|GELU. N=' "$out/$t.txt" | sort -u | head -8
done

echo "== 2. registers, shared memory, stack (the driver's statistics)"
# ($model is word-split on purpose: several options)
WGPT_KERNEL_STATS="$out/stats.txt" this "$wgpt" bench --precision f16 --steps 1 $model > "$out/stats-run.txt" 2>&1
# "kernel NAME (file)" from wgpt, then the layer's line for that pipeline
stats=$(awk '/^kernel / { k = $2; next } k ~ /sgm/ { print k ": " substr($0, 1, 400) }' "$out/stats.txt" 2>/dev/null | head -20)
if [ -n "$stats" ]; then printf '%s\n' "$stats"
else echo "no statistics for tensor-core kernels (none ran here, or the driver reports none): $out/stats.txt"
fi

echo "== 3. the f16 step (median ms)"
for round in 1 2; do
  if [ -n "$main" ]; then
    other "$main" bench --precision f16 $model > "$out/step-main-$round.txt" 2>&1
    echo "main $round: $(grep '^result' "$out/step-main-$round.txt")"
  fi
  this "$wgpt" bench --precision f16 $model > "$out/step-$round.txt" 2>&1 || rc=1
  echo "this $round: $(grep '^result' "$out/step-$round.txt")"
done

echo "== 4. where the step's GPU time goes (--profile)"
this "$wgpt" bench --precision f16 --steps 3 --profile $model > "$out/profile.txt" 2>&1
sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile.txt" | head -24
if [ -n "$main" ]; then
  other "$main" bench --precision f16 --steps 3 --profile $model > "$out/profile-main.txt" 2>&1
  echo "-- main (the other side)"
  sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile-main.txt" | head -24
fi

if [ $compare = 1 ]; then
  echo "== 5. beside PyTorch"
  this bench/compare.sh --wgpt "$wgpt" --no-micro --model "$model" --out "$out/compare" > "$out/compare.txt" 2>&1
  grep -A6 '^run  ' "$out/compare.txt"
fi
echo "raw outputs: $out"
exit $rc
