// 05_gelu.wgsl: GELU, tanh approximation (as GPT-2 was trained), forward and
// backward, element-wise over n floats (as tests/ref ref_gelu_*).
// ABI: storage buffers at bindings 0..k-1, then `p: GeluParams` at binding k.
// Dispatch: ceil(n / WG) workgroups through dispatch1d (2D past 65535).
// vec4 twins (gelu_forward_vec4, gelu_backward_vec4): the same bindings and
// params with the arrays bound as array<vec4<f32>>; n % 4 == 0, view offsets
// multiples of 16 bytes; each thread takes V4_PER_THREAD vec4s, workgroup w
// the vec4s [w * WG * V4_PER_THREAD, (w + 1) * WG * V4_PER_THREAD) at stride WG;
// ceil(n / (4 * V4_PER_THREAD * WG)) workgroups. The host picks them
// (src/model/elementwise.c). Same per-element arithmetic: same results.
// gelu_forward_f16 (the f16 mode): out as f16 (array<vec4<u32>>, 8 halves
// each, rounded by f16_pair), inp as vec4s; n % 8 == 0; GF16_STEPS steps of
// 8 elements a thread at stride WG, ceil(n / (8 * GF16_STEPS * WG)) workgroups.
// It is 08_precision.wgsl's cast_f16_vec4 with GELU set (its CAST_V8 steps:
// GF16_STEPS and CAST_V8 must stay equal).
// gelu_backward_f16 (the f16 mode): gelu_backward_vec4's dinp, and also its
// f16 copy (dinp16, 8 halves a vec4<u32>) for the next matmul, which
// otherwise a cast would make; inp, dout as vec4s; the f16 forward's grid.
// See docs/kernels/05_gelu.md.

// gelu_value, gelu_grad and their constants live in the shared preamble
// (00_shared.wgsl): the f16 matmul's epilogue applies them too.

struct GeluParams {
    n: u32,  // elements in this dispatch (a chunk of the tensor)
}

const V4_PER_THREAD: u32 = 4u;  // vec4s per thread of the vec4 twins
const GF16_STEPS: u32 = 2u;     // 8-element steps a thread of gelu_backward_f16 (and gelu_forward_f16: CAST_V8)

// --- KERNEL: gelu_forward ---
// out = 0.5 x (1 + tanh(u(x)))
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> inp: array<f32>;        // (n)
@group(0) @binding(2) var<uniform> p: GeluParams;

@compute @workgroup_size(WG)
fn gelu_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    out[i] = gelu_value(inp[i]);
}

// --- KERNEL: gelu_backward ---
// dinp = dout * (0.5 (1 + th) + 0.5 x (1 - th^2) u'(x)), u'(x) = K (1 + 3 A x^2).
// OVERWRITES dinp: the GELU input has one consumer, so one gradient producer.
@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> inp: array<f32>;         // (n)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (n)
@group(0) @binding(3) var<uniform> p: GeluParams;

@compute @workgroup_size(WG)
fn gelu_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dinp[i] = gelu_grad(inp[i]) * dout[i];
}

// --- KERNEL: gelu_forward_vec4 ---
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;  // (n / 4)
@group(0) @binding(1) var<storage, read> inp: array<vec4<f32>>;        // (n / 4)
@group(0) @binding(2) var<uniform> p: GeluParams;

@compute @workgroup_size(WG)
fn gelu_forward_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = wg_first(wid, nwg, tid, V4_PER_THREAD);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { x[k] = inp[i]; }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        let v = x[k];
        if (i < n4) { out[i] = gelu4(v); }
    }
}

// --- KERNEL: gelu_backward_vec4 ---
@group(0) @binding(0) var<storage, read_write> dinp: array<vec4<f32>>;  // (n / 4)
@group(0) @binding(1) var<storage, read> inp: array<vec4<f32>>;         // (n / 4)
@group(0) @binding(2) var<storage, read> dout: array<vec4<f32>>;        // (n / 4)
@group(0) @binding(3) var<uniform> p: GeluParams;

@compute @workgroup_size(WG)
fn gelu_backward_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = wg_first(wid, nwg, tid, V4_PER_THREAD);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    var d = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            x[k] = inp[i];
            d[k] = dout[i];
        }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        let v = x[k];
        let local = gelu_grad4(v);
        if (i < n4) { dinp[i] = local * d[k]; }
    }
}

// --- KERNEL: gelu_backward_f16 ---
// The same products as gelu_backward_vec4 (bit for bit), stored twice.
@group(0) @binding(0) var<storage, read_write> dinp: array<vec4<f32>>;     // (n / 4)
@group(0) @binding(1) var<storage, read_write> dinp16: array<vec4<u32>>;   // (n / 8) f16
@group(0) @binding(2) var<storage, read> inp: array<vec4<f32>>;            // (n / 4)
@group(0) @binding(3) var<storage, read> dout: array<vec4<f32>>;           // (n / 4)
@group(0) @binding(4) var<uniform> p: GeluParams;

@compute @workgroup_size(WG)
fn gelu_backward_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) tid: u32) {
    let n8 = p.n / 8u;
    let i0 = wg_first(wid, nwg, tid, GF16_STEPS);
    var x = array<vec4<f32>, 2u * GF16_STEPS>();
    var d = array<vec4<f32>, 2u * GF16_STEPS>();
    for (var k = 0u; k < GF16_STEPS; k++) {
        let i = i0 + k * WG;
        if (i < n8) {
            x[2u * k] = inp[2u * i];
            x[2u * k + 1u] = inp[2u * i + 1u];
            d[2u * k] = dout[2u * i];
            d[2u * k + 1u] = dout[2u * i + 1u];
        }
    }
    for (var k = 0u; k < GF16_STEPS; k++) {
        let i = i0 + k * WG;
        let a = gelu_grad4(x[2u * k]) * d[2u * k];
        let b = gelu_grad4(x[2u * k + 1u]) * d[2u * k + 1u];
        if (i < n8) {
            dinp[2u * i] = a;
            dinp[2u * i + 1u] = b;
            dinp16[i] = f16_eight(a, b);
        }
    }
}
