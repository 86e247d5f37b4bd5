#!/usr/bin/env bash
# sgm_layouts.sh: the wide tensor-core block (matmul_sgm_wide) with other
# stage lengths and tile layouts (bench/RESULTS.md section 25).
# Run from a built tree on a machine with f16 subgroup matrices:
#   bench/sgm_layouts.sh [--wgpt build/wgpt] [--out DIR]
# bench/patches/03_linear_sgm_chunked.patch gives 03_linear_sgm.wgsl one
# array for both tiles and the override CHUNK (bit 0: the A tile in chunks of
# one fragment's k, [k/16][m][16 halves]; bit 1: the B tile in chunks of one
# fragment's n, [n/8][k][8 halves]; no padding either way). Each row is
# `wgpt bench --micro-only f16 --micro-block wide` with a copy of the kernels
# through WGPT_KERNEL_DIR whose matmul_sgm_wide marker sets BK and CHUNK:
#   committed   the kernel as it is (stages of 32, both tiles row-major, padded)
#   padded32    the patch, CHUNK 0: one array, else as committed
#   padded48    stages of 48, padded (39,680 bytes)
#   chunkA32    stages of 32, the A tile chunked
#   chunkB32    stages of 32, the B tile chunked
#   chunk32     stages of 32, both chunked (24,576 bytes)
#   chunk64     stages of 64, both chunked: 49,152 bytes, the only layout of
#               stages of 64 that fits 48 KiB (padded they take 52,224)
# The copies compute correct results (test_linear_f16 passed with chunk64 on
# an H100); the patch applies to the kernel of commit 36034d4 and fails
# clearly once the kernel has moved on. Prints each row's registers and
# local memory (the driver's statistics, where it gives them) and its ms and
# TFLOP/s; raw outputs in --out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. bench/kernel_copies.sh
kc_options sgm-layouts 2,24 "$@"
command -v patch > /dev/null || { echo "sgm_layouts.sh: needs patch" >&2; exit 2; }
patched=$out/03_linear_sgm.patched.wgsl
if ! patch -s -o "$patched" kernels/03_linear_sgm.wgsl < bench/patches/03_linear_sgm_chunked.patch; then
  echo "sgm_layouts.sh: bench/patches/03_linear_sgm_chunked.patch does not apply to kernels/03_linear_sgm.wgsl" \
       "(it was made against commit 36034d4: git worktree add DIR 36034d4, and run this there)" >&2
  exit 1
fi

python3 - "$out" "$patched" <<'EOF' || exit 1
import os, shutil, sys
out, patched = sys.argv[1], open(sys.argv[2]).read()
marker = '// --- KERNEL: matmul_sgm_wide = matmul_sgm with BN=256,BK=64,CHUNK=3 ---'
if marker not in patched: sys.exit('sgm_layouts.sh: the patched kernel has no "%s"' % marker)
rows = {'padded32': (32, 0), 'padded48': (48, 0), 'chunkA32': (32, 1), 'chunkB32': (32, 2), 'chunk32': (32, 3),
        'chunk64': (64, 3)}
for name, (bk, chunk) in rows.items():
    d = os.path.join(out, 'kernels-' + name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir('kernels'):
        shutil.copy(os.path.join('kernels', f), d)
    text = patched.replace(marker, marker.replace('BK=64,CHUNK=3', 'BK=%d,CHUNK=%d' % (bk, chunk)))
    open(os.path.join(d, '03_linear_sgm.wgsl'), 'w').write(text)
EOF

for v in committed padded32 padded48 chunkA32 chunkB32 chunk32 chunk64; do
  kc_run $v --micro-block wide || continue
  # the driver's line for matmul_sgm_wide (NVIDIA's: registers, shared memory)
  regs=$(awk '/^kernel / { k = $2; next } k == "matmul_sgm_wide" { print; exit }' "$out/stats-$v.txt" 2>/dev/null |
         grep -oE 'Register Count=[0-9]+|Shared Memory Size=[0-9]+' | tr '\n' ' ')
  [ -n "$regs" ] && echo "  matmul_sgm_wide: $regs"
done
echo "raw outputs: $out"
