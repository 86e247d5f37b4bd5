#!/usr/bin/env bash
# `make test`, on a machine whose adapter is a CPU: the test programs again on
# wgpt's tuned lavapipe (scripts/build-lavapipe.sh builds it once, 3 to 8
# minutes), since `make run` uses it where it is built and it carries our
# patch to Mesa. Skipped, saying so, on a GPU, with WGPT_TEST_TUNED_LAVAPIPE=0,
# or where its build packages are missing and cannot be installed (not root).
# Usage: scripts/test-tuned-lavapipe.sh PATH/TO/wgpt TEST...
set -uo pipefail
cd "$(dirname "$0")/.."
wgpt=$1; shift
say() { printf 'tuned lavapipe: %s\n' "$*"; }
. scripts/use-tuned-lavapipe.sh

if [ "${WGPT_TEST_TUNED_LAVAPIPE:-1}" = 0 ]; then
  say "skipped (WGPT_TEST_TUNED_LAVAPIPE=0)"; exit 0
fi
if ! adapter_is_cpu "$wgpt"; then
  say "skipped: the adapter is not a CPU"; exit 0
fi
scripts/build-lavapipe.sh; rc=$?
if [ $rc = 3 ]; then say "skipped: it cannot be built here (see above)"; exit 0; fi
[ $rc = 0 ] || { say "its build failed (exit $rc)"; exit 1; }
VK_ICD_FILENAMES=$tuned_icd "$wgpt" info | grep -m1 '^vendor:' | grep -q 'wgpt-lvp' ||
  { say "wgpt does not find it through VK_ICD_FILENAMES=$tuned_icd"; exit 1; }
VK_ICD_FILENAMES=$tuned_icd TEST_LABEL="tests on the tuned lavapipe" scripts/run-tests.sh "$@"
