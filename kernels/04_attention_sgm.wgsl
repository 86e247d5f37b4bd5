// 04_attention_sgm.wgsl: causal self-attention on subgroup matrices (tensor
// cores on NVIDIA), the f16 twin of 04_attention.wgsl's fast kernels: the
// same params, grid and outputs (qkv and out in f16; the forward writes out
// transposed as well, a fourth binding), for head size HS = 64 (every GPT-2).
//   attention_sgm_forward       out (B, T, C) in f16, as it is and transposed, and lse (B, NH, T)
//                               from qkv (B, T, 3C)
//   attention_sgm_backward_dq   the q columns of dqkv
//   attention_sgm_backward_dkdv the k and v columns of dqkv
//   attention_sgm_backward_preprocess  D (B, NH, T) = dout . out, before dq and dkdv
//   attention_sgm_backward_dkdv_ds, _dq_ds  the same, with dkdv (first) writing
//                               dS^T to a scratch and dq multiplying it (DS_OUT, DS_IN)
// qkv (and, for D, out) are the f16 copies the model keeps (2 bytes a value,
// read 8 at a time as vec4<u32>); dout is f32, rounded to f16 on its way into
// workgroup memory; the products (S = Q K^T, O = P V, dP = dout V^T, dq = dS K,
// dv = P^T dout, dk = dS^T Q) run on f16 fragments with f32 accumulation; the
// scores, the softmax, lse and D stay f32; P and dS are rounded to f16 as the
// left operands of their products. The fragment shape (SGM_TM x SGM_TK left,
// SGM_TK x SGM_TN right, subgroups of SGM_SG) is the one the engine writes in
// front of the file (src/gpu/kernel.c); these kernels take 16 x 16 x 8 in
// subgroups of 32 only (see below; 8 or 16 emulated, for tests on the CPU),
// and src/model/attention.c picks them only there.
// Fragments cannot be read element by element, so every elementwise step
// goes through workgroup memory: a product's f32 result is stored to tile_s,
// threads read it, and what feeds the next product is written as f16 to tile_p.
// The forward makes one pass over the keys with the online softmax: P =
// exp(s - m) with m the row's running max; each block's P V is a fresh
// fragment product, stored to tile_s and added into the thread's f32 share
// of O, scaled there by exp(m_old - m_new) (a fragment cannot be scaled by
// row, and a fragment loaded back from workgroup memory to be carried on
// gave wrong results on NVIDIA's driver: docs/kernels/04_attention_sgm.md);
// O / l at the end.
// Grid (ceil(T / RB), NH, B), NSG subgroups a workgroup (8 or 16; the
// preprocess: ceil(B * NH * T / WG) through dispatch1d); subgroup g owns rows
// (g % 4) * RS .. + RS - 1 of the block in every product, and part g / 4 of
// its columns (of a score block, and of the output): NSG / 4 subgroups share
// each 16 rows, so each holds 4 output fragments (NSG 8) or 2 (16), not 8,
// and the H200's driver gives the kernels fewer registers a thread
// (17d4ba4:bench/RESULTS.md section 19).
// See docs/kernels/04_attention_sgm.md.

struct AttnParams {
    B: u32,
    T: u32,
    C: u32,
    NH: u32,
    hs: u32,     // head size C / NH: HS here
    scale: f32,  // 1 / sqrt(hs)
}

alias LT = subgroup_matrix_left<f16, SGM_TK, SGM_TM>;    // SGM_TM rows x SGM_TK columns
alias RT = subgroup_matrix_right<f16, SGM_TN, SGM_TK>;   // SGM_TK rows x SGM_TN columns
alias CT = subgroup_matrix_result<f32, SGM_TN, SGM_TM>;  // SGM_TM rows x SGM_TN columns

const HS: u32 = 64u;           // the head size these kernels take
const RB: u32 = 64u;           // rows of a workgroup (queries; keys in dkdv), and columns of a block
const RS: u32 = SGM_TM;        // rows a subgroup
const RG: u32 = RB / RS;       // groups of RS rows in a block
// Subgroups a workgroup: RG groups of rows, each row group shared by NSG /
// RG subgroups that split the columns (of a score block, and of an output):
// 8, halves of the columns, or 16, quarters (each subgroup a shorter chain
// of products between barriers, and 512 threads, which hold NVIDIA's driver
// to 128 registers a thread). An override, so that each kernel takes its own
// through its variant marker (`with NSG=16`); the checks below hold for both.
override NSG: u32 = 8u;
// threads a workgroup; any NSG but 8 and 16 divides by zero here: the pipeline is refused
override NT: u32 = NSG * SGM_SG / u32(NSG == 8u || NSG == 16u);
override PART: u32 = RB / (NSG / RG);  // columns a subgroup owns: 32 (16 with NSG 16)
override NF: u32 = PART / SGM_TN;      // its fragments across: 4 (2)
const FR: u32 = RS / SGM_TM;   // fragment rows a subgroup
const FK: u32 = HS / SGM_TK;   // fragments along d: the k of S = Q K^T (and of dP, S^T, dP^T)
const FB: u32 = RB / SGM_TK;   // fragments along a block's columns: the k of P V, dS K, ...
const FS: u32 = RB / SGM_TN;   // fragment columns of a score block
const FO: u32 = HS / SGM_TN;   // fragment columns of an output (O, dq, dk, dv)
override TPR: u32 = NT / RB;      // threads a row of the score block (adjacent lanes): 4 (8)
override CPT: u32 = RB / TPR;     // its columns a thread (contiguous): 16 (8)
const CPT_MAX: u32 = RB * RB / (8u * SGM_SG);  // (the length of the private arrays of them: CPT with NSG 8)
const LV: u32 = HS / 8u + 1u;  // vec4<u32> a row of an f16 [row][d] tile: 8 halves each, +1 against bank conflicts
const PV: u32 = RB / 8u + 1u;  // vec4<u32> a row of tile_p
const SS: u32 = RB + 4u;       // floats a row of tile_s (16-byte rows)
override LPT: u32 = RB * HS / 8u / NT;  // vec4<u32> (8 halves) of a tile a thread moves: 2 (1)
const LPT_MAX: u32 = RB * HS / 8u / (8u * SGM_SG);  // (LPT with NSG 8)
const_assert RB == HS;         // Q (K, V) is staged through tile_p on its way into fragments
// The code names its fragments: arrays of them indexed in loops were not kept
// in registers (on the H200 the three kernels took 18.3 ms of a GPT-2 124M
// step that way, 14.8 with named fragments, 9.0 with the one-block-ahead
// fetch as well). So it is written for one fragment shape, 16 x 16 by 16 x 8
// (the H200's), and attention.c picks these kernels only where that is the
// engine's shape. Subgroups of 32 on the GPU; 8 or 16 where the subgroup
// matrices are emulated (src/gpu/sgm_emulate.c: lavapipe has 8 lanes), where
// a row of the score block has 1 or 2 threads (TPR) and the private arrays
// are longer (CPT_MAX, LPT_MAX: 16 and 2 in subgroups of 32).
const_assert SGM_TM == 16u && SGM_TK == 16u && SGM_TN == 8u;
const_assert SGM_SG == 8u || SGM_SG == 16u || SGM_SG == 32u;
const_assert SGM_SG != 32u || (CPT_MAX == 16u && LPT_MAX == 2u);  // the GPU's, as they were
// The layouts of NSG's two values (NT_8, NT_16: NT with each): whole rows of
// threads, whole f16 octets of a row a thread, a row's threads in one
// subgroup, every tile element moved once. (CPT_MAX and LPT_MAX are the
// values at 8, twice those at 16; NF is 4 and 2.)
const NT_8: u32 = 8u * SGM_SG;
const NT_16: u32 = 16u * SGM_SG;
const_assert NT_8 % RB == 0u && (RB * RB / NT_8) % 8u == 0u && SGM_SG % (NT_8 / RB) == 0u && (RB * HS / 8u) % NT_8 == 0u;
const_assert NT_16 % RB == 0u && (RB * RB / NT_16) % 8u == 0u && SGM_SG % (NT_16 / RB) == 0u && (RB * HS / 8u) % NT_16 == 0u;
const_assert FR == 1u && FK == 4u && FB == 4u && FS == 8u && FO == 8u && RG == 4u;

// 2 x 9,216 + 9,216 + 17,408 + 512 = 45,568 bytes (the host checks the device's limit).
var<workgroup> tile_a: array<vec4<u32>, RB * LV>;  // K (forward, dq) or Q (dkdv): [row][d], f16
var<workgroup> tile_b: array<vec4<u32>, RB * LV>;  // V (forward, dq) or dout (dkdv)
var<workgroup> tile_p: array<vec4<u32>, RB * PV>;  // P or dS [row][column] f16; staging on the way to fragments
var<workgroup> tile_s: array<f32, RB * SS>;        // a product's f32 result [row][column]
var<workgroup> tile_l: array<f32, 2u * RB>;        // dkdv: lse and D of the block's queries

fn pack8(x: vec4<f32>, y: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(pack2x16float(x.xy), pack2x16float(x.zw), pack2x16float(y.xy), pack2x16float(y.zw));
}

// A thread's share of a tile as loaded (Raw16: 8 halves of qkv a vec4<u32>;
// Raw32: dout in f32), fetched into registers one block ahead (each kernel's
// fetch), so that the loads' latency hides behind the block before.
alias Raw16 = array<vec4<u32>, LPT_MAX>;
alias Raw32 = array<vec4<f32>, 2u * LPT_MAX>;

// Head h's part (0 q, 1 k, 2 v) of rows t0 .. t0 + RB - 1 of qkv (src), or
// (fetch32) of dout: this thread's share; zeros past T. The binding is passed
// (&qkv, &dout), as not every section has it; p is every section's.
fn fetch(src: ptr<storage, array<vec4<u32>>, read>, b: u32, t0: u32, part: u32, h: u32, lidx: u32) -> Raw16 {
    var r: Raw16;
    for (var i = 0u; i < LPT; i++) {
        let u = lidx + i * NT;
        let t = t0 + u / (HS / 8u);
        if (t < p.T) { r[i] = (*src)[((b * p.T + t) * 3u * p.C + part * p.C + h * HS) / 8u + u % (HS / 8u)]; }
    }
    return r;
}

fn fetch32(src: ptr<storage, array<vec4<f32>>, read>, b: u32, t0: u32, h: u32, lidx: u32) -> Raw32 {
    var r: Raw32;
    for (var i = 0u; i < LPT; i++) {
        let u = lidx + i * NT;
        let t = t0 + u / (HS / 8u);
        if (t < p.T) {
            let j = ((b * p.T + t) * p.C + h * HS) / 4u + 2u * (u % (HS / 8u));
            r[2u * i] = (*src)[j];
            r[2u * i + 1u] = (*src)[j + 1u];
        }
    }
    return r;
}

// Rows t0 .. t0 + RB - 1 of tile_s (HS floats each) into head h's part
// (0 q, 1 k, 2 v) of dqkv (dst, passed as fetch's src); rows past T dropped.
fn put_rows(dst: ptr<storage, array<vec4<f32>>, read_write>, t0: u32, b: u32, h: u32, part: u32, lidx: u32) {
    for (var u = lidx; u < RB * HS / 4u; u += NT) {
        let r = u / (HS / 4u);
        let c = (u % (HS / 4u)) * 4u;
        if (t0 + r < p.T) {
            (*dst)[((b * p.T + t0 + r) * 3u * p.C + part * p.C + h * HS + c) / 4u] =
                vec4<f32>(tile_s[r * SS + c], tile_s[r * SS + c + 1u], tile_s[r * SS + c + 2u], tile_s[r * SS + c + 3u]);
        }
    }
}

// Raw16 into tile_a (dst 0), tile_b (1) or tile_p (2: staging for fragments).
fn put16(dst: u32, r: Raw16, lidx: u32) {
    for (var i = 0u; i < LPT; i++) {
        let u = lidx + i * NT;
        let row = u / (HS / 8u);
        let c = u % (HS / 8u);
        if (dst == 0u) { tile_a[row * LV + c] = r[i]; }
        else if (dst == 1u) { tile_b[row * LV + c] = r[i]; }
        else { tile_p[row * PV + c] = r[i]; }
    }
}

// Raw32, rounded to f16, likewise.
fn put32(dst: u32, r: Raw32, lidx: u32) {
    var h: Raw16;
    for (var i = 0u; i < LPT; i++) { h[i] = pack8(r[2u * i], r[2u * i + 1u]); }
    put16(dst, h, lidx);
}

// A step of the forward's and dq's loop over key blocks, k0 the block's
// first key: its K and V (fetched a block ahead into ra, rb) into tile_a and
// tile_b; then, if next, the next block's fetched into ra, rb (src: &qkv).
fn stage_kv(src: ptr<storage, array<vec4<u32>>, read>, k0: u32, next: bool, b: u32, h: u32, lidx: u32,
            ra: ptr<function, Raw16>, rb: ptr<function, Raw16>) {
    workgroupBarrier();
    put16(0u, *ra, lidx);
    put16(1u, *rb, lidx);
    workgroupBarrier();
    if (next) {
        *ra = fetch(src, b, k0 + RB, 1u, h, lidx);
        *rb = fetch(src, b, k0 + RB, 2u, h, lidx);
    }
}

// Fragment (d kk.., tile rows c0..) of a tile's transpose: K^T, V^T, Q^T, dout^T.
fn frag_t(in_b: bool, c0: u32, kk: u32) -> RT {
    if (in_b) { return subgroupMatrixLoad<RT, col_major>(&tile_b, c0 * LV + kk / 8u, LV); }
    return subgroupMatrixLoad<RT, col_major>(&tile_a, c0 * LV + kk / 8u, LV);
}

// Fragment (tile rows kk.., d c0..) of a tile as it is: K, V, Q, dout.
fn frag_n(in_b: bool, kk: u32, c0: u32) -> RT {
    if (in_b) { return subgroupMatrixLoad<RT, row_major>(&tile_b, kk * LV + c0 / 8u, LV); }
    return subgroupMatrixLoad<RT, row_major>(&tile_a, kk * LV + c0 / 8u, LV);
}

// Left fragment (rows r0.., columns kk..) of tile_p: P, dS, or a staged Q.
fn frag_p(r0: u32, kk: u32) -> LT {
    return subgroupMatrixLoad<LT, row_major>(&tile_p, r0 * PV + kk / 8u, PV);
}

// The scores of this subgroup's 16 rows (left fragments a0..a3 along d)
// against the rows of a tile (tile_a or tile_b, transposed), stored to tile_s.
fn scores(a0: LT, a1: LT, a2: LT, a3: LT, in_b: bool, r0: u32, h0: u32) {
    for (var fc = 0u; fc < NF; fc++) {
        let c0 = h0 + fc * SGM_TN;
        var c = subgroupMatrixMultiplyAccumulate(a0, frag_t(in_b, c0, 0u), CT());
        c = subgroupMatrixMultiplyAccumulate(a1, frag_t(in_b, c0, 16u), c);
        c = subgroupMatrixMultiplyAccumulate(a2, frag_t(in_b, c0, 32u), c);
        c = subgroupMatrixMultiplyAccumulate(a3, frag_t(in_b, c0, 48u), c);
        subgroupMatrixStore<row_major>(&tile_s, r0 * SS + c0, c, SS);
    }
}

// o0..o3 += a times the right fragments (tile rows kk.., d h0 ..) of tile_a
// or tile_b (in_b): a product's step into this subgroup's part of an output,
// NF fragments (o2 and o3 only where NF is 4: the compiler drops them else).
fn mma4(a: LT, in_b: bool, kk: u32, h0: u32, o0: ptr<function, CT>, o1: ptr<function, CT>, o2: ptr<function, CT>,
        o3: ptr<function, CT>) {
    *o0 = subgroupMatrixMultiplyAccumulate(a, frag_n(in_b, kk, h0), *o0);
    *o1 = subgroupMatrixMultiplyAccumulate(a, frag_n(in_b, kk, h0 + 8u), *o1);
    if (NF == 4u) {
        *o2 = subgroupMatrixMultiplyAccumulate(a, frag_n(in_b, kk, h0 + 16u), *o2);
        *o3 = subgroupMatrixMultiplyAccumulate(a, frag_n(in_b, kk, h0 + 24u), *o3);
    }
}

// The output fragments of this subgroup's 16 rows and part (columns h0 ..), to tile_s.
fn store4(r0: u32, h0: u32, o0: CT, o1: CT, o2: CT, o3: CT) {
    subgroupMatrixStore<row_major>(&tile_s, r0 * SS + h0, o0, SS);
    subgroupMatrixStore<row_major>(&tile_s, r0 * SS + h0 + 8u, o1, SS);
    if (NF == 4u) {
        subgroupMatrixStore<row_major>(&tile_s, r0 * SS + h0 + 16u, o2, SS);
        subgroupMatrixStore<row_major>(&tile_s, r0 * SS + h0 + 24u, o3, SS);
    }
}

// Max and sum over the TPR threads of a score row (adjacent lanes).
fn row_max(x: f32) -> f32 {
    var v = x;
    for (var o = 1u; o < TPR; o <<= 1u) { v = max(v, subgroupShuffleXor(v, o)); }
    return v;
}

fn row_sum(x: f32) -> f32 {
    var v = x;
    for (var o = 1u; o < TPR; o <<= 1u) { v += subgroupShuffleXor(v, o); }
    return v;
}

// Where the dS^T tile of query block qb and key block kb <= qb of (b, h) =
// bh starts in ds (vec4<u32> of 8 halves): the tiles of one (b, h) in order
// of qb, then kb (the causal triangle, nb (nb + 1) / 2 of them), each [key
// row][query column], RB x RB halves (RB * HS / 8 vec4s, RB == HS).
fn ds_tile(bh: u32, nb: u32, qb: u32, kb: u32) -> u32 {
    return (bh * (nb * (nb + 1u) / 2u) + qb * (qb + 1u) / 2u + kb) * (RB * HS / 8u);
}

// Eight f32 values of tile_p as written by pack8.
fn unpack8(v: vec4<u32>) -> array<f32, 8> {
    let a = unpack2x16float(v.x);
    let b = unpack2x16float(v.y);
    let c = unpack2x16float(v.z);
    let d = unpack2x16float(v.w);
    return array<f32, 8>(a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y);
}

// Eight values of this thread's score row (its columns col0 + 8 j8 ..) into
// tile_p as f16; the packed vec4 returned.
fn put_p8(row: u32, col0: u32, j8: u32, e: array<f32, 8>) -> vec4<u32> {
    let v = pack8(vec4<f32>(e[0], e[1], e[2], e[3]), vec4<f32>(e[4], e[5], e[6], e[7]));
    tile_p[row * PV + col0 / 8u + j8] = v;
    return v;
}

// --- KERNEL: attention_sgm_forward ---
// out in f16 twice: row-major, as the attention projection's backward and D
// read it, and transposed, as its forward reads it (the engine's f16 matmuls
// take their input transposed: 03_linear_sgm.wgsl), so that neither a cast
// nor a transpose follows. The transposed copy is written a pair of tokens a
// u32: T even (the host checks).
@group(0) @binding(0) var<storage, read_write> out16: array<vec4<u32>>;  // (B, T, C) f16
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;          // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<vec4<u32>>;          // (B, T, 3C) f16
@group(0) @binding(3) var<storage, read_write> out16_t: array<u32>;      // (C, B T) f16
@group(0) @binding(4) var<uniform> p: AttnParams;

@compute @workgroup_size(NT)
fn attention_sgm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                         @builtin(subgroup_id) sg: u32) {
    let qb = (p.T + RB - 1u) / RB - 1u - wid.x;  // the longest rows first
    let h = wid.y;
    let b = wid.z;
    let q0 = qb * RB;
    let r0 = (sg % RG) * RS;            // this subgroup's rows
    let h0 = (sg / RG) * PART;          // and its half of the columns
    let row = lidx / TPR;                       // this thread's score row and columns
    let col0 = (lidx % TPR) * CPT;
    let q = q0 + row;

    put16(2u, fetch(&qkv, b, q0, 0u, h, lidx), lidx);
    var ra = fetch(&qkv, b, 0u, 1u, h, lidx);  // K and V of the first block
    var rb = fetch(&qkv, b, 0u, 2u, h, lidx);
    workgroupBarrier();
    let qf0 = frag_p(r0, 0u);
    let qf1 = frag_p(r0, 16u);
    let qf2 = frag_p(r0, 32u);
    let qf3 = frag_p(r0, 48u);

    // One pass, the textbook online softmax; each block's P V is a fresh
    // fragment product flushed through tile_s into this thread's f32 row of
    // O (acc, its CPT columns), scaled there by exp(m_old - m_new): no
    // fragment is ever loaded back or carried across blocks.
    var m = NEG_INF;
    var l = 0.0;
    var acc = array<f32, CPT_MAX>();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * RB;
        stage_kv(&qkv, k0, kb < qb, b, h, lidx, &ra, &rb);
        scores(qf0, qf1, qf2, qf3, false, r0, h0);
        workgroupBarrier();
        // this thread's scaled scores read once; masked ones NEG_INF (keys
        // past the query only in the diagonal block)
        let diag = kb == qb;
        var sc: array<f32, CPT_MAX>;
        var bm = NEG_INF;
        for (var j = 0u; j < CPT; j++) {
            let ok = q < p.T && (!diag || k0 + col0 + j <= q);
            sc[j] = select(NEG_INF, tile_s[row * SS + col0 + j] * p.scale, ok);
            bm = max(bm, sc[j]);
        }
        let mn = max(m, row_max(bm));
        let alpha = exp(m - mn);  // 0 on the first block (m = NEG_INF); 1 for rows past T
        m = mn;
        var sum = 0.0;
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let x = sc[8u * j8 + i];
                if (x > NEG_INF) { e[i] = exp(x - m); }
                sum += e[i];
            }
            put_p8(row, col0, j8, e);
        }
        l = l * alpha + row_sum(sum);
        workgroupBarrier();  // P complete, every score read
        var o0 = CT();
        var o1 = CT();
        var o2 = CT();
        var o3 = CT();
        for (var kk = 0u; kk < RB; kk += SGM_TK) {
            let pf = frag_p(r0, kk);
            mma4(pf, true, kk, h0, &o0, &o1, &o2, &o3);
        }
        store4(r0, h0, o0, o1, o2, o3);
        workgroupBarrier();
        for (var j = 0u; j < CPT; j++) { acc[j] = acc[j] * alpha + tile_s[row * SS + col0 + j]; }
    }
    let lrow = m + log(l);

    // O / l through tile_s, so that the writes are whole rows (row-major: 8
    // values a thread; transposed: one d, two tokens); rows past T dropped.
    workgroupBarrier();
    for (var j = 0u; j < CPT; j++) { tile_s[row * SS + col0 + j] = acc[j] / l; }
    workgroupBarrier();
    for (var u = lidx; u < RB * HS / 8u; u += NT) {
        let r = u / (HS / 8u);
        let c = (u % (HS / 8u)) * 8u;
        if (q0 + r < p.T) {
            let x = vec4<f32>(tile_s[r * SS + c], tile_s[r * SS + c + 1u], tile_s[r * SS + c + 2u], tile_s[r * SS + c + 3u]);
            let y = vec4<f32>(tile_s[r * SS + c + 4u], tile_s[r * SS + c + 5u], tile_s[r * SS + c + 6u],
                              tile_s[r * SS + c + 7u]);
            out16[((b * p.T + q0 + r) * p.C + h * HS + c) / 8u] = pack8(x, y);
        }
    }
    let bt = p.B * p.T;
    for (var u = lidx; u < HS * RB / 2u; u += NT) {
        let d = u / (RB / 2u);
        let r = (u % (RB / 2u)) * 2u;  // T is even, so both tokens of a pair are inside or neither
        if (q0 + r < p.T) {
            let v = vec2<f32>(tile_s[r * SS + d], tile_s[(r + 1u) * SS + d]);
            out16_t[((h * HS + d) * bt + b * p.T + q0 + r) / 2u] = pack2x16float(v);
        }
    }
    if (lidx % TPR == 0u && q < p.T) { lse[(b * p.NH + h) * p.T + q] = lrow; }
}

// --- KERNEL: attention_sgm_backward_dq ---
// --- KERNEL: attention_sgm_backward_dq_ds = attention_sgm_backward_dq with DS_IN=1 ---
// DS_IN: dq = dS K from the dS^T tiles that attention_sgm_backward_dkdv_ds
// wrote (it runs first): one product a key block, where DS_IN = 0
// recomputes S, P, dP and dS (three products and two elementwise passes)
// that dkdv computes anyway. dout, lse and D are bound but not read then;
// without DS_IN, ds is a stand-in and not read.
override DS_IN: u32 = 0u;
@group(0) @binding(0) var<storage, read_write> dqkv: array<vec4<f32>>;  // (B, T, 3C), q columns written
@group(0) @binding(1) var<storage, read> qkv: array<vec4<u32>>;         // (B, T, 3C) f16
@group(0) @binding(2) var<storage, read> dout: array<vec4<f32>>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;               // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;             // D (B, NH, T)
@group(0) @binding(5) var<storage, read> ds: array<vec4<u32>>;          // DS_IN: dS^T tiles (ds_tile), f16
@group(0) @binding(6) var<uniform> p: AttnParams;

// This subgroup's four dq fragments, through tile_s, into the q columns of
// query rows q0 .. (rows past T dropped).
fn store_dq(q0: u32, b: u32, h: u32, r0: u32, h0: u32, lidx: u32, o0: CT, o1: CT, o2: CT, o3: CT) {
    workgroupBarrier();
    store4(r0, h0, o0, o1, o2, o3);
    workgroupBarrier();
    put_rows(&dqkv, q0, b, h, 0u, lidx);
}

// This thread's share of the dS^T tile at ds[at ..] (RB x RB halves, row-major).
fn fetch_ds(at: u32, lidx: u32) -> Raw16 {
    var r: Raw16;
    for (var i = 0u; i < LPT; i++) { r[i] = ds[at + lidx + i * NT]; }
    return r;
}

// DS_IN: per key block, dq += dS K, dS the column-major left fragment of
// the dS^T tile (keys as rows) in tile_p; K in tile_a. Both a block ahead.
fn dq_from_ds(qb: u32, h: u32, b: u32, lidx: u32, sg: u32) {
    let nb = (p.T + RB - 1u) / RB;
    let first = ds_tile(b * p.NH + h, nb, qb, 0u);
    let r0 = (sg % RG) * RS;
    let h0 = (sg / RG) * PART;
    var rs = fetch_ds(first, lidx);
    var ra = fetch(&qkv, b, 0u, 1u, h, lidx);
    var o0 = CT();
    var o1 = CT();
    var o2 = CT();
    var o3 = CT();
    for (var kb = 0u; kb <= qb; kb++) {
        workgroupBarrier();
        put16(2u, rs, lidx);
        put16(0u, ra, lidx);
        workgroupBarrier();
        if (kb < qb) {
            rs = fetch_ds(first + (kb + 1u) * (RB * HS / 8u), lidx);
            ra = fetch(&qkv, b, (kb + 1u) * RB, 1u, h, lidx);
        }
        for (var kk = 0u; kk < RB; kk += SGM_TK) {
            let sf = subgroupMatrixLoad<LT, col_major>(&tile_p, kk * PV + r0 / 8u, PV);
            mma4(sf, false, kk, h0, &o0, &o1, &o2, &o3);
        }
    }
    store_dq(qb * RB, b, h, r0, h0, lidx, o0, o1, o2, o3);
}

// Per key block: S = Q K^T -> P = exp(s - lse) (f16, tile_p); dP = dout V^T;
// dS = P (dP - D) scale (f16, over P in tile_p); dq += dS K.
@compute @workgroup_size(NT)
fn attention_sgm_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                             @builtin(subgroup_id) sg: u32) {
    let qb = (p.T + RB - 1u) / RB - 1u - wid.x;
    let h = wid.y;
    let b = wid.z;
    if (DS_IN != 0u) {
        dq_from_ds(qb, h, b, lidx, sg);
        return;
    }
    let q0 = qb * RB;
    let r0 = (sg % RG) * RS;
    let h0 = (sg / RG) * PART;
    let row = lidx / TPR;
    let col0 = (lidx % TPR) * CPT;
    let q = q0 + row;
    let stat = (b * p.NH + h) * p.T + min(q, p.T - 1u);
    let lrow = lse[stat];
    let drow = delta[stat];

    put16(2u, fetch(&qkv, b, q0, 0u, h, lidx), lidx);
    let rdo = fetch32(&dout, b, q0, h, lidx);
    var ra = fetch(&qkv, b, 0u, 1u, h, lidx);  // K and V of the first block
    var rb = fetch(&qkv, b, 0u, 2u, h, lidx);
    workgroupBarrier();
    let qf0 = frag_p(r0, 0u);
    let qf1 = frag_p(r0, 16u);
    let qf2 = frag_p(r0, 32u);
    let qf3 = frag_p(r0, 48u);
    workgroupBarrier();
    put32(2u, rdo, lidx);
    workgroupBarrier();
    let df0 = frag_p(r0, 0u);
    let df1 = frag_p(r0, 16u);
    let df2 = frag_p(r0, 32u);
    let df3 = frag_p(r0, 48u);

    var o0 = CT();
    var o1 = CT();
    var o2 = CT();
    var o3 = CT();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * RB;
        stage_kv(&qkv, k0, kb < qb, b, h, lidx, &ra, &rb);
        scores(qf0, qf1, qf2, qf3, false, r0, h0);
        workgroupBarrier();
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let c = col0 + 8u * j8 + i;
                if (k0 + c <= q && q < p.T) { e[i] = exp(tile_s[row * SS + c] * p.scale - lrow); }
            }
            put_p8(row, col0, j8, e);
        }
        workgroupBarrier();
        scores(df0, df1, df2, df3, true, r0, h0);  // dP = dout V^T
        workgroupBarrier();
        // Each thread rewrites the P it wrote itself: no barrier between.
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            let pe = unpack8(tile_p[row * PV + col0 / 8u + j8]);
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let c = col0 + 8u * j8 + i;
                e[i] = pe[i] * (tile_s[row * SS + c] - drow) * p.scale;
            }
            put_p8(row, col0, j8, e);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < RB; kk += SGM_TK) {
            let sf = frag_p(r0, kk);
            mma4(sf, false, kk, h0, &o0, &o1, &o2, &o3);
        }
    }

    store_dq(q0, b, h, r0, h0, lidx, o0, o1, o2, o3);
}

// --- KERNEL: attention_sgm_backward_dkdv ---
// --- KERNEL: attention_sgm_backward_dkdv_ds = attention_sgm_backward_dkdv with DS_OUT=1 ---
// DS_OUT: each dS^T block is also written to ds (ds_tile), for
// attention_sgm_backward_dq_ds; without it ds is a stand-in, never written.
override DS_OUT: u32 = 0u;
@group(0) @binding(0) var<storage, read_write> dqkv: array<vec4<f32>>;  // (B, T, 3C), k and v columns written
@group(0) @binding(1) var<storage, read> qkv: array<vec4<u32>>;         // (B, T, 3C) f16
@group(0) @binding(2) var<storage, read> dout: array<vec4<f32>>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;               // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;             // D (B, NH, T)
@group(0) @binding(5) var<storage, read_write> ds: array<vec4<u32>>;    // DS_OUT: dS^T tiles (ds_tile), f16
@group(0) @binding(6) var<uniform> p: AttnParams;

// This subgroup's dk or dv (which: 1 or 2) through tile_s into dqkv.
fn store_rows(k0: u32, b: u32, h: u32, part: u32, lidx: u32) {
    workgroupBarrier();
    put_rows(&dqkv, k0, b, h, part, lidx);
    workgroupBarrier();
}

// One key block; per query block from the diagonal on: S^T = K Q^T ->
// P^T = exp(s - lse) (f16, tile_p); dv += P^T dout; dP^T = V dout^T;
// dS^T = P^T (dP^T - D) scale (f16, over P^T); dk += dS^T Q.
@compute @workgroup_size(NT)
fn attention_sgm_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                               @builtin(subgroup_id) sg: u32) {
    let nb = (p.T + RB - 1u) / RB;
    let kb = wid.x;  // the first key block has the most query blocks: first
    let h = wid.y;
    let b = wid.z;
    let k0 = kb * RB;
    let r0 = (sg % RG) * RS;
    let h0 = (sg / RG) * PART;
    let row = lidx / TPR;  // this thread's key (row of S^T) and query columns
    let col0 = (lidx % TPR) * CPT;
    let key = k0 + row;
    let stat0 = (b * p.NH + h) * p.T;

    put16(2u, fetch(&qkv, b, k0, 1u, h, lidx), lidx);
    let rv = fetch(&qkv, b, k0, 2u, h, lidx);
    var ra = fetch(&qkv, b, k0, 0u, h, lidx);  // Q and dout of the first query block (the diagonal)
    var rb = fetch32(&dout, b, k0, h, lidx);
    var rl = 0.0;                        // and lse, D of its queries (threads 0 .. RB - 1)
    var rd = 0.0;
    if (lidx < RB) {
        rl = lse[stat0 + min(k0 + lidx, p.T - 1u)];
        rd = delta[stat0 + min(k0 + lidx, p.T - 1u)];
    }
    workgroupBarrier();
    let kf0 = frag_p(r0, 0u);
    let kf1 = frag_p(r0, 16u);
    let kf2 = frag_p(r0, 32u);
    let kf3 = frag_p(r0, 48u);
    workgroupBarrier();
    put16(2u, rv, lidx);
    workgroupBarrier();
    let vf0 = frag_p(r0, 0u);
    let vf1 = frag_p(r0, 16u);
    let vf2 = frag_p(r0, 32u);
    let vf3 = frag_p(r0, 48u);

    var dk0 = CT();
    var dk1 = CT();
    var dk2 = CT();
    var dk3 = CT();
    var dv0 = CT();
    var dv1 = CT();
    var dv2 = CT();
    var dv3 = CT();
    for (var qb = kb; qb < nb; qb++) {
        let q0 = qb * RB;
        workgroupBarrier();
        put16(0u, ra, lidx);
        put32(1u, rb, lidx);
        if (lidx < RB) {
            tile_l[lidx] = rl;
            tile_l[RB + lidx] = rd;
        }
        workgroupBarrier();
        if (qb + 1u < nb) {
            ra = fetch(&qkv, b, q0 + RB, 0u, h, lidx);
            rb = fetch32(&dout, b, q0 + RB, h, lidx);
            if (lidx < RB) {
                rl = lse[stat0 + min(q0 + RB + lidx, p.T - 1u)];
                rd = delta[stat0 + min(q0 + RB + lidx, p.T - 1u)];
            }
        }
        scores(kf0, kf1, kf2, kf3, false, r0, h0);  // S^T = K Q^T
        workgroupBarrier();
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let c = col0 + 8u * j8 + i;
                let q = q0 + c;
                if (key <= q && q < p.T) { e[i] = exp(tile_s[row * SS + c] * p.scale - tile_l[c]); }
            }
            put_p8(row, col0, j8, e);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < RB; kk += SGM_TK) {  // dv += P^T dout
            let pf = frag_p(r0, kk);
            mma4(pf, true, kk, h0, &dv0, &dv1, &dv2, &dv3);
        }
        scores(vf0, vf1, vf2, vf3, true, r0, h0);  // dP^T = V dout^T
        // The barrier also keeps every subgroup's P^T reads (dv) before dS^T overwrites them.
        workgroupBarrier();
        let dsb = ds_tile(b * p.NH + h, nb, qb, kb) + row * (RB / 8u) + col0 / 8u;
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            let pe = unpack8(tile_p[row * PV + col0 / 8u + j8]);
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let c = col0 + 8u * j8 + i;
                e[i] = pe[i] * (tile_s[row * SS + c] - tile_l[RB + c]) * p.scale;
            }
            let v = put_p8(row, col0, j8, e);
            if (DS_OUT != 0u) { ds[dsb + j8] = v; }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < RB; kk += SGM_TK) {  // dk += dS^T Q
            let sf = frag_p(r0, kk);
            mma4(sf, false, kk, h0, &dk0, &dk1, &dk2, &dk3);
        }
    }

    workgroupBarrier();
    store4(r0, h0, dk0, dk1, dk2, dk3);
    store_rows(k0, b, h, 1u, lidx);
    store4(r0, h0, dv0, dv1, dv2, dv3);
    store_rows(k0, b, h, 2u, lidx);
}

// --- KERNEL: attention_sgm_backward_preprocess ---
// D[b, h, t] = dout[b, t, head h] . out[b, t, head h] with out the f16 copy:
// one thread per row, as attention_backward_preprocess.
@group(0) @binding(0) var<storage, read_write> delta: array<f32>;  // D (B, NH, T)
@group(0) @binding(1) var<storage, read> dout: array<vec4<f32>>;   // (B, T, C)
@group(0) @binding(2) var<storage, read> out16: array<vec4<u32>>;  // (B, T, C) f16
@group(0) @binding(3) var<uniform> p: AttnParams;

@compute @workgroup_size(WG)
fn attention_sgm_backward_preprocess(@builtin(global_invocation_id) gid: vec3<u32>,
                                     @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);  // (b * T + t) * NH + h
    if (i >= p.B * p.T * p.NH) { return; }
    let h = i % p.NH;
    let bt = i / p.NH;
    var sum = 0.0;
    for (var c8 = 0u; c8 < HS / 8u; c8++) {
        let o = out16[i * (HS / 8u) + c8];
        let d0 = dout[i * (HS / 4u) + 2u * c8];
        let d1 = dout[i * (HS / 4u) + 2u * c8 + 1u];
        sum += dot(d0, vec4<f32>(unpack2x16float(o.x), unpack2x16float(o.y))) +
               dot(d1, vec4<f32>(unpack2x16float(o.z), unpack2x16float(o.w)));
    }
    delta[(bt / p.T * p.NH + h) * p.T + bt % p.T] = sum;
}
