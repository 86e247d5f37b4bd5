#!/usr/bin/env bash
# sgm_ceilings.sh: where the tensor-core matmul's time goes (bench/RESULTS.md 20).
# Run from a built tree on a machine with f16 subgroup matrices (the H200):
#   bench/sgm_ceilings.sh [--wgpt build/wgpt] [--out DIR]
# Writes three copies of kernels/03_linear_sgm.wgsl, each with one part of the
# stage loop taken out, and runs `wgpt bench --micro-only f16` with each
# (WGPT_KERNEL_DIR) after the kernel as it is:
#   committed  the kernel as it is
#   noglobal   no global loads inside the loop (the first stage stored every stage)
#   fragonly   fragment loads and products only: no stores to the tiles, no barriers
#   mmaonly    products only: each subgroup's fragments loaded once
#   stage64    the wide block (matmul_sgm_wide) in stages of 64 with its B tile
#              of 32 rows (B fragments read rows k % 32): half the barriers a k,
#              in the workgroup memory of stages of 32 (stages of 64 need 52 KiB
#              with the tiles' padding, past the 48 KiB limit); rows that run on
#              the 128 x 128 block are the committed kernel's
# The copies compute wrong results on purpose; only their times mean anything.
# Prints ms and TFLOP/s of every f16 pass for each; raw outputs in --out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. bench/kernel_copies.sh
kc_options sgm-ceilings 2,18 "$@"

python3 - "$out" <<'EOF' || exit 1
import os, shutil, sys
out = sys.argv[1]
src = open('kernels/03_linear_sgm.wgsl').read()
start = src.index('    for (var s = 0u; s < stages; s++) {')
end = src.index('    store_row(o_base, sr, sc, sg, lane, edge, c0_0, c0_1, c0_2, c0_3);')
loop = src[start:end]
# the products of one k step, as the kernel has them
p0 = loop.index('            c0_0 = subgroupMatrixMultiplyAccumulate(a0, b0, c0_0);')
p1 = loop.index('        }\n        workgroupBarrier();\n    }')
mma = loop[p0:p1]
frags = loop[loop.index('            let a0 = frag_a(lr, kk);'):p0]
stage0 = '''    for (var i = 0u; i < APT; i++) { store_a(lidx + i * NT, ra[i]); }
    for (var i = 0u; i < BPT; i++) { store_b(lidx + i * NT, rb[i]); }
    workgroupBarrier();
'''
cut = {
    'noglobal': loop.replace('if (s + 1u < stages) {', 'if (s + 1u < stages && p.pad0 == 12345u) {'),
    # the k offset moves with s, so that the loads stay inside the loop
    'fragonly': stage0 + '    for (var s = 0u; s < stages; s++) {\n'
        '        for (var k2 = 0u; k2 < BK; k2 += SGM_TK) {\n'
        '            let kk = (k2 + s * SGM_TK) % BK;\n' + frags + mma + '        }\n    }\n    workgroupBarrier();\n',
    'mmaonly': stage0 + '    let kk = 0u;\n' + frags.replace('            ', '    ') +
        '    for (var s = 0u; s < stages; s++) {\n        for (var k2 = 0u; k2 < BK; k2 += SGM_TK) {\n' + mma +
        '        }\n    }\n    workgroupBarrier();\n',
}
copies = {name: src[:start] + body + src[end:] for name, body in cut.items()}
s64 = src
for a, b in [('override B_TILE: u32 = BK * SB;', 'override BKB: u32 = BK;\noverride B_TILE: u32 = BKB * SB;'),
             ('override BV: u32 = BK * BN / 8u;', 'override BV: u32 = BKB * BN / 8u;'),
             ('(&tb, kk * SB + c0 / 8u, SB)', '(&tb, (kk % BKB) * SB + c0 / 8u, SB)'),
             ('matmul_sgm_wide = matmul_sgm with BN=256,BK=32 ---', 'matmul_sgm_wide = matmul_sgm with BN=256,BK=64,BKB=32 ---')]:
    if a not in s64: sys.exit('sgm_ceilings.sh: kernels/03_linear_sgm.wgsl changed: no "%s"' % a)
    s64 = s64.replace(a, b, 1)
copies['stage64'] = s64
for name, text in copies.items():
    d = os.path.join(out, 'kernels-' + name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir('kernels'):
        shutil.copy(os.path.join('kernels', f), d)
    open(os.path.join(d, '03_linear_sgm.wgsl'), 'w').write(text)
EOF

for v in committed noglobal fragonly mmaonly stage64; do kc_run $v; done
echo "raw outputs: $out"
