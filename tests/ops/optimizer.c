// optimizer.c: the optimizer family of the op registry (tests/ops/ops.h):
// kernels/07_optimizer.wgsl through src/model/optimizer.h: the global
// gradient norm against ref_l2_norm (its GPU kernel and its CPU twin,
// grad_norm_partial_flat), AdamW against ref_adamw_update over 3 steps with
// changing lr and per-range weight decay (ranges out of order, misaligned,
// adjacent, with a gap that must stay untouched), and AdamW over one chunk
// past 65535 * 256 floats (the 2D grid). Shapes that can split run on a
// device whose bindings are capped at 64 KiB (16384 floats), so that the flat
// arrays are split into chunks. tests/test_optimizer.c keeps the special
// cases (exact coverage, clipping, grad_scale, non-finite steps,
// determinism, the f16 update) on these helpers.
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
#include "ops/optimizer.h"

#include "model/optimizer.h"
#include "model/variant.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

static const double U = 1.0 / 16777216.0;  // 2^-24

// The norm of x (n floats) times grad_scale, x placed `pad` floats into its
// buffer (the floats before it are NaN: reading them would set the flag).
wgpt_optim_state opt_norm_run(wgpt_gpu *g, const float *x, uint64_t n, uint64_t pad, float max_norm,
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

static uint64_t parts_of_(wgpt_gpu *g, uint64_t n) { return wgpt_grad_norm_scratch_bytes(g, n) / 8; }

// Relative bound of the norm (see the top of the file).
double opt_norm_rtol(wgpt_gpu *g, uint64_t n) {
    double D = 774.0 + (double)((parts_of_(g, n) + 255) / 256);
    return (D / 2 + 9) * U;
}

// --- AdamW -------------------------------------------------------------------------

void opt_rig_init(opt_rig *r, wgpt_gpu *g, uint64_t n, float max_norm, const wgpt_adamw_range *ranges, int nranges,
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

void opt_rig_free(opt_rig *r) {
    wgpt_adamw_free(r->h);
    wgpt_op_free(&r->op);
    wgpt_buf_free(r->p), wgpt_buf_free(r->gr), wgpt_buf_free(r->m), wgpt_buf_free(r->v);
    wgpt_buf_free(r->scratch), wgpt_buf_free(r->state);
}

void opt_rig_put(opt_rig *r, const float *p, const float *g, const float *m, const float *v) {
    uint64_t b = r->n * 4;
    if (p) TU_OK(r->g, wgpt_buf_upload(r->g, r->p, 0, p, b));
    if (g) TU_OK(r->g, wgpt_buf_upload(r->g, r->gr, 0, g, b));
    if (m) TU_OK(r->g, wgpt_buf_upload(r->g, r->m, 0, m, b));
    if (v) TU_OK(r->g, wgpt_buf_upload(r->g, r->v, 0, v, b));
}

void opt_rig_get(opt_rig *r, float *p, float *m, float *v, wgpt_optim_state *s) {
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
const wgpt_adamw_range OPT_RANGES[] = {
    {15100, 24901, 0.0f},  // (tail) biases-like, crosses two split chunks
    {0, 9000, 0.1f},       // a "2D weight"
    {9000, 37, 0.0f},      // a "bias" at a misaligned offset
    {9037, 3000, 0.1f},
    {12037, 2963, 0.1f},   // adjacent to the previous, same decay
    // [15000, 15100): not covered
};

// AdamW for the ranges above on the host, on the GPU's previous state.
static void ref_step_(float *p, const float *g, float *m, float *v, float lr, const wgpt_adamw_hparams *hp, int t) {
    for (int i = 0; i < OPT_N_RANGES; i++) {
        const wgpt_adamw_range *r = &OPT_RANGES[i];
        ref_adamw_update(p + r->offset, g + r->offset, m + r->offset, v + r->offset, r->count, lr, hp->beta1,
                         hp->beta2, hp->eps, r->weight_decay, t);
    }
}

static float range_wd_(uint64_t i, int *covered) {
    for (int k = 0; k < OPT_N_RANGES; k++)
        if (i >= OPT_RANGES[k].offset && i < OPT_RANGES[k].offset + OPT_RANGES[k].count) {
            *covered = 1;
            return OPT_RANGES[k].weight_decay;
        }
    *covered = 0;
    return 0.0f;
}

// 3 steps with lr changing through wgpt_adamw_set_step, fresh gradients every
// step and clipping active (max_norm 1 against a norm near 115). Each step is
// compared with ref_adamw_update applied to the GPU's state before the step.
static void adamw_3_steps_(wgpt_gpu *dev) {
    const uint64_t n = OPT_ADAMW_N;
    const float lrs[3] = {1e-3f, 3e-4f, 2e-3f};
    wgpt_adamw_hparams hp = {lrs[0], 0.9f, 0.999f, 1e-8f, 1};
    const int d = wgpt_gpu_get_info(dev)->max_storage_binding > n * 4;  // 0: split into chunks
    {
        opt_rig r;
        opt_rig_init(&r, dev, n, 1.0f, OPT_RANGES, OPT_N_RANGES, &hp);
        size_t bytes = n * sizeof(float);
        float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
        float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes), *gs = malloc(bytes);
        tu_fill(p, n, -0.1f, 0.1f);
        opt_rig_put(&r, p, NULL, NULL, NULL);  // m, v start at 0
        memset(m, 0, bytes), memset(v, 0, bytes);
        for (int t = 1; t <= 3; t++) {
            tu_fill(g, n, -1.0f, 1.0f);
            opt_rig_put(&r, NULL, g, NULL, NULL);
            if (t > 1) TU_OK(r.g, wgpt_adamw_set_step(r.g, r.h, lrs[t - 1], t));
            TU_OK(r.g, wgpt_op_record(r.g, &r.op));
            wgpt_optim_state s;
            opt_rig_get(&r, gp, gm, gv, &s);
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
        opt_rig_free(&r);
        free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv), free(gs);
    }
}

// A chunk of more than 65535 * 256 floats: AdamW's grid falls back to 2D and
// the kernel linearises with flat_id. Every element must match the reference
// (step 1: m = v = 0), none be skipped or written twice. n is odd, so the
// scalar kernel runs (adamw_update_vec4, a thread per 4 floats, would need
// 4x more floats than one lavapipe binding holds for a 2D grid).
static void adamw_2d_grid_(wgpt_gpu *G) {
    const uint64_t n = 65535ull * 256 + 1001;
    assert_true(wgpt_groups(n) > WGPT_MAX_WG_DIM);
    assert_true(n * 4 <= wgpt_gpu_get_info(G)->max_storage_binding);  // one chunk
    wgpt_adamw_range all = {0, n, 0.1f};
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 1};
    opt_rig r;
    opt_rig_init(&r, G, n, 0.0f, &all, 1, &hp);
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = calloc(n, 4), *v = calloc(n, 4);
    float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes);
    assert_non_null(gv);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(g, n, -1.0f, 1.0f);
    opt_rig_put(&r, p, g, NULL, NULL);
    TU_OK(r.g, wgpt_op_record(r.g, &r.op));
    opt_rig_get(&r, gp, gm, gv, NULL);
    float *p0 = malloc(bytes);
    memcpy(p0, p, bytes);
    ref_adamw_update(p, g, m, v, n, hp.lr, hp.beta1, hp.beta2, hp.eps, all.weight_decay, 1);
    for (uint64_t i = 0; i < n; i++) {
        tol3 tl = adamw_tol(p0[i], 0, 0, g[i], p[i], hp.lr, hp.beta1, hp.beta2, hp.eps, all.weight_decay, 1);
        if (!(fabs(gp[i] - p[i]) <= tl.p && fabs(gm[i] - m[i]) <= tl.m && fabs(gv[i] - v[i]) <= tl.v))
            fail_msg("element %llu: p %.9g/%.9g m %.9g/%.9g v %.9g/%.9g", (unsigned long long)i, gp[i], p[i], gm[i],
                     m[i], gv[i], v[i]);
    }
    opt_rig_free(&r);
    free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv), free(p0);
}


// (n, mode): mode 0 the norm of n random gradients in [-1, 1) against
// ref_l2_norm (double accumulation), within the bound at the top; mode 1
// AdamW's 3 steps over OPT_RANGES (n = OPT_ADAMW_N); mode 2 AdamW over one
// chunk of n > 65535 * 256 floats (the 2D grid; n odd, so the scalar kernel
// runs: adamw_update_vec4, a thread per 4 floats, would need 4x more floats
// than one lavapipe binding holds for a 2D grid).
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    (void)v;
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    uint64_t n = s->d[0];
    if (s->d[1] == 1) {
        adamw_3_steps_(g);
        return;
    }
    if (s->d[1] == 2) {
        adamw_2d_grid_(g);
        return;
    }
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    tu_fill(x, n, -1.0f, 1.0f);
    double want = ref_l2_norm(x, n), rtol = opt_norm_rtol(g, n);
    wgpt_optim_state got = opt_norm_run(g, x, n, 0, 0.0f, 1.0f);
    double err = fabs(got.norm - want) / want;
    if (err > rtol || got.nonfinite)
        fail_msg("n=%llu: norm %.9g, expected %.9g (rel err %.3g > %.3g)", (unsigned long long)n, got.norm, want, err,
                 rtol);
    if (n == 100003 && getenv("OPT_VERBOSE"))
        printf("norm n=%llu rel err %.3g (bound %.3g)\n", (unsigned long long)n, err, rtol);
    free(x);
}

static const op_variant variants_[] = {
    {.name = "norm-gpu", .kernels = WGPT_KERNELS_GPU},
    {.name = "norm-cpu", .kernels = WGPT_KERNELS_CPU},
    {.name = "adamw", .kernels = WGPT_KERNELS_AUTO, .arg = 1},
};
#define NORM_ (3u << 0)
#define ADAMW_ (1u << 2)
#define K64 (64 * 1024)
#define F64 (K64 / 4)  // floats in a 64 KiB binding

// The norm around a workgroup's 256 floats and a slice's 4096, on one
// binding and across 64 KiB ones; AdamW's 3 steps on 64 KiB bindings and on
// the device's own; AdamW on the 2D grid.
static const op_shape shapes_[] = {
    {{1}, 0, NORM_},
    {{255}, 0, NORM_},
    {{4095}, 0, NORM_},
    {{4097}, 0, NORM_},
    {{F64 - 3}, 0, NORM_},
    {{F64 + 5}, 0, NORM_},
    {{3 * F64 + 77}, 0, NORM_},
    {{100003}, 0, NORM_},
    {{1}, K64, NORM_},
    {{255}, K64, NORM_},
    {{4095}, K64, NORM_},
    {{4097}, K64, NORM_},
    {{F64 - 3}, K64, NORM_},
    {{F64 + 5}, K64, NORM_},
    {{3 * F64 + 77}, K64, NORM_},
    {{100003}, K64, NORM_},
    {{OPT_ADAMW_N, 1}, K64, ADAMW_},
    {{OPT_ADAMW_N, 1}, 0, ADAMW_},
    {{65535u * 256 + 1001, 2}, 0, ADAMW_},
};

const op_family op_optimizer = {
    .name = "optimizer",
    .wrappers = "wgpt_grad_norm, wgpt_adamw_update, wgpt_adamw_set_step (model/optimizer.h)",
    .reference = "ref_l2_norm, ref_adamw_update (tests/ref/adamw.c)",
    .tolerance = "norm: relative (D/2 + 9) 2^-24, D the longest chain of roundings; AdamW: a first-order bound per "
                 "element from WGSL's accuracies, doubled",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
