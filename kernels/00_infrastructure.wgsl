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

// One section a binding list and width (dst or dst and src; f32 or vec4), and
// each kernel is its section compiled with EW_OP set (a variant marker): the
// operation, a number the pipeline fixes, so that each compiles to its own
// straight code, the one it was when the kernels were separate sections.
override EW_OP: u32 = 0u;
const EW_FILL_ZERO: u32 = 0u;   // dst = 0
const EW_FILL_CONST: u32 = 1u;  // dst = c
const EW_SCALE: u32 = 2u;       // dst = c * dst
const EW_CLAMP: u32 = 3u;       // dst = max(-c, min(c, dst))
const EW_AXPY: u32 = 4u;        // dst = dst + c * src
const EW_COPY: u32 = 5u;        // dst = src

// --- KERNEL: ew_dst ---
// --- KERNEL: fill_zero = ew_dst with EW_OP=0 ---
// --- KERNEL: fill_const = ew_dst with EW_OP=1 ---
// --- KERNEL: scale = ew_dst with EW_OP=2 ---
// --- KERNEL: clamp_inplace = ew_dst with EW_OP=3 ---
// clamp_inplace: symmetric clamp to [-c, c]. What a NaN element becomes is up
// to the device's min/max, so callers that care run nan_guard first.
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn ew_dst(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    switch EW_OP {
        case EW_FILL_ZERO: { dst[i] = 0.0; }
        case EW_FILL_CONST: { dst[i] = p.c; }
        case EW_SCALE: { dst[i] = p.c * dst[i]; }
        default: { dst[i] = max(-p.c, min(p.c, dst[i])); }  // EW_CLAMP
    }
}

// --- KERNEL: ew_src ---
// --- KERNEL: axpy = ew_src with EW_OP=4 ---
// --- KERNEL: copy = ew_src with EW_OP=5 ---
// axpy: dst and src must be different buffers (WebGPU forbids a read-write
// binding aliasing another binding); for x += a*x use scale with 1 + a.
@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn ew_src(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n) { return; }
    if (EW_OP == EW_AXPY) { dst[i] = dst[i] + p.c * src[i]; } else { dst[i] = src[i]; }
}

// --- KERNEL: ew_dst_vec4 ---
// --- KERNEL: fill_zero_vec4 = ew_dst_vec4 with EW_OP=0 ---
// --- KERNEL: fill_const_vec4 = ew_dst_vec4 with EW_OP=1 ---
// --- KERNEL: scale_vec4 = ew_dst_vec4 with EW_OP=2 ---
// scale_vec4 loads all its vec4s before it stores any; the fills load none.
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn ew_dst_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = wg_first(wid, nwg, tid, V4_PER_THREAD);
    var x = array<vec4<f32>, V4_PER_THREAD>();
    if (EW_OP == EW_SCALE) {
        for (var k = 0u; k < V4_PER_THREAD; k++) {
            let i = i0 + k * WG;
            if (i < n4) { x[k] = dst[i]; }
        }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            switch EW_OP {
                case EW_FILL_ZERO: { dst[i] = vec4<f32>(0.0); }
                case EW_FILL_CONST: { dst[i] = vec4<f32>(p.c); }
                default: { dst[i] = p.c * x[k]; }  // EW_SCALE
            }
        }
    }
}

// --- KERNEL: ew_src_vec4 ---
// --- KERNEL: axpy_vec4 = ew_src_vec4 with EW_OP=4 ---
// --- KERNEL: copy_vec4 = ew_src_vec4 with EW_OP=5 ---
// dst and src must not overlap (see axpy). copy_vec4 is the reference of
// `wgpt bench --micro`'s memory table.
@group(0) @binding(0) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Scalar;

@compute @workgroup_size(WG)
fn ew_src_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
    let n4 = p.n / 4u;
    let i0 = wg_first(wid, nwg, tid, V4_PER_THREAD);
    var y = array<vec4<f32>, V4_PER_THREAD>();
    var x = array<vec4<f32>, V4_PER_THREAD>();
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            if (EW_OP == EW_AXPY) { y[k] = dst[i]; }
            x[k] = src[i];
        }
    }
    for (var k = 0u; k < V4_PER_THREAD; k++) {
        let i = i0 + k * WG;
        if (i < n4) {
            if (EW_OP == EW_AXPY) { dst[i] = y[k] + p.c * x[k]; } else { dst[i] = x[k]; }
        }
    }
}
