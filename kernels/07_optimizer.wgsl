// 07_optimizer.wgsl: the optimizer step over the flat parameter arrays:
// global gradient L2 norm (deterministic two-pass reduction, no atomics),
// clip scale and non-finite flag into a 16-byte state buffer, then AdamW,
// which reads the scale and the flag from that buffer (no CPU round trip).
// ABI: storage buffers at bindings 0..k-1, then one uniform params struct.
// The host applies every kernel over chunks of <= maxStorageBufferBindingSize
// (src/model/optimizer.c). See docs/kernels/07_optimizer.md.

// Gradient floats per grad_norm_partial workgroup: WG threads x NORM_ITEMS.
const NORM_ITEMS: u32 = 16u;
const NORM_SLICE: u32 = WG * NORM_ITEMS;  // 4096

// The state buffer (wgpt_optim_state on the host).
struct OptState {
    sumsq: f32,      // sum of squared gradients
    norm: f32,       // sqrt(sumsq)
    scale: f32,      // factor AdamW applies to every gradient
    nonfinite: u32,  // 1: a gradient or the sum is NaN/Inf, AdamW skips the step
}

// Params of the adamw_update kernels.
struct AdamwParams {
    n: u32,                // elements in this chunk
    start: u32,            // index of the first one in every bound range
    lr: f32,
    beta1: f32,
    beta2: f32,
    one_minus_beta1: f32,  // 1 - beta1, rounded once on the host
    one_minus_beta2: f32,
    bc1: f32,              // 1 - beta1^t, bias correction of m
    bc2: f32,              // 1 - beta2^t, bias correction of v
    eps: f32,
    weight_decay: f32,     // decoupled: lr * weight_decay * param
    pad: u32,
}

// Params of grad_norm_partial and grad_norm_partial_flat.
struct NormPartialParams {
    n: u32,          // gradient floats in this chunk
    start: u32,      // index in `grads` of the chunk's first float (alignment pad)
    part_base: u32,  // this chunk's first slot in `partials` (pairs)
    n_groups: u32,   // ceil(n / NORM_SLICE); extra workgroups of a 2D grid return
}

// --- KERNEL: grad_norm_partial ---
// partials[2w] = sum of grads[start + i]^2 over the slice i in
// [w*NORM_SLICE, (w+1)*NORM_SLICE) of this chunk, partials[2w+1] = how many
// of them are not finite, with w = part_base + this workgroup.
@group(0) @binding(0) var<storage, read> grads: array<f32>;
@group(0) @binding(1) var<storage, read_write> partials: array<f32>;
@group(0) @binding(2) var<uniform> p: NormPartialParams;

@compute @workgroup_size(WG)
fn grad_norm_partial(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sg: u32) {
    let w = wid.x + wid.y * nwg.x;
    // Uniform: the same for every thread of the workgroup, so the reductions
    // below still run in uniform control flow.
    if (w >= p.n_groups) { return; }
    let base = w * NORM_SLICE;
    var acc = 0.0;
    var bad = 0.0;
    // Stride WG: neighbouring threads read neighbouring floats.
    for (var k = 0u; k < NORM_ITEMS; k++) {
        let i = base + k * WG + tid;
        if (i < p.n) {
            let x = grads[p.start + i];
            acc += x * x;
            // Counted on the bit pattern: compilers may assume no NaN/Inf in
            // float compares, and the flag must not depend on the sum alone.
            bad += select(0.0, 1.0, !is_finite(x));
        }
    }
    let s = wg_reduce_sum(tid, sg, acc);
    let nb = wg_reduce_sum(tid, sg, bad);
    if (tid == 0u) {
        partials[2u * (p.part_base + w)] = s;
        partials[2u * (p.part_base + w) + 1u] = nb;
    }
}

// --- KERNEL: grad_norm_partial_flat in grad_norm_partial ---
// The CPU twin of grad_norm_partial (model/variant.h), for a subgroup of at
// least NORM_FLAT_WG lanes: the same partial pair per NORM_SLICE floats, from
// one workgroup of NORM_FLAT_WG invocations, without workgroup memory or
// barriers (on llvmpipe the 256-thread workgroup's two reductions cost 8x the
// loads): lane l sums floats l, l + 8, ... of the slice, subgroupAdd folds
// the lanes. A different order from grad_norm_partial's, fixed as well.
const NORM_FLAT_WG: u32 = 8u;
@compute @workgroup_size(NORM_FLAT_WG)
fn grad_norm_partial_flat(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                          @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = wid.x + wid.y * nwg.x;
    if (w >= p.n_groups) { return; }  // the whole workgroup
    let base = w * NORM_SLICE;
    var acc = 0.0;
    var bad = 0.0;
    for (var k = 0u; k < NORM_SLICE / NORM_FLAT_WG; k++) {
        let i = base + k * NORM_FLAT_WG + lid;
        if (i < p.n) {
            let x = grads[p.start + i];
            acc += x * x;
            bad += select(0.0, 1.0, !is_finite(x));
        }
    }
    let s = subgroupAdd(acc);
    let nb = subgroupAdd(bad);
    if (lid == 0u) {
        partials[2u * (p.part_base + w)] = s;
        partials[2u * (p.part_base + w) + 1u] = nb;
    }
}

// --- KERNEL: grad_norm_finish ---
// One workgroup: sums the n_parts partial pairs in a fixed order and writes
// the state. scale = max_norm / norm if max_norm > 0 and norm > max_norm,
// else 1 (also 1 when the step is skipped: AdamW skips it anyway).
// nonfinite: 1 if a gradient or the sum is NaN/Inf, 2 if the norm is finite
// but above skip_norm (a spike the host asks to skip), else 0. The gradients
// are the buffer's times grad_scale (1 / (micro-batches x loss scale)):
// sumsq and norm are theirs, and scale carries grad_scale to AdamW, so no
// pass over the buffer scales it.
struct NormFinishParams {
    n_parts: u32,     // pairs in `partials`, all chunks together
    max_norm: f32,    // clip threshold; <= 0 disables clipping
    skip_norm: f32,   // skip the step above this norm; <= 0 disables
    grad_scale: f32,  // the gradients are the buffer's times this (> 0)
}
@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> state: OptState;
@group(0) @binding(2) var<uniform> p: NormFinishParams;

@compute @workgroup_size(WG)
fn grad_norm_finish(@builtin(local_invocation_index) tid: u32, @builtin(subgroup_size) sg: u32) {
    var acc = 0.0;
    var bad = 0.0;
    for (var j = tid; j < p.n_parts; j += WG) {
        acc += partials[2u * j];
        bad += partials[2u * j + 1u];
    }
    let raw = wg_reduce_sum(tid, sg, acc);
    let nbad = wg_reduce_sum(tid, sg, bad);
    if (tid == 0u) {
        let sumsq = raw * (p.grad_scale * p.grad_scale);
        let norm = sqrt(sumsq);
        // A finite slice can still overflow the sum of squares (|g| ~ 1e19).
        let nonfinite = nbad != 0.0 || !is_finite(raw) || !is_finite(sumsq) || !is_finite(norm);
        let spike = !nonfinite && p.skip_norm > 0.0 && norm > p.skip_norm;
        var scale = 1.0;
        if (!nonfinite && p.max_norm > 0.0 && norm > p.max_norm) { scale = p.max_norm / norm; }
        state.sumsq = sumsq;
        state.norm = norm;
        state.scale = scale * p.grad_scale;
        state.nonfinite = select(select(0u, 2u, spike), 1u, nonfinite);
    }
}

// --- TEMPLATE: adamw_updatew ---
// --- KERNEL: adamw_update = adamw_updatew with V=f32, W=1, N=, H=u32, F16=0, F32=1, ONE=1, PAIR=0, QUAD=0 ---
// --- KERNEL: adamw_update_vec4 = adamw_updatew with V=vec4<f32>, W=4, N=_vec4, H=u32, F16=0, F32=1, ONE=1, PAIR=0, QUAD=0 ---
// --- KERNEL: adamw_update_f16 = adamw_updatew with V=f32, W=2, N=_f16, H=u32, F16=1, F32=0, ONE=0, PAIR=1, QUAD=0 ---
// --- KERNEL: adamw_update_f16_vec4 = adamw_updatew with V=vec4<f32>, W=4, N=_f16_vec4, H=vec2<u32>, F16=1, F32=0, ONE=1, PAIR=0, QUAD=1 ---
// One AdamW step on elements [start, start + n) of the bound ranges, with
// g = grads * state.scale; nothing is written when state.nonfinite is set.
// The arrays are bound as array<{{V}}>: adamw_update (f32) serves any range,
// adamw_update_vec4 (vec4) p.start and p.n multiples of 4 and 16-byte aligned
// views (the host picks it); thread i updates the {{W}} elements of
// {{V}} p.start / {{W}} + i, ceil(n / ({{W}} * WG)) workgroups. The same
// operations per element.
// The _f16 twins (switch F16) also write the f16 copy of every parameter they
// update (ZeRO-1 in f16: the matmuls read params16, and the rank's shard of
// the fp32 masters is all it has of them, so there is no whole array to cast
// after the step): f16_pair, the cast's rounding (00_shared.wgsl).
// adamw_update_f16 updates the pair p.start + 2i, + 1 (p.start and p.n even;
// the host checks), params16 bound over the same floats as params, two halves
// a u32; adamw_update_f16_vec4 a vec4 as adamw_update_vec4, params16 bound as
// array<vec2<u32>> (4 halves, views on 8-byte boundaries).
@group(0) @binding(0) var<storage, read_write> params: array<{{V}}>;
@group(0) @binding(1) var<storage, read> grads: array<{{V}}>;
@group(0) @binding(2) var<storage, read_write> m: array<{{V}}>;
@group(0) @binding(3) var<storage, read_write> v: array<{{V}}>;
@group(0) @binding(4) var<storage, read> state: OptState;
{{?F32}}@group(0) @binding(5) var<uniform> p: AdamwParams;
{{?F16}}@group(0) @binding(5) var<storage, read_write> params16: array<{{H}}>;
{{?F16}}@group(0) @binding(6) var<uniform> p: AdamwParams;

// The step of element (or vec4) j: its new value, written to params (and m, v).
fn adamw_step(j: u32) -> {{V}} {
    let g = grads[j] * state.scale;
    let w = params[j];
    // Same operation order as ref_adamw_update: ((1-b2)*g)*g.
    let mi = p.beta1 * m[j] + p.one_minus_beta1 * g;
    let vi = p.beta2 * v[j] + p.one_minus_beta2 * g * g;
    m[j] = mi;
    v[j] = vi;
    let mhat = mi / p.bc1;
    let vhat = vi / p.bc2;
    let nw = w - p.lr * (mhat / (sqrt(vhat) + p.eps) + p.weight_decay * w);
    params[j] = nw;
    return nw;
}

@compute @workgroup_size(WG)
fn adamw_update{{N}}(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.n / {{W}}u || state.nonfinite != 0u) { return; }
    let j = p.start / {{W}}u + i;
    {{?ONE}}let nw = adamw_step(j);
    {{?PAIR}}let a = adamw_step(2u * j); let b = adamw_step(2u * j + 1u); params16[j] = f16_pair(a, b);
    {{?QUAD}}params16[j] = vec2<u32>(f16_pair(nw.x, nw.y), f16_pair(nw.z, nw.w));
}
