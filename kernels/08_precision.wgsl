// 08_precision.wgsl: conversions between f32 tensors and the f16 copies the
// subgroup-matrix matmuls read (03_linear_sgm.wgsl).
//   cast_f16  dst (n halves, packed two a u32) = f16(src (n floats)), round to
//             nearest even; +-inf for what rounds past f16's largest finite
//             value (65504) and for +-inf, a quiet NaN for NaN (IEEE's results:
//             WGSL leaves them undefined, so they are written out here); n even.
// pack2x16float is core WGSL: this file needs no shader-f16.
// ABI: dst (array<u32>), src (array<f32>), then `p: CastParams`.
// Dispatch: one thread per pair, ceil(n / 2 / WG) workgroups through
// dispatch1d (2D past 65535). See docs/kernels/08_precision.md.

struct CastParams {
    n: u32,  // elements (even)
}

// The f16 bits of x, with the cases WGSL leaves undefined made IEEE's.
fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    if ((b & 0x7fffffffu) > 0x7f800000u) { return sign | 0x7e00u; }  // NaN
    if ((b & 0x7fffffffu) >= 0x477ff000u) { return sign | 0x7c00u; } // |x| >= 65520: rounds to inf
    return pack2x16float(vec2<f32>(x, 0.0)) & 0xffffu;
}

// --- KERNEL: cast_f16 ---
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;  // (n / 2)
@group(0) @binding(1) var<storage, read> src: array<f32>;        // (n)
@group(0) @binding(2) var<uniform> p: CastParams;

@compute @workgroup_size(WG)
fn cast_f16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n / 2u) { return; }
    dst[i] = f16_bits(src[2u * i]) | (f16_bits(src[2u * i + 1u]) << 16u);
}
