// test_microbench.c: timing prepared ops (bench/microbench.h): the median, the
// per-kernel split from GPU timestamps, the exact number of warm-up and timed
// runs (test kernels count their own runs), the wall-clock fallback, a larger
// op timing longer, and the refusals (bad run counts, untimed dispatches, too
// many kernels) instead of a silently wrong figure.
#include "test_util.h"

#include "model/op.h"
#include "bench/microbench.h"

static wgpt_gpu *T;  // opened with profiling (NULL if the device has no timestamps)
static wgpt_gpu *W;  // without: the wall clock

static int group_setup(void **state) {
    (void)state;
    W = tu_gpu_open(NULL);
    char *text = tu_read_source("tests/kernels/test_microbench.wgsl");
    TU_OK(W, wgpt_gpu_add_kernel_file(W, "test_microbench.wgsl", text));
    if (wgpt_gpu_get_info(W)->has_timestamps) {
        wgpt_gpu_options o = {.adapter_index = -1, .profile = 1};
        T = tu_gpu_open(&o);
        TU_OK(T, wgpt_gpu_add_kernel_file(T, "test_microbench.wgsl", text));
    }
    free(text);
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(W);
    if (T) wgpt_gpu_close(T);
    return 0;
}

// Appends one single-thread dispatch of mb_k<i> on count.
static void add_counter_(wgpt_gpu *g, wgpt_op *op, wgpt_buf *count, int i) {
    char name[16];
    snprintf(name, sizeof name, "mb_k%d", i);
    wgpt_view v = {count, 0, 0};
    TU_NONNULL(g, wgpt_op_add(g, op, name, &v, 1, NULL, 0, 1, 1, 1));
}

// Appends a copy of n floats from src to dst (00_infrastructure's `copy`).
static void add_copy_(wgpt_gpu *g, wgpt_op *op, wgpt_buf *dst, wgpt_buf *src, uint32_t n) {
    wgpt_view v[2] = {{dst, 0, n * 4ull}, {src, 0, n * 4ull}};
    tu_scalar p = {n, 0};
    TU_NONNULL(g, wgpt_op_add1d(g, op, "copy", v, 2, &p, sizeof p, wgpt_groups(n)));
}

static float count_(wgpt_gpu *g, wgpt_buf *count, int i) {
    float c[16];
    TU_OK(g, wgpt_buf_download(g, count, 0, c, sizeof c));
    return c[i];
}

static void median_odd_even_empty(void **st) {
    (void)st;
    double odd[5] = {5, 1, 4, 2, 3};
    assert_float_equal(wgpt_microbench_median(odd, 5), 3, 0);
    assert_float_equal(odd[0], 1, 0);  // sorted in place
    assert_float_equal(odd[4], 5, 0);
    double even[4] = {10, 1, 7, 3};
    assert_float_equal(wgpt_microbench_median(even, 4), 5, 0);
    double one[1] = {2.5}, dup[3] = {2, 9, 2};
    assert_float_equal(wgpt_microbench_median(one, 1), 2.5, 0);
    assert_float_equal(wgpt_microbench_median(dup, 3), 2, 0);
    assert_float_equal(wgpt_microbench_median(NULL, 0), 0, 0);
}

static void kernel_ms_sums_matching_names(void **st) {
    (void)st;
    wgpt_microbench r = {.nkernels = 3,
                         .kernel = {"matmul_backward_input", "matmul_backward_weight", "matmul_backward_input_v2"},
                         .kernel_ms = {1.5, 2.0, 0.25}};
    assert_float_equal(wgpt_microbench_kernel_ms(&r, "backward_input"), 1.75, 1e-12);
    assert_float_equal(wgpt_microbench_kernel_ms(&r, "backward_weight"), 2.0, 1e-12);
    assert_float_equal(wgpt_microbench_kernel_ms(&r, "matmul"), 3.75, 1e-12);
    assert_float_equal(wgpt_microbench_kernel_ms(&r, "forward"), -1, 0);
    wgpt_microbench none = {.nkernels = 0};
    assert_float_equal(wgpt_microbench_kernel_ms(&none, ""), -1, 0);
}

// Timestamps: per-kernel medians in first-dispatch order, every run counted.
static void timestamps_split_by_kernel(void **st) {
    (void)st;
    if (!T) {
        printf("skipped: needs timestamp queries; this adapter has none\n");
        skip();
    }
    const uint32_t n = 1 << 20;
    wgpt_buf *count = wgpt_buf_create(T, 64, "count");
    wgpt_buf *a = wgpt_buf_create(T, n * 4, "a"), *b = wgpt_buf_create(T, n * 4, "b");
    TU_NONNULL(T, count && a && b);
    wgpt_op op;
    wgpt_op_init(&op);
    add_counter_(T, &op, count, 0);
    add_counter_(T, &op, count, 1);
    add_copy_(T, &op, b, a, n);
    add_counter_(T, &op, count, 0);
    wgpt_microbench_opts o = {.timestamps = 1, .warmup = 2, .runs = 5};
    wgpt_microbench r;
    TU_OK(T, wgpt_microbench_time(T, &op, &o, &r));
    assert_int_equal(r.timestamps, 1);
    assert_int_equal(r.runs, 5);
    assert_int_equal(r.nkernels, 3);
    assert_string_equal(r.kernel[0], "mb_k0");
    assert_string_equal(r.kernel[1], "mb_k1");
    assert_string_equal(r.kernel[2], "copy");
    // 2 warm-up + 5 timed runs, mb_k0 twice a run.
    assert_float_equal(count_(T, count, 0), 14, 0);
    assert_float_equal(count_(T, count, 1), 7, 0);
    printf("  run %.4f ms (fastest %.4f): mb_k0 %.4f, mb_k1 %.4f, copy %.4f\n", r.ms, r.min_ms, r.kernel_ms[0],
           r.kernel_ms[1], r.kernel_ms[2]);
    assert_true(r.kernel_ms[2] > 0);
    // Each run's total is at least each kernel's share, so the medians are too.
    for (int k = 0; k < 3; k++) assert_true(r.kernel_ms[k] >= 0 && r.kernel_ms[k] <= r.ms + 1e-9);
    assert_true(r.min_ms > 0 && r.min_ms <= r.ms);
    assert_true(wgpt_microbench_kernel_ms(&r, "copy") == r.kernel_ms[2]);
    // A kernel dispatched 4 times a run counts every dispatch (margin for caches and noise).
    wgpt_op four;
    wgpt_op_init(&four);
    for (int i = 0; i < 4; i++) add_copy_(T, &four, b, a, n);
    wgpt_microbench r4;
    TU_OK(T, wgpt_microbench_time(T, &four, &o, &r4));
    printf("  copy 4 times a run: %.4f ms\n", r4.kernel_ms[0]);
    assert_int_equal(r4.nkernels, 1);
    assert_true(r4.kernel_ms[0] > 2 * r.kernel_ms[2]);
    wgpt_op_free(&four);
    wgpt_op_free(&op);
    wgpt_buf_free(count), wgpt_buf_free(a), wgpt_buf_free(b);
}

// The wall clock: no kernel split, the same run count; min_warmup_ms adds runs.
static void wall_clock_and_min_warmup(void **st) {
    (void)st;
    wgpt_buf *count = wgpt_buf_create(W, 64, "count");
    TU_NONNULL(W, count);
    wgpt_op op;
    wgpt_op_init(&op);
    add_counter_(W, &op, count, 3);
    wgpt_microbench_opts o = {.timestamps = 0, .warmup = 1, .runs = 3};
    wgpt_microbench r;
    TU_OK(W, wgpt_microbench_time(W, &op, &o, &r));
    assert_int_equal(r.timestamps, 0);
    assert_int_equal(r.nkernels, 0);
    assert_true(r.ms > 0 && r.min_ms > 0 && r.min_ms <= r.ms);
    assert_float_equal(wgpt_microbench_kernel_ms(&r, "mb_k3"), -1, 0);
    assert_float_equal(count_(W, count, 3), 4, 0);
    // No warm-up runs asked, but 30 ms of warm-up: more than one run of a ~0.1 ms op.
    o = (wgpt_microbench_opts){.timestamps = 0, .warmup = 0, .runs = 1, .min_warmup_ms = 30};
    TU_OK(W, wgpt_microbench_time(W, &op, &o, &r));
    float c = count_(W, count, 3) - 4;
    printf("  %.0f runs for a 30 ms warm-up and 1 timed run (%.3f ms each)\n", c, r.ms);
    assert_true(c >= 3);
    wgpt_op_free(&op);
    wgpt_buf_free(count);
}

// 16 MiB copied takes longer than 256 bytes, with either clock.
static void refusals_name_the_problem(void **st) {
    (void)st;
    wgpt_buf *count = wgpt_buf_create(W, 64, "count");
    TU_NONNULL(W, count);
    wgpt_op op;
    wgpt_op_init(&op);
    add_counter_(W, &op, count, 0);
    wgpt_microbench r;
    wgpt_microbench_opts o = {.timestamps = 0, .warmup = 0, .runs = 0};
    assert_int_equal(wgpt_microbench_time(W, &op, &o, &r), -1);
    assert_non_null(strstr(wgpt_gpu_error(W), "0 runs"));
    o.runs = WGPT_MICROBENCH_MAX_RUNS + 1;
    assert_int_equal(wgpt_microbench_time(W, &op, &o, &r), -1);
    o = (wgpt_microbench_opts){.timestamps = 0, .warmup = -1, .runs = 1};
    assert_int_equal(wgpt_microbench_time(W, &op, &o, &r), -1);
    // Timestamps on a device opened without profiling.
    o = (wgpt_microbench_opts){.timestamps = 1, .warmup = 0, .runs = 1};
    assert_int_equal(wgpt_microbench_time(W, &op, &o, &r), -1);
    assert_non_null(strstr(wgpt_gpu_error(W), "profiling"));
    assert_float_equal(count_(W, count, 0), 0, 0);  // nothing ran
    wgpt_op_free(&op);
    wgpt_buf_free(count);
    if (!T) return;
    // One kernel more than the result holds.
    count = wgpt_buf_create(T, 64, "count");
    TU_NONNULL(T, count);
    wgpt_op_init(&op);
    for (int i = 0; i <= WGPT_MICROBENCH_MAX_KERNELS; i++) add_counter_(T, &op, count, i);
    assert_int_equal(wgpt_microbench_time(T, &op, &o, &r), -1);
    printf("  %s\n", wgpt_gpu_error(T));
    assert_non_null(strstr(wgpt_gpu_error(T), "mb_k8"));
    wgpt_op_free(&op);
    // More dispatches than the profiler times in one submission: refused, not undercounted.
    wgpt_op_init(&op);
    for (int i = 0; i < 2049; i++) add_counter_(T, &op, count, 0);
    assert_int_equal(wgpt_microbench_time(T, &op, &o, &r), -1);
    printf("  %s\n", wgpt_gpu_error(T));
    assert_non_null(strstr(wgpt_gpu_error(T), "2049 dispatches"));
    wgpt_op_free(&op);
    // The device still works after the refusals.
    wgpt_op_init(&op);
    add_counter_(T, &op, count, 0);
    TU_OK(T, wgpt_microbench_time(T, &op, &o, &r));
    wgpt_op_free(&op);
    wgpt_buf_free(count);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(median_odd_even_empty),          cmocka_unit_test(kernel_ms_sums_matching_names),
        cmocka_unit_test(timestamps_split_by_kernel),     cmocka_unit_test(wall_clock_and_min_warmup),
        cmocka_unit_test(refusals_name_the_problem),
    };
    return cmocka_run_group_tests_name("microbench", tests, group_setup, group_teardown);
}
