// test_f16.wgsl: needs `enable f16;`, which the engine writes only on devices
// with shader-f16. y[i] = f32(f16(y[i]) * 2.0h).

struct N {
    n: u32,
}

// --- KERNEL: test_f16_double ---
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> p: N;

@compute @workgroup_size(WG)
fn test_f16_double(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    let h: f16 = f16(y[i]);
    y[i] = f32(h * 2.0h);
}
