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
//             cast_f16 rounds (the subgroup-matrix matmuls' row-major inputs).
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
// All loads of a thread first, then the stores: CAST_V8 x 32 bytes in flight.
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<u32>>;  // (n / 8)
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;        // (n / 4)
@group(0) @binding(2) var<uniform> p: CastParams;

@compute @workgroup_size(WG)
fn cast_f16_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) tid: u32) {
    let n8 = p.n / 8u;
    let i0 = (wid.x + wid.y * nwg.x) * (WG * CAST_V8) + tid;
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
        let x = a[2u * k];
        let y = a[2u * k + 1u];
        if (i < n8) { dst[i] = vec4<u32>(f16_pair(x.x, x.y), f16_pair(x.z, x.w), f16_pair(y.x, y.y), f16_pair(y.z, y.w)); }
    }
}

// --- KERNEL: transpose_f16 ---
// dst (cols x rows halves) = src (rows x cols halves) transposed, bit for bit;
// rows and cols even (whole u32 pairs on both sides). cast_f16_transpose:
// src is rows x cols floats instead, each rounded as cast_f16 rounds it.
// One workgroup a TR x TR tile of halves: coalesced loads of the tile's rows,
// each half kept in a u32 of workgroup memory (rows padded by one against
// bank conflicts), then coalesced u32 stores of the tile's columns, two
// source rows a u32. Grid: (ceil(cols / TR), ceil(rows / TR)).
struct TransposeParams {
    rows: u32,
    cols: u32,
}

const TR: u32 = 64u;  // tile side in halves: TR * TR / 2 pairs, WG threads move 8 each
override FROM_F32: bool = false;  // cast_f16_transpose: src holds floats

@group(0) @binding(0) var<storage, read_write> tdst: array<u32>;  // (cols x rows / 2)
@group(0) @binding(1) var<storage, read> tsrc: array<u32>;        // (rows x cols / 2), or floats' bits (rows x cols)
@group(0) @binding(2) var<uniform> tp: TransposeParams;

var<workgroup> tile: array<u32, TR * (TR + 1u)>;

// Halves (r, c) and (r, c + 1) of the source, c even, as one u32.
fn pair_at(r: u32, c: u32) -> u32 {
    let i = r * tp.cols + c;
    if (FROM_F32) { return f16_pair(bitcast<f32>(tsrc[i]), bitcast<f32>(tsrc[i + 1u])); }
    return tsrc[i / 2u];
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
