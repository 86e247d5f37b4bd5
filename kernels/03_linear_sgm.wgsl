// 03_linear_sgm.wgsl: the linear layer's matmuls on subgroup matrices
// (tensor cores on NVIDIA): f16 operands, f32 accumulation and output.
//   matmul_sgm  out (m, n) = (or +=) a (m, k) @ b (k, n) (+ bias), both
//               operands row-major; stored as is or transposed (n, m)
// The host (src/model/linear_f16.c) runs all three passes of a linear layer
// through it, every operand row-major (the layout whose fragment loads are
// fastest, RESULTS section 16):
//   forward      out^T (OC, N) = weight (OC, C) @ inp^T (C, N), stored transposed
//   input pass   dinp (N, C)  = dout (N, OC) @ weight (OC, C)
//   weight pass  dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC), stored transposed
// where inp^T is a transposed f16 copy of the input (transpose_f16).
// Only devices with chromium-experimental-subgroup-matrix compile this file.
// The engine writes the fragment shape it chose from the adapter's f16 x f16 ->
// f32 configurations in front of it (src/gpu/kernel.c): SGM_TM x SGM_TK left
// times SGM_TK x SGM_TN right, for subgroups of SGM_SG invocations.
// Shapes: m, n and k multiples of 8 (every operand row a whole number of
// vec4<u32>, 8 halves each); any size otherwise: edge blocks are zero-filled
// on load and stored through workgroup memory with bounds checks.
// ABI: a (f16 as vec4<u32>), b (same), bias (f32; a stand-in when unused),
// out (f32), then `p: SgmParams`. Dispatch: one workgroup of 8 subgroups per
// BM x BN output block and split: grid (ceil(n / BN), ceil(m / BM), splits).
// Split-k (p.ks != 0): workgroup z sums k in [z * ks, (z + 1) * ks) and
// writes its partial block to out[z] (m x n floats each; flag bit 2 kept,
// bits 0 and 1 not) for matmul_split_reduce to add in order of z.
// See docs/kernels/03_linear_sgm.md.

struct SgmParams {
    m: u32,     // output rows
    n: u32,     // output columns
    k: u32,     // reduction length
    flag: u32,  // bit 0: add to the output; bit 1: add bias (n; m when transposed); bit 2: store transposed
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

// 4 x 2 subgroups a workgroup, 2 x 4 fragments a subgroup (measured against
// 2 x 2 of 4 x 4, 2 x 4 of 4 x 2, 4 x 4 of 2 x 2, 8 x 1 of 1 x 8 and
// others: RESULTS section 16).
const NT: u32 = 8u * SGM_SG;        // threads a workgroup
const BM: u32 = 8u * SGM_TM;        // block rows
const BN: u32 = 8u * SGM_TN;        // block columns
const BK: u32 = 32u;                // k a stage
const_assert BK % SGM_TK == 0u;
const_assert SGM_TM % 8u == 0u && SGM_TN % 8u == 0u && SGM_TK % 8u == 0u;
// Stage tiles in vec4<u32> (8 halves), rows padded by one vec4 against bank conflicts.
const SA: u32 = BK / 8u + 1u;       // vec4 a row of the A tile [m][k]
const SB: u32 = BN / 8u + 1u;       // of the B tile [k][n]
const A_TILE: u32 = BM * SA;
const B_TILE: u32 = BK * SB;
const AV: u32 = BM * BK / 8u;       // vec4 a stage of A
const BV: u32 = BK * BN / 8u;
const APT: u32 = (AV + NT - 1u) / NT;  // vec4 a thread loads a stage
const BPT: u32 = (BV + NT - 1u) / NT;
var<workgroup> ta: array<vec4<u32>, A_TILE>;
var<workgroup> tb: array<vec4<u32>, B_TILE>;
// The bias broadcast over SGM_TM rows (initial accumulators), and each subgroup's
// fragment on its way to or from an edge block.
var<workgroup> tbias: array<f32, SGM_TM * BN>;  // = BM * SGM_TN
var<workgroup> tedge: array<f32, 8u * SGM_TM * SGM_TN>;

// vec4 v of the stage starting at k0: of A (m x k) or of B (k x n). Rows
// past the matrix, and k past k_hi, read as zeros.
fn load_a(v: u32, m0: u32, k0: u32, k_hi: u32) -> vec4<u32> {
    if (v >= AV) { return vec4<u32>(); }
    let r = m0 + v / (BK / 8u);
    let c = k0 + (v % (BK / 8u)) * 8u;
    if (r >= p.m || c >= k_hi) { return vec4<u32>(); }
    return a4[(r * p.k + c) / 8u];
}

fn load_b(v: u32, n0: u32, k0: u32, k_hi: u32) -> vec4<u32> {
    if (v >= BV) { return vec4<u32>(); }
    let r = k0 + v / (BN / 8u);
    let c = n0 + (v % (BN / 8u)) * 8u;
    if (r >= k_hi || c >= p.n) { return vec4<u32>(); }
    return b4[(r * p.n + c) / 8u];
}

fn store_a(v: u32, x: vec4<u32>) {
    if (v < AV) { ta[(v / (BK / 8u)) * SA + v % (BK / 8u)] = x; }
}

fn store_b(v: u32, x: vec4<u32>) {
    if (v < BV) { tb[(v / (BN / 8u)) * SB + v % (BN / 8u)] = x; }
}

// Fragment (row r0, k kk) of the A tile and (k kk, column c0) of the B tile;
// offsets and strides count vec4s of the tile arrays.
fn frag_a(r0: u32, kk: u32) -> LT { return subgroupMatrixLoad<LT, row_major>(&ta, r0 * SA + kk / 8u, SA); }

fn frag_b(kk: u32, c0: u32) -> RT { return subgroupMatrixLoad<RT, row_major>(&tb, kk * SB + c0 / 8u, SB); }

// Bit 2 of p.flag: the output is stored transposed, element (i, j) of the
// m x n product at out[j * m + i] (an n x m array): the forward and the
// weight gradient come out that way from row-major operands.
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
// sg, lane: the subgroup (0..7: the engine picks a configuration whose
// subgroup size is fixed at SGM_SG) and the invocation in it.
fn sgm_block(wid: vec3<u32>, lidx: u32, sg: u32, lane: u32) {
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    let sr = m0 + (sg / 2u) * 2u * SGM_TM;  // this subgroup's 2 x 4 fragments start here
    let sc = n0 + (sg % 2u) * 4u * SGM_TN;
    let lr = (sg / 2u) * 2u * SGM_TM;       // ... and here in the tiles
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
    var c0_0 = init_c(o_base, sr, sc, lr, lc, sg, lane, edge);
    var c0_1 = init_c(o_base, sr, sc + SGM_TN, lr, lc + SGM_TN, sg, lane, edge);
    var c0_2 = init_c(o_base, sr, sc + 2u * SGM_TN, lr, lc + 2u * SGM_TN, sg, lane, edge);
    var c0_3 = init_c(o_base, sr, sc + 3u * SGM_TN, lr, lc + 3u * SGM_TN, sg, lane, edge);
    var c1_0 = init_c(o_base, sr + SGM_TM, sc, lr + SGM_TM, lc, sg, lane, edge);
    var c1_1 = init_c(o_base, sr + SGM_TM, sc + SGM_TN, lr + SGM_TM, lc + SGM_TN, sg, lane, edge);
    var c1_2 = init_c(o_base, sr + SGM_TM, sc + 2u * SGM_TN, lr + SGM_TM, lc + 2u * SGM_TN, sg, lane, edge);
    var c1_3 = init_c(o_base, sr + SGM_TM, sc + 3u * SGM_TN, lr + SGM_TM, lc + 3u * SGM_TN, sg, lane, edge);

    var ra: array<vec4<u32>, APT>;
    var rb: array<vec4<u32>, BPT>;
    for (var i = 0u; i < APT; i++) { ra[i] = load_a(lidx + i * NT, m0, k_lo, k_hi); }
    for (var i = 0u; i < BPT; i++) { rb[i] = load_b(lidx + i * NT, n0, k_lo, k_hi); }
    let stages = (k_hi - k_lo + BK - 1u) / BK;
    for (var s = 0u; s < stages; s++) {
        for (var i = 0u; i < APT; i++) { store_a(lidx + i * NT, ra[i]); }
        for (var i = 0u; i < BPT; i++) { store_b(lidx + i * NT, rb[i]); }
        workgroupBarrier();
        if (s + 1u < stages) {
            let k1 = k_lo + (s + 1u) * BK;
            for (var i = 0u; i < APT; i++) { ra[i] = load_a(lidx + i * NT, m0, k1, k_hi); }
            for (var i = 0u; i < BPT; i++) { rb[i] = load_b(lidx + i * NT, n0, k1, k_hi); }
        }
        for (var kk = 0u; kk < BK; kk += SGM_TK) {
            let a0 = frag_a(lr, kk);
            let a1 = frag_a(lr + SGM_TM, kk);
            let b0 = frag_b(kk, lc);
            let b1 = frag_b(kk, lc + SGM_TN);
            let b2 = frag_b(kk, lc + 2u * SGM_TN);
            let b3 = frag_b(kk, lc + 3u * SGM_TN);
            c0_0 = subgroupMatrixMultiplyAccumulate(a0, b0, c0_0);
            c0_1 = subgroupMatrixMultiplyAccumulate(a0, b1, c0_1);
            c0_2 = subgroupMatrixMultiplyAccumulate(a0, b2, c0_2);
            c0_3 = subgroupMatrixMultiplyAccumulate(a0, b3, c0_3);
            c1_0 = subgroupMatrixMultiplyAccumulate(a1, b0, c1_0);
            c1_1 = subgroupMatrixMultiplyAccumulate(a1, b1, c1_1);
            c1_2 = subgroupMatrixMultiplyAccumulate(a1, b2, c1_2);
            c1_3 = subgroupMatrixMultiplyAccumulate(a1, b3, c1_3);
        }
        workgroupBarrier();
    }
    store_c(o_base, c0_0, sr, sc, sg, lane, edge);
    store_c(o_base, c0_1, sr, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c0_2, sr, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c0_3, sr, sc + 3u * SGM_TN, sg, lane, edge);
    store_c(o_base, c1_0, sr + SGM_TM, sc, sg, lane, edge);
    store_c(o_base, c1_1, sr + SGM_TM, sc + SGM_TN, sg, lane, edge);
    store_c(o_base, c1_2, sr + SGM_TM, sc + 2u * SGM_TN, sg, lane, edge);
    store_c(o_base, c1_3, sr + SGM_TM, sc + 3u * SGM_TN, sg, lane, edge);
}

// --- KERNEL: matmul_sgm ---
@compute @workgroup_size(NT)
fn matmul_sgm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
              @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    sgm_block(wid, lidx, sg, lane);
}
