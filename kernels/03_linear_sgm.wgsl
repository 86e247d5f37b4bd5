// 03_linear_sgm.wgsl: the linear layer's matmuls on subgroup matrices
// (tensor cores on NVIDIA): f16 operands, f32 accumulation and output.
//   matmul_sgm  out (m, n) = (or +=) a (m, k) @ b (k, n) (+ bias), both
//               operands row-major; stored as is or transposed (n, m)
// The host (src/model/linear_f16.c) runs all three passes of a linear layer
// through it, every operand row-major (the layout whose fragment loads are
// fastest, 17d4ba4:bench/RESULTS.md section 16):
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
// out (f32), out16 (f16 pairs as u32; a stand-in when unused), then `p: SgmParams`. Dispatch: one workgroup per 128 x BN output
// block and split, grid (ceil(n / BN), ceil(m / 128), splits): matmul_sgm, BN
// 128, 8 subgroups; matmul_sgm_wide, BN 256, 16 subgroups (the host picks);
// persistent twins (_p: a workgroup a compute unit, each through its share of
// the blocks) and stream-K ones (_sk: each through an equal share of all
// blocks' stages, partials to out for matmul_streamk_reduce) take (wgs, 1, 1).
// The f16 epilogue (flag bit 3, never with bit 0 or a split; only in the
// _epi variants, EPI = 1): each output value, after the bias, also goes to
// out16 rounded to f16 (f16_pair), as out is stored or (bit 5) as the
// product is, GELU'd first (bit 4), and with bit 6 not to out at all (a
// forward could write the next step's f16 input so; on an H100 that was
// slower than the passes it saves, and the model does not). With bit 7 (and
// 3 and 6; not 0, 1, 2 or 5) each value is first multiplied by GELU' of the
// same element of the `bias` binding, then written to out and to out16 by
// the f16 walk: fcproj's input pass gives the fc output's gradient and its
// f16 copy, no GELU backward pass.
// Split-k (p.ks != 0): workgroup z sums k in [z * ks, (z + 1) * ks) and
// writes its partial block to out[z] (m x n floats each; flag bit 2 kept,
// bits 0 and 1 not) for matmul_split_reduce to add in order of z.
// See docs/kernels/03_linear_sgm.md.

struct SgmParams {
    m: u32,     // output rows
    n: u32,     // output columns
    k: u32,     // reduction length
    flag: u32,  // bit 0: add to the output; bit 1: add bias (n; m when transposed); bit 2: store transposed;
                // bit 3: an f16 copy to out16 (as out is stored; bit 5: as the product is, (m, n));
                // bit 4: GELU applied to that copy; bit 6: no f32 output from the f32 walk;
                // bit 7: times GELU'(the GELU's input, bound as `bias`), out written by the f16 walk
    ks: u32,    // k per split (a multiple of BK), 0: no split
    sk: u32,    // stream-K (PERSIST only): stages of BK a workgroup, 0: none
    group: u32, // PERSIST: block rows a group of the order the blocks are taken in (block_of), 0: x fastest
    pad: u32,
}

@group(0) @binding(0) var<storage, read> a4: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> b4: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;  // or, flag bit 7, the GELU's input (out's shape)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> out16: array<u32>;  // halves, two a u32 (flag bit 3; else a stand-in)
@group(0) @binding(5) var<uniform> p: SgmParams;

alias LT = subgroup_matrix_left<f16, SGM_TK, SGM_TM>;    // SGM_TM rows x SGM_TK columns
alias RT = subgroup_matrix_right<f16, SGM_TN, SGM_TK>;   // SGM_TK rows x SGM_TN columns
alias CT = subgroup_matrix_result<f32, SGM_TN, SGM_TM>;  // SGM_TM rows x SGM_TN columns

// The block: 128 x BN outputs, 2 x (BN / 32) subgroups of 64 x 32 each (FM x
// FN fragments), k in stages of BK. Two blocks, overrides set by the
// variant markers: matmul_sgm, 128 x 128 in stages of 64 (8 subgroups), and
// matmul_sgm_wide, 128 x 256 in stages of 32 (16 subgroups; 32, so that its
// tiles fit 48 KiB). The H200's driver gives the 128 x 128 kernel 186
// registers a thread, one workgroup (8 subgroups) a compute unit; the wide
// one is held to 128 (512 threads share the 64 K registers) and runs 16
// subgroups a unit: 4096^3 0.66 -> 0.61 ms, but it has half the blocks, so
// src/model/linear_f16.c picks it only where the waves come out shorter
// (17d4ba4:bench/RESULTS.md section 19). Measured against 128 x 64, 256 x 64, 256 x 128,
// 4 x 4 subgroups, stages of 32 and 48, no register prefetch, double-buffered
// tiles: 17d4ba4:bench/RESULTS.md sections 17 and 19. This file holds up to 4 x 4 fragments a
// subgroup: SGM_TM = 16 and SGM_TN = 8 or 16 (the engine picks no other shape).
override BN: u32 = 128u;            // block columns: 128 or 256
// 1: the f16 epilogue is compiled in (the _epi variants, which the host runs
// only for the passes that use it), so that the other passes run a kernel
// without its code (docs/kernels/03_linear_sgm.md, 17d4ba4:bench/RESULTS.md section 22)
override EPI: u32 = 0u;
override BK: u32 = 64u;             // k a stage: 64 or 32 (16 in a _32k twin), a multiple of SGM_TK
const WM: u32 = 2u;                 // subgroups down the block
const BM: u32 = 128u;               // block rows
const ROW_F: u32 = 32u;             // columns a subgroup owns (floats across its row of fragments)
override WN: u32 = BN / ROW_F;      // subgroups across
override NT: u32 = WM * WN * SGM_SG;   // threads a workgroup
const FM: u32 = BM / WM / SGM_TM;   // fragments a subgroup, down
const FN: u32 = ROW_F / SGM_TN;     // and across
const_assert FM == 4u && (FN == 4u || FN == 2u);
const_assert SGM_TK % 8u == 0u;
// Stage tiles in vec4<u32> (8 halves), rows padded by one vec4 against bank conflicts.
override SA: u32 = BK / 8u + 1u;    // vec4 a row of the A tile [m][k]
override SB: u32 = BN / 8u + 1u;    // of the B tile [k][n]
override A_TILE: u32 = BM * SA;
override B_TILE: u32 = BK * SB;
override AV: u32 = BM * BK / 8u;    // vec4 a stage of A
override BV: u32 = BK * BN / 8u;
override APT: u32 = (AV + NT - 1u) / NT;  // vec4 a thread loads a stage (at most PT_MAX)
override BPT: u32 = (BV + NT - 1u) / NT;
// The private arrays' length: APT and BPT of the 128 x 128 block in stages of
// 64; the wide block's are half and a quarter of it.
const PT_MAX: u32 = (BM * 64u / 8u + 8u * SGM_SG - 1u) / (8u * SGM_SG);
// Two f32 areas live in the A tile outside the stage loop (48 KiB of
// workgroup memory would not hold them beside the tiles with 16 x 16
// fragments): before it, the bias broadcast over SGM_TM rows (BN columns, or
// transposed BM rows of SGM_TN), the initial accumulators' source; after it,
// the subgroups' fragments on their way to `out` (at the edges of the output,
// and where the product is added to it), OUT_SG subgroups at a time.
override BIAS_F: u32 = max(SGM_TM * BN, BM * SGM_TN);  // floats of the bias area
const OS: u32 = ROW_F + 4u;                          // row stride of a subgroup's out area (+4: fewer bank conflicts)
const OUT_F: u32 = SGM_TM * OS;                      // floats of a subgroup's out area
const OUT_PER_LANE: u32 = SGM_TM * ROW_F / SGM_SG;   // floats of it a lane stores
const OUT_SG: u32 = 8u;                              // subgroups whose out areas the A tile holds at once
override OUT_ROUNDS: u32 = (WM * WN + OUT_SG - 1u) / OUT_SG;
override TA_N: u32 = max(A_TILE, max(BIAS_F, OUT_SG * OUT_F) / 4u);  // vec4 of the A tile's array
const_assert SGM_TM * ROW_F % SGM_SG == 0u && OUT_PER_LANE % 2u == 0u;
const NOWHERE: u32 = 0xffffffffu;
var<workgroup> ta: array<vec4<u32>, TA_N>;
var<workgroup> tb: array<vec4<u32>, B_TILE>;

// Float i of the A tile seen as f32 (the bias and out areas).
fn ta_set(i: u32, x: f32) { ta[i / 4u][i % 4u] = bitcast<u32>(x); }

fn ta_get(i: u32) -> f32 { return bitcast<f32>(ta[i / 4u][i % 4u]); }

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

// The initial accumulator of the fragment at (lrow, lcol) in the block: the
// bias (flag bit 1; from the bias area: by column, or by row when
// transposed), else zero. Offsets and strides into ta count vec4s: SGM_TN
// and BN are multiples of 4.
fn init_c(lrow: u32, lcol: u32) -> CT {
    if ((p.flag & 2u) == 0u) { return CT(); }
    if (transposed()) { return subgroupMatrixLoad<CT, row_major>(&ta, lrow * SGM_TN / 4u, SGM_TN / 4u); }
    return subgroupMatrixLoad<CT, row_major>(&ta, lcol / 4u, BN / 4u);
}

// A fragment stored as it is, at output (row, col) (transposed: col_major).
fn store_c(o_base: u32, c: CT, row: u32, col: u32) {
    if (transposed()) { subgroupMatrixStore<col_major>(&out, o_base + col * p.m + row, c, p.m); }
    else { subgroupMatrixStore<row_major>(&out, o_base + row * p.n + col, c, p.n); }
}

// Stores one row of the subgroup's fragments (c0 .. c3, at output row `row`,
// columns col, col + SGM_TN, ...; c2 and c3 only where FN is 4). With flag
// bit 0 the product is added to the output's present value after the whole
// sum, out + (a b), not summed onto it a fragment step at a time: the order
// in which the host adds gradients of several ranks, so that N ranks and one
// process of N micro-batches agree (tests/test_dist.c). That sum, and a block
// at the edge of the output, go through the subgroup's area of workgroup
// memory (SGM_TM rows of ROW_F floats, row stride OS): every lane loads its
// OUT_PER_LANE present values before it adds and stores any (one wait for
// memory a row of fragments, not one a fragment); a transposed output is
// walked by columns so that neighbouring lanes write neighbouring floats.
// Every subgroup calls this alike (the conditions are uniform), so the
// barriers are too.
@diagnostic(off, subgroup_uniformity)  // subgroupMatrixStore under `mine`, which is per subgroup
fn store_row(o_base: u32, row: u32, col: u32, sg: u32, lane: u32, edge: bool, c0: CT, c1: CT, c2: CT, c3: CT) {
    let add = (p.flag & 1u) != 0u;
    let f16 = EPI != 0u && (p.flag & 8u) != 0u;
    if (!edge && !add && !f16) {
        store_c(o_base, c0, row, col);
        store_c(o_base, c1, row, col + SGM_TN);
        if (FN == 4u) {
            store_c(o_base, c2, row, col + 2u * SGM_TN);
            store_c(o_base, c3, row, col + 3u * SGM_TN);
        }
        return;
    }
    for (var part = 0u; part < OUT_ROUNDS; part++) {
        let mine = sg / OUT_SG == part;  // uniform in the subgroup
        let base = (sg % OUT_SG) * OUT_F;
        if (mine) {
            subgroupMatrixStore<row_major>(&ta, base / 4u, c0, OS / 4u);
            subgroupMatrixStore<row_major>(&ta, (base + SGM_TN) / 4u, c1, OS / 4u);
            if (FN == 4u) {
                subgroupMatrixStore<row_major>(&ta, (base + 2u * SGM_TN) / 4u, c2, OS / 4u);
                subgroupMatrixStore<row_major>(&ta, (base + 3u * SGM_TN) / 4u, c3, OS / 4u);
            }
        }
        workgroupBarrier();
        if (mine && f16) { store_f16(row, col, base, lane); }
        if (mine && !(f16 && (p.flag & 64u) != 0u)) {
            var at: array<u32, OUT_PER_LANE>;    // where each of this lane's floats goes (NOWHERE: outside the output)
            var old: array<f32, OUT_PER_LANE>;   // the present values there
            for (var t = 0u; t < OUT_PER_LANE; t++) {
                let e = lane + t * SGM_SG;
                let r = select(e / ROW_F, e % SGM_TM, transposed());
                let q = select(e % ROW_F, e / SGM_TM, transposed());
                let inside = row + r < p.m && col + q < p.n;
                at[t] = select(NOWHERE, out_at(o_base, row + r, col + q), inside);
                old[t] = 0.0;
                if (inside && add) { old[t] = out[at[t]]; }
            }
            for (var t = 0u; t < OUT_PER_LANE; t++) {
                let e = lane + t * SGM_SG;
                let r = select(e / ROW_F, e % SGM_TM, transposed());
                let q = select(e % ROW_F, e / SGM_TM, transposed());
                if (at[t] != NOWHERE) { out[at[t]] = old[t] + ta_get(base + r * OS + q); }
            }
        }
        workgroupBarrier();
    }
}

// The f16 epilogue of one subgroup's out area (SGM_TM rows of ROW_F floats
// at output (row, col)): pairs of neighbours in out16's layout, so that each
// lane writes whole u32s; m and n are multiples of 8, so a pair is inside the
// output or outside it whole.
fn store_f16(row: u32, col: u32, base: u32, lane: u32) {
    let nat = (p.flag & 32u) != 0u || !transposed();  // out16 is (m, n) row-major, else (n, m)
    let gelu = (p.flag & 16u) != 0u;
    let grad = (p.flag & 128u) != 0u;  // (nat, not transposed: out's index is out16's)
    for (var t = 0u; t < OUT_PER_LANE / 2u; t++) {
        let e = lane + t * SGM_SG;
        let r = select((e % (SGM_TM / 2u)) * 2u, e / (ROW_F / 2u), nat);
        let q = select(e / (SGM_TM / 2u), (e % (ROW_F / 2u)) * 2u, nat);
        if (row + r < p.m && col + q < p.n) {
            var x = ta_get(base + r * OS + q);
            var y = ta_get(select(base + (r + 1u) * OS + q, base + r * OS + q + 1u, nat));
            if (gelu) {
                x = gelu_value(x);
                y = gelu_value(y);
            }
            if (grad) {
                let i = (row + r) * p.n + col + q;
                x *= gelu_grad(bias[i]);
                y *= gelu_grad(bias[i + 1u]);
                out[i] = x;
                out[i + 1u] = y;
            }
            out16[select((col + q) * p.m + row + r, (row + r) * p.n + col + q, nat) / 2u] = f16_pair(x, y);
        }
    }
}

// PERSIST: a workgroup a compute unit (the host's grid), each taking blocks
// t, t + the workgroups, ... in the order of a full grid's (x fastest, then
// y, then the split), its next block's first stage fetched during the last
// stage of the one before, so that a block's stores and the next one's first
// loads overlap the products instead of draining the unit between waves.
override PERSIST: u32 = 0u;
// STREAMK (with PERSIST; the _sk twins): the blocks' stages laid end to end,
// block after block, workgroup w takes stages [w sk, (w + 1) sk) of them
// (p.sk), so that every unit does the same work however few the blocks;
// each piece of a block it covers goes to partial `slot` w - (the first
// workgroup on that block) of out (m x n floats a slot), for
// matmul_streamk_reduce to add in order. An override, so that the other
// variants compile without it: the stream-K code in the kernels of every
// pass cost them registers and local memory (on an H100 the 128 x 128
// block 185 -> 196 registers, the wide one's local memory 48 -> 80 bytes).
override STREAMK: u32 = 0u;

// Block t of a (tx, ty, splits) grid, in the order the persistent
// workgroups take them: x fastest (p.group 0), or in groups of p.group block
// rows, down a group's column of blocks first, then the next column, so that
// the workgroups of a wave share B's columns (and A's rows) in the L2 cache
// instead of each wave reading all of B again.
fn block_of(t: u32, tx: u32, ty: u32) -> vec3<u32> {
    let z = t / (tx * ty);
    let r = t % (tx * ty);
    if (p.group == 0u) { return vec3<u32>(r % tx, r / tx, z); }
    let y0 = (r / (p.group * tx)) * p.group;  // the group's first block row
    let h = min(p.group, ty - y0);             // its rows (the last group may have fewer)
    let i = r - y0 * tx;
    return vec3<u32>(i / h, y0 + i % h, z);
}

fn k_lo_of(z: u32) -> u32 { return select(0u, z * p.ks, p.ks != 0u); }

fn k_hi_of(z: u32) -> u32 {
    let lo = k_lo_of(z);
    return select(p.k, max(min(lo + p.ks, p.k), lo), p.ks != 0u);  // the host makes no empty split
}

// Piece t of a workgroup (w): a block of the grid, t its index (x, y and
// the split z: block_of), or with stream-K (`stream`) the stages from stage
// t of all blocks' end to end (stages a block `per`) to the end of its block
// or of the workgroup's share (end), z its slot. Kept as (t, block) so that
// the persistent loop carries no more than it did without stream-K.
fn piece_blk(t: u32, stream: bool, w: u32, tx: u32, ty: u32, per: u32) -> vec3<u32> {
    if (!stream) { return block_of(t, tx, ty); }
    let b = t / per;
    return vec3<u32>(b % tx, b / tx, w - (b * per) / p.sk);
}

// Where the piece after piece t (of block blk) starts: step pieces on, or
// (stream-K) at its block's end or the workgroup's.
fn piece_next(t: u32, blk: vec3<u32>, stream: bool, step: u32, end: u32, tx: u32, per: u32) -> u32 {
    if (!stream) { return t + step; }
    return min(end, ((blk.y * tx + blk.x) + 1u) * per);
}

// The k a piece sums: [lo, hi).
fn piece_k(t: u32, blk: vec3<u32>, stream: bool, end: u32, tx: u32, per: u32) -> vec2<u32> {
    if (!stream) { return vec2<u32>(k_lo_of(blk.z), k_hi_of(blk.z)); }
    let s0 = (blk.y * tx + blk.x) * per;
    return vec2<u32>((t - s0) * BK, min((piece_next(t, blk, true, 0u, end, tx, per) - s0) * BK, p.k));
}

// One BM x BN block of the output. Stage k0 + BK is read from global memory
// into registers while stage k0 is multiplied out of workgroup memory (without
// that prefetch: 0.78x). sg, lane: the subgroup (the engine picks a
// configuration whose subgroup size is fixed at SGM_SG) and the invocation in
// it. Fragment (i, j) of the subgroup is c{i}_{j}; columns 2 and 3 only where
// FN is 4 (a constant: the compiler drops the rest). With PERSIST, the
// pieces of a persistent workgroup, one after the other.
fn sgm_block(wid: vec3<u32>, nwg: vec3<u32>, lidx: u32, sg: u32, lane: u32) {
    let tx = (p.n + BN - 1u) / BN;
    let ty = (p.m + BM - 1u) / BM;
    let per = (p.k + BK - 1u) / BK;  // stages a block (stream-K)
    let stream = STREAMK != 0u;
    // t: this workgroup's first piece; end: past its last
    var t = select(wid.x, wid.x * p.sk, stream);
    let end = select(tx * ty * select(1u, (p.k + p.ks - 1u) / p.ks, p.ks != 0u), min(t + p.sk, tx * ty * per), stream);
    if (stream && t >= end) { return; }  // (the last workgroups may have none; uniform)
    var blk = select(wid, piece_blk(t, stream, wid.x, tx, ty, per), PERSIST != 0u);
    let lr = (sg / WN) * FM * SGM_TM;  // this subgroup's fragments start here in the block
    let lc = (sg % WN) * FN * SGM_TN;

    var ra: array<vec4<u32>, PT_MAX>;
    var rb: array<vec4<u32>, PT_MAX>;
    {
        let k = piece_k(t, blk, stream, end, tx, per);
        for (var i = 0u; i < APT; i++) { ra[i] = load_a(lidx + i * NT, blk.y * BM, k.x, k.y); }
        for (var i = 0u; i < BPT; i++) { rb[i] = load_b(lidx + i * NT, blk.x * BN, k.x, k.y); }
    }
    loop {
        let m0 = blk.y * BM;
        let n0 = blk.x * BN;
        let sr = m0 + lr;                  // this subgroup's fragments start here in the output
        let sc = n0 + lc;
        let edge = m0 + BM > p.m || n0 + BN > p.n;
        // This piece's k range and the first float of its output (its split's
        // or slot's partial). Lets of uniform values, so the stage loop's
        // barriers stay in uniform control flow (a var<private> would not be).
        let k = piece_k(t, blk, stream, end, tx, per);
        let k_lo = k.x;
        let k_hi = k.y;
        let o_base = select(0u, blk.z * p.m * p.n, p.ks != 0u || stream);
        // the next piece of a persistent workgroup (none: nt >= end)
        let nt = select(end, piece_next(t, blk, stream, nwg.x, end, tx, per), PERSIST != 0u);
        let nblk = piece_blk(nt, stream, wid.x, tx, ty, per);
        if ((p.flag & 2u) != 0u) {
            // SGM_TM rows of the block's BN column biases, or (transposed) BM rows
            // of SGM_TN copies of each row's bias.
            for (var e = lidx; e < BIAS_F; e += NT) {
                let q = select(n0 + e % BN, m0 + e / SGM_TN, transposed());
                let hi = select(p.n, p.m, transposed());
                ta_set(e, select(0.0, bias[min(q, hi - 1u)], q < hi));
            }
        }
        workgroupBarrier();
        // (columns 2 and 3 are unused where FN is 2: the compiler drops them)
        var c0_0 = init_c(lr, lc);
        var c0_1 = init_c(lr, lc + SGM_TN);
        var c0_2 = init_c(lr, lc + 2u * SGM_TN);
        var c0_3 = init_c(lr, lc + 3u * SGM_TN);
        var c1_0 = init_c(lr + SGM_TM, lc);
        var c1_1 = init_c(lr + SGM_TM, lc + SGM_TN);
        var c1_2 = init_c(lr + SGM_TM, lc + 2u * SGM_TN);
        var c1_3 = init_c(lr + SGM_TM, lc + 3u * SGM_TN);
        var c2_0 = init_c(lr + 2u * SGM_TM, lc);
        var c2_1 = init_c(lr + 2u * SGM_TM, lc + SGM_TN);
        var c2_2 = init_c(lr + 2u * SGM_TM, lc + 2u * SGM_TN);
        var c2_3 = init_c(lr + 2u * SGM_TM, lc + 3u * SGM_TN);
        var c3_0 = init_c(lr + 3u * SGM_TM, lc);
        var c3_1 = init_c(lr + 3u * SGM_TM, lc + SGM_TN);
        var c3_2 = init_c(lr + 3u * SGM_TM, lc + 2u * SGM_TN);
        var c3_3 = init_c(lr + 3u * SGM_TM, lc + 3u * SGM_TN);
        workgroupBarrier();  // the bias area is read before the first stage overwrites it

        let stages = (k_hi - k_lo + BK - 1u) / BK;
        for (var s = 0u; s < stages; s++) {
            for (var i = 0u; i < APT; i++) { store_a(lidx + i * NT, ra[i]); }
            for (var i = 0u; i < BPT; i++) { store_b(lidx + i * NT, rb[i]); }
            workgroupBarrier();
            if (s + 1u < stages) {
                let k1 = k_lo + (s + 1u) * BK;
                for (var i = 0u; i < APT; i++) { ra[i] = load_a(lidx + i * NT, m0, k1, k_hi); }
                for (var i = 0u; i < BPT; i++) { rb[i] = load_b(lidx + i * NT, n0, k1, k_hi); }
            } else if (nt < end) {
                let k2 = piece_k(nt, nblk, stream, end, tx, per);
                for (var i = 0u; i < APT; i++) { ra[i] = load_a(lidx + i * NT, nblk.y * BM, k2.x, k2.y); }
                for (var i = 0u; i < BPT; i++) { rb[i] = load_b(lidx + i * NT, nblk.x * BN, k2.x, k2.y); }
            }
            for (var kk = 0u; kk < BK; kk += SGM_TK) {
                let a0 = frag_a(lr, kk);
                let a1 = frag_a(lr + SGM_TM, kk);
                let a2 = frag_a(lr + 2u * SGM_TM, kk);
                let a3 = frag_a(lr + 3u * SGM_TM, kk);
                let b0 = frag_b(kk, lc);
                let b1 = frag_b(kk, lc + SGM_TN);
                var b2 = RT();
                var b3 = RT();
                if (FN == 4u) {
                    b2 = frag_b(kk, lc + 2u * SGM_TN);
                    b3 = frag_b(kk, lc + 3u * SGM_TN);
                }
                c0_0 = subgroupMatrixMultiplyAccumulate(a0, b0, c0_0);
                c0_1 = subgroupMatrixMultiplyAccumulate(a0, b1, c0_1);
                c1_0 = subgroupMatrixMultiplyAccumulate(a1, b0, c1_0);
                c1_1 = subgroupMatrixMultiplyAccumulate(a1, b1, c1_1);
                c2_0 = subgroupMatrixMultiplyAccumulate(a2, b0, c2_0);
                c2_1 = subgroupMatrixMultiplyAccumulate(a2, b1, c2_1);
                c3_0 = subgroupMatrixMultiplyAccumulate(a3, b0, c3_0);
                c3_1 = subgroupMatrixMultiplyAccumulate(a3, b1, c3_1);
                if (FN == 4u) {
                    c0_2 = subgroupMatrixMultiplyAccumulate(a0, b2, c0_2);
                    c0_3 = subgroupMatrixMultiplyAccumulate(a0, b3, c0_3);
                    c1_2 = subgroupMatrixMultiplyAccumulate(a1, b2, c1_2);
                    c1_3 = subgroupMatrixMultiplyAccumulate(a1, b3, c1_3);
                    c2_2 = subgroupMatrixMultiplyAccumulate(a2, b2, c2_2);
                    c2_3 = subgroupMatrixMultiplyAccumulate(a2, b3, c2_3);
                    c3_2 = subgroupMatrixMultiplyAccumulate(a3, b2, c3_2);
                    c3_3 = subgroupMatrixMultiplyAccumulate(a3, b3, c3_3);
                }
            }
            workgroupBarrier();
        }
        store_row(o_base, sr, sc, sg, lane, edge, c0_0, c0_1, c0_2, c0_3);
        store_row(o_base, sr + SGM_TM, sc, sg, lane, edge, c1_0, c1_1, c1_2, c1_3);
        store_row(o_base, sr + 2u * SGM_TM, sc, sg, lane, edge, c2_0, c2_1, c2_2, c2_3);
        store_row(o_base, sr + 3u * SGM_TM, sc, sg, lane, edge, c3_0, c3_1, c3_2, c3_3);
        if (nt >= end) { break; }
        t = nt;
        blk = nblk;
    }
}

// --- KERNEL: matmul_sgm ---
// --- KERNEL: matmul_sgm_wide = matmul_sgm with BN=256,BK=32 ---
// --- KERNEL: matmul_sgm_epi = matmul_sgm with EPI=1 ---
// --- KERNEL: matmul_sgm_wide_epi = matmul_sgm with BN=256,BK=32,EPI=1 ---
// Persistent twins (PERSIST, above): where a grid has more blocks than the
// device has compute units.
// --- KERNEL: matmul_sgm_p = matmul_sgm with PERSIST=1 ---
// --- KERNEL: matmul_sgm_wide_p = matmul_sgm with BN=256,BK=32,PERSIST=1 ---
// --- KERNEL: matmul_sgm_epi_p = matmul_sgm with EPI=1,PERSIST=1 ---
// --- KERNEL: matmul_sgm_wide_epi_p = matmul_sgm with BN=256,BK=32,EPI=1,PERSIST=1 ---
// Stream-K twins (STREAMK, above), where the host plans it: never with the epilogue.
// --- KERNEL: matmul_sgm_sk = matmul_sgm with PERSIST=1,STREAMK=1 ---
// --- KERNEL: matmul_sgm_wide_sk = matmul_sgm with BN=256,BK=32,PERSIST=1,STREAMK=1 ---
// Twins for 32 KiB of workgroup memory (lavapipe; the blocks above take 35,840
// and 35,328 bytes): shorter stages, 27,136 and 26,880 bytes.
// --- KERNEL: matmul_sgm_32k = matmul_sgm with BK=32 ---
// --- KERNEL: matmul_sgm_wide_32k = matmul_sgm with BN=256,BK=16 ---
// --- KERNEL: matmul_sgm_epi_32k = matmul_sgm with BK=32,EPI=1 ---
// --- KERNEL: matmul_sgm_wide_epi_32k = matmul_sgm with BN=256,BK=16,EPI=1 ---
// --- KERNEL: matmul_sgm_32k_p = matmul_sgm with BK=32,PERSIST=1 ---
// --- KERNEL: matmul_sgm_wide_32k_p = matmul_sgm with BN=256,BK=16,PERSIST=1 ---
// --- KERNEL: matmul_sgm_epi_32k_p = matmul_sgm with BK=32,EPI=1,PERSIST=1 ---
// --- KERNEL: matmul_sgm_wide_epi_32k_p = matmul_sgm with BN=256,BK=16,EPI=1,PERSIST=1 ---
// --- KERNEL: matmul_sgm_32k_sk = matmul_sgm with BK=32,PERSIST=1,STREAMK=1 ---
// --- KERNEL: matmul_sgm_wide_32k_sk = matmul_sgm with BN=256,BK=16,PERSIST=1,STREAMK=1 ---
@compute @workgroup_size(NT)
fn matmul_sgm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32, @builtin(subgroup_id) sg: u32,
              @builtin(subgroup_invocation_id) lane: u32) {
    sgm_block(wid, nwg, lidx, sg, lane);
}
