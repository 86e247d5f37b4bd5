// 04_attention.wgsl: causal multi-head self-attention, flash style: no T x T
// matrix ever reaches global memory. The forward keeps an online softmax per
// query over key blocks and saves the log-sum-exp; the backward recomputes
// the probabilities from it, without atomics.
// Layout: qkv (B, T, 3C) = [q | k | v], head h at columns h*hs..(h+1)*hs of
// each part; out, dout (B, T, C); lse, D (B, NH, T). hs = C / NH <= MAX_HS.
// ABI: storage buffers at bindings 0..k-1, then `p: AttnParams` at binding k.
// Three sets of kernels with the same bindings and params (src/model/attention.c picks):
// - fast (GPUs, hs <= FHS = 64 and hs % 4 == 0): attention_forward,
//   attention_backward_dq, attention_backward_dkdv; blocks of FB = 64 queries
//   and keys, 4x4 register tiles, qkv/out/dout/dqkv bound as vec4 arrays;
//   grid (ceil(T/FB), NH, B);
// - generic (GPUs, other head sizes up to MAX_HS): the *_generic kernels,
//   blocks of BQ = BK = 32, head columns DC at a time; grid (ceil(T/BQ), NH, B);
// - flat CPU twins (for llvmpipe; src/model/variant.h): the *_flat kernels,
//   no workgroup memory, no barriers: one invocation per query (key),
//   AF_WG a workgroup, grid (ceil(T/AF_WG), NH, B); keys (queries) pass between
//   the lanes of a group of AF_G = 8 with subgroupShuffle, two rows a lane, in
//   blocks of AF_K = 16, so the subgroup size must be a multiple of 8; the
//   *_flat4 ones read the head as vec4s (hs % 4 == 0): *_flat and *_flat4
//   are instances of two templates (attention_forward_flatw,
//   attention_backward_flatw; the element type {{V}} and its width {{W}}
//   put in); the *_flath ones also fix the head size per pipeline (AF_HS4,
//   a variant a size).
// The fast kernels have 48 KiB variants, attention_forward_48k,
// attention_backward_dq_48k and attention_backward_dkdv_48k (one more 16 KiB
// tile; same bindings, params and grid), which attention.c picks where
// maxComputeWorkgroupStorageSize allows (the H200; not lavapipe's 32 KiB):
// each is its 32 KiB kernel's section compiled with ATTN_48K = true (a variant
// marker under the section's), one body for both.
// attention_backward_preprocess serves all three: ceil(B*NH*T / WG) through
// dispatch1d. Kernels with the same bindings share a section (entry markers,
// `// --- KERNEL: name in section ---`), so that each binding list is written
// once: four sections, fast forward (with the flath forward), fast backward
// (dq, dkdv, and the flath ones), generic forward and generic backward (dq
// and dkdv); then the two templates of the flat twins. The steps that
// kernels of several sections take are written once, in this file preamble
// (the text before the first marker, pasted in front of every kernel):
// head_addr (where a head lies in qkv, out, lse), fma4x4, col4 and ft_put
// (the fast kernels' register-tile step and transposed tile stores),
// gen_dots and gen_mix (the generic kernels' two products), the af_* block
// steps of the flat twins. A preamble names no binding, so those that read
// a buffer or a workgroup array take it as a pointer (&qkv, &tk[0]).
// See docs/kernels/04_attention.md.

// The fast kernels' variants: true gives each a third 16 KiB tile of
// workgroup memory (one of its workgroup arrays gets a second tile, [T2]:
// 49,152 bytes in all)
// and the code that uses it; false (the default) keeps them within 32 KiB.
// Set when a pipeline is created (its variant marker), so the branches on it
// are constant and each variant compiles to its own straight code.
override ATTN_48K: bool = false;

// The flat CPU twins with the head size fixed when the pipeline is made
// (*_flath, a variant marker a head size: AF_HS4 vec4s, at most AF_MAX_HS4):
// their query (key) rows and running sums stay in private arrays indexed by
// constants once Mesa unrolls the loops over the head, so each block of keys
// (queries) reads only the other side's rows.
override AF_HS4: u32 = 16u;
const AF_MAX_HS4: u32 = 16u;

struct AttnParams {
    B: u32,
    T: u32,
    C: u32,
    NH: u32,
    hs: u32,     // head size C / NH, at most MAX_HS
    scale: f32,  // 1 / sqrt(hs)
}

// The fast kernels: 256 threads as a 16 x 16 grid, thread (ty, tx) =
// (tid / FV, tid % FV) owns rows 4ty .. 4ty + 3 and columns 4tx .. 4tx + 3
// of every 64 x 64 product. Tiles in workgroup memory are stored transposed
// ([d][row], FV vec4 a line) so that each step of a product reads one vec4 of
// each operand: 16 FMAs for two loads. Two tiles: 2 * FT * 16 = 32 KiB.
const FB: u32 = 64u;     // queries (keys) per block
const FHS: u32 = 64u;    // largest head size of the fast kernels
const FV: u32 = 16u;     // vec4 per tile line: FB / 4 == FHS / 4; also threads per row group
const FT: u32 = 1024u;   // vec4 per tile: FHS * FV
const_assert FB == 4u * FV;
const_assert FHS == FB;
const_assert FV * FV == WG;
const_assert FT == FHS * FV;

// Where head wid.y of batch wid.z lies, counted in elements of w floats (the
// fast kernels and the flat4 and flath twins: vec4s; the flat twin: floats),
// hsw of them a head: CW a row of out (dout), C3W a row of qkv (dqkv), hsW
// the head; base: q of (b, t = 0, h) in qkv and dqkv (k at + CW, v at + 2
// CW); ob: (b, 0, h) in out and dout; lb: (b, h, t = 0) in lse and D.
struct HeadAddr {
    CW: u32,
    C3W: u32,
    hsW: u32,
    base: u32,
    ob: u32,
    lb: u32,
}
fn head_addr(wid: vec3<u32>, w: u32, hsw: u32) -> HeadAddr {
    let h = wid.y;
    let b = wid.z;
    var a: HeadAddr;
    a.CW = p.C / w;
    a.C3W = 3u * a.CW;
    a.hsW = hsw;
    a.base = b * p.T * a.C3W + h * hsw;
    a.ob = b * p.T * a.CW + h * hsw;
    a.lb = (b * p.NH + h) * p.T;
    return a;
}

// One step of a fast kernel's 4 x 4 register tile: acc[i] += x[i] * y.
fn fma4x4(acc: array<vec4<f32>, 4>, x: vec4<f32>, y: vec4<f32>) -> array<vec4<f32>, 4> {
    var a = acc;
    a[0] = fma(vec4<f32>(x.x), y, a[0]);
    a[1] = fma(vec4<f32>(x.y), y, a[1]);
    a[2] = fma(vec4<f32>(x.z), y, a[2]);
    a[3] = fma(vec4<f32>(x.w), y, a[3]);
    return a;
}

// Component k of each of 4 vec4s: a column of 4 gathered lines of a tile.
fn col4(t: array<vec4<f32>, 4>, k: u32) -> vec4<f32> {
    return vec4<f32>(t[0][k], t[1][k], t[2][k], t[3][k]);
}

// A fast kernel's workgroup array that ATTN_48K doubles is two tiles of FT,
// [0] and [T2]: T2 is 1 where ATTN_48K (the code that uses it is dead where
// not). Each tile can so be passed to ft_put.
override T2: u32 = select(0u, 1u, ATTN_48K);

// The fast kernels' transposed stores: element e = tid + u * WG of a block's
// rows (row r = e % FB, vec4 column j = e / FB) goes to tile t, its 4 columns
// on lines 4j .. 4j + 3 (FV vec4 apart), slot r / 4 (swz: (r / 4) ^ j),
// component r % 4.
fn ft_put(t: ptr<workgroup, array<vec4<f32>, FT>>, e: u32, swz: bool, v: vec4<f32>) {
    let r = e % FB;
    let o = 4u * (e / FB) * FV + select(r / 4u, (r / 4u) ^ (e / FB), swz);
    (*t)[o][r % 4u] = v.x;
    (*t)[o + FV][r % 4u] = v.y;
    (*t)[o + 2u * FV][r % 4u] = v.z;
    (*t)[o + 3u * FV][r % 4u] = v.w;
}

// The generic kernels. Tiles: a block of BQ queries meets a block of BK keys; head columns pass
// through workgroup memory DC at a time, so any hs <= MAX_HS fits in
// 3 * BQ * PAD * 4 = 12,672 bytes (under WebGPU's default 16 KiB).
const BQ: u32 = 32u;      // queries per block (rows of the workgroup)
const BK: u32 = 32u;      // keys per block; == BQ so the diagonal block is the last one a query block needs
const DC: u32 = 32u;      // head columns per chunk
const PAD: u32 = 33u;     // row stride of every tile: DC + 1 (and BK + 1) spreads rows over banks
const TILE: u32 = 1056u;  // BQ * PAD floats
const TPR: u32 = 8u;      // threads per tile row: WG / BQ
const KPT: u32 = 4u;      // scores per thread: BK / TPR (columns lane, lane + TPR, ...)
const CPT: u32 = 4u;      // output columns per thread in one chunk: DC / TPR
const MAX_HS: u32 = 128u;
const NCH: u32 = 4u;      // chunks of the largest head: MAX_HS / DC
const NACC: u32 = 16u;    // accumulators per thread: NCH * CPT

// The flat (CPU) kernels: AF_WG invocations a workgroup, one query (or key)
// each; lanes sid & ~7 .. (sid & ~7) + 7 of a subgroup form a group of AF_G
// that shares key (query) rows through subgroupShuffle.
const AF_WG: u32 = 16u;
const AF_G: u32 = 8u;
// Keys (queries) a block: two groups' worth, each lane loading two rows, so
// that every row a lane loads itself (its q, its dout, the running out) is
// read once per 16 shuffled rows instead of once per 8: on llvmpipe the
// per-lane loads are the cost.
const AF_K: u32 = 16u;
const_assert AF_WG % AF_K == 0u;
const_assert AF_K == 2u * AF_G;

// The block steps the flat twins share. af_dot16_4: 16 running dot products,
// one vec4 of head columns: acc[j] += x . (row j), row j (j < 8) being y0 of
// lane g0 + j and row 8 + j its y1, handed round by subgroupShuffle (columns
// in order, so each sum keeps its order); af_dot16_1: the same for one
// column (the head read as f32).
fn af_dot16_1(acc: array<f32, AF_K>, x: f32, y0: f32, y1: f32, g0: u32) -> array<f32, AF_K> {
    var a = acc;
    for (var jj = 0u; jj < AF_G; jj++) {
        a[jj] = fma(x, subgroupShuffle(y0, g0 + jj), a[jj]);
        a[AF_G + jj] = fma(x, subgroupShuffle(y1, g0 + jj), a[AF_G + jj]);
    }
    return a;
}
fn af_dot16_4(acc: array<f32, AF_K>, x: vec4<f32>, y0: vec4<f32>, y1: vec4<f32>, g0: u32) -> array<f32, AF_K> {
    var a = acc;
    for (var e = 0u; e < 4u; e++) {
        for (var jj = 0u; jj < AF_G; jj++) {
            a[jj] = fma(x[e], subgroupShuffle(y0[e], g0 + jj), a[jj]);
            a[AF_G + jj] = fma(x[e], subgroupShuffle(y1[e], g0 + jj), a[AF_G + jj]);
        }
    }
    return a;
}

// af_mix16_4 (af_mix16_1): acc + sum over the block's 16 rows (as
// af_dot16_4's) of w[j] times row j, rows in order.
fn af_mix16_1(acc: f32, w: array<f32, AF_K>, y0: f32, y1: f32, g0: u32) -> f32 {
    var a = acc;
    for (var jj = 0u; jj < AF_G; jj++) { a = fma(w[jj], subgroupShuffle(y0, g0 + jj), a); }
    for (var jj = 0u; jj < AF_G; jj++) { a = fma(w[AF_G + jj], subgroupShuffle(y1, g0 + jj), a); }
    return a;
}
fn af_mix16_4(acc: vec4<f32>, w: array<f32, AF_K>, y0: vec4<f32>, y1: vec4<f32>, g0: u32) -> vec4<f32> {
    var a = acc;
    for (var jj = 0u; jj < AF_G; jj++) { a = fma(vec4<f32>(w[jj]), subgroupShuffle(y0, g0 + jj), a); }
    for (var jj = 0u; jj < AF_G; jj++) { a = fma(vec4<f32>(w[AF_G + jj]), subgroupShuffle(y1, g0 + jj), a); }
    return a;
}

// af_ds16: the score gradients of one query t over a block of 16 keys j0 ..
// (the dq twins): ds[j] = P (dP[j] - D) scale, P = exp(s[j] scale - lse) for
// keys j0 + j <= t, else 0.
fn af_ds16(s: array<f32, AF_K>, dp: array<f32, AF_K>, lse_t: f32, d_t: f32, scale: f32, j0: u32,
           t: u32) -> array<f32, AF_K> {
    var ds = array<f32, AF_K>();
    for (var jj = 0u; jj < AF_K; jj++) {
        let pij = exp(s[jj] * scale - lse_t);
        ds[jj] = select(0.0, pij * (dp[jj] - d_t) * scale, j0 + jj <= t);
    }
    return ds;
}

// af_key_pds16: one key j's probabilities and score gradients over a block
// of 16 queries i0 .. (the dkdv twins), rows as af_dot16_4's: query i0 + ii's
// lse and D are lane g0 + ii's lse0 and d0, query i0 + 8 + ii's its lse1 and
// d1. P is 0 for a query before the key or past T.
struct AfPds16 {
    pr: array<f32, AF_K>,
    ds: array<f32, AF_K>,
}
fn af_key_pds16(s: array<f32, AF_K>, dp: array<f32, AF_K>, lse0: f32, d0: f32, lse1: f32, d1: f32, g0: u32,
                i0: u32, j: u32, T: u32, scale: f32) -> AfPds16 {
    var r: AfPds16;
    for (var ii = 0u; ii < AF_G; ii++) {
        let lse_i0 = subgroupShuffle(lse0, g0 + ii);
        let d_i0 = subgroupShuffle(d0, g0 + ii);
        let lse_i1 = subgroupShuffle(lse1, g0 + ii);
        let d_i1 = subgroupShuffle(d1, g0 + ii);
        let i = i0 + ii;
        r.pr[ii] = select(0.0, exp(s[ii] * scale - lse_i0), j <= i && i < T);
        r.ds[ii] = r.pr[ii] * (dp[ii] - d_i0) * scale;
        let i1 = i + AF_G;
        r.pr[AF_G + ii] = select(0.0, exp(s[AF_G + ii] * scale - lse_i1), j <= i1 && i1 < T);
        r.ds[AF_G + ii] = r.pr[AF_G + ii] * (dp[AF_G + ii] - d_i1) * scale;
    }
    return r;
}

// The two rows lane sid & 7 of a group loads for the block from i0, i0 + gl
// and i0 + AF_G + gl, clamped to T - 1 (af_rows); as keys, where their k
// starts in qkv (af_krows; v at + CW).
fn af_rows(sid: u32, i0: u32) -> vec2<u32> {
    let gl = sid & (AF_G - 1u);
    return vec2<u32>(min(i0 + gl, p.T - 1u), min(i0 + AF_G + gl, p.T - 1u));
}
fn af_krows(ha: HeadAddr, sid: u32, j0: u32) -> vec2<u32> {
    let kl = af_rows(sid, j0);
    return vec2<u32>(ha.base + kl.x * ha.C3W + ha.CW, ha.base + kl.y * ha.C3W + ha.CW);
}

// The flat twins' lane builtins, their entry points' second parameter (the
// workgroup id, which loop bounds derive from, stays a parameter of its own:
// a struct holding a non-uniform value counts as non-uniform as a whole).
struct AfLid {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) sid: u32,
}

// The dq twins' query t: where its q and dout rows start, its lse and D.
struct AfQuery {
    qrow: u32,
    orow: u32,
    lse: f32,
    d: f32,
}
fn af_query(ha: HeadAddr, t: u32, lse_a: ptr<storage, array<f32>, read>,
            delta_a: ptr<storage, array<f32>, read>) -> AfQuery {
    var q: AfQuery;
    q.qrow = ha.base + t * ha.C3W;
    q.orow = ha.ob + t * ha.CW;
    q.lse = (*lse_a)[ha.lb + t];
    q.d = (*delta_a)[ha.lb + t];
    return q;
}

// The dkdv twins' queries of a block: af_rows', where their q and dout rows
// start, and their lse and D (lse_a, delta_a: the section's lse and delta).
struct AfQueries {
    qrow: vec2<u32>,
    orow: vec2<u32>,
    lse: vec2<f32>,
    d: vec2<f32>,
}
fn af_queries(ha: HeadAddr, sid: u32, i0: u32, lse_a: ptr<storage, array<f32>, read>,
              delta_a: ptr<storage, array<f32>, read>) -> AfQueries {
    let il = af_rows(sid, i0);
    var q: AfQueries;
    q.qrow = ha.base + il * ha.C3W;
    q.orow = ha.ob + il * ha.CW;
    q.lse = vec2<f32>((*lse_a)[ha.lb + il.x], (*lse_a)[ha.lb + il.y]);
    q.d = vec2<f32>((*delta_a)[ha.lb + il.x], (*delta_a)[ha.lb + il.y]);
    return q;
}

const_assert BQ * TPR == WG;
const_assert BK == BQ;
const_assert BK == TPR * KPT;
const_assert DC == TPR * CPT;
const_assert MAX_HS == NCH * DC;
const_assert NACC == NCH * CPT;
const_assert TILE == BQ * PAD;

// The column of head h (within the tile row) that thread lane owns as its
// u-th column of chunk ch: lanes side by side, so global writes coalesce.
fn attn_col(ch: u32, lane: u32, u: u32) -> u32 {
    return ch * DC + lane + u * TPR;
}

// A generic kernel's thread: (row, lane) of the BQ x TPR grid, the first row
// r0 of its block wid.x (queries; dkdv: keys) and its own row pos = r0 + row.
struct GenThread {
    row: u32,
    lane: u32,
    r0: u32,
    pos: u32,
}
fn gen_thread(wid: vec3<u32>, tid: u32) -> GenThread {
    let row = tid / TPR;
    return GenThread(row, tid % TPR, wid.x * BQ, wid.x * BQ + row);
}

// The generic kernels' two products through workgroup memory, forward and
// backward alike; the arrays come as pointers (a file preamble names no
// binding): qkv_a and dout_a the sections' qkv and dout (the forward passes
// qkv for both: it never reads dout), the tiles their tq, tk and ts. Both
// hold barriers: call them from uniform control flow, with constants.
// gen_dots: the scores of a block over the head, DC columns at a time: the
// rows q0 .. of q (or, dv, of dout) staged in tq_a and the rows k0 .. of k
// (or v) in tk_a; thread (row, lane) sums, for j < KPT, query row . key lane
// + j TPR (keyrows false: s) or query lane + j TPR . key row (keyrows true:
// s^T), columns in order.
fn gen_dots(tq_a: ptr<workgroup, array<f32, TILE>>, tk_a: ptr<workgroup, array<f32, TILE>>,
            qkv_a: ptr<storage, array<f32>, read>, dout_a: ptr<storage, array<f32>, read>, ga: HeadAddr,
            q0: u32, k0: u32, tid: u32, row: u32, lane: u32, dv: bool, keyrows: bool) -> array<f32, KPT> {
    let kcol = select(p.C, 2u * p.C, dv);  // k or v within a qkv row
    var s = array<f32, KPT>();
    for (var c0 = 0u; c0 < p.hs; c0 += DC) {
        for (var e = tid; e < BQ * DC; e += WG) {
            let r = e / DC;
            let c = e % DC;
            let col = c0 + c;
            var qv = 0.0;
            var kv = 0.0;
            if (col < p.hs && q0 + r < p.T) {
                if (dv) {
                    qv = (*dout_a)[ga.ob + (q0 + r) * p.C + col];
                } else {
                    qv = (*qkv_a)[ga.base + (q0 + r) * ga.C3W + col];
                }
            }
            if (col < p.hs && k0 + r < p.T) { kv = (*qkv_a)[ga.base + (k0 + r) * ga.C3W + kcol + col]; }
            (*tq_a)[r * PAD + c] = qv;
            (*tk_a)[r * PAD + c] = kv;
        }
        workgroupBarrier();
        for (var c = 0u; c < DC; c++) {
            if (keyrows) {
                let kv = (*tk_a)[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { s[j] += (*tq_a)[(lane + j * TPR) * PAD + c] * kv; }
            } else {
                let qv = (*tq_a)[row * PAD + c];
                for (var j = 0u; j < KPT; j++) { s[j] += qv * (*tk_a)[(lane + j * TPR) * PAD + c]; }
            }
        }
        workgroupBarrier();
    }
    return s;
}

// gen_mix: acc + W X, the weights W of thread row's row in ts_a (BK of them:
// P of the forward, dS of dq, P^T, dS^T of dkdv) and X the rows r0 .. r0 +
// BK - 1 of q (part 0), k (1), v (2) or dout (3), staged in tx_a chunk by
// chunk over the head; constant trip counts keep acc in registers. The
// barrier after the first load also publishes ts.
fn gen_mix(acc: array<f32, NACC>, tx_a: ptr<workgroup, array<f32, TILE>>, ts_a: ptr<workgroup, array<f32, TILE>>,
           qkv_a: ptr<storage, array<f32>, read>, dout_a: ptr<storage, array<f32>, read>, ga: HeadAddr,
           r0: u32, part: u32, tid: u32, row: u32, lane: u32) -> array<f32, NACC> {
    var a = acc;
    for (var ch = 0u; ch < NCH; ch++) {
        let c0 = ch * DC;
        if (c0 < p.hs) {
            for (var e = tid; e < BK * DC; e += WG) {
                let r = e / DC;
                let c = e % DC;
                var x = 0.0;
                if (c0 + c < p.hs && r0 + r < p.T) {
                    if (part == 3u) {
                        x = (*dout_a)[ga.ob + (r0 + r) * p.C + c0 + c];
                    } else {
                        x = (*qkv_a)[ga.base + (r0 + r) * ga.C3W + part * p.C + c0 + c];
                    }
                }
                (*tx_a)[r * PAD + c] = x;
            }
            workgroupBarrier();
            for (var j = 0u; j < BK; j++) {
                let w = (*ts_a)[row * PAD + j];
                for (var u = 0u; u < CPT; u++) { a[ch * CPT + u] += w * (*tx_a)[j * PAD + lane + u * TPR]; }
            }
            workgroupBarrier();
        }
    }
    return a;
}

// --- KERNEL: attention_forward ---
// --- KERNEL: attention_forward_48k = attention_forward with ATTN_48K=1 ---
// The fast forward (hs <= FHS, hs % 4 == 0). One workgroup per (query block
// of FB, head, batch), the longest rows (last block) first. Thread (ty, tx)
// owns queries q0 + 4ty + i (i < 4) and, per key block, the scores against
// keys k0 + 4tx + j and output columns 4tx + j. Q^T stays in tq; per key
// block K^T goes to tk, S = Q K^T in registers, the row max over the 16
// threads of a row (subgroup shuffles, or tk as scratch), then P^T replaces
// K^T in tk and O += P V.
// Prefetch: each thread's 4 vec4 of the next block's K are loaded into
// registers (kn) just before P V, where S is dead, and stored to tk at the top
// of the next block, so their latency hides behind P V. Only the diagonal
// block (kb == qb) holds keys past a query or past T: the others skip the mask.
// V through workgroup memory within 32 KiB: P V runs in two halves of 32
// keys; for each, tk holds P^T of those keys (rows 0 .. 31) and their V rows
// ([key][vec4 column], rows at TH + ...). V of the block is loaded into
// registers (vr) at the block's top, so its latency hides behind S = Q K^T.
// attention_forward_48k (ATTN_48K: 48 KiB, where the device has it): V has
// a third tile, tk[T2] ([key][vec4 column]), stored from vr after S, so
// P V runs over the whole block at once, P^T of all 64 keys in tk: 4 barriers
// a block instead of 6 (with subgroups of 16 or more; 2 more for the row max
// otherwise). Same order of summation (keys 0 .. 63 in order): the same results.
@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;  // (B, T, C)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;        // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;        // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: AttnParams;

var<workgroup> tq: array<vec4<f32>, FT>;  // Q^T [d][query]
// K^T [d][key]; then, per half block, P^T [key][query] (swizzled) | V [key][d]; or scratch.
// ATTN_48K: K^T, then P^T of the whole block; V [key][d] in the second tile, tk[T2].
var<workgroup> tk: array<array<vec4<f32>, FT>, T2 + 1u>;
const TH: u32 = 512u;  // vec4 of P^T (or V) for half a block: FB / 2 * FV
const_assert 2u * TH == FT;

// K of the key block from k1 as the tiles take it (element e = tid + u * WG:
// row e % FB, vec4 column e / FB); rows past T and columns past the head 0.
fn ff_krows(fa: HeadAddr, tid: u32, k1: u32) -> array<vec4<f32>, 4> {
    var kn = array<vec4<f32>, 4>();
    for (var u = 0u; u < 4u; u++) {
        let e = tid + u * WG;
        let r = e % FB;
        let j = e / FB;
        var v = vec4<f32>();
        if (k1 + r < p.T && j < fa.hsW) { v = qkv[fa.base + fa.CW + (k1 + r) * fa.C3W + j]; }
        kn[u] = v;
    }
    return kn;
}

@compute @workgroup_size(WG)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
                     @builtin(subgroup_size) sg_size: u32) {
    let qb = (p.T + FB - 1u) / FB - 1u - wid.x;
    let ty = tid / FV;
    let tx = tid % FV;
    let fa = head_addr(wid, 4u, p.hs / 4u);
    let q0 = qb * FB;
    // Element e = tid + u * WG of a tile is row e % FB (rows fastest: the
    // transposed stores do not conflict), vec4 column e / FB.
    var kn = ff_krows(fa, tid, 0u);  // K of the next key block (block 0 first)
    for (var e = tid; e < FT; e += WG) {
        let r = e % FB;
        let j = e / FB;
        var v = vec4<f32>();
        if (q0 + r < p.T && j < fa.hsW) { v = qkv[fa.base + (q0 + r) * fa.C3W + j]; }
        ft_put(&tq, e, false, v);
    }

    var m = vec4<f32>(NEG_INF);        // running max of rows 4ty + i
    var l = vec4<f32>();               // this thread's part of the running sums (its keys)
    var acc = array<vec4<f32>, 4>();   // out rows 4ty + i, columns 4tx .. 4tx + 3
    let qpos = vec4<u32>(q0 + 4u * ty) + vec4<u32>(0u, 1u, 2u, 3u);
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * FB;
        let diag = kb == qb;
        for (var u = 0u; u < 4u; u++) { ft_put(&tk[0], tid + u * WG, false, kn[u]); }
        // V of this block, element e = tid + u * WG: row e / FV, vec4 column e % FV
        // (u < 2: the first half of the keys; ATTN_48K: stored to tk[T2][e] after S, that
        // tile last read before the last block's end barrier).
        var vr = array<vec4<f32>, 4>();
        for (var u = 0u; u < 4u; u++) {
            let e = tid + u * WG;
            let r = e / FV;
            let j = e % FV;
            var v = vec4<f32>();
            if (k0 + r < p.T && j < fa.hsW) { v = qkv[fa.base + 2u * fa.CW + (k0 + r) * fa.C3W + j]; }
            vr[u] = v;
        }
        workgroupBarrier();
        var s = array<vec4<f32>, 4>();
        for (var d = 0u; d < FHS; d++) { s = fma4x4(s, tq[d * FV + ty], tk[0][d * FV + tx]); }
        let key = vec4<u32>(k0 + 4u * tx) + vec4<u32>(0u, 1u, 2u, 3u);
        var bm = vec4<f32>(NEG_INF);
        if (diag) {
            for (var i = 0u; i < 4u; i++) {
                let ok = (key <= vec4<u32>(qpos[i])) & (key < vec4<u32>(p.T));
                s[i] = select(vec4<f32>(NEG_INF), s[i] * p.scale, ok);
                bm[i] = max(max(s[i].x, s[i].y), max(s[i].z, s[i].w));
            }
        } else {
            for (var i = 0u; i < 4u; i++) {
                s[i] = s[i] * p.scale;
                bm[i] = max(max(s[i].x, s[i].y), max(s[i].z, s[i].w));
            }
        }
        // Row max over the 16 threads tx of row group ty (lanes 16ty .. 16ty + 15).
        if (sg_size >= FV) {
            bm = max(bm, subgroupShuffleXor(bm, 1u));
            bm = max(bm, subgroupShuffleXor(bm, 2u));
            bm = max(bm, subgroupShuffleXor(bm, 4u));
            bm = max(bm, subgroupShuffleXor(bm, 8u));
        } else {
            workgroupBarrier();  // K^T is read
            tk[0][tid] = bm;
            workgroupBarrier();
            for (var t = 0u; t < FV; t++) { bm = max(bm, tk[0][ty * FV + t]); }
        }
        // Every row has a key in the block (k0 <= q0 < T), so bm is finite.
        let m_new = max(m, bm);
        let alpha = exp(m - m_new);  // rescales what was summed under the old max
        m = m_new;
        var pr = array<vec4<f32>, 4>();
        for (var i = 0u; i < 4u; i++) {
            var e4 = exp(s[i] - vec4<f32>(m_new[i]));
            if (diag) {
                let ok = (key <= vec4<u32>(qpos[i])) & (key < vec4<u32>(p.T));
                e4 = select(vec4<f32>(), e4, ok);
            }
            pr[i] = e4;
            l[i] = l[i] * alpha[i] + ((pr[i].x + pr[i].y) + (pr[i].z + pr[i].w));
            acc[i] *= alpha[i];
        }
        // The next block's K: in flight during P V.
        if (!diag) { kn = ff_krows(fa, tid, k0 + FB); }
        if (ATTN_48K) {
            // P V over the whole block: V in its own tile.
            for (var u = 0u; u < 4u; u++) { tk[T2][tid + u * WG] = vr[u]; }
            workgroupBarrier();  // K^T or the scratch is read
            // P^T [key][query]: row key holds queries 4ty'.. at slot ty' ^ (key / 4), which
            // spreads the 16 threads tx of one store over the banks.
            for (var j = 0u; j < 4u; j++) {
                tk[0][(4u * tx + j) * FV + (ty ^ tx)] = vec4<f32>(pr[0][j], pr[1][j], pr[2][j], pr[3][j]);
            }
            workgroupBarrier();
            for (var k = 0u; k < FB; k++) {  // keys past T: V = 0 and P = 0
                acc = fma4x4(acc, tk[0][k * FV + (ty ^ (k / 4u))], tk[T2][k * FV + tx]);
            }
        } else {
            // P V in two halves of 32 keys (threads tx < 8 own the first half's P).
            for (var hf = 0u; hf < 2u; hf++) {
                workgroupBarrier();  // K^T, the scratch or the last half is read
                // P^T [key][query], swizzled as above.
                if (tx / 8u == hf) {
                    for (var j = 0u; j < 4u; j++) {
                        tk[0][(4u * tx + j - 32u * hf) * FV + (ty ^ tx)] =
                            vec4<f32>(pr[0][j], pr[1][j], pr[2][j], pr[3][j]);
                    }
                }
                tk[0][TH + tid] = vr[2u * hf];
                tk[0][TH + WG + tid] = vr[2u * hf + 1u];
                workgroupBarrier();
                for (var k = 0u; k < FB / 2u; k++) {  // keys past T: V = 0 and P = 0
                    acc = fma4x4(acc, tk[0][k * FV + (ty ^ ((k + 32u * hf) / 4u))], tk[0][TH + k * FV + tx]);
                }
            }
        }
        workgroupBarrier();  // P^T and V are read before the next K^T (and V)
    }
    // The row sums: the 16 parts in tx order.
    tk[0][tid] = l;
    workgroupBarrier();
    var lsum = vec4<f32>();
    for (var t = 0u; t < FV; t++) { lsum += tk[0][ty * FV + t]; }
    for (var i = 0u; i < 4u; i++) {
        let t = qpos[i];
        if (t < p.T) {
            if (tx < fa.hsW) { out[fa.ob + t * fa.CW + tx] = acc[i] / lsum[i]; }
            if (tx == 0u) { lse[fa.lb + t] = m[i] + log(lsum[i]); }
        }
    }
}

// --- KERNEL: attention_forward_flath in attention_forward ---
// --- KERNEL: attention_forward_flath_hs16 = attention_forward_flath with AF_HS4=4 ---
// --- KERNEL: attention_forward_flath_hs24 = attention_forward_flath with AF_HS4=6 ---
// --- KERNEL: attention_forward_flath_hs32 = attention_forward_flath with AF_HS4=8 ---
// --- KERNEL: attention_forward_flath_hs48 = attention_forward_flath with AF_HS4=12 ---
// --- KERNEL: attention_forward_flath_hs64 = attention_forward_flath with AF_HS4=16 ---
// attention_forward_flat4 with the head size fixed (AF_HS4) and one pass over
// the keys with an online softmax, as the GPU kernels: the query (scaled) and
// the running output are private arrays, rescaled by exp(m - m_new) a block;
// each block reads its 16 keys' k and v rows once. The output is written
// once, divided by the sum.
@compute @workgroup_size(AF_WG)
fn attention_forward_flath(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let q0 = wid.x * AF_WG;
    let t = q0 + ln.lid;
    let ha = head_addr(wid, 4u, AF_HS4);  // in vec4s
    let qrow = ha.base + min(t, p.T - 1u) * ha.C3W;
    let g0 = ln.sid & ~(AF_G - 1u);
    let kend = min(q0 + AF_WG, p.T);
    var q: array<vec4<f32>, AF_MAX_HS4>;
    var o: array<vec4<f32>, AF_MAX_HS4>;
    for (var c = 0u; c < AF_HS4; c++) {
        q[c] = qkv[qrow + c] * p.scale;
        o[c] = vec4<f32>();
    }
    var m = NEG_INF;
    var l = 0.0;
    for (var j0 = 0u; j0 < kend; j0 += AF_K) {
        let kr = af_krows(ha, ln.sid, j0);
        var s = array<f32, AF_K>();
        for (var c = 0u; c < AF_HS4; c++) {
            let qv = q[c];
            let kv0 = qkv[kr.x + c];
            let kv1 = qkv[kr.y + c];
            s = af_dot16_4(s, qv, kv0, kv1, g0);
        }
        var bmax = NEG_INF;
        for (var jj = 0u; jj < AF_K; jj++) {
            if (j0 + jj <= t) { bmax = max(bmax, s[jj]); }
        }
        let m_new = max(m, bmax);
        let alpha = exp(m - m_new);
        var pr = array<f32, AF_K>();
        var bsum = 0.0;
        for (var jj = 0u; jj < AF_K; jj++) {
            pr[jj] = select(0.0, exp(s[jj] - m_new), j0 + jj <= t);
            bsum += pr[jj];
        }
        l = l * alpha + bsum;
        m = m_new;
        for (var c = 0u; c < AF_HS4; c++) {
            let vv0 = qkv[kr.x + ha.CW + c];
            let vv1 = qkv[kr.y + ha.CW + c];
            o[c] = af_mix16_4(o[c] * alpha, pr, vv0, vv1, g0);
        }
    }
    if (t < p.T) {
        let orow = ha.ob + t * ha.CW;
        let inv = 1.0 / l;
        for (var c = 0u; c < AF_HS4; c++) { out[orow + c] = o[c] * inv; }
        lse[ha.lb + t] = m + log(l);
    }
}

// --- KERNEL: attention_backward_preprocess ---
// D[b, h, t] = dout[b, t, head h] . out[b, t, head h]: one thread per row,
// heads fastest (thread i reads floats i*hs .. (i+1)*hs - 1 of dout and
// out: neighbours read neighbouring rows), summed in column order.
@group(0) @binding(0) var<storage, read_write> delta: array<f32>;  // D (B, NH, T)
@group(0) @binding(1) var<storage, read> dout: array<f32>;         // (B, T, C)
@group(0) @binding(2) var<storage, read> out: array<f32>;          // (B, T, C)
@group(0) @binding(3) var<uniform> p: AttnParams;

@compute @workgroup_size(WG)
fn attention_backward_preprocess(@builtin(global_invocation_id) gid: vec3<u32>,
                                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat_id(gid, nwg);  // (b * T + t) * NH + h
    if (i >= p.B * p.T * p.NH) { return; }
    let h = i % p.NH;
    let bt = i / p.NH;
    let t = bt % p.T;
    let b = bt / p.T;
    let base = i * p.hs;  // (b * T + t) * C + h * hs
    var sum = 0.0;
    for (var c = 0u; c < p.hs; c++) { sum += dout[base + c] * out[base + c]; }
    delta[(b * p.NH + h) * p.T + t] = sum;
}

// --- KERNEL: attention_backward_dq ---
// --- KERNEL: attention_backward_dq_48k = attention_backward_dq with ATTN_48K=1 ---
// The fast dq (hs <= FHS, hs % 4 == 0). One workgroup per (query block,
// head, batch), longest rows first; thread (ty, tx) owns queries
// q0 + 4ty + i, keys k0 + 4tx + j of each block and dq columns 4tx + j.
// Per key block: K^T to tk, V^T to tv; S = Q K^T and dP = dout V^T with Q
// and dout rows read from global memory (4 rows x 4 columns a step);
// dS = P * (dP - D) with P = exp(s - lse); dS^T replaces V^T in tv; then
// dq += dS K with K from K^T in tk. Writes the q part of dqkv.
// Prefetch: the next block's K and V (4 + 4 vec4 a thread) are loaded into
// registers before dq += dS K, where S and dP are dead, and stored at the top
// of the next block. Only the diagonal block needs the causal mask.
// dS K from workgroup memory: K^T is stored with slot (key / 4) ^ (d / 4) of
// line d, so dq += dS K reads K[4kg .. 4kg + 3][4tx + c] as tk line 4tx + c,
// slot kg ^ tx (4 loads for 4 keys, no conflict within 8 lanes) instead of a
// global K row per key.
// attention_backward_dq_48k (ATTN_48K: 48 KiB, where the device has it):
// Q^T stays in a third tile, tk[T2], for the whole workgroup (stored once,
// as in the forward), so S = Q K^T reads it instead of Q rows from global
// memory; only dout rows still come from global (64 loads a block, not 192).
@group(0) @binding(0) var<storage, read_write> dqkv: array<vec4<f32>>;  // (B, T, 3C): dq writes the q columns, dkdv the k and v ones
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<vec4<f32>>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;               // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;             // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

// K^T [d][key], slot (key / 4) ^ (d / 4); ATTN_48K: then Q^T [d][query] in tk[T2], for the whole workgroup
var<workgroup> tk: array<array<vec4<f32>, FT>, T2 + 1u>;
var<workgroup> tv: array<vec4<f32>, FT>;  // V^T [d][key], then dS^T [key][query] (swizzled)

// The fast backward's operand rows (vec4 column j): part 0 q, 1 k, 2 v (qkv), 3 dout.
fn fb_ld(fa: HeadAddr, part: u32, row: u32, j: u32) -> vec4<f32> {
    if (part == 3u) { return dout[fa.ob + row * fa.CW + j]; }
    return qkv[fa.base + part * fa.CW + row * fa.C3W + j];
}

// Two parts (pa, pb) of a block's rows r0 .. r0 + FB - 1 as the tiles take
// them (element e = tid + u * WG: row e % FB, vec4 column e / FB), or of rows
// rows[i] at one vec4 column (fb_rows4); 0 past T and past the head.
struct FbRows {
    a: array<vec4<f32>, 4>,
    b: array<vec4<f32>, 4>,
}
fn fb_rows(fa: HeadAddr, tid: u32, r0: u32, pa: u32, pb: u32) -> FbRows {
    var n: FbRows;
    for (var u = 0u; u < 4u; u++) {
        let e = tid + u * WG;
        let r = e % FB;
        let j = e / FB;
        var av = vec4<f32>();
        var bv = vec4<f32>();
        if (r0 + r < p.T && j < fa.hsW) {
            av = fb_ld(fa, pa, r0 + r, j);
            bv = fb_ld(fa, pb, r0 + r, j);
        }
        n.a[u] = av;
        n.b[u] = bv;
    }
    return n;
}
fn fb_rows4(fa: HeadAddr, rows: vec4<u32>, j: u32, live: bool, pa: u32, pb: u32) -> FbRows {
    var n: FbRows;
    for (var i = 0u; i < 4u; i++) {
        n.a[i] = select(vec4<f32>(), fb_ld(fa, pa, rows[i], j), live);
        n.b[i] = select(vec4<f32>(), fb_ld(fa, pb, rows[i], j), live);
    }
    return n;
}

// The lse and D of queries q1 + 4 tx + i (i < 4; rows past T: the last one's).
struct FbStats {
    lse: vec4<f32>,
    d: vec4<f32>,
}
fn fb_stats(fa: HeadAddr, q1: u32, tx: u32) -> FbStats {
    let qr = min(vec4<u32>(q1 + 4u * tx) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.T - 1u));
    let lse_n = vec4<f32>(lse[fa.lb + qr.x], lse[fa.lb + qr.y], lse[fa.lb + qr.z], lse[fa.lb + qr.w]);
    let d_n = vec4<f32>(delta[fa.lb + qr.x], delta[fa.lb + qr.y], delta[fa.lb + qr.z], delta[fa.lb + qr.w]);
    return FbStats(lse_n, d_n);
}

@compute @workgroup_size(WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let qb = (p.T + FB - 1u) / FB - 1u - wid.x;
    let ty = tid / FV;
    let tx = tid % FV;
    let fa = head_addr(wid, 4u, p.hs / 4u);
    let q0 = qb * FB;
    let qpos = vec4<u32>(q0 + 4u * ty) + vec4<u32>(0u, 1u, 2u, 3u);
    let qrow = min(qpos, vec4<u32>(p.T - 1u));  // rows past T: read, never stored
    // Element e = tid + u * WG of a tile: row e % FB, vec4 column e / FB.
    var kvn = fb_rows(fa, tid, 0u, 1u, 2u);  // K and V of the next key block (block 0 first)
    if (ATTN_48K) {
        for (var e = tid; e < FT; e += WG) {
            let r = e % FB;
            let j = e / FB;
            var v = vec4<f32>();
            if (q0 + r < p.T && j < fa.hsW) { v = qkv[fa.base + (q0 + r) * fa.C3W + j]; }
            ft_put(&tk[T2], e, false, v);
        }
    }
    var lse_r = vec4<f32>();
    var d_r = vec4<f32>();
    for (var i = 0u; i < 4u; i++) {
        lse_r[i] = lse[fa.lb + qrow[i]];
        d_r[i] = delta[fa.lb + qrow[i]];
    }
    var acc = array<vec4<f32>, 4>();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * FB;
        let diag = kb == qb;
        for (var u = 0u; u < 4u; u++) {
            let e = tid + u * WG;
            ft_put(&tk[0], e, true, kvn.a[u]);
            ft_put(&tv, e, false, kvn.b[u]);
        }
        workgroupBarrier();
        // s = q . k as in the forward (same products, same order), dp = dout . v.
        var s = array<vec4<f32>, 4>();
        var dp = array<vec4<f32>, 4>();
        for (var j = 0u; j < FV; j++) {
            let live = j < fa.hsW;
            let jj = min(j, fa.hsW - 1u);
            if (ATTN_48K) {  // Q from Q^T in tk[T2]
                var oa = array<vec4<f32>, 4>();
                for (var i = 0u; i < 4u; i++) { oa[i] = select(vec4<f32>(), fb_ld(fa, 3u, qrow[i], jj), live); }
                for (var c = 0u; c < 4u; c++) {
                    let qa = tk[T2][(4u * j + c) * FV + ty];
                    let kv = tk[0][(4u * j + c) * FV + (tx ^ j)];
                    let vv = tv[(4u * j + c) * FV + tx];
                    for (var i = 0u; i < 4u; i++) {
                        s[i] = fma(vec4<f32>(qa[i]), kv, s[i]);
                        dp[i] = fma(vec4<f32>(oa[i][c]), vv, dp[i]);
                    }
                }
            } else {  // Q rows from global memory, like dout's
                let qo = fb_rows4(fa, qrow, jj, live, 0u, 3u);
                for (var c = 0u; c < 4u; c++) {
                    let kv = tk[0][(4u * j + c) * FV + (tx ^ j)];
                    let vv = tv[(4u * j + c) * FV + tx];
                    for (var i = 0u; i < 4u; i++) {
                        s[i] = fma(vec4<f32>(qo.a[i][c]), kv, s[i]);
                        dp[i] = fma(vec4<f32>(qo.b[i][c]), vv, dp[i]);
                    }
                }
            }
        }
        let key = vec4<u32>(k0 + 4u * tx) + vec4<u32>(0u, 1u, 2u, 3u);
        var ds = array<vec4<f32>, 4>();
        for (var i = 0u; i < 4u; i++) {
            var pr = exp(s[i] * p.scale - vec4<f32>(lse_r[i]));
            if (diag) {
                let ok = (key <= vec4<u32>(qpos[i])) & (key < vec4<u32>(p.T));
                pr = select(vec4<f32>(), pr, ok);
            }
            ds[i] = pr * (dp[i] - vec4<f32>(d_r[i]));
        }
        workgroupBarrier();  // V^T is read
        for (var j = 0u; j < 4u; j++) {
            tv[(4u * tx + j) * FV + (ty ^ tx)] = vec4<f32>(ds[0][j], ds[1][j], ds[2][j], ds[3][j]);
        }
        // The next block's K and V: in flight during dS K.
        if (!diag) { kvn = fb_rows(fa, tid, k0 + FB, 1u, 2u); }
        workgroupBarrier();
        // Keys past T: K = 0 and dS = 0. Columns past hs: K = 0.
        for (var kg = 0u; kg < FV; kg++) {
            var kt = array<vec4<f32>, 4>();  // kt[c][kk] = K[k0 + 4kg + kk][4tx + c]
            for (var c = 0u; c < 4u; c++) { kt[c] = tk[0][(4u * tx + c) * FV + (kg ^ tx)]; }
            for (var kk = 0u; kk < 4u; kk++) {
                acc = fma4x4(acc, tv[(4u * kg + kk) * FV + (ty ^ kg)], col4(kt, kk));
            }
        }
        workgroupBarrier();  // dS^T and K^T are read before the next block
    }
    if (tx < fa.hsW) {
        for (var i = 0u; i < 4u; i++) {
            if (qpos[i] < p.T) { dqkv[fa.base + qpos[i] * fa.C3W + tx] = p.scale * acc[i]; }
        }
    }
}

// --- KERNEL: attention_backward_dkdv in attention_backward_dq ---
// --- KERNEL: attention_backward_dkdv_48k = attention_backward_dkdv with ATTN_48K=1 ---
// The fast dk, dv (hs <= FHS, hs % 4 == 0). One workgroup per (key block,
// head, batch); thread (ty, tx) owns keys k0 + 4ty + i, queries q0 + 4tx + j
// of each query block and dk, dv columns 4tx + j. Query blocks from the
// diagonal on: Q^T to tq, dout^T to to; S^T = K Q^T and dP^T = V dout^T with
// K and V rows from global memory; P (as [query][key]) replaces Q^T and
// dv += P^T dout reads dout from dout^T in workgroup memory; then dS replaces P
// and dk += dS^T Q reads Q rows from global memory.
// Writes the k and v parts of dqkv.
// Prefetch: the next query block's Q and dout (4 + 4 vec4 a thread) and its
// lse and D are loaded into registers before the dv, dk products, where S
// and dP are dead, and stored at the top of the next block. Only the diagonal
// block and the last one (rows past T) need the mask.
// dout^T is stored with slot (query / 4) ^ (d / 4) of line d, so dv += P^T dout
// reads dout[4qg .. 4qg + 3][4tx + c] as tdo line 4tx + c, slot qg ^ tx.
// attention_backward_dkdv_48k (ATTN_48K: 48 KiB, where the device has it): P,
// then dS, go to a third tile, tq[T2], so Q^T stays: stored swizzled like
// dout^T, dk += dS^T Q reads it from workgroup memory as dv's product reads
// dout (the dv and dk products read only workgroup memory), and P needs no
// barrier before it is stored.
// Q^T [d][query], then P, then dS [query][key] (swizzled); ATTN_48K: Q^T
// swizzled like dout^T, and P, then dS, in the second tile, tq[T2]
var<workgroup> tq: array<array<vec4<f32>, FT>, T2 + 1u>;
var<workgroup> tdo: array<vec4<f32>, FT>;  // dout^T [d][query], slot (query / 4) ^ (d / 4)

@compute @workgroup_size(WG)
fn attention_backward_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let kb = wid.x;  // the first key blocks meet the most queries: they start first
    let ty = tid / FV;
    let tx = tid % FV;
    let fa = head_addr(wid, 4u, p.hs / 4u);
    let k0 = kb * FB;
    let nqb = (p.T + FB - 1u) / FB;
    let jc = min(tx, fa.hsW - 1u);
    let kpos = vec4<u32>(k0 + 4u * ty) + vec4<u32>(0u, 1u, 2u, 3u);
    let krow = min(kpos, vec4<u32>(p.T - 1u));  // keys past T: read, never stored
    // Element e = tid + u * WG of a tile: row e % FB, vec4 column e / FB.
    // Q, dout, lse and D of the next query block (the diagonal one first).
    var qon = fb_rows(fa, tid, k0, 0u, 3u);
    var stn = fb_stats(fa, k0, tx);
    var dk = array<vec4<f32>, 4>();
    var dv = array<vec4<f32>, 4>();
    for (var qb = kb; qb < nqb; qb++) {
        let q0 = qb * FB;
        let edge = qb == kb || qb + 1u == nqb;  // keys past a query, or queries past T
        for (var u = 0u; u < 4u; u++) {
            let e = tid + u * WG;
            ft_put(&tq[0], e, ATTN_48K, qon.a[u]);
            ft_put(&tdo, e, true, qon.b[u]);
        }
        let qpos = vec4<u32>(q0 + 4u * tx) + vec4<u32>(0u, 1u, 2u, 3u);
        let st = stn;
        workgroupBarrier();
        // s^T = k . q: the forward's products in the forward's order; dp^T = v . dout.
        var s = array<vec4<f32>, 4>();
        var dp = array<vec4<f32>, 4>();
        for (var j = 0u; j < FV; j++) {
            let kv = fb_rows4(fa, krow, min(j, fa.hsW - 1u), j < fa.hsW, 1u, 2u);
            for (var c = 0u; c < 4u; c++) {
                let qv = tq[0][(4u * j + c) * FV + select(tx, tx ^ j, ATTN_48K)];
                let ov = tdo[(4u * j + c) * FV + (tx ^ j)];
                for (var i = 0u; i < 4u; i++) {
                    s[i] = fma(vec4<f32>(kv.a[i][c]), qv, s[i]);
                    dp[i] = fma(vec4<f32>(kv.b[i][c]), ov, dp[i]);
                }
            }
        }
        var pr = array<vec4<f32>, 4>();
        var ds = array<vec4<f32>, 4>();
        for (var i = 0u; i < 4u; i++) {
            var e4 = exp(s[i] * p.scale - st.lse);
            if (edge) {
                // kpos <= qpos < T also keeps keys past T out.
                let ok = (vec4<u32>(kpos[i]) <= qpos) & (qpos < vec4<u32>(p.T));
                e4 = select(vec4<f32>(), e4, ok);
            }
            pr[i] = e4;
            ds[i] = pr[i] * (dp[i] - st.d);
        }
        if (!ATTN_48K) {
            workgroupBarrier();  // Q^T is read (ATTN_48K: P's tile was last read before this block's top barrier)
        }
        for (var j = 0u; j < 4u; j++) {
            tq[T2][(4u * tx + j) * FV + (ty ^ tx)] = vec4<f32>(pr[0][j], pr[1][j], pr[2][j], pr[3][j]);
        }
        // The next query block: in flight during the dv, dk products.
        if (qb + 1u < nqb) {
            qon = fb_rows(fa, tid, q0 + FB, 0u, 3u);
            stn = fb_stats(fa, q0 + FB, tx);
        }
        workgroupBarrier();
        // dv += P^T dout; queries past T have P = 0 and dout = 0, columns past hs dout = 0.
        for (var qg = 0u; qg < FV; qg++) {
            var ot = array<vec4<f32>, 4>();  // ot[c][qq] = dout[q0 + 4qg + qq][4tx + c]
            for (var c = 0u; c < 4u; c++) { ot[c] = tdo[(4u * tx + c) * FV + (qg ^ tx)]; }
            for (var qq = 0u; qq < 4u; qq++) {
                dv = fma4x4(dv, tq[T2][(4u * qg + qq) * FV + (ty ^ qg)], col4(ot, qq));
            }
        }
        workgroupBarrier();  // P is read
        for (var j = 0u; j < 4u; j++) {
            tq[T2][(4u * tx + j) * FV + (ty ^ tx)] = vec4<f32>(ds[0][j], ds[1][j], ds[2][j], ds[3][j]);
        }
        workgroupBarrier();
        if (ATTN_48K) {
            // dk += dS^T Q; queries past T have dS = 0 and Q = 0, columns past hs Q = 0.
            for (var qg = 0u; qg < FV; qg++) {
                var qt = array<vec4<f32>, 4>();  // qt[c][qq] = Q[q0 + 4qg + qq][4tx + c]
                for (var c = 0u; c < 4u; c++) { qt[c] = tq[0][(4u * tx + c) * FV + (qg ^ tx)]; }
                for (var qq = 0u; qq < 4u; qq++) {
                    dk = fma4x4(dk, tq[T2][(4u * qg + qq) * FV + (ty ^ qg)], col4(qt, qq));
                }
            }
        } else {
            // dk += dS^T Q with Q rows from global memory.
            for (var q = 0u; q < FB; q++) {
                let dsv = tq[0][q * FV + (ty ^ (q / 4u))];
                let row = min(q0 + q, p.T - 1u);  // queries past T have dS = 0
                dk = fma4x4(dk, dsv, qkv[fa.base + row * fa.C3W + jc]);
            }
        }
        workgroupBarrier();  // dS, dout^T (and Q^T) are read before the next block
    }
    if (tx < fa.hsW) {
        for (var i = 0u; i < 4u; i++) {
            if (kpos[i] < p.T) {
                let o = fa.base + kpos[i] * fa.C3W + tx;
                dqkv[o + fa.CW] = p.scale * dk[i];
                dqkv[o + 2u * fa.CW] = dv[i];
            }
        }
    }
}

// --- KERNEL: attention_backward_dq_flath in attention_backward_dq ---
// --- KERNEL: attention_backward_dq_flath_hs16 = attention_backward_dq_flath with AF_HS4=4 ---
// --- KERNEL: attention_backward_dq_flath_hs24 = attention_backward_dq_flath with AF_HS4=6 ---
// --- KERNEL: attention_backward_dq_flath_hs32 = attention_backward_dq_flath with AF_HS4=8 ---
// --- KERNEL: attention_backward_dq_flath_hs48 = attention_backward_dq_flath with AF_HS4=12 ---
// --- KERNEL: attention_backward_dq_flath_hs64 = attention_backward_dq_flath with AF_HS4=16 ---
// attention_backward_dq_flat4 with the head size fixed (AF_HS4): the query,
// its dout row and its dq sums are private arrays, each block's k rows are
// kept from the score pass for the dq pass, and dq is written once.
@compute @workgroup_size(AF_WG)
fn attention_backward_dq_flath(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let q0 = wid.x * AF_WG;
    let t = q0 + ln.lid;
    let tc = min(t, p.T - 1u);
    let ha = head_addr(wid, 4u, AF_HS4);  // in vec4s
    let qt = af_query(ha, tc, &lse, &delta);  // this query's rows, lse and D
    let g0 = ln.sid & ~(AF_G - 1u);
    let kend = min(q0 + AF_WG, p.T);
    var q: array<vec4<f32>, AF_MAX_HS4>;
    var o: array<vec4<f32>, AF_MAX_HS4>;
    var dq: array<vec4<f32>, AF_MAX_HS4>;
    var k0: array<vec4<f32>, AF_MAX_HS4>;  // the block's k rows, lane gl's and 8 + gl's
    var k1: array<vec4<f32>, AF_MAX_HS4>;
    for (var c = 0u; c < AF_HS4; c++) {
        q[c] = qkv[qt.qrow + c];
        o[c] = dout[qt.orow + c];
        dq[c] = vec4<f32>();
    }
    for (var j0 = 0u; j0 < kend; j0 += AF_K) {
        let kr = af_krows(ha, ln.sid, j0);  // keys j0 + gl, j0 + 8 + gl; their v at + CW
        var s = array<f32, AF_K>();
        var dp = array<f32, AF_K>();
        for (var c = 0u; c < AF_HS4; c++) {
            let qv = q[c];
            let ov = o[c];
            let kv0 = qkv[kr.x + c];
            let vv0 = qkv[kr.x + ha.CW + c];
            let kv1 = qkv[kr.y + c];
            let vv1 = qkv[kr.y + ha.CW + c];
            k0[c] = kv0;
            k1[c] = kv1;
            s = af_dot16_4(s, qv, kv0, kv1, g0);
            dp = af_dot16_4(dp, ov, vv0, vv1, g0);
        }
        let ds = af_ds16(s, dp, qt.lse, qt.d, p.scale, j0, t);
        for (var c = 0u; c < AF_HS4; c++) {
            let kv0 = k0[c];
            let kv1 = k1[c];
            dq[c] = af_mix16_4(dq[c], ds, kv0, kv1, g0);
        }
    }
    if (t < p.T) {
        for (var c = 0u; c < AF_HS4; c++) { dqkv[qt.qrow + c] = dq[c]; }
    }
}

// --- KERNEL: attention_backward_dkdv_flath in attention_backward_dq ---
// --- KERNEL: attention_backward_dkdv_flath_hs16 = attention_backward_dkdv_flath with AF_HS4=4 ---
// --- KERNEL: attention_backward_dkdv_flath_hs24 = attention_backward_dkdv_flath with AF_HS4=6 ---
// --- KERNEL: attention_backward_dkdv_flath_hs32 = attention_backward_dkdv_flath with AF_HS4=8 ---
// --- KERNEL: attention_backward_dkdv_flath_hs48 = attention_backward_dkdv_flath with AF_HS4=12 ---
// --- KERNEL: attention_backward_dkdv_flath_hs64 = attention_backward_dkdv_flath with AF_HS4=16 ---
// attention_backward_dkdv_flat4 with the head size fixed (AF_HS4): the key's
// k and v rows and its dk, dv sums are private arrays, each block's q and
// dout rows are kept from the score pass for the sums, and dk, dv are
// written once.
@compute @workgroup_size(AF_WG)
fn attention_backward_dkdv_flath(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let k0 = wid.x * AF_WG;
    let j = k0 + ln.lid;
    let ha = head_addr(wid, 4u, AF_HS4);  // in vec4s
    let krow = ha.base + min(j, p.T - 1u) * ha.C3W + ha.CW;  // this key's k; its v at + CW
    let g0 = ln.sid & ~(AF_G - 1u);
    var kk: array<vec4<f32>, AF_MAX_HS4>;
    var vk: array<vec4<f32>, AF_MAX_HS4>;
    var dk: array<vec4<f32>, AF_MAX_HS4>;
    var dv: array<vec4<f32>, AF_MAX_HS4>;
    var qa0: array<vec4<f32>, AF_MAX_HS4>;  // the block's q and dout rows, lane gl's and 8 + gl's
    var qa1: array<vec4<f32>, AF_MAX_HS4>;
    var oa0: array<vec4<f32>, AF_MAX_HS4>;
    var oa1: array<vec4<f32>, AF_MAX_HS4>;
    for (var c = 0u; c < AF_HS4; c++) {
        kk[c] = qkv[krow + c];
        vk[c] = qkv[krow + ha.CW + c];
        dk[c] = vec4<f32>();
        dv[c] = vec4<f32>();
    }
    // AF_WG == AF_K: the workgroup's keys are one block, and its first query block starts at k0.
    for (var i0 = k0; i0 < p.T; i0 += AF_K) {
        let qs = af_queries(ha, ln.sid, i0, &lse, &delta);
        var s = array<f32, AF_K>();
        var dp = array<f32, AF_K>();
        for (var c = 0u; c < AF_HS4; c++) {
            let kv = kk[c];
            let vv = vk[c];
            let qv0 = qkv[qs.qrow.x + c];
            let ov0 = dout[qs.orow.x + c];
            let qv1 = qkv[qs.qrow.y + c];
            let ov1 = dout[qs.orow.y + c];
            qa0[c] = qv0;
            oa0[c] = ov0;
            qa1[c] = qv1;
            oa1[c] = ov1;
            s = af_dot16_4(s, kv, qv0, qv1, g0);
            dp = af_dot16_4(dp, vv, ov0, ov1, g0);
        }
        let pd = af_key_pds16(s, dp, qs.lse.x, qs.d.x, qs.lse.y, qs.d.y, g0, i0, j, p.T, p.scale);
        let pr = pd.pr;
        let ds = pd.ds;
        for (var c = 0u; c < AF_HS4; c++) {
            let ov0 = oa0[c];
            let qv0 = qa0[c];
            let ov1 = oa1[c];
            let qv1 = qa1[c];
            dv[c] = af_mix16_4(dv[c], pr, ov0, ov1, g0);
            dk[c] = af_mix16_4(dk[c], ds, qv0, qv1, g0);
        }
    }
    if (j < p.T) {
        for (var c = 0u; c < AF_HS4; c++) {
            dqkv[krow + c] = dk[c];
            dqkv[krow + ha.CW + c] = dv[c];
        }
    }
}

// --- KERNEL: attention_forward_generic ---
// One workgroup per (query block, head, batch). Thread (row, lane) owns query
// q0 + row: its scores against keys lane + j*TPR of each key block and its
// output columns attn_col(ch, lane, u).
@group(0) @binding(0) var<storage, read_write> out: array<f32>;  // (B, T, C)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;  // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<f32>;        // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: AttnParams;

var<workgroup> tq: array<f32, TILE>;  // Q chunk (BQ x DC)
var<workgroup> tk: array<f32, TILE>;  // K chunk, then V chunk (BK x DC)
var<workgroup> ts: array<f32, TILE>;  // scores, then probabilities (BQ x BK)

@compute @workgroup_size(WG)
fn attention_forward_generic(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let qb = wid.x;
    let th = gen_thread(wid, tid);  // this thread's query: th.pos
    let ga = head_addr(wid, 1u, p.hs);  // in floats

    var m = NEG_INF;  // running max of this query's scores
    var l = 0.0;      // running sum of exp(score - m)
    var acc = array<f32, NACC>();
    // Causal: key blocks after the diagonal one (kb == qb) are all masked.
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * BK;
        var s = gen_dots(&tq, &tk, &qkv, &qkv, ga, th.r0, k0, tid, th.row, th.lane, false, false);
        // Every processed row has a key (k0 <= th.pos, k0 < T), so the block max is finite.
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + th.lane + j * TPR;
            s[j] = select(NEG_INF, s[j] * p.scale, key <= th.pos && key < p.T);
            ts[th.row * PAD + th.lane + j * TPR] = s[j];
        }
        workgroupBarrier();
        var bmax = NEG_INF;
        for (var j = 0u; j < BK; j++) { bmax = max(bmax, ts[th.row * PAD + j]); }
        let m_new = max(m, bmax);
        workgroupBarrier();  // the row's scores are read before they become probabilities
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + th.lane + j * TPR;
            ts[th.row * PAD + th.lane + j * TPR] = select(0.0, exp(s[j] - m_new), key <= th.pos && key < p.T);
        }
        workgroupBarrier();
        var bsum = 0.0;
        for (var j = 0u; j < BK; j++) { bsum += ts[th.row * PAD + j]; }
        let alpha = exp(m - m_new);  // rescales what was summed under the old max
        l = l * alpha + bsum;
        m = m_new;
        for (var i = 0u; i < NACC; i++) { acc[i] *= alpha; }
        acc = gen_mix(acc, &tk, &ts, &qkv, &qkv, ga, k0, 2u, tid, th.row, th.lane);  // acc += P @ V
    }
    if (th.pos < p.T) {
        let orow = ga.ob + th.pos * p.C;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, th.lane, u);
                if (col < p.hs) { out[orow + col] = acc[ch * CPT + u] / l; }
            }
        }
        if (th.lane == 0u) { lse[ga.lb + th.pos] = m + log(l); }
    }
}

// --- KERNEL: attention_backward_dq_generic ---
// One workgroup per (query block, head, batch), thread (row, lane) as in the
// forward. Writes (overwrites) the q part of dqkv:
// dq = scale * sum_j dS_j k_j, dS = P * (dP - D), P = exp(s - lse), dP = dout . v.
@group(0) @binding(0) var<storage, read_write> dqkv: array<f32>;  // (B, T, 3C): dq writes the q columns, dkdv the k and v ones
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<f32>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;         // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;       // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

var<workgroup> tq: array<f32, TILE>;  // dq: Q chunk, then dout chunk (BQ x DC); dkdv: Q, dout, dout, Q chunks
var<workgroup> tk: array<f32, TILE>;  // dq: K, V, K chunks (BK x DC); dkdv: K chunk, then V chunk
var<workgroup> ts: array<f32, TILE>;  // dq: dS (BQ x BK); dkdv: P^T, then dS^T (BK x BQ)

@compute @workgroup_size(WG)
fn attention_backward_dq_generic(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let qb = wid.x;
    let th = gen_thread(wid, tid);  // this thread's query: th.pos
    let ga = head_addr(wid, 1u, p.hs);  // in floats
    let live = th.pos < p.T;
    var lse_i = 0.0;
    var d_i = 0.0;
    if (live) {
        lse_i = lse[ga.lb + th.pos];
        d_i = delta[ga.lb + th.pos];
    }

    var acc = array<f32, NACC>();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * BK;
        // s = q . k in the forward's order, so P stays <= 1 up to rounding; dP = dout . v.
        let s = gen_dots(&tq, &tk, &qkv, &dout, ga, th.r0, k0, tid, th.row, th.lane, false, false);
        let dp = gen_dots(&tq, &tk, &qkv, &dout, ga, th.r0, k0, tid, th.row, th.lane, true, false);
        for (var j = 0u; j < KPT; j++) {
            let key = k0 + th.lane + j * TPR;
            let pij = select(0.0, exp(s[j] * p.scale - lse_i), live && key <= th.pos && key < p.T);
            ts[th.row * PAD + th.lane + j * TPR] = pij * (dp[j] - d_i);
        }
        acc = gen_mix(acc, &tk, &ts, &qkv, &dout, ga, k0, 1u, tid, th.row, th.lane);  // acc += dS @ K
    }
    if (live) {
        let drow = ga.base + th.pos * ga.C3W;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, th.lane, u);
                if (col < p.hs) { dqkv[drow + col] = p.scale * acc[ch * CPT + u]; }
            }
        }
    }
}

// --- KERNEL: attention_backward_dkdv_generic in attention_backward_dq_generic ---
// One workgroup per (key block, head, batch). Thread (row, lane) owns key
// k0 + row: its scores against queries lane + j*TPR of each query block, and
// its dk, dv columns attn_col(ch, lane, u). Only query blocks >= the key block
// see these keys. Writes (overwrites) the k and v parts of dqkv:
// dv = sum_i P_i dout_i, dk = scale * sum_i dS_i q_i.
@compute @workgroup_size(WG)
fn attention_backward_dkdv_generic(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let kb = wid.x;
    let th = gen_thread(wid, tid);  // this thread's key: th.pos
    let ga = head_addr(wid, 1u, p.hs);  // in floats
    let nqb = (p.T + BQ - 1u) / BQ;

    var dk = array<f32, NACC>();
    var dv = array<f32, NACC>();
    for (var qb = kb; qb < nqb; qb++) {
        let q0 = qb * BQ;
        // s^T = k . q: the forward's products in the forward's order; dP^T = v . dout.
        let s = gen_dots(&tq, &tk, &qkv, &dout, ga, q0, th.r0, tid, th.row, th.lane, false, true);
        let dp = gen_dots(&tq, &tk, &qkv, &dout, ga, q0, th.r0, tid, th.row, th.lane, true, true);
        var pr = array<f32, KPT>();
        var ds = array<f32, KPT>();
        for (var j = 0u; j < KPT; j++) {
            let qpos = q0 + th.lane + j * TPR;
            var lse_j = 0.0;
            var d_j = 0.0;
            if (qpos < p.T) {
                lse_j = lse[ga.lb + qpos];
                d_j = delta[ga.lb + qpos];
            }
            // key th.pos <= qpos < T also keeps keys past T out.
            pr[j] = select(0.0, exp(s[j] * p.scale - lse_j), th.pos <= qpos && qpos < p.T);
            ds[j] = pr[j] * (dp[j] - d_j);
            ts[th.row * PAD + th.lane + j * TPR] = pr[j];
        }
        dv = gen_mix(dv, &tq, &ts, &qkv, &dout, ga, q0, 3u, tid, th.row, th.lane);  // dv += P^T @ dout
        for (var j = 0u; j < KPT; j++) { ts[th.row * PAD + th.lane + j * TPR] = ds[j]; }
        // dk += dS^T @ Q (scaled once at the end)
        dk = gen_mix(dk, &tq, &ts, &qkv, &dout, ga, q0, 0u, tid, th.row, th.lane);
    }
    if (th.pos < p.T) {
        let krow = ga.base + th.pos * ga.C3W + p.C;
        for (var ch = 0u; ch < NCH; ch++) {
            for (var u = 0u; u < CPT; u++) {
                let col = attn_col(ch, th.lane, u);
                if (col < p.hs) {
                    dqkv[krow + col] = p.scale * dk[ch * CPT + u];
                    dqkv[krow + p.C + col] = dv[ch * CPT + u];
                }
            }
        }
    }
}

// --- TEMPLATE: attention_forward_flatw ---
// --- KERNEL: attention_forward_flat = attention_forward_flatw with V=f32, W=1, N= ---
// --- KERNEL: attention_forward_flat4 = attention_forward_flatw with V=vec4<f32>, W=4, N=4 ---
// The CPU twin of attention_forward, as a template: the head is read {{W}}
// columns a step as {{V}} (attention_forward_flat: f32, any head size;
// attention_forward_flat4: vec4, head sizes that are multiples of 4, the host
// picks it then). Both add the same products in the same order. On llvmpipe
// a lane's vec4 read costs about 3x a scalar one (not 4x), and a value
// carried round a loop is blended with the loop's lane mask at every write
// (03_linear.md, "Flat8"), so the vec4 one reads and writes each score, and
// the running out, once per 4 columns.
// Invocation lid owns query t = q0 + lid. Keys come in blocks of AF_K = 2
// AF_G: lane gl of a group loads keys j0 + gl and j0 + AF_G + gl, and the
// group's 16 rows reach every lane by subgroupShuffle. Pass 1 finds the row's
// max m and sum l (online over blocks); pass 2 recomputes each block's
// scores, P = exp(score - lse), and adds P @ V of the block into out (the
// first block writes): out is this invocation's own row, so the running sum
// lives in global memory instead of registers, whatever the head size.
@group(0) @binding(0) var<storage, read_write> out: array<{{V}}>;  // (B, T, C)
@group(0) @binding(1) var<storage, read_write> lse: array<f32>;     // (B, NH, T)
@group(0) @binding(2) var<storage, read> qkv: array<{{V}}>;         // (B, T, 3C)
@group(0) @binding(3) var<uniform> p: AttnParams;

// Scaled scores of query row qrow against the keys that lanes g0 .. g0 + 7
// load from krow0 (keys 0..7 of the block) and krow1 (keys 8..15).
fn af_scores(qrow: u32, krow0: u32, krow1: u32, g0: u32) -> array<f32, AF_K> {
    var s = array<f32, AF_K>();
    for (var c = 0u; c < p.hs / {{W}}u; c++) {
        let qv = qkv[qrow + c];
        let kv0 = qkv[krow0 + c];
        let kv1 = qkv[krow1 + c];
        s = af_dot16_{{W}}(s, qv, kv0, kv1, g0);
    }
    for (var jj = 0u; jj < AF_K; jj++) { s[jj] *= p.scale; }
    return s;
}

@compute @workgroup_size(AF_WG)
fn attention_forward_flat{{N}}(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let q0 = wid.x * AF_WG;
    let t = q0 + ln.lid;
    let ha = head_addr(wid, {{W}}u, p.hs / {{W}}u);  // in {{V}}s
    let qrow = ha.base + min(t, p.T - 1u) * ha.C3W;
    let g0 = ln.sid & ~(AF_G - 1u);
    // Keys that some query of the workgroup sees: a uniform loop bound, so
    // every lane takes part in every shuffle; rows past T are clamped.
    let kend = min(q0 + AF_WG, p.T);
    var m = NEG_INF;
    var l = 0.0;
    for (var j0 = 0u; j0 < kend; j0 += AF_K) {
        let kr = af_krows(ha, ln.sid, j0);
        let s = af_scores(qrow, kr.x, kr.y, g0);
        var bmax = NEG_INF;
        for (var jj = 0u; jj < AF_K; jj++) {
            if (j0 + jj <= t) { bmax = max(bmax, s[jj]); }
        }
        let m_new = max(m, bmax);
        var bsum = 0.0;
        for (var jj = 0u; jj < AF_K; jj++) { bsum += select(0.0, exp(s[jj] - m_new), j0 + jj <= t); }
        l = l * exp(m - m_new) + bsum;
        m = m_new;
    }
    // Key 0 is in every row: l >= 1.
    let lse_t = m + log(l);
    let live = t < p.T;
    let orow = ha.ob + t * ha.CW;
    for (var j0 = 0u; j0 < kend; j0 += AF_K) {
        let kr = af_krows(ha, ln.sid, j0);
        let s = af_scores(qrow, kr.x, kr.y, g0);
        var pr = array<f32, AF_K>();
        for (var jj = 0u; jj < AF_K; jj++) { pr[jj] = select(0.0, exp(s[jj] - lse_t), j0 + jj <= t); }
        let add = live && j0 <= t;  // the block holds a key of this query
        for (var c = 0u; c < ha.hsW; c++) {
            let vv0 = qkv[kr.x + ha.CW + c];
            let vv1 = qkv[kr.y + ha.CW + c];
            let o = af_mix16_{{W}}({{V}}(), pr, vv0, vv1, g0);
            if (add) {
                if (j0 == 0u) { out[orow + c] = o; } else { out[orow + c] = out[orow + c] + o; }
            }
        }
    }
    if (live) { lse[ha.lb + t] = lse_t; }
}

// --- TEMPLATE: attention_backward_flatw ---
// --- KERNEL: attention_backward_dq_flat = attention_backward_flatw with V=f32, W=1, N= ---
// --- KERNEL: attention_backward_dkdv_flat = attention_backward_flatw with V=f32, W=1, N= ---
// --- KERNEL: attention_backward_dq_flat4 = attention_backward_flatw with V=vec4<f32>, W=4, N=4 ---
// --- KERNEL: attention_backward_dkdv_flat4 = attention_backward_flatw with V=vec4<f32>, W=4, N=4 ---
// The CPU twins of attention_backward_dq and attention_backward_dkdv, as a
// template whose two entry points each instance compiles one of: the head
// read {{W}} columns a step as {{V}} (as attention_forward_flatw).
@group(0) @binding(0) var<storage, read_write> dqkv: array<{{V}}>;  // (B, T, 3C): dq writes the q columns, dkdv the k and v ones
@group(0) @binding(1) var<storage, read> qkv: array<{{V}}>;         // (B, T, 3C)
@group(0) @binding(2) var<storage, read> dout: array<{{V}}>;        // (B, T, C)
@group(0) @binding(3) var<storage, read> lse: array<f32>;           // (B, NH, T)
@group(0) @binding(4) var<storage, read> delta: array<f32>;         // D (B, NH, T)
@group(0) @binding(5) var<uniform> p: AttnParams;

// Invocation lid owns query t, keys come in shuffled blocks of AF_K as in
// attention_forward_flatw. Per block: scores and dP = dout . v (one pass over
// the head), dS = P * (dP - D) * scale, then dq += dS @ K into the q columns
// of dqkv (the first block writes: dqkv is overwritten).
@compute @workgroup_size(AF_WG)
fn attention_backward_dq_flat{{N}}(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let q0 = wid.x * AF_WG;
    let t = q0 + ln.lid;
    let live = t < p.T;
    let tc = min(t, p.T - 1u);
    let ha = head_addr(wid, {{W}}u, p.hs / {{W}}u);  // in {{V}}s
    let qt = af_query(ha, tc, &lse, &delta);  // this query's rows, lse and D
    let g0 = ln.sid & ~(AF_G - 1u);
    let kend = min(q0 + AF_WG, p.T);
    for (var j0 = 0u; j0 < kend; j0 += AF_K) {
        let kr = af_krows(ha, ln.sid, j0);  // keys j0 + gl, j0 + 8 + gl; their v at + CW
        var s = array<f32, AF_K>();
        var dp = array<f32, AF_K>();
        for (var c = 0u; c < ha.hsW; c++) {
            let qv = qkv[qt.qrow + c];
            let ov = dout[qt.orow + c];
            let kv0 = qkv[kr.x + c];
            let vv0 = qkv[kr.x + ha.CW + c];
            let kv1 = qkv[kr.y + c];
            let vv1 = qkv[kr.y + ha.CW + c];
            s = af_dot16_{{W}}(s, qv, kv0, kv1, g0);
            dp = af_dot16_{{W}}(dp, ov, vv0, vv1, g0);
        }
        let ds = af_ds16(s, dp, qt.lse, qt.d, p.scale, j0, t);
        let add = live && j0 <= t;
        for (var c = 0u; c < ha.hsW; c++) {
            let kv0 = qkv[kr.x + c];
            let kv1 = qkv[kr.y + c];
            let a = af_mix16_{{W}}({{V}}(), ds, kv0, kv1, g0);
            if (add) {
                if (j0 == 0u) { dqkv[qt.qrow + c] = a; } else { dqkv[qt.qrow + c] = dqkv[qt.qrow + c] + a; }
            }
        }
    }
}

// Invocation lid owns key j = k0 + lid; queries come in shuffled blocks of
// AF_K (lane gl of a group loads queries i0 + gl and i0 + AF_G + gl) from the
// key's own block on (earlier queries do not see it). Per block: scores and
// dP^T, then dv += P^T @ dout and dk += dS^T @ Q into the k and v columns of
// dqkv; the block holding j itself writes first (dqkv is overwritten).
@compute @workgroup_size(AF_WG)
fn attention_backward_dkdv_flat{{N}}(@builtin(workgroup_id) wid: vec3<u32>, ln: AfLid) {
    let k0 = wid.x * AF_WG;
    let j = k0 + ln.lid;
    let live = j < p.T;
    let ha = head_addr(wid, {{W}}u, p.hs / {{W}}u);  // in {{V}}s
    let krow = ha.base + min(j, p.T - 1u) * ha.C3W + ha.CW;  // this key's k; its v at + CW
    let jb = j & ~(AF_K - 1u);                      // the query block that holds j
    let g0 = ln.sid & ~(AF_G - 1u);
    // k0 is a multiple of AF_K: the blocks start at the workgroup's own.
    for (var i0 = k0; i0 < p.T; i0 += AF_K) {
        let qs = af_queries(ha, ln.sid, i0, &lse, &delta);  // the queries this lane loads for the group
        var s = array<f32, AF_K>();
        var dp = array<f32, AF_K>();
        for (var c = 0u; c < ha.hsW; c++) {
            let kv = qkv[krow + c];
            let vv = qkv[krow + ha.CW + c];
            let qv0 = qkv[qs.qrow.x + c];
            let ov0 = dout[qs.orow.x + c];
            let qv1 = qkv[qs.qrow.y + c];
            let ov1 = dout[qs.orow.y + c];
            s = af_dot16_{{W}}(s, kv, qv0, qv1, g0);
            dp = af_dot16_{{W}}(dp, vv, ov0, ov1, g0);
        }
        let pd = af_key_pds16(s, dp, qs.lse.x, qs.d.x, qs.lse.y, qs.d.y, g0, i0, j, p.T, p.scale);
        let pr = pd.pr;
        let ds = pd.ds;
        let add = live && i0 >= jb;
        let first = i0 == jb;
        for (var c = 0u; c < ha.hsW; c++) {
            let ov0 = dout[qs.orow.x + c];
            let qv0 = qkv[qs.qrow.x + c];
            let ov1 = dout[qs.orow.y + c];
            let qv1 = qkv[qs.qrow.y + c];
            let dv = af_mix16_{{W}}({{V}}(), pr, ov0, ov1, g0);
            let dk = af_mix16_{{W}}({{V}}(), ds, qv0, qv1, g0);
            if (add) {
                let ki = krow + c;
                let vi = krow + ha.CW + c;
                if (first) {
                    dqkv[ki] = dk;
                    dqkv[vi] = dv;
                } else {
                    dqkv[ki] = dqkv[ki] + dk;
                    dqkv[vi] = dqkv[vi] + dv;
                }
            }
        }
    }
}
