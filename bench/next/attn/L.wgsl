// bench/next/attn/L.wgsl: the forward section of 04_attention_sgm.wgsl as
// first written in one pass (O kept in fragments, rescaled through tile_s
// only when a row's reference max moves). It failed test_attention's f16
// cases on the H200 and on an H100 (out wrong from the first element), also
// with the rescale forced every block (RESCALE_LAZY false, RESCALE_GAP 0)
// and with its rescale branch deleted: see docs/kernels/04_attention_sgm.md.
// bench/h200_next.sh --versions L swaps it into a copy of the kernel file,
// in place of the committed forward (same bindings).
// --- KERNEL: attention_sgm_forward ---
// forward: a row's reference max moves when a block's max exceeds it by
// RESCALE_GAP, and O is rescaled (through tile_s) only in blocks where some
// row's did. With RESCALE_LAZY false (and a gap of 0: the textbook online
// softmax) O goes through tile_s in every block after the first, and no
// flag is read: the fallback if the flag's uniform read misbehaves.
override RESCALE_GAP: f32 = 8.0;
override RESCALE_LAZY: bool = true;
var<workgroup> attn_flag: u32;  // some row's reference max moved this block

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

// Head h's part (0 q, 1 k, 2 v) of rows t0 .. t0 + RB - 1: this thread's share; zeros past T.
fn fetch(b: u32, t0: u32, part: u32, h: u32, lidx: u32) -> Raw16 {
    var r: Raw16;
    for (var i = 0u; i < LPT; i++) {
        let u = lidx + i * NT;
        let t = t0 + u / (HS / 8u);
        if (t < p.T) { r[i] = qkv[((b * p.T + t) * 3u * p.C + part * p.C + h * HS) / 8u + u % (HS / 8u)]; }
    }
    return r;
}

@compute @workgroup_size(NT)
fn attention_sgm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32,
                         @builtin(subgroup_id) sg: u32) {
    let qb = (p.T + RB - 1u) / RB - 1u - wid.x;  // the longest rows first
    let h = wid.y;
    let b = wid.z;
    let q0 = qb * RB;
    let r0 = (sg % (NSG / 2u)) * RS;            // this subgroup's rows
    let h0 = (sg / (NSG / 2u)) * HALF;          // and its half of the columns
    let row = lidx / TPR;                       // this thread's score row and columns
    let col0 = (lidx % TPR) * CPT;
    let q = q0 + row;

    put16(2u, fetch(b, q0, 0u, h, lidx), lidx);
    var ra = fetch(b, 0u, 1u, h, lidx);  // K and V of the first block
    var rb = fetch(b, 0u, 2u, h, lidx);
    if (lidx == 0u) { attn_flag = 0u; }  // workgroup memory may start uninitialised (disable_workgroup_init)
    workgroupBarrier();
    let qf0 = frag_p(r0, 0u);
    let qf1 = frag_p(r0, 16u);
    let qf2 = frag_p(r0, 32u);
    let qf3 = frag_p(r0, 48u);

    // One pass over the key blocks, the online softmax with a lazy reference:
    // P = exp(s - m) with m this row's reference max, l = the sum of P, O +=
    // P V in fragments. m moves only when a block's max exceeds it by more
    // than RESCALE_GAP (P stays under exp(RESCALE_GAP), far inside f16); then
    // l and the row of O are scaled by exp(m_old - m_new), O through tile_s
    // (a fragment cannot be scaled by row), for the whole workgroup at once.
    // Rows rarely need it after their first block (where O is still zero).
    var m = NEG_INF;
    var l = 0.0;
    var o0 = CT();
    var o1 = CT();
    var o2 = CT();
    var o3 = CT();
    for (var kb = 0u; kb <= qb; kb++) {
        let k0 = kb * RB;
        workgroupBarrier();
        put16(0u, ra, lidx);
        put16(1u, rb, lidx);
        workgroupBarrier();
        if (kb < qb) {
            ra = fetch(b, k0 + RB, 1u, h, lidx);
            rb = fetch(b, k0 + RB, 2u, h, lidx);
        }
        scores(qf0, qf1, qf2, qf3, false, r0, h0);
        workgroupBarrier();
        var bm = NEG_INF;
        for (var j = 0u; j < CPT; j++) {
            let key = k0 + col0 + j;
            if (key <= q && q < p.T) { bm = max(bm, tile_s[row * SS + col0 + j] * p.scale); }
        }
        bm = row_max(bm);
        var alpha = 1.0;  // this row's factor for l and O
        if (bm > m + RESCALE_GAP) {
            alpha = exp(m - bm);  // 0 on the first block (m = NEG_INF)
            l *= alpha;
            m = bm;
            if (kb > 0u) { attn_flag = 1u; }
        }
        var sum = 0.0;
        for (var j8 = 0u; j8 < CPT / 8u; j8++) {
            var e = array<f32, 8>();
            for (var i = 0u; i < 8u; i++) {
                let c = col0 + 8u * j8 + i;
                if (k0 + c <= q && q < p.T) { e[i] = exp(tile_s[row * SS + c] * p.scale - m); }
                sum += e[i];
            }
            tile_p[row * PV + col0 / 8u + j8] =
                pack8(vec4<f32>(e[0], e[1], e[2], e[3]), vec4<f32>(e[4], e[5], e[6], e[7]));
        }
        l += row_sum(sum);
        // P and the flag complete, every score read. (workgroupUniformLoad's
        // own barrier did not make P visible on the H200: its fragments read
        // the staged Q.)
        workgroupBarrier();
        var rescale = kb > 0u;
        if (RESCALE_LAZY) {
            let flag = workgroupUniformLoad(&attn_flag);
            rescale = rescale && flag != 0u;
        }
        if (rescale) {
            store4(r0, h0, o0, o1, o2, o3);
            workgroupBarrier();
            if (lidx == 0u) { attn_flag = 0u; }  // every thread has read it
            for (var j = 0u; j < CPT; j++) { tile_s[row * SS + col0 + j] *= alpha; }
            workgroupBarrier();
            o0 = subgroupMatrixLoad<CT, row_major>(&tile_s, r0 * SS + h0, SS);
            o1 = subgroupMatrixLoad<CT, row_major>(&tile_s, r0 * SS + h0 + 8u, SS);
            o2 = subgroupMatrixLoad<CT, row_major>(&tile_s, r0 * SS + h0 + 16u, SS);
            o3 = subgroupMatrixLoad<CT, row_major>(&tile_s, r0 * SS + h0 + 24u, SS);
        }
        for (var kk = 0u; kk < RB; kk += SGM_TK) {
            let pf = frag_p(r0, kk);
            o0 = subgroupMatrixMultiplyAccumulate(pf, frag_n(true, kk, h0), o0);
            o1 = subgroupMatrixMultiplyAccumulate(pf, frag_n(true, kk, h0 + 8u), o1);
            o2 = subgroupMatrixMultiplyAccumulate(pf, frag_n(true, kk, h0 + 16u), o2);
            o3 = subgroupMatrixMultiplyAccumulate(pf, frag_n(true, kk, h0 + 24u), o3);
        }
    }
    let lrow = m + log(l);

    // O / l through tile_s, so that rows past T are dropped and the writes are
    // whole rows (row-major: 8 values a thread; transposed: one d, two tokens).
    workgroupBarrier();
    store4(r0, h0, o0, o1, o2, o3);
    if (lidx % TPR == 0u) { tile_l[row] = 1.0 / l; }
    workgroupBarrier();
    for (var u = lidx; u < RB * HS / 8u; u += NT) {
        let r = u / (HS / 8u);
        let c = (u % (HS / 8u)) * 8u;
        if (q0 + r < p.T) {
            let x = vec4<f32>(tile_s[r * SS + c], tile_s[r * SS + c + 1u], tile_s[r * SS + c + 2u], tile_s[r * SS + c + 3u]);
            let y = vec4<f32>(tile_s[r * SS + c + 4u], tile_s[r * SS + c + 5u], tile_s[r * SS + c + 6u],
                              tile_s[r * SS + c + 7u]);
            out16[((b * p.T + q0 + r) * p.C + h * HS + c) / 8u] = pack8(x * tile_l[r], y * tile_l[r]);
        }
    }
    let bt = p.B * p.T;
    for (var u = lidx; u < HS * RB / 2u; u += NT) {
        let d = u / (RB / 2u);
        let r = (u % (RB / 2u)) * 2u;  // T is even, so both tokens of a pair are inside or neither
        if (q0 + r < p.T) {
            let v = vec2<f32>(tile_s[r * SS + d] * tile_l[r], tile_s[(r + 1u) * SS + d] * tile_l[r + 1u]);
            out16_t[((h * HS + d) * bt + b * p.T + q0 + r) / 2u] = pack2x16float(v);
        }
    }
    if (lidx % TPR == 0u && q < p.T) { lse[(b * p.NH + h) * p.T + q] = lrow; }
}

