// 08_precision.wgsl: conversions between f32 tensors and the f16 copies the
// subgroup-matrix matmuls read (03_linear_sgm.wgsl).
//   cast_f16  dst (n halves, packed two a u32) = f16(src (n floats)), round to
//             nearest even; +-inf for what rounds past f16's largest finite
//             value (65504) and for +-inf, a quiet NaN for NaN (IEEE's results:
//             WGSL leaves them undefined, so they are written out here); n even.
// pack2x16float is core WGSL: this file needs no shader-f16.
//   cast_f16_vec4  the same for n % 8 == 0 and views on 16-byte boundaries
//             (GPUs; the host picks it): 8 elements a step, two vec4<f32> in,
//             one vec4<u32> out, CAST_V8 steps a thread at stride WG.
//   transpose_f16  dst (cols x rows halves) = src (rows x cols halves)^T, bit
//             for bit; cast_f16_transpose the same from f32 src, rounded as
//             cast_f16 rounds (the subgroup-matrix matmuls' row-major inputs);
//             gelu_f16_transpose of GELU(src) (gelu_value, the shared
//             preamble's), rounded so: gelu_forward_f16 then transpose_f16's
//             halves in one pass (the fcproj matmul's input);
//             layernorm_f16_transpose of the LayerNorm of src from its rows'
//             mean and rstd (layernorm_stats, 02_layernorm.wgsl) and its
//             columns' weight and bias, with the forward's arithmetic:
//             layernorm_forward then cast_f16_transpose's halves in one pass
//             (the qkv, fc and logits matmuls' inputs).
// ABI: dst (array<u32>, or array<vec4<u32>>), src (array<f32>, or
// array<vec4<f32>>), then `p: CastParams`; the transposes: see their section.
// Dispatch through dispatch1d (2D past 65535): cast_f16 one thread per pair,
// ceil(n / 2 / WG) workgroups; cast_f16_vec4 ceil(n / (8 CAST_V8 WG)).
// See docs/kernels/08_precision.md.

struct CastParams {
    n: u32,  // elements (even; a multiple of 8 for cast_f16_vec4)
}

const CAST_V8: u32 = 2u;  // 8-element steps a thread of cast_f16_vec4

// f16_bits and f16_pair (the IEEE conversion) are in the shared preamble
// (00_shared.wgsl): the cross-entropy's f16 gradient uses them too.

// The transposes' (transpose_f16 and its _v8 twin, with their FROM_F32
// variants): a TR x TR tile of halves a workgroup, each half in a u32 of
// workgroup memory, rows padded by one against bank conflicts. Their
// bindings 2-5 serve layernorm_f16_transpose only; the others bind src there.
struct TransposeParams {
    rows: u32,
    cols: u32,
}

const TR: u32 = 64u;  // tile side in halves (TRANSPOSE_TILE in src/model/precision.c)
override FROM_F32: bool = false;  // cast_f16_transpose(_v8): src holds floats
override GELU: bool = false;      // gelu_f16_transpose(_v8): those floats GELU'd first (with FROM_F32); gelu_forward_f16
override LN: bool = false;        // layernorm_f16_transpose(_v8): those floats normalised first (with FROM_F32)

// A source float on its way to f16: GELU'd in gelu_f16_transpose.
fn f16_in(x: f32) -> u32 {
    if (GELU) { return f16_bits(gelu_value(x)); }
    return f16_bits(x);
}

// Four source floats on their way to f16: GELU'd in gelu_forward_f16.
fn f16_in4(v: vec4<f32>) -> vec4<f32> {
    if (GELU) { return gelu4(v); }
    return v;
}

var<workgroup> tile: array<u32, TR * (TR + 1u)>;  // half (r, c) in the low bits of [r * (TR + 1) + c]
const_assert TR * TR % (8u * WG) == 0u;  // whole vec4s a thread in the _v8 kernels' loads

// --- KERNEL: cast_f16 ---
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;  // (n / 2)
@group(0) @binding(1) var<storage, read> src: array<f32>;        // (n)
@group(0) @binding(2) var<uniform> p: CastParams;

@compute @workgroup_size(WG)
fn cast_f16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n / 2u) { return; }
    dst[i] = f16_pair(src[2u * i], src[2u * i + 1u]);
}

// --- KERNEL: cast_f16_vec4 ---
// --- KERNEL: gelu_forward_f16 = cast_f16_vec4 with GELU=1 ---
// All loads of a thread first, then the stores: CAST_V8 x 32 bytes in flight.
// gelu_forward_f16 (05_gelu.wgsl's f16 forward, the f16 mode's GELU; its
// GeluParams is this CastParams, {n}): the halves of GELU(src), gelu4 of the
// loaded vec4s before the rounding.
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<u32>>;  // (n / 8)
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;        // (n / 4)
@group(0) @binding(2) var<uniform> p: CastParams;

@compute @workgroup_size(WG)
fn cast_f16_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) tid: u32) {
    let n8 = p.n / 8u;
    let i0 = wg_first(wid, nwg, tid, CAST_V8);
    var a = array<vec4<f32>, 2u * CAST_V8>();
    for (var k = 0u; k < CAST_V8; k++) {
        let i = i0 + k * WG;
        if (i < n8) {
            a[2u * k] = src[2u * i];
            a[2u * k + 1u] = src[2u * i + 1u];
        }
    }
    for (var k = 0u; k < CAST_V8; k++) {
        let i = i0 + k * WG;
        let x = f16_in4(a[2u * k]);
        let y = f16_in4(a[2u * k + 1u]);
        if (i < n8) { dst[i] = f16_eight(x, y); }
    }
}

// --- KERNEL: transpose_f16 ---
// dst (cols x rows halves) = src (rows x cols halves) transposed, bit for bit;
// rows and cols even (whole u32 pairs on both sides). cast_f16_transpose:
// src is rows x cols floats instead, each rounded as cast_f16 rounds it;
// layernorm_f16_transpose: each normalised first, (x - mean[r]) * rstd[r] *
// w[c] + b[c], the LayerNorm forwards' expression (02_layernorm.wgsl).
// One workgroup a TR x TR tile of halves: coalesced loads of the tile's rows,
// each half kept in a u32 of workgroup memory (rows padded by one against
// bank conflicts), then coalesced u32 stores of the tile's columns, two
// source rows a u32 (TR * TR / 2 pairs: WG threads move 8 each). Grid:
// (ceil(cols / TR), ceil(rows / TR)).
@group(0) @binding(0) var<storage, read_write> tdst: array<u32>;  // (cols x rows / 2)
@group(0) @binding(1) var<storage, read> tsrc: array<u32>;        // (rows x cols / 2), or floats' bits (rows x cols)
@group(0) @binding(2) var<storage, read> ln_mean: array<f32>;     // (rows), LN
@group(0) @binding(3) var<storage, read> ln_rstd: array<f32>;     // (rows), LN
@group(0) @binding(4) var<storage, read> ln_w: array<f32>;        // (cols), LN
@group(0) @binding(5) var<storage, read> ln_b: array<f32>;        // (cols), LN
@group(0) @binding(6) var<uniform> tp: TransposeParams;

// Source float (r, c) as a half: normalised first where LN, else f16_in's.
fn half_at(r: u32, c: u32) -> u32 {
    let x = bitcast<f32>(tsrc[r * tp.cols + c]);
    if (LN) { return f16_bits((x - ln_mean[r]) * ln_rstd[r] * ln_w[c] + ln_b[c]); }
    return f16_in(x);
}

// Halves (r, c) and (r, c + 1) of the source, c even, as one u32.
fn pair_at(r: u32, c: u32) -> u32 {
    if (FROM_F32) { return half_at(r, c) | (half_at(r, c + 1u) << 16u); }
    return tsrc[(r * tp.cols + c) / 2u];
}

@compute @workgroup_size(WG)
fn transpose_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r0 = wid.y * TR;
    let c0 = wid.x * TR;
    for (var e = tid; e < TR * TR / 2u; e += WG) {
        let r = e / (TR / 2u);           // tile row
        let c = (e % (TR / 2u)) * 2u;    // tile column of the pair's first half
        var w = 0u;
        if (r0 + r < tp.rows && c0 + c < tp.cols) { w = pair_at(r0 + r, c0 + c); }
        tile[r * (TR + 1u) + c] = w & 0xffffu;
        tile[r * (TR + 1u) + c + 1u] = w >> 16u;
    }
    workgroupBarrier();
    for (var e = tid; e < TR * TR / 2u; e += WG) {
        let c = e / (TR / 2u);           // tile column: a row of dst
        let r = (e % (TR / 2u)) * 2u;    // tile row of the pair's first half
        if (c0 + c < tp.cols && r0 + r < tp.rows) {
            tdst[((c0 + c) * tp.rows + r0 + r) / 2u] = tile[r * (TR + 1u) + c] | (tile[(r + 1u) * (TR + 1u) + c] << 16u);
        }
    }
}

// --- KERNEL: cast_f16_transpose = transpose_f16 with FROM_F32=1 ---
// --- KERNEL: gelu_f16_transpose = transpose_f16 with FROM_F32=1,GELU=1 ---
// --- KERNEL: layernorm_f16_transpose = transpose_f16 with FROM_F32=1,LN=1 ---

// --- KERNEL: transpose_f16_v8 ---
// transpose_f16 (and, as cast_f16_transpose_v8 and its GELU and LN twins,
// its FROM_F32 variants) where rows and cols are multiples of 8 and every
// view 16-byte aligned: the same TR x TR tiles, moved 16 bytes a thread each
// way (8 halves, or 4 floats, a load; 8 consecutive source rows of one column
// a store) instead of 4, so that fewer, wider requests keep the memory busy.
// Bit for bit transpose_f16's (cast_f16_transpose's, ...) halves. The LN
// twin loads its rows' mean and rstd with the tile and its 4 columns' weight
// and bias once. Grid as transpose_f16's.
@group(0) @binding(0) var<storage, read_write> vdst: array<vec4<u32>>;  // (cols x rows / 8)
@group(0) @binding(1) var<storage, read> vsrc: array<vec4<u32>>;        // (rows x cols / 8), or floats' bits (rows x cols / 4)
@group(0) @binding(2) var<storage, read> ln_mean: array<f32>;           // (rows), LN
@group(0) @binding(3) var<storage, read> ln_rstd: array<f32>;           // (rows), LN
@group(0) @binding(4) var<storage, read> vln_w: array<vec4<f32>>;       // (cols / 4), LN
@group(0) @binding(5) var<storage, read> vln_b: array<vec4<f32>>;       // (cols / 4), LN
@group(0) @binding(6) var<uniform> tp: TransposeParams;

// A thread's 4 source columns are the same in each of its loads of a tile.
const_assert WG % (TR / 4u) == 0u;

@compute @workgroup_size(WG)
fn transpose_f16_v8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r0 = wid.y * TR;
    let c0 = wid.x * TR;
    // every load of the tile first, then the stores to workgroup memory (all
    // of a thread's requests in flight at once)
    if (FROM_F32) {
        var xs: array<vec4<f32>, TR * TR / 4u / WG>;
        var st: array<vec2<f32>, TR * TR / 4u / WG>;  // LN: each load's row's (mean, rstd)
        let cw = c0 + (tid % (TR / 4u)) * 4u;         // LN: the thread's columns' weight and bias
        var w = vec4<f32>();
        var b = vec4<f32>();
        if (LN && cw < tp.cols) {
            w = vln_w[cw / 4u];
            b = vln_b[cw / 4u];
        }
        for (var i = 0u; i < TR * TR / 4u / WG; i++) {
            let e = tid + i * WG;
            let r = e / (TR / 4u);
            let c = (e % (TR / 4u)) * 4u;
            xs[i] = vec4<f32>();
            if (r0 + r < tp.rows && c0 + c < tp.cols) {
                xs[i] = bitcast<vec4<f32>>(vsrc[((r0 + r) * tp.cols + c0 + c) / 4u]);
                if (LN) { st[i] = vec2<f32>(ln_mean[r0 + r], ln_rstd[r0 + r]); }
            }
        }
        for (var i = 0u; i < TR * TR / 4u / WG; i++) {
            let e = tid + i * WG;
            let t = (e / (TR / 4u)) * (TR + 1u) + (e % (TR / 4u)) * 4u;
            var x = xs[i];
            // the LayerNorm forwards' expression on the same floats (layernorm_forward_vec4's, a vec4 at once)
            if (LN) { x = (x - st[i].x) * st[i].y * w + b; }
            tile[t] = f16_in(x.x);
            tile[t + 1u] = f16_in(x.y);
            tile[t + 2u] = f16_in(x.z);
            tile[t + 3u] = f16_in(x.w);
        }
    } else {
        var ws: array<vec4<u32>, TR * TR / 8u / WG>;
        for (var i = 0u; i < TR * TR / 8u / WG; i++) {
            let e = tid + i * WG;
            let r = e / (TR / 8u);
            let c = (e % (TR / 8u)) * 8u;
            ws[i] = vec4<u32>();
            if (r0 + r < tp.rows && c0 + c < tp.cols) { ws[i] = vsrc[((r0 + r) * tp.cols + c0 + c) / 8u]; }
        }
        for (var i = 0u; i < TR * TR / 8u / WG; i++) {
            let e = tid + i * WG;
            let w = ws[i];
            let t = (e / (TR / 8u)) * (TR + 1u) + (e % (TR / 8u)) * 8u;
            tile[t] = w.x & 0xffffu;
            tile[t + 1u] = w.x >> 16u;
            tile[t + 2u] = w.y & 0xffffu;
            tile[t + 3u] = w.y >> 16u;
            tile[t + 4u] = w.z & 0xffffu;
            tile[t + 5u] = w.z >> 16u;
            tile[t + 6u] = w.w & 0xffffu;
            tile[t + 7u] = w.w >> 16u;
        }
    }
    workgroupBarrier();
    const S: u32 = TR + 1u;
    for (var e = tid; e < TR * TR / 8u; e += WG) {
        let c = e / (TR / 8u);          // tile column: a row of dst
        let r = (e % (TR / 8u)) * 8u;   // the first of its 8 source rows
        if (c0 + c < tp.cols && r0 + r < tp.rows) {
            let t = r * S + c;
            vdst[((c0 + c) * tp.rows + r0 + r) / 8u] =
                vec4<u32>(tile[t] | (tile[t + S] << 16u), tile[t + 2u * S] | (tile[t + 3u * S] << 16u),
                          tile[t + 4u * S] | (tile[t + 5u * S] << 16u), tile[t + 6u * S] | (tile[t + 7u * S] << 16u));
        }
    }
}

// --- KERNEL: cast_f16_transpose_v8 = transpose_f16_v8 with FROM_F32=1 ---
// --- KERNEL: gelu_f16_transpose_v8 = transpose_f16_v8 with FROM_F32=1,GELU=1 ---
// --- KERNEL: layernorm_f16_transpose_v8 = transpose_f16_v8 with FROM_F32=1,LN=1 ---
