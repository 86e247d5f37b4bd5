// 00_infrastructure.wgsl: element-wise glue kernels (fill, scale, axpy, copy,
// clamp) used between forward, backward and optimizer steps.
// ABI: storage buffers at bindings 0..k-1, then `p: Scalar` at binding k.
// Dispatch: ceil(n / WG) workgroups through dispatch1d (2D past 65535); the
// *_vec4 twins ceil(n / (4 * V4_PER_THREAD * WG)), see below.
// See docs/kernels/00_infrastructure.md.

struct Scalar {
    n: u32,  // elements to touch
    c: f32,  // the constant: fill value, scale factor, alpha, clamp bound
}

// vec4 twins of fill_zero, fill_const, scale, axpy and copy: the same bindings
// and Scalar, but the arrays are bound as array<vec4<f32>>, p.n (still in
// floats) must be a multiple of 4 and every view offset a multiple of 16
// bytes; the host picks them (wgpt_infra_add in src/model/elementwise.h).
// Each thread moves V4_PER_THREAD vec4s: workgroup w owns vec4s
// [w * WG * V4_PER_THREAD, (w + 1) * WG * V4_PER_THREAD), thread t the ones at
// t, t + WG, ... (a subgroup touches contiguous 16-byte words). All loads are
// issued before any store: 64 bytes in flight per thread.
// Dispatch: ceil(n / (4 * V4_PER_THREAD * WG)) workgroups through dispatch1d.
const V4_PER_THREAD: u32 = 4u;

// Index of this thread's first vec4 (1D grid or the host's 2D fallback).
fn v4_first(wid: vec3<u32>, nwg: vec3<u32>, tid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * (WG * V4_PER_THREAD) + tid;
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

// --- KERNEL: fill_zero_vec4 ---
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn fill_zero_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = v4_first(wid, nwg, tid);
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { dst[i] = vec4<f32>(0.0); }
    }
}

// --- KERNEL: fill_const_vec4 ---
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn fill_const_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = v4_first(wid, nwg, tid);
    let c = vec4<f32>(p.c);
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { dst[i] = c; }
    }
}

// --- KERNEL: scale_vec4 ---
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn scale_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = v4_first(wid, nwg, tid);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { x[k] = dst[i]; }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { dst[i] = p.c * x[k]; }
    }
}

// --- KERNEL: axpy_vec4 ---
// dst and src must not overlap (see axpy).
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn axpy_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = v4_first(wid, nwg, tid);
    var y = array<vec4<f32>, V4_PER_THREAD>();
    var x = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            y[k] = dst[i];
            x[k] = src[i];
        }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { dst[i] = y[k] + p.c * x[k]; }
    }
}

// --- KERNEL: copy_vec4 ---
// The reference of `wgpt bench --micro`'s memory table.
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn copy_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = v4_first(wid, nwg, tid);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { x[k] = src[i]; }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) { dst[i] = x[k]; }
    }
}
