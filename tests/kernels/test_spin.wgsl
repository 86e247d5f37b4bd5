// test_spin.wgsl: a kernel that keeps the GPU busy for as long as its
// uniform says (practically forever), for the tests of stuck waits
// (tests/test_gpu_hang.c; added with wgpt_gpu_add_kernel_file).

struct Spin {
    n: u32,
    c: f32,
}

// --- KERNEL: test_spin ---
// out[0] = a sum over n * n terms: with n = 2^32 - 1, hours on any device.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> p: Spin;

@compute @workgroup_size(WG)
fn test_spin(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = 0.0;
    for (var i = 0u; i < p.n; i++) {
        for (var j = 0u; j < p.n; j++) { acc += p.c * f32(i ^ j); }
    }
    if (gid.x == 0u) { out[0] = acc; }
}
