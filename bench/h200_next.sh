#!/usr/bin/env bash
# h200_next.sh (branch attn1pass): checks and measures this branch's two
# candidate kernels on the H200 beside main's, in one device call.
#   bench/h200_next.sh [--wgpt build/wgpt] [--tests build] [--out DIR]
# Candidates: kernels/04_attention_sgm.wgsl (the forward in one pass) and
# kernels/03_linear_sgm.wgsl (double-buffered tiles); main's versions are kept in
# bench/next/ (the tree reaches the device without .git). Runs
#   1. the f16 tests of the candidates: test_attention, test_linear_f16, test_gpt2_f16
#      from --tests (the branch's kernels are built into them);
#   2. `wgpt bench --precision f16 --steps 10` with main's kernels, with each
#      candidate alone and with both, twice round (WGPT_KERNEL_DIR);
#   3. `wgpt bench --micro-only f16` with main's matmul and the candidate;
#   4. `--profile` of both candidates.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
wgpt=build/wgpt tests=build out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --wgpt) wgpt=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "h200_next.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
out=${out:-runs/h200-next-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1

# kernel folders: main, attn (candidate attention), linear (candidate matmul), both
for v in main attn linear both; do
  mkdir -p "$out/k-$v" && cp kernels/*.wgsl "$out/k-$v/"
done
cp bench/next/main_04_attention_sgm.wgsl "$out/k-main/04_attention_sgm.wgsl"
cp bench/next/main_03_linear_sgm.wgsl "$out/k-main/03_linear_sgm.wgsl"
cp bench/next/main_03_linear_sgm.wgsl "$out/k-attn/03_linear_sgm.wgsl"
cp bench/next/main_04_attention_sgm.wgsl "$out/k-linear/04_attention_sgm.wgsl"

echo "== 1. tests (the candidates)"
for t in test_attention test_linear_f16 test_gpt2_f16; do
  "$tests/$t" > "$out/$t.txt" 2>&1; echo "$t: rc $? | $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.txt" | tr '\n' ' ')"
  grep -E '^ERROR|FAILED  \] ' "$out/$t.txt" | head -6
done
grep -E 'f16 kernels, (out|lse|dqkv)' "$out/test_attention.txt" | head -24

echo "== 2. the f16 step (ms), twice round"
for round in 1 2; do
  for v in main attn linear both; do
    WGPT_KERNEL_DIR=$out/k-$v "$wgpt" bench --precision f16 --steps 10 > "$out/step-$v-$round.txt" 2>&1
    echo "$v round $round: $(grep '^result' "$out/step-$v-$round.txt")"
  done
done

echo "== 3. f16 matmuls (ms, TFLOP/s): main | candidate"
WGPT_KERNEL_DIR=$out/k-main "$wgpt" bench --micro-only f16 > "$out/micro-main.txt" 2>&1
WGPT_KERNEL_DIR=$out/k-linear "$wgpt" bench --micro-only f16 > "$out/micro-linear.txt" 2>&1
paste <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%-8s %-15s %7s %8s\n", $2, $6, $7, $8 }' "$out/micro-main.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "| %7s %8s\n", $7, $8 }' "$out/micro-linear.txt")

echo "== 4. profile (both candidates)"
WGPT_KERNEL_DIR=$out/k-both "$wgpt" bench --precision f16 --steps 3 --profile > "$out/profile-both.txt" 2>&1
sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile-both.txt" | head -16
echo "raw outputs: $out"
