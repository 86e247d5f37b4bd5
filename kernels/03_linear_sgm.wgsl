// 03_linear_sgm.wgsl: the linear layer's three matmuls on subgroup matrices
// (tensor cores on NVIDIA): f16 operands, f32 accumulation and output.
//   matmul_sgm_forward         out (m, n) = a (m, k) @ w (n, k)^T (+ bias (n))
//   matmul_sgm_backward_input  dinp (m, n) = (or +=) dout (m, k) @ w (k, n)
//   matmul_sgm_backward_weight dw (m, n) += dout (k, m)^T @ inp (k, n)
// Only devices with chromium-experimental-subgroup-matrix compile this file.
// The engine writes the fragment shape it chose from the adapter's f16 x f16 ->
// f32 configurations in front of it (src/gpu/kernel.c): SGM_TM x SGM_TK left
// times SGM_TK x SGM_TN right, for subgroups of SGM_SG invocations.
// Shapes: m, n and k multiples of 8 (every operand row a whole number of
// vec4<u32>, 8 halves each); any size otherwise: edge blocks are zero-filled
// on load and stored through workgroup memory with bounds checks.
// ABI: a (f16 as vec4<u32>), b (same), bias (f32; a stand-in when unused),
// out (f32), then `p: SgmParams`. Dispatch: one workgroup of 4 subgroups per
// BM x BN output block and split: grid (ceil(n / BN), ceil(m / BM), splits).
// Split-k (p.ks != 0): workgroup z sums k in [z * ks, (z + 1) * ks) and
// writes its partial block to out[z] (m x n floats each; flag 0) for
// matmul_split_reduce to add in order of z: a 768 x 768 weight gradient is 72
// blocks for 132 SMs.
// See docs/kernels/03_linear_sgm.md.

struct SgmParams {
    m: u32,     // output rows
    n: u32,     // output columns
    k: u32,     // reduction length
    flag: u32,  // bit 0: add to the output; bit 1: add bias (n) to every row
    ks: u32,    // k per split (a multiple of BK), 0: no split
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> a4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> b4: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: SgmParams;

alias LT = subgroup_matrix_left<f16, SGM_TK, SGM_TM>;    // SGM_TM rows x SGM_TK columns
alias RT = subgroup_matrix_right<f16, SGM_TN, SGM_TK>;   // SGM_TK rows x SGM_TN columns
alias CT = subgroup_matrix_result<f32, SGM_TN, SGM_TM>;  // SGM_TM rows x SGM_TN columns

// 2 x 2 subgroups a workgroup, 4 x 4 fragments a subgroup.
const NT: u32 = 4u * SGM_SG;        // threads a workgroup
const BM: u32 = 8u * SGM_TM;        // block rows
const BN: u32 = 8u * SGM_TN;        // block columns
const BK: u32 = 32u;                // k a stage
const_assert BK % SGM_TK == 0u;
const_assert SGM_TM % 8u == 0u && SGM_TN % 8u == 0u && SGM_TK % 8u == 0u;
// Stage tiles in vec4<u32> (8 halves), rows padded by one vec4 against bank conflicts.
// A: BM rows of BK (row-major operand) or BK rows of BM (transposed); B likewise.
const SA: u32 = BK / 8u + 1u;       // vec4 a row of an A tile [m][k]
const SAT: u32 = BM / 8u + 1u;      // of a transposed A tile [k][m]
const SB: u32 = BN / 8u + 1u;       // of a B tile [k][n]
const SBT: u32 = BK / 8u + 1u;      // of a transposed B tile [n][k]
const A_TILE: u32 = max(BM * SA, BK * SAT);
const B_TILE: u32 = max(BK * SB, BN * SBT);
const AV: u32 = BM * BK / 8u;       // vec4 a stage of A
const BV: u32 = BK * BN / 8u;
const APT: u32 = (AV + NT - 1u) / NT;  // vec4 a thread loads a stage
const BPT: u32 = (BV + NT - 1u) / NT;
var<workgroup> ta: array<vec4<u32>, A_TILE>;
var<workgroup> tb: array<vec4<u32>, B_TILE>;
// The bias broadcast over SGM_TM rows (initial accumulators), and each subgroup's
// fragment on its way to or from an edge block.
var<workgroup> tbias: array<f32, SGM_TM * BN>;  // = BM * SGM_TN
var<workgroup> tedge: array<f32, 4u * SGM_TM * SGM_TN>;

// vec4 v of the stage starting at k0: A (a_t: stored k x m) or B (b_t: stored n x k).
// Rows past the matrix, and k past p.k, read as zeros.
fn load_a(a_t: bool, v: u32, m0: u32, k0: u32, k_hi: u32) -> vec4<u32> {
    if (v >= AV) { return vec4<u32>(); }
    if (a_t) {
        let r = k0 + v / (BM / 8u);
        let c = m0 + (v % (BM / 8u)) * 8u;
        if (r >= k_hi || c >= p.m) { return vec4<u32>(); }
        return a4[(r * p.m + c) / 8u];
    }
    let r = m0 + v / (BK / 8u);
    let c = k0 + (v % (BK / 8u)) * 8u;
    if (r >= p.m || c >= k_hi) { return vec4<u32>(); }
    return a4[(r * p.k + c) / 8u];
}

fn load_b(b_t: bool, v: u32, n0: u32, k0: u32, k_hi: u32) -> vec4<u32> {
    if (v >= BV) { return vec4<u32>(); }
    if (b_t) {
        let r = n0 + v / (BK / 8u);
        let c = k0 + (v % (BK / 8u)) * 8u;
        if (r >= p.n || c >= k_hi) { return vec4<u32>(); }
        return b4[(r * p.k + c) / 8u];
    }
    let r = k0 + v / (BN / 8u);
    let c = n0 + (v % (BN / 8u)) * 8u;
    if (r >= k_hi || c >= p.n) { return vec4<u32>(); }
    return b4[(r * p.n + c) / 8u];
}

fn store_a(a_t: bool, v: u32, x: vec4<u32>) {
    if (v >= AV) { return; }
    if (a_t) { ta[(v / (BM / 8u)) * SAT + v % (BM / 8u)] = x; }
    else { ta[(v / (BK / 8u)) * SA + v % (BK / 8u)] = x; }
}

fn store_b(b_t: bool, v: u32, x: vec4<u32>) {
    if (v >= BV) { return; }
    if (b_t) { tb[(v / (BK / 8u)) * SBT + v % (BK / 8u)] = x; }
    else { tb[(v / (BN / 8u)) * SB + v % (BN / 8u)] = x; }
}

// Fragment (row r0, k kk) of the A tile and (k kk, column c0) of the B tile;
// offsets and strides count vec4s of the tile arrays.
fn frag_a(a_t: bool, r0: u32, kk: u32) -> LT {
    if (a_t) { return subgroupMatrixLoad<LT, col_major>(&ta, kk * SAT + r0 / 8u, SAT); }
    return subgroupMatrixLoad<LT, row_major>(&ta, r0 * SA + kk / 8u, SA);
}

fn frag_b(b_t: bool, kk: u32, c0: u32) -> RT {
    if (b_t) { return subgroupMatrixLoad<RT, col_major>(&tb, c0 * SBT + kk / 8u, SBT); }
    return subgroupMatrixLoad<RT, row_major>(&tb, kk * SB + c0 / 8u, SB);
}

// Bit 2 of p.flag: the output is stored transposed, element (i, j) of the
// m x n product at out[j * m + i] (an n x m array): a product whose operands
// are both row-major gives the forward and the weight gradient that way
// (docs/kernels/03_linear_sgm.md).
fn transposed() -> bool { return (p.flag & 4u) != 0u; }

// Offset of output element (row, col) in out's split o_base.
fn out_at(o_base: u32, row: u32, col: u32) -> u32 {
    return select(o_base + row * p.n + col, o_base + col * p.m + row, transposed());
}

// The initial accumulator of the fragment at output (row, col), (lrow, lcol)
// in the block: the output's present value (flag bit 0; through tedge at edge
// blocks), else the bias (bit 1; from tbias: by column, or by row when
// transposed), else zero. No kernel asks for both.
fn init_c(o_base: u32, row: u32, col: u32, lrow: u32, lcol: u32, sg: u32, lane: u32, edge: bool) -> CT {
    var c = CT();
    if ((p.flag & 1u) != 0u) {
        if (edge) {
            let base = sg * SGM_TM * SGM_TN;
            for (var e = lane; e < SGM_TM * SGM_TN; e += SGM_SG) {
                let r = row + e / SGM_TN;
                let q = col + e % SGM_TN;
                tedge[base + e] = select(0.0, out[out_at(o_base, r, q)], r < p.m && q < p.n);
            }
            workgroupBarrier();
            c = subgroupMatrixLoad<CT, row_major>(&tedge, base, SGM_TN);
            workgroupBarrier();
        } else if (transposed()) {
            c = subgroupMatrixLoad<CT, col_major>(&out, o_base + col * p.m + row, p.m);
        } else {
            c = subgroupMatrixLoad<CT, row_major>(&out, o_base + row * p.n + col, p.n);
        }
    } else if ((p.flag & 2u) != 0u) {
        if (transposed()) { c = subgroupMatrixLoad<CT, row_major>(&tbias, lrow * SGM_TN, SGM_TN); }
        else { c = subgroupMatrixLoad<CT, row_major>(&tbias, lcol, BN); }
    }
    return c;
}

fn store_c(o_base: u32, c: CT, row: u32, col: u32, sg: u32, lane: u32, edge: bool) {
    if (!edge) {
        if (transposed()) { subgroupMatrixStore<col_major>(&out, o_base + col * p.m + row, c, p.m); }
        else { subgroupMatrixStore<row_major>(&out, o_base + row * p.n + col, c, p.n); }
        return;
    }
    let base = sg * SGM_TM * SGM_TN;
    subgroupMatrixStore<row_major>(&tedge, base, c, SGM_TN);
    workgroupBarrier();
    for (var e = lane; e < SGM_TM * SGM_TN; e += SGM_SG) {
        let r = row + e / SGM_TN;
        let q = col + e % SGM_TN;
        if (r < p.m && q < p.n) { out[out_at(o_base, r, q)] = tedge[base + e]; }
    }
    workgroupBarrier();
}

// One BM x BN block of the output. Stage k0 + BK is read from global memory
// into registers while stage k0 is multiplied out of workgroup memory.
// sg, lane: the subgroup (0..3: the engine picks a configuration whose
// subgroup size is fixed at SGM_SG) and the invocation in it.
fn sgm_block(a_t: bool, b_t: bool, wid: vec3<u32>, lidx: u32, sg: u32, lane: u32) {
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    let sr = m0 + (sg / 2u) * 4u * SGM_TM;  // this subgroup's 4 x 4 fragments start here
    let sc = n0 + (sg % 2u) * 4u * SGM_TN;
    let lr = (sg / 2u) * 4u * SGM_TM;       // ... and here in the tiles
    let lc = (sg % 2u) * 4u * SGM_TN;
    let edge = m0 + BM > p.m || n0 + BN > p.n;
    // This workgroup's k range and the first float of its output (its split's
    // partial). Lets of uniform values, so the stage loop's barriers stay in
    // uniform control flow (a var<private> would not be).
    let split = p.ks != 0u;
    let k_lo = select(0u, wid.z * p.ks, split);
    let k_hi = select(p.k, max(min(k_lo + p.ks, p.k), k_lo), split);  // the host makes no empty split
    let o_base = select(0u, wid.z * p.m * p.n, split);

    if ((p.flag & 2u) != 0u) {
        // SGM_TM rows of the block's BN column biases, or (transposed) BM rows
        // of SGM_TN copies of each row's bias: the same BM * SGM_TN floats.
        for (var e = lidx; e < SGM_TM * BN; e += NT) {
            let q = select(n0 + e % BN, m0 + e / SGM_TN, transposed());
            let hi = select(p.n, p.m, transposed());
            tbias[e] = select(0.0, bias[min(q, hi - 1u)], q < hi);
        }
    }
    workgroupBarrier();
    var c00 = init_c(o_base, sr, sc, lr, lc, sg, lane, edge);
    var c01 = init_c(o_base, sr, sc + SGM_TN, lr, lc + SGM_TN, sg, lane, edge);
    var c02 = init_c(o_base, sr, sc + 2u * SGM_TN, lr, lc + 2u * SGM_TN, sg, lane, edge);
    var c03 = init_c(o_base, sr, sc + 3u * SGM_TN, lr, lc + 3u * SGM_TN, sg, lane, edge);
    var c10 = init_c(o_base, sr + SGM_TM, sc, lr + SGM_TM, lc, sg, lane, edge);
    var c11 = init_c(o_base, sr + SGM_TM, sc + SGM_TN, lr + SGM_TM, lc + SGM_TN, sg, lane, edge);
    var c12 = init_c(o_base, sr + SGM_TM, sc + 2u * SGM_TN, lr + SGM_TM, lc + 2u * SGM_TN, sg, lane, edge);
    var c13 = init_c(o_base, sr + SGM_TM, sc + 3u * SGM_TN, lr + SGM_TM, lc + 3u * SGM_TN, sg, lane, edge);
    var c20 = init_c(o_base, sr + 2u * SGM_TM, sc, lr + 2u * SGM_TM, lc, sg, lane, edge);
    var c21 = init_c(o_base, sr + 2u * SGM_TM, sc + SGM_TN, lr + 2u * SGM_TM, lc + SGM_TN, sg, lane, edge);
    var c22 = init_c(o_base, sr + 2u * SGM_TM, sc + 2u * SGM_TN, lr + 2u * SGM_TM, lc + 2u * SGM_TN, sg, lane, edge);
    var c23 = init_c(o_base, sr + 2u * SGM_TM, sc + 3u * SGM_TN, lr + 2u * SGM_TM, lc + 3u * SGM_TN, sg, lane, edge);
    var c30 = init_c(o_base, sr + 3u * SGM_TM, sc, lr + 3u * SGM_TM, lc, sg, lane, edge);
    var c31 = init_c(o_base, sr + 3u * SGM_TM, sc + SGM_TN, lr + 3u * SGM_TM, lc + SGM_TN, sg, lane, edge);
    var c32 = init_c(o_base, sr + 3u * SGM_TM, sc + 2u * SGM_TN, lr + 3u * SGM_TM, lc + 2u * SGM_TN, sg, lane, edge);
    var c33 = init_c(o_base, sr + 3u * SGM_TM, sc + 3u * SGM_TN, lr + 3u * SGM_TM, lc + 3u * SGM_TN, sg, lane, edge);

    var ra: array<vec4<u32>, APT>;
    var rb: array<vec4<u32>, BPT>;
    for (var i = 0u; i < APT; i++) { ra[i] = load_a(a_t, lidx + i * NT, m0, k_lo, k_hi); }
    for (var i = 0u; i < BPT; i++) { rb[i] = load_b(b_t, lidx + i * NT, n0, k_lo, k_hi); }
    let stages = (k_hi - k_lo + BK - 1u) / BK;
    for (var s = 0u; s < stages; s++) {
        for (var i = 0u; i < APT; i++) { store_a(a_t, lidx + i * NT, ra[i]); }
        for (var i = 0u; i < BPT; i++) { store_b(b_t, lidx + i * NT, rb[i]); }
        workgroupBarrier();
        if (s + 1u < stages) {
            let k1 = k_lo + (s + 1u) * BK;
            for (var i = 0u; i < APT; i++) { ra[i] = load_a(a_t, lidx + i * NT, m0, k1, k_hi); }
            for (var i = 0u; i < BPT; i++) { rb[i] = load_b(b_t, lidx + i * NT, n0, k1, k_hi); }
        }
        for (var kk = 0u; kk < BK; kk += SGM_TK) {
            let a0 = frag_a(a_t, lr, kk);
            let a1 = frag_a(a_t, lr + SGM_TM, kk);
            let a2 = frag_a(a_t, lr + 2u * SGM_TM, kk);
            let a3 = frag_a(a_t, lr + 3u * SGM_TM, kk);
            let b0 = frag_b(b_t, kk, lc);
            let b1 = frag_b(b_t, kk, lc + SGM_TN);
            let b2 = frag_b(b_t, kk, lc + 2u * SGM_TN);
            let b3 = frag_b(b_t, kk, lc + 3u * SGM_TN);
            c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
            c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
            c02 = subgroupMatrixMultiplyAccumulate(a0, b2, c02);
            c03 = subgroupMatrixMultiplyAccumulate(a0, b3, c03);
            c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
            c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
            c12 = subgroupMatrixMultiplyAccumulate(a1, b2, c12);
            c13 = subgroupMatrixMultiplyAccumulate(a1, b3, c13);
            c20 = subgroupMatrixMultiplyAccumulate(a2, b0, c20);
            c21 = subgroupMatrixMultiplyAccumulate(a2, b1, c21);
            c22 = subgroupMatrixMultiplyAccumulate(a2, b2, c22);
            c23 = subgroupMatrixMultiplyAccumulate(a2, b3, c23);
            c30 = subgroupMatrixMultiplyAccumulate(a3, b0, c30);
            c31 = subgroupMatrixMultiplyAccumulate(a3, b1, c31);
            c32 = subgroupMatrixMultiplyAccumulate(a3, b2, c32);
            c33 = subgroupMatrixMultiplyAccumulate(a3, b3, c33);
        }
        workgroupBarrier();
    }
    store_c(o_base, c00, sr, sc, sg, lane, edge);
    store_c(o_base, c01, sr, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c02, sr, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c03, sr, sc + 3u * SGM_TN, sg, lane, edge);
    store_c(o_base, c10, sr + SGM_TM, sc, sg, lane, edge);
    store_c(o_base, c11, sr + SGM_TM, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c12, sr + SGM_TM, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c13, sr + SGM_TM, sc + 3u * SGM_TN, sg, lane, edge);
    store_c(o_base, c20, sr + 2u * SGM_TM, sc, sg, lane, edge);
    store_c(o_base, c21, sr + 2u * SGM_TM, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c22, sr + 2u * SGM_TM, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c23, sr + 2u * SGM_TM, sc + 3u * SGM_TN, sg, lane, edge);
    store_c(o_base, c30, sr + 3u * SGM_TM, sc, sg, lane, edge);
    store_c(o_base, c31, sr + 3u * SGM_TM, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c32, sr + 3u * SGM_TM, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c33, sr + 3u * SGM_TM, sc + 3u * SGM_TN, sg, lane, edge);
}

// --- KERNEL: matmul_sgm_forward ---
@compute @workgroup_size(NT)
fn matmul_sgm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                     @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    sgm_block(false, true, wid, lidx, sg, lane);
}

// --- KERNEL: matmul_sgm_backward_input ---
@compute @workgroup_size(NT)
fn matmul_sgm_backward_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                     @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    sgm_block(false, false, wid, lidx, sg, lane);
}

// --- KERNEL: matmul_sgm_backward_weight ---
@compute @workgroup_size(NT)
fn matmul_sgm_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                     @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    sgm_block(true, false, wid, lidx, sg, lane);
}
