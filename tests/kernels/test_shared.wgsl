// test_shared.wgsl: kernels that exercise the shared preamble's helpers, for
// tests/test_shared.c only (added with wgpt_gpu_add_kernel_file).

struct Rows {
    rows: u32,
    len: u32,
}

// --- KERNEL: test_row_sum ---
// out[r] = sum of row r of x (rows x len), one workgroup per row.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Rows;

@compute @workgroup_size(WG)
fn test_row_sum(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                @builtin(subgroup_size) sg: u32) {
    let row = wid.x;
    var acc = 0.0;
    for (var j = tid; j < p.len; j += WG) { acc += x[row * p.len + j]; }
    let s = wg_reduce_sum(tid, sg, acc);
    if (tid == 0u) { out[row] = s; }
}

// --- KERNEL: test_row_max_then_sum ---
// Back-to-back reductions sharing sh_red, as softmax does:
// out[2r] = max of row r, out[2r+1] = sum of exp(x - max). Then 16 more
// rounds of max/sum on values that differ per round, folded into out[2r+1]
// with weight 0 unless a round disagrees with its expected value, in which
// case out[2r] is poisoned with 1e30.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Rows;

@compute @workgroup_size(WG)
fn test_row_max_then_sum(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                         @builtin(subgroup_size) sg: u32) {
    let row = wid.x;
    var m = NEG_INF;
    for (var j = tid; j < p.len; j += WG) { m = max(m, x[row * p.len + j]); }
    let row_max = wg_reduce_max(tid, sg, m);
    var s = 0.0;
    for (var j = tid; j < p.len; j += WG) { s += exp(x[row * p.len + j] - row_max); }
    let row_sum = wg_reduce_sum(tid, sg, s);
    var bad = false;
    for (var r = 0u; r < 16u; r++) {
        // thread t contributes t + r: max = 255 + r, sum = 256 * (127.5 + r)
        let mx = wg_reduce_max(tid, sg, f32(tid + r));
        let sm = wg_reduce_sum(tid, sg, f32(tid + r));
        bad = bad || mx != f32(255u + r) || sm != 256.0 * (127.5 + f32(r));
    }
    if (tid == 0u) {
        out[2u * row] = select(row_max, 1e30, bad);
        out[2u * row + 1u] = row_sum;
    }
}

// --- KERNEL: test_guards ---
// out[2i] = nan_guard(x[i]), out[2i+1] = 1 if is_finite(x[i]) else 0.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Rows;

@compute @workgroup_size(WG)
fn test_guards(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.len) { return; }
    out[2u * i] = nan_guard(x[i]);
    out[2u * i + 1u] = select(0.0, 1.0, is_finite(x[i]));
}

// --- KERNEL: test_subgroup_layout ---
// Checks the preamble's assumption that subgroup k holds threads
// [k*sg, (k+1)*sg): out[i] = subgroup_invocation_id (+1000 where the
// subgroup's first thread is not tid - lane), out[rows*WG + wg] = sg size.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> p: Rows;

@compute @workgroup_size(WG)
fn test_subgroup_layout(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                        @builtin(subgroup_size) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    // first lane's tid, broadcast: must equal tid - lane if subgroups are contiguous
    let first = subgroupBroadcastFirst(tid);
    out[wid.x * WG + tid] = f32(lane) + select(1000.0, 0.0, first + lane == tid);
    if (tid == 0u) { out[p.rows * WG + wid.x] = f32(sg); }
}
