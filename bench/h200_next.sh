#!/usr/bin/env bash
# h200_next.sh: checks and times versions of the f16
# attention forward (kernels/04_attention_sgm.wgsl) on the H200 beside main,
# in one device call.
#   bench/h200_next.sh --main-wgpt PATH [--wgpt build/wgpt] [--tests build] [--out DIR] [--versions "cur L"]
# --main-wgpt: a wgpt built from main, placed beside --wgpt (it finds Dawn at
# ../third_party from its own folder). A version is a forward section kept in
# bench/next/attn/, swapped for the committed one in a copy of kernels/ and
# run through WGPT_KERNEL_DIR; cur is kernels/ as it is (the default):
#   L  the first one-pass forward: O rescaled through tile_s only when a
#      row's reference max moves (failed test_attention on an H100, 2026-12-05)
# Runs 1. test_attention for each; 2. test_gpt2_f16 and test_linear_f16 for
# the ones that pass; 3. `wgpt bench --precision f16 --steps 10` for main and
# those, three times round; 4. their attention kernels' GPU time (--profile).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
wgpt=build/wgpt tests=build out="" main="" versions=cur
while [ $# -gt 0 ]; do
  case "$1" in
    --main-wgpt) main=$2; shift 2 ;;
    --wgpt) wgpt=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --versions) versions=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "h200_next.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$main" ] || { echo "h200_next.sh: --main-wgpt PATH (a wgpt built from main) is needed" >&2; exit 2; }
out=${out:-runs/h200-next-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
for v in $versions; do
  mkdir -p "$out/k-$v" && cp kernels/*.wgsl "$out/k-$v/" || exit 1
  if [ "$v" != cur ]; then  # the forward section (marker to the next marker) replaced by the version's
    awk -v f="bench/next/attn/$v.wgsl" '
      /^\/\/ --- KERNEL: / { skip = 0 }
      /^\/\/ --- KERNEL: attention_sgm_forward ---/ { while ((getline l < f) > 0) print l; skip = 1; next }
      !skip' kernels/04_attention_sgm.wgsl > "$out/k-$v/04_attention_sgm.wgsl" || exit 1
    grep -q RESCALE_GAP "$out/k-$v/04_attention_sgm.wgsl" || { echo "h200_next.sh: version $v was not swapped in" >&2; exit 1; }
  fi
done
summary() { grep -E '^\[  (PASSED|FAILED)  \]' "$1" | tr '\n' ' '; }

echo "== 1. test_attention"
pass=""
for v in $versions; do
  WGPT_KERNEL_DIR=$out/k-$v "$tests/test_attention" > "$out/att-$v.txt" 2>&1
  rc=$?
  echo "$v: rc $rc | $(summary "$out/att-$v.txt")"
  grep -E '^ERROR' "$out/att-$v.txt" | head -3
  if [ $rc = 0 ]; then pass="$pass $v"; fi
done
echo "passed:$pass"

echo "== 2. test_gpt2_f16, test_linear_f16"
for v in $pass; do
  for t in test_gpt2_f16 test_linear_f16; do
    WGPT_KERNEL_DIR=$out/k-$v "$tests/$t" > "$out/$t-$v.txt" 2>&1
    echo "$v $t: rc $? | $(summary "$out/$t-$v.txt")"
    grep -E '^ERROR|worst tensor' "$out/$t-$v.txt" | head -4
  done
done

echo "== 3. the f16 step (ms), three times round"
for round in 1 2 3; do
  "$main" bench --precision f16 --steps 10 > "$out/step-main-$round.txt" 2>&1
  echo "main round $round: $(grep '^result' "$out/step-main-$round.txt")"
  for v in $pass; do
    WGPT_KERNEL_DIR=$out/k-$v "$wgpt" bench --precision f16 --steps 10 > "$out/step-$v-$round.txt" 2>&1
    echo "$v round $round: $(grep '^result' "$out/step-$v-$round.txt")"
  done
done

echo "== 4. attention GPU time (--profile)"
"$main" bench --precision f16 --steps 3 --profile > "$out/profile-main.txt" 2>&1
echo "main: $(grep -E 'GPU time per kernel' "$out/profile-main.txt")"
grep -E '^  (attention|cast_f16|transpose|gelu)' "$out/profile-main.txt"
for v in $pass; do
  WGPT_KERNEL_DIR=$out/k-$v "$wgpt" bench --precision f16 --steps 3 --profile > "$out/profile-$v.txt" 2>&1
  echo "$v: $(grep -E 'GPU time per kernel' "$out/profile-$v.txt")"
  grep -E '^  (attention|cast_f16|transpose|gelu)' "$out/profile-$v.txt"
done
echo "raw outputs: $out"
