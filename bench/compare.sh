#!/usr/bin/env bash
# compare.sh: wgpt beside PyTorch on this machine's GPU, in one command.
# Run from a built tree (make all) on the GPU machine:
#   bench/compare.sh [--peak-tflops 67] [--tf32-peak 494.7] [--f16-peak 989.4]
#                    [--batch 8,16] [--steps 10] [--python python3]
#                    [--wgpt build/wgpt] [--out DIR] [--model "ARGS"] [--micro-args "ARGS"]
#                    [--rows LIST] [--no-compile] [--no-124m] [--no-350m] [--350m-batch 4]
#                    [--llmc DIR] [--llmc-bin PATH] [--llmc-args "ARGS"]
#                    [--no-step] [--no-micro] [--profile] [--generate] [--gen-args "ARGS"]
# 1. the training step, GPT-2 124M at each --batch (x 1024 tokens; default 8 and 16) and
#    GPT-2 350M (24 layers, 16 heads, 1024 channels) at --350m-batch (default 4): `wgpt bench`
#    in fp32 and f16, bench/pytorch_gpt2.py in fp32 (TF32 off), fp32 with TF32, bf16 autocast
#    eager and bf16 under torch.compile, and with --llmc DIR llm.c's CUDA trainer in bf16
#    (bench/llmc_gpt2.sh). --rows picks rows (comma list of wgpt_fp32, wgpt_f16, pytorch_fp32,
#    pytorch_tf32, pytorch_bf16, compile_bf16, llmc_bf16; default all; --no-compile drops
#    compile_bf16; --no-124m, --no-350m drop a size). A table of tokens/s, ms/step (median
#    step), TFLOP/s, MFU against the peak of each row's arithmetic (the H200's by default:
#    fp32 67, TF32 494.7, f16/bf16 989.4 dense), each program's own memory figure, the GPU's
#    peak memory in use while it ran (nvidia-smi), and wgpt over each row (wgpt fp32 beside
#    the fp32 rows, wgpt f16 beside the bf16 ones). A run that fails or refuses (wgpt f16
#    past its limits) is a row saying why.
# 2. `wgpt bench --micro` and pytorch_gpt2.py --matmul (fp32, TF32 off; and f16 beside
#    wgpt's _f16 rows) at the same shapes: ms and TFLOP/s per shape and pass, and the
#    ratio; the memory-bound rows.
# 3. with --profile: where the step's GPU time goes, wgpt f16 (`wgpt bench --profile`)
#    beside PyTorch bf16 eager (pytorch_gpt2.py --profile, torch.profiler) at the first
#    --batch: the matmuls, the attention and the rest, summed from each kernel's GPU time.
# 4. with --generate (alone: no step, no micro): `wgpt bench --generate` in fp32 and f16
#    beside bench/hf_generate.py (transformers' generate where it is installed, else a
#    plain-PyTorch KV-cache loop: its output says which) in fp32 and f16 at batch 1 and 8:
#    decode tokens/s and wgpt over the peer. --gen-args goes to the peer (e.g. "--prompt 128
#    --tokens 128 --runs 3"), its --prompt and --tokens to wgpt too; the model options
#    come from --model.
# --llmc DIR: llm.c (https://github.com/karpathy/llm.c, your clone; not part of wgpt):
# its train_gpt2cu is built from a patched copy in OUT/llmc-build with this machine's nvcc
# (bench/llmc_gpt2.sh build: bf16, no cuDNN, no NCCL/MPI, no managed-memory fallback) and
# run from scratch (-e d12, d24 for 350M) on random GPT-2 token shards in its format;
# --llmc-bin PATH reuses a train_gpt2cu that llmc_gpt2.sh built; --llmc-args passes options
# (e.g. "-r 0": no GELU recompute).
# --model passes the same model options to wgpt and PyTorch instead of GPT-2 124M (e.g.
# "--layers 2 --channels 128 --heads 4 --vocab 1000 --seq 64" for a quick try; no 350M and
# no llm.c rows then); --micro-args goes to `wgpt bench --micro` (e.g. "--micro-scale
# 0.5"). Without python3, torch or a CUDA device the PyTorch columns say why and wgpt's
# figures are still printed.
# Every raw output is kept in --out (default runs/compare-DATE). Plain bash + awk, no network.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

peak=67 tf32_peak=494.7 f16_peak=989.4 batch=8,16 steps=10 py=python3 wgpt=build/wgpt out="" model="" micro_args=""
do_step=1 do_micro=1 do_profile=0 do_generate=0 gen_args=""
all_rows=wgpt_fp32,wgpt_f16,pytorch_fp32,pytorch_tf32,pytorch_bf16,compile_bf16,llmc_bf16
rows_sel=$all_rows no_compile=0 do_124m=1 do_350m=1 batch_350m=4 llmc="" llmc_bin="" llmc_args=""
usage() { sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; }
need() { [ $# -ge 2 ] || { echo "compare.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --peak-tflops) need "$@"; peak=$2; shift 2 ;;
    --tf32-peak) need "$@"; tf32_peak=$2; shift 2 ;;
    --f16-peak) need "$@"; f16_peak=$2; shift 2 ;;
    --batch) need "$@"; batch=$2; shift 2 ;;
    --steps) need "$@"; steps=$2; shift 2 ;;
    --python) need "$@"; py=$2; shift 2 ;;
    --wgpt) need "$@"; wgpt=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --model) need "$@"; model=$2; shift 2 ;;
    --micro-args) need "$@"; micro_args=$2; shift 2 ;;
    --rows) need "$@"; rows_sel=$2; shift 2 ;;
    --no-compile) no_compile=1; shift ;;
    --no-124m) do_124m=0; shift ;;
    --no-350m) do_350m=0; shift ;;
    --350m-batch) need "$@"; batch_350m=$2; shift 2 ;;
    --llmc) need "$@"; llmc=$2; shift 2 ;;
    --llmc-bin) need "$@"; llmc_bin=$2; shift 2 ;;
    --llmc-args) need "$@"; llmc_args=$2; shift 2 ;;
    --no-step) do_step=0; shift ;;
    --no-micro) do_micro=0; shift ;;
    --profile) do_profile=1; shift ;;
    --generate) do_generate=1; do_step=0; do_micro=0; shift ;;
    --gen-args) need "$@"; gen_args=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in peak tf32_peak f16_peak; do
  case "${!v}" in ''|*[!0-9.]*|.) echo "compare.sh: --${v/_/-} needs a number, got '${!v}'" >&2; exit 2 ;; esac
done
case "$steps" in ''|*[!0-9]*|0) echo "compare.sh: --steps needs a positive integer, got '$steps'" >&2; exit 2 ;; esac
case "$batch_350m" in ''|*[!0-9]*|0) echo "compare.sh: --350m-batch needs a positive integer, got '$batch_350m'" >&2; exit 2 ;; esac
IFS=, read -r -a batches <<<"$batch"
[ ${#batches[@]} -gt 0 ] || { echo "compare.sh: --batch needs a comma list of positive integers, got '$batch'" >&2; exit 2; }
for b in "${batches[@]}"; do
  case "$b" in ''|*[!0-9]*|0) echo "compare.sh: --batch needs a comma list of positive integers, got '$batch'" >&2; exit 2 ;; esac
done
IFS=, read -r -a row_keys <<<"$rows_sel"
for k in "${row_keys[@]}"; do
  case ",$all_rows," in *",$k,"*) ;; *) echo "compare.sh: --rows: unknown row '$k' (of $all_rows)" >&2; exit 2 ;; esac
done
want() { case ",$rows_sel," in *",$1,"*) [ "$1" != compile_bf16 ] || [ $no_compile = 0 ] ;; *) return 1 ;; esac; }
if [ -n "$llmc" ] && [ -z "$llmc_bin" ] && ! [ -f "$llmc/train_gpt2.cu" ]; then
  echo "compare.sh: --llmc $llmc is not an llm.c checkout (no train_gpt2.cu): git clone https://github.com/karpathy/llm.c" >&2
  exit 2
fi
[ -z "$llmc_bin" ] || [ -x "$llmc_bin" ] || { echo "compare.sh: --llmc-bin $llmc_bin is not an executable" >&2; exit 2; }
if [ ! -x "$wgpt" ]; then
  echo "compare.sh: $wgpt is missing: build first (make all), or give --wgpt PATH" >&2
  exit 1
fi
# A GPU machine without a Vulkan loader (README): the runtime packages, if fetched.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 ' && [ -d third_party/gpu-runtime ]; then
  echo "no Vulkan loader installed: sourcing scripts/gpu-env.sh"
  # shellcheck source=/dev/null
  . scripts/gpu-env.sh
fi
out=${out:-runs/compare-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1

# --- what this is measured on ---------------------------------------------------------
echo "== compare.sh, $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
echo "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src kernels 2>/dev/null || echo ' (src/kernels modified)')"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1) (name, driver, memory)"
fi
echo "Dawn: $(sed -n 's/^WGPT_DAWN_NPM="\(.*\)"/\1/p' scripts/pins.sh 2>/dev/null) (scripts/pins.sh)"
echo "raw outputs: $out/"

# --- can PyTorch run? ---------------------------------------------------------------------
torch_why=""
if ! command -v "$py" >/dev/null 2>&1; then
  torch_why="$py not found"
else
  "$py" -c 'import torch' >/dev/null 2>&1 || torch_why="PyTorch is not importable by $py"
  if [ -z "$torch_why" ] && ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
      >/dev/null 2>&1; then
    torch_why="torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null) sees no CUDA device"
  fi
fi
[ -n "$torch_why" ] && echo "PyTorch: skipped ($torch_why); wgpt's figures only"
[ -z "$torch_why" ] && echo "PyTorch: $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"

# Runs a command into a file, echoing it; returns its status.
run() {
  local file=$1; shift
  echo "\$ $*" | tee "$file.cmd"
  "$@" >"$file" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && { echo "  failed (exit $rc); last lines of $file:"; tail -5 "$file" | sed 's/^/    /'; }
  return $rc
}

status=0
# --- 4. generation (--generate) -------------------------------------------------------------
if [ $do_generate = 1 ]; then
  echo
  echo "== generation: $wgpt bench --generate and bench/hf_generate.py (decode tokens/s)"
  # wgpt takes the peer's --prompt N and --tokens N as --gen-prompt N, --gen-tokens N (the rest is the peer's)
  wgen=$(echo "$gen_args" | awk '{for (i = 1; i < NF; i++) if ($i == "--prompt" || $i == "--tokens")
                                     printf "--gen-%s %s ", substr($i, 3), $(i + 1)}')
  grows="$out/gen_rows.txt"
  : >"$grows"
  for prec in fp32 f16; do
    # shellcheck disable=SC2086
    run "$out/wgpt_generate_$prec.txt" "$wgpt" bench --generate --precision "$prec" $model $wgen || status=1
    grep -E '^(adapter|model|batch)' "$out/wgpt_generate_$prec.txt" | sed 's/^/  /'
    awk -v p="$prec" '/^batch 1:/ {b1 = $13} /^batch 8:/ {b8 = $13}
         END {print "wgpt_" p, (b1 != "" ? b1 : "-"), (b8 != "" ? b8 : "-")}' "$out/wgpt_generate_$prec.txt" >>"$grows"
    if [ -z "$torch_why" ]; then
      for b in 1 8; do
        # shellcheck disable=SC2086
        run "$out/peer_generate_${prec}_b$b.txt" "$py" bench/hf_generate.py --dtype "$prec" --batch "$b" $model $gen_args
        grep -E '^(torch|result)' "$out/peer_generate_${prec}_b$b.txt" | sed 's/^/  /'
      done
      awk -v p="$prec" 'FNR == 1 {f++} /^result:/ {v[f] = $3}
           END {print "peer_" p, (v[1] != "" ? v[1] : "-"), (v[2] != "" ? v[2] : "-")}' \
        "$out/peer_generate_${prec}_b1.txt" "$out/peer_generate_${prec}_b8.txt" >>"$grows"
    fi
  done
  echo
  awk '{r[$1] = $0; b1[$1] = $2; b8[$1] = $3}
       END {
         printf "%-12s %14s %14s\n", "decode", "batch 1 tok/s", "batch 8 tok/s"
         for (i = 1; i <= 4; i++) {
           k = (i <= 2 ? "wgpt_" : "peer_") (i % 2 ? "fp32" : "f16")
           if (k in r) printf "%-12s %14s %14s\n", k, b1[k], b8[k]
         }
         for (i = 1; i <= 2; i++) {
           p = (i == 1 ? "fp32" : "f16")
           if (("peer_" p) in r && b1["peer_" p] > 0 && b1["wgpt_" p] > 0)
             printf "wgpt/peer %s: %.2fx at batch 1, %s at batch 8\n", p, b1["wgpt_" p] / b1["peer_" p],
                    (b8["peer_" p] > 0 && b8["wgpt_" p] > 0 ? sprintf("%.2fx", b8["wgpt_" p] / b8["peer_" p]) : "-")
         }
       }' "$grows"
fi

# --- 1. the training step -------------------------------------------------------------
# The GPU's memory in use (MiB, nvidia-smi, GPU 0) every 100 ms while a row runs: its peak
# over the figure just before it started.
smi_pid="" smi_base=""
smi_start() {
  smi_pid="" smi_base=""
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  smi_base=$(nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
  nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null &
  smi_pid=$!
}
smi_stop() {  # prints the peak over the base, or -
  [ -n "$smi_pid" ] || { echo -; return; }
  kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null
  awk -v b="$smi_base" '$1 ~ /^[0-9]+$/ && $1 > m { m = $1 } END { print (m != "" && b ~ /^[0-9]+$/) ? m - b : "-" }' "$1"
}
# why FILE: the line of a failed run's output that says why (the program's own message, an
# error line, else its last), tab-free.
why() {
  { grep -E '^(wgpt[a-z ]*|llmc_gpt2\.sh|pytorch_gpt2\.py): ' "$1" | tail -1
    grep -iE 'error|refus|exceed|out of memory|not supported|failed' "$1" | tail -1; tail -1 "$1"; } 2>/dev/null |
    head -1 | tr '\t' ' ' | cut -c1-170
}

status=0
if [ $do_step = 1 ]; then
  echo
  echo "== training step: $wgpt bench, bench/pytorch_gpt2.py$([ -n "$llmc$llmc_bin" ] && want llmc_bf16 && echo ', llm.c train_gpt2cu')"
  rows="$out/step_rows.txt"
  : >"$rows"
  # the shapes: "name|wgpt and PyTorch options|llm.c depth|batches"
  shapes=()
  [ $do_124m = 1 ] && shapes=("124m|$model|12|${batches[*]}")
  [ -n "$model" ] && shapes=("custom|$model||${batches[*]}")
  [ $do_350m = 1 ] && [ -z "$model" ] && shapes+=("350m|--layers 24 --heads 16 --channels 1024|24|$batch_350m")
  llmc_why=""
  if want llmc_bf16 && [ -z "$llmc$llmc_bin" ]; then
    llmc_why="no --llmc DIR"
  elif want llmc_bf16 && [ -z "$llmc_bin" ]; then
    run "$out/llmc_build.txt" bench/llmc_gpt2.sh build "$llmc" "$(cd "$out" && pwd)/llmc-build" &&
      llmc_bin="$(cd "$out" && pwd)/llmc-build/train_gpt2cu" || llmc_why="its build failed: $out/llmc_build.txt"
    grep -E '^(llm.c:|  [^ ]*nvcc )' "$out/llmc_build.txt" | sed 's/^/  /'
  fi
  [ -n "$model" ] && want llmc_bf16 && llmc_why="--model is not a GPT-2 size"
  # row: key, shape, batch, tokens/s, ms/step, TFLOP/s, own memory MiB, GPU memory MiB, why (tab-separated)
  add_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }
  for shape in "${shapes[@]}"; do
    IFS='|' read -r sname sopts sdepth sbatches <<<"$shape"
    for b in $sbatches; do
      tag="${sname}_b$b"
      for key in wgpt_fp32 wgpt_f16 pytorch_fp32 pytorch_tf32 pytorch_bf16 llmc_bf16 compile_bf16; do
        want "$key" || continue
        f="$out/${key}_$tag.txt"
        case "$key" in
          wgpt_*)
            smi_start "$f.smi"
            # shellcheck disable=SC2086  # $sopts is a list of options on purpose
            run "$f" "$wgpt" bench --precision "${key#wgpt_}" --batch "$b" --steps "$steps" $sopts ||
              { [ "$key" = wgpt_fp32 ] && status=1; }  # f16 needs shader-f16 and may refuse a size: a row says why
            gpu=$(smi_stop "$f.smi")
            grep -E '^(adapter|model):' "$f" | sed 's/^/  /'
            if grep -q '^result:' "$f"; then
              read -r tps ms tf < <(awk '/^result:/ {print $4, $2, $6}' "$f")
              own=$(awk '/^GPU memory allocated:/ {m = $4} END {print (m != "" ? m : "-")}' "$f")
              add_row "$key" "$sname" "$b" "$tps" "$ms" "$tf" "$own" "$gpu" ""
            else add_row "$key" "$sname" "$b" - - - - "$gpu" "$(why "$f")"; fi ;;
          pytorch_*|compile_*)
            [ -n "$torch_why" ] && { add_row "$key" "$sname" "$b" - - - - - "$torch_why"; continue; }
            mode=${key#*_} comp=""
            [ "${key%%_*}" = compile ] && comp=--compile
            smi_start "$f.smi"
            # shellcheck disable=SC2086
            run "$f" "$py" bench/pytorch_gpt2.py --mode "$mode" --batch "$b" --steps "$steps" $sopts $comp
            gpu=$(smi_stop "$f.smi")
            if grep -q '^result:' "$f"; then
              read -r tps ms tf own < <(awk '/^result:/ {print $4, $2, $6, $8}' "$f")
              add_row "$key" "$sname" "$b" "$tps" "$ms" "$tf" "$own" "$gpu" ""
            else add_row "$key" "$sname" "$b" - - - - "$gpu" "$(why "$f")"; fi ;;
          llmc_bf16)
            [ -n "$llmc_why" ] && { add_row "$key" "$sname" "$b" - - - - - "$llmc_why"; continue; }
            smi_start "$f.smi"
            run "$f" bench/llmc_gpt2.sh run "$llmc_bin" --depth "$sdepth" --batch "$b" --steps "$steps" \
              --data "$out/llmc-data" --args "$llmc_args"
            gpu=$(smi_stop "$f.smi")
            if grep -q '^result:' "$f"; then
              read -r tps ms tf own < <(awk '/^result:/ {print $4, $2, $6, $8}' "$f")
              add_row "$key" "$sname" "$b" "$tps" "$ms" "$tf" "$own" "$gpu" ""
            else add_row "$key" "$sname" "$b" - - - - "$gpu" "$(why "$f")"; fi ;;
        esac
      done
    done
  done
  echo
  awk -F'\t' -v peak="$peak" -v tf32="$tf32_peak" -v f16="$f16_peak" '
    BEGIN {
      label["wgpt_fp32"] = "wgpt, fp32"
      label["wgpt_f16"] = "wgpt, f16 (loss scaling)"
      label["pytorch_fp32"] = "PyTorch fp32, TF32 off"
      label["pytorch_tf32"] = "PyTorch fp32, TF32 on"
      label["pytorch_bf16"] = "PyTorch bf16 autocast"
      label["compile_bf16"] = "PyTorch bf16, compiled"
      label["llmc_bf16"] = "llm.c bf16"
      # the peak of what each row multiplies on, and the wgpt row it is set beside
      pk["wgpt_fp32"] = peak; pk["pytorch_fp32"] = peak; pk["pytorch_tf32"] = tf32
      pk["wgpt_f16"] = f16; pk["pytorch_bf16"] = f16; pk["compile_bf16"] = f16; pk["llmc_bf16"] = f16
      peer["pytorch_fp32"] = "wgpt_fp32"; peer["pytorch_tf32"] = "wgpt_fp32"
      peer["pytorch_bf16"] = "wgpt_f16"; peer["compile_bf16"] = "wgpt_f16"; peer["llmc_bf16"] = "wgpt_f16"
      own["wgpt_fp32"] = "alloc"; own["wgpt_f16"] = "alloc"; own["llmc_bf16"] = "used"
    }
    { n++; key[n] = $1; shp[n] = $2; bat[n] = $3; tps[n] = $4; ms[n] = $5; tf[n] = $6; mem[n] = $7; gpu[n] = $8
      why[n] = $9; at[$1 " " $2 " " $3] = n }
    END {
      printf "%-24s %-6s %5s %10s %9s %8s %7s %12s %8s %9s\n", "run", "model", "batch", "tokens/s", "ms/step", "TFLOP/s",
             "MFU", "own MiB", "GPU MiB", "wgpt/this"
      for (i = 1; i <= n; i++) {
        k = key[i]
        if (i > 1 && (shp[i] != shp[i - 1] || bat[i] != bat[i - 1])) print ""
        if (tps[i] == "-") {
          printf "%-24s %-6s %5s %s\n", label[k], shp[i], bat[i], "none: " why[i] (gpu[i] != "-" ? " (GPU " gpu[i] " MiB)" : "")
          continue
        }
        w = at[peer[k] " " shp[i] " " bat[i]]
        ratio = (w != "" && tps[w] > 0 && tps[i] > 0) ? sprintf("%.2f", tps[w] / tps[i]) : "-"
        printf "%-24s %-6s %5s %10.0f %9.1f %8.2f %6.1f%% %12s %8s %9s\n", label[k], shp[i], bat[i], tps[i], ms[i],
               tf[i], (pk[k] > 0 ? 100 * tf[i] / pk[k] : 0), (mem[i] ~ /^[0-9.]+$/ ? sprintf("%.0f %s", mem[i], (k in own) ? own[k] : "max") : "-"),
               gpu[i], ratio
      }
      printf "MFU: TFLOP/s (6N + 6LCT FLOPs a token) over the peak of the row'"'"'s arithmetic: fp32 %s, TF32 %s,\n", peak, tf32
      printf "f16/bf16 %s TFLOP/s dense (--peak-tflops, --tf32-peak, --f16-peak). wgpt/this: tokens/s of wgpt fp32\n", f16
      print "over the fp32 rows, of wgpt f16 over the bf16 ones, same model and batch (above 1: wgpt is faster)."
      print "own MiB, each program'"'"'s own figure: wgpt (alloc), every storage buffer it allocated at its peak;"
      print "PyTorch (max), torch.cuda.max_memory_allocated; llm.c (used), cudaMemGetInfo'"'"'s used memory once it has"
      print "allocated everything (CUDA context included). GPU MiB: the GPU'"'"'s memory in use at its peak while the"
      print "row ran, over the figure before it (nvidia-smi every 100 ms: driver, context and caches included)."
      print "llm.c: train_gpt2cu (bench/llmc_gpt2.sh), from scratch on random tokens; its step times are its own"
      print "(CUDA events); the median after 2 warm-up steps."
    }' "$rows"
  # wgpt's peak memory split by kind, where its bench prints one
  for f in "$out"/wgpt_*_b*.txt; do
    [ -f "$f" ] && grep -h '^GPU memory at its peak' "$f" | sed "s|^GPU memory at its peak:|$(basename "$f" .txt) peak:|"
  done
fi

# --- 2. micro-benchmarks -----------------------------------------------------------------
if [ $do_micro = 1 ]; then
  echo
  echo "== micro-benchmarks: $wgpt bench --micro and bench/pytorch_gpt2.py --matmul (fp32, TF32 off)"
  # shellcheck disable=SC2086
  run "$out/wgpt_micro.txt" "$wgpt" bench --micro $micro_args || status=1
  grep -E '^(adapter|driver|timing|scale|GPU memory)' "$out/wgpt_micro.txt" | sed 's/^/  /'
  rows_n=$(sed -n 's/.*matmul rows N = \([0-9]*\).*/\1/p' "$out/wgpt_micro.txt")
  arr_mib=$(sed -n 's/.*memory-bound arrays \([0-9.]*\) MiB.*/\1/p' "$out/wgpt_micro.txt")
  : >"$out/pytorch_matmul.txt"
  if [ -z "$torch_why" ] && [ -n "$rows_n" ]; then
    copy_floats=$(awk -v m="${arr_mib:-256}" 'BEGIN {printf "%d", m * 1048576 / 4}')
    run "$out/pytorch_matmul.txt" "$py" bench/pytorch_gpt2.py --matmul --mode fp32 --rows "$rows_n" \
      --copy-floats "$copy_floats"
    # the peers of wgpt's subgroup-matrix rows (pass names ending in _f16), where it printed any
    if grep -q '^matmul .*_f16 ' "$out/wgpt_micro.txt"; then
      run "$out/pytorch_matmul_f16.txt" "$py" bench/pytorch_gpt2.py --matmul --mode f16 --rows "$rows_n" \
        --copy-floats "$copy_floats" && grep '^matmul' "$out/pytorch_matmul_f16.txt" >>"$out/pytorch_matmul.txt"
    fi
  fi
  echo
  awk -v why="$torch_why" '
    FILENAME == ARGV[1] { file = 1 }
    FILENAME == ARGV[2] { file = 2 }
    file == 1 && $1 == "matmul" { k = $2 " " $6; w[k] = $7; wt[k] = $8; shape[k] = $3 " " $4 " " $5; order[n++] = k }
    file == 1 && $1 == "memory" { mem[nm++] = $0 }
    file == 2 && $1 == "matmul" { p[$2 " " $6] = $7; pt[$2 " " $6] = $8; pshape[$2 " " $6] = $3 " " $4 " " $5 }
    file == 2 && $1 == "memory" && $2 == "copy" { pcopy = $5 }
    END {
      printf "%-8s %-11s %6s %6s %6s | %10s %8s | %10s %8s | %12s\n", "shape", "pass", "N", "C", "OC", "wgpt ms",
             "TFLOP/s", "torch ms", "TFLOP/s", "wgpt/torch"
      for (i = 0; i < n; i++) {
        k = order[i]; split(k, a, " "); split(shape[k], s, " ")
        pm = "-"; ptf = "-"; r = "-"
        # the wall-clock fallback times both backward passes together
        if (a[2] == "backward" && ((a[1] " bwd_input") in p)) {
          q = p[a[1] " bwd_input"] + p[a[1] " bwd_weight"]; pk = a[1] " bwd_input"
          pm = sprintf("%.3f", q); ptf = sprintf("%.2f", 4 * s[1] * s[2] * s[3] / (q * 1e-3) * 1e-12)
        } else if (k in p) { pm = p[k]; ptf = pt[k]; pk = k }
        if (pm != "-" && pshape[pk] != shape[k]) { pm = "shape?"; ptf = "-" }
        else if (pm != "-" && w[k] > 0) r = sprintf("%.2f", pm / w[k])
        printf "%-8s %-11s %6s %6s %6s | %10s %8s | %10s %8s | %12s\n", a[1], a[2], s[1], s[2], s[3], w[k], wt[k],
               pm, ptf, r
      }
      if (n == 0) print "wgpt bench --micro gave no matmul rows (see its output above)"
      for (k in p) if (p[k] != "" && (k in pshape) && (k in shape) && pshape[k] != shape[k]) mism = 1
      if (mism) print "shape?: the two sides ran different shapes (wgpt scaled by --micro-width on a CPU adapter); no ratio."
      print "wgpt/torch: speed of wgpt relative to PyTorch (torch ms / wgpt ms; 1 = as fast, 0.25 = 4x slower)."
      if (why != "") print "PyTorch columns: none (" why ")"
      print ""
      printf "%-16s %10s %10s %9s %8s\n", "memory kernel", "MB moved", "ms", "GB/s", "of copy"
      for (i = 0; i < nm; i++) { split(mem[i], m, " "); printf "%-16s %10s %10s %9s %8s\n", m[2], m[3], m[4], m[5], m[6] }
      if (pcopy != "") {
        wc = 0; for (i = 0; i < nm; i++) { split(mem[i], m, " "); if (m[2] == "copy") wc = m[5] }
        printf "PyTorch copy_ of the same size: %s GB/s; wgpt copy / PyTorch copy: %.2f\n", pcopy, wc / pcopy
      }
    }' "$out/wgpt_micro.txt" "$out/pytorch_matmul.txt"
fi

# --- 3. where the step's GPU time goes ----------------------------------------------------
if [ $do_profile = 1 ]; then
  echo
  echo "== where the step's GPU time goes: $wgpt bench --profile (f16) and bench/pytorch_gpt2.py --profile (bf16)"
  # shellcheck disable=SC2086
  run "$out/wgpt_profile_f16.txt" "$wgpt" bench --precision f16 --batch "${batches[0]}" --steps 2 --profile $model || status=1
  : >"$out/pytorch_profile_bf16.txt"
  # shellcheck disable=SC2086
  [ -z "$torch_why" ] && run "$out/pytorch_profile_bf16.txt" "$py" bench/pytorch_gpt2.py --mode bf16 --batch "${batches[0]}" \
    --steps 2 --profile $model
  echo
  # both print "by kind: matmuls A ms (n calls), attention B ms (n calls), the rest C ms (n calls)"
  awk -v why="$torch_why" '
    /by kind: matmuls/ {
      f = FILENAME == ARGV[1] ? 1 : 2
      split($0, v, /[^0-9.]+/)
      mm[f] = v[2]; at[f] = v[4]; re[f] = v[6]; tot[f] = v[2] + v[4] + v[6]; calls[f] = v[3] + v[5] + v[7]; got[f] = 1
    }
    END {
      lab[1] = "wgpt f16"; lab[2] = "PyTorch bf16"
      printf "%-16s %12s %10s %10s %10s %10s\n", "GPU ms a step", "all", "matmuls", "attention", "the rest", "kernels"
      for (f = 1; f <= 2; f++) {
        if (!got[f]) { printf "%-16s %s\n", lab[f], (f == 2 && why != "" ? "none (" why ")" : "no profile: see its output above"); continue }
        printf "%-16s %12.2f %10.2f %10.2f %10.2f %10d\n", lab[f], tot[f], mm[f], at[f], re[f], calls[f]
      }
      if (got[1] && got[2] && tot[1] > 0 && mm[1] > 0 && at[1] > 0 && re[1] > 0)
        printf "%-16s %12.2f %10.2f %10.2f %10.2f\n", "wgpt/PyTorch", tot[2] / tot[1], mm[2] / mm[1], at[2] / at[1], re[2] / re[1]
      print "GPU time of the kernels alone (no launch gaps; wgpt times each dispatch in a pass of its own, its whole"
      print "step a little longer than without --profile). wgpt/PyTorch: PyTorch ms / wgpt ms (1 = as fast)."
      print "The rest holds wgpt'"'"'s f16 casts and transposes, which PyTorch'"'"'s matmuls do not need."
    }' "$out/wgpt_profile_f16.txt" "$out/pytorch_profile_bf16.txt"
fi
echo
echo "raw outputs and the exact commands: $out/"
exit $status
