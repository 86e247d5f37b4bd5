// 05_residual.wgsl: the residual connection, out = a + b element-wise over n
// floats (as tests/ref ref_residual_forward). Its backward needs no kernel:
// both inputs receive dout unchanged, so the model aliases the gradients.
// ABI: storage buffers at bindings 0..k-1, then `p: ResidualParams` at binding k.
// Dispatch: ceil(n / WG) workgroups through dispatch1d (2D past 65535).
// See docs/kernels/05_residual.md.

struct ResidualParams {
    n: u32,  // elements in this dispatch (a chunk of the tensor)
}

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
