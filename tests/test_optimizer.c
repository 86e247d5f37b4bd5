// test_optimizer.c: the special cases of kernels/07_optimizer.wgsl through
// src/model/optimizer.h (the run-and-compare cases are the "optimizer" family
// of the op registry, tests/ops/optimizer.c, run by test_ops; these reuse
// its cases): the norm's exact coverage, its clip scale vs
// ref_gpt2_clip_grads, grad_scale, the non-finite flag, determinism, the f16
// update against the f32 one and the cast, bad arguments. Every test that can
// split runs on a second device whose bindings are capped at 64 KiB (16384
// floats), so that the flat arrays are split into chunks.
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
#include "ops/optimizer.h"
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
static wgpt_optim_state norm_run_(wgpt_gpu *g, const float *x, uint64_t n, uint64_t pad, float max_norm) {
    return opt_norm_run(g, x, n, pad, max_norm, 1.0f);
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

// Clipping vs ref_gpt2_clip_grads: above max_norm the GPU's clipped gradients
// (grads * state.scale, as AdamW forms them) match the reference's within the
// norm's bound plus the division (2.5 ulp) and the product (0.5 ulp); below
// max_norm, and with clipping off (max_norm 0), the scale is exactly 1.
static void clip_scale_matches_ref(void **st) {
    (void)st;
    const uint64_t n = 3 * SPLIT_FLOATS + 77;
    float *x = malloc(n * sizeof *x), *clipped = malloc(n * sizeof *clipped);
    tu_fill(x, n, -2.0f, 2.0f);
    double norm = ref_l2_norm(x, n), rtol = opt_norm_rtol(SPLIT, n) + 6 * U;
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
            double want = ref_l2_norm(xs, n), rtol = opt_norm_rtol(devs[d], n) + 2 * U;
            wgpt_optim_state got = opt_norm_run(devs[d], x, n, 0, 0.0f, c);
            if (!(fabs(got.norm - want) <= rtol * want) || got.nonfinite)
                fail_msg("grad_scale %g: norm %.9g, expected %.9g", c, got.norm, want);
            assert_true(got.scale == c);
            if (k == 0) assert_true(got.sumsq == one.sumsq * c * c);
            float max_norm = (float)(want * 0.5);
            wgpt_optim_state clip = opt_norm_run(devs[d], x, n, 0, max_norm, c);
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

// A NaN, an Inf, or a square that overflows f32 anywhere in the gradients
// (here in the last split chunk): the flag is set and params, m and v keep
// every bit. A clean step afterwards clears the flag and updates again.
static void nonfinite_gradient_skips_the_step(void **st) {
    (void)st;
    const uint64_t n = OPT_ADAMW_N;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 3};
    opt_rig r;
    opt_rig_init(&r, SPLIT, n, 1.0f, OPT_RANGES, OPT_N_RANGES, &hp);
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    float *gp = malloc(bytes), *gm = malloc(bytes), *gv = malloc(bytes);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(m, n, -0.01f, 0.01f), tu_fill(v, n, 0.0f, 1e-4f);
    const float bad[] = {NAN, -INFINITY, 3e19f};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tu_fill(g, n, -1.0f, 1.0f);
        g[n - 2] = bad[k];
        opt_rig_put(&r, p, g, m, v);
        TU_OK(r.g, wgpt_op_record(r.g, &r.op));
        wgpt_optim_state s;
        opt_rig_get(&r, gp, gm, gv, &s);
        if (s.nonfinite != 1) fail_msg("gradient %g: nonfinite flag %u", bad[k], s.nonfinite);
        assert_memory_equal(gp, p, bytes);
        assert_memory_equal(gm, m, bytes);
        assert_memory_equal(gv, v, bytes);
    }
    g[n - 2] = 0.5f;
    opt_rig_put(&r, NULL, g, NULL, NULL);
    TU_OK(r.g, wgpt_op_record(r.g, &r.op));
    wgpt_optim_state s;
    opt_rig_get(&r, gp, gm, gv, &s);
    assert_int_equal(s.nonfinite, 0);
    assert_true(memcmp(gp, p, bytes) != 0);
    opt_rig_free(&r);
    free(p), free(g), free(m), free(v), free(gp), free(gm), free(gv);
}

// The same inputs twice through norm + AdamW: every output bit the same.
static void norm_and_adamw_are_deterministic(void **st) {
    (void)st;
    const uint64_t n = OPT_ADAMW_N;
    wgpt_adamw_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 2};
    wgpt_gpu *devs[2] = {SPLIT, G};
    size_t bytes = n * sizeof(float);
    float *p = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    tu_fill(p, n, -0.1f, 0.1f), tu_fill(g, n, -1.0f, 1.0f), tu_fill(m, n, -0.01f, 0.01f), tu_fill(v, n, 0, 1e-4f);
    for (int d = 0; d < 2; d++) {
        opt_rig r;
        opt_rig_init(&r, devs[d], n, 1.0f, OPT_RANGES, OPT_N_RANGES, &hp);
        float *out[2][3];
        wgpt_optim_state s[2];
        for (int run = 0; run < 2; run++) {
            for (int j = 0; j < 3; j++) out[run][j] = malloc(bytes);
            opt_rig_put(&r, p, g, m, v);
            TU_OK(r.g, wgpt_op_record(r.g, &r.op));
            opt_rig_get(&r, out[run][0], out[run][1], out[run][2], &s[run]);
        }
        assert_memory_equal(&s[0], &s[1], sizeof s[0]);
        for (int j = 0; j < 3; j++) assert_memory_equal(out[0][j], out[1][j], bytes);
        for (int run = 0; run < 2; run++)
            for (int j = 0; j < 3; j++) free(out[run][j]);
        opt_rig_free(&r);
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
        opt_rig plain, fused;
        opt_rig_init(&plain, gd, n, 1.0f, RANGES16, N_RANGES16, &hp);
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
        opt_rig_put(&plain, p, NULL, NULL, NULL), opt_rig_put(&fused, p, NULL, NULL, NULL);
        TU_OK(gd, wgpt_buf_upload(gd, p16, 0, old16, n * 2));
        for (int t = 1; t <= 3; t++) {
            tu_fill(g, n, -1.0f, 1.0f);
            if (t == 2) g[n - 3] = NAN;  // a skipped step: no f16 either
            opt_rig_put(&plain, NULL, g, NULL, NULL), opt_rig_put(&fused, NULL, g, NULL, NULL);
            TU_OK(gd, wgpt_adamw_set_step(gd, plain.h, 1e-3f, t));
            TU_OK(gd, wgpt_adamw_set_step(gd, fused.h, 1e-3f, t));
            TU_OK(gd, wgpt_op_record(gd, &plain.op));
            TU_OK(gd, wgpt_op_record(gd, &fused.op));
            TU_OK(gd, wgpt_op_record(gd, &cast));
            wgpt_optim_state sa, sb;
            opt_rig_get(&plain, a[0], a[1], a[2], &sa), opt_rig_get(&fused, b[0], b[1], b[2], &sb);
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
        opt_rig_free(&plain), opt_rig_free(&fused);
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
        cmocka_unit_test(clip_scale_matches_ref),
        cmocka_unit_test(grad_scale_folds_into_the_state),
        cmocka_unit_test(nonfinite_gradient_skips_the_step),
        cmocka_unit_test(norm_and_adamw_are_deterministic),
        cmocka_unit_test(adamw_f16_equals_adamw_and_cast),
        cmocka_unit_test(bad_arguments_are_refused),
    };
    return cmocka_run_group_tests_name("optimizer", tests, group_setup, tu_group_teardown);
}
