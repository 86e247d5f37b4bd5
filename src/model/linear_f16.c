// linear_f16.c: the f16 matmuls' dispatches (see linear_f16.h).
#include "model/linear_f16.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include "model/linear.h"  // wgpt_linear_reduce_parts
#include "model/precision.h"  // wgpt_transpose_f16

#define SGM_BM 128u         // BM, BN, BK of 03_linear_sgm.wgsl: the output block and
#define SGM_BN 128u         // the k a stage (splits keep whole stages) of matmul_sgm
#define SGM_BK 64u
#define SGM_WIDE_BN 256u    // BN and BK of matmul_sgm_wide (its variant marker)
#define SGM_WIDE_BK 32u
#define SGM_WIDE_SGS 16u    // its subgroups a workgroup (matmul_sgm: 8)
// Workgroup memory of matmul_sgm (the wide block's is 35,328 bytes); with
// less, the _32k twins run (stages of 32 and 16: 27,136 and 26,880 bytes; the
// wide one's 16 only where the fragment's K divides it).
#define SGM_STORAGE 35840u
#define SGM_WIDE_32K_BK 16u
#define SGM_32K_BK 32u
// A wide block's time over a stage of k, in sixths of a 128 x 128 block's:
// 11 (1.83x for twice the outputs), from 4096^3 (0.606 against 0.662 ms) and
// the logits' forward (1.428 against 1.541) on the H200.
#define SGM_WIDE_COST 11u
#define SGM_BASE_COST 6u
#define SGM_MIN_KS 2048u    // k a split keeps at least
#define SGM_MAX_SPLITS 8u
// Workgroups a compute unit runs at once, for the wave count: 1 for both
// blocks (the H200's driver gives matmul_sgm 186 registers a thread, so one
// workgroup of 256 fills most of a unit's 64 K; matmul_sgm_wide's 512 threads
// get 128 each). The split counts it gives are the fastest of 1, 2 and 3
// parts measured at every GPT-2 124M pass on the H200 (with 2, the qkv
// weight pass split to its loss).
#define SGM_WGS_A_UNIT 1u
// The persistent workgroups take the blocks in groups of SGM_GROUP block
// rows, down a group's columns first (03_linear_sgm.wgsl block_of), so that
// a wave's workgroups share the B operand's columns in the L2 cache: the
// logits' weight pass (6 block rows, 197 wide block columns, B = the f16
// dlogits, 824 MB at GPT-2 124M batch 8) read B once instead of once a
// block row (docs/kernels/03_linear_sgm.md).
#define SGM_GROUP 8u

// 03_linear_sgm.wgsl's flag bits of the f16 epilogue: an f16 copy to out16,
// GELU'd, in the product's layout rather than out's, and no f32 output.
#define SGM_F16 8u
#define SGM_F16_GELU 16u
#define SGM_F16_AS_PRODUCT 32u
#define SGM_F16_ONLY 64u
#define SGM_GELU_GRAD 128u  // times GELU' of the tensor bound as the bias, out written beside out16

typedef wgpt_sgm_plan sgm_plan;
static const sgm_plan NO_PLAN = {0, 1, 0, 0, 0, 0, 0};  // one part on the 128 x 128 block; the plain kernels ignore it

int wgpt_linear_f16_uses_sgm(const wgpt_gpu *g) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    return i->has_subgroup_matrix && i->sgm_config >= 0;
}

// 0 if v covers `elems` elements of `bytes_each` inside one binding, else -1 naming it.
static int check_(wgpt_gpu *g, const char *what, wgpt_view v, uint64_t elems, uint64_t bytes_each) {
    if (!v.buf) return wgpt_gpu_fail(g, "linear (f16): %s has no buffer", what);
    uint64_t need = elems * bytes_each, have = wgpt_view_bytes(v), size = wgpt_buf_size(v.buf);
    if (v.offset + have > size || have < need)
        return wgpt_gpu_fail(g, "linear (f16): %s covers %llu bytes from byte %llu of a %llu-byte "
                             "buffer; it needs %llu", what, (unsigned long long)have, (unsigned long long)v.offset,
                             (unsigned long long)size, (unsigned long long)need);
    if (need > wgpt_gpu_get_info(g)->max_storage_binding)
        return wgpt_gpu_fail(g, "linear (f16): %s needs %llu bytes in one binding; the device allows "
                             "%llu", what, (unsigned long long)need,
                             (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
    return 0;
}

// The output block a workgroup of each kernel file covers.
#define F16_ROWS 8u
#define F16_COLS 32u

// The plain kernels of each pass; on subgroup matrices every pass is
// matmul_sgm (out = a @ b, both row-major: the input pass's math).
enum { FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT };
static const char *const KERNEL[3] = {"matmul_f16_forward", "matmul_f16_backward_input", "matmul_f16_backward_weight"};

// The device's fragment, if an (m, n) output takes the subgroup-matrix
// kernels: they bind at least one fragment of output (WebGPU's minimum binding
// size), so smaller outputs take the plain kernels.
static const wgpt_matrix_config *sgm_for_(const wgpt_gpu *g, uint32_t m, uint32_t n) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    const wgpt_matrix_config *c = wgpt_linear_f16_uses_sgm(g) ? &i->matrix_configs[i->sgm_config] : NULL;
    return c && (uint64_t)m * n >= (uint64_t)c->m * c->n ? c : NULL;
}

// 1 where the _32k twins run: the workgroup memory is short, or the matrices
// are emulated (a CPU, for tests: there the full stages only cost compile
// time, minutes of LLVM's a kernel, and the twins are the same code).
static int short_stages_(const wgpt_gpu_info *i) { return i->max_workgroup_storage < SGM_STORAGE || i->sgm_emulated; }

// The k a stage of the kernel add_ runs for `wide`'s block on i (its _32k
// twin's where short_stages_).
static uint32_t stage_k_(const wgpt_gpu_info *i, int wide) {
    if (short_stages_(i)) return wide ? SGM_WIDE_32K_BK : SGM_32K_BK;
    return wide ? SGM_WIDE_BK : SGM_BK;
}

// Stream-K on `wide`'s block for `slots` resident workgroups: the blocks'
// stages end to end, an equal share a workgroup; sk 0 where no block would be
// shared (nothing to gain over the plain grid).
static sgm_plan streamk_(const wgpt_gpu_info *i, uint32_t m, uint32_t n, uint32_t k, int wide, uint64_t slots) {
    uint32_t bk = stage_k_(i, wide), bn = wide ? SGM_WIDE_BN : SGM_BN;
    uint64_t blocks = (uint64_t)((m + SGM_BM - 1) / SGM_BM) * ((n + bn - 1) / bn), per = (k + bk - 1) / bk;
    uint64_t total = blocks * per, sk = (total + slots - 1) / slots, most = 1;
    for (uint64_t b = 0; b < blocks; b++) {  // the most workgroups that share a block
        uint64_t c = ((b + 1) * per - 1) / sk - b * per / sk + 1;
        if (c > most) most = c;
    }
    if (most < 2 || total > UINT32_MAX) return NO_PLAN;
    return (sgm_plan){wide, 1, 0, (uint32_t)sk, (uint32_t)((total + sk - 1) / sk), (uint32_t)most, bk};
}

// Where stream-K runs unasked (WGPT_STREAMK_AUTO): in place of a plan that
// splits k (so that it pays for partials and a reduce already) and whose
// waves are at most SK_MAX_FILL_PCT full (the blocks times the parts over the
// waves times the workgroups a wave), where each workgroup sums at least
// SK_MIN_STAGES stages. On an H100 it was faster for
// GPT-2 124M's weight passes of fc and fcproj (split in 2, the waves 72-73%
// full) and not for qkv's (82%) nor the logits' input pass (97%); and slower
// than the unsplit passes it was tried for (a reduce more). Nor where more
// than SK_MAX_SHARE workgroups share a block: attproj's weight pass (18 wide
// blocks, 8 a block) took 0.075 ms streamed against 0.069 split, the
// partials' traffic outgrowing the idle units it fills.
#define SK_MAX_FILL_PCT 75u
#define SK_MIN_STAGES 16u
#define SK_MAX_SHARE 4u

// How an sgm pass over an (m, n) output with a sum of k runs: the block and
// the parts its sum over k splits into (a forced count from
// wgpt_gpu_options.matmul_splits instead), whichever take the least time by
// the count of whole waves of workgroups (SGM_WGS_A_UNIT resident a compute
// unit) times the k each sums, times the block's cost (SGM_WIDE_COST /
// SGM_BASE_COST): a wide block has half the workgroups of a 128 x 128 one
// and runs faster for its outputs, so it wins where both fill the compute
// units (the logits, 4096^3) and loses where the outputs are few (the
// weight passes of GPT-2's linears). Parts are at least SGM_MIN_KS long
// (shorter ones lose more to writing and adding the partials than a fuller
// last wave gains: measured on the H200), at most
// SGM_MAX_SPLITS, and all partials inside `room` bytes. Ties keep the 128 x
// 128 block and the fewer parts. wgpt_gpu_options.sgm_block can force one
// block (the wide one only where the device takes 16 subgroups a workgroup).
// Then stream-K (streamk_; its partials inside `room` too), where the compute
// units are known: taken where the plan above splits k and leaves the units
// idle (SK_MAX_FILL_PCT; wgpt_gpu_options.streamk: or always, or never).
wgpt_sgm_plan wgpt_linear_f16_plan(const wgpt_gpu_info *i, uint32_t m, uint32_t n, uint32_t k, uint64_t room) {
    sgm_plan best = NO_PLAN;
    if (!i->has_subgroup_matrix || i->sgm_config < 0 || i->cpu_kernels) return best;
    const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
    uint64_t slots = (uint64_t)SGM_WGS_A_UNIT * (i->compute_units ? i->compute_units : 128);
    int can_wide = i->max_invocations >= SGM_WIDE_SGS * c->sg_max &&
                   (!short_stages_(i) || SGM_WIDE_32K_BK % c->k == 0);
    int first = i->sgm_block == WGPT_SGM_WIDE && can_wide, last = i->sgm_block != WGPT_SGM_BASE && can_wide;
    uint64_t best_cost = UINT64_MAX;
    for (int wide = first; wide <= last; wide++) {
        uint32_t bn = wide ? SGM_WIDE_BN : SGM_BN, bk = wide ? SGM_WIDE_BK : SGM_BK;
        uint64_t blocks = (uint64_t)((m + SGM_BM - 1) / SGM_BM) * ((n + bn - 1) / bn);
        uint32_t lo = 1, hi = SGM_MAX_SPLITS < k / SGM_MIN_KS ? SGM_MAX_SPLITS : k / SGM_MIN_KS;
        if (i->matmul_splits) lo = hi = i->matmul_splits < k / bk ? i->matmul_splits : k / bk;
        if (lo < 1) lo = 1;
        if (hi < lo) hi = lo;
        for (uint32_t t = lo; t <= hi; t++) {
            uint32_t s = t;
            while (s > 1 && (uint64_t)s * m * n * 4 > room) s--;  // the partials must fit the room
            uint32_t per = s > 1 ? ((k + s - 1) / s + bk - 1) / bk * bk : k;
            uint64_t cost = (blocks * s + slots - 1) / slots * per * (wide ? SGM_WIDE_COST : SGM_BASE_COST);
            if (cost < best_cost) {
                best_cost = cost;
                best = (sgm_plan){wide, s > 1 ? (k + per - 1) / per : 1, s > 1 ? per : 0, 0, 0, 0, 0};  // no empty part
            }
        }
    }
    // stream-K where it is asked for, or for a split plan that leaves the
    // units idle (SK_MAX_FILL_PCT; a forced split count keeps the plan); it
    // needs the compute units known
    uint64_t bn = best.wide ? SGM_WIDE_BN : SGM_BN;
    uint64_t items = (uint64_t)((m + SGM_BM - 1) / SGM_BM) * ((n + bn - 1) / bn) * best.s;
    int idle = best.s > 1 && items * 100 <= (items + slots - 1) / slots * slots * SK_MAX_FILL_PCT;
    int want_sk = i->streamk == WGPT_STREAMK_ON || (i->streamk == WGPT_STREAMK_AUTO && !i->matmul_splits && idle);
    if (!want_sk || !i->compute_units) return best;
    sgm_plan sk = NO_PLAN;
    uint64_t sk_cost = UINT64_MAX;
    for (int wide = first; wide <= last; wide++) {  // the block whose share takes the least time
        sgm_plan q = streamk_(i, m, n, k, wide, slots);
        uint64_t bytes = (uint64_t)q.slots * m * n * 4;
        uint64_t cost = (uint64_t)q.sk * q.bk * (wide ? SGM_WIDE_COST : SGM_BASE_COST);
        if (!q.sk || bytes > room || bytes > i->max_storage_binding) continue;
        if (i->streamk != WGPT_STREAMK_ON && (q.sk < SK_MIN_STAGES || q.slots > SK_MAX_SHARE)) continue;
        if (cost < sk_cost) sk_cost = cost, sk = q;
    }
    return sk.sk ? sk : best;
}

// The plan of a pass on g; outputs that take the plain kernels (sgm_for_) get none.
static sgm_plan plan_(const wgpt_gpu *g, uint32_t m, uint32_t n, uint32_t k, uint64_t room) {
    return sgm_for_(g, m, n) ? wgpt_linear_f16_plan(wgpt_gpu_get_info(g), m, n, k, room) : NO_PLAN;
}

// The (m x n) partials a plan writes: stream-K's slots, a split's parts, or none.
static uint32_t partials_(sgm_plan pl) { return pl.sk ? pl.slots : pl.s > 1 ? pl.s : 0; }

// Bytes of the partials of an (m, n) output whose sum over k splits (0: none).
static uint64_t parts_bytes_(const wgpt_gpu *g, uint32_t m, uint32_t n, uint32_t k) {
    return (uint64_t)partials_(plan_(g, m, n, k, UINT64_MAX)) * m * n * 4;
}

uint64_t wgpt_linear_f16_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    uint64_t f = parts_bytes_(g, OC, N, C), i = parts_bytes_(g, N, C, OC), w = parts_bytes_(g, C, OC, N);
    uint64_t most = f > i ? f : i;
    return w > most ? w : most;
}

// On subgroup matrices the forward and the weight pass multiply two row-major
// operands (the fast layout, docs/kernels/03_linear_sgm.md): the input's f16
// copy is transposed first, and the product is stored transposed.
uint64_t wgpt_linear_f16_transposed_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    return wgpt_linear_f16_takes_transposed(g, N, C, OC) ? (uint64_t)N * C * 2 : 0;
}

// Appends one dispatch of a pass over an (m, n) output (on subgroup matrices
// as planned: pl.s parts of k pl.ks long go as partials to out, which then
// holds pl.s x m x n floats).
static int add_(wgpt_gpu *g, wgpt_op *op, int pass, wgpt_view a, wgpt_view b, wgpt_view bias, wgpt_view out,
                wgpt_view out16, uint32_t m, uint32_t n, uint32_t k, uint32_t flag, sgm_plan pl) {
    const wgpt_matrix_config *c = sgm_for_(g, m, n);
    int sgm = c != NULL, wide = sgm && pl.wide;
    int epi = (flag & (SGM_F16 | SGM_GELU_GRAD)) != 0;  // the variants with the f16 epilogue compiled in
    static const char *const SGM_KERNEL[2][2][2][2] = {  // [wide][epi][32 KiB][persistent]
        {{{"matmul_sgm", "matmul_sgm_p"}, {"matmul_sgm_32k", "matmul_sgm_32k_p"}},
         {{"matmul_sgm_epi", "matmul_sgm_epi_p"}, {"matmul_sgm_epi_32k", "matmul_sgm_epi_32k_p"}}},
        {{{"matmul_sgm_wide", "matmul_sgm_wide_p"}, {"matmul_sgm_wide_32k", "matmul_sgm_wide_32k_p"}},
         {{"matmul_sgm_wide_epi", "matmul_sgm_wide_epi_p"}, {"matmul_sgm_wide_epi_32k", "matmul_sgm_wide_epi_32k_p"}}}};
    int small = short_stages_(wgpt_gpu_get_info(g));
    uint32_t units = SGM_WGS_A_UNIT * wgpt_gpu_get_info(g)->compute_units;
    uint32_t bm = sgm ? SGM_BM : F16_ROWS, bn = wide ? SGM_WIDE_BN : sgm ? SGM_BN : F16_COLS;  // BM, BN of the kernel
    uint32_t gx = (n + bn - 1) / bn, gy = (m + bm - 1) / bm;
    uint32_t parts = sgm && pl.s > 1 ? pl.s : 1;
    // Where the blocks outnumber the workgroups the device runs at once (its
    // compute units known), one wave of those, each through its share of the
    // blocks, the next one's first loads overlapping the last stage: 4096^3
    // 0.585 -> 0.551 ms, the logits' input pass 1.286 -> 1.175 on an H100.
    int persist = sgm && units && ((uint64_t)gx * gy * parts > units || pl.sk);
    static const char *const SK_KERNEL[2][2] = {  // [wide][32 KiB]: stream-K (never with the epilogue)
        {"matmul_sgm_sk", "matmul_sgm_32k_sk"}, {"matmul_sgm_wide_sk", "matmul_sgm_wide_32k_sk"}};
    const char *kernel = !sgm ? KERNEL[pass]
                         : persist && pl.sk ? SK_KERNEL[wide][small]
                                            : SGM_KERNEL[wide][epi][small][persist];
    if (!m || !n || !k || m % 8 || n % 8 || k % 8)
        return wgpt_gpu_fail(g, "%s: m=%u, n=%u, k=%u: each must be a positive multiple of 8", kernel, m, n, k);
    if (gx > WGPT_MAX_WG_DIM || gy > WGPT_MAX_WG_DIM)
        return wgpt_gpu_fail(g, "%s: %u x %u blocks exceed %u a dimension", kernel, gx, gy, WGPT_MAX_WG_DIM);
    // stand-ins, never touched: a for a missing bias (read-only), the
    // device's unused binding for a missing out or out16 (sgm only; writable,
    // so no other output of the dispatch may stand in)
    wgpt_view v[5] = {a, b, bias.buf ? bias : a, out.buf ? out : wgpt_gpu_unused_binding(g),
                      out16.buf || !sgm ? out16 : wgpt_gpu_unused_binding(g)};
    sgm_params p = {m, n, k, flag, parts > 1 ? pl.ks : 0, persist ? pl.sk : 0, persist ? SGM_GROUP : 0, 0};
    if (persist) gx = pl.sk ? pl.wgs : units, gy = 1, parts = 1;  // the kernel walks the full grid's blocks itself
    return wgpt_op_add(g, op, kernel, v, sgm ? 5 : 4, &p, sizeof p, gx, gy, parts) ? 0 : -1;
}

// 0 if every dimension is a positive multiple of 8, else -1 naming them.
static int shape_(wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    if (N && C && OC && N % 8 == 0 && C % 8 == 0 && OC % 8 == 0) return 0;
    return wgpt_gpu_fail(g, "linear (f16): N=%u, C=%u, OC=%u: each must be a positive multiple of 8", N, C, OC);
}

// The transposed (C, N) f16 copy of an (N, C) input, in inp_t's first bytes.
static int transposed_input_(wgpt_gpu *g, wgpt_op *op, wgpt_view inp_t, wgpt_view inp16, uint32_t N, uint32_t C,
                             wgpt_view *t) {
    *t = (wgpt_view){inp_t.buf, inp_t.offset, (uint64_t)N * C * 2};
    if (check_(g, "inp_t (the transposed input)", *t, (uint64_t)N * C, 2) < 0) return -1;
    return wgpt_transpose_f16(g, op, *t, inp16, N, C);
}

// The stream-K partials of a pass (plan pl) in parts added into out
// (matmul_streamk_reduce): each block's slots in order, the bias (flag bit
// 1), out's present value (bit 0); out is the (m, n) product, or its
// transpose with bit 2.
static int streamk_reduce_(wgpt_gpu *g, wgpt_op *op, wgpt_view parts, wgpt_view bias, wgpt_view out, uint32_t m,
                           uint32_t n, uint32_t k, uint32_t flag, sgm_plan pl) {
    streamk_params p = {
        m, n, flag & 7u, SGM_BM, pl.wide ? SGM_WIDE_BN : SGM_BN, (k + pl.bk - 1) / pl.bk, pl.sk, 0};
    wgpt_view v[3] = {parts, bias.buf ? bias : parts, out};
    uint64_t threads = (uint64_t)m * n / 4;
    return wgpt_op_add1d(g, op, "matmul_streamk_reduce", v, 3, &p, sizeof p, (threads + 255) / 256) ? 0 : -1;
}

// One sgm pass over an (m, n) output, its sum over k split into parts in
// scratch where the output has few blocks (as far as scratch reaches), or
// stream-K (its pieces in scratch too), then added in order into out (dst_m x
// dst_n: the output as stored) with the bias and, with accumulate, out's
// present value; flag bit 2 (transposed) kept.
static int split_pass_(wgpt_gpu *g, wgpt_op *op, wgpt_view a, wgpt_view b, wgpt_view bias, wgpt_view out, uint32_t m,
                       uint32_t n, uint32_t k, uint32_t flag, wgpt_view scratch) {
    if ((flag & 4u) && !sgm_for_(g, m, n))  // the plain kernels store only as is
        return wgpt_gpu_fail(g, "linear (f16): a transposed store needs the subgroup-matrix kernel (m=%u, n=%u)", m, n);
    sgm_plan pl = plan_(g, m, n, k, scratch.buf ? wgpt_view_bytes(scratch) : 0);
    wgpt_view none = {0};
    uint32_t s = partials_(pl);
    if (!s) return add_(g, op, BACKWARD_INPUT, a, b, bias, out, none, m, n, k, flag, pl);
    wgpt_view parts = {scratch.buf, scratch.offset, (uint64_t)s * m * n * 4};
    int t = (flag & 4u) != 0;
    if (check_(g, "scratch", parts, (uint64_t)s * m * n, 4) < 0 ||
        add_(g, op, BACKWARD_INPUT, a, b, none, parts, none, m, n, k, flag & 4u, pl) < 0)
        return -1;
    if (pl.sk) return streamk_reduce_(g, op, parts, (flag & 2u) ? bias : none, out, m, n, k, flag, pl);
    return wgpt_linear_reduce_parts(g, op, parts, (flag & 2u) ? bias : none, out, t ? n : m, t ? m : n, pl.s,
                                    (flag & 1u) != 0);
}

int wgpt_linear_f16_takes_transposed(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    return sgm_for_(g, OC, N) && sgm_for_(g, C, OC);
}

// 0 if that shape's forward and weight pass take a transposed input, else -1 naming it.
static int takes_t_(wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC) {
    if (wgpt_linear_f16_takes_transposed(g, N, C, OC)) return 0;
    return wgpt_gpu_fail(g, "linear (f16): N=%u, C=%u, OC=%u: a transposed input needs the subgroup-matrix "
                         "kernels, which this device does not run for that shape", N, C, OC);
}

int wgpt_linear_f16_forward_t(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp_t16, wgpt_view weight16,
                              wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch) {
    if (check_(g, "out", out, (uint64_t)N * OC, 4) < 0 || check_(g, "inp_t", inp_t16, (uint64_t)N * C, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 || (bias.buf && check_(g, "bias", bias, OC, 4) < 0) ||
        shape_(g, N, C, OC) < 0 || takes_t_(g, N, C, OC) < 0)
        return -1;
    // out^T (OC, N) = weight (OC, C) @ inp^T (C, N)
    return split_pass_(g, op, weight16, inp_t16, bias, out, OC, N, C, (bias.buf ? 2u : 0u) | 4u, scratch);
}

int wgpt_linear_f16_forward_t16(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view out16, wgpt_out16 kind,
                                wgpt_view inp_t16, wgpt_view weight16, wgpt_view bias, uint32_t N, uint32_t C,
                                uint32_t OC) {
    int copy = kind == WGPT_OUT16_COPY;
    if ((!copy && kind != WGPT_OUT16_GELU_T) || (copy && out.buf))
        return wgpt_gpu_fail(g, "linear (f16): an f16 output of kind %d%s", (int)kind,
                             copy ? " takes no f32 output" : " is none of wgpt_out16");
    if ((!copy && check_(g, "out", out, (uint64_t)N * OC, 4) < 0) || check_(g, "out16", out16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "inp_t", inp_t16, (uint64_t)N * C, 2) < 0 || check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 ||
        (bias.buf && check_(g, "bias", bias, OC, 4) < 0) || shape_(g, N, C, OC) < 0 || takes_t_(g, N, C, OC) < 0)
        return -1;
    // out^T (OC, N) = weight (OC, C) @ inp^T (C, N), in one part (the epilogue
    // writes final values); out16 as out is stored (N, OC), or GELU'd as the
    // product is (OC, N)
    uint32_t flag = (bias.buf ? 2u : 0u) | 4u | SGM_F16 | (copy ? SGM_F16_ONLY : SGM_F16_GELU | SGM_F16_AS_PRODUCT);
    return add_(g, op, FORWARD, weight16, inp_t16, bias, out, out16, OC, N, C, flag, plan_(g, OC, N, C, 0));
}

int wgpt_linear_f16_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp16, wgpt_view weight16,
                            wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC, wgpt_view inp_t, wgpt_view scratch) {
    if (check_(g, "out", out, (uint64_t)N * OC, 4) < 0 || check_(g, "inp", inp16, (uint64_t)N * C, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 || (bias.buf && check_(g, "bias", bias, OC, 4) < 0) ||
        shape_(g, N, C, OC) < 0)
        return -1;
    if (!wgpt_linear_f16_takes_transposed(g, N, C, OC))
        return add_(g, op, FORWARD, inp16, weight16, bias, out, (wgpt_view){0}, N, OC, C, bias.buf ? 2u : 0u, NO_PLAN);
    wgpt_view t;
    if (transposed_input_(g, op, inp_t, inp16, N, C, &t) < 0) return -1;
    return wgpt_linear_f16_forward_t(g, op, out, t, weight16, bias, N, C, OC, scratch);
}

int wgpt_linear_f16_backward_input(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout16, wgpt_view weight16,
                                   uint32_t N, uint32_t C, uint32_t OC, int accumulate, wgpt_view scratch) {
    wgpt_view none = {0};
    if (check_(g, "dinp", dinp, (uint64_t)N * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 || shape_(g, N, C, OC) < 0)
        return -1;
    uint32_t flag = accumulate ? 1u : 0u;
    if (!sgm_for_(g, N, C))
        return add_(g, op, BACKWARD_INPUT, dout16, weight16, none, dinp, none, N, C, OC, flag, NO_PLAN);
    return split_pass_(g, op, dout16, weight16, none, dinp, N, C, OC, flag, scratch);
}

int wgpt_linear_f16_backward_input_gelu(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dinp16, wgpt_view gelu_in,
                                        wgpt_view dout16, wgpt_view weight16, uint32_t N, uint32_t C, uint32_t OC) {
    if (check_(g, "dinp", dinp, (uint64_t)N * C, 4) < 0 || check_(g, "dinp16", dinp16, (uint64_t)N * C, 2) < 0 ||
        check_(g, "gelu_in", gelu_in, (uint64_t)N * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "weight", weight16, (uint64_t)OC * C, 2) < 0 || shape_(g, N, C, OC) < 0)
        return -1;
    if (!sgm_for_(g, N, C))
        return wgpt_gpu_fail(g, "linear (f16): the input pass with the GELU's backward needs the subgroup-matrix "
                             "kernels, which this device does not run for N=%u, C=%u", N, C);
    // dinp (N, C) = (dout (N, OC) @ weight (OC, C)) * GELU'(gelu_in), in one part
    return add_(g, op, BACKWARD_INPUT, dout16, weight16, gelu_in, dinp, dinp16, N, C, OC,
                SGM_F16 | SGM_F16_ONLY | SGM_GELU_GRAD, plan_(g, N, C, OC, 0));
}

int wgpt_linear_f16_backward_weight_t(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16,
                                      wgpt_view inp_t16, uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch) {
    wgpt_view none = {0};
    if (check_(g, "dweight", dweight, (uint64_t)OC * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "inp_t", inp_t16, (uint64_t)N * C, 2) < 0 || shape_(g, N, C, OC) < 0 || takes_t_(g, N, C, OC) < 0)
        return -1;
    // dweight^T (C, OC) += inp^T (C, N) @ dout (N, OC)
    return split_pass_(g, op, inp_t16, dout16, none, dweight, C, OC, N, 1u | 4u, scratch);
}

int wgpt_linear_f16_backward_weight(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16, wgpt_view inp16,
                                    uint32_t N, uint32_t C, uint32_t OC, wgpt_view inp_t, wgpt_view scratch) {
    wgpt_view none = {0};
    if (check_(g, "dweight", dweight, (uint64_t)OC * C, 4) < 0 || check_(g, "dout", dout16, (uint64_t)N * OC, 2) < 0 ||
        check_(g, "inp", inp16, (uint64_t)N * C, 2) < 0 || shape_(g, N, C, OC) < 0)
        return -1;
    if (!wgpt_linear_f16_takes_transposed(g, N, C, OC))
        return add_(g, op, BACKWARD_WEIGHT, dout16, inp16, none, dweight, none, OC, C, N, 1u, NO_PLAN);
    wgpt_view t;
    if (transposed_input_(g, op, inp_t, inp16, N, C, &t) < 0) return -1;
    return wgpt_linear_f16_backward_weight_t(g, op, dweight, dout16, t, N, C, OC, scratch);
}
