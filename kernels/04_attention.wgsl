// 04_attention.wgsl: causal multi-head self-attention, flash style: no T x T
// matrix ever reaches global memory. The forward keeps an online softmax per
// query over key blocks in workgroup memory and saves the log-sum-exp; the
// backward recomputes the probabilities from it, without atomics.
// Layout: qkv (B, T, 3C) = [q | k | v], head h at columns h*hs..(h+1)*hs of
// each part; out, dout (B, T, C); lse, D (B, NH, T). hs = C / NH <= MAX_HS.
// ABI: storage buffers at bindings 0..k-1, then `p: AttnParams` at binding k.
// Dispatch: forward and backward_dq (ceil(T/BQ), NH, B), backward_dkdv
// (ceil(T/BK), NH, B), backward_preprocess ceil(B*NH*T / WG) through
// dispatch1d.
// CPU twins (for llvmpipe; src/model/variant.h picks): attention_forward_flat,
// attention_backward_dq_flat, attention_backward_dkdv_flat, same bindings and
// params, no workgroup memory, no barriers: one invocation per query (key),
// AF_WG a workgroup, grid (ceil(T/AF_WG), NH, B); keys (queries) pass between
// the lanes of a group of AF_G = 8 with subgroupShuffle, so the subgroup size
// must be a multiple of 8. See docs/kernels/04_attention.md.

struct AttnParams {
    B: u32,
    T: u32,
    C: u32,
    NH: u32,
    hs: u32,     // head size C / NH, at most MAX_HS
    scale: f32,  // 1 / sqrt(hs)
}

// Tiles: a block of BQ queries meets a block of BK keys; head columns pass
// through workgroup memory DC at a time, so any hs <= MAX_HS fits in
// 3 * BQ * PAD * 4 = 12,672 bytes (under WebGPU's default 16 KiB).
const BQ: u32 = 32u;      // queries per block (rows of the workgroup)
const BK: u32 = 32u;      // keys per block; == BQ so the diagonal block is the last one a query block needs
const DC: u32 = 32u;      // head columns per chunk
const PAD: u32 = 33u;     // row stride of every tile: DC + 1 (and BK + 1) spreads rows over banks
const TILE: u32 = 1056u;  // BQ * PAD floats
const TPR: u32 = 8u;      // threads per tile row: WG / BQ
const KPT: u32 = 4u;      // scores per thread: BK / TPR (columns lane, lane + TPR, ...)
const CPT: u32 = 4u;      // output columns per thread in one chunk: DC / TPR
const MAX_HS: u32 = 128u;
const NCH: u32 = 4u;      // chunks of the largest head: MAX_HS / DC
const NACC: u32 = 16u;    // accumulators per thread: NCH * CPT

// The flat (CPU) kernels: AF_WG invocations a workgroup, one query (or key)
// each; lanes sid & ~7 .. (sid & ~7) + 7 of a subgroup form a group of AF_G
// that shares key (query) rows through subgroupShuffle.
const AF_WG: u32 = 16u;
const AF_G: u32 = 8u;
const_assert AF_WG % AF_G == 0u;

const_assert BQ * TPR == WG;
const_assert BK == BQ;
const_assert BK == TPR * KPT;
const_assert DC == TPR * CPT;
const_assert MAX_HS == NCH * DC;
const_assert NACC == NCH * CPT;
const_assert TILE == BQ * PAD;

// The column of head h (within the tile row) that thread lane owns as its
// u-th column of chunk ch: lanes side by side, so global writes coalesce.
fn attn_col(ch: u32, lane: u32, u: u32) -> u32 {
    return ch * DC + lane + u * TPR;
}

// --- KERNEL: attention_forward ---
// One workgroup per (query block, head, batch). Thread (row, lane) owns query
// q0 + row: its scores against keys lane + j*TPR of each key block and its
// output columns attn_col(ch, lane, u).
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (B, T, C)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;  // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<f32>;        // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: AttnParams;

var<workgroup> tq: array<f32, TILE>;  // Q chunk (BQ x DC)
var<workgroup> tk: array<f32, TILE>;  // K chunk, then V chunk (BK x DC)
var<workgroup> ts: array<f32, TILE>;  // scores, then probabilities (BQ x BK)

@compute @workgroup_size(WG)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let qb = wid.x;
    let h = wid.y;
    let b = wid.z;
    let row = tid / TPR;
    let lane = tid % TPR;
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;  // q of (b, t = 0, head h); k at + C, v at + 2C
    let q0 = qb * BQ;
    let qpos = q0 + row;

    var m = NEG_INF;  // running max of this query's scores
    var l = 0.0;      // running sum of exp(score - m)
    var acc = array<f32, NACC>();
    // Causal: key blocks after the diagonal one (kb == qb) are all masked.
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * BK;
        var s = array<f32, KPT>();
        for (var c0 = 0u; c0 < p.hs; c0 += DC) {
            for (var e = tid; e < BQ * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                let col = c0 + c;
                var qv = 0.0;
                var kv = 0.0;
                if (col < p.hs && q0 + r < p.T) { qv = qkv[base + (q0 + r) * C3 + col]; }
                if (col < p.hs && k0 + r < p.T) { kv = qkv[base + (k0 + r) * C3 + p.C + col]; }
                tq[r * PAD + c] = qv;
                tk[r * PAD + c] = kv;
            }
            workgroupBarrier();
            for (var c = 0u; c < DC; c++) {
                let qv = tq[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { s[j] += qv * tk[(lane + j * TPR) * PAD + c]; }
            }
            workgroupBarrier();
        }
        // Every processed row has a key (k0 <= qpos, k0 < T), so the block max is finite.
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + lane + j * TPR;
            s[j] = select(NEG_INF, s[j] * p.scale, key <= qpos && key < p.T);
            ts[row * PAD + lane + j * TPR] = s[j];
        }
        workgroupBarrier();
        var bmax = NEG_INF;
        for (var j = 0u; j < BK; j++) { bmax = max(bmax, ts[row * PAD + j]); }
        let m_new = max(m, bmax);
        workgroupBarrier();  // the row's scores are read before they become probabilities
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + lane + j * TPR;
            ts[row * PAD + lane + j * TPR] = select(0.0, exp(s[j] - m_new), key <= qpos && key < p.T);
        }
        workgroupBarrier();
        var bsum = 0.0;
        for (var j = 0u; j < BK; j++) { bsum += ts[row * PAD + j]; }
        let alpha = exp(m - m_new);  // rescales what was summed under the old max
        l = l * alpha + bsum;
        m = m_new;
        for (var i = 0u; i < NACC; i++) { acc[i] *= alpha; }
        // acc += P @ V, chunk by chunk; constant trip counts keep acc in registers.
        for (var ch = 0u; ch < NCH; ch++) {
            let c0 = ch * DC;
            if (c0 < p.hs) {
                for (var e = tid; e < BK * DC; e += WG) {
                    let r = e / DC;
                    let c = e % DC;
                    var vv = 0.0;
                    if (c0 + c < p.hs && k0 + r < p.T) { vv = qkv[base + (k0 + r) * C3 + 2u * p.C + c0 + c]; }
                    tk[r * PAD + c] = vv;
                }
                workgroupBarrier();
                for (var j = 0u; j < BK; j++) {
                    let pj = ts[row * PAD + j];
                    for (var u = 0u; u < CPT; u++) { acc[ch * CPT + u] += pj * tk[j * PAD + lane + u * TPR]; }
                }
                workgroupBarrier();
            }
        }
    }
    if (qpos < p.T) {
        let orow = (b * p.T + qpos) * p.C + h * p.hs;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, lane, u);
                if (col < p.hs) { out[orow + col] = acc[ch * CPT + u] / l; }
            }
        }
        if (lane == 0u) { lse[(b * p.NH + h) * p.T + qpos] = m + log(l); }
    }
}

// --- KERNEL: attention_backward_preprocess ---
// D[b, h, t] = dout[b, t, head h] . out[b, t, head h]: one thread per row,
// summed in column order.
@group(0) @binding(0) var<storage, read_write> delta: array<f32>;  // D (B, NH, T)
@group(0) @binding(1) var<storage, read> dout: array<f32>;         // (B, T, C)
@group(0) @binding(2) var<storage, read> out: array<f32>;          // (B, T, C)
@group(0) @binding(3) var<uniform> p: AttnParams;

@compute @workgroup_size(WG)
fn attention_backward_preprocess(@builtin(global_invocation_id) gid: vec3<u32>,
                                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.B * p.NH * p.T) { return; }
    let t = i % p.T;
    let h = (i / p.T) % p.NH;
    let b = i / (p.T * p.NH);
    let base = (b * p.T + t) * p.C + h * p.hs;
    var sum = 0.0;
    for (var c = 0u; c < p.hs; c++) { sum += dout[base + c] * out[base + c]; }
    delta[i] = sum;
}

// --- KERNEL: attention_backward_dq ---
// One workgroup per (query block, head, batch), thread (row, lane) as in the
// forward. Writes (overwrites) the q part of dqkv:
// dq = scale * sum_j dS_j k_j, dS = P * (dP - D), P = exp(s - lse), dP = dout . v.
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;  // (B, T, 3C), q columns written
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;         // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;       // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

var<workgroup> tq: array<f32, TILE>;  // Q chunk, then dout chunk (BQ x DC)
var<workgroup> tk: array<f32, TILE>;  // K chunk, V chunk, K chunk again (BK x DC)
var<workgroup> ts: array<f32, TILE>;  // dS (BQ x BK)

@compute @workgroup_size(WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let qb = wid.x;
    let h = wid.y;
    let b = wid.z;
    let row = tid / TPR;
    let lane = tid % TPR;
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;  // q of (b, 0, h) in qkv and dqkv
    let obase = b * p.T * p.C + h * p.hs;  // (b, 0, h) in dout
    let q0 = qb * BQ;
    let qpos = q0 + row;
    let live = qpos < p.T;
    var lse_i = 0.0;
    var d_i = 0.0;
    if (live) {
        lse_i = lse[(b * p.NH + h) * p.T + qpos];
        d_i = delta[(b * p.NH + h) * p.T + qpos];
    }

    var acc = array<f32, NACC>();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * BK;
        // s = q . k in the forward's order, so P stays <= 1 up to rounding.
        var s = array<f32, KPT>();
        for (var c0 = 0u; c0 < p.hs; c0 += DC) {
            for (var e = tid; e < BQ * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                let col = c0 + c;
                var qv = 0.0;
                var kv = 0.0;
                if (col < p.hs && q0 + r < p.T) { qv = qkv[base + (q0 + r) * C3 + col]; }
                if (col < p.hs && k0 + r < p.T) { kv = qkv[base + (k0 + r) * C3 + p.C + col]; }
                tq[r * PAD + c] = qv;
                tk[r * PAD + c] = kv;
            }
            workgroupBarrier();
            for (var c = 0u; c < DC; c++) {
                let qv = tq[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { s[j] += qv * tk[(lane + j * TPR) * PAD + c]; }
            }
            workgroupBarrier();
        }
        // dP = dout . v
        var dp = array<f32, KPT>();
        for (var c0 = 0u; c0 < p.hs; c0 += DC) {
            for (var e = tid; e < BQ * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                let col = c0 + c;
                var ov = 0.0;
                var vv = 0.0;
                if (col < p.hs && q0 + r < p.T) { ov = dout[obase + (q0 + r) * p.C + col]; }
                if (col < p.hs && k0 + r < p.T) { vv = qkv[base + (k0 + r) * C3 + 2u * p.C + col]; }
                tq[r * PAD + c] = ov;
                tk[r * PAD + c] = vv;
            }
            workgroupBarrier();
            for (var c = 0u; c < DC; c++) {
                let ov = tq[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { dp[j] += ov * tk[(lane + j * TPR) * PAD + c]; }
            }
            workgroupBarrier();
        }
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + lane + j * TPR;
            let pij = select(0.0, exp(s[j] * p.scale - lse_i), live && key <= qpos && key < p.T);
            ts[row * PAD + lane + j * TPR] = pij * (dp[j] - d_i);
        }
        // acc += dS @ K, chunk by chunk (the barrier after the load also publishes ts).
        for (var ch = 0u; ch < NCH; ch++) {
            let c0 = ch * DC;
            if (c0 < p.hs) {
                for (var e = tid; e < BK * DC; e += WG) {
                    let r = e / DC;
                    let c = e % DC;
                    var kv = 0.0;
                    if (c0 + c < p.hs && k0 + r < p.T) { kv = qkv[base + (k0 + r) * C3 + p.C + c0 + c]; }
                    tk[r * PAD + c] = kv;
                }
                workgroupBarrier();
                for (var j = 0u; j < BK; j++) {
                    let dsj = ts[row * PAD + j];
                    for (var u = 0u; u < CPT; u++) { acc[ch * CPT + u] += dsj * tk[j * PAD + lane + u * TPR]; }
                }
                workgroupBarrier();
            }
        }
    }
    if (live) {
        let drow = base + qpos * C3;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, lane, u);
                if (col < p.hs) { dqkv[drow + col] = p.scale * acc[ch * CPT + u]; }
            }
        }
    }
}

// --- KERNEL: attention_backward_dkdv ---
// One workgroup per (key block, head, batch). Thread (row, lane) owns key
// k0 + row: its scores against queries lane + j*TPR of each query block, and
// its dk, dv columns attn_col(ch, lane, u). Only query blocks >= the key block
// see these keys. Writes (overwrites) the k and v parts of dqkv:
// dv = sum_i P_i dout_i, dk = scale * sum_i dS_i q_i.
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;  // (B, T, 3C), k and v columns written
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;         // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;       // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

var<workgroup> tk: array<f32, TILE>;  // K chunk, then V chunk (BK x DC)
var<workgroup> tq: array<f32, TILE>;  // Q chunk, dout chunk, dout chunk, Q chunk (BQ x DC)
var<workgroup> ts: array<f32, TILE>;  // P^T, then dS^T (BK x BQ)

@compute @workgroup_size(WG)
fn attention_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let kb = wid.x;
    let h = wid.y;
    let b = wid.z;
    let row = tid / TPR;
    let lane = tid % TPR;
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;
    let obase = b * p.T * p.C + h * p.hs;
    let k0 = kb * BK;
    let kpos = k0 + row;
    let nqb = (p.T + BQ - 1u) / BQ;

    var dk = array<f32, NACC>();
    var dv = array<f32, NACC>();
    for (var qb = kb; qb < nqb; qb++) {
        let q0 = qb * BQ;
        // s^T = k . q: the forward's products in the forward's order.
        var s = array<f32, KPT>();
        for (var c0 = 0u; c0 < p.hs; c0 += DC) {
            for (var e = tid; e < BQ * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                let col = c0 + c;
                var qv = 0.0;
                var kv = 0.0;
                if (col < p.hs && q0 + r < p.T) { qv = qkv[base + (q0 + r) * C3 + col]; }
                if (col < p.hs && k0 + r < p.T) { kv = qkv[base + (k0 + r) * C3 + p.C + col]; }
                tq[r * PAD + c] = qv;
                tk[r * PAD + c] = kv;
            }
            workgroupBarrier();
            for (var c = 0u; c < DC; c++) {
                let kv = tk[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { s[j] += tq[(lane + j * TPR) * PAD + c] * kv; }
            }
            workgroupBarrier();
        }
        // dP^T = v . dout
        var dp = array<f32, KPT>();
        for (var c0 = 0u; c0 < p.hs; c0 += DC) {
            for (var e = tid; e < BQ * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                let col = c0 + c;
                var ov = 0.0;
                var vv = 0.0;
                if (col < p.hs && q0 + r < p.T) { ov = dout[obase + (q0 + r) * p.C + col]; }
                if (col < p.hs && k0 + r < p.T) { vv = qkv[base + (k0 + r) * C3 + 2u * p.C + col]; }
                tq[r * PAD + c] = ov;
                tk[r * PAD + c] = vv;
            }
            workgroupBarrier();
            for (var c = 0u; c < DC; c++) {
                let vv = tk[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { dp[j] += tq[(lane + j * TPR) * PAD + c] * vv; }
            }
            workgroupBarrier();
        }
        var pr = array<f32, KPT>();
        var ds = array<f32, KPT>();
        for (var j = 0u; j < KPT; j++) {
            let qpos = q0 + lane + j * TPR;
            var lse_j = 0.0;
            var d_j = 0.0;
            if (qpos < p.T) {
                lse_j = lse[(b * p.NH + h) * p.T + qpos];
                d_j = delta[(b * p.NH + h) * p.T + qpos];
            }
            // kpos <= qpos < T also keeps keys past T out.
            pr[j] = select(0.0, exp(s[j] * p.scale - lse_j), kpos <= qpos && qpos < p.T);
            ds[j] = pr[j] * (dp[j] - d_j);
            ts[row * PAD + lane + j * TPR] = pr[j];
        }
        // dv += P^T @ dout (the barrier after the load also publishes ts).
        for (var ch = 0u; ch < NCH; ch++) {
            let c0 = ch * DC;
            if (c0 < p.hs) {
                for (var e = tid; e < BQ * DC; e += WG) {
                    let r = e / DC;
                    let c = e % DC;
                    var ov = 0.0;
                    if (c0 + c < p.hs && q0 + r < p.T) { ov = dout[obase + (q0 + r) * p.C + c0 + c]; }
                    tq[r * PAD + c] = ov;
                }
                workgroupBarrier();
                for (var i = 0u; i < BQ; i++) {
                    let pv = ts[row * PAD + i];
                    for (var u = 0u; u < CPT; u++) { dv[ch * CPT + u] += pv * tq[i * PAD + lane + u * TPR]; }
                }
                workgroupBarrier();
            }
        }
        for (var j = 0u; j < KPT; j++) { ts[row * PAD + lane + j * TPR] = ds[j]; }
        // dk += dS^T @ Q (scaled once at the end)
        for (var ch = 0u; ch < NCH; ch++) {
            let c0 = ch * DC;
            if (c0 < p.hs) {
                for (var e = tid; e < BQ * DC; e += WG) {
                    let r = e / DC;
                    let c = e % DC;
                    var qv = 0.0;
                    if (c0 + c < p.hs && q0 + r < p.T) { qv = qkv[base + (q0 + r) * C3 + c0 + c]; }
                    tq[r * PAD + c] = qv;
                }
                workgroupBarrier();
                for (var i = 0u; i < BQ; i++) {
                    let dsi = ts[row * PAD + i];
                    for (var u = 0u; u < CPT; u++) { dk[ch * CPT + u] += dsi * tq[i * PAD + lane + u * TPR]; }
                }
                workgroupBarrier();
            }
        }
    }
    if (kpos < p.T) {
        let krow = base + kpos * C3 + p.C;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, lane, u);
                if (col < p.hs) {
                    dqkv[krow + col] = p.scale * dk[ch * CPT + u];
                    dqkv[krow + p.C + col] = dv[ch * CPT + u];
                }
            }
        }
    }
}

// --- KERNEL: attention_forward_flat ---
// The CPU twin of attention_forward: invocation lid owns query t = q0 + lid.
// Keys come in blocks of AF_G: lane gl of a group loads key j0 + gl, and the
// group's 8 rows reach every lane by subgroupShuffle. Pass 1 finds the row's
// max m and sum l (online over blocks); pass 2 recomputes each block's
// scores, P = exp(score - lse), and adds P @ V of the block into out (the
// first block writes): out is this invocation's own row, so the running sum
// lives in global memory instead of registers, whatever the head size.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (B, T, C)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;  // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<f32>;        // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: AttnParams;

// Scaled scores of query row qrow against the keys that lanes g0 .. g0 + 7
// load from krow (key rows of qkv).
fn af_scores(qrow: u32, krow: u32, g0: u32) -> array<f32, AF_G> {
    var s = array<f32, AF_G>();
    for (var c = 0u; c < p.hs; c++) {
        let qv = qkv[qrow + c];
        let kv = qkv[krow + c];
        for (var jj = 0u; jj < AF_G; jj++) { s[jj] = fma(qv, subgroupShuffle(kv, g0 + jj), s[jj]); }
    }
    for (var jj = 0u; jj < AF_G; jj++) { s[jj] *= p.scale; }
    return s;
}

@compute @workgroup_size(AF_WG)
fn attention_forward_flat(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                          @builtin(subgroup_invocation_id) sid: u32) {
    let h = wid.y;
    let b = wid.z;
    let q0 = wid.x * AF_WG;
    let t = q0 + lid;
    let live = t < p.T;
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;  // q of (b, t = 0, head h); k at + C, v at + 2C
    let qrow = base + min(t, p.T - 1u) * C3;
    let g0 = sid & ~(AF_G - 1u);
    let gl = sid & (AF_G - 1u);
    // Keys that some query of the workgroup sees: a uniform loop bound, so
    // every lane takes part in every shuffle; rows past T are clamped.
    let kend = min(q0 + AF_WG, p.T);
    var m = NEG_INF;
    var l = 0.0;
    for (var j0 = 0u; j0 < kend; j0 += AF_G) {
        let s = af_scores(qrow, base + min(j0 + gl, p.T - 1u) * C3 + p.C, g0);
        var bmax = NEG_INF;
        for (var jj = 0u; jj < AF_G; jj++) {
            if (j0 + jj <= t) { bmax = max(bmax, s[jj]); }
        }
        let m_new = max(m, bmax);
        var bsum = 0.0;
        for (var jj = 0u; jj < AF_G; jj++) { bsum += select(0.0, exp(s[jj] - m_new), j0 + jj <= t); }
        l = l * exp(m - m_new) + bsum;
        m = m_new;
    }
    // Key 0 is in every row: l >= 1.
    let lse_t = m + log(l);
    let orow = (b * p.T + t) * p.C + h * p.hs;
    for (var j0 = 0u; j0 < kend; j0 += AF_G) {
        let krow = base + min(j0 + gl, p.T - 1u) * C3 + p.C;
        let s = af_scores(qrow, krow, g0);
        var pr = array<f32, AF_G>();
        for (var jj = 0u; jj < AF_G; jj++) { pr[jj] = select(0.0, exp(s[jj] - lse_t), j0 + jj <= t); }
        let add = live && j0 <= t;  // the block holds a key of this query
        for (var c = 0u; c < p.hs; c++) {
            let vv = qkv[krow + p.C + c];
            var o = 0.0;
            for (var jj = 0u; jj < AF_G; jj++) { o = fma(pr[jj], subgroupShuffle(vv, g0 + jj), o); }
            if (add) {
                if (j0 == 0u) { out[orow + c] = o; } else { out[orow + c] = out[orow + c] + o; }
            }
        }
    }
    if (live) { lse[(b * p.NH + h) * p.T + t] = lse_t; }
}

// --- KERNEL: attention_backward_dq_flat ---
// The CPU twin of attention_backward_dq: invocation lid owns query t, keys
// come in shuffled blocks of AF_G as in attention_forward_flat. Per block:
// scores and dP = dout . v (one pass over the head), dS = P * (dP - D) *
// scale, then dq += dS @ K into the q columns of dqkv (the first block
// writes: dqkv is overwritten).
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;  // (B, T, 3C), q columns written
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;         // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;       // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

@compute @workgroup_size(AF_WG)
fn attention_backward_dq_flat(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                              @builtin(subgroup_invocation_id) sid: u32) {
    let h = wid.y;
    let b = wid.z;
    let q0 = wid.x * AF_WG;
    let t = q0 + lid;
    let live = t < p.T;
    let tc = min(t, p.T - 1u);
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;
    let qrow = base + tc * C3;
    let orow = (b * p.T + tc) * p.C + h * p.hs;  // this query's dout
    let g0 = sid & ~(AF_G - 1u);
    let gl = sid & (AF_G - 1u);
    let lse_t = lse[(b * p.NH + h) * p.T + tc];
    let d_t = delta[(b * p.NH + h) * p.T + tc];
    let kend = min(q0 + AF_WG, p.T);
    for (var j0 = 0u; j0 < kend; j0 += AF_G) {
        let krow = base + min(j0 + gl, p.T - 1u) * C3 + p.C;  // key j0 + gl; its v at + C
        var s = array<f32, AF_G>();
        var dp = array<f32, AF_G>();
        for (var c = 0u; c < p.hs; c++) {
            let qv = qkv[qrow + c];
            let ov = dout[orow + c];
            let kv = qkv[krow + c];
            let vv = qkv[krow + p.C + c];
            for (var jj = 0u; jj < AF_G; jj++) {
                s[jj] = fma(qv, subgroupShuffle(kv, g0 + jj), s[jj]);
                dp[jj] = fma(ov, subgroupShuffle(vv, g0 + jj), dp[jj]);
            }
        }
        var ds = array<f32, AF_G>();
        for (var jj = 0u; jj < AF_G; jj++) {
            let pij = exp(s[jj] * p.scale - lse_t);
            ds[jj] = select(0.0, pij * (dp[jj] - d_t) * p.scale, j0 + jj <= t);
        }
        let add = live && j0 <= t;
        for (var c = 0u; c < p.hs; c++) {
            let kv = qkv[krow + c];
            var a = 0.0;
            for (var jj = 0u; jj < AF_G; jj++) { a = fma(ds[jj], subgroupShuffle(kv, g0 + jj), a); }
            if (add) {
                if (j0 == 0u) { dqkv[qrow + c] = a; } else { dqkv[qrow + c] = dqkv[qrow + c] + a; }
            }
        }
    }
}

// --- KERNEL: attention_backward_dkdv_flat ---
// The CPU twin of attention_backward_dkdv: invocation lid owns key j =
// k0 + lid; queries come in shuffled blocks of AF_G from the key's own block
// on (earlier queries do not see it). Per block: scores and dP^T, then
// dv += P^T @ dout and dk += dS^T @ Q into the k and v columns of dqkv; the
// block holding j itself writes first (dqkv is overwritten).
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;  // (B, T, 3C), k and v columns written
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;         // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;       // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

@compute @workgroup_size(AF_WG)
fn attention_backward_dkdv_flat(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
                                @builtin(subgroup_invocation_id) sid: u32) {
    let h = wid.y;
    let b = wid.z;
    let k0 = wid.x * AF_WG;
    let j = k0 + lid;
    let live = j < p.T;
    let C3 = 3u * p.C;
    let base = b * p.T * C3 + h * p.hs;
    let krow = base + min(j, p.T - 1u) * C3 + p.C;  // this key's k; its v at + C
    let jb = j & ~(AF_G - 1u);                      // the query block that holds j
    let g0 = sid & ~(AF_G - 1u);
    let gl = sid & (AF_G - 1u);
    let lbase = (b * p.NH + h) * p.T;
    // k0 is a multiple of AF_G: the blocks start at the workgroup's own.
    for (var i0 = k0; i0 < p.T; i0 += AF_G) {
        let il = min(i0 + gl, p.T - 1u);  // query this lane loads for the group
        let qrow = base + il * C3;
        let orow = (b * p.T + il) * p.C + h * p.hs;
        let lse_l = lse[lbase + il];
        let d_l = delta[lbase + il];
        var s = array<f32, AF_G>();
        var dp = array<f32, AF_G>();
        for (var c = 0u; c < p.hs; c++) {
            let kv = qkv[krow + c];
            let vv = qkv[krow + p.C + c];
            let qv = qkv[qrow + c];
            let ov = dout[orow + c];
            for (var ii = 0u; ii < AF_G; ii++) {
                s[ii] = fma(kv, subgroupShuffle(qv, g0 + ii), s[ii]);
                dp[ii] = fma(vv, subgroupShuffle(ov, g0 + ii), dp[ii]);
            }
        }
        var pr = array<f32, AF_G>();
        var ds = array<f32, AF_G>();
        for (var ii = 0u; ii < AF_G; ii++) {
            let i = i0 + ii;
            let lse_i = subgroupShuffle(lse_l, g0 + ii);
            let d_i = subgroupShuffle(d_l, g0 + ii);
            pr[ii] = select(0.0, exp(s[ii] * p.scale - lse_i), j <= i && i < p.T);
            ds[ii] = pr[ii] * (dp[ii] - d_i) * p.scale;
        }
        let add = live && i0 >= jb;
        let first = i0 == jb;
        for (var c = 0u; c < p.hs; c++) {
            let ov = dout[orow + c];
            let qv = qkv[qrow + c];
            var dv = 0.0;
            var dk = 0.0;
            for (var ii = 0u; ii < AF_G; ii++) {
                dv = fma(pr[ii], subgroupShuffle(ov, g0 + ii), dv);
                dk = fma(ds[ii], subgroupShuffle(qv, g0 + ii), dk);
            }
            if (add) {
                let ki = krow + c;
                let vi = krow + p.C + c;
                if (first) {
                    dqkv[ki] = dk;
                    dqkv[vi] = dv;
                } else {
                    dqkv[ki] = dqkv[ki] + dk;
                    dqkv[vi] = dqkv[vi] + dv;
                }
            }
        }
    }
}
