// test_ref.c: the plain C reference of the GPT-2 math checks itself, without a
// GPU: finite differences against every backward (per layer and through the
// whole model), AdamW on a hand-worked example, init statistics, bad ids.
#include "test_util.h"

#include "ref/gpt2_ref.h"

static int verbose(void) { return getenv("REF_VERBOSE") != NULL; }

// ---------------------------------------------------------------------------
// Finite differences

// A scalar objective of the current contents of some float buffers.
typedef double (*objective_fn)(void *ctx);

// Central difference of f in *x. The step is taken in float, so the divisor is
// the step actually taken, not the nominal 2h.
static double fd_grad(objective_fn f, void *ctx, float *x, double h) {
    float x0 = *x, xp = (float)(x0 + h), xm = (float)(x0 - h);
    *x = xp;
    double fp = f(ctx);
    *x = xm;
    double fm = f(ctx);
    *x = x0;
    return (fp - fm) / ((double)xp - (double)xm);
}

// Checks analytic[i] against the central difference in x[i] for every i:
// |fd - analytic| <= atol + rtol * |analytic|. Returns max |analytic|, which
// callers assert is well above atol so the check could actually fail.
static double check_fd(const char *what, objective_fn f, void *ctx, float *x, const float *analytic, size_t n,
                       double h, double atol, double rtol) {
    double maxg = 0.0, maxerr = 0.0;
    for (size_t i = 0; i < n; i++) {
        double fd = fd_grad(f, ctx, &x[i], h), an = analytic[i];
        double err = fabs(fd - an);
        if (err > maxerr) maxerr = err;
        if (fabs(an) > maxg) maxg = fabs(an);
        if (!(err <= atol + rtol * fabs(an)))
            fail_msg("%s: element %zu of %zu: analytic %.9g, finite difference %.9g", what, i, n, an, fd);
    }
    if (verbose()) printf("  %-24s max |grad| %.3g, max |fd - grad| %.3g\n", what, maxg, maxerr);
    return maxg;
}

// sum(out * w) in double: the objective whose gradient in out is w.
static double weighted_sum(const float *out, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * w[i];
    return s;
}

static float *alloc_floats(size_t n) {
    float *p = calloc(n, sizeof *p);
    assert_non_null(p);
    return p;
}

// Per-layer checks: the inputs are O(1), so the outputs are too. Each output
// is rounded to float (relative 6e-8), which perturbs the objective by ~1e-7
// whenever a step changes it; the difference quotient divides that by 2h = 2e-3,
// so its noise is ~1e-4 (measured max 1.4e-4, in the cross-entropy whose losses
// are ~2.4), and the h^2/6 * f''' truncation is ~1e-7. atol 1e-3 plus 1e-3
// relative is thus ~7x above the noise, while the gradients checked are O(0.1..1)
// (each check asserts its largest exceeds 0.1): a flipped sign, a missing term or
// a wrong index changes some gradient by its own size and fails.
#define FD_H 1e-3
#define FD_ATOL 1e-3
#define FD_RTOL 1e-3

// ---------------------------------------------------------------------------
// LayerNorm

typedef struct {
    int N, C;
    float *inp, *w, *b, *out, *mean, *rstd, *dout;
} ln_ctx;

static double ln_objective(void *p) {
    ln_ctx *c = p;
    ref_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return weighted_sum(c->out, c->dout, (size_t)c->N * c->C);
}

static void layernorm_backward_matches_finite_differences(void **state) {
    (void)state;
    ln_ctx c = {.N = 5, .C = 13};
    size_t NC = (size_t)c.N * c.C;
    c.inp = alloc_floats(NC), c.out = alloc_floats(NC), c.dout = alloc_floats(NC);
    c.w = alloc_floats(c.C), c.b = alloc_floats(c.C), c.mean = alloc_floats(c.N), c.rstd = alloc_floats(c.N);
    tu_fill(c.inp, NC, -2.0f, 2.0f);
    for (int i = 0; i < c.C; i++) c.inp[i] += 3.0f;  // a row with a large mean
    tu_fill(c.w, c.C, 0.5f, 1.5f);
    tu_fill(c.b, c.C, -0.5f, 0.5f);
    tu_fill(c.dout, NC, -1.0f, 1.0f);
    ln_objective(&c);
    // the forward itself, in double: (x - mean) / sqrt(var + 1e-5) * w + b
    for (int n = 0; n < c.N; n++) {
        const float *x = c.inp + (size_t)n * c.C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < c.C; i++) m += x[i];
        m /= c.C;
        for (int i = 0; i < c.C; i++) v += (x[i] - m) * (x[i] - m);
        v /= c.C;
        assert_float_equal(c.mean[n], m, 1e-6);
        assert_float_equal(c.rstd[n], 1.0 / sqrt(v + 1e-5), 1e-6);
        for (int i = 0; i < c.C; i++)
            assert_float_equal(c.out[(size_t)n * c.C + i], (x[i] - m) / sqrt(v + 1e-5) * c.w[i] + c.b[i], 1e-6);
    }
    float *dinp = alloc_floats(NC), *dw = alloc_floats(c.C), *db = alloc_floats(c.C);
    ref_layernorm_backward(dinp, dw, db, c.dout, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    assert_true(check_fd("layernorm dinp", ln_objective, &c, c.inp, dinp, NC, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    assert_true(check_fd("layernorm dweight", ln_objective, &c, c.w, dw, c.C, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    assert_true(check_fd("layernorm dbias", ln_objective, &c, c.b, db, c.C, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    free(c.inp), free(c.out), free(c.dout), free(c.w), free(c.b), free(c.mean), free(c.rstd);
    free(dinp), free(dw), free(db);
}

// ---------------------------------------------------------------------------
// Matmul

typedef struct {
    int N, C, OC;
    float *inp, *w, *bias, *out, *dout;
} mm_ctx;

static double mm_objective(void *p) {
    mm_ctx *c = p;
    ref_matmul_forward(c->out, c->inp, c->w, c->bias, c->N, c->C, c->OC);
    return weighted_sum(c->out, c->dout, (size_t)c->N * c->OC);
}

static void matmul_forward_and_backward(void **state) {
    (void)state;
    mm_ctx c = {.N = 6, .C = 7, .OC = 5};
    c.inp = alloc_floats((size_t)c.N * c.C), c.w = alloc_floats((size_t)c.OC * c.C), c.bias = alloc_floats(c.OC);
    c.out = alloc_floats((size_t)c.N * c.OC), c.dout = alloc_floats((size_t)c.N * c.OC);
    tu_fill(c.inp, (size_t)c.N * c.C, -1.0f, 1.0f);
    tu_fill(c.w, (size_t)c.OC * c.C, -1.0f, 1.0f);
    tu_fill(c.bias, c.OC, -1.0f, 1.0f);
    tu_fill(c.dout, (size_t)c.N * c.OC, -1.0f, 1.0f);
    // out = inp @ w^T + bias, element (2, 3) by hand
    mm_objective(&c);
    double want = c.bias[3];
    for (int k = 0; k < c.C; k++) want += (double)c.inp[2 * c.C + k] * c.w[3 * c.C + k];
    assert_float_equal(c.out[2 * c.OC + 3], want, 1e-6);
    float *dinp = alloc_floats((size_t)c.N * c.C), *dw = alloc_floats((size_t)c.OC * c.C), *db = alloc_floats(c.OC);
    ref_matmul_backward(dinp, dw, db, c.dout, c.inp, c.w, c.N, c.C, c.OC);
    size_t n_in = (size_t)c.N * c.C, n_w = (size_t)c.OC * c.C;
    assert_true(check_fd("matmul dinp", mm_objective, &c, c.inp, dinp, n_in, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    assert_true(check_fd("matmul dweight", mm_objective, &c, c.w, dw, n_w, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    assert_true(check_fd("matmul dbias", mm_objective, &c, c.bias, db, c.OC, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    // no bias: forward skips it and backward leaves a NULL dbias alone
    float *dw2 = alloc_floats((size_t)c.OC * c.C);
    memset(dinp, 0, sizeof(float) * (size_t)c.N * c.C);
    ref_matmul_backward(dinp, dw2, NULL, c.dout, c.inp, c.w, c.N, c.C, c.OC);
    tu_assert_close("dweight without bias", dw2, dw, (size_t)c.OC * c.C, 0.0f, 0.0f);
    float *bias = c.bias;
    c.bias = NULL;
    mm_objective(&c);
    want = 0.0;
    for (int k = 0; k < c.C; k++) want += (double)c.inp[2 * c.C + k] * c.w[3 * c.C + k];
    assert_float_equal(c.out[2 * c.OC + 3], want, 1e-6);
    free(c.inp), free(c.w), free(bias), free(c.out), free(c.dout), free(dinp), free(dw), free(db), free(dw2);
}

// ---------------------------------------------------------------------------
// Attention

typedef struct {
    int B, T, C, NH;
    float *qkv, *out, *preatt, *att, *dout;
} att_ctx;

static double att_objective(void *p) {
    att_ctx *c = p;
    ref_attention_forward(c->out, c->preatt, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return weighted_sum(c->out, c->dout, (size_t)c->B * c->T * c->C);
}

static void attention_backward_matches_finite_differences(void **state) {
    (void)state;
    att_ctx c = {.B = 2, .T = 5, .C = 12, .NH = 3};
    int hs = c.C / c.NH;
    size_t n_qkv = (size_t)c.B * c.T * 3 * c.C, n_out = (size_t)c.B * c.T * c.C;
    size_t n_att = (size_t)c.B * c.NH * c.T * c.T;
    c.qkv = alloc_floats(n_qkv), c.out = alloc_floats(n_out), c.dout = alloc_floats(n_out);
    c.preatt = alloc_floats(n_att), c.att = alloc_floats(n_att);
    tu_fill(c.qkv, n_qkv, -1.5f, 1.5f);
    tu_fill(c.dout, n_out, -1.0f, 1.0f);
    att_objective(&c);
    // causal softmax rows: sum to 1 over t2 <= t, exactly 0 after t
    for (int r = 0; r < c.B * c.NH * c.T; r++) {
        int t = r % c.T;
        double s = 0.0;
        for (int t2 = 0; t2 < c.T; t2++) {
            if (t2 > t) assert_true(c.att[(size_t)r * c.T + t2] == 0.0f && c.preatt[(size_t)r * c.T + t2] == 0.0f);
            s += c.att[(size_t)r * c.T + t2];
        }
        assert_float_equal(s, 1.0, 1e-6);
    }
    // position 0 attends only to itself: its output is its own v
    for (int h = 0; h < c.NH; h++)
        for (int i = 0; i < hs; i++) assert_float_equal(c.out[h * hs + i], c.qkv[2 * c.C + h * hs + i], 1e-6);
    // preatt (b=1, h=2, t=4, t2=1) by hand: q.k / sqrt(hs)
    double dot = 0.0;
    for (int i = 0; i < hs; i++)
        dot += (double)c.qkv[((size_t)1 * c.T + 4) * 3 * c.C + 2 * hs + i] *
               c.qkv[((size_t)1 * c.T + 1) * 3 * c.C + c.C + 2 * hs + i];
    assert_float_equal(c.preatt[(((size_t)1 * c.NH + 2) * c.T + 4) * c.T + 1], dot / sqrt(hs), 1e-6);

    float *dqkv = alloc_floats(n_qkv), *dpre = alloc_floats(n_att), *datt = alloc_floats(n_att);
    ref_attention_backward(dqkv, dpre, datt, c.dout, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    // finite differences cover q, k and v of every head, and causality: a
    // future k or v has zero effect, and must get zero gradient
    assert_true(check_fd("attention dqkv", att_objective, &c, c.qkv, dqkv, n_qkv, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    // datt = dout . v, and each softmax row's dpreatt sums to 0
    double want = 0.0;
    for (int i = 0; i < hs; i++)
        want += (double)c.dout[((size_t)0 * c.T + 3) * c.C + 1 * hs + i] *
                c.qkv[((size_t)0 * c.T + 2) * 3 * c.C + 2 * c.C + 1 * hs + i];
    assert_float_equal(datt[(((size_t)0 * c.NH + 1) * c.T + 3) * c.T + 2], want, 1e-6);
    for (int r = 0; r < c.B * c.NH * c.T; r++) {
        double s = 0.0;
        for (int t2 = 0; t2 < c.T; t2++) s += dpre[(size_t)r * c.T + t2];
        assert_float_equal(s, 0.0, 1e-6);
    }
    // datt and dpreatt are outputs only: garbage in them does not reach dqkv
    float *dqkv2 = alloc_floats(n_qkv);
    for (size_t i = 0; i < n_att; i++) dpre[i] = datt[i] = 100.0f;
    ref_attention_backward(dqkv2, dpre, datt, c.dout, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    tu_assert_close("dqkv with garbage in datt/dpreatt", dqkv2, dqkv, n_qkv, 0.0f, 0.0f);
    free(c.qkv), free(c.out), free(c.dout), free(c.preatt), free(c.att), free(dqkv), free(dpre), free(datt);
    free(dqkv2);
}

// ---------------------------------------------------------------------------
// GELU

typedef struct {
    size_t n;
    float *inp, *out, *dout;
} gelu_ctx;

static double gelu_objective(void *p) {
    gelu_ctx *c = p;
    ref_gelu_forward(c->out, c->inp, c->n);
    return weighted_sum(c->out, c->dout, c->n);
}

static void gelu_values_and_backward(void **state) {
    (void)state;
    // tanh-approximation values (computed in double with the formula of the header)
    float x[4] = {0.0f, 1.0f, -2.0f, 3.0f}, y[4];
    ref_gelu_forward(y, x, 4);
    assert_float_equal(y[0], 0.0, 0.0);
    assert_float_equal(y[1], 0.8411919906, 1e-7);
    assert_float_equal(y[2], -0.0454023059, 1e-8);
    assert_float_equal(y[3], 2.9963626079, 1e-6);
    gelu_ctx c = {.n = 64};
    c.inp = alloc_floats(c.n), c.out = alloc_floats(c.n), c.dout = alloc_floats(c.n);
    tu_fill(c.inp, c.n, -4.0f, 4.0f);
    tu_fill(c.dout, c.n, -1.0f, 1.0f);
    float *dinp = alloc_floats(c.n);
    for (size_t i = 0; i < c.n; i++) dinp[i] = 0.25f;  // accumulates onto what is there
    ref_gelu_backward(dinp, c.inp, c.dout, c.n);
    for (size_t i = 0; i < c.n; i++) dinp[i] -= 0.25f;
    assert_true(check_fd("gelu dinp", gelu_objective, &c, c.inp, dinp, c.n, FD_H, FD_ATOL, FD_RTOL) > 0.1);
    free(c.inp), free(c.out), free(c.dout), free(dinp);
}

// ---------------------------------------------------------------------------
// Softmax + cross-entropy with a padded vocabulary

typedef struct {
    int B, T, V, Vp;
    float *logits, *probs, *losses, *dlosses;
    int *targets;
} ce_ctx;

static double ce_objective(void *p) {
    ce_ctx *c = p;
    ref_softmax_crossentropy_forward(c->losses, c->probs, c->logits, c->targets, c->B, c->T, c->V, c->Vp);
    return weighted_sum(c->losses, c->dlosses, (size_t)c->B * c->T);
}

static void softmax_crossentropy_with_padding(void **state) {
    (void)state;
    ce_ctx c = {.B = 2, .T = 3, .V = 11, .Vp = 16};
    size_t BT = (size_t)c.B * c.T, n = BT * c.Vp;
    c.logits = alloc_floats(n), c.probs = alloc_floats(n), c.losses = alloc_floats(BT), c.dlosses = alloc_floats(BT);
    c.targets = calloc(BT, sizeof(int));
    assert_non_null(c.targets);
    tu_fill(c.logits, n, -3.0f, 3.0f);
    // padded logits are never read: NaN there would poison any sum they entered
    for (size_t r = 0; r < BT; r++)
        for (int i = c.V; i < c.Vp; i++) c.logits[r * c.Vp + i] = NAN;
    for (size_t r = 0; r < BT; r++) c.targets[r] = (int)(r * 7 % (size_t)c.V);
    c.targets[BT - 1] = c.V - 1;  // the last valid id, right before the padding
    tu_fill(c.dlosses, BT, 0.5f, 1.5f);
    ce_objective(&c);
    for (size_t r = 0; r < BT; r++) {
        const float *p = c.probs + r * c.Vp;
        double s = 0.0;
        for (int i = 0; i < c.V; i++) s += p[i];
        assert_float_equal(s, 1.0, 1e-6);
        for (int i = c.V; i < c.Vp; i++) assert_true(p[i] == 0.0f);
        assert_true(isfinite(c.losses[r]));
        assert_float_equal(c.losses[r], -log(p[c.targets[r]]), 1e-5);
    }
    // other padding values give bit-identical probs and losses
    float *probs1 = alloc_floats(n), *losses1 = alloc_floats(BT);
    memcpy(probs1, c.probs, sizeof(float) * n);
    memcpy(losses1, c.losses, sizeof(float) * BT);
    for (size_t r = 0; r < BT; r++)
        for (int i = c.V; i < c.Vp; i++) c.logits[r * c.Vp + i] = 1e30f;
    ce_objective(&c);
    tu_assert_close("probs, padding 1e30", c.probs, probs1, n, 0.0f, 0.0f);
    tu_assert_close("losses, padding 1e30", c.losses, losses1, BT, 0.0f, 0.0f);
    // backward: finite differences over the valid columns of every row;
    // the padded columns are left exactly as they were (0 here)
    float *dlogits = alloc_floats(n);
    ref_crossentropy_softmax_backward(dlogits, c.dlosses, c.probs, c.targets, c.B, c.T, c.V, c.Vp);
    double maxg = 0.0;
    for (size_t r = 0; r < BT; r++) {
        double g = check_fd("crossentropy dlogits", ce_objective, &c, c.logits + r * c.Vp, dlogits + r * c.Vp,
                            (size_t)c.V, FD_H, FD_ATOL, FD_RTOL);
        if (g > maxg) maxg = g;
        for (int i = c.V; i < c.Vp; i++) assert_true(dlogits[r * c.Vp + i] == 0.0f);
    }
    assert_true(maxg > 0.1);
    free(c.logits), free(c.probs), free(c.losses), free(c.dlosses), free(c.targets);
    free(probs1), free(losses1), free(dlogits);
}

// ---------------------------------------------------------------------------
// The whole model

// Sizes that are multiples of nothing in particular: hs = 16, T < maxT,
// V < Vp, and 3 heads.
static const ref_gpt2_config tiny = {
    .max_seq_len = 40, .vocab_size = 97, .padded_vocab_size = 128, .num_layers = 2, .num_heads = 3, .channels = 48,
};
#define TINY_B 2
#define TINY_T 37

static void random_ids(int *ids, size_t n, int V) {
    for (size_t i = 0; i < n; i++) ids[i] = (int)tu_randf(0.0f, (float)V) % V;
}

typedef struct {
    ref_gpt2 *m;
    const int *tokens, *targets;
} model_ctx;

// The mean loss summed in double from the per-position losses: the float that
// ref_gpt2_forward returns would add its own rounding (~5e-7 at loss ~4.6).
static double model_objective(void *p) {
    model_ctx *c = p;
    float loss = ref_gpt2_forward(c->m, c->tokens, c->targets);
    assert_true(isfinite(loss));
    int N = c->m->B * c->m->T;
    double s = 0.0;
    for (int i = 0; i < N; i++) s += c->m->acts.losses[i];
    return s / N;
}

// Whole-model check. The init is roughened (layernorm weights around 1, biases
// and weights O(0.1)) so that no gradient is zero by symmetry and none of the
// terms a bias or layernorm weight adds is hidden by its init value.
//
// Tolerance, per element: |fd - grad| <= 5e-5 + 1e-2 * |grad|. Why: the model
// is float32, and each per-position loss (~4.6) is rounded to float (ulp
// 4.8e-7), so the mean over the 74 positions carries ~1.5e-8 of rounding noise
// that changes with every perturbation; the central difference divides it by
// 2h = 2e-3, i.e. ~1e-5 of noise in each fd value (measured: max |fd - grad|
// 2e-5 over the sampled elements). atol 5e-5 is well above that; 1e-2 relative
// covers the h^2 truncation error. Gradients here are 1e-4..1e-1, so an element
// with a tiny gradient alone proves little; but in each tensor one checked
// element is the largest |grad| of 64 random candidates, and the test asserts
// it exceeds 50 * atol = 2.5e-3. A flipped sign, a missing term or a wrong index
// in a backward changes such a gradient by about its own size (a sign flip by
// 2|grad| >= 5e-3), against a tolerance of 5e-5 + 1e-2 |grad| <~ 1.5e-3 at the
// largest gradients seen: it fails.
// A second check per tensor moves ALL its elements at once along random signs
// (L2 step 0.03): the loss change must match grad . step to 1% (measured
// <1e-3), which catches a wrong gradient in any element, not only the sampled.
#define MODEL_H 1e-3
#define MODEL_ATOL 5e-5
#define MODEL_RTOL 1e-2

static void model_backward_matches_finite_differences(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, TINY_B, TINY_T), 0);
    ref_gpt2_init_params(&m, 1234);
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        float *p = m.param_ptr[i];
        for (size_t j = 0; j < m.param_sizes[i]; j++) {
            if (i == REF_LN1W || i == REF_LN2W || i == REF_LNFW) p[j] = tu_randf(0.6f, 1.4f);
            else if (i == REF_WTE || i == REF_WPE) p[j] *= 5.0f;
            else p[j] += tu_randf(-0.1f, 0.1f);
        }
    }
    int tokens[TINY_B * TINY_T], targets[TINY_B * TINY_T];
    random_ids(tokens, TINY_B * TINY_T, tiny.vocab_size);
    random_ids(targets, TINY_B * TINY_T, tiny.vocab_size);
    model_ctx ctx = {&m, tokens, targets};
    ref_gpt2_zero_grad(&m);
    model_objective(&ctx);
    assert_int_equal(ref_gpt2_backward(&m), 0);
    float *grads = alloc_floats(m.num_params);
    memcpy(grads, m.grads, sizeof(float) * m.num_params);

    // Rows no input reaches have exactly zero gradient: padded wte rows (only
    // the ignored logits read them) and wpe rows past T.
    const float *gwte = grads + (m.param_ptr[REF_WTE] - m.params);
    const float *gwpe = grads + (m.param_ptr[REF_WPE] - m.params);
    for (size_t j = (size_t)tiny.vocab_size * tiny.channels; j < m.param_sizes[REF_WTE]; j++)
        assert_true(gwte[j] == 0.0f);
    for (size_t j = (size_t)TINY_T * tiny.channels; j < m.param_sizes[REF_WPE]; j++) assert_true(gwpe[j] == 0.0f);

    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        float *p = m.param_ptr[i];
        const float *g = grads + (p - m.params);
        size_t n = m.param_sizes[i];
        if (i == REF_WPE) n = (size_t)TINY_T * tiny.channels;  // the rows that are used
        // Elements: two at random, and the largest |grad| of 64 random candidates.
        size_t pick[3];
        pick[0] = (size_t)tu_randf(0.0f, (float)n) % n;
        pick[1] = (size_t)tu_randf(0.0f, (float)n) % n;
        pick[2] = pick[0];
        for (int k = 0; k < 64; k++) {
            size_t j = (size_t)tu_randf(0.0f, (float)n) % n;
            if (fabsf(g[j]) > fabsf(g[pick[2]])) pick[2] = j;
        }
        for (int k = 0; k < 3; k++) {
            size_t j = pick[k];
            double fd = fd_grad(model_objective, &ctx, &p[j], MODEL_H);
            if (verbose())
                printf("  %-9s [%6zu] grad % .6e  fd % .6e  |diff| %.2e\n", ref_gpt2_param_names[i], j, g[j], fd,
                       fabs(fd - g[j]));
            if (!(fabs(fd - g[j]) <= MODEL_ATOL + MODEL_RTOL * fabs(g[j])))
                fail_msg("%s[%zu]: analytic %.9g, finite difference %.9g", ref_gpt2_param_names[i], j, g[j], fd);
        }
        if (!(fabsf(g[pick[2]]) > 50 * MODEL_ATOL))
            fail_msg("%s: largest sampled |grad| %.3g is too small for the check to mean anything",
                     ref_gpt2_param_names[i], fabsf(g[pick[2]]));

        // Directional derivative along random signs over the whole tensor: a
        // step of 0.03 in L2 norm, big enough to rise above the rounding noise
        // in small tensors, small enough for the cubic error in big ones.
        double h = 0.03 / sqrt((double)m.param_sizes[i]);
        size_t nn = m.param_sizes[i];
        float *p0 = alloc_floats(nn), *pp = alloc_floats(nn), *pm = alloc_floats(nn);
        memcpy(p0, p, sizeof(float) * nn);
        double predicted = 0.0;
        for (size_t j = 0; j < nn; j++) {
            double s = tu_randf(0.0f, 1.0f) < 0.5f ? -h : h;
            pp[j] = (float)(p0[j] + s);
            pm[j] = (float)(p0[j] - s);
            predicted += (double)g[j] * ((double)pp[j] - (double)pm[j]);
        }
        memcpy(p, pp, sizeof(float) * nn);
        double fp = model_objective(&ctx);
        memcpy(p, pm, sizeof(float) * nn);
        double fm = model_objective(&ctx);
        memcpy(p, p0, sizeof(float) * nn);
        if (verbose())
            printf("  %-9s along random signs: predicted % .6e  measured % .6e  rel %.2e\n", ref_gpt2_param_names[i],
                   predicted, fp - fm, fabs((fp - fm) - predicted) / fabs(predicted));
        if (!(fabs((fp - fm) - predicted) <= 1e-2 * fabs(predicted)))
            fail_msg("%s: loss change along random signs %.9g, gradient predicts %.9g", ref_gpt2_param_names[i],
                     fp - fm, predicted);
        free(p0), free(pp), free(pm);
    }
    free(grads);
    ref_gpt2_free(&m);
}

// A second backward after the same forward adds the same gradients again
// (up to rounding: some tensors, wte most, take several += in one backward).
static void model_backward_accumulates(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, 1, 9), 0);
    ref_gpt2_init_params(&m, 7);
    int tokens[9], targets[9];
    random_ids(tokens, 9, tiny.vocab_size);
    random_ids(targets, 9, tiny.vocab_size);
    assert_true(isfinite(ref_gpt2_forward(&m, tokens, targets)));
    ref_gpt2_zero_grad(&m);
    assert_int_equal(ref_gpt2_backward(&m), 0);
    float *once = alloc_floats(m.num_params);
    for (size_t i = 0; i < m.num_params; i++) once[i] = 2.0f * m.grads[i];
    assert_int_equal(ref_gpt2_backward(&m), 0);
    tu_assert_close("grads after two backwards", m.grads, once, m.num_params, 1e-9f, 1e-6f);
    // without targets: logits and probs, loss -1, and no backward
    assert_float_equal(ref_gpt2_forward(&m, tokens, NULL), -1.0, 0.0);
    assert_int_equal(ref_gpt2_backward(&m), -1);
    double s = 0.0;
    for (int i = 0; i < tiny.padded_vocab_size; i++) s += m.acts.probs[i];
    assert_float_equal(s, 1.0, 1e-6);
    free(once);
    ref_gpt2_free(&m);
}

// A fresh GPT-2 init predicts nearly uniformly: logits are lnf . wte rows with
// wte ~ N(0, 0.02), so their spread (~0.02 * sqrt(C) = 0.14) raises the loss
// above ln V by only ~var/2 = 0.01.
static void loss_at_init_is_about_ln_vocab(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, 4, TINY_T), 0);
    ref_gpt2_init_params(&m, 42);
    int tokens[4 * TINY_T], targets[4 * TINY_T];
    random_ids(tokens, 4 * TINY_T, tiny.vocab_size);
    random_ids(targets, 4 * TINY_T, tiny.vocab_size);
    float loss = ref_gpt2_forward(&m, tokens, targets);
    if (verbose()) printf("  loss at init %.6f, ln V %.6f\n", loss, log(tiny.vocab_size));
    assert_float_equal(loss, log(tiny.vocab_size), 0.1);
    assert_float_equal(loss, m.mean_loss, 0.0);
    ref_gpt2_free(&m);
}

static void bad_token_ids_give_nan(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, 1, 5), 0);
    ref_gpt2_init_params(&m, 3);
    int ok[5] = {0, 1, 2, 3, 96};
    assert_true(isfinite(ref_gpt2_forward(&m, ok, ok)));
    // ids in [V, Vp) have wte rows, yet are not tokens; the rest are out of every array
    int bad_ids[] = {-1, 97, 127, 128, 1 << 30, -(1 << 30)};
    for (size_t k = 0; k < sizeof bad_ids / sizeof bad_ids[0]; k++) {
        int bad[5] = {0, 1, 2, 3, 4};
        bad[k % 5] = bad_ids[k];
        assert_true(isnan(ref_gpt2_forward(&m, bad, ok)));
        assert_true(isnan(m.mean_loss));
        assert_int_equal(ref_gpt2_backward(&m), -1);  // nothing valid to differentiate
        assert_true(isnan(ref_gpt2_forward(&m, ok, bad)));
        assert_true(isnan(ref_gpt2_forward(&m, bad, NULL)));
    }
    ref_gpt2_free(&m);
}

// ---------------------------------------------------------------------------
// AdamW, norm, clipping

// Two steps on three elements, by hand. lr 0.1, beta1 0.5, beta2 0.75, eps 0.25,
// weight decay 0.1 (all exact in binary, eps large so its place matters).
// params (1, -2, 0.5), m = v = 0.
// Step t=1, g = (0.5, -1, 0):
//   m = 0.5 g = (0.25, -0.5, 0);  v = 0.25 g^2 = (0.0625, 0.25, 0)
//   mhat = m/0.5 = (0.5, -1, 0);   vhat = v/0.25 = (0.25, 1, 0);  sqrt = (0.5, 1, 0)
//   mhat/(sqrt+eps) = (0.5/0.75, -1/1.25, 0/0.25) = (0.666667, -0.8, 0)
//   + wd*param = (0.1, -0.2, 0.05) -> update (0.766667, -1, 0.05)
//   params = (1 - 0.0766667, -2 + 0.1, 0.5 - 0.005) = (0.9233333, -1.9, 0.495)
// Step t=2, g = (0.5, 1, 2):
//   m = 0.5 m + 0.5 g = (0.375, 0.25, 1);  v = 0.75 v + 0.25 g^2 = (0.109375, 0.4375, 1)
//   1-beta1^2 = 0.75, 1-beta2^2 = 0.4375:
//   mhat = (0.5, 1/3, 4/3);  vhat = (0.25, 1, 16/7);  sqrt = (0.5, 1, 4/sqrt 7 = 1.5118579)
//   mhat/(sqrt+eps) = (0.5/0.75, (1/3)/1.25, (4/3)/1.7618579) = (0.6666667, 0.2666667, 0.7567769)
//   + wd*param = (0.0923333, -0.19, 0.0495) -> update (0.759, 0.0766667, 0.8062769)
//   params = (0.9233333 - 0.0759, -1.9 - 0.00766667, 0.495 - 0.08062769)
//          = (0.8474333, -1.9076667, 0.4143723)
static void adamw_two_steps_by_hand(void **state) {
    (void)state;
    float p[3] = {1.0f, -2.0f, 0.5f}, m[3] = {0}, v[3] = {0};
    float g1[3] = {0.5f, -1.0f, 0.0f}, g2[3] = {0.5f, 1.0f, 2.0f};
    ref_adamw_update(p, g1, m, v, 3, 0.1f, 0.5f, 0.75f, 0.25f, 0.1f, 1);
    const float p1[3] = {0.92333333f, -1.9f, 0.495f}, m1[3] = {0.25f, -0.5f, 0.0f}, v1[3] = {0.0625f, 0.25f, 0.0f};
    tu_assert_close("params after step 1", p, p1, 3, 0.0f, 1e-6f);
    tu_assert_close("m after step 1", m, m1, 3, 0.0f, 0.0f);
    tu_assert_close("v after step 1", v, v1, 3, 0.0f, 0.0f);
    ref_adamw_update(p, g2, m, v, 3, 0.1f, 0.5f, 0.75f, 0.25f, 0.1f, 2);
    const float p2[3] = {0.84743333f, -1.90766667f, 0.41437231f}, m2[3] = {0.375f, 0.25f, 1.0f},
                v2[3] = {0.109375f, 0.4375f, 1.0f};
    tu_assert_close("params after step 2", p, p2, 3, 0.0f, 1e-6f);
    tu_assert_close("m after step 2", m, m2, 3, 0.0f, 0.0f);
    tu_assert_close("v after step 2", v, v2, 3, 0.0f, 0.0f);
    // weight decay 0 leaves a zero-gradient parameter alone
    float q = 3.0f, gq = 0.0f, mq = 0.0f, vq = 0.0f;
    ref_adamw_update(&q, &gq, &mq, &vq, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);
    assert_float_equal(q, 3.0, 0.0);
}

static void grad_norm_and_clipping(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, 1, 2), 0);
    // a 3-4-5 triangle, one entry in the first tensor and one in the last
    m.grads[0] = 3.0f;
    m.grads[m.num_params - 1] = -4.0f;
    assert_float_equal(ref_gpt2_grad_norm(&m), 5.0, 0.0);
    assert_float_equal(ref_gpt2_clip_grads(&m, 10.0f), 5.0, 0.0);  // under the limit: untouched
    assert_float_equal(m.grads[0], 3.0, 0.0);
    assert_float_equal(ref_gpt2_clip_grads(&m, 1.0f), 5.0, 0.0);
    assert_float_equal(m.grads[0], 0.6, 1e-7);
    assert_float_equal(m.grads[m.num_params - 1], -0.8, 1e-7);
    assert_float_equal(ref_gpt2_grad_norm(&m), 1.0, 1e-6);
    ref_gpt2_zero_grad(&m);
    assert_float_equal(ref_gpt2_grad_norm(&m), 0.0, 0.0);
    assert_float_equal(ref_gpt2_clip_grads(&m, 1.0f), 0.0, 0.0);  // a zero norm is not divided by
    ref_gpt2_free(&m);
}

// ---------------------------------------------------------------------------
// Layout and init

static void parameter_layout(void **state) {
    (void)state;
    // GPT-2 small with the vocabulary padded to 50304: llm.c's 124475904
    ref_gpt2_config gpt2 = {1024, 50257, 50304, 12, 12, 768};
    assert_int_equal(ref_gpt2_num_params(&gpt2), 124475904);
    size_t s[REF_NUM_PARAM_TENSORS];
    ref_gpt2_param_sizes(&tiny, s);
    const size_t C = 48, L = 2;
    const size_t want[REF_NUM_PARAM_TENSORS] = {128 * C, 40 * C,      L * C, L * C,     L * 3 * C * C, L * 3 * C,
                                                L * C * C, L * C,     L * C, L * C,     L * 4 * C * C, L * 4 * C,
                                                L * 4 * C * C, L * C, C,     C};
    const char *names[REF_NUM_PARAM_TENSORS] = {"wte",  "wpe",  "ln1w", "ln1b",    "qkvw",    "qkvb",
                                                "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb",
                                                "fcprojw", "fcprojb", "lnfw", "lnfb"};
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        assert_int_equal(s[i], want[i]);
        assert_string_equal(ref_gpt2_param_names[i], names[i]);
    }
    // the views tile the one array in order, for params and grads alike;
    // a caller's array is used in place
    float *mine = alloc_floats(ref_gpt2_num_params(&tiny));
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init_with_params(&m, &tiny, 2, 3, mine), 0);
    assert_ptr_equal(m.params, mine);
    size_t off = 0;
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        assert_ptr_equal(m.param_ptr[i], mine + off);
        assert_ptr_equal(m.grad_ptr[i], m.grads + off);
        off += s[i];
    }
    assert_int_equal(off, m.num_params);
    ref_gpt2_free(&m);
    free(mine);  // still ours
    // bad shapes are refused
    ref_gpt2_config bad = tiny;
    bad.num_heads = 5;  // 48 % 5 != 0
    assert_int_equal(ref_gpt2_init(&m, &bad, 1, 4), -1);
    ref_gpt2_free(&m);
    bad = tiny;
    bad.padded_vocab_size = 96;
    assert_int_equal(ref_gpt2_init(&m, &bad, 1, 4), -1);
    assert_int_equal(ref_gpt2_init(&m, &tiny, 1, 41), -1);  // T > max_seq_len
}

static double tensor_std(const float *x, size_t n, double *mean_out) {
    double m = 0.0, v = 0.0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean_out = m;
    return sqrt(v / (double)n);
}

static void init_params_are_gpt2_style(void **state) {
    (void)state;
    ref_gpt2 m;
    assert_int_equal(ref_gpt2_init(&m, &tiny, 1, 4), 0);
    ref_gpt2_init_params(&m, 5);
    for (int i = 0; i < REF_NUM_PARAM_TENSORS; i++) {
        const float *p = m.param_ptr[i];
        size_t n = m.param_sizes[i];
        double mean, std = tensor_std(p, n, &mean);
        double want = 0.0;
        if (i == REF_WTE || i == REF_WPE || i == REF_QKVW || i == REF_FCW) want = 0.02;
        if (i == REF_ATTPROJW || i == REF_FCPROJW) want = 0.02 / sqrt(2.0 * tiny.num_layers);
        if (want > 0.0) {
            // n >= 1920 draws: the sample std is within ~2% of the true one (5 sigma is ~8%)
            if (fabs(std / want - 1.0) > 0.08 || fabs(mean) > 0.2 * want)
                fail_msg("%s: mean %.4g std %.4g, want N(0, %.4g)", ref_gpt2_param_names[i], mean, std, want);
        } else {
            float fill = (i == REF_LN1W || i == REF_LN2W || i == REF_LNFW) ? 1.0f : 0.0f;
            for (size_t j = 0; j < n; j++) assert_true(p[j] == fill);
        }
    }
    // deterministic in the seed
    float *first = alloc_floats(m.num_params);
    memcpy(first, m.params, sizeof(float) * m.num_params);
    ref_gpt2_init_params(&m, 5);
    tu_assert_close("same seed", m.params, first, m.num_params, 0.0f, 0.0f);
    ref_gpt2_init_params(&m, 6);
    assert_true(m.params[0] != first[0] && m.params[1] != first[1]);
    // the documented generator: xorshift64* from the seed, 53-bit uniforms
    ref_rng r;
    ref_rng_seed(&r, 1);
    uint64_t s = 1;
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    assert_true(ref_rng_u64(&r) == s * 0x2545F4914F6CDD1Dull);
    free(first);
    ref_gpt2_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parameter_layout),
        cmocka_unit_test(init_params_are_gpt2_style),
        cmocka_unit_test(layernorm_backward_matches_finite_differences),
        cmocka_unit_test(matmul_forward_and_backward),
        cmocka_unit_test(attention_backward_matches_finite_differences),
        cmocka_unit_test(gelu_values_and_backward),
        cmocka_unit_test(softmax_crossentropy_with_padding),
        cmocka_unit_test(model_backward_matches_finite_differences),
        cmocka_unit_test(model_backward_accumulates),
        cmocka_unit_test(loss_at_init_is_about_ln_vocab),
        cmocka_unit_test(bad_token_ids_give_nan),
        cmocka_unit_test(adamw_two_steps_by_hand),
        cmocka_unit_test(grad_norm_and_clipping),
    };
    return cmocka_run_group_tests_name("ref", tests, NULL, NULL);
}
