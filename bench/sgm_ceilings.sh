#!/usr/bin/env bash
# sgm_ceilings.sh: where the tensor-core matmul's time goes (bench/RESULTS.md 20).
# Run from a built tree on a machine with f16 subgroup matrices (the H200):
#   bench/sgm_ceilings.sh [--wgpt build/wgpt] [--out DIR]
# Writes copies of kernels/03_linear_sgm.wgsl, each with one part of the
# stage loop taken out or changed, and runs `wgpt bench --micro-only f16` with each
# (WGPT_KERNEL_DIR) after the kernel as it is:
#   committed  the kernel as it is
#   noglobal   no global loads inside the loop (the first stage stored every stage)
#   fragonly   fragment loads and products only: no stores to the tiles, no barriers
#   mmaonly    products only: each subgroup's fragments loaded once
#   nob1       no barrier between a stage's tile stores and its products
#   nob2       no barrier between a stage's products and the next stores
#   nobar      neither barrier (the stores and products kept)
#   nostore    both barriers, no tile stores (products of stale tiles)
#   divmma     the committed kernel with its products under a branch that is
#              uniform in each subgroup but not in the workgroup (always taken):
#              the form of bench/patches/03_linear_sgm_pingpong.patch (RESULTS 30)
#   direct     no tiles and no barriers: each subgroup loads its fragments
#              straight from the operands in global memory (rows and columns
#              past the matrix clamped, so wrong at the edges)
#   stage64    every wide variant (matmul_sgm_wide*) in stages of 64 with its B
#              tile of 32 rows (B fragments read rows k % 32): half the barriers
#              a k, in the workgroup memory of stages of 32 (stages of 64 need
#              52 KiB with the tiles' padding, past the 48 KiB limit); the host
#              still plans the wide block's splits and stream-K shares in stages
#              of 32; rows that run on the 128 x 128 block are the committed
#              kernel's
# The copies but divmma compute wrong results on purpose; only their times mean anything.
# Prints ms and TFLOP/s of every f16 pass for each; raw outputs in --out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. bench/kernel_copies.sh
kc_options sgm-ceilings 2,30 "$@"

python3 - "$out" <<'EOF' || exit 1
import os, shutil, sys
out = sys.argv[1]
src = open('kernels/03_linear_sgm.wgsl').read()

def need(text, what):
    if what not in text: sys.exit('sgm_ceilings.sh: kernels/03_linear_sgm.wgsl changed: no "%s"' % what)

def sub(text, pairs):
    for a, b in pairs:
        need(text, a)
        text = text.replace(a, b, 1)
    return text

head = '        for (var s = 0u; s < stages; s++) {\n'
tail = '        store_row(o_base, sr, sc, sg, lane, edge, c0_0, c0_1, c0_2, c0_3);'
need(src, head), need(src, tail)
start, end = src.index(head), src.index(tail)
loop = src[start:end]
stores = ('            for (var i = 0u; i < APT; i++) { store_a(lidx + i * NT, ra[i]); }\n'
          '            for (var i = 0u; i < BPT; i++) { store_b(lidx + i * NT, rb[i]); }\n')
bar1 = stores + '            workgroupBarrier();\n'
kloop = '            for (var kk = 0u; kk < BK; kk += SGM_TK) {\n'
bar2 = '            }\n            workgroupBarrier();\n        }\n'
nobar2 = '            }\n        }\n'  # the stage loop's end without it
for t in (stores, bar1, kloop, bar2): need(loop, t)
# the products of one k step, as the kernel has them, and the fragment loads before them
p0 = loop.index('                c0_0 = subgroupMatrixMultiplyAccumulate(a0, b0, c0_0);')
mma = loop[p0:loop.index(bar2)]
frags = loop[loop.index('                let a0 = frag_a(lr, kk);'):p0]
cut = {
    # the next stage's fetch never taken (persistent twins still fetch their
    # next block's first stage in a block's last)
    'noglobal': sub(loop, [('if (s + 1u < stages) {', 'if (s + 1u < stages && p.pad1 == 12345u) {'),
                           ('} else if (nt < end) {', '} else if (nt < end && s + 1u >= stages) {')]),
    # the k offset moves with s, so that the loads stay inside the loop
    'fragonly': bar1 + head + '            for (var k2 = 0u; k2 < BK; k2 += SGM_TK) {\n'
        '                let kk = (k2 + s * SGM_TK) % BK;\n' + frags + mma + '            }\n        }\n'
        '        workgroupBarrier();\n',
    'mmaonly': bar1 + '        let kk = 0u;\n' + frags.replace('                ', '        ') + head +
        '            for (var k2 = 0u; k2 < BK; k2 += SGM_TK) {\n' + mma + '            }\n        }\n'
        '        workgroupBarrier();\n',
    'nob1': loop.replace(bar1, stores, 1),
    'nob2': loop.replace(bar2, nobar2, 1),
    'nostore': loop.replace(bar1, '            workgroupBarrier();\n', 1),
    # the products under a branch uniform in each subgroup, not in the
    # workgroup (always taken: p.pad1 is 0), as in the ping-pong patch
    'divmma': loop.replace(kloop, '            if (sg + p.pad1 < 4096u) {\n' + kloop, 1)
                  .replace(bar2, '            }\n            }\n            workgroupBarrier();\n        }\n', 1),
}
cut['nobar'] = cut['nob1'].replace(bar2, nobar2, 1)
copies = {name: src[:start] + body + src[end:] for name, body in cut.items()}
copies['divmma'] = sub(copies['divmma'], [('fn sgm_block(', '@diagnostic(off, subgroup_uniformity)\nfn sgm_block(')])
# the same fragments from the operands: (lr, kk) in the tiles is (sr, kg) in the matrix
frag_g = ('                let kg = k_lo + s * BK + kk;\n                if (kg >= k_hi) { break; }\n' +
          frags.replace('frag_b(kk, lc', 'frag_g_b(kg, sc').replace('frag_a(lr', 'frag_g_a(sr').replace(', kk)', ', kg)'))
if 'frag_a(' in frag_g or 'frag_b(' in frag_g: sys.exit('sgm_ceilings.sh: the fragment loads of kernels/03_linear_sgm.wgsl changed')
g_fns = ('fn frag_g_a(r: u32, kg: u32) -> LT {\n'
         '    return subgroupMatrixLoad<LT, row_major>(&a4, (min(r, p.m - SGM_TM) * p.k + kg) / 8u, p.k / 8u);\n}\n\n'
         'fn frag_g_b(kg: u32, c: u32) -> RT {\n'
         '    return subgroupMatrixLoad<RT, row_major>(&b4, (kg * p.n + min(c, p.n - SGM_TN)) / 8u, p.n / 8u);\n}\n\n')
copies['direct'] = sub(src[:start] + head + kloop + frag_g + mma + '            }\n        }\n' + src[end:],
                       [('// Bit 2 of p.flag', g_fns + '// Bit 2 of p.flag')])
# every wide variant in stages of 64 over a B tile of 32 rows (BKB)
s64 = sub(src, [('override B_TILE: u32 = BK * SB;',
                 'override BKB: u32 = select(BK, 32u, BN > 128u);\noverride B_TILE: u32 = BKB * SB;'),
                ('override BV: u32 = BK * BN / 8u;', 'override BV: u32 = BKB * BN / 8u;'),
                ('(&tb, kk * SB + c0 / 8u, SB)', '(&tb, (kk % BKB) * SB + c0 / 8u, SB)')])
need(s64, 'with BN=256,BK=32')
copies['stage64'] = s64.replace('with BN=256,BK=32', 'with BN=256,BK=64')
for name, text in copies.items():
    d = os.path.join(out, 'kernels-' + name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir('kernels'):
        shutil.copy(os.path.join('kernels', f), d)
    open(os.path.join(d, '03_linear_sgm.wgsl'), 'w').write(text)
EOF

for v in committed noglobal fragonly mmaonly nob1 nob2 nobar nostore divmma direct stage64; do kc_run $v; done
echo "raw outputs: $out"
