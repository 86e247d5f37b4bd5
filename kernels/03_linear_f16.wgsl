// 03_linear_f16.wgsl: the three matmuls of 03_linear_sgm.wgsl (f16 operands,
// f32 accumulation and results, same bindings and params) in plain WGSL, for
// devices without subgroup matrices (lavapipe): the f16 mode's numerics run
// everywhere. unpack2x16float is core WGSL, so no shader-f16 is needed.
//   matmul_f16_forward         out (m, n) = a (m, k) @ w (n, k)^T (+ bias (n))
//   matmul_f16_backward_input  dinp (m, n) = (or +=) dout (m, k) @ w (k, n)
//   matmul_f16_backward_weight dw (m, n) += dout (k, m)^T @ inp (k, n)
// Shapes: m, n, k multiples of 8 (as the subgroup-matrix kernels need).
// ABI: a, b (f16 pairs as array<u32>), bias (f32; a stand-in when unused),
// out (f32), then `p: F16Params` (as SgmParams). Dispatch: 64 threads a
// workgroup, each 4 adjacent outputs of a row, a workgroup 8 rows x 32
// columns: grid (ceil(n / 32), ceil(m / 8), 1). See docs/kernels/03_linear_f16.md.

struct F16Params {
    m: u32,
    n: u32,
    k: u32,
    flag: u32,  // bit 0: add to the output; bit 1: add bias (n)
    ks: u32,    // SgmParams' split (never set for these kernels)
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> a2: array<u32>;
@group(0) @binding(1) var<storage, read> b2: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: F16Params;

const F16_COLS: u32 = 32u;  // output columns a workgroup: 8 threads x 4
const F16_ROWS: u32 = 8u;

// Element e of a packed f16 array, as f32.
fn ha(e: u32) -> f32 { return unpack2x16float(a2[e / 2u])[e % 2u]; }
fn hb(e: u32) -> f32 { return unpack2x16float(b2[e / 2u])[e % 2u]; }

// Row i, columns j..j+3 of the output: A (a_t: stored k x m), B (b_t: stored n x k).
fn f16_block(a_t: bool, b_t: bool, wid: vec3<u32>, lid: u32) {
    let i = wid.y * F16_ROWS + lid / 8u;
    let j = wid.x * F16_COLS + (lid % 8u) * 4u;
    if (i >= p.m || j >= p.n) { return; }
    var s = vec4<f32>();
    for (var l = 0u; l < p.k; l++) {
        let av = select(ha(i * p.k + l), ha(l * p.m + i), a_t);
        var bv: vec4<f32>;
        if (b_t) {
            bv = vec4<f32>(hb(j * p.k + l), hb((j + 1u) * p.k + l), hb((j + 2u) * p.k + l), hb((j + 3u) * p.k + l));
        } else {
            let q = l * p.n + j;  // j is a multiple of 4: two whole u32s
            bv = vec4<f32>(unpack2x16float(b2[q / 2u]), unpack2x16float(b2[q / 2u + 1u]));
        }
        s += av * bv;
    }
    let o = i * p.n + j;
    var init = vec4<f32>();
    if ((p.flag & 1u) != 0u) { init = vec4<f32>(out[o], out[o + 1u], out[o + 2u], out[o + 3u]); }
    else if ((p.flag & 2u) != 0u) { init = vec4<f32>(bias[j], bias[j + 1u], bias[j + 2u], bias[j + 3u]); }
    let r = init + s;
    out[o] = r.x;
    out[o + 1u] = r.y;
    out[o + 2u] = r.z;
    out[o + 3u] = r.w;
}

// --- KERNEL: matmul_f16_forward ---
@compute @workgroup_size(64)
fn matmul_f16_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    f16_block(false, true, wid, lid);
}

// --- KERNEL: matmul_f16_backward_input ---
@compute @workgroup_size(64)
fn matmul_f16_backward_input(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    f16_block(false, false, wid, lid);
}

// --- KERNEL: matmul_f16_backward_weight ---
@compute @workgroup_size(64)
fn matmul_f16_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    f16_block(true, false, wid, lid);
}
