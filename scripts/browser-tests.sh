#!/usr/bin/env bash
# The browser phase of `make test`: tests/browser/*.test.mjs under `node --test`,
# one file at a time, each driving Debian's chromium (headless, WebGPU on
# SwiftShader where there is no GPU) through playwright-core. Needs `make web`
# and scripts/web-deps.sh. Prints the summary line
#   browser: N passed, N failed, N skipped
# and exits 1 if any failed.
# Usage: scripts/browser-tests.sh [TEST_FILE...]
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d tests/browser/node_modules/playwright-core ] || scripts/web-deps.sh || exit 1
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(tests/browser/*.test.mjs)
log=$(mktemp)
start=$(date +%s)
node --test --test-reporter=tap --test-concurrency=1 "${files[@]}" 2>&1 | tee "$log" |
  grep -E '^ *(not ok|ok) |^# (device|loss|speed|sample)' || true
num() { sed -n "s/^# $1 \([0-9]*\)$/\1/p" "$log" | tail -1; }
pass=$(num pass); fail=$(num fail); skip=$(num skipped)
if [ -z "$pass" ]; then
  echo "browser: node --test printed no summary:" >&2
  tail -40 "$log" >&2
  pass=0; fail=1; skip=0
fi
[ "${fail:-0}" != 0 ] && grep -E -A30 '^ *not ok ' "$log" | head -120
rm -f "$log"
echo "browser: ${pass} passed, ${fail:-0} failed, ${skip:-0} skipped ($(( $(date +%s) - start )) s)"
[ "${fail:-0}" = 0 ]
