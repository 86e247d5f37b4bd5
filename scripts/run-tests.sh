#!/usr/bin/env bash
# Runs each test binary given, then prints one summary line:
#   "tests: N passed, N failed, N skipped"   (counts of test cases, from
#   cmocka's "[  PASSED  ]", "[  FAILED  ]" and "[  SKIPPED ]" lines;
#   $TEST_LABEL replaces "tests"; ", N skipped" only where some were)
# WGPT_TEST_JOBS=N runs N programs at a time (default 1); each one's output is
# printed whole, in the order given, with the seconds it took.
set -uo pipefail
# A test program opens and closes many devices; each open can load the Vulkan
# driver again, and NVIDIA's (libnvidia-tls) takes static TLS each time. With
# Open MPI linked the default surplus ran out on the H200 ("cannot allocate
# memory in static TLS block", then no adapter): give it room.
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=65536"
jobs=${WGPT_TEST_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) echo "run-tests: WGPT_TEST_JOBS=$jobs is not a count >= 1" >&2; exit 2 ;; esac
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
tests=("$@")
passed=0; failed=0; skipped=0; broken=()

run_one() {  # INDEX: the output in $tmp/INDEX.out, then "EXIT SECONDS" in $tmp/INDEX.rc
  local t0 rc
  t0=$(date +%s.%N)
  # TEST_RUNNER: a command to run each test under (e.g. valgrind), word-split on purpose
  # shellcheck disable=SC2086
  ${TEST_RUNNER:-} "${tests[$1]}" >"$tmp/$1.out" 2>&1; rc=$?
  echo "$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')" >"$tmp/$1.rc.part" && mv "$tmp/$1.rc.part" "$tmp/$1.rc"
}
count_() {  # LABEL FILE: the sum of cmocka's "[  LABEL ] N test(s)" lines
  sed -n "s/^\[  $1 *\] \([0-9]*\) test.*/\1/p" "$2" | awk '{s+=$1} END {print s+0}'
}
report() {  # INDEX
  local t=${tests[$1]} rc secs p f s
  read -r rc secs <"$tmp/$1.rc"
  printf '=== %s (%.1f s)\n' "$t" "$secs"
  cat "$tmp/$1.out"
  p=$(count_ 'PASSED' "$tmp/$1.out"); f=$(count_ 'FAILED' "$tmp/$1.out"); s=$(count_ 'SKIPPED' "$tmp/$1.out")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); broken+=("$t (exit $rc)"); fi
}

next=0
for i in "${!tests[@]}"; do
  if [ "$jobs" -le 1 ]; then
    run_one "$i"
  else
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_one "$i" &
  fi
  while [ $next -lt ${#tests[@]} ] && [ -f "$tmp/$next.rc" ]; do report $next; next=$((next + 1)); done
done
wait
while [ $next -lt ${#tests[@]} ]; do report $next; next=$((next + 1)); done
[ ${#broken[@]} -gt 0 ] && printf 'crashed or failed to start: %s\n' "${broken[@]}"
line="${TEST_LABEL:-tests}: $passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
