// 03_linear.wgsl: the linear layer (llm.c's matmul) as tiled matrix products.
//   matmul_forward         out[:, off:off+n] = inp (m, k) @ weight (n, k)^T (+ bias)
//   matmul_backward_input  dinp (m, n) = (or +=) dout[:, off:off+k] @ weight (k, n)
//   matmul_backward_weight dweight (m, n) += dout[:, off:off+m]^T @ inp (k, n)
//   matmul_backward_bias   dbias (n) += column sums of dout[:, off:off+n] over k rows
// ABI: storage buffers at bindings 0..k-1, then `p: LinearParams` at binding k.
// Dispatch: the matmuls take one workgroup of 256 threads per 64x64 output
// tile, grid (ceil(n / 64), ceil(m / 64), 1); the bias kernel one workgroup
// per 32 columns, grid (ceil(n / 32), 1, 1).
// The three tiled matmuls are one template, matmul_tiledw.
// CPU twins (for llvmpipe; src/model/variant.h picks): matmul_forward_flat
// (in matmul_tiledw), matmul_backward_input_flat, matmul_backward_weight_flat
// (the two backward ones one template, matmul_backward_flatw; and
// matmul_backward_bias_flat and _flat4, another), same bindings and
// params as their tiled twins, no workgroup memory, no barriers: 8
// invocations a workgroup, FLAT_ROWS x FLAT_N = 32 x 32 outputs, grid
// (ceil(n / 32), ceil(m / 32), 1).
// See docs/kernels/03_linear.md.

// The same struct for every kernel here; the meaning of each field per kernel
// is in the header above and in the doc's ABI tables.
struct LinearParams {
    m: u32,     // output rows of this dispatch
    n: u32,     // output columns of this dispatch
    k: u32,     // length of the reduction
    ld: u32,    // row stride (floats) of the column-offset operand (out or dout)
    off: u32,   // its first column
    flag: u32,  // matmul_forward: has bias; matmul_backward_input: accumulate; else 0
}

// The flat (CPU) kernels: FLAT_WG invocations, each owning FLAT_COLS columns
// (lid + FLAT_WG * j) of the workgroup's FLAT_ROWS rows. On llvmpipe every
// load whose address differs between lanes costs a scalar load, a bounds test
// and a branch per lane, against one instruction per lane for an fma; per k
// an invocation loads FLAT_COLS values and its subgroup FLAT_ROWS values
// between 8 lanes, for FLAT_ROWS * FLAT_COLS fmas, so the block is as large
// as the compiler still keeps unrolled (128 sums; past that llvmpipe indexes
// the arrays in memory and runs 5x slower). 8 invocations: one SIMD vector,
// and n = 96 is 3 whole workgroups.
const FLAT_WG: u32 = 8u;
const FLAT_ROWS: u32 = 32u;
const FLAT_COLS: u32 = 4u;
const FLAT_OUT: u32 = 128u;  // FLAT_ROWS * FLAT_COLS
const BB_FLAT_WG: u32 = 8u;  // columns (vec4 columns) a workgroup of matmul_backward_bias_flat (flat4)
const FLAT8_ROWS: u32 = 64u;  // rows a workgroup of the flat8 twins (their grid: ceil(m / 64))

// The flat8 kernels (CPU twins for subgroups of at least 8 lanes): 8 values
// of k a step. s (one row's sums of 4 columns) += its 8 k values times b[kk]
// (the 4 columns' values at k0 + kk), in k order as every twin sums.
// flat8_row: lane kk of a holds the row's value at k0 + kk.
fn flat8_row(s: vec4<f32>, a: f32, b: array<vec4<f32>, 8>) -> vec4<f32> {
    var t = s;
    t = fma(vec4<f32>(subgroupShuffle(a, 0u)), b[0], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 1u)), b[1], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 2u)), b[2], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 3u)), b[3], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 4u)), b[4], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 5u)), b[5], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 6u)), b[6], t);
    t = fma(vec4<f32>(subgroupShuffle(a, 7u)), b[7], t);
    return t;
}

// flat8_rows: lane l of a0 and a1 holds the row's values at k0 .. k0 + 3 and
// k0 + 4 .. k0 + 7.
fn flat8_rows(s: vec4<f32>, a0: vec4<f32>, a1: vec4<f32>, l: u32, b: array<vec4<f32>, 8>) -> vec4<f32> {
    var t = s;
    t = fma(vec4<f32>(subgroupShuffle(a0.x, l)), b[0], t);
    t = fma(vec4<f32>(subgroupShuffle(a0.y, l)), b[1], t);
    t = fma(vec4<f32>(subgroupShuffle(a0.z, l)), b[2], t);
    t = fma(vec4<f32>(subgroupShuffle(a0.w, l)), b[3], t);
    t = fma(vec4<f32>(subgroupShuffle(a1.x, l)), b[4], t);
    t = fma(vec4<f32>(subgroupShuffle(a1.y, l)), b[5], t);
    t = fma(vec4<f32>(subgroupShuffle(a1.z, l)), b[6], t);
    t = fma(vec4<f32>(subgroupShuffle(a1.w, l)), b[7], t);
    return t;
}

// flat8_rows8: rows 8 g .. 8 g + 7 of a flat8 block's sums (g a constant at
// every call, so the indices are too), lane l of a0 and a1 holding row
// 8 g + l's values as flat8_rows has them.
fn flat8_rows8(sum: ptr<function, array<vec4<f32>, FLAT8_ROWS>>, g: u32, a0: vec4<f32>, a1: vec4<f32>,
               b: array<vec4<f32>, 8>) {
    (*sum)[8u * g] = flat8_rows((*sum)[8u * g], a0, a1, 0u, b);
    (*sum)[8u * g + 1u] = flat8_rows((*sum)[8u * g + 1u], a0, a1, 1u, b);
    (*sum)[8u * g + 2u] = flat8_rows((*sum)[8u * g + 2u], a0, a1, 2u, b);
    (*sum)[8u * g + 3u] = flat8_rows((*sum)[8u * g + 3u], a0, a1, 3u, b);
    (*sum)[8u * g + 4u] = flat8_rows((*sum)[8u * g + 4u], a0, a1, 4u, b);
    (*sum)[8u * g + 5u] = flat8_rows((*sum)[8u * g + 5u], a0, a1, 5u, b);
    (*sum)[8u * g + 6u] = flat8_rows((*sum)[8u * g + 6u], a0, a1, 6u, b);
    (*sum)[8u * g + 7u] = flat8_rows((*sum)[8u * g + 7u], a0, a1, 7u, b);
}

const TILE: u32 = 64u;   // output tile edge, rows and columns
const TK: u32 = 16u;     // reduction step: each tile load covers TK values of k
const TS: u32 = 16u;     // threads per tile edge: 16 x 16 = WG, each owns 4 x 4 outputs
// Row stride of the shared tiles: 64 + 2, so that the transposed stores of 16
// k values times 2 rows by a 32-lane warp land in 32 distinct banks.
const TPAD: u32 = 66u;

// tile_a[kk * TPAD + i] = A[row0 + i, k0 + kk]; tile_b[kk * TPAD + j] = B[k0 + kk, col0 + j]
// (zero outside the matrices). 2 * 16 * 66 * 4 = 8448 bytes of workgroup memory.
var<workgroup> tile_a: array<f32, 1056>;
var<workgroup> tile_b: array<f32, 1056>;
// This thread's outputs: acc[i * 4 + j] is C[row0 + ty + 16 i, col0 + tx + 16 j].
// Rows and columns strided by 16 (not 4 adjacent) so that a warp's shared
// reads are broadcasts or consecutive, and its global stores are coalesced.
var<private> acc: array<f32, 16>;

// matmul_tiledw's passes (its instances' KIND).
const FORWARD: u32 = 0u;
const INPUT: u32 = 1u;
const WEIGHT: u32 = 2u;

fn acc_zero() {
    for (var i = 0u; i < 16u; i++) { acc[i] = 0.0; }
}

// acc += tile_a^T tile_b over the TK values of one loaded tile pair.
fn tile_multiply(tx: u32, ty: u32) {
    for (var kk = 0u; kk < TK; kk++) {
        var a: array<f32, 4>;
        var b: array<f32, 4>;
        for (var i = 0u; i < 4u; i++) { a[i] = tile_a[kk * TPAD + ty + TS * i]; }
        for (var j = 0u; j < 4u; j++) { b[j] = tile_b[kk * TPAD + tx + TS * j]; }
        for (var i = 0u; i < 4u; i++) {
            for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] = fma(a[i], b[j], acc[i * 4u + j]); }
        }
    }
}

// --- TEMPLATE: matmul_tiledw ---
// --- KERNEL: matmul_forward = matmul_tiledw with PASS=forward, KIND=FORWARD, OB=3, PB=4, F=1 ---
// --- KERNEL: matmul_forward_flat = matmul_tiledw with PASS=forward, KIND=FORWARD, OB=3, PB=4, F=1 ---
// --- KERNEL: matmul_backward_input = matmul_tiledw with PASS=backward_input, KIND=INPUT, OB=2, PB=3, F=0 ---
// --- KERNEL: matmul_backward_weight = matmul_tiledw with PASS=backward_weight, KIND=WEIGHT, OB=2, PB=3, F=0 ---
// The three tiled matmuls, one tile loop; KIND (a constant) picks each
// pass's tile loads and output (the compiler folds the branches):
//   forward: out[r, off + c] = sum_k inp[r, k] * weight[c, k] + bias[c]:
//     both operands have k contiguous, so both are loaded 16 k wide per row
//     and stored transposed.
//   backward input: dinp[r, c] = (p.flag ? dinp[r, c] : 0) + sum_k
//     dout[r, off + k] * weight[k, c]: dout has k contiguous (loaded
//     transposed like inp above); weight has c contiguous, so its tile rows
//     are loaded 64 wide and stored as they are.
//   backward weight: dweight[r, c] += sum_k dout[k, off + r] * inp[k, c]: the
//     reduction runs over token rows, and both operands have their output
//     index contiguous, so both tiles are loaded 64 wide per k row and stored
//     as they are.
// Lines behind the switch F are the forward's alone (bias: the other
// instances have no such binding; 00_shared.md, templates). The
// forward's instance matmul_forward_flat is its CPU twin (below).
const KIND: u32 = {{KIND}};
@group(0) @binding(0) var<storage, read> aop: array<f32>;  // forward: inp (m, k); else dout: input (m, ld), weight (k, ld)
@group(0) @binding(1) var<storage, read> bop: array<f32>;  // forward: weight (n, k); input: weight (k, n); weight: inp (k, n)
{{?F}}@group(0) @binding(2) var<storage, read> bias: array<f32>;  // (n), read only if p.flag != 0
@group(0) @binding({{OB}}) var<storage, read_write> res: array<f32>;  // out (m, ld), dinp (m, n) or dweight (m, n)
@group(0) @binding({{PB}}) var<uniform> p: LinearParams;

@compute @workgroup_size(WG)
fn matmul_{{PASS}}(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let tx = tid % TS;
    let ty = tid / TS;
    let row0 = wg.y * TILE;
    let col0 = wg.x * TILE;
    let lk = tid % TK;     // loader along k: k offset, rows lr + 16 q
    let lr = tid / TK;
    let lc = tid % TILE;   // loader along the tile edge: column, k offsets lkb + 4 q
    let lkb = tid / TILE;
    acc_zero();
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        // The tiles of k0 .. k0 + 15 (zero outside the matrices).
        if (KIND == FORWARD) {
            let k = k0 + lk;
            for (var q = 0u; q < 4u; q++) {
                let r = lr + TS * q;
                var va = 0.0;
                var vb = 0.0;
                if (k < p.k && row0 + r < p.m) { va = aop[(row0 + r) * p.k + k]; }
                if (k < p.k && col0 + r < p.n) { vb = bop[(col0 + r) * p.k + k]; }
                tile_a[lk * TPAD + r] = va;
                tile_b[lk * TPAD + r] = vb;
            }
        } else if (KIND == INPUT) {
            for (var q = 0u; q < 4u; q++) {
                let r = lr + TS * q;
                let ka = k0 + lk;
                var va = 0.0;
                if (ka < p.k && row0 + r < p.m) { va = aop[(row0 + r) * p.ld + p.off + ka]; }
                tile_a[lk * TPAD + r] = va;
                let kkb = lkb + 4u * q;
                let kb = k0 + kkb;
                var vb = 0.0;
                if (kb < p.k && col0 + lc < p.n) { vb = bop[kb * p.n + col0 + lc]; }
                tile_b[kkb * TPAD + lc] = vb;
            }
        } else {
            for (var q = 0u; q < 4u; q++) {
                let kk = lkb + 4u * q;
                let k = k0 + kk;
                var va = 0.0;
                var vb = 0.0;
                if (k < p.k && row0 + lc < p.m) { va = aop[k * p.ld + p.off + row0 + lc]; }
                if (k < p.k && col0 + lc < p.n) { vb = bop[k * p.n + col0 + lc]; }
                tile_a[kk * TPAD + lc] = va;
                tile_b[kk * TPAD + lc] = vb;
            }
        }
        workgroupBarrier();
        tile_multiply(tx, ty);
        workgroupBarrier();  // the next loads must not overwrite tiles still being read
    }
    for (var i = 0u; i < 4u; i++) {
        let r = row0 + ty + TS * i;
        for (var j = 0u; j < 4u; j++) {
            let c = col0 + tx + TS * j;
            if (r < p.m && c < p.n) {
                var v = acc[i * 4u + j];
                if (KIND == FORWARD) {
                    {{?F}}if (p.flag != 0u) { v += bias[c]; }
                    res[r * p.ld + p.off + c] = v;
                } else {
                    let idx = r * p.n + c;
                    if (KIND == WEIGHT) { v = res[idx] + v; }  // weight: always accumulate
                    else if (p.flag != 0u) { v += res[idx]; }
                    res[idx] = v;
                }
            }
        }
    }
}

// The CPU twin of matmul_forward: the same out, from straight global loads.
// Invocation lid of workgroup (x, y) owns rows y * FLAT_ROWS + i (i < 32)
// and columns x * 32 + lid + 8 j (j < 4). Each weight value it loads
// serves 32 rows. The inp rows are the same for the whole workgroup: each subgroup
// reads S values of k per row at once (one per lane) and hands them round
// with subgroupShuffle, so a row value costs one load per S uses. Sums run
// over k in order: deterministic, whatever the subgroup size.
@compute @workgroup_size(FLAT_WG)
fn matmul_forward_flat(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>,
                       @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) sg: u32) {
    let r0 = wg.y * FLAT_ROWS;
    let c0 = wg.x * FLAT_WG * FLAT_COLS + lid;
    let S = min(sg, FLAT_WG);
    // Rows and columns past the matrix are clamped into it (their sums are
    // never written): every lane takes part in every shuffle.
    var arow: array<u32, FLAT_ROWS>;
    for (var i = 0u; i < FLAT_ROWS; i++) { arow[i] = min(r0 + i, p.m - 1u) * p.k; }
    var bcol: array<u32, FLAT_COLS>;
    for (var j = 0u; j < FLAT_COLS; j++) { bcol[j] = min(c0 + FLAT_WG * j, p.n - 1u) * p.k; }
    var sum = array<f32, FLAT_OUT>();
    for (var k0 = 0u; k0 < p.k; k0 += S) {
        let ks = min(k0 + sid, p.k - 1u);
        var a = array<f32, FLAT_ROWS>();  // lane sid: inp[row i, k0 + sid]
        for (var i = 0u; i < FLAT_ROWS; i++) { a[i] = aop[arow[i] + ks]; }
        let kn = min(S, p.k - k0);
        for (var kk = 0u; kk < kn; kk++) {
            var b = array<f32, FLAT_COLS>();
            for (var j = 0u; j < FLAT_COLS; j++) { b[j] = bop[bcol[j] + k0 + kk]; }
            for (var i = 0u; i < FLAT_ROWS; i++) {
                let x = subgroupShuffle(a[i], kk);
                for (var j = 0u; j < FLAT_COLS; j++) { sum[i * FLAT_COLS + j] = fma(x, b[j], sum[i * FLAT_COLS + j]); }
            }
        }
    }
    for (var j = 0u; j < FLAT_COLS; j++) {
        let c = c0 + FLAT_WG * j;
        var bj = 0.0;
        {{?F}}if (p.flag != 0u) { bj = bias[min(c, p.n - 1u)]; }
        for (var i = 0u; i < FLAT_ROWS; i++) {
            let r = r0 + i;
            if (r < p.m && c < p.n) { res[r * p.ld + p.off + c] = sum[i * FLAT_COLS + j] + bj; }
        }
    }
}

// --- KERNEL: matmul_backward_bias ---
// dbias[c] += sum over k rows of dout[row, off + c]. A workgroup owns 32
// columns; its 8 row phases each sum every 8th row (a warp reads 32 adjacent
// floats of one row), then one thread per column adds the 8 partials in a
// fixed order: deterministic, no atomics. p.m is unused.
const BB_COLS: u32 = 32u;
const BB_PHASES: u32 = 8u;  // WG / BB_COLS
var<workgroup> bb_part: array<f32, 256>;

@group(0) @binding(0) var<storage, read> dout: array<f32>;         // (k, ld)
@group(0) @binding(1) var<storage, read_write> dbias: array<f32>;  // (n)
@group(0) @binding(2) var<uniform> p: LinearParams;

@compute @workgroup_size(WG)
fn matmul_backward_bias(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let lc = tid % BB_COLS;
    let phase = tid / BB_COLS;
    let c = wg.x * BB_COLS + lc;
    var s = 0.0;
    if (c < p.n) {
        for (var r = phase; r < p.k; r += BB_PHASES) { s += dout[r * p.ld + p.off + c]; }
    }
    bb_part[tid] = s;
    workgroupBarrier();
    if (phase == 0u && c < p.n) {
        var t = 0.0;
        for (var q = 0u; q < BB_PHASES; q++) { t += bb_part[q * BB_COLS + lc]; }
        dbias[c] = dbias[c] + t;
    }
}

// --- TEMPLATE: matmul_backward_flatw ---
// --- KERNEL: matmul_backward_input_flat = matmul_backward_flatw with PASS=input, DW=false ---
// --- KERNEL: matmul_backward_weight_flat = matmul_backward_flatw with PASS=weight, DW=true ---
// The CPU twins of matmul_backward_input and matmul_backward_weight (the
// same bindings and params), as a template, laid out as matmul_forward_flat:
// the rows of the output's shared operand, dout, pass between the lanes
// through subgroupShuffle; the other operand, weight or inp (c contiguous:
// adjacent lanes read adjacent floats), is loaded per lane.
// matmul_backward_input_flat (DW false): dinp[r, c] (+)= sum_k dout[r, off + k]
// weight[k, c], lane sid reading dout[row i, off + k0 + sid].
// matmul_backward_weight_flat (DW true): dweight[r, c] += sum_k dout[k, off + r]
// inp[k, c], lane sid reading dout[k0 + sid, off + row i].
@group(0) @binding(0) var<storage, read> dout: array<f32>;      // input: (m, ld); weight: (k, ld)
@group(0) @binding(1) var<storage, read> bop: array<f32>;       // input: weight (k, n); weight: inp (k, n)
@group(0) @binding(2) var<storage, read_write> res: array<f32>; // input: dinp (m, n); weight: dweight (m, n)
@group(0) @binding(3) var<uniform> p: LinearParams;

const DW: bool = {{DW}};

@compute @workgroup_size(FLAT_WG)
fn matmul_backward_{{PASS}}_flat(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>,
                               @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) sg: u32) {
    let r0 = wg.y * FLAT_ROWS;
    let c0 = wg.x * FLAT_WG * FLAT_COLS + lid;
    let S = min(sg, FLAT_WG);
    var arow: array<u32, FLAT_ROWS>;  // dout's index of output row i, less its k part
    for (var i = 0u; i < FLAT_ROWS; i++) {
        if (DW) { arow[i] = p.off + min(r0 + i, p.m - 1u); } else { arow[i] = min(r0 + i, p.m - 1u) * p.ld + p.off; }
    }
    var bcol: array<u32, FLAT_COLS>;
    for (var j = 0u; j < FLAT_COLS; j++) { bcol[j] = min(c0 + FLAT_WG * j, p.n - 1u); }
    var sum = array<f32, FLAT_OUT>();
    for (var k0 = 0u; k0 < p.k; k0 += S) {
        let ks = min(k0 + sid, p.k - 1u);
        var kofs = ks;  // the k part: dout's column (input) or row (weight) k0 + sid
        if (DW) { kofs = ks * p.ld; }
        var a = array<f32, FLAT_ROWS>();
        for (var i = 0u; i < FLAT_ROWS; i++) { a[i] = dout[arow[i] + kofs]; }
        let kn = min(S, p.k - k0);
        for (var kk = 0u; kk < kn; kk++) {
            let brow = (k0 + kk) * p.n;
            var b = array<f32, FLAT_COLS>();
            for (var j = 0u; j < FLAT_COLS; j++) { b[j] = bop[brow + bcol[j]]; }
            for (var i = 0u; i < FLAT_ROWS; i++) {
                let x = subgroupShuffle(a[i], kk);
                for (var j = 0u; j < FLAT_COLS; j++) { sum[i * FLAT_COLS + j] = fma(x, b[j], sum[i * FLAT_COLS + j]); }
            }
        }
    }
    for (var i = 0u; i < FLAT_ROWS; i++) {
        let r = r0 + i;
        for (var j = 0u; j < FLAT_COLS; j++) {
            let c = c0 + FLAT_WG * j;
            if (r < p.m && c < p.n) {
                let idx = r * p.n + c;
                var v = sum[i * FLAT_COLS + j];
                if (DW || p.flag != 0u) { v += res[idx]; }  // weight: always accumulate; input: if asked
                res[idx] = v;
            }
        }
    }
}

// --- TEMPLATE: matmul_backward_bias_flatw ---
// --- KERNEL: matmul_backward_bias_flat = matmul_backward_bias_flatw with V=f32, W=1, N= ---
// --- KERNEL: matmul_backward_bias_flat4 = matmul_backward_bias_flatw with V=vec4<f32>, W=4, N=4 ---
// The CPU twin of matmul_backward_bias, as a template: one invocation per
// {{W}} adjacent columns (a {{V}} a row), summing its k rows in order;
// BB_FLAT_WG x {{W}} columns a workgroup, grid (ceil(n / ({{W}} BB_FLAT_WG)),
// 1, 1); no workgroup memory or barriers (on llvmpipe the 256-thread
// workgroup's barrier costs more than the sums). matmul_backward_bias_flat
// (f32) serves any n; matmul_backward_bias_flat4 (vec4) n, ld and off
// multiples of 4 (on llvmpipe a lane's vec4 read costs about 3x a scalar
// one). The same sums.
@group(0) @binding(0) var<storage, read> dout: array<{{V}}>;         // (k, ld)
@group(0) @binding(1) var<storage, read_write> dbias: array<{{V}}>;  // (n)
@group(0) @binding(2) var<uniform> p: LinearParams;

@compute @workgroup_size(BB_FLAT_WG)
fn matmul_backward_bias_flat{{N}}(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.n / {{W}}u) { return; }
    let row = p.ld / {{W}}u;
    let col = p.off / {{W}}u + c;
    var s = {{V}}();
    for (var r = 0u; r < p.k; r++) { s += dout[r * row + col]; }
    dbias[c] = dbias[c] + s;
}

// --- TEMPLATE: matmul_flat8w ---
// --- KERNEL: matmul_forward_flat8 = matmul_flat8w with PASS=forward, KIND=FORWARD, OB=3, PB=4, F=1 ---
// --- KERNEL: matmul_backward_input_flat8 = matmul_flat8w with PASS=backward_input, KIND=INPUT, OB=2, PB=3, F=0 ---
// The CPU twins of matmul_forward and matmul_backward_input for subgroups of
// at least 8 lanes (else matmul_forward_flat, matmul_backward_input_flat),
// one template; KIND (a constant) picks the pass. The same sums in the same
// order, 8 values of k a step in straight-line code, operands read and
// outputs written as vec4s. Invocation lid of workgroup (x, y) owns rows
// y * 64 + i (i < 64) and columns x * 32 + 4 lid + j (j < 4); grid
// (ceil(n / 32), ceil(m / 64)). Lane l reads rows y * 64 + 8 g + l of the
// rows operand (inp; dout) 4 k values a vec4 and hands them round.
//   forward (k % 4 == 0, n, ld and off multiples of 4): each weight vec4 is 4
//     k values of one of the lane's columns.
//   backward input (k, ld, off and n multiples of 4): each lane reads a vec4
//     of 4 adjacent columns of weight.
// Why (03_linear.md, "Flat8"): on
// llvmpipe a value written inside a loop is blended with the loop's lane mask
// and the sums live on the stack, so the flat twins' inner loop paid a load,
// a blend and a store per fma; here each sum's vec4 is read and written once
// per 8 k. A lane's read of a scalar costs ~14 instructions and 2 branches, of
// a vec4 ~41, whence 64 rows (each value read serves 32 or 64 sums). The row
// lines are written out: Mesa does not unroll a loop of this size, and sums
// indexed by a loop counter would be indexed per lane, in memory.
// Lines behind the switch F are the forward's alone (bias: the other
// instance has no such binding).
const KIND: u32 = {{KIND}};
@group(0) @binding(0) var<storage, read> aop: array<vec4<f32>>;     // forward: inp (m, k / 4); input: dout (m, ld / 4)
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;  // forward: (n, k / 4); input: (k, n / 4)
{{?F}}@group(0) @binding(2) var<storage, read> bias: array<vec4<f32>>;    // (n / 4), read only if p.flag != 0
@group(0) @binding({{OB}}) var<storage, read_write> res: array<vec4<f32>>;  // out (m, ld / 4) or dinp (m, n / 4)
@group(0) @binding({{PB}}) var<uniform> p: LinearParams;

@compute @workgroup_size(FLAT_WG)
fn matmul_{{PASS}}_flat8(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>,
                        @builtin(subgroup_invocation_id) sid: u32) {
    let r0 = wg.y * FLAT8_ROWS;
    let c0 = wg.x * FLAT_WG * FLAT_COLS + 4u * lid;
    let k4 = p.k / 4u;
    let n4 = p.n / 4u;
    var arow: array<u32, 8>;  // lane sid: aop's vec4 of row r0 + 8 g + sid, less its k part
    for (var g = 0u; g < 8u; g++) {
        if (KIND == FORWARD) { arow[g] = min(r0 + 8u * g + sid, p.m - 1u) * k4; }
        else { arow[g] = (min(r0 + 8u * g + sid, p.m - 1u) * p.ld + p.off) / 4u; }
    }
    var bcol: array<u32, FLAT_COLS>;  // forward: weight's row of column c0 + j, less its k part
    if (KIND == FORWARD) {
        for (var j = 0u; j < FLAT_COLS; j++) { bcol[j] = min(c0 + j, p.n - 1u) * k4; }
    }
    let bq = min(c0 / 4u, n4 - 1u);  // input: weight's vec4 of columns c0 .. c0 + 3
    var sum = array<vec4<f32>, FLAT8_ROWS>();  // sum[i][j]: row i, column c0 + j
    for (var q0 = 0u; q0 < k4; q0 += 2u) {
        // Past k the values are zeros (fma(0, 0, s) = s): clamped reads, then a select.
        let q1 = min(q0 + 1u, k4 - 1u);
        let live = q0 + 1u < k4;
        var b: array<vec4<f32>, 8>;  // b[kk][j]: weight at k 4 q0 + kk, column c0 + j
        if (KIND == FORWARD) {
            var w: array<vec4<f32>, 8>;  // w[2 j + h]: weight[column j, 4 (q0 + h) ..]
            for (var j = 0u; j < FLAT_COLS; j++) {
                w[2u * j] = weight[bcol[j] + q0];
                w[2u * j + 1u] = select(vec4<f32>(), weight[bcol[j] + q1], live);
            }
            for (var kk = 0u; kk < 8u; kk++) {
                let h = kk / 4u;
                let e = kk % 4u;
                b[kk] = vec4<f32>(w[h][e], w[2u + h][e], w[4u + h][e], w[6u + h][e]);
            }
        } else {
            for (var kk = 0u; kk < 8u; kk++) {
                let kb = 4u * q0 + kk;
                b[kk] = select(vec4<f32>(), weight[min(kb, p.k - 1u) * n4 + bq], kb < p.k);
            }
        }
        // Rows 8 g + lane: aop's vec4s at k 4 q0 .. and 4 q1 .., each read just before its rows use it
        // (fewer vectors live at once: a lane's insert into one spilled costs a store).
        flat8_rows8(&sum, 0u, aop[arow[0] + q0], select(vec4<f32>(), aop[arow[0] + q1], live), b);
        flat8_rows8(&sum, 1u, aop[arow[1] + q0], select(vec4<f32>(), aop[arow[1] + q1], live), b);
        flat8_rows8(&sum, 2u, aop[arow[2] + q0], select(vec4<f32>(), aop[arow[2] + q1], live), b);
        flat8_rows8(&sum, 3u, aop[arow[3] + q0], select(vec4<f32>(), aop[arow[3] + q1], live), b);
        flat8_rows8(&sum, 4u, aop[arow[4] + q0], select(vec4<f32>(), aop[arow[4] + q1], live), b);
        flat8_rows8(&sum, 5u, aop[arow[5] + q0], select(vec4<f32>(), aop[arow[5] + q1], live), b);
        flat8_rows8(&sum, 6u, aop[arow[6] + q0], select(vec4<f32>(), aop[arow[6] + q1], live), b);
        flat8_rows8(&sum, 7u, aop[arow[7] + q0], select(vec4<f32>(), aop[arow[7] + q1], live), b);
    }
    // forward: the bias; n % 4 == 0: the lane's 4 columns are all in the matrix or all past it.
    var bj = vec4<f32>();
    {{?F}}if (p.flag != 0u) { bj = bias[min(c0, p.n - 4u) / 4u]; }
    for (var i = 0u; i < FLAT8_ROWS; i++) {
        let r = r0 + i;
        if (r < p.m && c0 < p.n) {
            if (KIND == FORWARD) {
                res[(r * p.ld + p.off + c0) / 4u] = sum[i] + bj;
            } else {
                let idx = (r * p.n + c0) / 4u;
                var v = sum[i];
                if (p.flag != 0u) { v += res[idx]; }
                res[idx] = v;
            }
        }
    }
}

// --- KERNEL: matmul_backward_weight_flat8 ---
// The CPU twin of matmul_backward_weight for subgroups of at least 8 lanes,
// ld, off, m and n multiples of 4 (else matmul_backward_weight_flat): lane l
// reads dout[k0 + l, off + r0 .. r0 + 63] as 16 vec4s and hands them round;
// each lane reads a vec4 of 4 adjacent columns of inp, so invocation lid owns
// columns x * 32 + 4 lid + j (j < 4) of rows y * 64 + i.
@group(0) @binding(0) var<storage, read> dout: array<vec4<f32>>;     // (k, ld / 4)
@group(0) @binding(1) var<storage, read> inp: array<vec4<f32>>;      // (k, n / 4)
@group(0) @binding(2) var<storage, read_write> dweight: array<vec4<f32>>;  // (m, n / 4)
@group(0) @binding(3) var<uniform> p: LinearParams;

@compute @workgroup_size(FLAT_WG)
fn matmul_backward_weight_flat8(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>,
                                @builtin(subgroup_invocation_id) sid: u32) {
    let r0 = wg.y * FLAT8_ROWS;
    let c0 = wg.x * FLAT_WG * FLAT_COLS + 4u * lid;
    let n4 = p.n / 4u;
    let bcol = min(c0 / 4u, n4 - 1u);
    // The row vec4s of dout, off + r0 + 4 t, clamped to the last one of rows < m.
    let alast = (p.off + p.m) / 4u - 1u;
    var acol: array<u32, 16>;
    for (var t = 0u; t < 16u; t++) { acol[t] = min((p.off + r0) / 4u + t, alast); }
    let ld4 = p.ld / 4u;
    var sum = array<vec4<f32>, FLAT8_ROWS>();  // sum[i][j]: row i, column c0 + j
    for (var k0 = 0u; k0 < p.k; k0 += 8u) {
        let ka = k0 + sid;
        let arow = min(ka, p.k - 1u) * ld4;
        var b: array<vec4<f32>, 8>;  // b[kk]: inp[k0 + kk, c0 .. c0 + 3]
        for (var kk = 0u; kk < 8u; kk++) {
            let kb = k0 + kk;
            b[kk] = select(vec4<f32>(), inp[min(kb, p.k - 1u) * n4 + bcol], kb < p.k);
        }
        // a{t}, lane sid: dout[k0 + sid, off + r0 + 4 t ..]; each read just before its rows use it.
        let a0 = select(vec4<f32>(), dout[arow + acol[0]], ka < p.k);
        sum[0] = flat8_row(sum[0], a0.x, b);
        sum[1] = flat8_row(sum[1], a0.y, b);
        sum[2] = flat8_row(sum[2], a0.z, b);
        sum[3] = flat8_row(sum[3], a0.w, b);
        let a1 = select(vec4<f32>(), dout[arow + acol[1]], ka < p.k);
        sum[4] = flat8_row(sum[4], a1.x, b);
        sum[5] = flat8_row(sum[5], a1.y, b);
        sum[6] = flat8_row(sum[6], a1.z, b);
        sum[7] = flat8_row(sum[7], a1.w, b);
        let a2 = select(vec4<f32>(), dout[arow + acol[2]], ka < p.k);
        sum[8] = flat8_row(sum[8], a2.x, b);
        sum[9] = flat8_row(sum[9], a2.y, b);
        sum[10] = flat8_row(sum[10], a2.z, b);
        sum[11] = flat8_row(sum[11], a2.w, b);
        let a3 = select(vec4<f32>(), dout[arow + acol[3]], ka < p.k);
        sum[12] = flat8_row(sum[12], a3.x, b);
        sum[13] = flat8_row(sum[13], a3.y, b);
        sum[14] = flat8_row(sum[14], a3.z, b);
        sum[15] = flat8_row(sum[15], a3.w, b);
        let a4 = select(vec4<f32>(), dout[arow + acol[4]], ka < p.k);
        sum[16] = flat8_row(sum[16], a4.x, b);
        sum[17] = flat8_row(sum[17], a4.y, b);
        sum[18] = flat8_row(sum[18], a4.z, b);
        sum[19] = flat8_row(sum[19], a4.w, b);
        let a5 = select(vec4<f32>(), dout[arow + acol[5]], ka < p.k);
        sum[20] = flat8_row(sum[20], a5.x, b);
        sum[21] = flat8_row(sum[21], a5.y, b);
        sum[22] = flat8_row(sum[22], a5.z, b);
        sum[23] = flat8_row(sum[23], a5.w, b);
        let a6 = select(vec4<f32>(), dout[arow + acol[6]], ka < p.k);
        sum[24] = flat8_row(sum[24], a6.x, b);
        sum[25] = flat8_row(sum[25], a6.y, b);
        sum[26] = flat8_row(sum[26], a6.z, b);
        sum[27] = flat8_row(sum[27], a6.w, b);
        let a7 = select(vec4<f32>(), dout[arow + acol[7]], ka < p.k);
        sum[28] = flat8_row(sum[28], a7.x, b);
        sum[29] = flat8_row(sum[29], a7.y, b);
        sum[30] = flat8_row(sum[30], a7.z, b);
        sum[31] = flat8_row(sum[31], a7.w, b);
        let a8 = select(vec4<f32>(), dout[arow + acol[8]], ka < p.k);
        sum[32] = flat8_row(sum[32], a8.x, b);
        sum[33] = flat8_row(sum[33], a8.y, b);
        sum[34] = flat8_row(sum[34], a8.z, b);
        sum[35] = flat8_row(sum[35], a8.w, b);
        let a9 = select(vec4<f32>(), dout[arow + acol[9]], ka < p.k);
        sum[36] = flat8_row(sum[36], a9.x, b);
        sum[37] = flat8_row(sum[37], a9.y, b);
        sum[38] = flat8_row(sum[38], a9.z, b);
        sum[39] = flat8_row(sum[39], a9.w, b);
        let a10 = select(vec4<f32>(), dout[arow + acol[10]], ka < p.k);
        sum[40] = flat8_row(sum[40], a10.x, b);
        sum[41] = flat8_row(sum[41], a10.y, b);
        sum[42] = flat8_row(sum[42], a10.z, b);
        sum[43] = flat8_row(sum[43], a10.w, b);
        let a11 = select(vec4<f32>(), dout[arow + acol[11]], ka < p.k);
        sum[44] = flat8_row(sum[44], a11.x, b);
        sum[45] = flat8_row(sum[45], a11.y, b);
        sum[46] = flat8_row(sum[46], a11.z, b);
        sum[47] = flat8_row(sum[47], a11.w, b);
        let a12 = select(vec4<f32>(), dout[arow + acol[12]], ka < p.k);
        sum[48] = flat8_row(sum[48], a12.x, b);
        sum[49] = flat8_row(sum[49], a12.y, b);
        sum[50] = flat8_row(sum[50], a12.z, b);
        sum[51] = flat8_row(sum[51], a12.w, b);
        let a13 = select(vec4<f32>(), dout[arow + acol[13]], ka < p.k);
        sum[52] = flat8_row(sum[52], a13.x, b);
        sum[53] = flat8_row(sum[53], a13.y, b);
        sum[54] = flat8_row(sum[54], a13.z, b);
        sum[55] = flat8_row(sum[55], a13.w, b);
        let a14 = select(vec4<f32>(), dout[arow + acol[14]], ka < p.k);
        sum[56] = flat8_row(sum[56], a14.x, b);
        sum[57] = flat8_row(sum[57], a14.y, b);
        sum[58] = flat8_row(sum[58], a14.z, b);
        sum[59] = flat8_row(sum[59], a14.w, b);
        let a15 = select(vec4<f32>(), dout[arow + acol[15]], ka < p.k);
        sum[60] = flat8_row(sum[60], a15.x, b);
        sum[61] = flat8_row(sum[61], a15.y, b);
        sum[62] = flat8_row(sum[62], a15.z, b);
        sum[63] = flat8_row(sum[63], a15.w, b);
    }
    for (var i = 0u; i < FLAT8_ROWS; i++) {
        let r = r0 + i;
        if (r < p.m && c0 < p.n) {
            let idx = (r * p.n + c0) / 4u;
            dweight[idx] = dweight[idx] + sum[i];
        }
    }
}
