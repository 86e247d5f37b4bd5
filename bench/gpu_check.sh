#!/usr/bin/env bash
# gpu_check.sh: what a change to the f16 tensor-core path owes the GPU, in one
# command on the GPU machine (from a built tree: make all, or any folder that
# holds the test programs and wgpt; Dawn is found beside it, ../third_party):
# bench/gpu_check.sh [--tests build] [--wgpt build/wgpt] [--main-wgpt PATH] [--kernels DIR[,DIR...]] [--out DIR]
#                      [--no-compare] [--model "ARGS"]   (wgpt bench's model options; default GPT-2 124M)
# --kernels DIR: this run's kernel files from DIR (WGPT_KERNEL_DIR) instead of
# those built in; without --main-wgpt the same wgpt with its own kernels is
# then the other side: a change to kernels/ alone, measured without a build.
# Several folders (a comma list) are several candidates, each a side named
# by its folder, all measured beside main in the same run.
# 1. the test programs that run the subgroup-matrix kernels (test_ops' linear-f16
#    and attention cases, test_attention, test_gpt2_f16, test_linear_f16,
#    test_optimizer) and the f16 mode's fused kernels (test_linear,
#    test_layernorm, test_cross_entropy): their summary lines and the worst
#    errors they print;
# 2. each tensor-core kernel's registers, shared memory and stack (spills), as
#    the driver reports them (WGPT_KERNEL_STATS);
# 3. `wgpt bench --precision f16`, alternating with the other side (--main-wgpt,
#    a wgpt built from main, or --kernels') twice where there is one: the median step of each;
# 4. where the step's GPU time goes (--profile), on every side;
# 5. bench/compare.sh --no-micro: beside PyTorch (unless --no-compare; the first side).
# Step 1 runs for each side, and for main where main is this same build (--kernels
# without --main-wgpt: the test programs with their built-in kernels); step 2 for
# each side but main.
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
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$wgpt" ] || { echo "gpu_check.sh: no wgpt at '$wgpt' (make all, or --wgpt PATH)" >&2; exit 2; }
# The sides measured (beside main): one a --kernels folder (dirs, named by
# names), or the one "this" (wgpt as it is).
dirs=() names=()
if [ -n "$kernels" ]; then
  IFS=, read -r -a list <<<"$kernels"
  for d in "${list[@]}"; do
    [ -f "$d/04_attention_sgm.wgsl" ] || { echo "gpu_check.sh: --kernels '$d' holds no kernel files" >&2; exit 2; }
    dirs+=("$(cd "$d" && pwd)")
    names+=("$(basename "$d")")
  done
  # the other side: the same wgpt with its built-in kernels, unless --main-wgpt
  [ -n "$main" ] || main=$wgpt
else
  names=(this)
fi
# And with the other side's: its own (no WGPT_KERNEL_DIR from the caller either).
other() { env -u WGPT_KERNEL_DIR "$@"; }
# Runs a command with side i's kernels (its --kernels folder), or as it is;
# i = main: as the other side.
this() {
  local i=$1; shift
  if [ "$i" = main ]; then other "$@"
  elif [ ${#dirs[@]} -gt 0 ]; then WGPT_KERNEL_DIR="${dirs[$i]}" "$@"
  else "$@"
  fi
}
out=${out:-runs/gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
[ -f scripts/gpu-env.sh ] && . scripts/gpu-env.sh
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$wgpt" info 2>&1 | grep -E '^adapter' | head -1
rc=0

sides=$(seq 0 $((${#names[@]} - 1)))
# Side i's tests, under name n (i = main: the built-in kernels, as main's wgpt runs them).
run_tests() {
  local i=$1 n=$2 t args
  for t in test_ops test_attention test_gpt2_f16 test_linear_f16 test_optimizer test_linear test_layernorm test_cross_entropy; do
    args=""
    [ $t = test_ops ] && args="linear-f16 attention"  # (word-split: the cases whose names hold either)
    this "$i" "$tests/$t" $args > "$out/$n-$t.txt" 2>&1 || rc=1
    echo "$n $t: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$n-$t.txt" | tr '\n' ' ')"
    grep -E '^ERROR|worst tensor|skipped|epilogue N=|GELU. N=' "$out/$n-$t.txt" | sort -u | head -8
  done
}
echo "== 1. the subgroup-matrix kernels' tests"
# main's own where its tests are these programs (the candidates share its build)
[ ${#dirs[@]} -gt 0 ] && [ "$main" = "$wgpt" ] && run_tests main main
for i in $sides; do run_tests "$i" "${names[$i]}"; done

echo "== 2. registers, shared memory, stack (the driver's statistics)"
for i in $sides; do
  n=${names[$i]}
  # ($model is word-split on purpose: several options)
  WGPT_KERNEL_STATS="$out/$n-stats.txt" this $i "$wgpt" bench --precision f16 --steps 1 $model > "$out/$n-stats-run.txt" 2>&1
  # "kernel NAME (file)" from wgpt, then the layer's line for that pipeline
  stats=$(awk -v n="$n" '/^kernel / { k = $2; next } k ~ /sgm/ { print n " " k ": " substr($0, 1, 400) }' "$out/$n-stats.txt" 2>/dev/null | head -20)
  if [ -n "$stats" ]; then printf '%s\n' "$stats"
  else echo "$n: no statistics for tensor-core kernels (none ran here, or the driver reports none): $out/$n-stats.txt"
  fi
done

echo "== 3. the f16 step (median ms)"
for round in 1 2; do
  if [ -n "$main" ]; then
    other "$main" bench --precision f16 $model > "$out/step-main-$round.txt" 2>&1
    echo "main $round: $(grep '^result' "$out/step-main-$round.txt")"
  fi
  for i in $sides; do
    n=${names[$i]}
    this $i "$wgpt" bench --precision f16 $model > "$out/step-$n-$round.txt" 2>&1 || rc=1
    echo "$n $round: $(grep '^result' "$out/step-$n-$round.txt")"
  done
done

echo "== 4. where the step's GPU time goes (--profile)"
for i in $sides; do
  n=${names[$i]}
  this $i "$wgpt" bench --precision f16 --steps 3 --profile $model > "$out/profile-$n.txt" 2>&1
  echo "-- $n"
  sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile-$n.txt" | head -24
done
if [ -n "$main" ]; then
  other "$main" bench --precision f16 --steps 3 --profile $model > "$out/profile-main.txt" 2>&1
  echo "-- main (the other side)"
  sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile-main.txt" | head -24
fi

if [ $compare = 1 ]; then
  echo "== 5. beside PyTorch (${names[0]})"
  this 0 bench/compare.sh --wgpt "$wgpt" --no-micro --model "$model" --out "$out/compare" > "$out/compare.txt" 2>&1
  grep -A6 '^run  ' "$out/compare.txt"
fi
echo "raw outputs: $out"
exit $rc
