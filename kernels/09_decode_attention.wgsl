// 09_decode_attention.wgsl: causal self-attention of one query row against
// one slot's cached keys and values (src/model/gpt2_decode.c). Row r (of the
// pass's rows_meta, as 09_decode.wgsl: rows_meta[0] live rows, row r's slot
// and position at rows_meta[4 + 4 r + 1..2]) at position `pos` of slot `s`
// attends to the cache's positions 0..pos of slot s, whose keys and values
// (its own included) decode_kv_write stored before, or (flag bit 0, a step:
// no two rows of one slot) its own the kernel stores first:
//   out[r, h, :] = softmax_j(q[r, h] . k[s, j, h] / sqrt(hs)) @ v[s, j, h]
// qkv (R, 3C) holds q at [0, C) of each row; the caches are (slots, T, C)
// with head h at channels [h hs, (h + 1) hs).
//   decode_attention      f32 caches
//   decode_attention_f16  f16 caches (halves in pairs, as array<u32>)
// Dispatch: one workgroup of ATT_WG threads a (row, head): grid (R, NH, 1).
// The scores of ATT_CHUNK positions at a time sit in workgroup memory, with
// an online softmax across chunks (running max and sum, the output rescaled);
// the P V sum is split between ATT_GROUPS groups of threads by position and
// added up at the end; the reductions use workgroup memory only, so any
// subgroup size works.
// hs <= ATT_MAX_HS. See docs/kernels/09_decode.md.

struct DecodeAttnParams {
    rows: u32,   // R: rows bound
    c: u32,      // C
    nh: u32,     // NH
    t: u32,      // T: positions a slot of the caches holds
    scale: f32,  // 1 / sqrt(hs)
    flag: u32,   // bit 0: store the row's own key and value first (no two rows share a slot)
    pad0: u32,
    pad1: u32,
}

const ATT_WG: u32 = 256u;
const ATT_CHUNK: u32 = 256u;
const ATT_MAX_HS: u32 = 128u;        // = WGPT_ATTENTION_MAX_HS
const ATT_LANES: u32 = 64u;          // output channels summed at once (a group of threads)
const ATT_GROUPS: u32 = ATT_WG / ATT_LANES;  // groups: each sums every ATT_GROUPS-th position
const ATT_D_PER: u32 = ATT_MAX_HS / ATT_LANES;  // output channels a thread

var<workgroup> sq: array<f32, ATT_MAX_HS>;
var<workgroup> ss: array<f32, ATT_CHUNK>;
var<workgroup> sred: array<f32, ATT_WG>;
var<workgroup> sacc: array<f32, ATT_WG * ATT_D_PER>;  // [group][i][lane]: the groups' partial outputs
var<workgroup> srow: vec3<u32>;  // live, slot, positions to attend (pos + 1)

// Sum (is_max false) or maximum of v over the workgroup, to every thread.
fn att_reduce(tid: u32, v: f32, is_max: bool) -> f32 {
    sred[tid] = v;
    workgroupBarrier();
    for (var s = ATT_WG / 2u; s > 0u; s /= 2u) {
        if (tid < s) {
            let o = sred[tid + s];
            sred[tid] = select(sred[tid] + o, max(sred[tid], o), is_max);
        }
        workgroupBarrier();
    }
    let r = sred[0];
    workgroupBarrier();
    return r;
}

// q . k of the key at element `base` of the caches (hs floats), four sums at a
// time so that four loads are in flight.
fn att_score(base: u32, hs: u32) -> f32 {
    var s0 = 0.0;
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var d = 0u;
    for (; d + 3u < hs; d += 4u) {
        s0 += sq[d] * load_k(base + d);
        s1 += sq[d + 1u] * load_k(base + d + 1u);
        s2 += sq[d + 2u] * load_k(base + d + 2u);
        s3 += sq[d + 3u] * load_k(base + d + 3u);
    }
    for (; d < hs; d++) { s0 += sq[d] * load_k(base + d); }
    return (s0 + s1) + (s2 + s3);
}

// The body of both kernels: load_k(e) and load_v(e) read float e of the
// caches, store_kv(r, e0, h0, n) writes the row's key and value there.
fn attend(r: u32, h: u32, tid: u32) {
    if (tid == 0u) {
        let live = r < min(p.rows, rows_meta[0]);
        srow = vec3<u32>(select(0u, 1u, live), rows_meta[4u + 4u * r + 1u], rows_meta[4u + 4u * r + 2u] + 1u);
    }
    let row = workgroupUniformLoad(&srow);
    if (row.x == 0u) { return; }
    let slot = row.y;
    let len = min(row.z, p.t);
    let hs = p.c / p.nh;
    if ((p.flag & 1u) != 0u) {
        // this (row, head)'s slice of the key and value, then read back by this workgroup alone
        store_kv(r, (slot * p.t + len - 1u) * p.c + h * hs, h * hs, hs, tid);
        storageBarrier();
    }
    for (var d = tid; d < hs; d += ATT_WG) { sq[d] = qkv[r * 3u * p.c + h * hs + d]; }
    workgroupBarrier();
    let lane = tid % ATT_LANES;
    let grp = tid / ATT_LANES;
    var m = NEG_INF;
    var l = 0.0;
    var acc: array<f32, ATT_D_PER>;
    for (var t0 = 0u; t0 < len; t0 += ATT_CHUNK) {
        let cn = min(ATT_CHUNK, len - t0);
        var local_max = NEG_INF;
        for (var j = tid; j < cn; j += ATT_WG) {
            let s = att_score((slot * p.t + t0 + j) * p.c + h * hs, hs) * p.scale;
            ss[j] = s;
            local_max = max(local_max, s);
        }
        let m_new = max(m, att_reduce(tid, local_max, true));
        let corr = exp(m - m_new);
        var local_sum = 0.0;
        for (var j = tid; j < cn; j += ATT_WG) {
            let e = exp(ss[j] - m_new);
            ss[j] = e;
            local_sum += e;
        }
        l = l * corr + att_reduce(tid, local_sum, false);  // its barriers publish ss
        // group grp sums positions grp, grp + ATT_GROUPS, ..., two at a time
        for (var i = 0u; i < ATT_D_PER; i++) {
            let d = lane + i * ATT_LANES;
            if (d < hs) {
                let base = (slot * p.t + t0) * p.c + h * hs + d;
                var a0 = 0.0;
                var a1 = 0.0;
                var j = grp;
                for (; j + ATT_GROUPS < cn; j += 2u * ATT_GROUPS) {
                    a0 += ss[j] * load_v(base + j * p.c);
                    a1 += ss[j + ATT_GROUPS] * load_v(base + (j + ATT_GROUPS) * p.c);
                }
                if (j < cn) { a0 += ss[j] * load_v(base + j * p.c); }
                acc[i] = acc[i] * corr + (a0 + a1);
            }
        }
        m = m_new;
        workgroupBarrier();  // ss is rewritten by the next chunk
    }
    for (var i = 0u; i < ATT_D_PER; i++) { sacc[(grp * ATT_D_PER + i) * ATT_LANES + lane] = acc[i]; }
    workgroupBarrier();
    if (grp == 0u) {
        for (var i = 0u; i < ATT_D_PER; i++) {
            let d = lane + i * ATT_LANES;
            if (d < hs) {
                var o = 0.0;
                for (var g = 0u; g < ATT_GROUPS; g++) { o += sacc[(g * ATT_D_PER + i) * ATT_LANES + lane]; }
                out[r * p.c + h * hs + d] = o / l;
            }
        }
    }
}

// --- KERNEL: decode_attention ---
@group(0) @binding(0) var<storage, read> qkv: array<f32>;         // (R, 3C)
@group(0) @binding(1) var<storage, read_write> kc: array<f32>;    // (slots, T, C)
@group(0) @binding(2) var<storage, read_write> vc: array<f32>;    // (slots, T, C)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(5) var<uniform> p: DecodeAttnParams;

fn load_k(e: u32) -> f32 { return kc[e]; }
fn load_v(e: u32) -> f32 { return vc[e]; }

// Channels [c0, c0 + n) of row r's key and value into the caches from element e0.
fn store_kv(r: u32, e0: u32, c0: u32, n: u32, tid: u32) {
    for (var d = tid; d < n; d += ATT_WG) {
        kc[e0 + d] = qkv[r * 3u * p.c + p.c + c0 + d];
        vc[e0 + d] = qkv[r * 3u * p.c + 2u * p.c + c0 + d];
    }
}

@compute @workgroup_size(ATT_WG)
fn decode_attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    attend(wid.x, wid.y, tid);
}

// --- KERNEL: decode_attention_f16 ---
@group(0) @binding(0) var<storage, read> qkv: array<f32>;         // (R, 3C)
@group(0) @binding(1) var<storage, read_write> kc: array<u32>;    // (slots, T, C / 2) f16 pairs
@group(0) @binding(2) var<storage, read_write> vc: array<u32>;    // (slots, T, C / 2)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(5) var<uniform> p: DecodeAttnParams;

fn load_k(e: u32) -> f32 { return unpack2x16float(kc[e / 2u])[e % 2u]; }
fn load_v(e: u32) -> f32 { return unpack2x16float(vc[e / 2u])[e % 2u]; }

// The same in pairs of halves (e0, c0 and n even: the host's check).
fn store_kv(r: u32, e0: u32, c0: u32, n: u32, tid: u32) {
    for (var j = tid; j < n / 2u; j += ATT_WG) {
        let k0 = r * 3u * p.c + p.c + c0 + 2u * j;
        kc[e0 / 2u + j] = f16_pair(qkv[k0], qkv[k0 + 1u]);
        vc[e0 / 2u + j] = f16_pair(qkv[k0 + p.c], qkv[k0 + p.c + 1u]);
    }
}

@compute @workgroup_size(ATT_WG)
fn decode_attention_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    attend(wid.x, wid.y, tid);
}
