// 09_decode.wgsl: the KV-cache decoder's row kernels (src/model/gpt2_decode.c):
// a few rows of activations at a time, each row one position of one slot
// (sequence). Which rows are live and where they go is in `rows_meta`, a u32
// array the host uploads before each pass:
//   rows_meta[0]               n: rows live in this pass (rows n.. are idle)
//   rows_meta[4 + 4 r + 0..2]  row r's token id, slot and position
//   decode_embed       x (R, C) = wte[token] + wpe[position] (rows >= n: 0)
//   decode_take_row    dst (C) = src[n - 1] (the last live row, for a prefill's logits)
//   decode_kv_write    kc, vc (slots, T, C) at (slot, position) = row's k, v from qkv (R, 3C)
//   decode_kv_write_f16   the same into f16 caches (halves in pairs, as array<u32>)
//   decode_residual_layernorm  res = a + b (or a alone), out = LayerNorm(res) row by row
//   decode_matvec      out (rows, n) = inp (rows, k) @ w (n, k)^T (+ bias) (then GELU): a
//                      matmul shaped for a few rows (a GEMV per row), f32 weights
//   decode_matvec_f16  the same with f16 weights (pairs as array<u32>) and the input
//                      rounded to f16, as the f16 mode's matmuls multiply
//   *_r1               the same compiled for one row
// Shapes: k a multiple of 4; views on 16-byte boundaries. Every kernel takes
// its rows as a count (MatvecParams.rows, capped by rows_meta[0] when flag
// bit 1 is set). A weight larger than one binding (wte in fp32 on lavapipe)
// is taken in pieces of rows, a dispatch each: decode_embed's [v0, v0 + nv),
// decode_matvec's output columns [o0, o0 + n). See docs/kernels/09_decode.md.

struct RowParams {
    rows: u32,  // R: rows of the activations bound
    c: u32,     // C: floats a row (the channels)
    t: u32,     // T: positions a slot of the caches holds
    v: u32,     // V: vocabulary (decode_embed refuses nothing: the host checks ids)
    v0: u32,    // decode_embed: wte holds rows [v0, v0 + nv) (a binding's worth);
    nv: u32,    // rows of other tokens are left to another dispatch
    pad0: u32,
    pad1: u32,
}

struct MatvecParams {
    rows: u32,   // rows of inp and out bound
    k: u32,      // inner size (floats a row of inp and of w)
    n: u32,      // outputs a row in this dispatch (rows of w bound)
    flag: u32,   // bit 0: add bias (n); bit 1: only min(rows, rows_meta[0]) rows; bit 2: GELU after
    ldo: u32,    // floats from one row of out to the next (the whole output's n)
    o0: u32,     // this dispatch's first output column (w and bias are bound from it)
    pad0: u32,
    pad1: u32,
}

struct LnParams {
    rows: u32,  // R
    c: u32,     // C
    flag: u32,  // bit 0: res = a + b (else the rows of a are normalised, res not written)
    pad0: u32,
}

const LN_EPS: f32 = 1e-5;

// decode_matvec: a workgroup takes MV_OUTS outputs of MV_ROWS rows; MV_LANES
// threads share one output, each summing k/4 vec4s at a stride of MV_LANES
// (so a warp reads a weight row in one sweep), four at a time while four
// remain, then a reduction in workgroup memory. Grid (ceil(n / MV_OUTS), ceil(rows / MV_ROWS), 1).
const MV_OUTS: u32 = 8u;
const MV_LANES: u32 = 32u;   // MV_OUTS * MV_LANES = WG
const MV_ROWS_MAX: u32 = 8u;
override MV_ROWS: u32 = 8u;  // rows a workgroup: 8, or 1 for the _r1 variants

// --- KERNEL: decode_embed ---
@group(0) @binding(0) var<storage, read_write> x: array<f32>;     // (R, C)
@group(0) @binding(1) var<storage, read> wte: array<f32>;         // (nv, C): rows v0.. of wte
@group(0) @binding(2) var<storage, read> wpe: array<f32>;         // (maxT, C)
@group(0) @binding(3) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(4) var<uniform> p: RowParams;

@compute @workgroup_size(WG)
fn decode_embed(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.rows * p.c) { return; }
    let r = i / p.c;
    let ch = i - r * p.c;
    if (r >= rows_meta[0]) {
        if (p.v0 == 0u) { x[i] = 0.0; }
        return;
    }
    let tok = min(rows_meta[4u + 4u * r], p.v - 1u);
    if (tok < p.v0 || tok - p.v0 >= p.nv) { return; }
    let pos = min(rows_meta[4u + 4u * r + 2u], p.t - 1u);
    x[i] = wte[(tok - p.v0) * p.c + ch] + wpe[pos * p.c + ch];
}

// --- KERNEL: decode_take_row ---
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;   // (C)
@group(0) @binding(1) var<storage, read> src: array<f32>;         // (R, C)
@group(0) @binding(2) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(3) var<uniform> p: RowParams;

@compute @workgroup_size(WG)
fn decode_take_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let ch = gid.x;
    if (ch >= p.c) { return; }
    let r = clamp(rows_meta[0], 1u, p.rows) - 1u;
    dst[ch] = src[r * p.c + ch];
}

// --- TEMPLATE: decode_kv_writew ---
// decode_kv_write and decode_kv_write_f16: {{E}} a cache element (f32, or
// u32: a pair of halves), {{N}} channels a thread (C even for 2), {{KV}} the
// function that reads them from qkv (kv1, kv2); {{F16}} the entry point's suffix.
// --- KERNEL: decode_kv_write = decode_kv_writew with E=f32, N=1u, KV=kv1, F16= ---
// --- KERNEL: decode_kv_write_f16 = decode_kv_writew with E=u32, N=2u, KV=kv2, F16=_f16 ---
@group(0) @binding(0) var<storage, read_write> kc: array<{{E}}>;    // (slots, T, C / N)
@group(0) @binding(1) var<storage, read_write> vc: array<{{E}}>;    // (slots, T, C / N)
@group(0) @binding(2) var<storage, read> qkv: array<f32>;         // (R, 3C)
@group(0) @binding(3) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(4) var<uniform> p: RowParams;

fn kv1(q: u32) -> f32 { return qkv[q]; }
fn kv2(q: u32) -> u32 { return f16_pair(qkv[q], qkv[q + 1u]); }

@compute @workgroup_size(WG)
fn decode_kv_write{{F16}}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    let cn = p.c / {{N}};  // threads a row
    let r = i / cn;
    if (r >= min(p.rows, rows_meta[0])) { return; }
    let j = i - r * cn;
    let dst = (rows_meta[4u + 4u * r + 1u] * p.t + rows_meta[4u + 4u * r + 2u]) * cn + j;
    let k0 = r * 3u * p.c + p.c + {{N}} * j;
    kc[dst] = {{KV}}(k0);
    vc[dst] = {{KV}}(k0 + p.c);
}

// --- KERNEL: decode_residual_layernorm ---
// One workgroup a row (rows past rows_meta[0] idle): the residual add, then
// mean and biased variance over C (eps 1e-5), as 02_layernorm.wgsl.
@group(0) @binding(0) var<storage, read_write> res: array<f32>;   // (R, C): a + b (a stand-in without flag bit 0)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;   // (R, C)
@group(0) @binding(2) var<storage, read> a: array<f32>;           // (R, C)
@group(0) @binding(3) var<storage, read> b: array<f32>;           // (R, C) (a stand-in without flag bit 0)
@group(0) @binding(4) var<storage, read> weight: array<f32>;      // (C)
@group(0) @binding(5) var<storage, read> bias: array<f32>;        // (C)
@group(0) @binding(6) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(7) var<uniform> p: LnParams;

var<workgroup> ln_live: u32;

fn ln_in(i: u32) -> f32 {
    if ((p.flag & 1u) != 0u) { return a[i] + b[i]; }
    return a[i];
}

@compute @workgroup_size(WG)
fn decode_residual_layernorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
                             @builtin(subgroup_size) sg_size: u32) {
    if (tid == 0u) { ln_live = min(p.rows, rows_meta[0]); }
    let r = wid.x;
    if (r >= workgroupUniformLoad(&ln_live)) { return; }
    let base = r * p.c;
    var s = 0.0;
    for (var ch = tid; ch < p.c; ch += WG) {
        let v = ln_in(base + ch);
        if ((p.flag & 1u) != 0u) { res[base + ch] = v; }
        s += v;
    }
    let m = wg_reduce_sum(tid, sg_size, s) / f32(p.c);
    var q = 0.0;
    for (var ch = tid; ch < p.c; ch += WG) {
        let d = ln_in(base + ch) - m;
        q += d * d;
    }
    let rs = 1.0 / sqrt(wg_reduce_sum(tid, sg_size, q) / f32(p.c) + LN_EPS);
    for (var ch = tid; ch < p.c; ch += WG) {
        out[base + ch] = (ln_in(base + ch) - m) * rs * weight[ch] + bias[ch];
    }
}

// --- TEMPLATE: decode_matvecw ---
// decode_matvec and decode_matvec_f16: {{W}} a weight element (four floats,
// or four halves in two u32s), {{LW}} what turns one into a vec4<f32>
// (nothing, or unpack4), {{LX}} what the input goes through (nothing, or
// round16: the f16 mode's cast); {{F16}} the entry point's suffix.
// --- KERNEL: decode_matvec = decode_matvecw with W=vec4<f32>, LW=, LX=, F16= ---
// --- KERNEL: decode_matvec_r1 = decode_matvec with MV_ROWS=1 ---
// --- KERNEL: decode_matvec_f16 = decode_matvecw with W=vec2<u32>, LW=unpack4, LX=round16, F16=_f16 ---
// --- KERNEL: decode_matvec_f16_r1 = decode_matvec_f16 with MV_ROWS=1 ---
@group(0) @binding(0) var<storage, read> inp: array<vec4<f32>>;   // (rows, k / 4)
@group(0) @binding(1) var<storage, read> w: array<{{W}}>;     // (n, k / 4): 4 floats, or 4 halves, each
@group(0) @binding(2) var<storage, read> bias: array<f32>;        // (n); a stand-in without bit 0
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (rows, ldo): columns [o0, o0 + n)
@group(0) @binding(4) var<storage, read> rows_meta: array<u32>;
@group(0) @binding(5) var<uniform> p: MatvecParams;

var<workgroup> mv_part: array<f32, 2048>;  // [output][row][lane]: MV_OUTS * MV_ROWS_MAX * MV_LANES
var<workgroup> mv_rows: u32;

fn mv_live_rows(tid: u32) -> u32 {
    if (tid == 0u) {
        mv_rows = select(p.rows, min(p.rows, rows_meta[0]), (p.flag & 2u) != 0u);
    }
    return workgroupUniformLoad(&mv_rows);
}

// Four halves (two u32s) as floats.
fn unpack4(w2: vec2<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w2.x), unpack2x16float(w2.y)); }

// x rounded to f16 and back: what the f16 mode's cast of a matmul input keeps.
fn round16(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(f16_pair(x.x, x.y)), unpack2x16float(f16_pair(x.z, x.w)));
}

@compute @workgroup_size(WG)
fn decode_matvec{{F16}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let nrows = mv_live_rows(tid);
    let r0 = wid.y * MV_ROWS;
    if (r0 >= nrows) { return; }
    let ol = tid / MV_LANES;
    let lane = tid % MV_LANES;
    let o = wid.x * MV_OUTS + ol;
    let k4 = p.k / 4u;
    let nr = min(MV_ROWS, nrows - r0);  // live rows of this workgroup's block
    var acc: array<f32, MV_ROWS_MAX>;
    if (o < p.n) {
        let wb = o * k4;
        var i = lane;
        // four weight elements (4 floats or 4 halves each) of the row a lane at a time: four loads in flight
        for (; i + 3u * MV_LANES < k4; i += 4u * MV_LANES) {
            let w0 = {{LW}}(w[wb + i]);
            let w1 = {{LW}}(w[wb + i + MV_LANES]);
            let w2 = {{LW}}(w[wb + i + 2u * MV_LANES]);
            let w3 = {{LW}}(w[wb + i + 3u * MV_LANES]);
            for (var r = 0u; r < MV_ROWS; r++) {
                if (r >= nr) { break; }
                let xb = (r0 + r) * k4 + i;
                acc[r] += (dot(w0, {{LX}}(inp[xb])) + dot(w1, {{LX}}(inp[xb + MV_LANES]))) +
                          (dot(w2, {{LX}}(inp[xb + 2u * MV_LANES])) + dot(w3, {{LX}}(inp[xb + 3u * MV_LANES])));
            }
        }
        for (; i < k4; i += MV_LANES) {
            let wv = {{LW}}(w[wb + i]);
            for (var r = 0u; r < MV_ROWS; r++) {
                if (r >= nr) { break; }
                acc[r] += dot(wv, {{LX}}(inp[(r0 + r) * k4 + i]));
            }
        }
    }
    for (var r = 0u; r < MV_ROWS; r++) { mv_part[(ol * MV_ROWS + r) * MV_LANES + lane] = acc[r]; }
    workgroupBarrier();
    if (tid < MV_OUTS * MV_ROWS) {
        let ol2 = tid / MV_ROWS;
        let r = tid % MV_ROWS;
        let o2 = wid.x * MV_OUTS + ol2;
        if (o2 < p.n && r0 + r < nrows) {
            var s = 0.0;
            for (var l = 0u; l < MV_LANES; l++) { s += mv_part[(ol2 * MV_ROWS + r) * MV_LANES + l]; }
            if ((p.flag & 1u) != 0u) { s += bias[o2]; }
            if ((p.flag & 4u) != 0u) { s = gelu_value(s); }
            out[(r0 + r) * p.ldo + p.o0 + o2] = s;
        }
    }
}
