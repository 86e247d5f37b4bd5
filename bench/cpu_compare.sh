#!/usr/bin/env bash
# cpu_compare.sh: the CPU path. wgpt's training step on Mesa lavapipe beside the plain C
# reference (tests/ref, as build/bench_ref_step: single-threaded, the flags it prints) on
# this machine, in one command. Run from a built tree (make all):
#   bench/cpu_compare.sh [--steps N] [--large-steps N] [--no-large] [--out DIR]
#                        [--wgpt build/wgpt] [--ref build/bench_ref_step]
#   bench/cpu_compare.sh --llmc DIR [--rounds R] [--threads N] [--llmc-steps N]
#                        [--shapes small,middle,124m] [--out DIR] [--wgpt build/wgpt]
#                        [--also-icd third_party/lavapipe/lvp_icd.json]
# Both programs run the same step (same model options, parameters, random tokens;
# forward, cross-entropy, backward, clipping, AdamW), one after the other: 2 warm-up
# steps, then the mean of the timed steps. Models: "small", the demo's (3 layers,
# 4 heads, 96 channels, T 64, batch 8, vocab 256; --steps, default 20) and "large"
# (4 layers, 4 heads, 256 channels, T 128, batch 8, vocab 256; --large-steps, default 4).
# Prints a header (date, CPU, nproc, adapter, commit), a row per program and model, and
# ref/wgpt = reference ms/step over wgpt ms/step (above 1: wgpt is faster). "cores" is
# the process's CPU time over its wall time (warm-up and set-up included): lavapipe
# uses every core, the reference one. "loss" is the last step's; the two must agree.
# About 50 s on a 2-core machine. Raw outputs and this summary: --out (default runs/cpu-compare-DATE).
# --llmc DIR: instead, wgpt on lavapipe beside llm.c's CPU trainer (train_gpt2.c of the
# llm.c checkout DIR, which is not part of wgpt). DIR is only read: train_gpt2.c, llmc/
# and its Makefile are copied to OUT/llmc-build, and train_gpt2.c is PATCHED THERE (sed
# on the copy): B, T and the step count come from LLMC_B, LLMC_T, LLMC_STEPS instead of
# the hard-coded 4, 64, 41, and its validation and sampling blocks (outside its timed
# region, but minutes of forward passes at 124M) are off. Built by `make train_gpt2` in
# that copy with llm.c's own flags (-Ofast, -march=native where accepted, OpenMP where
# found). For each shape: random uint16 token shards in llm.c's format (magic 20240520)
# and a fresh model: `wgpt train` 1 step on them, `wgpt export --format llmc` (magic
# 20240326, version 3, fp32; maxT = the shape's T). Then R rounds (--rounds, default 3),
# each runs `wgpt bench` and llm.c one after the other (the order alternates), with
# LP_NUM_THREADS / OMP_NUM_THREADS = --threads (default nproc); each run: 2 warm-up steps,
# then --llmc-steps timed (default 5), median of those. Printed: the median over rounds
# of ms/step, tokens/s, and llmc/wgpt = llm.c ms/step over wgpt's (above 1: wgpt faster).
# Shapes: small (the demo's: L 3, C 96, H 4, T 64, B 8, V 256: llm.c pads to Vp
# as wgpt does), middle (L 6, C 384, H 6, T 256, B 4, V 256), 124m (GPT-2 124M: L 12,
# C 768, H 12, V 50257 padded to 50304, T 64, B 4). The steps differ a little: wgpt
# clips the gradient norm and uses weight decay; llm.c's loop does neither (lr 1e-4).
# --also-icd FILE: each round also runs `wgpt bench` with VK_ICD_FILENAMES=FILE (another
# Vulkan driver, e.g. wgpt's tuned lavapipe from `make lavapipe`), shown as "wgpt*", so
# both drivers are measured side by side in the same rounds.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

steps=20 large_steps=4 do_large=1 out="" wgpt=build/wgpt ref=build/bench_ref_step
llmc="" rounds=3 threads=$(nproc) llmc_steps=5 shapes=small,middle,124m icd2=""
usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; }
need() { [ $# -ge 2 ] || { echo "cpu_compare.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) need "$@"; steps=$2; shift 2 ;;
    --large-steps) need "$@"; large_steps=$2; shift 2 ;;
    --no-large) do_large=0; shift ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --wgpt) need "$@"; wgpt=$2; shift 2 ;;
    --ref) need "$@"; ref=$2; shift 2 ;;
    --llmc) need "$@"; llmc=$2; shift 2 ;;
    --rounds) need "$@"; rounds=$2; shift 2 ;;
    --threads) need "$@"; threads=$2; shift 2 ;;
    --llmc-steps) need "$@"; llmc_steps=$2; shift 2 ;;
    --shapes) need "$@"; shapes=$2; shift 2 ;;
    --also-icd) need "$@"; icd2=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cpu_compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in steps large_steps rounds threads llmc_steps; do
  case "${!v}" in ''|*[!0-9]*|0) echo "cpu_compare.sh: --${v/_/-} needs a positive integer, got '${!v}'" >&2; exit 2 ;; esac
done
[ -n "$llmc" ] && ref=$wgpt  # the C reference is not run with --llmc
[ -z "$icd2" ] || [ -n "$llmc" ] || { echo "cpu_compare.sh: --also-icd goes with --llmc" >&2; exit 2; }
[ -z "$icd2" ] || [ -f "$icd2" ] ||
  { echo "cpu_compare.sh: --also-icd $icd2: no such file (make lavapipe builds third_party/lavapipe/lvp_icd.json)" >&2; exit 1; }
[ -z "$icd2" ] || icd2=$(cd "$(dirname "$icd2")" && pwd)/$(basename "$icd2")  # the driver loader wants it absolute
for b in "$wgpt" "$ref"; do
  [ -x "$b" ] || { echo "cpu_compare.sh: $b is missing: build first (make all)" >&2; exit 1; }
done
out=${out:-runs/cpu-compare-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
exec > >(tee "$out/summary.txt") 2>&1  # what it prints, kept beside the raw outputs

# --- what this is measured on ---------------------------------------------------------
echo "== cpu_compare.sh, $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src kernels tests/ref bench/ref_step.c 2>/dev/null || echo ' (src/kernels/tests/ref modified)')"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), nproc $(nproc)"
"$wgpt" info >"$out/wgpt_info.txt" 2>&1
echo "wgpt $(grep -m1 '^adapter:' "$out/wgpt_info.txt" || echo 'adapter: ? (wgpt info failed; see its output)')"
grep -m1 '^vendor:' "$out/wgpt_info.txt" | sed 's/^/     /'
if [ -n "$icd2" ]; then
  VK_ICD_FILENAMES=$icd2 "$wgpt" info >"$out/wgpt_icd_info.txt" 2>&1
  echo "wgpt* (VK_ICD_FILENAMES=$icd2) $(grep -m1 '^adapter:' "$out/wgpt_icd_info.txt" || echo 'adapter: ? (wgpt info failed)')"
  grep -m1 '^vendor:' "$out/wgpt_icd_info.txt" | sed 's/^/     /'
  grep -q '^vendor:' "$out/wgpt_icd_info.txt" || { echo "cpu_compare.sh: wgpt finds no adapter with VK_ICD_FILENAMES=$icd2: see $out/wgpt_icd_info.txt" >&2; exit 1; }
fi
[ -z "$llmc" ] && echo "reference $(grep -m1 '^compiled with:' <("$ref" --steps 1 --layers 1 --heads 1 --channels 8 --seq 2 --batch 1 --vocab 8))"
echo "raw outputs: $out/"
# Other work on the machine slows both sides unevenly (lavapipe wants every core).
# busy: the share of all cores in use over one second, from /proc/stat.
busy() {
  local a b
  a=$(head -1 /proc/stat); sleep 1; b=$(head -1 /proc/stat)
  echo "$a $b" | awk '{ for (i = 2; i <= 11; i++) { t1 += $i; t2 += $(i + 11) }
                        idle = ($(16) + $(17)) - ($5 + $6); printf "%.0f", 100 * (1 - idle / (t2 - t1)) }'
}
b=$(busy)
echo "CPU busy before: $b% of all cores (over 1 s)"
[ "$b" -gt 20 ] && echo "WARNING: the machine is busy: the figures will be low and uneven; rerun when it is idle"

# --- --llmc: wgpt on lavapipe beside llm.c's train_gpt2.c ------------------------------
if [ -n "$llmc" ]; then
  [ -f "$llmc/train_gpt2.c" ] && [ -f "$llmc/Makefile" ] && [ -d "$llmc/llmc" ] ||
    { echo "cpu_compare.sh: $llmc is not an llm.c checkout (train_gpt2.c, llmc/, Makefile)" >&2; exit 1; }
  echo "llm.c: $llmc at $(git -C "$llmc" rev-parse --short HEAD 2>/dev/null || echo '?'); threads: $threads" \
       "(OMP_NUM_THREADS for llm.c, LP_NUM_THREADS for lavapipe); rounds: $rounds"
  status=0
  bdir="$(cd "$out" && pwd)/llmc-build"
  mkdir -p "$bdir" && cp -r "$llmc/train_gpt2.c" "$llmc/Makefile" "$llmc/llmc" "$bdir/" || exit 1
  # The patch (on the copy): B, T, steps from the environment; no validation, no sampling.
  sed -i -e 's/^\( *\)int B = 4;.*/\1int B = atoi(getenv("LLMC_B"));/' \
         -e 's/^\( *\)int T = 64;.*/\1int T = atoi(getenv("LLMC_T"));/' \
         -e 's/step <= 40; step++/step < atoi(getenv("LLMC_STEPS")); step++/' \
         -e 's/if (step % 10 == 0) {/if (0) { \/\/ cpu_compare.sh: no validation/' \
         -e 's/if (step > 0 \&\& step % 20 == 0) {/if (0) { \/\/ cpu_compare.sh: no sampling/' "$bdir/train_gpt2.c"
  n=$(grep -c -e 'getenv("LLMC_' -e 'cpu_compare.sh: no' "$bdir/train_gpt2.c")
  [ "$n" = 5 ] || { echo "cpu_compare.sh: patching train_gpt2.c changed $n of 5 places: a newer llm.c?" >&2; exit 1; }
  diff -u "$llmc/train_gpt2.c" "$bdir/train_gpt2.c" >"$out/llmc-train_gpt2.patch"
  echo "\$ make -C $bdir train_gpt2" | tee "$out/llmc-build.txt.cmd"
  make -C "$bdir" train_gpt2 >"$out/llmc-build.txt" 2>&1 ||
    { echo "llm.c's build failed; last lines:"; tail -5 "$out/llmc-build.txt" | sed 's/^/    /'; exit 1; }
  echo "llm.c built: $(grep -m1 -E '^(cc|gcc|clang)' "$out/llmc-build.txt")"
  grep -h -E 'OpenMP' "$out/llmc-build.txt" | sed 's/^/  /'

  # shard FILE NTOK V SEED: llm.c's token file (256 int32 header, uint16 tokens), random tokens.
  shard() {
    LC_ALL=C awk -v n="$2" -v v="$3" -v seed="$4" '
      function i32(x) { printf "%c%c%c%c", x % 256, int(x / 256) % 256, int(x / 65536) % 256, int(x / 16777216) % 256 }
      BEGIN { i32(20240520); i32(1); i32(n); for (i = 3; i < 256; i++) i32(0)
              s = seed; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; t = int(s / 65536) % v
                                                   printf "%c%c", t % 256, int(t / 256) }
      }' >"$1"
  }
  lrows="$out/llmc-rows.txt"; : >"$lrows"
  IFS=, read -r -a shape_list <<<"$shapes"
  for shape in "${shape_list[@]}"; do
    case "$shape" in
      small) L=3 C=96 H=4 T=64 B=8 V=256 tk=bytes ;;
      middle) L=6 C=384 H=6 T=256 B=4 V=256 tk=bytes ;;
      124m) L=12 C=768 H=12 T=64 B=4 V=50257 tk=gpt2 ;;
      *) echo "cpu_compare.sh: unknown shape '$shape' (small, middle, 124m)" >&2; status=1; continue ;;
    esac
    opts=(--layers $L --heads $H --channels $C --seq $T --batch $B --vocab $V)
    echo
    echo "== $shape: ${opts[*]}"
    sd="$out/llmc-$shape"; mkdir -p "$sd/dev/data/tinyshakespeare"
    ntok=$((B * T * 40 + 1))
    shard "$sd/dev/data/tinyshakespeare/tiny_shakespeare_train.bin" $ntok $V 1
    shard "$sd/dev/data/tinyshakespeare/tiny_shakespeare_val.bin" $((B * T * 8 + 1)) $V 2
    # A fresh model of the shape (wgpt's initialisation, one step), in llm.c's format.
    echo "\$ $wgpt train --data $sd/dev/data/tinyshakespeare/tiny_shakespeare_train.bin ${opts[*]:0:10} --tokenizer $tk --steps 1 ..." |
      tee "$sd/init.txt.cmd"
    LP_NUM_THREADS=$threads "$wgpt" train --data "$sd/dev/data/tinyshakespeare/tiny_shakespeare_train.bin" \
      --tokenizer $tk --out "$sd/init" --resume none --precision fp32 "${opts[@]:0:10}" --steps 1 --warmup 0 \
      --val-every 0 --checkpoint-every 1 --quiet >"$sd/init.txt" 2>&1 &&
    "$wgpt" export "$sd/init/latest.ckpt" --format llmc --out "$sd/gpt2_124M.bin" >>"$sd/init.txt" 2>&1 ||
      { echo "  making the model failed; last lines of $sd/init.txt:"; tail -5 "$sd/init.txt" | sed 's/^/    /'
        status=1; continue; }
    echo "  llm.c checkpoint: $sd/gpt2_124M.bin, header $(od -An -t d4 -N 32 "$sd/gpt2_124M.bin" | tr -s " \n" "  ")(magic version maxT V L NH C Vp)"
    total=$((llmc_steps + 2))
    for r in $(seq 1 "$rounds"); do
      # the order rotates, so no one always runs first (or right after the other's heat)
      order="wgpt llmc"; [ $((r % 2)) = 0 ] && order="llmc wgpt"
      if [ -n "$icd2" ]; then
        case $((r % 3)) in 1) order="wgpt wgptx llmc" ;; 2) order="llmc wgpt wgptx" ;; 0) order="wgptx llmc wgpt" ;; esac
      fi
      for who in $order; do
        f="$sd/${who}_$r.txt"
        if [ $who != llmc ]; then
          drv=(); [ $who = wgptx ] && drv=("VK_ICD_FILENAMES=$icd2")  # wgpt*: the other driver
          echo "\$ ${drv[*]}${drv:+ }LP_NUM_THREADS=$threads $wgpt bench --precision fp32 --steps $llmc_steps ${opts[*]}" >"$f.cmd"
          env "${drv[@]}" LP_NUM_THREADS="$threads" "$wgpt" bench --precision fp32 --steps "$llmc_steps" "${opts[@]}" >"$f" 2>&1
        else
          echo "\$ cd $sd && OMP_NUM_THREADS=$threads LLMC_B=$B LLMC_T=$T LLMC_STEPS=$total $bdir/train_gpt2" >"$f.cmd"
          (cd "$sd" && OMP_NUM_THREADS=$threads LLMC_B=$B LLMC_T=$T LLMC_STEPS=$total "$bdir/train_gpt2") >"$f" 2>&1
        fi
        # median of the timed steps: wgpt's "step i: ... ms" lines after warm-up, llm.c's steps 2..
        awk -v who=$who -v shape=$shape -v r=$r -v tok=$((B * T)) '
          who ~ /^wgpt/ && /^step / && !/warm-up/ { t[k++] = $(NF - 1) }
          who == "llmc" && /^step [0-9]+: train loss/ { s = $2 + 0; if (s >= 2) { x = $NF; sub(/\(took /, "", x); v = $(NF - 1); t[k++] = v } }
          END {
            for (i = 0; i < k; i++) for (j = i + 1; j < k; j++) if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
            if (k == 0) { print "  " who " round " r ": no timed steps (see " FILENAME ")"; exit 1 }
            med = k % 2 ? t[(k - 1) / 2] : (t[k / 2 - 1] + t[k / 2]) / 2
            printf "%s %s %d %.1f %d\n", shape, who, r, med, tok
          }' "$f" >>"$lrows" || { tail -3 "$f" | sed 's/^/    /'; status=1; }
        tail -1 "$lrows" | awk -v w=$who '$2 == w { printf "  round %s %-5s %9.1f ms/step (median of the timed steps)\n", $3, ($2 == "wgptx") ? "wgpt*" : $2, $4 }'
      done
    done
  done
  echo
  awk -v threads="$threads" -v icd2="$icd2" '
    { k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $4; if (!($1 in seen)) { seen[$1] = 1; order[m++] = $1 }
      tok[$1] = $5 }
    function med(k,   i, j, x, c, a) {
      if (!(k in n)) return 0
      c = n[k]; for (i = 1; i <= c; i++) a[i] = v[k, i]
      for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2 }
    function ms(x) { return x ? sprintf("%.1f", x) : "failed" }
    function tps(s, x) { return x ? sprintf("%.0f", tok[s] * 1000 / x) : "-" }
    function ratio(l, w) { return (w && l) ? sprintf("%.2f", l / w) : "-" }
    END {
      printf "%-7s %6s %14s %14s %14s %14s %10s", "shape", "rounds", "wgpt ms/step", "llm.c ms/step", "wgpt tok/s", "llm.c tok/s", "llmc/wgpt"
      if (icd2 != "") printf " %14s %14s %11s", "wgpt* ms/step", "wgpt* tok/s", "llmc/wgpt*"
      printf "\n"
      for (i = 0; i < m; i++) {
        s = order[i]; w = med(s SUBSEP "wgpt"); l = med(s SUBSEP "llmc"); x = med(s SUBSEP "wgptx")
        r = n[s SUBSEP "wgpt"] < n[s SUBSEP "llmc"] ? n[s SUBSEP "wgpt"] : n[s SUBSEP "llmc"]
        printf "%-7s %6d %14s %14s %14s %14s %10s", s, r, ms(w), ms(l), tps(s, w), tps(s, l), ratio(l, w)
        if (icd2 != "") printf " %14s %14s %11s", ms(x), tps(s, x), ratio(l, x)
        printf "\n"
      }
      if (m == 0) print "no results (see the outputs above)"
      print "ms/step: median over rounds of each run'"'"'s median timed step (wgpt: fp32 on lavapipe; llm.c: train_gpt2.c, " threads " OpenMP threads)."
      print "llmc/wgpt: llm.c ms/step over wgpt ms/step (2.0 = wgpt twice as fast)."
      if (icd2 != "") print "wgpt*: the same wgpt bench with VK_ICD_FILENAMES=" icd2 "."
    }' "$lrows"
  echo "CPU busy after: $(busy)% of all cores"
  echo
  echo "raw outputs and the exact commands: $out/"
  exit $status
fi

# Runs a program into a file, timing it; writes "wall user sys" seconds to FILE.time.
run() {
  local file=$1; shift
  echo "\$ $*" | tee "$file.cmd"
  local TIMEFORMAT='%R %U %S' rc
  { time "$@" >"$file" 2>&1; } 2>"$file.time"
  rc=$(grep -c '^result:' "$file")
  [ "$rc" = 1 ] || { echo "  failed; last lines of $file:"; tail -5 "$file" | sed 's/^/    /'; return 1; }
}

status=0
rows="$out/rows.txt"
: >"$rows"
bench_model() {  # name, steps, model options...
  local name=$1 n=$2; shift 2
  echo
  echo "== $name model: $*"
  run "$out/wgpt_$name.txt" "$wgpt" bench --steps "$n" "$@" || status=1
  run "$out/ref_$name.txt" "$ref" --steps "$n" "$@" || status=1
  for who in wgpt ref; do
    awk -v name="$name" -v who="$who" -v steps="$n" '
      FILENAME ~ /\.time$/ { cores = ($1 > 0) ? ($2 + $3) / $1 : 0; next }
      /^step / && !/warm-up/ { loss = $4; sub(/,/, "", loss); t[k++] = $(NF - 1) }
      /^result:/ { ms = $2; tps = $4 }
      END {
        for (i = 0; i < k; i++) for (j = i + 1; j < k; j++) if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
        med = k % 2 ? t[(k - 1) / 2] : (t[k / 2 - 1] + t[k / 2]) / 2
        if (ms != "") printf "%s %s %s %s %s %.2f %s %.1f\n", name, who, steps, ms, tps, cores, loss, med
      }' \
      "$out/${who}_$name.txt.time" "$out/${who}_$name.txt" >>"$rows"
  done
}
bench_model small "$steps" --layers 3 --heads 4 --channels 96 --seq 64 --batch 8 --vocab 256
[ $do_large = 1 ] &&
  bench_model large "$large_steps" --layers 4 --heads 4 --channels 256 --seq 128 --batch 8 --vocab 256

echo
awk '
  { ms[$1, $2] = $4; tps[$1, $2] = $5; cores[$1, $2] = $6; loss[$1, $2] = $7; med[$1, $2] = $8; steps[$1] = $3
    if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  END {
    printf "%-6s %-22s %5s %9s %9s %9s %6s %8s %9s %10s\n", "model", "program", "steps", "ms/step", "median", "tokens/s",
           "cores", "loss", "ref/wgpt", "(medians)"
    for (i = 0; i < n; i++) {
      m = order[i]
      both = ((m, "wgpt") in ms) && ((m, "ref") in ms) && ms[m, "wgpt"] > 0 && med[m, "wgpt"] > 0
      r = both ? sprintf("%.2f", ms[m, "ref"] / ms[m, "wgpt"]) : "-"
      rm = both ? sprintf("%.2f", med[m, "ref"] / med[m, "wgpt"]) : "-"
      split("wgpt ref", who, " ")
      for (j = 1; j <= 2; j++) {
        w = who[j]
        label = (w == "wgpt") ? "wgpt, lavapipe" : "C reference, 1 thread"
        if (!((m, w) in ms)) { printf "%-6s %-22s failed: see its output above\n", m, label; continue }
        printf "%-6s %-22s %5s %9.1f %9.1f %9.0f %6.2f %8s %9s %10s\n", m, label, steps[m], ms[m, w], med[m, w],
               tps[m, w], cores[m, w], loss[m, w], (w == "ref") ? r : "", (w == "ref") ? rm : ""
      }
      if (((m, "wgpt") in loss) && ((m, "ref") in loss) && (loss[m, "wgpt"] - loss[m, "ref"])^2 > (1e-3 * loss[m, "ref"])^2)
        printf "       NOTE: the last losses differ (%s vs %s): not the same computation?\n", loss[m, "wgpt"], loss[m, "ref"]
    }
    if (n == 0) print "no results (see the outputs above)"
    print "ms/step: mean of the timed steps (the result line of each program); median: of the same steps."
    print "ref/wgpt: reference ms/step over wgpt ms/step (2.0 = wgpt twice as fast), of the means and of the medians."
    print "cores: CPU time over wall time of the whole process."
  }' "$rows"
echo "CPU busy after: $(busy)% of all cores"
echo
echo "raw outputs and the exact commands: $out/"
exit $status
