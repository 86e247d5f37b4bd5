// 03_linear_vec4.wgsl: the linear layer's three matmuls for GPUs, as
// register-tiled products of vec4s (03_linear.wgsl's tiled kernels serve the
// shapes these cannot take, its flat twins the CPU).
//   matmul_forward_vec4         out[:, off:off+n] = inp (m, k) @ weight (n, k)^T (+ bias)
//   matmul_backward_input_vec4  dinp (m, n) = (or +=) dout[:, off:off+k] @ weight (k, n)
//   matmul_backward_weight_vec4 dweight (m, n) += dout[:, off:off+m]^T @ inp (k, n)
//                               (+ dbias (m) += row sums of that dout^T, if flag bit 1)
//   matmul_split_reduce         dst[:, off:off+n] = (or +=) sum of the split partials (+ bias)
//   matmul_streamk_reduce       dst = (or +=) sum of the stream-K slots of each block (+ bias):
//                               the tensor-core matmuls' (03_linear_sgm.wgsl, p.sk)
//   matmul_backward_bias_part   part[z] (n) = column sums of rows [z * ks, (z + 1) * ks) of
//                               dout (m, n): the bias gradient where no weight pass fuses it
//                               (the f16 mode), before matmul_split_reduce
//   matmul_backward_bias_part_f16  the same, and dout16 = dout rounded to f16 (as cast_f16
//                               rounds) in the same pass: the f16 mode's gradient copy
//   matmul_backward_bias_part_gelu_f16  the same for g = GELU'(pre) * dout, made on the way
//                               in (the f16 MLP backward: no gelu_backward_f16 pass)
// Shapes: n, k, ld and off multiples of 4 (every row a whole number of vec4s);
// m any. ABI: storage buffers at bindings 0..k-1, then `p: MatmulParams`.
// Dispatch: the matmuls one workgroup of 256 threads per 128 x 128 output
// tile and split: grid (ceil(n / 128), ceil(m / 128), splits); the reduce
// one thread per output vec4 through dispatch1d.
// Split-k: with p.split != 0, workgroup z sums k in [z * ks, (z + 1) * ks)
// and writes its partial tile to part[z] (m x n floats each) instead of the
// output; matmul_split_reduce then adds the partials in order of z:
// deterministic. It keeps a GPU busy when the output has few tiles
// (768 x 768 weights: 36 tiles for 132 SMs). See docs/kernels/03_linear_vec4.md.

struct MatmulParams {
    m: u32,      // output rows
    n: u32,      // output columns
    k: u32,      // reduction length (matmul_split_reduce: the number of partials)
    ld: u32,     // row stride (floats) of the column-offset operand (out, dout; the reduce's dst)
    off: u32,    // its first column
    flag: u32,   // bit 0: add to the output (backward_input, reduce); bit 1: bias (forward, backward_weight, reduce)
    ks: u32,     // k per split (a multiple of 4)
    split: u32,  // 1: write partials to part[wg.z] (m x n floats each)
}

// The stage shape was measured on the H200 (docs/kernels/03_linear_vec4.md):
// k 8 per stage beat 16 (28.6 -> 35.8 TFLOP/s at 4096^3) and 32, and a
// second stage tile (MD 2) lost at both; fewer live registers a thread is
// the likely reason (two workgroups an SM instead of one).
const MB: u32 = 128u;  // output tile edge, rows and columns
const MK: u32 = 8u;    // k per stage
const MV: u32 = 32u;   // vec4s per tile row: MB / 4
const MT: u32 = 16u;   // threads per tile edge: 16 x 16 = WG
const MKQ: u32 = 2u;   // vec4s per k run of a tile row: MK / 4
const MQ: u32 = 1u;    // vec4s a thread loads per operand and stage: MK * MV / WG
const MS: u32 = 256u;  // vec4s per stage tile: MK * MV
const MD: u32 = 1u;    // stage tiles in workgroup memory: 2 overlaps a stage's stores with the previous stage's reads

// Stage tiles, k-major: mm_a[kk * MV + i] holds rows 4i..4i+3 of the A tile
// at k0 + kk, mm_b[kk * MV + j] columns 4j..4j+3 of the B tile. 8 KiB (MD 1).
var<workgroup> mm_a: array<vec4<f32>, MS * MD>;
var<workgroup> mm_b: array<vec4<f32>, MS * MD>;
// This thread's 8 x 8 outputs: mm_acc[2 i + h] holds row mm_row(i), columns
// mm_col(h) .. + 3. Rows ty*4..+3 and 64+ty*4..+3 (columns likewise with tx);
// a warp is 8 tx by 4 ty (mm_tx, mm_ty): its stage reads are 4 broadcasts (A)
// and 128 consecutive bytes (B), its global stores 8 adjacent vec4s a row.
var<private> mm_acc: array<vec4<f32>, 16>;
// The next stage's global loads, held while this stage computes.
var<private> mm_pa: array<vec4<f32>, MQ>;
var<private> mm_pb: array<vec4<f32>, MQ>;

fn mm_tx(tid: u32) -> u32 { return (tid % 8u) + 8u * ((tid / 32u) % 2u); }
fn mm_ty(tid: u32) -> u32 { return ((tid / 8u) % 4u) + 4u * (tid / 64u); }
fn mm_row(ty: u32, i: u32) -> u32 { return ty * 4u + (i % 4u) + (i / 4u) * 64u; }
fn mm_col(tx: u32, h: u32) -> u32 { return tx * 4u + h * 64u; }

fn mm_zero() {
    for (var i = 0u; i < 16u; i++) { mm_acc[i] = vec4<f32>(0.0); }
}

// Operands whose tile rows run along k (inp, weight of forward; dout of
// backward_input) come as 128 rows x MK values = 256 vec4s, one a thread
// (each kernel's load_, zero outside the matrices): thread t takes row
// t / MKQ, k run t % MKQ, so a warp reads 16 rows of 32 contiguous bytes
// (their transposed stores below then meet bank conflicts; measured on the
// H200, coalesced loads win: docs/kernels/03_linear_vec4.md).
// Stores a k-run vec4 (4 consecutive k of tile row r) transposed into a stage
// tile: the B tile where b, else the A tile (b a constant at every call).
fn mm_store_t(b: bool, v: vec4<f32>, r: u32, kq: u32, sb: u32) {
    let base = sb + kq * 4u * MV + r / 4u;
    let c = r % 4u;
    if (b) {
        mm_b[base][c] = v.x;
        mm_b[base + MV][c] = v.y;
        mm_b[base + 2u * MV][c] = v.z;
        mm_b[base + 3u * MV][c] = v.w;
    } else {
        mm_a[base][c] = v.x;
        mm_a[base + MV][c] = v.y;
        mm_a[base + 2u * MV][c] = v.z;
        mm_a[base + 3u * MV][c] = v.w;
    }
}

// acc += A_tile^T B_tile over one stage: per k, 4 vec4 loads feed 64 FMAs.
fn mm_stage(tx: u32, ty: u32, sb: u32) {
    for (var kk = 0u; kk < MK; kk++) {
        let a0 = mm_a[sb + kk * MV + ty];
        let a1 = mm_a[sb + kk * MV + MT + ty];
        let b0 = mm_b[sb + kk * MV + tx];
        let b1 = mm_b[sb + kk * MV + MT + tx];
        mm_acc[0] = fma(vec4<f32>(a0.x), b0, mm_acc[0]);
        mm_acc[1] = fma(vec4<f32>(a0.x), b1, mm_acc[1]);
        mm_acc[2] = fma(vec4<f32>(a0.y), b0, mm_acc[2]);
        mm_acc[3] = fma(vec4<f32>(a0.y), b1, mm_acc[3]);
        mm_acc[4] = fma(vec4<f32>(a0.z), b0, mm_acc[4]);
        mm_acc[5] = fma(vec4<f32>(a0.z), b1, mm_acc[5]);
        mm_acc[6] = fma(vec4<f32>(a0.w), b0, mm_acc[6]);
        mm_acc[7] = fma(vec4<f32>(a0.w), b1, mm_acc[7]);
        mm_acc[8] = fma(vec4<f32>(a1.x), b0, mm_acc[8]);
        mm_acc[9] = fma(vec4<f32>(a1.x), b1, mm_acc[9]);
        mm_acc[10] = fma(vec4<f32>(a1.y), b0, mm_acc[10]);
        mm_acc[11] = fma(vec4<f32>(a1.y), b1, mm_acc[11]);
        mm_acc[12] = fma(vec4<f32>(a1.z), b0, mm_acc[12]);
        mm_acc[13] = fma(vec4<f32>(a1.z), b1, mm_acc[13]);
        mm_acc[14] = fma(vec4<f32>(a1.w), b0, mm_acc[14]);
        mm_acc[15] = fma(vec4<f32>(a1.w), b1, mm_acc[15]);
    }
}

// matmul_vec4w's passes (its instances' KIND).
const FORWARD: u32 = 0u;
const INPUT: u32 = 1u;
const WEIGHT: u32 = 2u;

// The k range of workgroup z: [k_begin, k_end).
fn mm_k_begin(z: u32, ks: u32, split: u32) -> u32 { return select(0u, z * ks, split != 0u); }
fn mm_k_end(z: u32, ks: u32, split: u32, k: u32) -> u32 { return select(k, min(k, (z + 1u) * ks), split != 0u); }

// matmul_backward_bias_part(_f16): a workgroup's vec4 columns, its row phases, their sums.
const BP_V: u32 = 64u;   // vec4 columns a workgroup
const BP_PH: u32 = 4u;   // row phases: WG / BP_V
// Rows a thread of matmul_backward_bias_part_f16 loads before it adds them
// (in the same order as one at a time, so the same sums): a loop of one
// load, one add and one store a row kept one load in flight (on an H100
// 0.78 -> 0.72 ms a GPT-2 124M step, 17d4ba4:bench/RESULTS.md section 29).
const BP_ROWS: u32 = 4u;
var<workgroup> bp_sum: array<vec4<f32>, 256>;

// A workgroup's 4 row phases of its columns added in order, for the threads of
// phase 0 (tid < BP_V; the others get their own sums back). Every thread calls it.
fn bp_phases(tid: u32, s: vec4<f32>) -> vec4<f32> {
    bp_sum[tid] = s;
    workgroupBarrier();
    if (tid >= BP_V) { return s; }
    return ((s + bp_sum[BP_V + tid]) + bp_sum[2u * BP_V + tid]) + bp_sum[3u * BP_V + tid];
}

// --- TEMPLATE: matmul_vec4w ---
// --- KERNEL: matmul_forward_vec4 = matmul_vec4w with PASS=forward, KIND=FORWARD, OB=3, PB=4, F=1, W=0 ---
// --- KERNEL: matmul_backward_input_vec4 = matmul_vec4w with PASS=backward_input, KIND=INPUT, OB=2, PB=3, F=0, W=0 ---
// --- KERNEL: matmul_backward_weight_vec4 = matmul_vec4w with PASS=backward_weight, KIND=WEIGHT, OB=2, PB=4, F=0, W=1 ---
// The three matmuls, one stage loop; KIND (a constant) picks each pass's
// loads, tile stores and output:
//   forward: out[r, off + c] = sum_k inp[r, k] * weight[c, k] (+ bias[c]):
//     both tiles are loaded along k and stored transposed.
//   backward input: dinp[r, c] = (flag bit 0 ? dinp[r, c] : 0) + sum_k
//     dout[r, off + k] * weight[k, c]: dout's tile is loaded along k and
//     stored transposed, weight's along c as it is.
//   backward weight: dweight[r, c] += sum_k dout[k, off + r] * inp[k, c], and
//     with flag bit 1 dbias[r] += sum_k dout[k, off + r]: the bias gradient,
//     summed over the workgroup's k range by the workgroups of the first
//     column of tiles. Both tiles are loaded along their output index, as
//     they are. Split: the weight partials go to part[z] (m x n floats each),
//     the bias partials to bpart[z] (m each).
// Lines behind the switch F are the forward's alone, behind W the weight
// pass's (bias, dbias: the other instances have no such binding).
const KIND: u32 = {{KIND}};
@group(0) @binding(0) var<storage, read> aop: array<vec4<f32>>;   // forward: inp (m, k); else dout: input (m, ld), weight (k, ld)
@group(0) @binding(1) var<storage, read> bop: array<vec4<f32>>;   // forward: weight (n, k); input: weight (k, n); weight: inp (k, n)
{{?F}}@group(0) @binding(2) var<storage, read> bias: array<vec4<f32>>;   // (n), read if flag bit 1 and not split
// out (m, ld), dinp (m, n) or dweight (m, n); or the partials (split)
@group(0) @binding({{OB}}) var<storage, read_write> res: array<vec4<f32>>;
{{?W}}@group(0) @binding(3) var<storage, read_write> dbias: array<vec4<f32>>;  // (m), or its partials (split)
@group(0) @binding({{PB}}) var<uniform> p: MatmulParams;

fn load_forward(k0: u32, ke: u32, row0: u32, col0: u32, tid: u32) {
    let k4 = p.k / 4u;
    for (var q = 0u; q < MQ; q++) {
        let idx = tid + WG * q;
        let r = idx / MKQ;
        let kq = idx % MKQ;
        let kv = k0 / 4u + kq;
        var va = vec4<f32>(0.0);
        var vb = vec4<f32>(0.0);
        if (row0 + r < p.m && kv < ke / 4u) { va = aop[(row0 + r) * k4 + kv]; }
        if (col0 + r < p.n && kv < ke / 4u) { vb = bop[(col0 + r) * k4 + kv]; }
        mm_pa[q] = va;
        mm_pb[q] = vb;
    }
}

fn load_backward_input(k0: u32, ke: u32, row0: u32, col0: u32, tid: u32) {
    let ld4 = p.ld / 4u;
    let n4 = p.n / 4u;
    for (var q = 0u; q < MQ; q++) {
        let idx = tid + WG * q;
        let r = idx / MKQ;  // A: tile row, k run idx % MKQ
        let kv = k0 / 4u + idx % MKQ;
        var va = vec4<f32>(0.0);
        if (row0 + r < p.m && kv < ke / 4u) { va = aop[(row0 + r) * ld4 + p.off / 4u + kv]; }
        mm_pa[q] = va;
        let kr = idx / MV;  // B: k row of the tile, vec4 column idx % MV
        let cv = col0 / 4u + idx % MV;
        var vb = vec4<f32>(0.0);
        if (k0 + kr < ke && cv < n4) { vb = bop[(k0 + kr) * n4 + cv]; }
        mm_pb[q] = vb;
    }
}

fn load_backward_weight(k0: u32, ke: u32, row0: u32, col0: u32, tid: u32) {
    let ld4 = p.ld / 4u;
    let n4 = p.n / 4u;
    let m4 = p.m / 4u;
    for (var q = 0u; q < MQ; q++) {
        let idx = tid + WG * q;
        let kr = idx / MV;
        let v4 = idx % MV;
        var va = vec4<f32>(0.0);
        var vb = vec4<f32>(0.0);
        if (k0 + kr < ke && row0 / 4u + v4 < m4) { va = aop[(k0 + kr) * ld4 + (p.off + row0) / 4u + v4]; }
        if (k0 + kr < ke && col0 / 4u + v4 < n4) { vb = bop[(k0 + kr) * n4 + col0 / 4u + v4]; }
        mm_pa[q] = va;
        mm_pb[q] = vb;
    }
}

@compute @workgroup_size(WG)
fn matmul_{{PASS}}_vec4(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let tx = mm_tx(tid);
    let ty = mm_ty(tid);
    let row0 = wg.y * MB;
    let col0 = wg.x * MB;
    let kb = mm_k_begin(wg.z, p.ks, p.split);
    let ke = mm_k_end(wg.z, p.ks, p.split, p.k);
    let with_bias = KIND == WEIGHT && (p.flag & 2u) != 0u && wg.x == 0u;  // uniform over the workgroup
    mm_zero();
    load_{{PASS}}(kb, ke, row0, col0, tid);
    var sb = 0u;  // the stage tile this stage fills
    for (var k0 = kb; k0 < ke; k0 += MK) {
        for (var q = 0u; q < MQ; q++) {
            let idx = tid + WG * q;
            if (KIND == WEIGHT) { mm_a[sb + idx] = mm_pa[q]; } else { mm_store_t(false, mm_pa[q], idx / MKQ, idx % MKQ, sb); }
            if (KIND == FORWARD) { mm_store_t(true, mm_pb[q], idx / MKQ, idx % MKQ, sb); } else { mm_b[sb + idx] = mm_pb[q]; }
        }
        workgroupBarrier();
        if (k0 + MK < ke) { load_{{PASS}}(k0 + MK, ke, row0, col0, tid); }  // in flight during the stage
        mm_stage(tx, ty, sb);
        if (MD == 1u) { workgroupBarrier(); }  // else the next stage fills the other tile
        sb = (sb + MS) % (MS * MD);
    }
    let n4 = p.n / 4u;
    for (var i = 0u; i < 8u; i++) {
        let r = row0 + mm_row(ty, i);
        if (r >= p.m) { continue; }
        for (var h = 0u; h < 2u; h++) {
            let c = col0 + mm_col(tx, h);
            if (c >= p.n) { continue; }
            var v = mm_acc[2u * i + h];
            if (p.split != 0u) {
                res[wg.z * p.m * n4 + r * n4 + c / 4u] = v;
            } else if (KIND == FORWARD) {
                {{?F}}if ((p.flag & 2u) != 0u) { v += bias[c / 4u]; }
                res[r * (p.ld / 4u) + (p.off + c) / 4u] = v;
            } else {
                let idx = r * n4 + c / 4u;
                if (KIND == WEIGHT) { v = res[idx] + v; }  // weight: always accumulate
                else if ((p.flag & 1u) != 0u) { v += res[idx]; }
                res[idx] = v;
            }
        }
    }
    // The bias: after the product, so the stage loop stays as lean as the
    // other passes' (summing the A tile inside it cost the H200 a fifth of
    // this kernel's speed even when no bias was asked for). 8 phases of k
    // per vec4 column, folded in order through the now idle stage tile.
    if (with_bias) {
        workgroupBarrier();  // every thread is done with the stage tiles
        let m4 = p.m / 4u;
        let cv = tid % MV;
        let ph = tid / MV;
        let col = row0 / 4u + cv;
        var s = vec4<f32>(0.0);
        if (col < m4) {
            for (var k = kb + ph; k < ke; k += WG / MV) { s += aop[k * (p.ld / 4u) + p.off / 4u + col]; }
        }
        mm_a[tid] = s;
        workgroupBarrier();
        if (ph == 0u && col < m4) {
            var t = mm_a[cv];
            for (var q = 1u; q < WG / MV; q++) { t += mm_a[q * MV + cv]; }
            if (p.split != 0u) {
                {{?W}}dbias[wg.z * m4 + col] = t;
            } else {
                {{?W}}dbias[col] = dbias[col] + t;
            }
        }
    }
}

// --- KERNEL: matmul_split_reduce ---
// dst[r, off + c] = (flag bit 0 ? dst[r, off + c] : 0) + sum over z < p.k of
// part[z][r, c] (in order of z) (+ bias[c] if flag bit 1), a vec4 a thread.
@group(0) @binding(0) var<storage, read> part: array<vec4<f32>>;       // (p.k, m, n)
@group(0) @binding(1) var<storage, read> bias: array<vec4<f32>>;       // (n), read if flag bit 1
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;  // (m, ld)
@group(0) @binding(3) var<uniform> p: MatmulParams;

@compute @workgroup_size(WG)
fn matmul_split_reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    let n4 = p.n / 4u;
    let total = p.m * n4;
    if (i >= total) { return; }
    let r = i / n4;
    let cv = i % n4;
    // In order of z; four loads issued before their four adds, so that a
    // thread waits for memory once per four partials, not once for each.
    var s = part[i];
    var z = 1u;
    for (; z + 3u < p.k; z += 4u) {
        let a = part[z * total + i];
        let b = part[(z + 1u) * total + i];
        let c = part[(z + 2u) * total + i];
        let d = part[(z + 3u) * total + i];
        s = (((s + a) + b) + c) + d;
    }
    for (; z < p.k; z++) { s += part[z * total + i]; }
    if ((p.flag & 2u) != 0u) { s += bias[cv]; }
    let d = r * (p.ld / 4u) + p.off / 4u + cv;
    if ((p.flag & 1u) != 0u) { s += dst[d]; }
    dst[d] = s;
}

// --- KERNEL: matmul_streamk_reduce ---
// The stream-K partials of 03_linear_sgm.wgsl (p.sk) added up: the blocks'
// stages laid end to end, workgroup w took stages [w sk, (w + 1) sk), and its
// piece of block b went to slot w - first(b), first(b) = b per / sk, of
// part (m x n floats a slot, stored as dst is). So block b has slots 0 ..
// last(b) - first(b), last(b) = ((b + 1) per - 1) / sk; they are added in
// that order (deterministic), then bias[column of dst] (flag bit 1) and,
// with flag bit 0, dst's present value, as matmul_split_reduce adds. dst is
// the (m, n) product, or with flag bit 2 its transpose (n, m). A vec4 a
// thread: bm and bn multiples of 4, so a vec4 lies in one block.
struct StreamkParams {
    m: u32,       // the product's rows
    n: u32,       // and columns
    flag: u32,    // bit 0: add to dst; bit 1: bias (by dst's column); bit 2: dst is the transpose
    bm: u32,      // the matmul's block: rows
    bn: u32,      // and columns
    per: u32,     // stages a block
    sk: u32,      // stages a workgroup
    pad: u32,
}
@group(0) @binding(0) var<storage, read> part: array<vec4<f32>>;       // (slots, as dst)
@group(0) @binding(1) var<storage, read> bias: array<vec4<f32>>;       // (dst's columns), read if flag bit 1
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<f32>>;  // (m, n), or (n, m) with flag bit 2
@group(0) @binding(3) var<uniform> p: StreamkParams;

@compute @workgroup_size(WG)
fn matmul_streamk_reduce(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);
    let t = (p.flag & 4u) != 0u;
    let cols4 = select(p.n, p.m, t) / 4u;  // vec4 a row of dst
    let total = p.m * p.n / 4u;
    if (i >= total) { return; }
    let r = i / cols4;
    let c = (i % cols4) * 4u;
    let row = select(r, c, t);  // of the product
    let col = select(c, r, t);
    let b = (row / p.bm) * ((p.n + p.bn - 1u) / p.bn) + col / p.bn;
    let first = b * p.per / p.sk;
    let slots = ((b + 1u) * p.per - 1u) / p.sk - first + 1u;
    var s = part[i];
    for (var z = 1u; z < slots; z++) { s += part[z * total + i]; }
    if ((p.flag & 2u) != 0u) { s += bias[i % cols4]; }
    if ((p.flag & 1u) != 0u) { s += dst[i]; }
    dst[i] = s;
}

// --- TEMPLATE: matmul_backward_bias_partw ---
// --- KERNEL: matmul_backward_bias_part = matmul_backward_bias_partw with N=, H=0, PB=2, F16=false ---
// --- KERNEL: matmul_backward_bias_part_f16 = matmul_backward_bias_partw with N=_f16, H=1, PB=4, F16=true ---
// --- KERNEL: matmul_backward_bias_part_gelu_f16 = matmul_backward_bias_part_f16 with GELU=1 ---
// matmul_backward_bias_part: part[z, c] = sum of dout[r, c] over rows r in
// [z * p.ks, min((z + 1) * p.ks, p.m)), p.n a multiple of 4. A workgroup
// owns 64 vec4 columns of one row range; its 4 row phases each sum every 4th
// row (64 lanes read 1 KiB of a row), then the phases are added in order:
// deterministic, no atomics. With rows in parts (grid (ceil(n / 256),
// parts)) a 768-wide gradient of 4096 rows is 192 workgroups instead of 24
// for matmul_backward_bias (03_linear.wgsl). The partials then go through
// matmul_split_reduce (p.k = parts) into dbias.
// matmul_backward_bias_part_f16 (F16, a constant): the same sums in the same
// order, and each vec4 it reads written to dout16 rounded to f16 as cast_f16
// rounds it (f16_pair): the f16 mode needs both of every linear's gradient,
// and one pass reads it once instead of twice. The _gelu_f16 variant (GELU =
// 1) does both for the GELU's input gradient, made on the way in: g =
// GELU'(pre) * dout (gelu_backward_vec4's product), so that the f16 MLP
// backward reads the GELU's output gradient and input once and writes no f32
// g (for gelu_backward_f16, then matmul_backward_bias_part on its f32 output).
// Lines behind the switch H are the f16 kernels' alone (dout16, pre: the
// plain instance has no such bindings).
const F16: bool = {{F16}};
override GELU: u32 = 0u;
@group(0) @binding(0) var<storage, read> dout: array<vec4<f32>>;           // (m, n)
@group(0) @binding(1) var<storage, read_write> part: array<vec4<f32>>;     // (parts, n)
{{?H}}@group(0) @binding(2) var<storage, read_write> dout16: array<vec2<u32>>;   // (m, n) halves (of g where GELU)
{{?H}}@group(0) @binding(3) var<storage, read> pre: array<vec4<f32>>;  // (m, n): the GELU's input (GELU; else a stand-in)
@group(0) @binding({{PB}}) var<uniform> p: MatmulParams;

@compute @workgroup_size(WG)
fn matmul_backward_bias_part{{N}}(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let n4 = p.n / 4u;
    let cv = wg.x * BP_V + tid % BP_V;
    let ph = tid / BP_V;
    let r0 = wg.y * p.ks;
    let r1 = min(r0 + p.ks, p.m);
    var s = vec4<f32>();
    if (cv < n4) {
        if (!F16) {
            for (var r = r0 + ph; r < r1; r += BP_PH) { s += dout[r * n4 + cv]; }
        } else {
            // the GELU variant a row at a time: on an H100 it took 0.70 -> 0.75 ms a
            // GPT-2 124M step with 4 rows' loads at once (17d4ba4:bench/RESULTS.md section 29)
            let rows = select(BP_ROWS, 1u, GELU != 0u);
            for (var r = r0 + ph; r < r1; r += rows * BP_PH) {
                var xs: array<vec4<f32>, BP_ROWS>;  // `rows` rows' loads in flight at once
                var pres: array<vec4<f32>, BP_ROWS>;
                for (var u = 0u; u < rows; u++) {
                    let i = (r + u * BP_PH) * n4 + cv;
                    if (r + u * BP_PH < r1) {
                        xs[u] = dout[i];
                        {{?H}}if (GELU != 0u) { pres[u] = pre[i]; }
                    }
                }
                for (var u = 0u; u < rows; u++) {
                    let i = (r + u * BP_PH) * n4 + cv;
                    if (r + u * BP_PH < r1) {
                        var x = xs[u];
                        if (GELU != 0u) {
                            let a = pres[u];
                            x = vec4<f32>(gelu_grad(a.x), gelu_grad(a.y), gelu_grad(a.z), gelu_grad(a.w)) * x;
                        }
                        s += x;
                        {{?H}}dout16[i] = vec2<u32>(f16_pair(x.x, x.y), f16_pair(x.z, x.w));
                    }
                }
            }
        }
    }
    let total = bp_phases(tid, s);
    if (ph == 0u && cv < n4) { part[wg.y * n4 + cv] = total; }
}
