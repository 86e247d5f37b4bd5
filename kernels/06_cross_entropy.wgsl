// 06_cross_entropy.wgsl: softmax cross-entropy of the logits against the
// targets, its gradient written over the logits, and the mean loss.
// Only the first V of the Vp columns of a logits row are real; the padded
// columns are never read and get gradient 0.
// ABI: storage buffers at bindings 0..k-1, then `p: CeParams` at binding k.
//   crossentropy_forward    losses, lse, status, logits rows, targets   1 workgroup per row
//   crossentropy_backward   logits rows (in place), lse, targets        1 workgroup per row
//   crossentropy_loss_mean  out (1), losses                             1 workgroup
//   crossentropy_backward_f16  dlogits16 rows (f16), logits rows, lse, targets   1 workgroup per row
//   crossentropy_fused_f16  losses, lse, status, logits rows, targets, dlogits16 rows   1 workgroup per row
//                           (the train step's forward and f16 backward in one pass of each row)
// crossentropy_forward_flat: the CPU twin of crossentropy_forward_vec4 (see its section).
// crossentropy_forward_vec4 and crossentropy_backward_vec4: the same bindings,
// params and dispatch with the logits bound as array<vec4<f32>>; they need
// Vp % 4 == 0 (rows start on 16-byte boundaries) and a logits view offset that
// is a multiple of 16 bytes; the host picks them (src/model/cross_entropy.c).
// The forward reads each logit once (an online softmax: running max and sum).
// The logits may exceed maxStorageBufferBindingSize: the host binds them in
// row chunks [row0, row0 + rows) and dispatches once per chunk.
// See docs/kernels/06_cross_entropy.md.

struct CeParams {
    rows: u32,   // logits rows bound (loss_mean: the number of losses)
    row0: u32,   // row of the first bound logits row in losses, lse, targets
    V: u32,      // real columns (vocabulary)
    Vp: u32,     // columns of a logits row (padded vocabulary)
    dloss: f32,  // backward: d mean-loss / d loss[row], 1/(B*T)
}

// status (u32 words, shared with 01_embedding.wgsl; src/model/input_status.h):
// [0] flags, [1] largest invalid token id, [2] largest invalid target id, [3] 0.
const STATUS_BAD_TARGET: u32 = 2u;

// Lanes a workgroup of the CPU twins: the variant markers of
// crossentropy_forward_flat, _backward_flat and _fused_f16_flat set it (8).
const CE_FLAT_WG: u32 = 8u;

// One workgroup per row: the flat workgroup index (2D past 65535 rows).

fn ce_row(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}

// vec4s a thread of crossentropy_forward_vec4 loads before it folds them in:
// 64 bytes in flight per thread, one rescale of the running sum per round.
const CE_V4_ROUND: u32 = 4u;

// Vec4 j of a row with the columns past V (padding) as NEG_INF, which exp
// turns into 0 (the vec4 forwards' loads).
fn ce_mask(x: vec4<f32>, j: u32, V: u32) -> vec4<f32> {
    let col = 4u * j + vec4<u32>(0u, 1u, 2u, 3u);
    return select(vec4<f32>(NEG_INF), x, col < vec4<u32>(V));
}

// The largest of the four lanes.
fn max4(x: vec4<f32>) -> f32 {
    return max(max(x.x, x.y), max(x.z, x.w));
}

// One round of the online softmax: (m, s) = (running max, sum of exp(x - m))
// after the round's vec4s x[0 .. n) (masked lanes NEG_INF). The vec4 forward
// and the fused kernel both fold with it, so their lse is the same bit for bit.
fn ce_fold(ms: vec2<f32>, x: array<vec4<f32>, CE_V4_ROUND>, n: u32) -> vec2<f32> {
    let m = ms.x;
    var mr = m;
    for (var k = 0u; k < n; k++) { mr = max(mr, max4(x[k])); }
    // exp(m - mr) is exactly 1 when the max did not grow.
    var sr = ms.y * select(exp(m - mr), 1.0, mr == m);
    for (var k = 0u; k < n; k++) {
        let e = exp(x[k] - mr);
        sr += (e.x + e.y) + (e.z + e.w);
    }
    return vec2<f32>(mr, sr);
}

// The gradient of vec4 j of a row (columns 4j .. 4j + 3) whose log-sum-exp is
// l: (exp(x - l) - [col == tgt]) * dloss, 0 for columns >= V. Both vec4
// backwards use it, so the f16 one's values are the f32 one's.
fn grad4(x: vec4<f32>, j: u32, l: f32, tgt: u32, V: u32, dloss: f32) -> vec4<f32> {
    let col = 4u * j + vec4<u32>(0u, 1u, 2u, 3u);
    let g = (exp(x - l) - select(vec4<f32>(0.0), vec4<f32>(1.0), col == vec4<u32>(tgt))) * dloss;
    return select(vec4<f32>(0.0), g, col < vec4<u32>(V));
}

// The gradient of column j < V of a row whose log-sum-exp is l:
// (exp(x - l) - [j == tgt]) * dloss (crossentropy_backward's; the column
// check is its caller's, j < V).
fn grad1(x: f32, j: u32, l: f32, tgt: u32, V: u32, dloss: f32) -> f32 {
    return (exp(x - l) - select(0.0, 1.0, j == tgt)) * dloss;
}

// The quiet NaN of a bad target's loss, built at run time (a NaN constant is a
// compile error).
fn ce_nan() -> f32 {
    var bits = 0x7fc00000u;
    return bitcast<f32>(bits);
}

// --- KERNEL: crossentropy_forward ---
// lse = max + log(sum exp(x - max)) over the V real columns; loss = lse -
// x[target]. A target >= V gives loss NaN and raises STATUS_BAD_TARGET.
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;            // (BT)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;               // (BT)
@group(0) @binding(2) var<storage, read_write> status: array<atomic<u32>>;    // (4)
@group(0) @binding(3) var<storage, read> logits: array<f32>;                  // (rows, Vp)
@group(0) @binding(4) var<storage, read> targets: array<u32>;                 // (BT)
@group(0) @binding(5) var<uniform> p: CeParams;

@compute @workgroup_size(WG)
fn crossentropy_forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) tid: u32, @builtin(subgroup_size) sg: u32) {
    let r = ce_row(wg, nwg);
    if (r >= p.rows) { return; }  // the whole workgroup: the reductions stay uniform
    let base = r * p.Vp;
    var m = NEG_INF;
    for (var i = tid; i < p.V; i += WG) { m = max(m, logits[base + i]); }
    m = wg_reduce_max(tid, sg, m);
    var s = 0.0;
    for (var i = tid; i < p.V; i += WG) { s += exp(logits[base + i] - m); }
    s = wg_reduce_sum(tid, sg, s);
    if (tid == 0u) {
        let row = p.row0 + r;
        let l = m + log(s);
        lse[row] = l;
        let tgt = targets[row];
        if (tgt < p.V) {
            losses[row] = l - logits[base + tgt];
        } else {
            losses[row] = ce_nan();
            atomicOr(&status[0], STATUS_BAD_TARGET);
            atomicMax(&status[2], tgt);
        }
    }
}

// --- TEMPLATE: crossentropy_forwardw ---
// --- KERNEL: crossentropy_forward_vec4 = crossentropy_forwardw with P=5, G=6 ---
// --- KERNEL: crossentropy_forward_flat = crossentropy_forward_vec4 with CE_LANES=8, CE_ROUND=1 ---
// --- KERNEL: crossentropy_fused_f16 = crossentropy_forwardw with P=6, G=5 ---
// --- KERNEL: crossentropy_fused_f16_flat = crossentropy_fused_f16 with CE_LANES=8, CE_ROUND=1 ---
// The vec4 forwards and the fused forward + f16 backward, one template: their
// bindings (but for p and the fused kernel's dlogits16, whose numbers {{P}}
// and {{G}} it puts in) and the row's walk (ce_round, ce_fold) and finish
// (ce_flag_bad) written once; each instance's kernel is its entry point
// below. In crossentropy_forward_vec4 and _flat dlogits16 is declared at
// binding 6 and never used, so it is not in their pipeline's layout.
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;            // (BT)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;               // (BT)
@group(0) @binding(2) var<storage, read_write> status: array<atomic<u32>>;    // (4)
@group(0) @binding(3) var<storage, read> logits: array<vec4<f32>>;            // (rows, Vp / 4)
@group(0) @binding(4) var<storage, read> targets: array<u32>;                 // (BT)
@group(0) @binding({{G}}) var<storage, read_write> dlogits16: array<vec4<u32>>; // (rows, Vp / 8) f16; the fused kernels only
@group(0) @binding({{P}}) var<uniform> p: CeParams;

// The round of n vec4s j0, j0 + stride, ... of the row at base (ce_mask's),
// those past n4 as NEG_INF.
fn ce_round(base: u32, j0: u32, n4: u32, stride: u32, n: u32) -> array<vec4<f32>, CE_V4_ROUND> {
    var x = array<vec4<f32>, CE_V4_ROUND>();
    for (var k = 0u; k < n; k++) {
        let j = j0 + k * stride;
        if (j < n4) {
            x[k] = ce_mask(logits[base + j], j, p.V);
        } else {
            x[k] = vec4<f32>(NEG_INF);
        }
    }
    return x;
}

// Lanes a row and vec4s a lane loads before folding them in (ce_lse): WG and
// CE_V4_ROUND but in the CPU twins, _forward_flat and _fused_f16_flat
// (CE_FLAT_WG and 1); with fewer than
// WG lanes the workgroup is one subgroup, folded with subgroup operations.
override CE_LANES: u32 = WG;
override CE_ROUND: u32 = CE_V4_ROUND;

// The lse of the row at base (n4 = ceil(V / 4) vec4s), returned to every
// lane: lane t walks vec4s t, t + CE_LANES, ... in rounds of
// CE_ROUND (ce_round), folding each round into its running (max, sum)
// (ce_fold); then the lanes' (m, s) give M = max m and S = sum s * exp(m - M).
// Call from uniform control flow with the whole workgroup.
fn ce_lse(base: u32, tid: u32, sg: u32) -> f32 {
    let n4 = (p.V + 3u) / 4u;  // vec4s holding real columns; the last may be partial
    var ms = vec2<f32>(NEG_INF, 0.0);
    for (var j0 = tid; j0 < n4; j0 += CE_LANES * CE_ROUND) {
        ms = ce_fold(ms, ce_round(base, j0, n4, CE_LANES, CE_ROUND), CE_ROUND);
    }
    if (CE_LANES == WG) {
        let mx = wg_reduce_max(tid, sg, ms.x);
        return mx + log(wg_reduce_sum(tid, sg, ms.y * exp(ms.x - mx)));
    }
    let mx = subgroupMax(ms.x);  // the workgroup is one subgroup
    return mx + log(subgroupAdd(ms.y * exp(ms.x - mx)));
}

// A target >= V: a NaN loss, the flag and the target in status.
fn ce_flag_bad(row: u32, tgt: u32) {
    losses[row] = ce_nan();
    atomicOr(&status[0], STATUS_BAD_TARGET);
    atomicMax(&status[2], tgt);
}

// Row r's lse l and loss (one thread of the row): lse - its target's logit
// (base: the row's first vec4), or for a target >= V a NaN loss and the
// flag with the target in status.
fn ce_finish(r: u32, base: u32, l: f32) {
    let row = p.row0 + r;
    lse[row] = l;
    let tgt = targets[row];
    if (tgt < p.V) {
        losses[row] = l - logits[base + tgt / 4u][tgt % 4u];
    } else {
        ce_flag_bad(row, tgt);
    }
}

// crossentropy_forward_vec4: crossentropy_forward reading each logit once:
// thread t walks the row's vec4s t, t + WG, ... in rounds of CE_V4_ROUND
// loads, keeping a running max m and the sum s of exp(x - m) (rescaled by
// exp(m_old - m) when m grows); the workgroup then takes M = max of the m and
// S = sum of s * exp(m - M). The columns of the last vec4 past V (padding)
// are masked to NEG_INF: exp gives 0.
// crossentropy_forward_flat, its CPU twin (model/variant.h), for subgroups of
// at least CE_FLAT_WG lanes: the same bindings, params and dispatch (a
// workgroup per row), CE_FLAT_WG = 8 invocations instead of WG, one vec4 a
// round, and the fold of the lanes' (m, s) by subgroupMax and subgroupAdd
// instead of workgroup reductions: no workgroup memory, no barriers (on
// llvmpipe the 256-thread workgroup's reductions cost more than the row).
@compute @workgroup_size(CE_LANES)
fn crossentropy_forward_vec4(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) tid: u32, @builtin(subgroup_size) sg: u32) {
    let r = ce_row(wg, nwg);
    if (r >= p.rows) { return; }  // the whole workgroup: the reductions stay uniform
    let base = r * (p.Vp / 4u);
    let l = ce_lse(base, tid, sg);
    if (tid == 0u) { ce_finish(r, base, l); }
}

// The train step's cross-entropy, one workgroup a row: crossentropy_forward_vec4
// (losses, lse, status; the same fold, so the same lse bit for bit), then
// crossentropy_backward_f16 (dlogits16) from the row it has just read, which a
// GPU's L2 still holds in part (201 KB for GPT-2): the second walk starts at the
// row's end, what the first walk read last. A row's loss is written by the
// thread whose step holds the target, from the logit it loaded there.
// crossentropy_fused_f16_flat, the CPU twin: crossentropy_forward_flat's lse
// (8 lanes, one vec4 a round, subgroup reductions).

@compute @workgroup_size(CE_LANES)
fn crossentropy_fused_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) tid: u32, @builtin(subgroup_size) sg: u32) {
    let r = ce_row(wg, nwg);
    if (r >= p.rows) { return; }  // the whole workgroup: the reductions stay uniform
    let base = r * (p.Vp / 4u);
    let l = ce_lse(base, tid, sg);
    let row = p.row0 + r;
    let tgt = targets[row];
    if (tid == 0u) {
        lse[row] = l;
        if (tgt >= p.V) { ce_flag_bad(row, tgt); }
    }
    let n8 = p.Vp / 8u;
    let real8 = (p.V + 7u) / 8u;
    for (var i = tid; i < n8; i += CE_LANES) {
        let j = n8 - 1u - i;  // from the row's end
        var o = vec4<u32>(0u);
        if (j < real8) {
            let xa = logits[base + 2u * j];
            let xb = logits[base + 2u * j + 1u];
            if (tgt < p.V && j == tgt / 8u) { losses[row] = l - select(xa, xb, (tgt & 4u) != 0u)[tgt % 4u]; }
            let a = grad4(xa, 2u * j, l, tgt, p.V, p.dloss);
            let b = grad4(xb, 2u * j + 1u, l, tgt, p.V, p.dloss);
            o = f16_eight(a, b);
        }
        dlogits16[r * n8 + j] = o;
    }
}

// --- TEMPLATE: crossentropy_backwardw ---
// --- KERNEL: crossentropy_backward = crossentropy_backwardw with V=f32, W=1, N= ---
// --- KERNEL: crossentropy_backward_vec4 = crossentropy_backwardw with V=vec4<f32>, W=4, N=_vec4 ---
// --- KERNEL: crossentropy_backward_flat = crossentropy_backward_vec4 with CE_BWD_WG=8 ---
// In place: x <- (exp(x - lse) - [col == target]) * dloss for col < V, 0 for
// the padded columns, as a template over the logits' element type {{V}}
// ({{W}} columns): crossentropy_backward (f32) serves any Vp,
// crossentropy_backward_vec4 (vec4: grad4) Vp % 4 == 0. Thread t rewrites
// the row's elements t, t + CE_BWD_WG, ..., each read and written by that
// thread alone. crossentropy_backward_flat, the CPU twin (model/variant.h),
// is the vec4 kernel with CE_BWD_WG = CE_FLAT_WG = 8 lanes a row instead of
// WG: the same values (on llvmpipe a 256-thread workgroup is 32 vectors, each
// reading the row's lse and target, most with no vec4 of a GPT-2-small row).
@group(0) @binding(0) var<storage, read_write> logits: array<{{V}}>;   // (rows, Vp / {{W}})
@group(0) @binding(1) var<storage, read> lse: array<f32>;              // (BT)
@group(0) @binding(2) var<storage, read> targets: array<u32>;          // (BT)
@group(0) @binding(3) var<uniform> p: CeParams;

override CE_BWD_WG: u32 = WG;

@compute @workgroup_size(CE_BWD_WG)
fn crossentropy_backward{{N}}(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              @builtin(local_invocation_index) tid: u32) {
    let r = ce_row(wg, nwg);
    if (r >= p.rows) { return; }
    let row = p.row0 + r;
    let l = lse[row];
    let tgt = targets[row];  // >= V (flagged by the forward): no column matches
    let base = r * (p.Vp / {{W}}u);
    let nw = p.Vp / {{W}}u;
    let real = (p.V + {{W}}u - 1u) / {{W}}u;  // elements with a real column; those past it are all padding
    for (var j = tid; j < nw; j += CE_BWD_WG) {
        var d = {{V}}(0.0);
        if (j < real) { d = grad{{W}}(logits[base + j], j, l, tgt, p.V, p.dloss); }
        logits[base + j] = d;
    }
}

// --- KERNEL: crossentropy_backward_f16 ---
// crossentropy_backward_vec4's gradient written as f16 into dlogits16 (the f16
// mode's matmuls read it; the logits stay): 8 columns a step, two vec4 read,
// one vec4<u32> written. Vp % 8 == 0. The values are the vec4 kernel's
// (grad4), rounded to nearest even (f16_pair).
@group(0) @binding(0) var<storage, read_write> dlogits16: array<vec4<u32>>;  // (rows, Vp / 8) f16
@group(0) @binding(1) var<storage, read> logits: array<vec4<f32>>;           // (rows, Vp / 4)
@group(0) @binding(2) var<storage, read> lse: array<f32>;                    // (BT)
@group(0) @binding(3) var<storage, read> targets: array<u32>;                // (BT)
@group(0) @binding(4) var<uniform> p: CeParams;

@compute @workgroup_size(WG)
fn crossentropy_backward_f16(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) tid: u32) {
    let r = ce_row(wg, nwg);
    if (r >= p.rows) { return; }
    let row = p.row0 + r;
    let l = lse[row];
    let tgt = targets[row];  // >= V (flagged by the forward): no column matches
    let n8 = p.Vp / 8u;
    let real8 = (p.V + 7u) / 8u;  // steps with a real column; those past it are all padding
    for (var j = tid; j < n8; j += WG) {
        var o = vec4<u32>(0u);
        if (j < real8) {
            let a = grad4(logits[r * (p.Vp / 4u) + 2u * j], 2u * j, l, tgt, p.V, p.dloss);
            let b = grad4(logits[r * (p.Vp / 4u) + 2u * j + 1u], 2u * j + 1u, l, tgt, p.V, p.dloss);
            o = f16_eight(a, b);
        }
        dlogits16[r * n8 + j] = o;
    }
}

// --- KERNEL: crossentropy_loss_mean ---
// out[0] = sum(losses) / rows. Thread i adds losses i, i+WG, ... in order,
// then one workgroup reduction: the same order every run.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;     // (1)
@group(0) @binding(1) var<storage, read> losses: array<f32>;        // (rows)
@group(0) @binding(2) var<uniform> p: CeParams;

@compute @workgroup_size(WG)
fn crossentropy_loss_mean(@builtin(local_invocation_index) tid: u32, @builtin(subgroup_size) sg: u32) {
    var s = 0.0;
    for (var i = tid; i < p.rows; i += WG) { s += losses[i]; }
    s = wg_reduce_sum(tid, sg, s);
    if (tid == 0u) { out[0] = s / f32(p.rows); }
}
