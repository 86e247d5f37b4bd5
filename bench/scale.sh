#!/usr/bin/env bash
# scale.sh: f16 training of the four GPT-2 sizes (and 124M at larger
# micro-batches) with `wgpt bench`, each beside PyTorch bf16 autocast at the
# same shape (bench/pytorch_gpt2.py), in one go on one GPU: the step time,
# the first and last loss of the run, and each one's peak memory (wgpt: every
# storage buffer it allocated, split by kind; PyTorch: max_memory_allocated).
#   bench/scale.sh [--wgpt build/wgpt] [--steps 20] [--out DIR] [--only "124m-8 1.5b-1"] [--no-torch]
# Shapes (name: wgpt bench options), T 1024:
#   124m-B (B = 8, 16, 32, 64)  L 12, H 12, C 768
#   350m-4   L 24, H 16, C 1024, batch 4
#   774m-4   L 36, H 20, C 1280, batch 4
#   1.5b-1   L 48, H 25, C 1600, batch 1
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
wgpt=build/wgpt steps=20 out="" only="" torch=1
while [ $# -gt 0 ]; do
  case "$1" in
    --wgpt) wgpt=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
out=${out:-runs/scale-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
declare -A shape=(
  [124m-8]="--layers 12 --heads 12 --channels 768 --batch 8"
  [124m-16]="--layers 12 --heads 12 --channels 768 --batch 16"
  [124m-32]="--layers 12 --heads 12 --channels 768 --batch 32"
  [124m-64]="--layers 12 --heads 12 --channels 768 --batch 64"
  [350m-4]="--layers 24 --heads 16 --channels 1024 --batch 4"
  [774m-4]="--layers 36 --heads 20 --channels 1280 --batch 4"
  [1.5b-1]="--layers 48 --heads 25 --channels 1600 --batch 1"
)
names=${only:-"124m-8 124m-16 124m-32 124m-64 350m-4 774m-4 1.5b-1"}
echo "GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"
echo "wgpt: $wgpt --precision f16 --seq 1024 --steps $steps; PyTorch: bench/pytorch_gpt2.py --mode bf16 --steps $steps"
rows=$out/rows.txt
: >"$rows"
for n in $names; do
  # shellcheck disable=SC2086  # the options on purpose
  "$wgpt" bench --precision f16 --seq 1024 --steps "$steps" ${shape[$n]} >"$out/wgpt-$n.txt" 2>&1 ||
    { echo "$n: wgpt failed:"; tail -3 "$out/wgpt-$n.txt" | sed 's/^/  /'; }
  awk -v n="$n" '/^model:/ {sub(/.*recompute /, ""); rc = $0}
       /^step/ {l = $0; sub(/.*loss /, "", l); sub(/,.*/, "", l); if (first == "") first = l; last = l}
       /^result:/ {ms = $2}
       /^GPU memory allocated:/ {mem = $4}
       /^GPU memory at its peak:/ {split_ = $0; sub(/^GPU memory at its peak: /, "", split_)}
       END {printf "%s wgpt %s %s %s %s %s | %s\n", n, (ms == "" ? "-" : ms), (mem == "" ? "-" : mem),
            (first == "" ? "-" : first), (last == "" ? "-" : last), (rc == "" ? "-" : rc), split_}' \
    "$out/wgpt-$n.txt" >>"$rows"
  if [ $torch = 1 ]; then
    # shellcheck disable=SC2086
    python3 bench/pytorch_gpt2.py --mode bf16 --seq 1024 --steps "$steps" ${shape[$n]} >"$out/torch-$n.txt" 2>&1 ||
      { echo "$n: PyTorch failed:"; tail -3 "$out/torch-$n.txt" | sed 's/^/  /'; }
    awk -v n="$n" '/^step/ {l = $0; sub(/.*loss /, "", l); sub(/,.*/, "", l); if (first == "") first = l; last = l}
         /^result:/ {ms = $2; mem = $8}
         END {printf "%s torch %s %s %s %s - |\n", n, (ms == "" ? "-" : ms), (mem == "" ? "-" : mem),
              (first == "" ? "-" : first), (last == "" ? "-" : last)}' "$out/torch-$n.txt" >>"$rows"
  fi
done
echo
printf "%-8s %-6s %9s %11s %8s %8s %-9s %s\n" shape run ms/step "peak MiB" "loss 1" "loss N" recompute "wgpt's peak by kind"
awk '{printf "%-8s %-6s %9s %11s %8s %8s %-9s", $1, $2, $3, $4, $5, $6, $7; $1 = $2 = $3 = $4 = $5 = $6 = $7 = $8 = "";
      sub(/^ +/, ""); print " " $0}' "$rows"
