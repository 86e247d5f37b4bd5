// 09_decode_attention.wgsl: causal self-attention of one query row against
// one slot's cached keys and values (src/model/gpt2_decode.c). Row r (of the
// pass's rows_meta, as 09_decode.wgsl: rows_meta[0] live rows, row r's slot
// and position at rows_meta[4 + 4 r + 1..2]) at position `pos` of slot `s`
// attends to the cache's positions 0..pos of slot s, whose keys and values
// (its own included) decode_kv_write stored before:
//   out[r, h, :] = softmax_j(q[r, h] . k[s, j, h] / sqrt(hs)) @ v[s, j, h]
// qkv (R, 3C) holds q at [0, C) of each row; the caches are (slots, T, C)
// with head h at channels [h hs, (h + 1) hs).
//   decode_attention      f32 caches
//   decode_attention_f16  f16 caches (halves in pairs, as array<u32>)
// Dispatch: one workgroup of ATT_WG threads a (row, head): grid (R, NH, 1).
// The scores of ATT_CHUNK positions at a time sit in workgroup memory, with
// an online softmax across chunks (running max and sum, the output rescaled);
// the reductions use workgroup memory only, so any subgroup size works.
// hs <= ATT_MAX_HS. See docs/kernels/09_decode.md.

struct DecodeAttnParams {
    rows: u32,   // R: rows bound
    c: u32,      // C
    nh: u32,     // NH
    t: u32,      // T: positions a slot of the caches holds
    scale: f32,  // 1 / sqrt(hs)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

const ATT_WG: u32 = 64u;
const ATT_CHUNK: u32 = 256u;
const ATT_MAX_HS: u32 = 128u;        // = WGPT_ATTENTION_MAX_HS
const ATT_D_PER: u32 = ATT_MAX_HS / ATT_WG;  // output channels a thread

var<workgroup> sq: array<f32, ATT_MAX_HS>;
var<workgroup> ss: array<f32, ATT_CHUNK>;
var<workgroup> sred: array<f32, ATT_WG>;
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

// The body of both kernels: load_k(e) and load_v(e) read float e of the caches.
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
    for (var d = tid; d < hs; d += ATT_WG) { sq[d] = qkv[r * 3u * p.c + h * hs + d]; }
    workgroupBarrier();
    var m = NEG_INF;
    var l = 0.0;
    var acc: array<f32, ATT_D_PER>;
    for (var t0 = 0u; t0 < len; t0 += ATT_CHUNK) {
        let cn = min(ATT_CHUNK, len - t0);
        var local_max = NEG_INF;
        for (var j = tid; j < cn; j += ATT_WG) {
            let base = (slot * p.t + t0 + j) * p.c + h * hs;
            var s = 0.0;
            for (var d = 0u; d < hs; d++) { s += sq[d] * load_k(base + d); }
            s *= p.scale;
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
        for (var i = 0u; i < ATT_D_PER; i++) {
            let d = tid + i * ATT_WG;
            if (d < hs) {
                var a = acc[i] * corr;
                let base = (slot * p.t + t0) * p.c + h * hs + d;
                for (var j = 0u; j < cn; j++) { a += ss[j] * load_v(base + j * p.c); }
                acc[i] = a;
            }
        }
        m = m_new;
        workgroupBarrier();  // ss is rewritten by the next chunk
    }
    for (var i = 0u; i < ATT_D_PER; i++) {
        let d = tid + i * ATT_WG;
        if (d < hs) { out[r * p.c + h * hs + d] = acc[i] / l; }
    }
}

// --- KERNEL: decode_attention ---
@group(0) @binding(0) var<storage, read> qkv: array<f32>;         // (R, 3C)
@group(0) @binding(1) var<storage, read> kc: array<f32>;          // (slots, T, C)
@group(0) @binding(2) var<storage, read> vc: array<f32>;          // (slots, T, C)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(5) var<uniform> p: DecodeAttnParams;

fn load_k(e: u32) -> f32 { return kc[e]; }
fn load_v(e: u32) -> f32 { return vc[e]; }

@compute @workgroup_size(ATT_WG)
fn decode_attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    attend(wid.x, wid.y, tid);
}

// --- KERNEL: decode_attention_f16 ---
@group(0) @binding(0) var<storage, read> qkv: array<f32>;         // (R, 3C)
@group(0) @binding(1) var<storage, read> kc: array<u32>;          // (slots, T, C / 2) f16 pairs
@group(0) @binding(2) var<storage, read> vc: array<u32>;          // (slots, T, C / 2)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (R, C)
@group(0) @binding(4) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(5) var<uniform> p: DecodeAttnParams;

fn load_k(e: u32) -> f32 { return unpack2x16float(kc[e / 2u])[e % 2u]; }
fn load_v(e: u32) -> f32 { return unpack2x16float(vc[e / 2u])[e % 2u]; }

@compute @workgroup_size(ATT_WG)
fn decode_attention_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    attend(wid.x, wid.y, tid);
}
