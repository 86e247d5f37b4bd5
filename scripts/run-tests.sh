#!/usr/bin/env bash
# Runs each test binary given, then prints one summary line:
#   "tests: N passed, N failed"   (counts of test cases, from cmocka's output;
#   $TEST_LABEL replaces "tests")
set -uo pipefail
# A test program opens and closes many devices; each open can load the Vulkan
# driver again, and NVIDIA's (libnvidia-tls) takes static TLS each time. With
# Open MPI linked the default surplus ran out on the H200 ("cannot allocate
# memory in static TLS block", then no adapter): give it room.
export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=65536"
passed=0; failed=0; broken=()
for t in "$@"; do
  echo "=== $t"
  # TEST_RUNNER: a command to run each test under (e.g. valgrind), word-split on purpose
  # shellcheck disable=SC2086
  out=$(${TEST_RUNNER:-} "$t" 2>&1); rc=$?
  printf '%s\n' "$out"
  p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p)); failed=$((failed + f))
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); broken+=("$t (exit $rc)"); fi
done
[ ${#broken[@]} -gt 0 ] && printf 'crashed or failed to start: %s\n' "${broken[@]}"
echo "${TEST_LABEL:-tests}: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
