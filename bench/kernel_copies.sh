# kernel_copies.sh: what bench/sgm_ceilings.sh and bench/sgm_layouts.sh share
# (sourced, not run): their options and the run of `wgpt bench --micro-only
# f16` over each kernel copy, through WGPT_KERNEL_DIR.

# kc_options RUNS_NAME HELP_LINES "$@": --wgpt (default build/wgpt), --out
# (default runs/RUNS_NAME-DATE, made), -h (the caller's comment lines
# HELP_LINES); sets wgpt and out, exits on a bad option or a missing wgpt or
# python3. Messages name the calling script.
kc_options() {
  kc_name=$(basename "$0" .sh)
  local runs=$1 help=$2
  shift 2
  wgpt=build/wgpt out=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --wgpt) wgpt=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      -h|--help) sed -n "${help}p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "$kc_name.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
  done
  [ -x "$wgpt" ] || { echo "$kc_name.sh: no wgpt at $wgpt (make all, or --wgpt PATH)" >&2; exit 2; }
  command -v python3 > /dev/null || { echo "$kc_name.sh: needs python3 (to write the kernel copies)" >&2; exit 2; }
  out=${out:-runs/$runs-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out" || exit 1
}

# kc_run NAME [wgpt bench options]: `wgpt bench --micro-only f16` with the
# copy in $out/kernels-NAME (NAME committed: the kernels as they are), its
# output in $out/micro-NAME.txt and the driver's statistics in
# $out/stats-NAME.txt; prints each f16 matmul row (ms, TFLOP/s). Returns 1
# if the run failed; exits when the device has no f16 subgroup matrices.
kc_run() {
  local v=$1 f=$out/micro-$1.txt
  shift
  if [ "$v" = committed ]; then unset WGPT_KERNEL_DIR; else export WGPT_KERNEL_DIR=$out/kernels-$v; fi
  WGPT_KERNEL_STATS=$out/stats-$v.txt "$wgpt" bench --micro-only f16 "$@" > "$f" 2>&1 ||
    { echo "$kc_name.sh: $v failed:"; tail -3 "$f"; return 1; }
  if ! grep -q '^matmul .*_f16 ' "$f"; then
    echo "$kc_name.sh: no f16 matmul rows: this device has no f16 subgroup matrices ($(head -1 "$f"))" >&2
    exit 1
  fi
  echo "== $v (ms, TFLOP/s)"
  awk '$1 == "matmul" && $6 ~ /_f16$/ { printf "  %-8s %-15s %8s %9s\n", $2, $6, $7, $8 }' "$f"
}
