#!/usr/bin/env bash
# run.sh: compiles the subgroup-matrix kernel files on a device without
# subgroup matrices (lavapipe), with the matrix types and calls replaced by
# vec4 stubs (stub.py): catches WGSL syntax, type and barrier-uniformity
# errors before an H200 run; says nothing about the results. Kernels that
# compile but exceed the device's workgroup memory say so and pass.
#   bench/next/stub_check/run.sh [BUILD]   (BUILD: a built tree, default build-dev)
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
build=${1:-build-dev}
[ -f "$build/libwgpt.a" ] || { echo "run.sh: no $build/libwgpt.a (make BUILD=$build all)" >&2; exit 2; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
python3 bench/next/stub_check/stub.py kernels "$tmp/k" >/dev/null || exit 1
# the forward's eager fallback too
mkdir -p "$tmp/ke" && cp "$tmp"/k/*.wgsl "$tmp/ke/" &&
  sed -i 's/^override RESCALE_LAZY: bool = true;/override RESCALE_LAZY: bool = false;/' "$tmp/ke/04_attention_sgm.wgsl"
cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L -Isrc bench/next/stub_check/check.c "$build/libwgpt.a" -ldl \
  -Wl,--export-dynamic-symbol='napi_*' -lcrypto -lpcre2-8 -lcjson -lz -lm -o "$build/stubcheck" || exit 1
rc=0
for d in k ke; do
  "$build/stubcheck" "$tmp/$d" attention_sgm_forward attention_sgm_backward_dq attention_sgm_backward_dkdv \
    attention_sgm_backward_preprocess matmul_sgm matmul_sgm_wide matmul_sgm_tall | cut -c1-160 || rc=1
done
exit $rc
