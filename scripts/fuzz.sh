#!/usr/bin/env bash
# Runs libFuzzer targets built by `make fuzz-build` and prints, per target, its
# runs and whether it crashed, then one summary line:
#   "fuzz: N passed, N failed"   (counts of targets)
# Usage: scripts/fuzz.sh TARGET...   (e.g. shard checkpoint; binaries are
#        $WGPT_FUZZ_BUILD/fuzz_TARGET)
# Each target runs for $WGPT_FUZZ_SECONDS (default 30) on a copy of its seed
# corpus fuzz/corpus/TARGET/ in a temporary folder: the checked-in corpus is
# never modified. A crash leaves the input in $WGPT_FUZZ_BUILD/artifacts/TARGET/
# and the log in $WGPT_FUZZ_BUILD/logs/TARGET.log; rerun the binary on the
# artifact to reproduce it. $WGPT_FUZZ_ARGS adds libFuzzer flags.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${WGPT_FUZZ_SECONDS:-30}
build=${WGPT_FUZZ_BUILD:-build-fuzz}
case $secs in
  '' | *[!0-9]*) echo "fuzz: WGPT_FUZZ_SECONDS must be a whole number of seconds, not '$secs'" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "usage: scripts/fuzz.sh TARGET... (see the Makefile's FUZZ_TARGETS)" >&2; exit 2; }

# Largest input per target: enough for the seeds and some growth, small enough
# to keep the runs fast (a shard header alone is 1024 bytes).
max_len() {
  case $1 in
    shard | checkpoint) echo 8192 ;;
    safetensors) echo 16384 ;;  # the tiny GPT-2 seeds are 3-5 KiB
    tokenizer_files) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

mkdir -p "$build/artifacts" "$build/logs"
# fuzz_one TARGET: runs it; its report lines go to stdout, exit 0 if it passed.
fuzz_one() {
  local t=$1 bin log work corpus rate runs rc start artifact why dict=()
  bin=$build/fuzz_$t
  log=$build/logs/$t.log
  if [ ! -x "$bin" ]; then
    echo "fuzz_$t: FAILED: $bin is missing (make fuzz-build)"
    return 1
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/wgpt_fuzz_$t.XXXXXX")
  mkdir -p "$work/corpus" "$build/artifacts/$t"
  [ -d "fuzz/corpus/$t" ] && cp -R "fuzz/corpus/$t/." "$work/corpus/"
  [ -f "fuzz/$t.dict" ] && dict=("-dict=fuzz/$t.dict")
  start=$SECONDS
  # -close_fd_mask=3: the code under test prints (usage, errors); libFuzzer's own
  # output and the sanitizers' reports still reach the log.
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" \
    ${WGPT_FUZZ_ARGS:-} "$work/corpus" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  runs=${runs:-0}
  corpus=$(find "$work/corpus" -type f | wc -l)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  [ -n "$rate" ] || rate=$((runs / (SECONDS - start > 0 ? SECONDS - start : 1)))
  rm -rf "$work"
  if [ $rc -eq 0 ]; then
    echo "fuzz_$t: $runs runs, $rate/s, corpus $corpus inputs: no crash"
    return 0
  fi
  artifact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -n 1)
  echo "fuzz_$t: CRASHED (exit $rc) after $runs runs; input: ${artifact:-none saved}; log: $log"
  echo "  reproduce: $bin ${artifact:-<input>}"
  # the finding, its explanation, and the stack frames in our code
  why=$(grep -E 'ERROR: |runtime error:|fuzz invariant failed|^  [^ ]|#[0-9]+ .*/(src|fuzz)/|SUMMARY' "$log" |
    head -n 16)
  [ -n "$why" ] || why=$(tail -n 5 "$log")
  printf '%s\n' "$why" | sed 's/^/  | /'
  return 1
}

# WGPT_FUZZ_JOBS targets at a time (default 1; make fuzz: 2), reports in the order given.
jobs=${WGPT_FUZZ_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) echo "fuzz: WGPT_FUZZ_JOBS=$jobs is not a count >= 1" >&2; exit 2 ;; esac
out=$(mktemp -d) || exit 2
trap 'rm -rf "$out"' EXIT
for t in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  { fuzz_one "$t" >"$out/$t.txt"; echo $? >"$out/$t.rc"; } &
done
wait
passed=0; failed=0
for t in "$@"; do
  cat "$out/$t.txt"
  if [ "$(cat "$out/$t.rc")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
