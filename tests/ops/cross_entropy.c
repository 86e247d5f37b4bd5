// cross_entropy.c: the cross-entropy family of the op registry
// (tests/ops/ops.h): kernels/06_cross_entropy.wgsl through
// src/model/cross_entropy.h (forward, mean, backward as three prepared ops)
// against tests/ref (ref_softmax_crossentropy_forward,
// ref_crossentropy_softmax_backward): padded columns filled with NaN or a
// huge value (they must never change a result), V below and above one
// workgroup's width and GPT-2's 50257 of 50304, logits split into row chunks
// on a device with a small binding limit, rows past 65535 workgroups. Vp a
// multiple of 4 runs the vec4 kernels (with the CPU twins the forward's flat
// twin), other Vp the scalar ones. tests/test_cross_entropy.c keeps the
// special cases (invalid targets, large logits, determinism, the f16
// gradient and the fused kernel, bit for bit) on these helpers.
//
// Tolerances (x = a logit, |x| <= 8 here, so |x - max| <= 16):
//  - lse = max + log(s), s = sum of V exps. WGSL's exp is accurate to
//    3 + 2|x| ulp (<= 35 ulp), and each thread adds ceil(V/256) terms then a
//    log2(256) = 8 level tree: relative error of s <= (35 + ceil(V/256) + 8) *
//    2^-24 <= 3e-6 for V <= 2000. The vec4 forward's online sum is also
//    rescaled by exp(m_old - m_new) each time a thread's max grows, and once by
//    exp(m - M) before the tree: the arguments add up to at most the logit
//    range (16) and exp's error grows with |x|, so the factors together add
//    about 2 * 16 + 3 per rescale ulp more (< 70 ulp for the 13 rounds of GPT-2's
//    vocabulary: 4e-6). For V = 50257 the worst case of the plain sum alone
//    (196 terms a thread) is 1.4e-5, but rounding errors of positive terms do
//    not all point one way: the test holds it to the same atol, with margin on
//    lavapipe. log adds < 2^-21 absolute; lse and the loss
//    (lse - x[target], magnitudes <= 25) one ulp each (2e-6). Total < 1e-5:
//    atol 1e-5 on lse and the losses (the reference is double, rounded once).
//  - backward: prob = exp(x - lse) carries exp's 35 ulp plus lse's 1e-5
//    absolute error as a relative error: <= 1.3e-5 * prob, then (prob - 1)
//    and * dloss round once more. |error| <= 1.3e-5 * dloss + 1 ulp: atol
//    1.5e-5 * dloss, rtol 2^-22.
//  - mean: BT losses (<= 25 each), 256-wide strided sums then a tree: relative
//    (BT/256 + 8 + 1) * 2^-24 of sum|loss| / BT, far below rtol 1e-6.
#include "ops/cross_entropy.h"

#include "model/cross_entropy.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

// The reference keeps no log-sum-exp: computed here in double as it does.
static void ref_lse_(float *lse, const float *logits, uint32_t BT, uint32_t V, uint32_t Vp) {
    for (size_t r = 0; r < BT; r++) {
        const float *l = logits + r * Vp;
        double m = -INFINITY, s = 0.0;
        for (uint32_t i = 0; i < V; i++) m = l[i] > m ? l[i] : m;
        for (uint32_t i = 0; i < V; i++) s += exp(l[i] - m);
        lse[r] = (float)(m + log(s));
    }
}

void ce_run_free(ce_run *r) { free(r->losses), free(r->lse), free(r->dlogits); }

// Forward, mean and backward on g, recorded as three prepared ops.
ce_run ce_run_ops(wgpt_gpu *g, ce_shape s, const float *logits, const uint32_t *targets) {
    ce_run r = {.BT = s.B * s.T};
    uint32_t BT = r.BT;
    uint64_t lbytes = (uint64_t)BT * s.Vp * 4;
    wgpt_buf *bl = tu_upload(g, logits, lbytes, "logits"), *bt = tu_upload(g, targets, BT * 4, "targets");
    wgpt_buf *bloss = tu_upload(g, NULL, BT * 4, "losses"), *blse = tu_upload(g, NULL, BT * 4, "lse");
    wgpt_buf *bst = tu_upload(g, NULL, WGPT_STATUS_BYTES, "status"), *bmean = tu_upload(g, NULL, 4, "mean");
    wgpt_view vl = {bl, 0, 0}, vt = {bt, 0, 0}, vloss = {bloss, 0, 0}, vlse = {blse, 0, 0};
    wgpt_op fwd, mean, bwd;
    wgpt_op_init(&fwd), wgpt_op_init(&mean), wgpt_op_init(&bwd);
    TU_OK(g, wgpt_crossentropy_forward(g, &fwd, vloss, vlse, (wgpt_view){bst, 0, 0}, vl, vt, BT, s.V, s.Vp));
    TU_OK(g, wgpt_loss_mean(g, &mean, (wgpt_view){bmean, 0, 0}, vloss, BT));
    TU_OK(g, wgpt_crossentropy_backward(g, &bwd, vl, vlse, vt, BT, s.V, s.Vp, 1.0f / (float)BT));
    r.fwd_steps = fwd.n, r.bwd_steps = bwd.n;
    TU_OK(g, wgpt_op_record(g, &fwd));
    TU_OK(g, wgpt_op_record(g, &mean));
    TU_OK(g, wgpt_op_record(g, &bwd));
    r.losses = tu_download(g, bloss, BT * 4);
    r.lse = tu_download(g, blse, BT * 4);
    r.dlogits = tu_download(g, bl, lbytes);
    TU_OK(g, wgpt_buf_download(g, bmean, 0, &r.mean, 4));
    TU_OK(g, wgpt_buf_download(g, bst, 0, r.status, WGPT_STATUS_BYTES));
    wgpt_op_free(&fwd), wgpt_op_free(&mean), wgpt_op_free(&bwd);
    wgpt_buf_free(bl), wgpt_buf_free(bt), wgpt_buf_free(bloss), wgpt_buf_free(blse), wgpt_buf_free(bst);
    wgpt_buf_free(bmean);
    return r;
}

// Random logits in [-8, 8); targets cover 0 and V-1. The padded columns hold
// NaN (even rows) or 3e4 (odd rows): a max that skips NaN (as lavapipe's
// does) would still take 3e4, and then every exp(x - 3e4) underflows to 0.
void ce_make_inputs(ce_shape s, float *logits, uint32_t *targets, int *itargets) {
    uint32_t BT = s.B * s.T;
    for (size_t r = 0; r < BT; r++) {
        tu_fill(logits + r * s.Vp, s.V, -8, 8);
        for (uint32_t i = s.V; i < s.Vp; i++) logits[r * s.Vp + i] = r % 2 ? 3e4f : NAN;
        targets[r] = (uint32_t)tu_randf(0, (float)s.V);
        if (targets[r] >= s.V) targets[r] = s.V - 1;
    }
    targets[0] = 0;
    targets[BT - 1] = s.V - 1;
    for (size_t r = 0; r < BT; r++) itargets[r] = (int)targets[r];
}

ce_ref ce_ref_case(ce_shape s) {
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    ce_ref c = {malloc(nl * 4), malloc(nl * 4), calloc(nl, 4), malloc(BT * 4), malloc(BT * 4), malloc(BT * 4),
                malloc(BT * 4), malloc(BT * sizeof(int))};
    ce_make_inputs(s, c.logits, c.tg, c.itg);
    ref_softmax_crossentropy_forward(c.losses, c.probs, c.logits, c.itg, (int)s.B, (int)s.T, (int)s.V, (int)s.Vp);
    ref_lse_(c.lse, c.logits, BT, s.V, s.Vp);
    for (uint32_t i = 0; i < BT; i++) c.dloss[i] = 1.0f / (float)BT;
    ref_crossentropy_softmax_backward(c.dl, c.dloss, c.probs, c.itg, (int)s.B, (int)s.T, (int)s.V, (int)s.Vp);
    return c;
}

void ce_ref_case_free(ce_ref *c) {
    free(c->logits), free(c->probs), free(c->dl), free(c->losses), free(c->lse), free(c->dloss), free(c->tg);
    free(c->itg);
}

// Runs shape s on g and checks losses, lse, mean, dlogits against the reference.
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *sh) {
    (void)v;
    const ce_shape s = {sh->d[0], sh->d[1], sh->d[2], sh->d[3]};
    const int expect_steps = (int)sh->d[4];
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    ce_ref c = ce_ref_case(s);
    float *logits = c.logits, *dl = c.dl, *losses = c.losses, *lse = c.lse;
    uint32_t *tg = c.tg;
    double mean = 0;
    for (uint32_t i = 0; i < BT; i++) mean += losses[i];
    float fmean = (float)(mean / BT);

    ce_run r = ce_run_ops(g, s, logits, tg);
    assert_int_equal(r.fwd_steps, expect_steps);
    assert_int_equal(r.bwd_steps, expect_steps);
    tu_assert_close("lse", r.lse, lse, BT, 1e-5f, 0);
    tu_assert_close("losses", r.losses, losses, BT, 1e-5f, 0);
    tu_assert_close("mean loss", &r.mean, &fmean, 1, 0, 1e-6f);
    // dl's padded columns are 0 in the reference (calloc, never touched): the
    // GPU must overwrite the NaN there with exact zeros.
    tu_assert_close("dlogits", r.dlogits, dl, nl, 1.5e-5f / (float)BT, 0x1p-22f);
    for (uint32_t i = 0; i < WGPT_STATUS_WORDS; i++) assert_int_equal(r.status[i], 0);
    ce_run_free(&r);
    ce_ref_case_free(&c);
}


static const op_variant variants_[] = {
    {.name = "gpu", .kernels = WGPT_KERNELS_GPU},
    {.name = "cpu", .kernels = WGPT_KERNELS_CPU},
};

// (B, T, V, Vp, dispatches per op). V below one workgroup; above it (every
// thread loops over several columns); GPT-2's vocabulary (V = 50257 padded to
// 50304: the vec4 forward folds 13 rounds of loads into its running max and
// sum; the last real vec4 is partial); Vp % 4 != 0 (rows not 16-byte
// aligned: the scalar kernels); 150 rows of 512 bytes on 32 KiB bindings:
// 64-row chunks (64, 64, 22); 66,000 rows: the 2D grid past 65535 workgroups.
static const op_shape shapes_[] = {
    {{2, 37, 97, 128, 1}, 0, 0},
    {{1, 5, 2000, 2048, 1}, 0, 0},
    {{1, 3, 50257, 50304, 1}, 0, 0},
    {{2, 37, 97, 102, 1}, 0, 0},
    {{1, 5, 2000, 2001, 1}, 0, 0},
    {{3, 50, 97, 128, 3}, 32 * 1024, 0},
    {{2, 33000, 5, 8, 1}, 0, 0},
};

const op_family op_cross_entropy = {
    .name = "cross-entropy",
    .wrappers = "wgpt_crossentropy_forward, wgpt_loss_mean, wgpt_crossentropy_backward (model/cross_entropy.h)",
    .reference = "ref_softmax_crossentropy_forward, ref_crossentropy_softmax_backward (tests/ref/layers.c)",
    .tolerance = "lse and losses atol 1e-5 (exp's 35 ulp and the sum's chain); dlogits 1.5e-5 x dloss, rtol 2^-22; "
                 "mean rtol 1e-6",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
