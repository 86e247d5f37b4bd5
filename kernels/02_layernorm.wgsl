// 02_layernorm.wgsl: LayerNorm over the last axis of (N, C), forward and
// backward (eps 1e-5, biased variance; as tests/ref ref_layernorm_*).
// ABI: storage buffers at bindings 0..k-1, then `p: LnParams` at binding k.
// Dispatch: the row kernels take one workgroup of WG threads per row, N
// workgroups through dispatch1d (2D past 65535); layernorm_backward_params
// takes one workgroup per LN_COLS columns, ceil(C / LN_COLS) workgroups.
// Its two-phase replacement on GPUs (the host picks it when given a
// scratch): layernorm_params_part (or layernorm_params_part_vec4, for
// C % 4 == 0 and 16-byte aligned views) sums blocks of LN_PART_ROWS rows into
// the scratch `part`, ceil(C / LN_COLS) (vec4: ceil(C / 4 / LN_COLS)) column
// groups x ceil(N / LN_PART_ROWS) blocks of workgroups through dispatch1d;
// (one template, layernorm_params_partw, with the column type put in);
// then layernorm_params_reduce adds the blocks' partials in block order into
// dweight/dbias, ceil(C / LN_COLS) workgroups. Where the vec4 row kernels
// serve, layernorm_backward_vec4 replaces the input kernel and phase 1: dinp
// and the partials of LN_BWD_ROWS rows a workgroup, ceil(N / LN_BWD_ROWS)
// workgroups, one read of dout and inp. Deterministic: every order of
// additions is fixed by (N, C).
// CPU twins (for llvmpipe; src/model/variant.h picks): layernorm_forward_flat
// and layernorm_backward_input_flat, same bindings and params, one invocation
// per row, LN_FLAT_WG rows a workgroup, ceil(N / LN_FLAT_WG) workgroups
// through dispatch1d; no barriers, no subgroups; their _flat4 versions
// (C % 4 == 0) read the row as vec4s. Each pair is one template
// (layernorm_forward_flatw, layernorm_backward_input_flatw) instantiated
// with the element type {{V}} and its width {{W}}.
// vec4 GPU kernels (for C % 4 == 0, C <= LN_V4_MAX_C, (N, C) and (C) views at
// 16-byte aligned offsets; the host picks them): layernorm_forward_vec4, same
// bindings and params with the (N, C) and (C) arrays bound as
// array<vec4<f32>>, and layernorm_backward_vec4 (the input kernel's bindings,
// so bound, then the partials) with its input-only variant
// layernorm_backward_input_vec4. LN_ROW_THREADS threads a row, each holding
// up to LN_V4_REGS vec4s of it in registers, so a row is read from memory
// once; LN_ROWS_PER_WG rows at a time, ceil(N / LN_ROWS_PER_WG) workgroups
// (the forward) or ceil(N / LN_BWD_ROWS) (the backward) through dispatch1d.
// Stats-only forwards (layernorm_stats, _vec4, _flat, _flat4: the four forward
// kernels with STATS_ONLY set): mean and rstd, no out, for the f16 mode's
// layernorm_f16_transpose (08_precision.wgsl), which normalises from them.
// layernorm_residual_stats_vec4 (layernorm_forward_vec4 with RESIDUAL and
// STATS_ONLY set): the residual add before it too, out = inp + bias with bias
// bound to the second addend (N, C / 4), and the stats of that sum.
// See docs/kernels/02_layernorm.md.

struct LnParams {
    N: u32,  // rows in this dispatch (a row chunk of the tensor; layernorm_params_reduce: partials)
    C: u32,  // channels: the normalised axis
}

const LN_EPS: f32 = 1e-5;
// The forwards' layernorm_stats variants: mean and rstd only; out is bound
// (the host binds a stand-in) but never written.
override STATS_ONLY: bool = false;
// With STATS_ONLY, in layernorm_forward_vec4 only: the row is inp + bias, the
// residual add (05_residual.wgsl) of the (N, C) tensors bound at inp and
// bias, written to out; weight is bound (a stand-in) but never read.
override RESIDUAL: bool = false;
// layernorm_backward_params (and the two-phase kernels): a workgroup is
// LN_COLS columns (vec4 columns in _part_vec4) x LN_LANES row lanes.
const LN_COLS: u32 = 32u;
const LN_LANES: u32 = 8u;   // LN_COLS * LN_LANES == WG
// The two-phase kernels: rows of a block (LN_PART_ROWS / LN_LANES = 8 a lane).
const LN_PART_ROWS: u32 = 64u;
// layernorm_backward_vec4: rows a workgroup (a partial row each), taken
// LN_ROWS_PER_WG at a time. 16: GPT-2's 4096 rows are 256 workgroups, two
// for each compute unit of a 132-unit GPU.
const LN_BWD_ROWS: u32 = 16u;
// layernorm_backward_input_vec4: layernorm_backward_vec4 without the partials.
override INPUT_ONLY: bool = false;

// The flat kernels: rows per workgroup, one per invocation.
const LN_FLAT_WG: u32 = 64u;

// The vec4 kernels: threads a row, rows a workgroup, vec4s a thread holds.
const LN_ROW_THREADS: u32 = 64u;
const LN_ROWS_PER_WG: u32 = 4u;  // WG / LN_ROW_THREADS
const LN_V4_REGS: u32 = 4u;      // C <= 4 * LN_ROW_THREADS * LN_V4_REGS = LN_V4_MAX_C
const LN_V4_MAX_C: u32 = 1024u;

var<workgroup> sh_ln: array<f32, WG>;

// Sum of val over the LN_ROW_THREADS threads of one row (workgroup threads
// [r * 64, r * 64 + 64)), returned to each of them. Call from uniform control
// flow with every thread of the workgroup. Subgroups of up to 64 lanes lie
// inside one row (sizes are powers of two, and subgroup i is threads
// [i * sg, (i + 1) * sg) as wg_reduce_sum assumes): their sums are added in
// order. Larger subgroups would span rows, so there the threads' own values
// are added in order instead. Fixed order either way: deterministic.
fn ln_row_sum(tid: u32, sg: u32, val: f32) -> f32 {
    let partial = subgroupAdd(val);
    let small = sg <= LN_ROW_THREADS;
    sh_ln[tid] = select(val, partial, small);  // only lane 0's entries are read when small
    workgroupBarrier();
    let stride = select(1u, sg, small);
    let first = tid - tid % LN_ROW_THREADS;
    var s = 0.0;
    for (var i = 0u; i < LN_ROW_THREADS; i += stride) { s += sh_ln[first + i]; }
    // Trailing barrier: the next call must not overwrite sh_ln before every
    // thread has read it.
    workgroupBarrier();
    return s;
}

// The parameter-gradient kernels (layernorm_backward_params and the two
// phases): each of the LN_LANES lanes of a column holds part of its dweight
// and dbias sums. ln_fold_store puts every thread's part in workgroup memory
// (call from uniform control flow with the whole workgroup); then
// ln_fold_cols(col) adds the lanes of column col in lane order
// (deterministic): [0] the dweight sum, [1] the dbias sum. The vec4 forms serve
// the vec4 kernels (four columns a thread): layernorm_params_part_vec4 and
// the fold of layernorm_backward_vec4's row groups.
var<workgroup> ln_fold_w: array<f32, WG>;
var<workgroup> ln_fold_b: array<f32, WG>;
var<workgroup> ln_fold_w4: array<vec4<f32>, WG>;
var<workgroup> ln_fold_b4: array<vec4<f32>, WG>;

fn ln_fold_store(tid: u32, dw: f32, db: f32) {
    ln_fold_w[tid] = dw;
    ln_fold_b[tid] = db;
    workgroupBarrier();
}

fn ln_fold_cols(col: u32) -> array<f32, 2> {
    var tw = 0.0;
    var tb = 0.0;
    for (var l = 0u; l < LN_LANES; l++) {
        tw += ln_fold_w[l * LN_COLS + col];
        tb += ln_fold_b[l * LN_COLS + col];
    }
    return array<f32, 2>(tw, tb);
}

fn ln_fold_store4(tid: u32, dw: vec4<f32>, db: vec4<f32>) {
    ln_fold_w4[tid] = dw;
    ln_fold_b4[tid] = db;
    workgroupBarrier();
}

// The dweight sums of entries first, first + stride, ... (n of them, in
// order), then (index 1) the dbias sums: a column group's LN_LANES lanes
// (stride LN_COLS) or, in layernorm_backward_vec4, a column's
// LN_ROWS_PER_WG row groups (stride LN_ROW_THREADS).
fn ln_fold_sum4(first: u32, n: u32, stride: u32) -> array<vec4<f32>, 2> {
    var tw = vec4<f32>(0.0);
    var tb = vec4<f32>(0.0);
    for (var i = 0u; i < n; i++) {
        tw += ln_fold_w4[first + i * stride];
        tb += ln_fold_b4[first + i * stride];
    }
    return array<vec4<f32>, 2>(tw, tb);
}

// ln_fold_cols of vec4 columns (layernorm_params_part_vec4).
fn ln_fold_cols4(col: u32) -> array<vec4<f32>, 2> {
    return ln_fold_sum4(col, LN_LANES, LN_COLS);
}

// Sum of the four lanes.
fn sum4(x: vec4<f32>) -> f32 {
    return (x.x + x.y) + (x.z + x.w);
}

// s plus the {{W}} columns of x, one at a time in order (the flat twins' row
// sums: the scalar and vec4 ones add the same numbers in the same order).
fn ln_add_1(s: f32, x: f32) -> f32 {
    return s + x;
}
fn ln_add_4(s: f32, x: vec4<f32>) -> f32 {
    var a = s;
    a += x.x;
    a += x.y;
    a += x.z;
    a += x.w;
    return a;
}

// One row per workgroup; the 2D fallback spreads rows over (x, y).
fn ln_row(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// Row blocks of the two-phase kernels in a dispatch of n rows.
fn ln_part_blocks(n: u32) -> u32 {
    return (n + LN_PART_ROWS - 1u) / LN_PART_ROWS;
}

// Workgroups (and partial rows) of layernorm_backward_vec4 for n rows.
fn ln_bwd_blocks(n: u32) -> u32 {
    return (n + LN_BWD_ROWS - 1u) / LN_BWD_ROWS;
}

// --- KERNEL: layernorm_forward ---
// out = (inp - mean) * rstd * weight + bias; mean, rstd saved per row.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;   // (N, C)
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;  // (N)
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;  // (N)
@group(0) @binding(3) var<storage, read> inp: array<f32>;         // (N, C)
@group(0) @binding(4) var<storage, read> weight: array<f32>;      // (C)
@group(0) @binding(5) var<storage, read> bias: array<f32>;        // (C)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_forward(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sg: u32) {
    let row = ln_row(wid, nwg);
    if (row >= p.N) { return; }  // the whole workgroup leaves together
    let base = row * p.C;
    let inv_c = 1.0 / f32(p.C);
    var s = 0.0;
    for (var c = tid; c < p.C; c += WG) { s += inp[base + c]; }
    let m = wg_reduce_sum(tid, sg, s) * inv_c;
    // Second pass over the centred values: no cancellation of E[x^2] - m^2.
    var v = 0.0;
    for (var c = tid; c < p.C; c += WG) {
        let d = inp[base + c] - m;
        v += d * d;
    }
    let r = 1.0 / sqrt(wg_reduce_sum(tid, sg, v) * inv_c + LN_EPS);
    for (var c = tid; c < p.C && !STATS_ONLY; c += WG) {
        out[base + c] = (inp[base + c] - m) * r * weight[c] + bias[c];
    }
    if (tid == 0u) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// --- KERNEL: layernorm_stats = layernorm_forward with STATS_ONLY=1 ---

// --- KERNEL: layernorm_forward_vec4 ---
// layernorm_forward reading each row once: lane l of the row's 64 threads
// loads vec4s l, l + 64, ... into registers; the mean and then the centred
// variance are summed from there (ln_row_sum), and the output written.
// Rows past N (the last workgroup) take part in the sums with zeros.
// RESIDUAL: the loads are the residual's a + b, stored to out before the sums.
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;  // (N, C / 4)
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;       // (N)
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;       // (N)
@group(0) @binding(3) var<storage, read> inp: array<vec4<f32>>;        // (N, C / 4)
@group(0) @binding(4) var<storage, read> weight: array<vec4<f32>>;     // (C / 4)
@group(0) @binding(5) var<storage, read> bias: array<vec4<f32>>;       // (C / 4); RESIDUAL: b (N, C / 4)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_forward_vec4(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                          @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sg: u32) {
    let row = ln_row(wid, nwg) * LN_ROWS_PER_WG + tid / LN_ROW_THREADS;
    let lane = tid % LN_ROW_THREADS;
    let live = row < p.N;
    let c4 = p.C / 4u;
    let base = row * c4;
    var x = array<vec4<f32>, LN_V4_REGS>();
    var s = 0.0;
    for (var k = 0u; k < LN_V4_REGS; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) {
            x[k] = inp[base + j];
            if (RESIDUAL) { x[k] += bias[base + j]; }  // residual_forward_vec4's one add
            s += sum4(x[k]);
        }
    }
    for (var k = 0u; k < LN_V4_REGS && RESIDUAL; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) { out[base + j] = x[k]; }
    }
    let inv_c = 1.0 / f32(p.C);
    let m = ln_row_sum(tid, sg, s) * inv_c;
    // Centred variance from the registers: no cancellation of E[x^2] - m^2.
    var v = 0.0;
    for (var k = 0u; k < LN_V4_REGS; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) {
            let d = x[k] - m;
            v += sum4(d * d);
        }
    }
    let r = 1.0 / sqrt(ln_row_sum(tid, sg, v) * inv_c + LN_EPS);
    for (var k = 0u; k < LN_V4_REGS && !STATS_ONLY; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) { out[base + j] = (x[k] - m) * r * weight[j] + bias[j]; }
    }
    if (live && lane == 0u) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// --- KERNEL: layernorm_stats_vec4 = layernorm_forward_vec4 with STATS_ONLY=1 ---

// --- KERNEL: layernorm_residual_stats_vec4 = layernorm_forward_vec4 with RESIDUAL=1, STATS_ONLY=1 ---
// out = inp + bias (the residual, N rows), then its mean and rstd: the
// floats of residual_forward_vec4 then layernorm_stats_vec4, with the sum
// kept in registers instead of read back.

// --- KERNEL: layernorm_backward_input ---
// dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight,
// xhat = (inp - mean) * rstd, means over the row.
@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;  // (N, C)
@group(0) @binding(1) var<storage, read> dout: array<f32>;        // (N, C)
@group(0) @binding(2) var<storage, read> inp: array<f32>;         // (N, C)
@group(0) @binding(3) var<storage, read> weight: array<f32>;      // (C)
@group(0) @binding(4) var<storage, read> mean: array<f32>;        // (N)
@group(0) @binding(5) var<storage, read> rstd: array<f32>;        // (N)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_backward_input(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                            @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sg: u32) {
    let row = ln_row(wid, nwg);
    if (row >= p.N) { return; }
    let base = row * p.C;
    let m = mean[row];
    let r = rstd[row];
    var sg_acc = 0.0;
    var sgx_acc = 0.0;
    for (var c = tid; c < p.C; c += WG) {
        let g = dout[base + c] * weight[c];
        sg_acc += g;
        sgx_acc += g * (inp[base + c] - m) * r;
    }
    let inv_c = 1.0 / f32(p.C);
    let mean_g = wg_reduce_sum(tid, sg, sg_acc) * inv_c;
    let mean_gx = wg_reduce_sum(tid, sg, sgx_acc) * inv_c;
    for (var c = tid; c < p.C; c += WG) {
        let g = dout[base + c] * weight[c];
        let xhat = (inp[base + c] - m) * r;
        dinp[base + c] += r * (g - mean_g - xhat * mean_gx);
    }
}

// --- KERNEL: layernorm_backward_vec4 ---
// layernorm_backward_input_vec4's dinp and, from the same registers, the
// dweight/dbias partials of the workgroup's rows: dout and inp are read once
// for both. Workgroup w takes rows [w * LN_BWD_ROWS, + LN_BWD_ROWS), row
// group rg = tid / 64 rows rg, rg + 4, ... of them (one ln_backward_row4 a
// step); each row's dinp is layernorm_backward_input_vec4's (the same sums in
// the same order). Thread (rg, lane) adds dout * xhat and dout of its columns
// over its rows in order; then the row groups are folded in order into
// part[w * C/4 + j] and part[(nblk + w) * C/4 + j], nblk = ceil(N / LN_BWD_ROWS),
// for layernorm_params_reduce. Workgroups past nblk (the 2D grid's tail)
// leave at once.
@group(0) @binding(0) var<storage, read_write> dinp: array<vec4<f32>>;  // (N, C / 4)
@group(0) @binding(1) var<storage, read> dout: array<vec4<f32>>;        // (N, C / 4)
@group(0) @binding(2) var<storage, read> inp: array<vec4<f32>>;         // (N, C / 4)
@group(0) @binding(3) var<storage, read> weight: array<vec4<f32>>;      // (C / 4)
@group(0) @binding(4) var<storage, read> mean: array<f32>;              // (N)
@group(0) @binding(5) var<storage, read> rstd: array<f32>;              // (N)
@group(0) @binding(6) var<storage, read_write> part: array<vec4<f32>>;  // (2, nblk, C / 4); INPUT_ONLY: unused
@group(0) @binding(7) var<uniform> p: LnParams;

// Per thread: its columns' running sums of dout * xhat and of dout.
struct LnColSums {
    dw: array<vec4<f32>, LN_V4_REGS>,
    db: array<vec4<f32>, LN_V4_REGS>,
}

// dinp += of one row (row >= N: the sums' zeros only), as
// layernorm_backward_input_vec4; its dout * xhat and dout into acc unless
// INPUT_ONLY. Call from uniform control flow with the whole workgroup.
fn ln_backward_row4(tid: u32, sg: u32, row: u32, acc: ptr<function, LnColSums>) {
    let lane = tid % LN_ROW_THREADS;
    let live = row < p.N;
    let c4 = p.C / 4u;
    let base = row * c4;
    var m = 0.0;
    var r = 0.0;
    if (live) {
        m = mean[row];
        r = rstd[row];
    }
    var gk = array<vec4<f32>, LN_V4_REGS>();  // g = dout * weight
    var xh = array<vec4<f32>, LN_V4_REGS>();  // xhat
    var di = array<vec4<f32>, LN_V4_REGS>();  // dinp, loaded with the others (one wait for memory)
    var sg_acc = 0.0;
    var sgx_acc = 0.0;
    for (var k = 0u; k < LN_V4_REGS; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) {
            let d = dout[base + j];
            di[k] = dinp[base + j];
            gk[k] = d * weight[j];
            xh[k] = (inp[base + j] - m) * r;
            sg_acc += sum4(gk[k]);
            sgx_acc += sum4(gk[k] * xh[k]);
            if (!INPUT_ONLY) {
                (*acc).dw[k] += d * xh[k];
                (*acc).db[k] += d;
            }
        }
    }
    let inv_c = 1.0 / f32(p.C);
    let mean_g = ln_row_sum(tid, sg, sg_acc) * inv_c;
    let mean_gx = ln_row_sum(tid, sg, sgx_acc) * inv_c;
    for (var k = 0u; k < LN_V4_REGS; k++) {
        let j = lane + k * LN_ROW_THREADS;
        if (live && j < c4) { dinp[base + j] = di[k] + r * (gk[k] - mean_g - xh[k] * mean_gx); }
    }
}

@compute @workgroup_size(WG)
fn layernorm_backward_vec4(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                           @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sg: u32) {
    let w = ln_row(wid, nwg);
    let nblk = ln_bwd_blocks(p.N);
    if (w >= nblk) { return; }  // uniform: the whole workgroup leaves
    var acc = LnColSums();
    for (var s = 0u; s < LN_BWD_ROWS / LN_ROWS_PER_WG; s++) {
        let row = w * LN_BWD_ROWS + s * LN_ROWS_PER_WG + tid / LN_ROW_THREADS;
        ln_backward_row4(tid, sg, row, &acc);
    }
    if (INPUT_ONLY) { return; }
    let lane = tid % LN_ROW_THREADS;
    let c4 = p.C / 4u;
    for (var k = 0u; k < LN_V4_REGS; k++) {
        if (k * LN_ROW_THREADS >= c4) { break; }  // uniform
        ln_fold_store4(tid, acc.dw[k], acc.db[k]);
        let j = lane + k * LN_ROW_THREADS;
        if (tid < LN_ROW_THREADS && j < c4) {
            let t = ln_fold_sum4(lane, LN_ROWS_PER_WG, LN_ROW_THREADS);
            part[w * c4 + j] = t[0];
            part[(nblk + w) * c4 + j] = t[1];
        }
        workgroupBarrier();  // the next store waits for these reads
    }
}

// --- KERNEL: layernorm_backward_input_vec4 = layernorm_backward_vec4 with INPUT_ONLY=1 ---
// dinp alone (no scratch for the partials): the same rows, workgroups and
// dinp; part is bound (the host binds a stand-in) but never touched.

// --- KERNEL: layernorm_backward_params ---
// dweight[c] += sum over rows of dout * xhat, dbias[c] += sum of dout.
// Deterministic without atomics: each thread walks rows lane, lane + 8, ...
// of one column in order, then lane 0 folds the 8 lanes in order. Adjacent
// threads read adjacent columns (coalesced).
@group(0) @binding(0) var<storage, read_write> dweight: array<f32>;  // (C)
@group(0) @binding(1) var<storage, read_write> dbias: array<f32>;    // (C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;           // (N, C)
@group(0) @binding(3) var<storage, read> inp: array<f32>;            // (N, C)
@group(0) @binding(4) var<storage, read> mean: array<f32>;           // (N)
@group(0) @binding(5) var<storage, read> rstd: array<f32>;           // (N)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_backward_params(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                             @builtin(num_workgroups) nwg: vec3<u32>) {
    let col = tid % LN_COLS;
    let lane = tid / LN_COLS;
    let c = (wid.x + wid.y * nwg.x) * LN_COLS + col;
    var dw = 0.0;
    var db = 0.0;
    if (c < p.C) {
        for (var n = lane; n < p.N; n += LN_LANES) {
            let d = dout[n * p.C + c];
            dw += d * (inp[n * p.C + c] - mean[n]) * rstd[n];
            db += d;
        }
    }
    ln_fold_store(tid, dw, db);
    if (lane == 0u && c < p.C) {
        let t = ln_fold_cols(col);
        dweight[c] += t[0];
        dbias[c] += t[1];
    }
}

// --- TEMPLATE: layernorm_params_partw ---
// --- KERNEL: layernorm_params_part = layernorm_params_partw with V=f32, W=1, N=, F= ---
// --- KERNEL: layernorm_params_part_vec4 = layernorm_params_partw with V=vec4<f32>, W=4, N=_vec4, F=4 ---
// Phase 1 of the two-phase dweight/dbias (then layernorm_params_reduce), as a
// template: the columns are {{V}}s of {{W}} floats (_vec4: C % 4 == 0; dout,
// inp and part bound as vec4s at 16-byte aligned offsets), cw = C / {{W}} of
// them a row. Workgroup w (a flat index: 2D past 65535) takes the LN_COLS
// columns of column group w % ceil(cw / LN_COLS) in row block
// blk = w / ceil(cw / LN_COLS): rows [blk * LN_PART_ROWS, + LN_PART_ROWS) of
// this dispatch. Lane l sums rows l, l + 8, ... of the block in order, lane 0
// folds the 8 lanes in order and writes the block's partials:
// part[blk * cw + j] = sum of dout * xhat, part[(nblk + blk) * cw + j] = sum
// of dout (nblk = ceil(N / LN_PART_ROWS)). The vec4 kernel's partials are the
// scalar one's, in the same per-column order of additions. Workgroups past the
// last block (the 2D grid's tail) leave at once.
@group(0) @binding(0) var<storage, read_write> part: array<{{V}}>;  // (2, nblk, C)
@group(0) @binding(1) var<storage, read> dout: array<{{V}}>;        // (N, C)
@group(0) @binding(2) var<storage, read> inp: array<{{V}}>;         // (N, C)
@group(0) @binding(3) var<storage, read> mean: array<f32>;          // (N)
@group(0) @binding(4) var<storage, read> rstd: array<f32>;          // (N)
@group(0) @binding(5) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_params_part{{N}}(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                         @builtin(num_workgroups) nwg: vec3<u32>) {
    let col = tid % LN_COLS;
    let lane = tid / LN_COLS;
    let cw = p.C / {{W}}u;  // the row in {{V}}s
    let groups = (cw + LN_COLS - 1u) / LN_COLS;
    let w = wid.x + wid.y * nwg.x;
    let blk = w / groups;
    let nblk = ln_part_blocks(p.N);
    if (blk >= nblk) { return; }  // uniform: the whole workgroup leaves
    let j = (w % groups) * LN_COLS + col;
    var dw = {{V}}(0.0);
    var db = {{V}}(0.0);
    if (j < cw) {
        for (var i = 0u; i < LN_PART_ROWS / LN_LANES; i++) {
            let n = blk * LN_PART_ROWS + lane + i * LN_LANES;
            if (n < p.N) {
                let d = dout[n * cw + j];
                dw += d * (inp[n * cw + j] - mean[n]) * rstd[n];
                db += d;
            }
        }
    }
    ln_fold_store{{F}}(tid, dw, db);
    if (lane == 0u && j < cw) {
        let t = ln_fold_cols{{F}}(col);
        part[blk * cw + j] = t[0];
        part[(nblk + blk) * cw + j] = t[1];
    }
}

// --- KERNEL: layernorm_params_reduce ---
// Phase 2: dweight[c] += the sum of the nblk = p.N partials part[b * C + c],
// dbias[c] += that of part[(nblk + b) * C + c] (from any phase-1 kernel: p.N
// is its partials, not its rows), a workgroup per LN_COLS columns: lane l
// adds blocks l, l + 8, ... in order, lane 0 folds the 8 lanes in order and
// adds the total once.
@group(0) @binding(0) var<storage, read_write> dweight: array<f32>;  // (C)
@group(0) @binding(1) var<storage, read_write> dbias: array<f32>;    // (C)
@group(0) @binding(2) var<storage, read> part: array<f32>;           // (2, nblk, C)
@group(0) @binding(3) var<uniform> p: LnParams;

@compute @workgroup_size(WG)
fn layernorm_params_reduce(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                           @builtin(num_workgroups) nwg: vec3<u32>) {
    let col = tid % LN_COLS;
    let lane = tid / LN_COLS;
    let c = (wid.x + wid.y * nwg.x) * LN_COLS + col;
    let nblk = p.N;
    var dw = 0.0;
    var db = 0.0;
    if (c < p.C) {
        for (var b = lane; b < nblk; b += LN_LANES) {
            dw += part[b * p.C + c];
            db += part[(nblk + b) * p.C + c];
        }
    }
    ln_fold_store(tid, dw, db);
    if (lane == 0u && c < p.C) {
        let t = ln_fold_cols(col);
        dweight[c] += t[0];
        dbias[c] += t[1];
    }
}

// --- TEMPLATE: layernorm_forward_flatw ---
// --- KERNEL: layernorm_forward_flat = layernorm_forward_flatw with V=f32, W=1, N= ---
// --- KERNEL: layernorm_stats_flat = layernorm_forward_flat with STATS_ONLY=1 ---
// --- KERNEL: layernorm_forward_flat4 = layernorm_forward_flatw with V=vec4<f32>, W=4, N=4 ---
// --- KERNEL: layernorm_stats_flat4 = layernorm_forward_flat4 with STATS_ONLY=1 ---
// The CPU twin of layernorm_forward, as a template: invocation lid of
// workgroup w owns row w * LN_FLAT_WG + lid and walks it alone, three passes
// in column order (mean, centred variance, output), the row read and written
// {{W}} columns a step as {{V}}. Adjacent invocations read adjacent rows.
// layernorm_forward_flat (f32) serves any C, layernorm_forward_flat4 (vec4)
// C % 4 == 0 (the host picks it then): the same sums in the same order (on
// llvmpipe a lane's vec4 access costs about 3x a scalar one, and each
// loop-carried sum is blended with the loop's lane mask once per 4 columns
// instead of once per column).
@group(0) @binding(0) var<storage, read_write> out: array<{{V}}>;  // (N, C)
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;   // (N)
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;   // (N)
@group(0) @binding(3) var<storage, read> inp: array<{{V}}>;        // (N, C)
@group(0) @binding(4) var<storage, read> weight: array<{{V}}>;     // (C)
@group(0) @binding(5) var<storage, read> bias: array<{{V}}>;       // (C)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(LN_FLAT_WG)
fn layernorm_forward_flat{{N}}(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                          @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = ln_row(wid, nwg) * LN_FLAT_WG + lid;
    if (row >= p.N) { return; }
    let cw = p.C / {{W}}u;  // the row in {{V}}s
    let base = row * cw;
    let inv_c = 1.0 / f32(p.C);
    var s = 0.0;
    for (var c = 0u; c < cw; c++) { s = ln_add_{{W}}(s, inp[base + c]); }
    let m = s * inv_c;
    var v = 0.0;
    for (var c = 0u; c < cw; c++) {
        let d = inp[base + c] - m;
        v = ln_add_{{W}}(v, d * d);
    }
    let r = 1.0 / sqrt(v * inv_c + LN_EPS);
    for (var c = 0u; c < cw && !STATS_ONLY; c++) {
        out[base + c] = (inp[base + c] - m) * r * weight[c] + bias[c];
    }
    mean[row] = m;
    rstd[row] = r;
}

// --- TEMPLATE: layernorm_backward_input_flatw ---
// --- KERNEL: layernorm_backward_input_flat = layernorm_backward_input_flatw with V=f32, W=1, N= ---
// --- KERNEL: layernorm_backward_input_flat4 = layernorm_backward_input_flatw with V=vec4<f32>, W=4, N=4 ---
// The CPU twin of layernorm_backward_input, as a template: one invocation
// per row, two passes in column order (the two means, then dinp +=), {{W}}
// columns a step as {{V}} (as layernorm_forward_flatw: _flat4 for
// C % 4 == 0, the same sums in the same order).
@group(0) @binding(0) var<storage, read_write> dinp: array<{{V}}>;  // (N, C)
@group(0) @binding(1) var<storage, read> dout: array<{{V}}>;        // (N, C)
@group(0) @binding(2) var<storage, read> inp: array<{{V}}>;         // (N, C)
@group(0) @binding(3) var<storage, read> weight: array<{{V}}>;      // (C)
@group(0) @binding(4) var<storage, read> mean: array<f32>;          // (N)
@group(0) @binding(5) var<storage, read> rstd: array<f32>;          // (N)
@group(0) @binding(6) var<uniform> p: LnParams;

@compute @workgroup_size(LN_FLAT_WG)
fn layernorm_backward_input_flat{{N}}(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = ln_row(wid, nwg) * LN_FLAT_WG + lid;
    if (row >= p.N) { return; }
    let cw = p.C / {{W}}u;  // the row in {{V}}s
    let base = row * cw;
    let m = mean[row];
    let r = rstd[row];
    var sg_acc = 0.0;
    var sgx_acc = 0.0;
    for (var c = 0u; c < cw; c++) {
        let g = dout[base + c] * weight[c];
        sg_acc = ln_add_{{W}}(sg_acc, g);
        sgx_acc = ln_add_{{W}}(sgx_acc, g * (inp[base + c] - m) * r);
    }
    let inv_c = 1.0 / f32(p.C);
    let mean_g = sg_acc * inv_c;
    let mean_gx = sgx_acc * inv_c;
    for (var c = 0u; c < cw; c++) {
        let g = dout[base + c] * weight[c];
        let xhat = (inp[base + c] - m) * r;
        dinp[base + c] += r * (g - mean_g - xhat * mean_gx);
    }
}
