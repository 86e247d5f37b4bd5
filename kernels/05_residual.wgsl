// 05_residual.wgsl: the residual connection, out = a + b element-wise over n
// floats (as tests/ref ref_residual_forward). Its backward needs no kernel:
// both inputs receive dout unchanged, so the model aliases the gradients.
// ABI: storage buffers at bindings 0..k-1, then `p: ResidualParams` at binding k.
// Dispatch: ceil(n / WG) workgroups through dispatch1d (2D past 65535).
// residual_forward_vec4: the same bindings and params with the arrays bound as
// array<vec4<f32>>; n % 4 == 0, view offsets multiples of 16 bytes; each
// thread takes V4_PER_THREAD vec4s, workgroup w the vec4s
// [w * WG * V4_PER_THREAD, (w + 1) * WG * V4_PER_THREAD) at stride WG;
// ceil(n / (4 * V4_PER_THREAD * WG)) workgroups. The host picks it
// (src/model/elementwise.c).
// See docs/kernels/05_residual.md.

struct ResidualParams {
    n: u32,  // elements in this dispatch (a chunk of the tensor)
}

const V4_PER_THREAD: u32 = 4u;  // vec4s per thread of residual_forward_vec4

// --- KERNEL: residual_forward ---
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (n)
@group(0) @binding(1) var<storage, read> a: array<f32>;          // (n)
@group(0) @binding(2) var<storage, read> b: array<f32>;          // (n)
@group(0) @binding(3) var<uniform> p: ResidualParams;

@compute @workgroup_size(WG)
fn residual_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    out[i] = a[i] + b[i];
}

// --- KERNEL: residual_forward_vec4 ---
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;  // (n / 4)
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;          // (n / 4)
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;          // (n / 4)
@group(0) @binding(3) var<uniform> p: ResidualParams;

@compute @workgroup_size(WG)
fn residual_forward_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = wg_first(wid, nwg, tid, V4_PER_THREAD);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    var y = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            x[k] = a[i];
            y[k] = b[i];
        }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { out[i] = x[k] + y[k]; }
    }
}
