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

if [ "${WGPT_TEST_TUNED_LAVAPIPE:-1}" = 0 ]; then
  say "skipped (WGPT_TEST_TUNED_LAVAPIPE=0)"; exit 0
fi
if ! "$wgpt" info 2>/dev/null | grep -q '^adapter: .*| CPU |'; then
  say "skipped: the adapter is not a CPU"; exit 0
fi
scripts/build-lavapipe.sh; rc=$?
if [ $rc = 3 ]; then say "skipped: it cannot be built here (see above)"; exit 0; fi
[ $rc = 0 ] || { say "its build failed (exit $rc)"; exit 1; }
icd=$PWD/third_party/lavapipe/lvp_icd.json
VK_ICD_FILENAMES=$icd "$wgpt" info | grep -m1 '^vendor:' | grep -q 'wgpt-lvp' ||
  { say "wgpt does not find it through VK_ICD_FILENAMES=$icd"; exit 1; }
VK_ICD_FILENAMES=$icd TEST_LABEL="tests on the tuned lavapipe" scripts/run-tests.sh "$@"
