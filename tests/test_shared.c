// test_shared.c: the shared preamble (00_shared.wgsl) through test kernels:
// workgroup reductions for any subgroup size, back-to-back reductions (the
// trailing barrier), nan_guard / is_finite on NaN and Inf, and the subgroup
// layout the reductions assume.
//
// Tolerance of sums: the GPU adds in a tree, the reference in double; for n
// values of magnitude <= 1 the f32 tree error is below n * 2^-24 * log2(n)
// relative to sum |x|, so we allow 1e-6 * sum|x| * log2(n)+1e-6. Max is exact.
#include "test_util.h"

static wgpt_gpu *G;

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    char *text = tu_read_source("tests/kernels/test_shared.wgsl");
    TU_OK(G, wgpt_gpu_add_kernel_file(G, "test_shared.wgsl", text));
    free(text);
    return 0;
}
typedef struct {
    uint32_t rows, len;
} rows_params;

// Runs a (x -> out) test kernel with one workgroup per row (or 1D over len).
static float *run_rows_(const char *kernel, const float *x, uint32_t rows, uint32_t len, size_t out_n,
                        uint64_t groups) {
    wgpt_kernel *k = wgpt_kernel_get(G, kernel);
    TU_NONNULL(G, k);
    wgpt_buf *bx = wgpt_buf_create(G, (uint64_t)rows * len * 4, "x");
    wgpt_buf *bo = wgpt_buf_create(G, out_n * 4, "out");
    TU_OK(G, wgpt_buf_upload(G, bx, 0, x, (uint64_t)rows * len * 4));
    wgpt_view v[2] = {{bx, 0, 0}, {bo, 0, 0}};
    rows_params p = {rows, len};
    wgpt_bind *b = wgpt_bind_create(G, k, v, 2, &p, sizeof p);
    TU_NONNULL(G, b);
    TU_OK(G, wgpt_dispatch1d(G, b, groups));
    float *out = malloc(out_n * sizeof *out);
    TU_OK(G, wgpt_buf_download(G, bo, 0, out, out_n * 4));
    wgpt_bind_free(b), wgpt_buf_free(bx), wgpt_buf_free(bo);
    return out;
}

static const uint32_t LENS[] = {1, 7, 8, 31, 255, 256, 257, 1000, 4099};

static void row_sum_any_length(void **st) {
    (void)st;
    const uint32_t rows = 5;
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
        uint32_t len = LENS[li];
        float *x = malloc((size_t)rows * len * sizeof *x);
        tu_fill(x, (size_t)rows * len, -1, 1);
        float *out = run_rows_("test_row_sum", x, rows, len, rows, rows);
        for (uint32_t r = 0; r < rows; r++) {
            double want = 0, mag = 0;
            for (uint32_t j = 0; j < len; j++) want += x[r * len + j], mag += fabs(x[r * len + j]);
            double tol = 1e-6 * mag * (log2((double)len) + 1) + 1e-6;
            if (fabs(out[r] - want) > tol)
                fail_msg("len %u row %u: sum %.9g, expected %.9g (tol %.3g)", len, r, out[r], want, tol);
        }
        free(x), free(out);
    }
}

// Max of all-negative rows: an identity of 0 (instead of NEG_INF) would win.
// Then sum of exp(x - max) right after, sharing the scratch memory.
static void max_then_sum_all_negative(void **st) {
    (void)st;
    const uint32_t rows = 4;
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
        uint32_t len = LENS[li];
        float *x = malloc((size_t)rows * len * sizeof *x);
        tu_fill(x, (size_t)rows * len, -50, -3);
        float *out = run_rows_("test_row_max_then_sum", x, rows, len, 2 * rows, rows);
        for (uint32_t r = 0; r < rows; r++) {
            float m = -INFINITY;
            for (uint32_t j = 0; j < len; j++) m = fmaxf(m, x[r * len + j]);
            double s = 0;
            for (uint32_t j = 0; j < len; j++) s += exp((double)x[r * len + j] - m);
            if (out[2 * r] == 1e30f) fail_msg("len %u row %u: a repeated max/sum round disagreed", len, r);
            if (out[2 * r] != m) fail_msg("len %u row %u: max %.9g, expected %.9g", len, r, out[2 * r], m);
            // exp on the device: WGSL allows 3 + 2|x| ulp; the values are in [e^-47, 1].
            double tol = 1e-5 * s + 1e-6;
            if (fabs(out[2 * r + 1] - s) > tol)
                fail_msg("len %u row %u: sum of exp %.9g, expected %.9g", len, r, out[2 * r + 1], s);
        }
        free(x), free(out);
    }
}

static void nan_guard_and_is_finite(void **st) {
    (void)st;
    const float vals[] = {0.0f, -0.0f, 1.0f, -2.5f, 3.4028235e38f, -3.4028235e38f, 1e-45f, INFINITY, -INFINITY,
                          NAN, -NAN};
    const int finite[] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    const uint32_t n = sizeof vals / sizeof vals[0];
    float *out = run_rows_("test_guards", vals, 1, n, 2 * n, wgpt_groups(n));
    for (uint32_t i = 0; i < n; i++) {
        float want = finite[i] ? vals[i] : 0.0f;
        if (memcmp(&out[2 * i], &want, 4) != 0 && !(want == 0 && out[2 * i] == 0))
            fail_msg("nan_guard(%g) = %g, expected %g", vals[i], out[2 * i], want);
        if (out[2 * i + 1] != (float)finite[i])
            fail_msg("is_finite(%g) = %g, expected %d", vals[i], out[2 * i + 1], finite[i]);
    }
    free(out);
}

static void subgroups_are_contiguous(void **st) {
    (void)st;
    const uint32_t groups = 3;
    wgpt_kernel *k = wgpt_kernel_get(G, "test_subgroup_layout");
    TU_NONNULL(G, k);
    size_t n = (size_t)groups * WGPT_WG + groups;
    wgpt_buf *bo = wgpt_buf_create(G, n * 4, "out");
    wgpt_view v = {bo, 0, 0};
    rows_params p = {groups, 0};
    wgpt_bind *b = wgpt_bind_create(G, k, &v, 1, &p, sizeof p);
    TU_NONNULL(G, b);
    TU_OK(G, wgpt_dispatch1d(G, b, groups));
    float *out = malloc(n * sizeof *out);
    TU_OK(G, wgpt_buf_download(G, bo, 0, out, n * 4));
    const wgpt_gpu_info *info = wgpt_gpu_get_info(G);
    for (uint32_t g = 0; g < groups; g++) {
        uint32_t sg = (uint32_t)out[groups * WGPT_WG + g];
        if (sg < info->subgroup_min || sg > info->subgroup_max || WGPT_WG % sg)
            fail_msg("subgroup size %u outside the adapter's [%u, %u] or not dividing %u", sg, info->subgroup_min,
                     info->subgroup_max, WGPT_WG);
        for (uint32_t t = 0; t < WGPT_WG; t++)
            if (out[g * WGPT_WG + t] != (float)(t % sg))
                fail_msg("workgroup %u thread %u: lane %g, expected %u: subgroups are not contiguous ranges of "
                         "local_invocation_index on this device, and wg_reduce_* would be wrong",
                         g, t, out[g * WGPT_WG + t], t % sg);
    }
    printf("subgroup size in kernels: %u\n", (uint32_t)out[groups * WGPT_WG]);
    wgpt_bind_free(b), wgpt_buf_free(bo), free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(subgroups_are_contiguous),
        cmocka_unit_test(row_sum_any_length),
        cmocka_unit_test(max_then_sum_all_negative),
        cmocka_unit_test(nan_guard_and_is_finite),
    };
    return cmocka_run_group_tests_name("shared", tests, group_setup, tu_group_teardown);
}
