#!/usr/bin/env bash
# llmc_gpt2.sh: llm.c's CUDA trainer (train_gpt2cu) as a peer of `wgpt bench`, for
# bench/compare.sh --llmc. llm.c is not part of wgpt: get it with
#   git clone https://github.com/karpathy/llm.c DIR
# bench/llmc_gpt2.sh build DIR BUILD
#   Copies DIR's train_gpt2.cu, Makefile and llmc/ into BUILD (DIR is only read) and
#   builds train_gpt2cu there with this machine's nvcc: bf16, USE_CUDNN=0,
#   NO_MULTI_GPU=1, NO_USE_MPI=1 (no NCCL, no MPI), for GPU 0's compute capability
#   (GPU_COMPUTE_CAPABILITY from nvidia-smi, e.g. 90 on an H100). The copy is PATCHED first:
#   llmc/cuda_utils.cuh's cudaMallocConditionallyManaged falls back to managed
#   memory (cudaMallocManaged + cudaMemAdvise, the call that CUDA 13 no longer
#   compiles) when cudaMalloc runs out; the copy exits with an error instead, so
#   the trainer never asks for managed memory on a shared GPU. BUILD/llmc.patch
#   holds the diff. Prints "built: BUILD/train_gpt2cu".
# bench/llmc_gpt2.sh run BIN [--depth 12] [--batch 8] [--seq 1024] [--steps 10]
#                            [--warmup 2] [--data DIR] [--args "EXTRA"]
#   Runs BIN (train_gpt2cu) from scratch (-e dDEPTH: GPT-2 d12 = 124M, d24 = 350M;
#   vocabulary padded to 50304) on random GPT-2 token shards in llm.c's format
#   (magic 20240520, version 1, uint16 tokens; written to --data, default a
#   temporary folder), warmup + steps steps: no validation between steps (one
#   batch before and after, untimed), no sampling, lr 6e-4, weight decay 0.1,
#   its defaults otherwise (bf16 with fp32 master weights, recompute GELU: -r 1;
#   --args "-r 0" passes more options). Each step's time is llm.c's own (CUDA
#   events around the step); the figure is the median step after --warmup.
#   Prints llm.c's output, then one line as bench/pytorch_gpt2.py does:
#   result: 27.6 ms/step, 296000 tokens/s, 22.09 TFLOP/s, 9000 MiB used (llm.c d12, batch 8, T 1024; median of 10 steps, mean 27.7 ms)
#   where the memory is llm.c's own "device memory usage" (cudaMemGetInfo after it
#   allocated its parameters, gradients, AdamW state and activations; the CUDA
#   context included). TFLOP/s counts 6N + 6LCT FLOPs a token, as wgpt and
#   pytorch_gpt2.py do (N with the padded vocabulary and 1024 positions).
set -uo pipefail
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "llmc_gpt2.sh: $*" >&2; exit 1; }

build() {
  [ $# -eq 2 ] || { usage >&2; exit 2; }
  local src=$1 bdir=$2
  if ! [ -f "$src/train_gpt2.cu" ] || ! [ -f "$src/Makefile" ] || ! [ -d "$src/llmc" ]; then
    die "$src is not an llm.c checkout (train_gpt2.cu, llmc/, Makefile)"
  fi
  if ! command -v nvcc >/dev/null 2>&1; then
    [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc on PATH or in /usr/local/cuda/bin"
    PATH=/usr/local/cuda/bin:$PATH
  fi
  mkdir -p "$bdir" && rm -rf "$bdir/llmc" && cp -r "$src/train_gpt2.cu" "$src/Makefile" "$src/llmc" "$bdir/" || exit 1
  local f="$bdir/llmc/cuda_utils.cuh"
  # the fallback's two calls become one error exit
  sed -i -e '/cudaMemAdvise(\*out, bytes, cudaMemAdviseSetPreferredLocation/d' \
         -e 's|^\( *\)cudaCheck_(cudaMallocManaged(out, bytes), file, line);|\1fprintf(stderr, "[llmc_gpt2.sh] out of GPU memory: cudaMalloc of %zu bytes at %s:%d (managed memory is off in this copy)\\n", bytes, file, line); exit(EXIT_FAILURE);|' "$f"
  grep -q 'cudaMallocManaged\|cudaMemAdvise' "$f" || ! grep -q 'llmc_gpt2.sh\] out of GPU memory' "$f" &&
    die "patching $f failed (a newer llm.c?): $(grep -n 'cudaMallocManaged\|cudaMemAdvise' "$f" | head -2)"
  diff -u "$src/llmc/cuda_utils.cuh" "$f" >"$bdir/llmc.patch"
  # the commit, where DIR is a clone of its own (not a folder inside another repository)
  local commit='?'
  [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$src" && pwd -P)" ] &&
    commit=$(git -C "$src" rev-parse --short HEAD)
  echo "llm.c: $src at $commit; nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  # the link's -lnvidia-ml: the toolkit's stub where the driver's library has no plain .so name
  local cu
  cu=$(dirname "$(dirname "$(command -v nvcc)")")
  export LIBRARY_PATH=${LIBRARY_PATH:+$LIBRARY_PATH:}$cu/lib64/stubs:$cu/targets/x86_64-linux/lib/stubs
  # The GPU's compute capability, said outright: llm.c's Makefile means to ask nvidia-smi but
  # writes $(nvidia-smi ...) in make, an empty variable, and nvcc then builds for its default
  # (sm_75 with PTX the driver compiles at start; MAX_1024_THREADS_BLOCKS 1 instead of 2).
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '.' | sort -n | head -1)
  case "$cc" in [0-9][0-9]|[0-9][0-9][0-9]) ;; *) cc=""; echo "llm.c: no compute capability from nvidia-smi: nvcc's default target" ;; esac
  set -- train_gpt2cu PRECISION=BF16 USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1 ${cc:+GPU_COMPUTE_CAPABILITY=$cc}
  echo "\$ make -C $bdir $*"
  make -C "$bdir" "$@" >"$bdir/build.txt" 2>&1 ||
    { tail -8 "$bdir/build.txt" >&2; die "llm.c's build failed: $bdir/build.txt"; }
  grep -m1 -E '^[^ ]*nvcc .*train_gpt2\.cu' "$bdir/build.txt" | sed 's/^/  /'
  echo "built: $bdir/train_gpt2cu"
}

# shard FILE NTOK SEED: llm.c's token file (256 int32 header, uint16 tokens), random GPT-2 tokens.
shard() {
  LC_ALL=C awk -v n="$2" -v v=50257 -v seed="$3" '
    function i32(x) { printf "%c%c%c%c", x % 256, int(x / 256) % 256, int(x / 65536) % 256, int(x / 16777216) % 256 }
    BEGIN { i32(20240520); i32(1); i32(n); for (i = 3; i < 256; i++) i32(0)
            s = seed; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; t = int(s / 32768) % v
                                                 printf "%c%c", t % 256, int(t / 256) }
    }' >"$1"
}

run() {
  [ $# -ge 1 ] || { usage >&2; exit 2; }
  local bin=$1; shift
  local depth=12 B=8 T=1024 steps=10 warmup=2 data="" extra=""
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "$1 needs a value"
    case "$1" in
      --depth) depth=$2 ;; --batch) B=$2 ;; --seq) T=$2 ;; --steps) steps=$2 ;;
      --warmup) warmup=$2 ;; --data) data=$2 ;; --args) extra=$2 ;;
      *) die "unknown option '$1'" ;;
    esac
    shift 2
  done
  for v in depth B T steps warmup; do
    case "${!v}" in ''|*[!0-9]*) die "$v needs a number, got '${!v}'" ;; esac
  done
  if [ "$B" -eq 0 ] || [ "$steps" -eq 0 ]; then die "--batch and --steps must be positive"; fi
  [ -x "$bin" ] || die "$bin is missing: bench/llmc_gpt2.sh build DIR BUILD first"
  local L C
  case "$depth" in 12) L=12 C=768 ;; 24) L=24 C=1024 ;; 36) L=36 C=1280 ;; 48) L=48 C=1600 ;;
    *) die "--depth $depth: GPT-2 has 12, 24, 36 or 48" ;; esac
  local tmp=""
  [ -n "$data" ] || { tmp=$(mktemp -d); data=$tmp; }
  mkdir -p "$data" || exit 1
  # two batches' worth and one token: every step reads a batch of B x T + 1
  local ntok=$((2 * B * T + 1))
  shard "$data/llmc_train_000000.bin" "$ntok" 1
  shard "$data/llmc_val_000000.bin" "$((B * T + 1))" 2
  local log
  log=$(mktemp)
  # shellcheck disable=SC2086  # $extra is a list of options on purpose
  set -- "$bin" -i "$data/llmc_train_*.bin" -j "$data/llmc_val_*.bin" -e "d$depth" -b "$B" -t "$T" \
    -d $((B * T)) -x $((warmup + steps)) -v 1000000 -m 1 -s 0 -l 6e-4 -c 0.1 $extra
  echo "\$ $*"
  # from BIN's folder: it looks for gpt2_tokenizer.bin there (absent: no sampling anyway)
  (cd "$(dirname "$bin")" && "$@") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  [ -n "$tmp" ] && rm -rf "$tmp"
  if [ "$rc" -ne 0 ]; then rm -f "$log"; die "train_gpt2cu failed (exit $rc)"; fi
  awk -F'|' -v w="$warmup" -v B="$B" -v T="$T" -v L="$L" -v C="$C" -v d="$depth" '
    /^device memory usage:/ { split($0, m, " "); mem = m[4] }
    /^step / && / ms / {
      split($1, a, /[ \/]+/); s = a[2] + 0
      for (i = 2; i <= NF; i++) if ($i ~ / ms *$/) { split($i, b, " "); ms = b[1] + 0 }
      if (s > w) t[n++] = ms
    }
    END {
      if (n == 0) { print "llmc_gpt2.sh: no timed steps in the output" > "/dev/stderr"; exit 1 }
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
      med = (n % 2) ? t[int(n / 2)] : (t[n / 2 - 1] + t[n / 2]) / 2
      for (i = 0; i < n; i++) sum += t[i]
      N = 50304 * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C
      tps = B * T / (med * 1e-3)
      printf "result: %.1f ms/step, %.0f tokens/s, %.2f TFLOP/s, %s MiB used (llm.c d%s, batch %d, T %d; median of %d steps, mean %.1f ms)\n",
             med, tps, (6 * N + 6 * L * C * T) * tps * 1e-12, (mem != "" ? mem : "?"), d, B, T, n, sum / n
    }' "$log"
  rc=$?
  rm -f "$log"
  return $rc
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  -h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
