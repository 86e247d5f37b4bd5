// linear_f16.c: the f16 linear family of the op registry (tests/ops/ops.h):
// the f16 matmuls (03_linear_f16.wgsl, 03_linear_sgm.wgsl through
// src/model/linear_f16.h: forward, input and weight passes, the bias
// gradient) against double-precision sums of the same f16-rounded operands:
// the plain kernels on a device opened without f16 (they need neither f16
// nor subgroup matrices), the subgroup-matrix ones where the device has them
// (the H100/H200) or, where it has f16 but none (lavapipe), on emulated ones
// (src/gpu/sgm_emulate.h, the same kernel code; slow: no shapes added here),
// and a device that splits every pass in 3 parts and runs the GPU twins even
// on a CPU (the split-k partials in scratch, added in order with the bias and
// the input pass's prior value; the bias partials); and the wide,
// persistent and stream-K tensor-core variants. tests/test_linear_f16.c keeps
// the special cases (their plans, the accumulate order, the epilogues).
#include "ops/linear_f16.h"

#include "model/linear.h"
#include "model/linear_f16.h"
#include "model/precision.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

void lf16_run(wgpt_gpu *g, wgpt_op *op) {
    for (int i = 0; i < op->n; i++)
        TU_OK(g, wgpt_dispatch(g, op->steps[i].bind, op->steps[i].x, op->steps[i].y, op->steps[i].z));
    TU_OK(g, wgpt_gpu_finish(g));  // before the binds go
    wgpt_op_free(op);
    wgpt_op_init(op);
}

wgpt_buf *lf16_of(wgpt_gpu *g, const float *x, uint64_t n, const char *label) { return lf16_of_groups(g, x, n, label, NULL); }

wgpt_buf *lf16_of_groups(wgpt_gpu *g, const float *x, uint64_t n, const char *label, uint32_t *groups) {
    wgpt_buf *src = wgpt_buf_create(g, n * 4, label), *dst = wgpt_buf_create(g, n * 2, label);
    TU_NONNULL(g, src);
    TU_NONNULL(g, dst);
    TU_OK(g, wgpt_buf_upload(g, src, 0, x, n * 4));
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view d = {dst, 0, 0}, s = {src, 0, 0};
    TU_OK(g, wgpt_cast_f16(g, &op, d, s, n));
    if (groups) *groups = op.steps[0].x * op.steps[0].y;
    lf16_run(g, &op);
    wgpt_buf_free(src);
    return dst;
}

// got (m x n, row-major) against init + a @ b summed in double: element
// (i, j) = init[i ii + j ij] + sum over k of a[i ai + k ak] b[k bk + j bj],
// within mult (k + 1) 2^-24 (|init| + sum |a b|) (f16 products are exact in
// f32; the f32 accumulation). Fails naming the pass, shape sh (N, C, OC) and
// element; returns the worst error over its bound.
static double check_product_(const char *what, const uint32_t sh[3], const float *got, uint32_t m, uint32_t n,
                             uint32_t k, const float *a, size_t ai, size_t ak, const float *b, size_t bk, size_t bj,
                             const float *init, size_t ii, size_t ij, double mult) {
    double worst = 0;
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            double s = init[i * ii + j * ij], sa = fabs(s);
            for (uint32_t t = 0; t < k; t++) {
                double p = (double)a[i * ai + t * ak] * b[t * bk + j * bj];
                s += p, sa += fabs(p);
            }
            double e = fabs(got[(size_t)i * n + j] - s), bound = mult * (k + 1) * 0x1p-24 * sa + 1e-30;
            if (!(e <= bound))
                fail_msg("%s %ux%ux%u [%u,%u]: %.9g, want %.9g", what, sh[0], sh[1], sh[2], i, j,
                         got[(size_t)i * n + j], s);
            if (e / bound > worst) worst = e / bound;
        }
    return worst;
}

// The three passes at one shape, against double-precision sums of the same
// f16-rounded operands. Tolerance: the products of two f16 are exact in f32,
// so the only error is the f32 accumulation of k terms: |err| <= k * 2^-24 *
// sum |a_i b_i| (the standard bound; tensor cores add in f32), doubled for
// the initial value an accumulating pass adds to.
void lf16_check_shape(wgpt_gpu *G, uint32_t N, uint32_t C, uint32_t OC) {
    float *inp = malloc((size_t)N * C * 4), *w = malloc((size_t)OC * C * 4), *bias = malloc((size_t)OC * 4);
    float *dout = malloc((size_t)N * OC * 4), *prior = malloc((size_t)N * C * 4);
    tu_fill(inp, (size_t)N * C, -1, 1), tu_fill(w, (size_t)OC * C, -0.5f, 0.5f), tu_fill(bias, OC, -1, 1);
    tu_fill(dout, (size_t)N * OC, -1, 1), tu_fill(prior, (size_t)N * C, -1, 1);
    // what the GPU multiplies: the f16 roundings
    float *ri = malloc((size_t)N * C * 4), *rw = malloc((size_t)OC * C * 4), *rd = malloc((size_t)N * OC * 4);
    for (size_t i = 0; i < (size_t)N * C; i++) ri[i] = ref_f32_from_f16(ref_f16_from_f32(inp[i]));
    for (size_t i = 0; i < (size_t)OC * C; i++) rw[i] = ref_f32_from_f16(ref_f16_from_f32(w[i]));
    for (size_t i = 0; i < (size_t)N * OC; i++) rd[i] = ref_f32_from_f16(ref_f16_from_f32(dout[i]));
    wgpt_buf *i16 = lf16_of(G, inp, (uint64_t)N * C, "inp16"), *w16 = lf16_of(G, w, (uint64_t)OC * C, "w16");
    wgpt_buf *d16 = lf16_of(G, dout, (uint64_t)N * OC, "dout16");
    wgpt_buf *bb = wgpt_buf_create(G, OC * 4, "bias"), *out = wgpt_buf_create(G, (uint64_t)N * OC * 4, "out");
    wgpt_buf *dinp = wgpt_buf_create(G, (uint64_t)N * C * 4, "dinp"), *dw = wgpt_buf_create(G, (uint64_t)OC * C * 4, "dw");
    TU_OK(G, wgpt_buf_upload(G, bb, 0, bias, OC * 4));
    TU_OK(G, wgpt_buf_upload(G, dinp, 0, prior, (uint64_t)N * C * 4));
    float *dw0 = malloc((size_t)OC * C * 4), *db0 = malloc((size_t)OC * 4);
    tu_fill(dw0, (size_t)OC * C, -1, 1), tu_fill(db0, OC, -1, 1);
    TU_OK(G, wgpt_buf_upload(G, dw, 0, dw0, (uint64_t)OC * C * 4));
    // the bias gradient reads the f32 gradient; split-k partials and the bias's go through scratch
    wgpt_buf *d32 = wgpt_buf_create(G, (uint64_t)N * OC * 4, "dout"), *db = wgpt_buf_create(G, OC * 4, "dbias");
    uint64_t sb = wgpt_linear_f16_scratch_bytes(G, N, C, OC), bsb = wgpt_linear_bias_scratch_bytes(G, N, OC);
    wgpt_buf *scr = wgpt_buf_create(G, (sb > bsb ? sb : bsb) + 256, "scratch");
    TU_NONNULL(G, scr);
    // the transposed input (subgroup matrices): 256 bytes at least, a binding's minimum here
    uint64_t tb = wgpt_linear_f16_transposed_bytes(G, N, C, OC);
    wgpt_buf *tbuf = wgpt_buf_create(G, tb > 256 ? tb : 256, "inp_t");
    TU_NONNULL(G, tbuf);
    TU_OK(G, wgpt_buf_upload(G, d32, 0, dout, (uint64_t)N * OC * 4));
    TU_OK(G, wgpt_buf_upload(G, db, 0, db0, OC * 4));
    wgpt_view vi = {i16, 0, 0}, vw = {w16, 0, 0}, vd = {d16, 0, 0}, vb = {bb, 0, 0}, vo = {out, 0, 0};
    wgpt_view vdi = {dinp, 0, 0}, vdw = {dw, 0, 0}, vscr = {scr, 0, 0}, vt = {tbuf, 0, 0}, vd32 = {d32, 0, 0}, vdb = {db, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_linear_f16_forward(G, &op, vo, vi, vw, vb, N, C, OC, vt, vscr));
    TU_OK(G, wgpt_linear_f16_backward_input(G, &op, vdi, vd, vw, N, C, OC, 1, vscr));
    TU_OK(G, wgpt_linear_f16_backward_weight(G, &op, vdw, vd, vi, N, C, OC, vt, vscr));
    TU_OK(G, wgpt_linear_backward_bias(G, &op, vdb, vd32, N, OC, vscr));
    lf16_run(G, &op);
    float *g_out = malloc((size_t)N * OC * 4), *g_dinp = malloc((size_t)N * C * 4), *g_dw = malloc((size_t)OC * C * 4);
    TU_OK(G, wgpt_buf_download(G, out, 0, g_out, (uint64_t)N * OC * 4));
    TU_OK(G, wgpt_buf_download(G, dinp, 0, g_dinp, (uint64_t)N * C * 4));
    TU_OK(G, wgpt_buf_download(G, dw, 0, g_dw, (uint64_t)OC * C * 4));
    float *g_db = malloc((size_t)OC * 4);
    TU_OK(G, wgpt_buf_download(G, db, 0, g_db, OC * 4));
    const uint32_t sh[3] = {N, C, OC};  // for the messages
    double worst = check_product_("forward", sh, g_out, N, OC, C, ri, C, 1, rw, 1, C, bias, 0, 1, 1);
    double w2 = check_product_("backward_input", sh, g_dinp, N, C, OC, rd, OC, 1, rw, C, 1, prior, C, 1, 2);
    double w3 = check_product_("backward_weight", sh, g_dw, OC, C, N, rd, 1, OC, ri, C, 1, dw0, C, 1, 2);
    worst = w2 > worst ? w2 : worst;
    worst = w3 > worst ? w3 : worst;
    // dbias: f32 sums of N + 1 terms in some order: (N + 1) ulp-scale bound on the sum of magnitudes
    for (uint32_t o = 0; o < OC; o++) {
        double s = db0[o], a = fabs(s);
        for (uint32_t n = 0; n < N; n++) s += dout[(size_t)n * OC + o], a += fabs(dout[(size_t)n * OC + o]);
        double e = fabs(g_db[o] - s), bound = (N + 1) * 0x1p-24 * a + 1e-30;
        if (!(e <= bound)) fail_msg("backward_bias %ux%u [%u]: %.9g, want %.9g", N, OC, o, g_db[o], s);
        if (e / bound > worst) worst = e / bound;
    }
    printf("f16 matmuls N=%u C=%u OC=%u (split scratch %llu bytes): worst error %.3f of the bound\n", N, C, OC,
           (unsigned long long)sb, worst);
    wgpt_buf_free(i16), wgpt_buf_free(w16), wgpt_buf_free(d16), wgpt_buf_free(bb), wgpt_buf_free(out);
    wgpt_buf_free(dinp), wgpt_buf_free(dw), wgpt_buf_free(d32), wgpt_buf_free(db), wgpt_buf_free(scr), wgpt_buf_free(tbuf);
    free(inp), free(w), free(bias), free(dout), free(prior), free(ri), free(rw), free(rd), free(dw0), free(db0);
    free(g_out), free(g_dinp), free(g_dw), free(g_db);
}

static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    if (v->arg == 1)  // the forward and the input pass: k = 128 in 3 parts of whole 64-deep stages is 64 + 64
        assert_true(!wgpt_linear_f16_uses_sgm(g) || s->d[0] != 256 || s->d[1] != 128 || s->d[2] != 128 ||
                    wgpt_linear_f16_scratch_bytes(g, 256, 128, 128) == 2ull * 256 * 128 * 4);
    if (v->disable_f16) assert_false(wgpt_linear_f16_uses_sgm(g));
    if (v->compute_units) assert_int_equal(wgpt_gpu_get_info(g)->compute_units, v->compute_units);
    lf16_check_shape(g, s->d[0], s->d[1], s->d[2]);
}

// The tensor-core variants beyond the plain "sgm" one (emulated on a CPU),
// each one block for every shape: the 128 x 256 block (matmul_sgm_wide: 16
// subgroups, its out area used in two rounds, stages of 32); the persistent
// twins (matmul_sgm_p, ...: one workgroup a compute unit, each through its
// share of the blocks) on a device said to have 2 compute units, so that
// every workgroup takes several blocks, edge blocks and split parts; and
// stream-K (the blocks' stages end to end, an equal share for each of 3 or 5
// compute units, so that shares end inside blocks and a block is shared by 2
// or 3 workgroups, then matmul_streamk_reduce). tests/test_linear_f16.c
// checks their plans and dispatch shapes.
#define SGM_(nm, splits, block, sk, units)                                                                     \
    {.name = nm, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = 1, .needs = OP_NEEDS_SGM, .matmul_splits = splits, \
     .sgm_block = block, .streamk = sk, .compute_units = units}
static const op_variant variants_[] = {
    {.name = "plain", .kernels = WGPT_KERNELS_AUTO, .disable_f16 = 1},
    {.name = "sgm", .kernels = WGPT_KERNELS_AUTO, .emulate_sgm = 1, .needs = OP_NEEDS_SGM},
    {.name = "split-3", .kernels = WGPT_KERNELS_GPU, .emulate_sgm = 1, .arg = 1, .matmul_splits = 3},
    SGM_("sgm-wide", 0, WGPT_SGM_WIDE, 0, 0),                               // 3
    SGM_("sgm-wide-split-3", 3, WGPT_SGM_WIDE, 0, 0),                       // 4
    SGM_("sgm-persistent", 0, WGPT_SGM_BASE, 0, 2),                         // 5
    SGM_("sgm-persistent-split-3", 3, WGPT_SGM_BASE, 0, 2),                 // 6
    SGM_("sgm-wide-persistent", 0, WGPT_SGM_WIDE, 0, 2),                    // 7
    SGM_("sgm-wide-persistent-split-3", 3, WGPT_SGM_WIDE, 0, 2),            // 8
    SGM_("sgm-streamk-3-units", 0, WGPT_SGM_BASE, WGPT_STREAMK_ON, 3),      // 9
    SGM_("sgm-wide-streamk-3-units", 0, WGPT_SGM_WIDE, WGPT_STREAMK_ON, 3), // 10
    SGM_("sgm-streamk-5-units", 0, WGPT_SGM_BASE, WGPT_STREAMK_ON, 5),      // 11
    SGM_("sgm-wide-streamk-5-units", 0, WGPT_SGM_WIDE, WGPT_STREAMK_ON, 5), // 12
};
#define WIDE_AND_PERSISTENT_ (0x1f8u)  // variants 3-8
#define PERSISTENT_ (0x1e0u)           // variants 5-8
#define STREAMK_ (0x1e00u)             // variants 9-12

// (N, C, OC): whole blocks; edges everywhere, k not a multiple of a stage
// (64); several blocks with edges, several stages and a partial one; one
// partial block, one partial stage; a long k. Then whole wide blocks; the
// input pass over 10 x 3 blocks (2 of the wide one): the persistent order's
// groups of block rows (block_of), a whole group and a short last one; and
// for stream-K a k of 512, each block 8 or 16 stages, shared out.
static const op_shape shapes_[] = {
    {{256, 128, 128}, 0, 0}, {{136, 72, 200}, 0, 0}, {{392, 200, 264}, 0, 0}, {{8, 8, 8}, 0, 0}, {{512, 768, 64}, 0, 0},
    {{256, 256, 512}, 0, WIDE_AND_PERSISTENT_}, {{1160, 264, 8}, 0, PERSISTENT_}, {{256, 512, 384}, 0, STREAMK_},
};

const op_family op_linear_f16 = {
    .name = "linear-f16",
    .wrappers = "wgpt_linear_f16_forward, _backward_input, _backward_weight, wgpt_linear_backward_bias "
                "(model/linear_f16.h, model/linear.h)",
    .reference = "double sums of the f16-rounded operands (ref_f16_from_f32, tests/ref/f16.c)",
    .tolerance = "k 2^-24 sum|a_i b_i| (f16 products are exact in f32; the f32 accumulation), doubled where a pass "
                 "accumulates",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
