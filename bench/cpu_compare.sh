#!/usr/bin/env bash
# cpu_compare.sh: the CPU path. wgpt's training step on Mesa lavapipe beside the plain C
# reference (tests/ref, as build/bench_ref_step: single-threaded, the flags it prints) on
# this machine, in one command. Run from a built tree (make all):
#   bench/cpu_compare.sh [--steps N] [--large-steps N] [--no-large] [--out DIR]
#                        [--wgpt build/wgpt] [--ref build/bench_ref_step]
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
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

steps=20 large_steps=4 do_large=1 out="" wgpt=build/wgpt ref=build/bench_ref_step
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
need() { [ $# -ge 2 ] || { echo "cpu_compare.sh: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) need "$@"; steps=$2; shift 2 ;;
    --large-steps) need "$@"; large_steps=$2; shift 2 ;;
    --no-large) do_large=0; shift ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --wgpt) need "$@"; wgpt=$2; shift 2 ;;
    --ref) need "$@"; ref=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cpu_compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in steps large_steps; do
  case "${!v}" in ''|*[!0-9]*|0) echo "cpu_compare.sh: --${v/_/-} needs a positive integer, got '${!v}'" >&2; exit 2 ;; esac
done
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
echo "reference $(grep -m1 '^compiled with:' <("$ref" --steps 1 --layers 1 --heads 1 --channels 8 --seq 2 --batch 1 --vocab 8))"
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
