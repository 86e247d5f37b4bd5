# Sourced (scripts/demo.sh, scripts/test-tuned-lavapipe.sh): wgpt's tuned
# lavapipe, which `make lavapipe` builds (docs/performance.md).
tuned_icd="$PWD/third_party/lavapipe/lvp_icd.json"

# adapter_is_cpu WGPT: Dawn's adapter for WGPT is a CPU (lavapipe).
adapter_is_cpu() { "$1" info 2>/dev/null | grep -q '^adapter: .*| CPU |'; }

# use_tuned_lavapipe WGPT: where the adapter is a CPU, export VK_ICD_FILENAMES
# for the tuned lavapipe if it is built (else say how to build it). A
# VK_ICD_FILENAMES the user set wins, and a machine with a GPU keeps it.
use_tuned_lavapipe() {
  [ -z "${VK_ICD_FILENAMES:-}" ] && adapter_is_cpu "$1" || return 0
  if [ ! -f "$tuned_icd" ]; then
    echo "demo: on the CPU through Debian's lavapipe; \`make lavapipe\` (once, 3-8 min) builds wgpt's tuned one, 1.6x faster on the demo (docs/performance.md)"
  elif VK_ICD_FILENAMES="$tuned_icd" "$1" info --check >/dev/null 2>&1; then
    export VK_ICD_FILENAMES="$tuned_icd"
    echo "demo: on the CPU through wgpt's tuned lavapipe ($tuned_icd; make lavapipe built it)"
  else
    echo "demo: wgpt's tuned lavapipe ($tuned_icd) offers no adapter; using the system's driver (rebuild it: make lavapipe)"
  fi
}
