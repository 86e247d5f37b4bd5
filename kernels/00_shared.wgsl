// 00_shared.wgsl: the shared preamble. The engine pastes this text in front
// of every kernel, after the enable directives it writes itself
// (`enable f16;` only on devices that have shader-f16, then `enable subgroups;`).
// It must hold no kernel marker. See docs/kernels/00_shared.md.

const WG: u32 = 256u;              // threads per workgroup of 1D kernels
const MAX_WG_DIM: u32 = 65535u;    // workgroups per dispatch dimension
const F32_MAX: f32 = 0x1.fffffep+127f;
const NEG_INF: f32 = -F32_MAX;     // identity of max: finite, so no inf arithmetic
// The API allows subgroups of 4 to 128 lanes: at most WG / 4 partial results.
const MAX_SUBGROUPS: u32 = 64u;

// One linear thread index for a 1D dispatch (n, 1, 1) or the host's 2D
// fallback (65535, ceil(n / 65535), 1). Kernels bounds-check the result.
fn flat_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

// The first item of thread tid in kernels whose threads take `per` items at
// stride WG, workgroup w the items [w * WG * per, (w + 1) * WG * per), over
// the same 1D or 2D grid (the vec4 element-wise kernels, the f16 casts).
fn wg_first(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, per: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * (WG * per) + tid;
}

// Finite test on the bit pattern: compilers may assume `x == x` is true
// (WGSL lets them assume no NaN or Inf), but not for an integer compare.
fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// x if finite, else 0: stops a NaN or Inf at the edge of a backward pass.
fn nan_guard(x: f32) -> f32 {
    return select(0.0, x, is_finite(x));
}

// The f16 bits of x (round to nearest even), with the cases pack2x16float
// leaves undefined made IEEE's: a quiet NaN for NaN, +-inf from |x| >= 65520
// (what rounds past 65504). The f16 mode's loss scaling counts on an overflow
// reading as inf. Core WGSL: no shader-f16 needed.
fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    if ((b & 0x7fffffffu) > 0x7f800000u) { return sign | 0x7e00u; }  // NaN
    if ((b & 0x7fffffffu) >= 0x477ff000u) { return sign | 0x7c00u; } // |x| >= 65520: rounds to inf
    return pack2x16float(vec2<f32>(x, 0.0)) & 0xffffu;
}

// Two values as one u32 of halves, x in the low 16 bits (the lower address).
fn f16_pair(x: f32, y: f32) -> u32 {
    return f16_bits(x) | (f16_bits(y) << 16u);
}

// Eight values (a then b) as a vec4<u32> of halves: the f16 kernels' stores.
fn f16_eight(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(f16_pair(a.x, a.y), f16_pair(a.z, a.w), f16_pair(b.x, b.y), f16_pair(b.z, b.w));
}

var<workgroup> sh_red: array<f32, MAX_SUBGROUPS>;

// The reductions' first step: lane 0 of each subgroup stores its subgroup's
// result (partial) in sh_red, then the barrier after which all may read them.
fn wg_publish(tid: u32, sg_size: u32, partial: f32) {
    if (tid % sg_size == 0u) { sh_red[tid / sg_size] = partial; }
    workgroupBarrier();
}

// Sum of `val` over a workgroup of WG threads, returned to every thread.
// Call from uniform control flow with every thread of the workgroup; threads
// with nothing to add pass 0. tid = local_invocation_index, sg_size = the
// subgroup_size builtin (8 on lavapipe, 32 on NVIDIA, 64 on some AMD).
// Subgroup i is taken to be threads [i*sg_size, (i+1)*sg_size): true for 1D
// workgroups on the drivers we know; tests/test_shared.c checks it per device.
fn wg_reduce_sum(tid: u32, sg_size: u32, val: f32) -> f32 {
    wg_publish(tid, sg_size, subgroupAdd(val));
    let lane = tid % sg_size;
    let n_sg = WG / sg_size;
    // Every subgroup folds all partials (redundantly) to stay uniform; with
    // small subgroups each lane first adds several partials.
    var v = 0.0;
    for (var i = 0u; i < n_sg; i += sg_size) {
        if (i + lane < n_sg) { v += sh_red[i + lane]; }
    }
    let total = subgroupAdd(v);
    // Trailing barrier: no thread may start the next reduction and overwrite
    // sh_red before every thread has read it here.
    workgroupBarrier();
    return total;
}

// Maximum of `val` over a workgroup of WG threads; identity NEG_INF (pass it
// from threads with no value). Same rules as wg_reduce_sum.
fn wg_reduce_max(tid: u32, sg_size: u32, val: f32) -> f32 {
    wg_publish(tid, sg_size, subgroupMax(val));
    let lane = tid % sg_size;
    let n_sg = WG / sg_size;
    var v = NEG_INF;
    for (var i = 0u; i < n_sg; i += sg_size) {
        if (i + lane < n_sg) { v = max(v, sh_red[i + lane]); }
    }
    let result = subgroupMax(v);
    workgroupBarrier();
    return result;
}

// GELU, tanh approximation (as GPT-2 was trained), and its derivative:
// 05_gelu.wgsl's kernels and the f16 matmul's epilogue (03_linear_sgm.wgsl:
// the fc forward, fcproj's input pass) compute them alike.
const GELU_K: f32 = 0.7978845608028654;  // sqrt(2/pi)
const GELU_A: f32 = 0.044715;
// tanh(10) = 1 - 4e-9 rounds to 1.0 in f32, so clamping the tanh argument to
// +-10 changes no result, while a tanh built from exp (sinh/cosh) of a big
// argument overflows to inf/inf = NaN on some GPUs. x is clamped first so
// that x^3 cannot overflow (u reaches 10 at x = 5.42).
const GELU_U_MAX: f32 = 10.0;
const GELU_X_MAX: f32 = 10.0;

// The tanh argument sqrt(2/pi) * (x + 0.044715 x^3), clamped to +-GELU_U_MAX.
fn gelu_arg(xc: f32) -> f32 {
    return clamp(GELU_K * (xc + GELU_A * xc * xc * xc), -GELU_U_MAX, GELU_U_MAX);
}

// tanh(u) for a clamped u: exactly +-1 at the clamp, so that 1 - th^2 is 0.
// As 1 - 2 / (e^2u + 1), one exp and one division: NVIDIA's driver made
// WGSL's tanh slower (on an H100 gelu_f16_transpose_v8 0.74 -> 0.66 ms a
// GPT-2 124M step, 17d4ba4:bench/RESULTS.md section 29); its error on tanh is the exp's
// relative error over 2 plus an ulp of 1, inside what tests/test_gelu_residual.c
// allows for a tanh built from exps.
fn gelu_tanh(u: f32) -> f32 {
    return select(1.0 - 2.0 / (exp(2.0 * u) + 1.0), sign(u), abs(u) >= GELU_U_MAX);
}

// gelu(x), as gelu_forward computes it.
fn gelu_value(x: f32) -> f32 {
    let th = gelu_tanh(gelu_arg(clamp(x, -GELU_X_MAX, GELU_X_MAX)));
    return 0.5 * x * (1.0 + th);
}

// d gelu / dx at x, as gelu_backward computes it. Past the clamp 1 - th^2 is
// exactly 0; using xc there keeps the product finite (x * 0 would be NaN for
// x = inf) and is exact everywhere else.
fn gelu_grad(x: f32) -> f32 {
    let xc = clamp(x, -GELU_X_MAX, GELU_X_MAX);
    let th = gelu_tanh(gelu_arg(xc));
    let du = GELU_K * (1.0 + 3.0 * GELU_A * xc * xc);
    return 0.5 * (1.0 + th) + 0.5 * xc * (1.0 - th * th) * du;
}

// gelu_value and gelu_grad of each lane (the vec4 and f16 kernels).
fn gelu4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gelu_value(v.x), gelu_value(v.y), gelu_value(v.z), gelu_value(v.w));
}
fn gelu_grad4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gelu_grad(v.x), gelu_grad(v.y), gelu_grad(v.z), gelu_grad(v.w));
}
