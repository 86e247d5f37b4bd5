#!/usr/bin/env bash
# h200_next.sh (branch attn1pass): checks and measures this branch's
# candidates on the H200 beside main, in one device call.
#   bench/h200_next.sh --main-wgpt PATH [--wgpt build/wgpt] [--tests build] [--out DIR] [--quick]
# --quick leaves out 3b (each matmul block forced) when device time is short.
# --main-wgpt: a wgpt built from main, placed beside --wgpt (it finds Dawn at
# ../third_party from its own folder). Candidates:
#   attn    kernels/04_attention_sgm.wgsl: the forward in one pass, writing its
#           output in f16 and transposed (no cast, no transpose after it); dq
#           and dkdv reading an f16 copy of dout
#   gelu    kernels/08_precision.wgsl's gelu_f16_transpose: the fcproj input
#           transposed in one pass from fch (no gelu_forward_f16 + transpose_f16)
#   linear  kernels/03_linear_sgm.wgsl: double-buffered tiles (main's file is
#           kept in bench/next/: the tree reaches the device without .git)
# Runs
#   1. the f16 tests: test_attention, test_linear_f16, test_gpt2_f16 from --tests,
#      and test_attention again with the forward rescaling O every block (eager:
#      the fallback if the lazy rescale's flag misbehaves);
#   2. `wgpt bench --precision f16 --steps 10`: main, attn (this wgpt with main's
#      matmul through WGPT_KERNEL_DIR: every candidate but the matmul's), both
#      (this wgpt: all of them), eager (all, the forward eager), twice round;
#   3. `wgpt bench --micro-only f16`: main's matmul beside the candidate, and each
#      block forced (--micro-block; the candidate adds a 192 x 128 block, tall);
#   4. `--profile` of both candidates; 5. their registers.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
wgpt=build/wgpt tests=build out="" main="" quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --main-wgpt) main=$2; shift 2 ;;
    --wgpt) wgpt=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "h200_next.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$main" ] || { echo "h200_next.sh: --main-wgpt PATH (a wgpt built from main) is needed" >&2; exit 2; }
out=${out:-runs/h200-next-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/k-attn" || exit 1
cp kernels/*.wgsl "$out/k-attn/" && cp bench/next/main_03_linear_sgm.wgsl "$out/k-attn/03_linear_sgm.wgsl" || exit 1
run() {  # run VARIANT ARGS...: wgpt of that variant
  local v=$1; shift
  case $v in
    main) "$main" "$@" ;;
    attn) WGPT_KERNEL_DIR=$out/k-attn "$wgpt" "$@" ;;
    both) "$wgpt" "$@" ;;
    eager) WGPT_KERNEL_DIR=$out/k-eager "$wgpt" "$@" ;;
  esac
}

# the attention forward's fallback: O rescaled in every block, no flag read
mkdir -p "$out/k-eager" && cp kernels/*.wgsl "$out/k-eager/" &&
  sed -i 's/^override RESCALE_GAP: f32 = 8.0;/override RESCALE_GAP: f32 = 0.0;/; s/^override RESCALE_LAZY: bool = true;/override RESCALE_LAZY: bool = false;/' \
    "$out/k-eager/04_attention_sgm.wgsl" || exit 1
grep -q 'RESCALE_LAZY: bool = false' "$out/k-eager/04_attention_sgm.wgsl" || { echo "h200_next.sh: the eager copy was not made" >&2; exit 1; }

echo "== 1. tests (the candidates)"
for t in test_attention test_linear_f16 test_gpt2_f16; do
  "$tests/$t" > "$out/$t.txt" 2>&1; echo "$t: rc $? | $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.txt" | tr '\n' ' ')"
  grep -E '^ERROR|FAILED  \] ' "$out/$t.txt" | head -6
done
grep -E 'f16 kernels, (out|lse|dqkv)' "$out/test_attention.txt" | head -24
WGPT_KERNEL_DIR=$out/k-eager "$tests/test_attention" > "$out/test_attention-eager.txt" 2>&1
echo "test_attention, forward rescaling every block (k-eager): rc $? | $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/test_attention-eager.txt" | tr '\n' ' ')"

echo "== 2. the f16 step (ms), twice round"
for round in 1 2; do
  for v in main attn both eager; do
    run $v bench --precision f16 --steps 10 > "$out/step-$v-$round.txt" 2>&1
    echo "$v round $round: $(grep '^result' "$out/step-$v-$round.txt")"
  done
done

echo "== 3. f16 matmuls (ms, TFLOP/s): main | candidate"
run main bench --micro-only f16 > "$out/micro-main.txt" 2>&1
run both bench --micro-only f16 > "$out/micro-both.txt" 2>&1
paste <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%-8s %-15s %7s %8s\n", $2, $6, $7, $8 }' "$out/micro-main.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "| %7s %8s\n", $7, $8 }' "$out/micro-both.txt")

if [ $quick = 0 ]; then
echo "== 3b. each block forced (ms): main base, main wide | candidate base, wide, tall (192 x 128)"
for blk in base wide; do run main bench --micro-only f16 --micro-block $blk > "$out/micro-main-$blk.txt" 2>&1; done
for blk in base wide tall; do run both bench --micro-only f16 --micro-block $blk > "$out/micro-both-$blk.txt" 2>&1; done
paste <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%-8s %-15s %7s\n", $2, $6, $7 }' "$out/micro-main-base.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%7s |\n", $7 }' "$out/micro-main-wide.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%7s\n", $7 }' "$out/micro-both-base.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%7s\n", $7 }' "$out/micro-both-wide.txt") \
      <(awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "%7s\n", $7 }' "$out/micro-both-tall.txt")
grep -h "failed\|error" "$out"/micro-both-*.txt | head -5
fi

echo "== 4. profile (both candidates)"
run both bench --precision f16 --steps 3 --profile > "$out/profile-both.txt" 2>&1
sed -n '/GPU time per kernel/,/^(registers/p' "$out/profile-both.txt" | head -18
echo "== 5. registers (WGPT_KERNEL_STATS)"
WGPT_KERNEL_STATS=$out/stats-both.txt run both bench --precision f16 --steps 2 > /dev/null 2>&1
grep -E "attention_sgm|matmul_sgm" "$out/stats-both.txt" | cut -c1-240
echo "raw outputs: $out"
