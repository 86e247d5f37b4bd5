// 00_infrastructure.wgsl: element-wise glue kernels (fill, scale, axpy, copy,
// clamp) used between forward, backward and optimizer steps.
// ABI: storage buffers at bindings 0..k-1, then `p: Scalar` at binding k.
// Dispatch: ceil(n / WG) workgroups through dispatch1d (2D past 65535).
// See docs/kernels/00_infrastructure.md.

struct Scalar {
    n: u32,  // elements to touch
    c: f32,  // the constant: fill value, scale factor, alpha, clamp bound
}

// --- KERNEL: fill_zero ---
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn fill_zero(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = 0.0;
}

// --- KERNEL: fill_const ---
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn fill_const(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = p.c;
}

// --- KERNEL: scale ---
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = p.c * dst[i];
}

// --- KERNEL: axpy ---
// dst and src must be different buffers (WebGPU forbids a read-write binding
// aliasing another binding); for x += a*x use scale with 1 + a.
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn axpy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = dst[i] + p.c * src[i];
}

// --- KERNEL: copy ---
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = src[i];
}

// --- KERNEL: clamp_inplace ---
// Symmetric clamp to [-c, c]. What a NaN element becomes is up to the
// device's min/max, so callers that care run nan_guard first.
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn clamp_inplace(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    dst[i] = max(-p.c, min(p.c, dst[i]));
}
