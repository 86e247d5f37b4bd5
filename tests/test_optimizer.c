// test_optimizer.c: kernels/07_optimizer.wgsl through src/model/optimizer.c:
// the global gradient norm (exact coverage, vs ref_l2_norm, clip scale vs
// ref_gpt2_clip_grads, non-finite flag), AdamW vs ref_adamw_update over 3
// steps with changing lr and per-range weight decay, and determinism. Every
// test that can split runs on a second device whose bindings are capped at
// 64 KiB (16384 floats), so that the flat arrays are split into chunks.
//
// Tolerances (u = 2^-24, the f32 unit roundoff; 1 ulp <= 2u|x|). WGSL gives
// f32 + - * correct rounding, x/y 2.5 ulp, sqrt as 1/inverseSqrt: 2 + 2.5 ulp.
//  - Sum of squares: positive terms, so the relative error is at most u times
//    the longest chain of roundings a term goes through, in any order:
//    the square (1), a thread's 16 adds (15), the workgroup reduction (255 in
//    the worst order), the finishing thread's adds (ceil(P/256)) and the final
//    reduction (255): 526 + ceil(P/256); the CPU twin grad_norm_partial_flat
//    instead has a lane's 512 adds (511) and the subgroup's (7), so
//    D = 774 + ceil(P/256) covers both. The norm gets D/2 u from the sum
//    plus 4.5 ulp = 9u from sqrt. This bounds the worst order; the measured
//    error is printed and is far smaller.
//  - Integer-valued gradients: every partial sum is an integer below 2^24, so
//    sumsq must be EXACT whatever the order: this catches a skipped or doubled
//    element, which a relative tolerance would not.
//  - AdamW: a first-order bound per element built from the same accuracies,
//    see adamw_tol below; the reference gets the same f32 inputs (the GPU's
//    m, v, params of the previous step and grads * the GPU's scale in f32).
#include "test_util.h"

#include "model/optimizer.h"
#include "model/precision.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G, *SPLIT;
static const double U = 1.0 / 16777216.0;  // 2^-24
#define SPLIT_FLOATS (64u * 1024u / 4u)

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = 64 * 1024};
    SPLIT = tu_gpu_open(&o);
    return 0;
}
// The norm of x (n floats) times grad_scale, x placed `pad` floats into its
// buffer (the floats before it are NaN: reading them would set the flag).
static wgpt_optim_state norm_run_c_(wgpt_gpu *g, const float *x, uint64_t n, uint64_t pad, float max_norm,
                                    float grad_scale) {
    float *h = malloc((pad + n) * sizeof *h);
    for (uint64_t i = 0; i < pad; i++) h[i] = NAN;
    memcpy(h + pad, x, n * sizeof *h);
    wgpt_buf *gr = tu_upload_f32(g, h, pad + n, "grads");
    uint64_t sb = wgpt_grad_norm_scratch_bytes(g, n);
    assert_true(sb >= 8);
    wgpt_buf *scratch = wgpt_buf_create(g, sb, "norm scratch"), *st = wgpt_buf_create(g, 16, "state");
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_grad_norm_handle hn;
    TU_OK(g, wgpt_grad_norm(g, &op, (wgpt_view){gr, pad * 4, n * 4}, n, (wgpt_view){scratch, 0, 0},
                            (wgpt_view){st, 0, 0}, max_norm, &hn));
    if (grad_scale != 1.0f) TU_OK(g, wgpt_grad_norm_set(g, &hn, 0.0f, grad_scale));
    TU_OK(g, wgpt_op_record(g, &op));
    wgpt_optim_state s, spike;
    TU_OK(g, wgpt_buf_download(g, st, 0, &s, sizeof s));
    // The spike threshold: just under the norm skips (flag 2), just over does not.
    if (s.nonfinite == 0 && s.norm > 0) {
        for (int above = 0; above < 2; above++) {
            TU_OK(g, wgpt_grad_norm_set(g, &hn, above ? s.norm * 1.01f : s.norm * 0.99f, grad_scale));
            TU_OK(g, wgpt_op_record(g, &op));
            TU_OK(g, wgpt_buf_download(g, st, 0, &spike, sizeof spike));
            assert_int_equal(spike.nonfinite, above ? 0 : 2);
            assert_true(spike.norm == s.norm);
        }
    }
    wgpt_op_free(&op);
    wgpt_buf_free(gr), wgpt_buf_free(scratch), wgpt_buf_free(st);
    free(h);
    return s;
}

static wgpt_optim_state norm_run_(wgpt_gpu *g, const float *x, uint64_t n, uint64_t pad, float max_norm) {
    return norm_run_c_(g, x, n, pad, max_norm, 1.0f);
}

static uint64_t parts_of_(wgpt_gpu *g, uint64_t n) { return wgpt_grad_norm_scratch_bytes(g, n) / 8; }

// Relative bound of the norm (see the top of the file).
static double norm_rtol_(wgpt_gpu *g, uint64_t n) {
    double D = 774.0 + (double)((parts_of_(g, n) + 255) / 256);
    return (D / 2 + 9) * U;
}

static const uint64_t NORM_SIZES[] = {1, 255, 4095, 4097, SPLIT_FLOATS - 3, SPLIT_FLOATS + 5, 3 * SPLIT_FLOATS + 77,
                                      100003};
#define N_NORM_SIZES (sizeof NORM_SIZES / sizeof NORM_SIZES[0])

// Integer gradients in [-3, 3]: sumsq is exact in any summation order, so it
// must equal the integer sum: every element counted exactly once, on one and
// several chunks, with and without a misaligned start (pad 64 = 256 bytes).
static void norm_counts_every_element_once(void **st) {
    (void)st;
    wgpt_gpu *devs[2] = {G, SPLIT};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < N_NORM_SIZES; s++) {
            uint64_t n = NORM_SIZES[s];
            float *x = malloc(n * sizeof *x);
            double want = 0;
            for (uint64_t i = 0; i < n; i++) {
                x[i] = (float)((int)((i * 2654435761u) >> 7) % 7 - 3);
                want += (double)x[i] * x[i];
            }
            wgpt_optim_state got = norm_run_(devs[d], x, n, d ? 64 : 0, 0.0f);
            if ((double)got.sumsq != want || got.nonfinite)
                fail_msg("%s n=%llu: sumsq %.1f, expected %.1f (nonfinite %u)", d ? "split" : "default",
                         (unsigned long long)n, got.sumsq, want, got.nonfinite);
            // sqrt of an exact sum: only the 4.5 ulp of sqrt.
            if (fabs(got.norm - sqrt(want)) > 9 * U * sqrt(want))
                fail_msg("n=%llu: norm %.9g, expected %.9g", (unsigned long long)n, got.norm, sqrt(want));
            assert_true(got.scale == 1.0f);
            free(x);
        }
}

// Random gradients vs ref_l2_norm (double accumulation).
static void norm_matches_ref(void **st) {
    (void)st;
    wgpt_gpu *devs[2] = {G, SPLIT};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < N_NORM_SIZES; s++) {
            uint64_t n = NORM_SIZES[s];
            float *x = malloc(n * sizeof *x);
            tu_fill(x, n, -1.0f, 1.0f);
            double want = ref_l2_norm(x, n), rtol = norm_rtol_(devs[d], n);
            wgpt_optim_state got = norm_run_(devs[d], x, n, 0, 0.0f);
            double err = fabs(got.norm - want) / want;
            if (err > rtol || got.nonfinite)
                fail_msg("%s n=%llu: norm %.9g, expected %.9g (rel err %.3g > %.3g)", d ? "split" : "default",
                         (unsigned long long)n, got.norm, want, err, rtol);
            if (n == 100003 && getenv("OPT_VERBOSE"))
                printf("norm n=%llu rel err %.3g (bound %.3g)\n", (unsigned long long)n, err, rtol);
            free(x);
        }
}

// Clipping vs ref_gpt2_clip_grads: above max_norm the GPU's clipped gradients
// (grads * state.scale, as AdamW forms them) match the reference's within the
// norm's bound plus the division (2.5 ulp) and the product (0.5 ulp); below
// max_norm, and with clipping off (max_norm 0), the scale is exactly 1.
static void clip_scale_matches_ref(void **st) {
    (void)st;
    const uint64_t n = 3 * SPLIT_FLOATS + 77;
    float *x = malloc(n * sizeof *x), *clipped = malloc(n * sizeof *clipped);
    tu_fill(x, n, -2.0f, 2.0f);
    double norm = ref_l2_norm(x, n), rtol = norm_rtol_(SPLIT, n) + 6 * U;
    const float factors[] = {0.25f, 0.999f, 1.001f, 3.0f};
    for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++) {
        float max_norm = (float)(norm * factors[f]);
        memcpy(clipped, x, n * sizeof *x);
        ref_gpt2 m;
        memset(&m, 0, sizeof m);
        m.grads = clipped;
        m.num_params = n;
        float ref_norm = ref_gpt2_clip_grads(&m, max_norm);
        wgpt_optim_state got = norm_run_(SPLIT, x, n, 0, max_norm);
        assert_true(fabs(got.norm - ref_norm) <= rtol * ref_norm);
        assert_int_equal(got.nonfinite, 0);
        if (factors[f] > 1.0f) {
            assert_true(got.scale == 1.0f);
        } else {
            assert_true(fabs(got.scale - max_norm / norm) <= rtol * max_norm / norm);
            for (uint64_t i = 0; i < n; i++) {
                float g = x[i] * got.scale;
                if (!(fabs(g - clipped[i]) <= (rtol + U) * fabs(clipped[i])))
                    fail_msg("max_norm %.6g: clipped grad %llu is %.9g, expected %.9g", max_norm,
                             (unsigned long long)i, g, clipped[i]);
            }
        }
    }
    wgpt_optim_state off = norm_run_(SPLIT, x, n, 0, 0.0f);
    assert_true(off.scale == 1.0f);
    free(x), free(clipped);
}

// The gradients seen through grad_scale (wgpt_grad_norm_set: how the model
// divides by micro-batches and the loss scale without a pass over the
// buffer): the norm is that of x * c (the reference scales first, one more
// rounding: + U), the scale AdamW gets is c (no clipping) or c times the
// clip factor; with c a power of two sumsq is exactly c^2 times x's. A
// grad_scale that is not positive and finite is refused, naming it.
static void grad_scale_folds_into_the_state(void **st) {
    (void)st;
    const uint64_t n = 3 * SPLIT_FLOATS + 77;
    float *x = malloc(n * sizeof *x), *xs = malloc(n * sizeof *xs);
    tu_fill(x, n, -2.0f, 2.0f);
    wgpt_gpu *devs[2] = {G, SPLIT};
    const float cs[] = {0x1p-10f, 1.0f / 3.0f};
    for (int d = 0; d < 2; d++) {
        wgpt_optim_state one = norm_run_(devs[d], x, n, 0, 0.0f);
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            float c = cs[k];
            for (uint64_t i = 0; i < n; i++) xs[i] = x[i] * c;
            double want = ref_l2_norm(xs, n), rtol = norm_rtol_(devs[d], n) + 2 * U;
            wgpt_optim_state got = norm_run_c_(devs[d], x, n, 0, 0.0f, c);
            if (!(fabs(got.norm - want) <= rtol * want) || got.nonfinite)
                fail_msg("grad_scale %g: norm %.9g, expected %.9g", c, got.norm, want);
            assert_true(got.scale == c);
            if (k == 0) assert_true(got.sumsq == one.sumsq * c * c);
            float max_norm = (float)(want * 0.5);
            wgpt_optim_state clip = norm_run_c_(devs[d], x, n, 0, max_norm, c);
            double wscale = max_norm / want * c;
            if (!(fabs(clip.scale - wscale) <= (rtol + 4 * U) * wscale))
                fail_msg("grad_scale %g, max_norm %g: scale %.9g, expected %.9g", c, max_norm, clip.scale, wscale);
        }
    }
    wgpt_buf *b = wgpt_buf_create(G, 4096, "x");
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_grad_norm_handle hn;
    TU_OK(G, wgpt_grad_norm(G, &op, (wgpt_view){b, 0, 0}, 1024, (wgpt_view){b, 0, 0}, (wgpt_view){b, 0, 0}, 0.0f,
                            &hn));
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(wgpt_grad_norm_set(G, &hn, 0.0f, bad[i]), -1);
        assert_non_null(strstr(wgpt_gpu_error(G), "grad_scale"));
    }
    wgpt_op_free(&op);
    wgpt_buf_free(b);
    free(x), free(xs);
}

// --- AdamW -------------------------------------------------------------------------

// Flat arrays, norm and AdamW of one test model on device g.
typedef struct rig {
    wgpt_gpu *g;
    uint64_t n;
    wgpt_buf *p, *gr, *m, *v, *scratch, *state;
    wgpt_op op;
    wgpt_adamw *h;
} rig;

static void rig_init_(rig *r, wgpt_gpu *g, uint64_t n, float max_norm, const wgpt_adamw_range *ranges, int nranges,
                      const wgpt_adamw_hparams *hp) {
    r->g = g;
    r->n = n;
    r->p = tu_upload_f32(g, NULL, n, "params");
    r->gr = tu_upload_f32(g, NULL, n, "grads");
    r->m = tu_upload_f32(g, NULL, n, "m");
    r->v = tu_upload_f32(g, NULL, n, "v");
    r->scratch = wgpt_buf_create(g, wgpt_grad_norm_scratch_bytes(g, n), "scratch");
    r->state = wgpt_buf_create(g, WGPT_OPTIM_STATE_BYTES, "state");
    wgpt_op_init(&r->op);
    wgpt_view all[4] = {{r->p, 0, 0}, {r->gr, 0, 0}, {r->m, 0, 0}, {r->v, 0, 0}}, sv = {r->state, 0, 0};
    TU_OK(g, wgpt_grad_norm(g, &r->op, all[1], n, (wgpt_view){r->scratch, 0, 0}, sv, max_norm, NULL));
    TU_OK(g, wgpt_adamw_update(g, &r->op, all[0], all[1], all[2], all[3], sv, ranges, nranges, hp, &r->h));
}

static void rig_free_(rig *r) {
    wgpt_adamw_free(r->h);
    wgpt_op_free(&r->op);
    wgpt_buf_free(r->p), wgpt_buf_free(r->gr), wgpt_buf_free(r->m), wgpt_buf_free(r->v);
    wgpt_buf_free(r->scratch), wgpt_buf_free(r->state);
}

static void rig_put_(rig *r, const float *p, const float *g, const float *m, const float *v) {
    uint64_t b = r->n * 4;
    if (p) TU_OK(r->g, wgpt_buf_upload(r->g, r->p, 0, p, b));
    if (g) TU_OK(r->g, wgpt_buf_upload(r->g, r->gr, 0, g, b));
    if (m) TU_OK(r->g, wgpt_buf_upload(r->g, r->m, 0, m, b));
    if (v) TU_OK(r->g, wgpt_buf_upload(r->g, r->v, 0, v, b));
}

static void rig_get_(rig *r, float *p, float *m, float *v, wgpt_optim_state *s) {
    uint64_t b = r->n * 4;
    TU_OK(r->g, wgpt_buf_download(r->g, r->p, 0, p, b));
    TU_OK(r->g, wgpt_buf_download(r->g, r->m, 0, m, b));
    TU_OK(r->g, wgpt_buf_download(r->g, r->v, 0, v, b));
    if (s) TU_OK(r->g, wgpt_buf_download(r->g, r->state, 0, s, sizeof *s));
}

// First-order error bounds of one GPU AdamW element against the double
// reference, from the f32 inputs p0, m0, v0, g (already scaled):
//   m: 2 products + 1 sum, each <= u of a value <= M = b1|m0| + (1-b1)|g|: 3uM
//   v: 3 products + 1 sum of positive terms <= V: 4uV
//   mhat: m's error / c1 + |mhat| (2.5 ulp division + u for c1 in f32) = 6u
//   vhat: 4u + 5u + u = 10u relative; sqrt: half of it + 4.5 ulp = 14u; + eps: u
//   update = mhat/d: err(mhat)/d + |update| (err(d)/d + 5u)
//   param: lr * (err(update) + 4u (|update| + wd|p0|)) + 2u |p1| (products, sum, subtraction)
// The bound is doubled to cover second-order terms; atol 1e-30 for exact zeros.
typedef struct tol3 {
    double p, m, v;
} tol3;
static tol3 adamw_tol(double p0, double m0, double v0, double g, double p1, float lr, float b1, float b2, float eps,
                      float wd, int t) {
    double c1 = 1.0 - pow(b1, t), c2 = 1.0 - pow(b2, t);
    double M = b1 * fabs(m0) + (1.0 - b1) * fabs(g), V = b2 * v0 + (1.0 - b2) * g * g;
    double m1 = b1 * m0 + (1.0 - b1) * g;
    double mhat = m1 / c1, vhat = V / c2, sq = sqrt(vhat), d = sq + eps, upd = mhat / d;
    double e_mhat = 3 * U * M / c1 + 6 * U * fabs(mhat);
    double e_d = 14 * U * sq + U * d;
    double e_upd = e_mhat / d + fabs(upd) * (e_d / d + 5 * U);
    double e_p = lr * (e_upd + 4 * U * (fabs(upd) + wd * fabs(p0))) + 2 * U * fabs(p1);
    return (tol3){2 * e_p + 1e-30, 2 * 3 * U * M + 1e-30, 2 * 4 * U * V + 1e-30};
}

// Ranges out of order, misaligned offsets, two adjacent ranges with the same
// decay (merged), a gap that must stay untouched, and ranges longer than a
// 64 KiB binding. Total 40001 floats.
static const wgpt_adamw_range RANGES[] = {
    {15100, 24901, 0.0f},  // (tail) biases-like, crosses two split chunks
    {0, 9000, 0.1f},       // a "2D weight"
    {9000, 37, 0.0f},      // a "bias" at a misaligned offset
    {9037, 3000, 0.1f},
    {12037, 2963, 0.1f},   // adjacent to the previous, same decay
    // [15000, 15100): not covered
};
#define N_RANGES ((int)(sizeof RANGES / sizeof RANGES[0]))
#define ADAMW_N 40001u

// AdamW for the ranges above on the host, on the GPU's previous state.
static void ref_step_(float *p, const float *g, float *m, float *v, float lr, const wgpt_adamw_hparams *hp, int t) {
    for (int i = 0; i < N_RANGES; i++) {
        const wgpt_adamw_range *r = &RANGES[i];
        ref_adamw_update(p + r->offset, g + r->offset, m + r->offset, v + r->offset, r->count, lr, hp->beta1,
                         hp->beta2, hp->eps, r->weight_decay, t);
    }
}

static float range_wd_(uint64_t i, int *covered) {
    for (int k = 0; k < N_RANGES; k++)
        if (i >= RANGES[k].offset && i < RANGES[k].offset + RANGES[k].count) {
            *covered = 1;
            return RANGES[k].weight_decay;
        }
    *covered = 0;
    return 0.0f;
}

// 3 steps with lr changing through wgpt_adamw_set_step, fresh gradients every
// step and clipping active (max_norm 1 against a norm near 115). Each step is
// compared with ref_adamw_update applied to the GPU's state before the step.
static void adamw_matches_ref_over_3_steps(void **st) {
    (void)st;
    const uint64_t n = ADAMW_N;
    const float lrs[3] = {1e-3f, 3e-4f, 2e-3f};
    wgpt_adamw_hparams hp = {lrs[0], 0.9f, 0.999f, 1e-8f, 1};
    wgpt_gpu *devs[2] = {SPLIT, G};
    for (int d = 0; d < 2; d++) {
        rig r;
        rig_init_(&r, devs[d], n, 1.0f, RANGES, N_RANGES, &hp);
        size_t bytes = n * sizeof(float);
        float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
        float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes), *gs = malloc(bytes);
        tu_fill(p, n, -0.1f, 0.1f);
        rig_put_(&r, p, NULL, NULL, NULL);  // m, v start at 0
        memset(m, 0, bytes), memset(v, 0, bytes);
        for (int t = 1; t <= 3; t++) {
            tu_fill(g, n, -1.0f, 1.0f);
            rig_put_(&r, NULL, g, NULL, NULL);
            if (t > 1) TU_OK(r.g, wgpt_adamw_set_step(r.g, r.h, lrs[t - 1], t));
            TU_OK(r.g, wgpt_op_record(r.g, &r.op));
            wgpt_optim_state s;
            rig_get_(&r, gp, gm, gv, &s);
            assert_int_equal(s.nonfinite, 0);
            assert_true(s.scale < 0.02f);  // clipping is on
            for (uint64_t i = 0; i < n; i++) gs[i] = g[i] * s.scale;  // what the kernel forms
            float *p0 = malloc(bytes), *m0 = malloc(bytes), *v0 = malloc(bytes);
            memcpy(p0, p, bytes), memcpy(m0, m, bytes), memcpy(v0, v, bytes);
            ref_step_(p, gs, m, v, lrs[t - 1], &hp, t);
            double worst = 0;  // largest |err| / tol of p, for OPT_VERBOSE
            for (uint64_t i = 0; i < n; i++) {
                int covered;
                float wd = range_wd_(i, &covered);
                if (!covered) {
                    if (gp[i] != p0[i] || gm[i] != m0[i] || gv[i] != v0[i])
                        fail_msg("step %d: element %llu outside every range was written", t, (unsigned long long)i);
                    continue;
                }
                tol3 tl = adamw_tol(p0[i], m0[i], v0[i], gs[i], p[i], lrs[t - 1], hp.beta1, hp.beta2, hp.eps, wd, t);
                if (!(fabs(gp[i] - p[i]) <= tl.p && fabs(gm[i] - m[i]) <= tl.m && fabs(gv[i] - v[i]) <= tl.v))
                    fail_msg("%s step %d element %llu: p %.9g/%.9g (tol %.3g) m %.9g/%.9g (tol %.3g) "
                             "v %.9g/%.9g (tol %.3g)",
                             d ? "default" : "split", t, (unsigned long long)i, gp[i], p[i], tl.p, gm[i], m[i],
                             tl.m, gv[i], v[i], tl.v);
                if (fabs(gp[i] - p[i]) / tl.p > worst) worst = fabs(gp[i] - p[i]) / tl.p;
            }
            if (getenv("OPT_VERBOSE")) printf("adamw step %d: max |p err| / tol = %.3g\n", t, worst);
            // The next step starts from the GPU's state on both sides.
            memcpy(p, gp, bytes), memcpy(m, gm, bytes), memcpy(v, gv, bytes);
            free(p0), free(m0), free(v0);
        }
        rig_free_(&r);
        free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv), free(gs);
    }
}

// A chunk of more than 65535 * 256 floats: AdamW's grid falls back to 2D and
// the kernel linearises with flat_id. Every element must match the reference
// (step 1: m = v = 0), none be skipped or written twice. n is odd, so the
// scalar kernel runs (adamw_update_vec4, a thread per 4 floats, would need
// 4x more floats than one lavapipe binding holds for a 2D grid).
static void adamw_2d_grid(void **st) {
    (void)st;
    const uint64_t n = 65535ull * 256 + 1001;
    assert_true(wgpt_groups(n) > WGPT_MAX_WG_DIM);
    assert_true(n * 4 <= wgpt_gpu_get_info(G)->max_storage_binding);  // one chunk
    wgpt_adamw_range all = {0, n, 0.1f};
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1};
    rig r;
    rig_init_(&r, G, n, 0.0f, &all, 1, &hp);
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = calloc(n, 4), *v = calloc(n, 4);
    float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes);
    assert_non_null(gv);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(g, n, -1.0f, 1.0f);
    rig_put_(&r, p, g, NULL, NULL);
    TU_OK(r.g, wgpt_op_record(r.g, &r.op));
    rig_get_(&r, gp, gm, gv, NULL);
    float *p0 = malloc(bytes);
    memcpy(p0, p, bytes);
    ref_adamw_update(p, g, m, v, n, hp.lr, hp.beta1, hp.beta2, hp.eps, all.weight_decay, 1);
    for (uint64_t i = 0; i < n; i++) {
        tol3 tl = adamw_tol(p0[i], 0, 0, g[i], p[i], hp.lr, hp.beta1, hp.beta2, hp.eps, all.weight_decay, 1);
        if (!(fabs(gp[i] - p[i]) <= tl.p && fabs(gm[i] - m[i]) <= tl.m && fabs(gv[i] - v[i]) <= tl.v))
            fail_msg("element %llu: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g", (unsigned long long)i, gp[i], p[i], gm[i],
                     m[i], gv[i], v[i]);
    }
    rig_free_(&r);
    free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv), free(p0);
}

// A NaN, an Inf, or a square that overflows f32 anywhere in the gradients
// (here in the last split chunk): the flag is set and params, m and v keep
// every bit. A clean step afterwards clears the flag and updates again.
static void nonfinite_gradient_skips_the_step(void **st) {
    (void)st;
    const uint64_t n = ADAMW_N;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 3};
    rig r;
    rig_init_(&r, SPLIT, n, 1.0f, RANGES, N_RANGES, &hp);
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(m, n, -0.01f, 0.01f), tu_fill(v, n, 0.0f, 1e-4f);
    const float bad[] = {NAN, -INFINITY, 3e19f};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tu_fill(g, n, -1.0f, 1.0f);
        g[n - 2] = bad[k];
        rig_put_(&r, p, g, m, v);
        TU_OK(r.g, wgpt_op_record(r.g, &r.op));
        wgpt_optim_state s;
        rig_get_(&r, gp, gm, gv, &s);
        if (s.nonfinite != 1) fail_msg("gradient %g: nonfinite flag %u", bad[k], s.nonfinite);
        assert_memory_equal(gp, p, bytes);
        assert_memory_equal(gm, m, bytes);
        assert_memory_equal(gv, v, bytes);
    }
    g[n - 2] = 0.5f;
    rig_put_(&r, NULL, g, NULL, NULL);
    TU_OK(r.g, wgpt_op_record(r.g, &r.op));
    wgpt_optim_state s;
    rig_get_(&r, gp, gm, gv, &s);
    assert_int_equal(s.nonfinite, 0);
    assert_true(memcmp(gp, p, bytes) != 0);
    rig_free_(&r);
    free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv);
}

// The same inputs twice through norm + AdamW: every output bit the same.
static void norm_and_adamw_are_deterministic(void **st) {
    (void)st;
    const uint64_t n = ADAMW_N;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 2};
    wgpt_gpu *devs[2] = {SPLIT, G};
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(g, n, -1.0f, 1.0f), tu_fill(m, n, -0.01f, 0.01f), tu_fill(v, n, 0, 1e-4f);
    for (int d = 0; d < 2; d++) {
        rig r;
        rig_init_(&r, devs[d], n, 1.0f, RANGES, N_RANGES, &hp);
        float *out[2][3];
        wgpt_optim_state s[2];
        for (int run = 0; run < 2; run++) {
            for (int j = 0; j < 3; j++) out[run][j] = malloc(bytes);
            rig_put_(&r, p, g, m, v);
            TU_OK(r.g, wgpt_op_record(r.g, &r.op));
            rig_get_(&r, out[run][0], out[run][1], out[run][2], &s[run]);
        }
        assert_memory_equal(&s[0], &s[1], sizeof s[0]);
        for (int j = 0; j < 3; j++) assert_memory_equal(out[0][j], out[1][j], bytes);
        for (int run = 0; run < 2; run++)
            for (int j = 0; j < 3; j++) free(out[run][j]);
        rig_free_(&r);
    }
    free(p), free(g), free(m), free(v);
}

// adamw_update_f16 (ZeRO-1's f16 mode): params, m and v bit for bit those of
// adamw_update, and params16 bit for bit wgpt_cast_f16 of the new params
// wherever a range covers, untouched elsewhere; a skipped step writes no f16.
// The ranges take both kernels: 64-float aligned ones the vec4 twin, the
// ones starting 14 floats past a 64-float boundary or of 38 floats the pairs.
static const wgpt_adamw_range RANGES16[] = {
    {0, 9000, 0.1f}, {9000, 38, 0.0f}, {9038, 3000, 0.1f}, {15104, 24896, 0.0f},  // [12038, 15104) not covered
};
#define N_RANGES16 ((int)(sizeof RANGES16 / sizeof RANGES16[0]))
#define ADAMW16_N 40000u


static void range_wd_f16_(uint64_t i, int *covered) {
    *covered = 0;
    for (int k = 0; k < N_RANGES16; k++)
        if (i >= RANGES16[k].offset && i < RANGES16[k].offset + RANGES16[k].count) *covered = 1;
}

static void adamw_f16_equals_adamw_and_cast(void **st) {
    (void)st;
    const uint64_t n = ADAMW16_N;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1};
    wgpt_gpu *devs[2] = {SPLIT, G};
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes);
    float *a[3], *b[3];
    for (int j = 0; j < 3; j++) a[j] = malloc(bytes), b[j] = malloc(bytes);
    uint16_t *h16 = malloc(n * 2), *want16 = malloc(n * 2), *old16 = malloc(n * 2);
    for (uint64_t i = 0; i < n; i++) old16[i] = (uint16_t)(0x3c00u + i % 1000);  // not any cast of p
    tu_fill(p, n, -0.1f, 0.1f);
    for (int d = 0; d < 2; d++) {
        wgpt_gpu *gd = devs[d];
        rig plain, fused;
        rig_init_(&plain, gd, n, 1.0f, RANGES16, N_RANGES16, &hp);
        // the fused one: the same norm, then adamw_update_f16 into p16
        fused.g = gd, fused.n = n;
        fused.p = tu_upload_f32(gd, NULL, n, "params"), fused.gr = tu_upload_f32(gd, NULL, n, "grads");
        fused.m = tu_upload_f32(gd, NULL, n, "m"), fused.v = tu_upload_f32(gd, NULL, n, "v");
        fused.scratch = wgpt_buf_create(gd, wgpt_grad_norm_scratch_bytes(gd, n), "scratch");
        fused.state = wgpt_buf_create(gd, WGPT_OPTIM_STATE_BYTES, "state");
        wgpt_buf *p16 = wgpt_buf_create(gd, n * 2, "params f16"), *c16 = wgpt_buf_create(gd, n * 2, "cast");
        wgpt_op_init(&fused.op);
        wgpt_view sv = {fused.state, 0, 0}, gv = {fused.gr, 0, 0};
        TU_OK(gd, wgpt_grad_norm(gd, &fused.op, gv, n, (wgpt_view){fused.scratch, 0, 0}, sv, 1.0f, NULL));
        TU_OK(gd, wgpt_adamw_update_f16(gd, &fused.op, (wgpt_view){fused.p, 0, 0}, (wgpt_view){p16, 0, 0}, gv,
                                        (wgpt_view){fused.m, 0, 0}, (wgpt_view){fused.v, 0, 0}, sv, RANGES16,
                                        N_RANGES16, &hp, &fused.h));
        if (gd == G) {  // one chunk a range: the kernel by its grid (vec4: 4 floats a thread, pairs: 2)
            const uint32_t want[4] = {9000 / 4 / 256 + 1, 1, 3000 / 2 / 256 + 1, 24896 / 4 / 256 + 1};
            assert_true(fused.op.n >= 4);
            for (int k = 0; k < 4; k++) assert_int_equal(fused.op.steps[fused.op.n - 4 + k].x, want[k]);
        }
        wgpt_op cast;
        wgpt_op_init(&cast);
        for (uint64_t o = 0; o < n; o += SPLIT_FLOATS) {  // within the split device's bindings
            uint64_t k = n - o < SPLIT_FLOATS ? n - o : SPLIT_FLOATS;
            TU_OK(gd, wgpt_cast_f16(gd, &cast, (wgpt_view){c16, o * 2, k * 2}, (wgpt_view){plain.p, o * 4, k * 4}, k));
        }
        rig_put_(&plain, p, NULL, NULL, NULL), rig_put_(&fused, p, NULL, NULL, NULL);
        TU_OK(gd, wgpt_buf_upload(gd, p16, 0, old16, n * 2));
        for (int t = 1; t <= 3; t++) {
            tu_fill(g, n, -1.0f, 1.0f);
            if (t == 2) g[n - 3] = NAN;  // a skipped step: no f16 either
            rig_put_(&plain, NULL, g, NULL, NULL), rig_put_(&fused, NULL, g, NULL, NULL);
            TU_OK(gd, wgpt_adamw_set_step(gd, plain.h, 1e-3f, t));
            TU_OK(gd, wgpt_adamw_set_step(gd, fused.h, 1e-3f, t));
            TU_OK(gd, wgpt_op_record(gd, &plain.op));
            TU_OK(gd, wgpt_op_record(gd, &fused.op));
            TU_OK(gd, wgpt_op_record(gd, &cast));
            wgpt_optim_state sa, sb;
            rig_get_(&plain, a[0], a[1], a[2], &sa), rig_get_(&fused, b[0], b[1], b[2], &sb);
            assert_int_equal(sb.nonfinite, t == 2);
            for (int j = 0; j < 3; j++) assert_memory_equal(a[j], b[j], bytes);
            TU_OK(gd, wgpt_buf_download(gd, p16, 0, h16, n * 2));
            TU_OK(gd, wgpt_buf_download(gd, c16, 0, want16, n * 2));
            for (uint64_t i = 0; i < n; i++) {
                int covered;
                range_wd_f16_(i, &covered);
                uint16_t w = covered ? want16[i] : old16[i];
                if (h16[i] != w)
                    fail_msg("%s step %d element %llu (%s): f16 0x%04x, want 0x%04x", d ? "default" : "split", t,
                             (unsigned long long)i, covered ? "updated" : "outside the ranges", h16[i], w);
            }
        }
        wgpt_op_free(&cast);
        wgpt_buf_free(p16), wgpt_buf_free(c16);
        rig_free_(&plain), rig_free_(&fused);
    }
    // Odd range ends are refused (a pair would straddle two ranges).
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_adamw *h = NULL;
    wgpt_buf *buf = wgpt_buf_create(G, 4096, "b"), *s = wgpt_buf_create(G, 16, "s");
    wgpt_view vb = {buf, 0, 0}, vs = {s, 0, 0};
    const wgpt_adamw_range odd[1] = {{2, 7, 0.0f}};
    assert_int_equal(wgpt_adamw_update_f16(G, &op, vb, vb, vb, vb, vb, vs, odd, 1, &hp, &h), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "even"));
    assert_null(h);
    wgpt_op_free(&op);
    wgpt_buf_free(buf), wgpt_buf_free(s);
    free(p), free(g), free(h16), free(want16), free(old16);
    for (int j = 0; j < 3; j++) free(a[j]), free(b[j]);
}

// Arguments the wrappers must refuse.
static void bad_arguments_are_refused(void **st) {
    (void)st;
    wgpt_buf *b = wgpt_buf_create(G, 4096, "b"), *s = wgpt_buf_create(G, 16, "s");
    wgpt_view vb = {b, 0, 0}, vs = {s, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_adamw *h = NULL;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1};
    const wgpt_adamw_range overlap[2] = {{0, 100, 0.0f}, {50, 100, 0.1f}};
    const wgpt_adamw_range too_long[1] = {{1000, 100, 0.0f}};  // 1100 floats > 1024
    assert_int_equal(wgpt_adamw_update(G, &op, vb, vb, vb, vb, vs, overlap, 2, &hp, &h), -1);
    assert_int_equal(wgpt_adamw_update(G, &op, vb, vb, vb, vb, vs, too_long, 1, &hp, &h), -1);
    hp.t = 0;
    assert_int_equal(wgpt_adamw_update(G, &op, vb, vb, vb, vb, vs, too_long, 0, &hp, &h), -1);
    assert_null(h);
    assert_int_equal(wgpt_grad_norm(G, &op, vb, 1025, vb, vs, 1.0f, NULL), -1);  // grads too short
    assert_int_equal(wgpt_grad_norm(G, &op, vb, 0, vb, vs, 1.0f, NULL), -1);
    assert_int_equal(op.n, 0);
    hp.t = 1;
    TU_OK(G, wgpt_adamw_update(G, &op, vb, vb, vb, vb, vs, NULL, 0, &hp, &h));  // nothing to update: no dispatch
    assert_non_null(h);
    assert_int_equal(op.n, 0);
    assert_int_equal(wgpt_adamw_set_step(G, h, 1e-3f, 0), -1);
    wgpt_adamw_free(h);
    wgpt_op_free(&op);
    wgpt_buf_free(b), wgpt_buf_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(norm_counts_every_element_once),
        cmocka_unit_test(norm_matches_ref),
        cmocka_unit_test(clip_scale_matches_ref),
        cmocka_unit_test(grad_scale_folds_into_the_state),
        cmocka_unit_test(adamw_matches_ref_over_3_steps),
        cmocka_unit_test(adamw_2d_grid),
        cmocka_unit_test(nonfinite_gradient_skips_the_step),
        cmocka_unit_test(norm_and_adamw_are_deterministic),
        cmocka_unit_test(adamw_f16_equals_adamw_and_cast),
        cmocka_unit_test(bad_arguments_are_refused),
    };
    return cmocka_run_group_tests_name("optimizer", tests, group_setup, tu_group_teardown);
}
