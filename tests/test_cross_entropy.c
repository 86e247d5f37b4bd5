// test_cross_entropy.c: the special cases of kernels/06_cross_entropy.wgsl
// through src/model/cross_entropy.h (the run-and-compare cases are the
// "cross-entropy" family of the op registry, tests/ops/cross_entropy.c, run
// by test_ops; these reuse its cases): invalid targets, large logits,
// bit-identical repeats. The f16 mode's gradient (crossentropy_backward_f16)
// must be the vec4 kernel's rounded to f16, bit for bit, and the train step's
// fused kernel (crossentropy_fused_f16) must write what the forward and
// backward_f16 write, bit for bit, on the CPU twins and on the GPU kernels.
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
#include "test_util.h"

#include "model/cross_entropy.h"
#include "ops/cross_entropy.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device
static wgpt_gpu *SMALL;  // max_binding 32 KiB: logits (., 128) bind 64 rows at a time
#define SMALL_BINDING (32u * 1024u)

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = SMALL_BINDING};
    SMALL = tu_gpu_open(&o);
    return 0;
}

// Repeats are bit-identical: losses, lse, mean and dlogits.
static void deterministic(void **st) {
    (void)st;
    ce_shape s = {2, 37, 1000, 1024};
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    float *logits = malloc(nl * 4);
    uint32_t *tg = malloc(BT * 4);
    int *itg = malloc(BT * sizeof *itg);
    ce_make_inputs(s, logits, tg, itg);
    ce_run a = ce_run_ops(G, s, logits, tg), b = ce_run_ops(G, s, logits, tg);
    assert_memory_equal(a.losses, b.losses, BT * 4);
    assert_memory_equal(a.lse, b.lse, BT * 4);
    assert_memory_equal(&a.mean, &b.mean, 4);
    assert_memory_equal(a.dlogits, b.dlogits, nl * 4);
    ce_run_free(&a), ce_run_free(&b);
    free(logits), free(tg), free(itg);
}

// A target >= V: that row's loss is NaN (so is the mean), the flag and the
// largest bad target are in the status, the other rows are unaffected.
static void bad_target_flagged(void **st) {
    (void)st;
    ce_shape s = {3, 50, 97, 128};
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    float *logits = malloc(nl * 4), *probs = malloc(nl * 4), *losses = malloc(BT * 4);
    uint32_t *tg = malloc(BT * 4);
    int *itg = malloc(BT * sizeof *itg);
    ce_make_inputs(s, logits, tg, itg);
    ref_softmax_crossentropy_forward(losses, probs, logits, itg, (int)s.B, (int)s.T, (int)s.V, (int)s.Vp);
    tg[7] = s.V;        // a padded column
    tg[100] = 123456;   // far out, in the second chunk on SMALL
    ce_run r = ce_run_ops(SMALL, s, logits, tg);
    for (uint32_t i = 0; i < BT; i++) {
        if (i == 7 || i == 100) {
            if (!isnan(r.losses[i])) fail_msg("row %u: loss %g, expected NaN", i, r.losses[i]);
        } else if (!(fabsf(r.losses[i] - losses[i]) <= 1e-5f)) {
            fail_msg("row %u: loss %g, expected %g", i, r.losses[i], losses[i]);
        }
    }
    assert_true(isnan(r.mean));
    assert_int_equal(r.status[0], WGPT_STATUS_BAD_TARGET);
    assert_int_equal(r.status[1], 0);
    assert_int_equal(r.status[2], 123456);
    char msg[128];
    assert_int_equal(wgpt_input_status_message(r.status, s.V, msg, sizeof msg), 1);
    assert_string_equal(msg, "target id 123456 out of range [0, 97)");
    // Padded columns still exact zeros, and no NaN leaks into the gradient.
    for (size_t i = 0; i < nl; i++)
        if (!isfinite(r.dlogits[i])) fail_msg("dlogits[%zu] = %g", i, r.dlogits[i]);
    ce_run_free(&r);
    free(logits), free(probs), free(losses), free(tg), free(itg);
}

// Large logit magnitudes: max subtraction keeps exp finite; a one-hot-like row
// (one logit far above the rest) has loss ~0 for that target.
static void stable_for_large_logits(void **st) {
    (void)st;
    ce_shape s = {1, 3, 300, 320};
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    float *logits = malloc(nl * 4), *probs = malloc(nl * 4), *losses = malloc(BT * 4);
    uint32_t tg[3] = {5, 299, 17};
    int itg[3] = {5, 299, 17};
    for (size_t i = 0; i < nl; i++) logits[i] = (i % s.Vp) < s.V ? tu_randf(-80, 80) : NAN;
    logits[0 * s.Vp + 5] = 1000.0f;  // row 0: loss ~ 0
    logits[1 * s.Vp + 3] = 1000.0f;  // row 1: target far below the max: loss ~ 1000 - x
    ref_softmax_crossentropy_forward(losses, probs, logits, itg, (int)s.B, (int)s.T, (int)s.V, (int)s.Vp);
    ce_run r = ce_run_ops(G, s, logits, tg);
    // Magnitudes up to ~1100: one ulp of the result is 1.2e-4.
    tu_assert_close("losses, large logits", r.losses, losses, BT, 1e-5f, 2.4e-7f);
    for (size_t i = 0; i < nl; i++)
        if (!isfinite(r.dlogits[i])) fail_msg("dlogits[%zu] = %g", i, r.dlogits[i]);
    ce_run_free(&r);
    free(logits), free(probs), free(losses);
}

// The f16 mode's gradient (crossentropy_backward_f16, written as f16 into a
// buffer of its own) is the f32 kernel's, rounded to nearest even: bit for
// bit, padded columns 0, a bad target's row too (no column matches), and on
// the small-binding device in row chunks.
static void f16_gradient_(wgpt_gpu *g, ce_shape s, int expect_steps) {
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    float *logits = malloc(nl * 4);
    uint32_t *tg = malloc(BT * 4);
    int *itg = malloc(BT * sizeof *itg);
    ce_make_inputs(s, logits, tg, itg);
    tg[1] = s.V + 3;  // flagged by the forward; its gradient is the softmax alone
    ce_run r = ce_run_ops(g, s, logits, tg);
    wgpt_buf *bl = tu_upload(g, logits, nl * 4, "logits"), *bt = tu_upload(g, tg, BT * 4, "targets");
    wgpt_buf *blse = tu_upload(g, r.lse, BT * 4, "lse"), *bd = tu_upload(g, NULL, nl * 2, "dlogits f16");
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_crossentropy_backward_f16(g, &op, (wgpt_view){bd, 0, 0}, (wgpt_view){bl, 0, 0},
                                            (wgpt_view){blse, 0, 0}, (wgpt_view){bt, 0, 0}, BT, s.V, s.Vp,
                                            1.0f / (float)BT));
    assert_int_equal(op.n, expect_steps);
    TU_OK(g, wgpt_op_record(g, &op));
    uint16_t *got = (uint16_t *)tu_download(g, bd, nl * 2);
    for (size_t i = 0; i < nl; i++)
        if (got[i] != ref_f16_from_f32(r.dlogits[i]))
            fail_msg("V=%u Vp=%u: dlogits16[%zu] = 0x%04x, f16(%.9g) = 0x%04x", s.V, s.Vp, i, got[i], r.dlogits[i],
                     ref_f16_from_f32(r.dlogits[i]));
    // the logits it read are left as they were
    float *after = tu_download(g, bl, nl * 4);
    assert_memory_equal(after, logits, nl * 4);
    // refused: Vp not a multiple of 8, dlogits16 in the logits' buffer
    wgpt_op bad;
    wgpt_op_init(&bad);
    assert_int_equal(wgpt_crossentropy_backward_f16(g, &bad, (wgpt_view){bd, 0, 0}, (wgpt_view){bl, 0, 0},
                                                    (wgpt_view){blse, 0, 0}, (wgpt_view){bt, 0, 0}, BT, s.V, s.Vp - 4,
                                                    1.0f),
                     -1);
    assert_non_null(strstr(wgpt_gpu_error(g), "multiple of 8"));
    assert_int_equal(wgpt_crossentropy_backward_f16(g, &bad, (wgpt_view){bl, 0, 0}, (wgpt_view){bl, 0, 0},
                                                    (wgpt_view){blse, 0, 0}, (wgpt_view){bt, 0, 0}, BT, s.V, s.Vp,
                                                    1.0f),
                     -1);
    assert_non_null(strstr(wgpt_gpu_error(g), "another buffer"));
    assert_int_equal(bad.n, 0);
    wgpt_op_free(&op);
    free(got), free(after);
    wgpt_buf_free(bl), wgpt_buf_free(bt), wgpt_buf_free(blse), wgpt_buf_free(bd);
    ce_run_free(&r);
    free(logits), free(tg), free(itg);
}

static void f16_gradient_is_the_f32_one_rounded(void **st) {
    (void)st;
    f16_gradient_(G, (ce_shape){2, 3, 37, 40}, 1);      // V not a multiple of 8, padding in the last step
    f16_gradient_(G, (ce_shape){1, 5, 1000, 1024}, 1);  // several steps a thread
    f16_gradient_(SMALL, (ce_shape){2, 100, 100, 128}, 4);  // 200 rows in chunks of 64
}

// Bit for bit, or both NaN (a NaN's payload is not a value).
static int same_f32_(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }
static int same_f16_(uint16_t a, uint16_t b) { return a == b || (isnan(ref_f32_from_f16(a)) && isnan(ref_f32_from_f16(b))); }

// What one path wrote: losses, lse (BT), mean, status, dlogits16 (BT, Vp).
typedef struct ce_out16 {
    float *losses, *lse, mean;
    uint32_t status[WGPT_STATUS_WORDS];
    uint16_t *d16;
    int steps;
} ce_out16;

// The f16 training path on g: fused (crossentropy_fused_f16 and the mean) or
// the two kernels (forward, mean, backward_f16), on fresh buffers.
static ce_out16 run16_(wgpt_gpu *g, ce_shape s, const float *logits, const uint32_t *targets, int fused) {
    uint32_t BT = s.B * s.T;
    uint64_t nl = (uint64_t)BT * s.Vp;
    ce_out16 o = {0};
    wgpt_buf *bl = tu_upload(g, logits, nl * 4, "logits"), *bt = tu_upload(g, targets, BT * 4, "targets");
    wgpt_buf *bloss = tu_upload(g, NULL, BT * 4, "losses"), *blse = tu_upload(g, NULL, BT * 4, "lse");
    wgpt_buf *bst = tu_upload(g, NULL, WGPT_STATUS_BYTES, "status"), *bmean = tu_upload(g, NULL, 4, "mean");
    uint16_t *nan16 = malloc(nl * 2);  // every value must be written: padding included
    for (size_t i = 0; i < nl; i++) nan16[i] = 0x7e00;
    wgpt_buf *bd = tu_upload(g, nan16, nl * 2, "dlogits f16");
    free(nan16);
    wgpt_view vl = {bl, 0, 0}, vt = {bt, 0, 0}, vloss = {bloss, 0, 0}, vlse = {blse, 0, 0}, vst = {bst, 0, 0};
    wgpt_view vd = {bd, 0, 0};
    float dloss = 1.0f / (float)BT;
    wgpt_op op;
    wgpt_op_init(&op);
    if (fused) {
        TU_OK(g, wgpt_crossentropy_fused_f16(g, &op, vloss, vlse, vst, vd, vl, vt, BT, s.V, s.Vp, dloss));
        o.steps = op.n;
    } else {
        TU_OK(g, wgpt_crossentropy_forward(g, &op, vloss, vlse, vst, vl, vt, BT, s.V, s.Vp));
    }
    TU_OK(g, wgpt_loss_mean(g, &op, (wgpt_view){bmean, 0, 0}, vloss, BT));
    if (!fused) TU_OK(g, wgpt_crossentropy_backward_f16(g, &op, vd, vl, vlse, vt, BT, s.V, s.Vp, dloss));
    TU_OK(g, wgpt_op_record(g, &op));
    o.losses = tu_download(g, bloss, BT * 4);
    o.lse = tu_download(g, blse, BT * 4);
    o.d16 = (uint16_t *)tu_download(g, bd, nl * 2);
    float *after = tu_download(g, bl, nl * 4);
    assert_memory_equal(after, logits, nl * 4);  // the logits are left as they were
    TU_OK(g, wgpt_buf_download(g, bmean, 0, &o.mean, 4));
    TU_OK(g, wgpt_buf_download(g, bst, 0, o.status, WGPT_STATUS_BYTES));
    wgpt_op_free(&op);
    free(after);
    wgpt_buf_free(bl), wgpt_buf_free(bt), wgpt_buf_free(bloss), wgpt_buf_free(blse), wgpt_buf_free(bst);
    wgpt_buf_free(bmean), wgpt_buf_free(bd);
    return o;
}

static void ce_out16_free_(ce_out16 *o) { free(o->losses), free(o->lse), free(o->d16); }

// The fused kernel against the two-kernel path on g (bit for bit: the same
// fold, the same gradient function) and the finite rows against the C
// reference (the atol of check_ on lse and the losses; the gradient within
// check_'s bound plus half an f16 ulp). Row 1's target is V + 3 (NaN loss,
// the status words); row 2 holds a NaN logit and row 3 an inf among the real
// columns (where BT > 3): whatever the two kernels make of them, so must the fused one.
static void fused_case_(wgpt_gpu *g, ce_shape s, int expect_steps) {
    uint32_t BT = s.B * s.T;
    size_t nl = (size_t)BT * s.Vp;
    ce_ref c = ce_ref_case(s);
    float *logits = c.logits, *dl = c.dl, *losses = c.losses, *lse = c.lse, *dloss = c.dloss;
    uint32_t *tg = c.tg;
    tg[1] = s.V + 3;
    if (BT > 3) logits[2 * s.Vp + s.V / 2] = NAN, logits[3 * s.Vp + s.V - 1] = INFINITY;
    ce_out16 a = run16_(g, s, logits, tg, 0), f = run16_(g, s, logits, tg, 1);
    assert_int_equal(f.steps, expect_steps);
    for (uint32_t i = 0; i < BT; i++)
        if (!same_f32_(f.losses[i], a.losses[i]) || !same_f32_(f.lse[i], a.lse[i]))
            fail_msg("V=%u Vp=%u row %u: fused loss %.9g lse %.9g, two kernels %.9g %.9g", s.V, s.Vp, i, f.losses[i],
                     f.lse[i], a.losses[i], a.lse[i]);
    assert_true(same_f32_(f.mean, a.mean));
    assert_memory_equal(f.status, a.status, WGPT_STATUS_BYTES);
    assert_int_equal(f.status[0], WGPT_STATUS_BAD_TARGET);
    assert_int_equal(f.status[2], s.V + 3);
    for (size_t i = 0; i < nl; i++)
        if (!same_f16_(f.d16[i], a.d16[i]))
            fail_msg("V=%u Vp=%u: dlogits16[%zu] fused 0x%04x, two kernels 0x%04x", s.V, s.Vp, i, f.d16[i], a.d16[i]);
    for (uint32_t r = 0; r < BT; r++) {
        if (r == 1) {
            assert_true(isnan(f.losses[r]));
            continue;
        }
        if (BT > 3 && (r == 2 || r == 3)) continue;
        if (!(fabsf(f.lse[r] - lse[r]) <= 1e-5f) || !(fabsf(f.losses[r] - losses[r]) <= 1e-5f))
            fail_msg("row %u: lse %.9g loss %.9g, reference %.9g %.9g", r, f.lse[r], f.losses[r], lse[r], losses[r]);
        for (uint32_t col = 0; col < s.Vp; col++) {
            float got = ref_f32_from_f16(f.d16[(size_t)r * s.Vp + col]), want = dl[(size_t)r * s.Vp + col];
            if (col >= s.V ? got != 0.0f
                           : !(fabsf(got - want) <= 1.5e-5f * dloss[r] + fabsf(want) * 0x1p-11f + 0x1p-25f))
                fail_msg("row %u col %u: dlogits16 %.9g, reference %.9g", r, col, got, want);
        }
    }
    ce_out16_free_(&a), ce_out16_free_(&f);
    ce_ref_case_free(&c);
}

static void fused_is_the_two_kernels(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU};
    wgpt_gpu *gpu = tu_gpu_open(&o);  // the 256-lane kernels where G has the CPU twins
    wgpt_gpu *devs[] = {G, gpu};
    for (int d = 0; d < 2; d++) {
        wgpt_gpu *g = devs[d];
        fused_case_(g, (ce_shape){2, 3, 37, 40}, 1);        // V not a multiple of 8, padding in the last step
        fused_case_(g, (ce_shape){1, 5, 1000, 1024}, 1);    // several steps a lane, 3 padded steps
        fused_case_(g, (ce_shape){1, 4, 50257, 50304}, 1);  // GPT-2: 13 rounds, a partial last vec4
        fused_case_(g, (ce_shape){2, 7, 256, 256}, 1);      // no padding
    }
    fused_case_(SMALL, (ce_shape){2, 100, 100, 128}, 4);    // 200 rows in chunks of 64
    // the f16 gradient's refusals
    wgpt_buf *b = tu_upload(G, NULL, 4096, "any");
    wgpt_view v = {b, 0, 0};
    wgpt_op bad;
    wgpt_op_init(&bad);
    assert_int_equal(wgpt_crossentropy_fused_f16(G, &bad, v, v, v, v, v, v, 2, 10, 12, 1.0f), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "multiple of 8"));
    assert_int_equal(wgpt_crossentropy_fused_f16(G, &bad, v, v, v, v, v, v, 2, 10, 16, 1.0f), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "another buffer"));
    assert_int_equal(bad.n, 0);
    wgpt_buf_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deterministic),
        cmocka_unit_test(bad_target_flagged),
        cmocka_unit_test(stable_for_large_logits),
        cmocka_unit_test(f16_gradient_is_the_f32_one_rounded),
        cmocka_unit_test(fused_is_the_two_kernels),
    };
    return cmocka_run_group_tests_name("cross_entropy", tests, group_setup, tu_group_teardown);
}
