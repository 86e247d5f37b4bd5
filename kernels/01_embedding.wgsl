// 01_embedding.wgsl: GPT-2's input layer. Forward: out[b,t,:] = wte[token,:] +
// wpe[t,:]. Backward: dwte[v,:] += sum of dout over the positions holding token
// v (in a fixed order, from a host-built bucket index), dwpe[t,:] += sum over b.
// ABI: storage buffers at bindings 0..k-1, then `p: EncParams` at binding k.
//   encoder_forward       out, tokens, wte rows [v0, v0+nv), wpe, status   1 thread per (n, c)
//   encoder_backward_wte  dwte rows [v0, v0+nv), dout, bucket              WG threads over C per bucket
//   encoder_backward_wte_flat4  (the same, CPU devices: 8 lanes of 4 channels over 32 per bucket)
//   encoder_backward_wpe  dwpe, dout                                       1 thread per (t, c)
// wte and dwte may exceed maxStorageBufferBindingSize: the host binds them in
// row chunks and dispatches once per chunk; each dispatch touches only the
// token ids of its chunk. See docs/kernels/01_embedding.md.

struct EncParams {
    N: u32,     // B*T positions
    T: u32,     // sequence length: position n is at t = n % T
    C: u32,     // channels
    V: u32,     // real vocabulary: token ids >= V are invalid
    v0: u32,    // first wte row of the bound chunk
    nv: u32,    // rows in the bound chunk
    first: u32, // encoder_forward: 1 in the one dispatch that handles invalid ids
    pad: u32,
}

// status (u32 words, shared with 06_cross_entropy.wgsl; src/model/input_status.h):
// [0] flags, [1] largest invalid token id, [2] largest invalid target id, [3] 0.
const STATUS_BAD_TOKEN: u32 = 1u;

// Bucket index (src/model/embedding.h), u32 words for N positions:
// [0] U distinct ids | ids (N, U used, increasing) | starts (N+1, U+1 used) |
// positions (N, grouped by id, increasing within a group).
const BUCKET_IDS: u32 = 1u;
fn bucket_starts(N: u32) -> u32 { return 1u + N; }
fn bucket_positions(N: u32) -> u32 { return 2u + 2u * N; }

// --- KERNEL: encoder_forward ---
// A token id >= V writes zeros (in the dispatch with first = 1) and raises
// STATUS_BAD_TOKEN instead of reading past wte.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;                // (N, C)
@group(0) @binding(1) var<storage, read> tokens: array<u32>;                   // (N)
@group(0) @binding(2) var<storage, read> wte: array<f32>;                      // (nv, C)
@group(0) @binding(3) var<storage, read> wpe: array<f32>;                      // (>= T, C)
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;     // (4)
@group(0) @binding(5) var<uniform> p: EncParams;

@compute @workgroup_size(WG)
fn encoder_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.N * p.C) { return; }
    let n = i / p.C;
    let c = i - n * p.C;
    let tok = tokens[n];
    if (tok >= p.V) {
        if (p.first != 0u) {
            out[i] = 0.0;
            if (c == 0u) {
                atomicOr(&status[0], STATUS_BAD_TOKEN);
                atomicMax(&status[1], tok);
            }
        }
        return;
    }
    // Another dispatch owns ids outside [v0, v0 + nv).
    if (tok < p.v0 || tok - p.v0 >= p.nv) { return; }
    let t = n % p.T;
    out[i] = wte[(tok - p.v0) * p.C + c] + wpe[t * p.C + c];
}

// --- KERNEL: encoder_backward_wte ---
// Workgroup w handles bucket u = w / ceil(C / WG), channels of block
// w % ceil(C / WG). The grid covers U = N (the most possible); workgroups
// past the step's U leave at once. Each thread sums its channel over the
// bucket's positions in increasing order: deterministic, no atomics.
@group(0) @binding(0) var<storage, read_write> dwte: array<f32>;   // (nv, C)
@group(0) @binding(1) var<storage, read> dout: array<f32>;         // (N, C)
@group(0) @binding(2) var<storage, read> bucket: array<u32>;       // (3N + 2)
@group(0) @binding(3) var<uniform> p: EncParams;

@compute @workgroup_size(WG)
fn encoder_backward_wte(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lid: u32) {
    let cblocks = (p.C + WG - 1u) / WG;
    let w = wg.x + wg.y * nwg.x;
    let u = w / cblocks;
    let c = (w - u * cblocks) * WG + lid;
    if (u >= min(bucket[0], p.N) || c >= p.C) { return; }
    let id = bucket[BUCKET_IDS + u];
    if (id < p.v0 || id - p.v0 >= p.nv) { return; }
    let s = bucket[bucket_starts(p.N) + u];
    let e = min(bucket[bucket_starts(p.N) + u + 1u], p.N);
    let pos0 = bucket_positions(p.N);
    var acc = 0.0;
    for (var j = s; j < e; j++) {
        let n = bucket[pos0 + j];
        if (n < p.N) { acc += dout[n * p.C + c]; }
    }
    let o = (id - p.v0) * p.C + c;
    dwte[o] = dwte[o] + acc;
}

// --- KERNEL: encoder_backward_wte_flat4 ---
// The CPU twin of encoder_backward_wte (src/model/variant.h), for C % 4 == 0
// and 16-byte aligned views: ENC_FLAT_WG lanes a workgroup (one llvmpipe
// vector, where the GPU kernel's WG threads are 32 vectors, most of them past
// C at GPT-2's widths), each summing 4 channels as a vec4 over the bucket's
// positions in the same order: the same sums. Workgroup w: bucket
// w / ceil(C / (4 ENC_FLAT_WG)), channel block the remainder.
@group(0) @binding(0) var<storage, read_write> dwte: array<vec4<f32>>;   // (nv, C / 4)
@group(0) @binding(1) var<storage, read> dout: array<vec4<f32>>;         // (N, C / 4)
@group(0) @binding(2) var<storage, read> bucket: array<u32>;             // (3N + 2)
@group(0) @binding(3) var<uniform> p: EncParams;

const ENC_FLAT_WG: u32 = 8u;

@compute @workgroup_size(ENC_FLAT_WG)
fn encoder_backward_wte_flat4(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                              @builtin(local_invocation_index) lid: u32) {
    let C4 = p.C / 4u;
    let cblocks = (C4 + ENC_FLAT_WG - 1u) / ENC_FLAT_WG;
    let w = wg.x + wg.y * nwg.x;
    let u = w / cblocks;
    let c = (w - u * cblocks) * ENC_FLAT_WG + lid;
    if (u >= min(bucket[0], p.N) || c >= C4) { return; }
    let id = bucket[BUCKET_IDS + u];
    if (id < p.v0 || id - p.v0 >= p.nv) { return; }
    let s = bucket[bucket_starts(p.N) + u];
    let e = min(bucket[bucket_starts(p.N) + u + 1u], p.N);
    let pos0 = bucket_positions(p.N);
    var acc = vec4<f32>();
    for (var j = s; j < e; j++) {
        let n = bucket[pos0 + j];
        if (n < p.N) { acc += dout[n * C4 + c]; }
    }
    let o = (id - p.v0) * C4 + c;
    dwte[o] = dwte[o] + acc;
}

// --- KERNEL: encoder_backward_wpe ---
// dwpe[t, c] += sum over b of dout[b, t, c], b in increasing order.
@group(0) @binding(0) var<storage, read_write> dwpe: array<f32>;   // (>= T, C)
@group(0) @binding(1) var<storage, read> dout: array<f32>;         // (N, C)
@group(0) @binding(2) var<uniform> p: EncParams;

@compute @workgroup_size(WG)
fn encoder_backward_wpe(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= p.T * p.C) { return; }
    var acc = 0.0;
    for (var n0 = 0u; n0 < p.N; n0 += p.T) { acc += dout[n0 * p.C + i]; }
    dwpe[i] = dwpe[i] + acc;
}
