#!/usr/bin/env bash
# `make test`, on a machine whose adapter is a CPU: test programs on wgpt's
# tuned lavapipe (scripts/build-lavapipe.sh builds it once, 3 to 8 minutes),
# since `make run` uses it where it is built and it carries our patch to Mesa.
# Where it cannot be used (a GPU, WGPT_TEST_TUNED_LAVAPIPE=0, or its build
# packages missing and not root) it says so and runs them on the default
# device instead, so that they run once either way (make test hands it the
# sanitized build: one run checks the host code and the tuned driver).
# Usage: scripts/test-tuned-lavapipe.sh PATH/TO/wgpt TEST...
set -uo pipefail
cd "$(dirname "$0")/.."
wgpt=$1; shift
say() { printf 'tuned lavapipe: %s\n' "$*"; }
. scripts/use-tuned-lavapipe.sh

elsewhere() {  # WHY TEST...
  say "not used: $1; the tests run on the default device"
  shift
  exec scripts/run-tests.sh "$@"
}
if [ "${WGPT_TEST_TUNED_LAVAPIPE:-1}" = 0 ]; then
  elsewhere "WGPT_TEST_TUNED_LAVAPIPE=0" "$@"
fi
if ! adapter_is_cpu "$wgpt"; then
  elsewhere "the adapter is not a CPU" "$@"
fi
scripts/build-lavapipe.sh; rc=$?
if [ $rc = 3 ]; then elsewhere "it cannot be built here (see above)" "$@"; fi
[ $rc = 0 ] || { say "its build failed (exit $rc)"; exit 1; }
VK_ICD_FILENAMES=$tuned_icd "$wgpt" info | grep -m1 '^vendor:' | grep -q 'wgpt-lvp' ||
  { say "wgpt does not find it through VK_ICD_FILENAMES=$tuned_icd"; exit 1; }
VK_ICD_FILENAMES=$tuned_icd TEST_LABEL="${TEST_LABEL:-tests} on the tuned lavapipe" scripts/run-tests.sh "$@"
