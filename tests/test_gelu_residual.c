// test_gelu_residual.c: the special cases of kernels/05_gelu.wgsl and
// 05_residual.wgsl (the run-and-compare cases are the "elementwise" family of
// the op registry, tests/ops/elementwise.c, run by test_ops): inputs past the
// tanh clamp, up to +-3e38 (results must stay finite and right); the kernels'
// own bounds checks; the f16 outputs against the f32 ones. 20 of the large
// inputs run the vec4 twins, the others the scalar kernels (the wrapper picks).
//
// Tolerance. residual_forward is one f32 add per element, as in C: exact.
// GELU: the kernels' tanh is 1 - 2 / (e^2u + 1) (00_shared.wgsl's gelu_tanh),
// one exp; the bound is the looser one of WGSL's own tanh, only as accurate
// as sinh/cosh built from exp, whose
// error is (3 + 2|u|) ulp; over two exps for |u| <= 10 that is at most
// E = 2 * 23 * 2^-24 = 2.7e-6 absolute on tanh. The forward 0.5 x (1 + tanh)
// turns it into 0.5 |x| E (|x| <= 6 for the random inputs: 8.2e-6); the
// backward 0.5 (1 + th) + 0.5 x (1 - th^2) u' into (0.5 + |x| u') E with
// u' = K (1 + 3 A x^2) <= 4.7 (|x| <= 6): 7.8e-5 * |dout| (|dout| <= 1). Past
// the clamp (|u| = 10) both are exact: tanh is +-1 in f32 there. rtol 16 ulp
// covers the few f32 products around tanh.
#include "test_util.h"

#include "model/elementwise.h"
#include "ops/elementwise.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device
static wgpt_gpu *SPLIT;  // the same adapter with 64 KiB bindings: chunks

static const float TANH_E = 2.0f * 23.0f * 5.9604645e-8f;
static const float X_MAX = 6.0f;  // random inputs in [-X_MAX, X_MAX)
static const float RTOL = 16 * 5.9604645e-8f;
static const float SENTINEL = EW_SENTINEL;

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = 64 * 1024};
    SPLIT = tu_gpu_open(&o);
    return 0;
}
static float *alloc_(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

// Inputs around and far past the clamp (u = 10 at x = 5.42; x^3 overflows f32
// past ~7e12): the GPU must give the reference's finite values, no NaN.
static void gelu_large_inputs(void **st) {
    (void)st;
    static const float X[] = {0.0f,   -0.0f,   1e-30f,  -1e-30f, 5.5f,    -5.5f,   5.4f,   -5.4f, 9.99f,
                              -9.99f, 10.0f,   -10.0f,  11.0f,   -11.0f,  1e3f,    -1e3f,  1e13f,  -1e13f,
                              1e20f,  -1e20f,  3e38f,   -3e38f};
    const size_t nx = sizeof X / sizeof X[0];
    float dout[sizeof X / sizeof X[0]], want[sizeof X / sizeof X[0]];
    for (size_t i = 0; i < nx; i++) dout[i] = i % 2 ? -0.75f : 1.25f;
    // All 22 inputs (scalar kernels), then the last 20 (vec4 twins).
    for (int run = 0; run < 4; run++) {
        int kind = run % 2 ? EW_GELU_BWD : EW_GELU_FWD;
        size_t n = run < 2 ? nx : 20;
        const float *x = X + (nx - n), *dy = dout + (nx - n);
        ew_ref(kind, want, x, dy, n);
        float *got = ew_run(G, kind, x, kind == EW_GELU_BWD ? dy : NULL, 1e30f, n, 0);
        for (size_t i = 0; i < n; i++) {
            // Exact past the clamp (x or -0; 1.25 or 0); inside it the bounds
            // above with |x| <= 10 (u' <= 11.6) and |dout| <= 1.25.
            float tol = kind == EW_GELU_FWD ? 5.0f * TANH_E + RTOL * fabsf(want[i])
                                         : 1.25f * (0.5f + 10.0f * 11.6f) * TANH_E;
            if (!isfinite(got[i]) || fabsf(got[i] - want[i]) > tol)
                fail_msg("%s(%g): %.9g, expected %.9g", kind == EW_GELU_FWD ? "gelu_forward" : "gelu_backward",
                         (double)x[i], (double)got[i], (double)want[i]);
        }
        free(got);
    }
}

// The kernels' own bounds checks (scalar kernels and vec4 twins), bypassing
// the wrapper's exact views (which would hide a missing check behind robust
// buffer access): every binding holds n + 64 floats, params say n, the grid
// has threads past n; the 64 tail floats must keep their sentinel.
static void kernels_stop_at_n(void **st) {
    (void)st;
    static const char *const NAMES[] = {"gelu_forward",      "gelu_backward",      "residual_forward",
                                        "gelu_forward_vec4", "gelu_backward_vec4", "residual_forward_vec4"};
    static const int NVIEWS[] = {2, 3, 3, 2, 3, 3};
    const uint32_t n = 1000, len = n + 64;
    // Outputs (binding 0) end in sentinels, inputs in 1.0: a kernel that ran
    // on must change the tail (gelu(SENTINEL) would be SENTINEL).
    float *h = alloc_(len), *hin = alloc_(len);
    for (uint32_t i = 0; i < len; i++) {
        h[i] = i < n ? tu_randf(-1.0f, 1.0f) : SENTINEL;
        hin[i] = i < n ? h[i] : 1.0f;
    }
    for (int k = 0; k < 6; k++) {
        wgpt_view v[3];
        for (int i = 0; i < NVIEWS[k]; i++) {
            wgpt_buf *b = wgpt_buf_create(G, len * 4, "buf");
            TU_NONNULL(G, b);
            TU_OK(G, wgpt_buf_upload(G, b, 0, i ? hin : h, len * 4));
            v[i] = (wgpt_view){b, 0, 0};
        }
        wgpt_op op;
        wgpt_op_init(&op);
        uint32_t p = n;  // GeluParams / ResidualParams
        TU_NONNULL(G, wgpt_op_add1d(G, &op, NAMES[k], v, NVIEWS[k], &p, sizeof p, wgpt_groups(len)));
        TU_OK(G, wgpt_op_record(G, &op));
        float *got = alloc_(len);
        TU_OK(G, wgpt_buf_download(G, v[0].buf, 0, got, len * 4));
        for (uint32_t i = n; i < len; i++)
            if (got[i] != SENTINEL) fail_msg("%s wrote element %u, past n = %u", NAMES[k], i, n);
        wgpt_op_free(&op);
        for (int i = 0; i < NVIEWS[k]; i++) wgpt_buf_free(v[i].buf);
        free(got);
    }
    free(h), free(hin);
}

// The f16 mode's GELU (gelu_forward_f16: the result written as f16) is the
// f32 kernel's value rounded to nearest even, bit for bit; it writes nothing
// past its n halves; on the 64 KiB device in chunks (of a multiple of 128
// values, so the f16 view stays 256-byte aligned); refused for n % 8 != 0.
static void gelu_forward_f16_is_the_f32_one_rounded(void **st) {
    (void)st;
    static const size_t NS[] = {8, 2048, 2 * 37 * 4 * 48, 100000};
    wgpt_gpu *devs[2] = {G, SPLIT};
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
            wgpt_gpu *g = devs[d];
            size_t n = NS[k];
            float *x = alloc_(n);
            tu_fill(x, n, -X_MAX, X_MAX);
            x[0] = 20.0f, x[n - 1] = -20.0f;  // past the clamp at both ends
            float *f32 = ew_run(g, EW_GELU_FWD, x, NULL, 0.0f, n, 256);
            wgpt_view vx = ew_place(g, x, n, 256, "x");
            wgpt_buf *b16 = wgpt_buf_create(g, 256 + n * 2 + 16, "out f16");
            TU_NONNULL(g, b16);
            unsigned char *pre = malloc(256 + n * 2 + 16);
            memset(pre, 0xAB, 256 + n * 2 + 16);
            TU_OK(g, wgpt_buf_upload(g, b16, 0, pre, 256 + n * 2 + 16));
            wgpt_op op;
            wgpt_op_init(&op);
            TU_OK(g, wgpt_gelu_forward_f16(g, &op, (wgpt_view){b16, 256, n * 2}, vx, n));
            TU_OK(g, wgpt_op_record(g, &op));
            unsigned char *got = malloc(256 + n * 2 + 16);
            TU_OK(g, wgpt_buf_download(g, b16, 0, got, 256 + n * 2 + 16));
            const uint16_t *h = (const uint16_t *)(got + 256);
            for (size_t i = 0; i < n; i++)
                if (h[i] != ref_f16_from_f32(f32[i]))
                    fail_msg("gelu_forward_f16 n=%zu: element %zu is 0x%04x, f16(%.9g) = 0x%04x", n, i, h[i], f32[i],
                             ref_f16_from_f32(f32[i]));
            assert_memory_equal(got, pre, 256);
            assert_memory_equal(got + 256 + n * 2, pre, 16);
            wgpt_op_free(&op);
            wgpt_op_init(&op);
            assert_int_equal(wgpt_gelu_forward_f16(g, &op, (wgpt_view){b16, 256, 0}, vx, n - 2), -1);
            assert_non_null(strstr(wgpt_gpu_error(g), "multiple of 8"));
            assert_int_equal(op.n, 0);
            wgpt_buf_free(b16), wgpt_buf_free(vx.buf);
            free(pre), free(got), free(x), free(f32);
        }
}

// The f16 mode's GELU backward (gelu_backward_f16) writes gelu_backward's
// dinp bit for bit, and beside it that dinp rounded to f16, bit for bit;
// nothing past either; on the 64 KiB device in chunks; refused for n % 8 != 0.
static void gelu_backward_f16_is_the_f32_one_twice(void **st) {
    (void)st;
    static const size_t NS[] = {8, 2048, 2 * 37 * 4 * 48, 100000};
    wgpt_gpu *devs[2] = {G, SPLIT};
    for (int d = 0; d < 2; d++)
        for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
            wgpt_gpu *g = devs[d];
            size_t n = NS[k];
            float *x = alloc_(n), *y = alloc_(n), *zero = alloc_(n);
            tu_fill(x, n, -X_MAX, X_MAX);
            tu_fill(y, n, -2, 2);
            memset(zero, 0, n * sizeof *zero);
            x[0] = 20.0f, x[n - 1] = -20.0f;  // past the clamp at both ends
            float *f32 = ew_run(g, EW_GELU_BWD, x, y, 0.0f, n, 256);
            wgpt_view vx = ew_place(g, x, n, 256, "x"), vy = ew_place(g, y, n, 256, "dout"), vd = ew_place(g, zero, n, 256, "dinp");
            wgpt_buf *b16 = wgpt_buf_create(g, 256 + n * 2 + 16, "dinp f16");
            TU_NONNULL(g, b16);
            unsigned char *pre = malloc(256 + n * 2 + 16);
            memset(pre, 0xAB, 256 + n * 2 + 16);
            TU_OK(g, wgpt_buf_upload(g, b16, 0, pre, 256 + n * 2 + 16));
            wgpt_op op;
            wgpt_op_init(&op);
            TU_OK(g, wgpt_gelu_backward_f16(g, &op, vd, (wgpt_view){b16, 256, n * 2}, vx, vy, n));
            TU_OK(g, wgpt_op_record(g, &op));
            float *got32 = ew_fetch(g, vd, n, "gelu_backward_f16 dinp");
            assert_memory_equal(got32, f32, n * sizeof *f32);
            unsigned char *got = malloc(256 + n * 2 + 16);
            TU_OK(g, wgpt_buf_download(g, b16, 0, got, 256 + n * 2 + 16));
            const uint16_t *h = (const uint16_t *)(got + 256);
            for (size_t i = 0; i < n; i++)
                if (h[i] != ref_f16_from_f32(f32[i]))
                    fail_msg("gelu_backward_f16 n=%zu: element %zu is 0x%04x, f16(%.9g) = 0x%04x", n, i, h[i], f32[i],
                             ref_f16_from_f32(f32[i]));
            assert_memory_equal(got, pre, 256);
            assert_memory_equal(got + 256 + n * 2, pre, 16);
            wgpt_op_free(&op);
            wgpt_op_init(&op);
            assert_int_equal(wgpt_gelu_backward_f16(g, &op, vd, (wgpt_view){b16, 256, 0}, vx, vy, n - 2), -1);
            assert_non_null(strstr(wgpt_gpu_error(g), "multiple of 8"));
            assert_int_equal(op.n, 0);
            wgpt_buf_free(b16), wgpt_buf_free(vx.buf), wgpt_buf_free(vy.buf), wgpt_buf_free(vd.buf);
            free(pre), free(got), free(got32), free(x), free(y), free(zero), free(f32);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gelu_forward_f16_is_the_f32_one_rounded),
        cmocka_unit_test(gelu_backward_f16_is_the_f32_one_twice),
        cmocka_unit_test(gelu_large_inputs),
        cmocka_unit_test(kernels_stop_at_n),
    };
    return cmocka_run_group_tests_name("gelu_residual", tests, group_setup, tu_group_teardown);
}
