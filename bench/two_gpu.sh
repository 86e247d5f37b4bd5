#!/usr/bin/env bash
# bench/two_gpu.sh: GPT-2 124M data-parallel on 2 GPUs of one host beside 1 GPU
# accumulating 2 micro-batches of the same data (batch 8 x 1024 a GPU), for
# each precision given, then PyTorch's model (bench/pytorch_gpt2.py) on 1 GPU
# and under torchrun with DistributedDataParallel (NCCL, NVLink multicast off).
#   bench/two_gpu.sh DATA_GLOB OUT_DIR [STEPS] [PRECISIONS...]
# Prints each run's log tail, tokens/s, and nvidia-smi samples of the 2-GPU runs.
set -uo pipefail
data=$1 out=$2 steps=${3:-20}
shift 3 || shift $#
precs=("$@")
[ ${#precs[@]} -gt 0 ] || precs=(f16 fp32)
wgpt=${WGPT:-build/wgpt}
mkdir -p "$out"
model=(--layers 12 --heads 12 --channels 768 --seq 1024 --batch 8 --total-batch 16384 --steps "$steps"
       --val-every 0 --sample-every 0 --checkpoint-every 0 --resume none)
nvidia-smi -L
for p in "${precs[@]}"; do
  echo "== wgpt $p, 1 GPU, 2 micro-batches"
  "$wgpt" train --data "$data" --out "$out/one_$p" --precision "$p" "${model[@]}" > "$out/one_$p.log" 2>&1
  echo "exit $?"; grep -E "ranks:|step +$steps/|done|exchange|error" "$out/one_$p.log" | tail -4
  echo "== wgpt $p, 2 GPUs (mpirun -np 2)"
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader -lms 500 > "$out/smi_$p.txt" &
  smi=$!
  mpirun --allow-run-as-root --oversubscribe -np 2 "$wgpt" train --data "$data" --out "$out/two_$p" --precision "$p" \
    "${model[@]}" > "$out/two_$p.log" 2>&1
  echo "exit $?"; kill $smi 2>/dev/null
  grep -E "ranks:|GPU|step +$steps/|done|exchange|error" "$out/two_$p.log" | tail -6
  echo "nvidia-smi samples (index, util, memory) with util > 0 per GPU:"
  awk -F', ' '$2+0 > 0 {n[$1]++} END {for (g in n) print "  GPU " g ": " n[g] " busy samples"}' "$out/smi_$p.txt"
done
export NCCL_NVLS_ENABLE=0
for m in bf16 fp32; do
  echo "== PyTorch $m, 1 GPU"
  python3 bench/pytorch_gpt2.py --mode "$m" --batch 8 --steps 10 2>&1 | grep result
  echo "== PyTorch $m, 2 GPUs (torchrun, DDP)"
  torchrun --standalone --nproc_per_node 2 bench/pytorch_gpt2.py --mode "$m" --batch 8 --steps 10 2>&1 | grep result
done
