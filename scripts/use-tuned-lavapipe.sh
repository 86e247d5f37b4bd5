# Sourced by scripts/demo.sh: where Dawn's adapter is a CPU (lavapipe) and
# `make lavapipe` has built wgpt's tuned lavapipe, use that instead (same
# results, faster: bench/RESULTS.md 14.4). A VK_ICD_FILENAMES the user set wins,
# and a machine with a GPU keeps it. Needs $wgpt (the wgpt binary).
tuned_icd="$PWD/third_party/lavapipe/lvp_icd.json"
if [ -z "${VK_ICD_FILENAMES:-}" ] && [ ! -f "$tuned_icd" ] &&
   "$wgpt" info 2>/dev/null | grep -q '^adapter: .*| CPU |'; then
  echo "demo: on the CPU through Debian's lavapipe; \`make lavapipe\` (once, 3-8 min) builds wgpt's tuned one, 1.6x faster on the demo (bench/RESULTS.md 14.4)"
fi
if [ -z "${VK_ICD_FILENAMES:-}" ] && [ -f "$tuned_icd" ] &&
   "$wgpt" info 2>/dev/null | grep -q '^adapter: .*| CPU |'; then
  if VK_ICD_FILENAMES="$tuned_icd" "$wgpt" info --check >/dev/null 2>&1; then
    export VK_ICD_FILENAMES="$tuned_icd"
    echo "demo: on the CPU through wgpt's tuned lavapipe ($tuned_icd; make lavapipe built it)"
  else
    echo "demo: wgpt's tuned lavapipe ($tuned_icd) offers no adapter; using the system's driver (rebuild it: make lavapipe)"
  fi
fi
