// test_infrastructure.c: the element-wise kernels of 00_infrastructure.wgsl
// bound directly (each twin, scalar and vec4, at sizes around the workgroup
// edges; the model layer's wgpt_infra_add is the "infrastructure" family of
// the op registry, tests/ops/infrastructure.c, run by test_ops) against plain
// C, and one dispatch past 65535 workgroups (the 2D fallback) that checks
// every element.
//
// Tolerance: fill, copy and clamp must be exact. scale and axpy do one f32
// multiply (and one add) per element, exactly as the C reference; only a fused
// multiply-add on the device can differ, by at most one rounding: 1 ulp of the
// result, so rtol 2^-23 * 2 plus a tiny atol for results near zero.
#include "test_util.h"

#include "model/elementwise.h"

static wgpt_gpu *G;

static const uint32_t SIZES[] = {1, 7, 255, 256, 257, 1027, 65536 + 3, 300001};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
static const float RTOL = 2.4e-7f, ATOL = 1e-30f;

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    return 0;
}
// How run_ dispatches: `name` itself with wgpt_groups(n) (WAY_SCALAR) or
// wgpt_ew_vec4_groups(n) (WAY_VEC4).
enum { WAY_SCALAR, WAY_VEC4 };

// Runs kernel `name` over n elements: dst (and src if given) uploaded, c as
// the constant; returns the downloaded dst. Buffers are one element larger
// than n, with a sentinel there that no kernel may touch.
static float *run_way_(const char *name, int way, uint32_t n, const float *dst0, const float *src0, float c) {
    const float SENTINEL = 12345.5f;
    wgpt_kernel *k = wgpt_kernel_get(G, name);
    TU_NONNULL(G, k);
    float *host = malloc(((size_t)n + 1) * sizeof *host);
    assert_non_null(host);
    memcpy(host, dst0, (size_t)n * sizeof *host);
    host[n] = SENTINEL;
    wgpt_buf *dst = wgpt_buf_create(G, ((uint64_t)n + 1) * 4, "dst");
    TU_NONNULL(G, dst);
    TU_OK(G, wgpt_buf_upload(G, dst, 0, host, ((uint64_t)n + 1) * 4));
    wgpt_buf *src = NULL;
    wgpt_view views[2] = {{dst, 0, (uint64_t)n * 4}, {NULL, 0, 0}};
    int nv = 1;
    if (src0) {
        src = wgpt_buf_create(G, (uint64_t)n * 4, "src");
        TU_NONNULL(G, src);
        TU_OK(G, wgpt_buf_upload(G, src, 0, src0, (uint64_t)n * 4));
        views[1] = (wgpt_view){src, 0, 0};
        nv = 2;
    }
    tu_scalar p = {n, c};
    // The binds live until the download has submitted their dispatches.
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_bind *b = NULL;
    b = wgpt_bind_create(G, k, views, nv, &p, sizeof p);
    TU_NONNULL(G, b);
    TU_OK(G, wgpt_dispatch1d(G, b, way == WAY_VEC4 ? wgpt_ew_vec4_groups(n) : wgpt_groups(n)));
    TU_OK(G, wgpt_buf_download(G, dst, 0, host, ((uint64_t)n + 1) * 4));
    if (host[n] != SENTINEL) fail_msg("%s with n=%u wrote past the end", name, n);
    wgpt_op_free(&op);
    wgpt_bind_free(b);
    wgpt_buf_free(dst);
    wgpt_buf_free(src);
    return host;
}

typedef void (*ref_fn)(float *, const float *, size_t, float);

// Sizes for the vec4 twins: multiples of 4 around a workgroup's 4096 floats
// (4 vec4s x 256 threads) and its 1024 vec4s, partial vec4 rounds included.
static const uint32_t SIZES4[] = {4, 252, 1024, 1028, 4096, 4100, 8192 - 4, 65536 + 4, 300004};
#define NSIZES4 (sizeof SIZES4 / sizeof SIZES4[0])

static void check_sizes_(const char *name, int way, const uint32_t *sizes, size_t nsizes, int with_src, float c,
                         ref_fn ref, float atol, float rtol) {
    for (size_t s = 0; s < nsizes; s++) {
        uint32_t n = sizes[s];
        float *dst = malloc(n * sizeof *dst), *src = malloc(n * sizeof *src), *want = malloc(n * sizeof *want);
        tu_fill(dst, n, -3.0f, 3.0f);
        tu_fill(src, n, -3.0f, 3.0f);
        memcpy(want, dst, n * sizeof *want);
        ref(want, src, n, c);
        float *got = run_way_(name, way, n, dst, with_src ? src : NULL, c);
        char what[64];
        snprintf(what, sizeof what, "%s n=%u", name, n);
        tu_assert_close(what, got, want, n, atol, rtol);
        free(got), free(dst), free(src), free(want);
    }
}

static void check_each_size_(const char *name, int with_src, float c, ref_fn ref, float atol, float rtol) {
    check_sizes_(name, WAY_SCALAR, SIZES, NSIZES, with_src, c, ref, atol, rtol);
}

// The vec4 twin `name`_vec4 at SIZES4 (`name` through wgpt_infra_add is the
// "infrastructure" family of the op registry, tests/ops/infrastructure.c).
static void check_vec4_(const char *name, int with_src, float c, ref_fn ref, float atol, float rtol) {
    char v4[32];
    snprintf(v4, sizeof v4, "%s_vec4", name);
    check_sizes_(v4, WAY_VEC4, SIZES4, NSIZES4, with_src, c, ref, atol, rtol);
}

static void ref_fill_zero(float *d, const float *s, size_t n, float c) {
    (void)s, (void)c;
    for (size_t i = 0; i < n; i++) d[i] = 0.0f;
}
static void ref_fill_const(float *d, const float *s, size_t n, float c) {
    (void)s;
    for (size_t i = 0; i < n; i++) d[i] = c;
}
static void ref_scale(float *d, const float *s, size_t n, float c) {
    (void)s;
    for (size_t i = 0; i < n; i++) d[i] = c * d[i];
}
static void ref_axpy(float *d, const float *s, size_t n, float c) {
    for (size_t i = 0; i < n; i++) d[i] = d[i] + c * s[i];
}
static void ref_copy(float *d, const float *s, size_t n, float c) {
    (void)c;
    memcpy(d, s, n * sizeof *d);
}
static void ref_clamp(float *d, const float *s, size_t n, float c) {
    (void)s;
    for (size_t i = 0; i < n; i++) d[i] = fmaxf(-c, fminf(c, d[i]));
}

static void fill_zero_matches_c(void **st) { (void)st; check_each_size_("fill_zero", 0, 0, ref_fill_zero, 0, 0); }
static void fill_const_matches_c(void **st) { (void)st; check_each_size_("fill_const", 0, -0.625f, ref_fill_const, 0, 0); }
static void scale_matches_c(void **st) { (void)st; check_each_size_("scale", 0, 0.37f, ref_scale, ATOL, RTOL); }
static void axpy_matches_c(void **st) { (void)st; check_each_size_("axpy", 1, -1.73f, ref_axpy, 1e-6f, RTOL); }
static void copy_matches_c(void **st) { (void)st; check_each_size_("copy", 1, 0, ref_copy, 0, 0); }
static void clamp_matches_c(void **st) { (void)st; check_each_size_("clamp_inplace", 0, 1.25f, ref_clamp, 0, 0); }
static void fill_zero_vec4_matches_c(void **st) { (void)st; check_vec4_("fill_zero", 0, 0, ref_fill_zero, 0, 0); }
static void fill_const_vec4_matches_c(void **st) { (void)st; check_vec4_("fill_const", 0, -0.625f, ref_fill_const, 0, 0); }
static void scale_vec4_matches_c(void **st) { (void)st; check_vec4_("scale", 0, 0.37f, ref_scale, ATOL, RTOL); }
static void axpy_vec4_matches_c(void **st) { (void)st; check_vec4_("axpy", 1, -1.73f, ref_axpy, 1e-6f, RTOL); }
static void copy_vec4_matches_c(void **st) { (void)st; check_vec4_("copy", 1, 0, ref_copy, 0, 0); }

// The vec4 twins on a 2D grid (3, 2): the host's fallback past 65535
// workgroups, too big to allocate here, linearises the same way. Every element
// of n = 6 workgroups' worth minus one vec4 is copied once; the tail is kept.
static void vec4_on_a_2d_grid(void **st) {
    (void)st;
    const uint32_t per_wg = 4 * WGPT_EW_V4_PER_THREAD * WGPT_WG, n = 6 * per_wg - 4, len = 6 * per_wg + 64;
    float *src = malloc(len * sizeof *src), *got = malloc(len * sizeof *got);
    for (uint32_t i = 0; i < len; i++) src[i] = (float)i;
    wgpt_buf *d = wgpt_buf_create(G, len * 4, "2d dst"), *s = wgpt_buf_create(G, len * 4, "2d src");
    TU_NONNULL(G, d);
    TU_NONNULL(G, s);
    TU_OK(G, wgpt_buf_upload(G, s, 0, src, len * 4));
    TU_OK(G, wgpt_buf_zero(G, d, 0, len * 4));
    wgpt_view v[2] = {{d, 0, 0}, {s, 0, 0}};  // longer than n: the kernel's own bounds check
    tu_scalar p = {n, 0};
    wgpt_bind *b = wgpt_bind_create(G, wgpt_kernel_get(G, "copy_vec4"), v, 2, &p, sizeof p);
    TU_NONNULL(G, b);
    TU_OK(G, wgpt_dispatch(G, b, 3, 2, 1));
    TU_OK(G, wgpt_buf_download(G, d, 0, got, len * 4));
    for (uint32_t i = 0; i < len; i++)
        if (got[i] != (i < n ? src[i] : 0.0f)) fail_msg("element %u: %g, expected %g", i, got[i], i < n ? src[i] : 0.0f);
    wgpt_bind_free(b), wgpt_buf_free(d), wgpt_buf_free(s);
    free(src), free(got);
}

// wgpt_infra_add refuses kernels it does not know and wrong view counts.
static void infra_add_refuses_bad_calls(void **st) {
    (void)st;
    wgpt_buf *d = wgpt_buf_create(G, 64, "d");
    wgpt_view v[2] = {{d, 0, 0}, {d, 0, 0}};
    wgpt_op op;
    wgpt_op_init(&op);
    assert_int_equal(wgpt_infra_add(G, &op, "clamp_inplace", v, 1, 16, 1.0f), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "clamp_inplace"));
    assert_int_equal(wgpt_infra_add(G, &op, "copy", v, 1, 16, 0.0f), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "copy"));
    assert_int_equal(op.n, 0);
    wgpt_op_free(&op);
    wgpt_buf_free(d);
}

// Several dispatches in one submission, with params changed between them:
// each dispatch must see its own constant, in order (x -> 2x -> 2x+1 -> 3*(2x+1)).
static void many_dispatches_one_submission(void **st) {
    (void)st;
    const uint32_t n = 1000;
    float *x = malloc(n * sizeof *x), *ones = malloc(n * sizeof *ones), *got = malloc(n * sizeof *got);
    tu_fill(x, n, -1, 1);
    for (uint32_t i = 0; i < n; i++) ones[i] = 1.0f;
    wgpt_buf *d = wgpt_buf_create(G, n * 4, "d"), *o = wgpt_buf_create(G, n * 4, "ones");
    TU_OK(G, wgpt_buf_upload(G, d, 0, x, n * 4));
    TU_OK(G, wgpt_buf_upload(G, o, 0, ones, n * 4));
    wgpt_view vd = {d, 0, 0}, vdo[2] = {{d, 0, 0}, {o, 0, 0}};
    tu_scalar p2 = {n, 2.0f}, p1 = {n, 1.0f}, p3 = {n, 3.0f};
    wgpt_bind *sc = wgpt_bind_create(G, wgpt_kernel_get(G, "scale"), &vd, 1, &p2, sizeof p2);
    wgpt_bind *ax = wgpt_bind_create(G, wgpt_kernel_get(G, "axpy"), vdo, 2, &p1, sizeof p1);
    TU_NONNULL(G, sc);
    TU_NONNULL(G, ax);
    TU_OK(G, wgpt_dispatch1d(G, sc, wgpt_groups(n)));
    TU_OK(G, wgpt_dispatch1d(G, ax, wgpt_groups(n)));
    TU_OK(G, wgpt_bind_set_params(G, sc, &p3, sizeof p3));  // must not affect the first scale
    TU_OK(G, wgpt_dispatch1d(G, sc, wgpt_groups(n)));
    TU_OK(G, wgpt_buf_download(G, d, 0, got, n * 4));
    for (uint32_t i = 0; i < n; i++) x[i] = 3.0f * (2.0f * x[i] + 1.0f);
    tu_assert_close("scale/axpy/scale chain", got, x, n, 1e-6f, 4e-7f);
    wgpt_bind_free(sc), wgpt_bind_free(ax), wgpt_buf_free(d), wgpt_buf_free(o);
    free(x), free(ones), free(got);
}

// Past 65535 workgroups of 256 the host dispatches (65535, rows, 1) and the
// kernel linearises with flat_id. Every element must be written exactly once
// and the tail beyond n left alone: fill, then axpy with the index pattern.
static void dispatch_past_65535_workgroups(void **st) {
    (void)st;
    const uint32_t n = 65535u * 256u + 70000u;  // 16,846,960 elements, 65809 workgroups
    assert_true(wgpt_groups(n) > WGPT_MAX_WG_DIM);
    float *idx = malloc(((size_t)n + 64) * sizeof *idx);
    assert_non_null(idx);
    for (uint32_t i = 0; i < n + 64; i++) idx[i] = (float)(i % 4096);
    wgpt_buf *d = wgpt_buf_create(G, ((uint64_t)n + 64) * 4, "big dst");
    wgpt_buf *s = wgpt_buf_create(G, (uint64_t)n * 4, "big src");
    TU_NONNULL(G, d);
    TU_NONNULL(G, s);
    TU_OK(G, wgpt_buf_upload(G, s, 0, idx, (uint64_t)n * 4));
    TU_OK(G, wgpt_buf_upload(G, d, 0, idx, ((uint64_t)n + 64) * 4));  // tail keeps idx values
    wgpt_view vd = {d, 0, (uint64_t)n * 4}, vds[2] = {{d, 0, (uint64_t)n * 4}, {s, 0, 0}};
    tu_scalar pf = {n, 1.0f}, pa = {n, 2.0f};
    wgpt_bind *f = wgpt_bind_create(G, wgpt_kernel_get(G, "fill_const"), &vd, 1, &pf, sizeof pf);
    wgpt_bind *a = wgpt_bind_create(G, wgpt_kernel_get(G, "axpy"), vds, 2, &pa, sizeof pa);
    TU_NONNULL(G, f);
    TU_NONNULL(G, a);
    TU_OK(G, wgpt_dispatch1d(G, f, wgpt_groups(n)));
    TU_OK(G, wgpt_dispatch1d(G, a, wgpt_groups(n)));
    float *got = malloc(((size_t)n + 64) * sizeof *got);
    TU_OK(G, wgpt_buf_download(G, d, 0, got, ((uint64_t)n + 64) * 4));
    for (uint32_t i = 0; i < n + 64; i++) {
        float want = i < n ? 1.0f + 2.0f * (float)(i % 4096) : (float)(i % 4096);
        if (got[i] != want) fail_msg("element %u: %g, expected %g", i, got[i], want);
    }
    wgpt_bind_free(f), wgpt_bind_free(a), wgpt_buf_free(d), wgpt_buf_free(s);
    free(idx), free(got);
}

// Binding a range that starts inside a buffer: only that range changes.
static void binding_with_offset(void **st) {
    (void)st;
    uint32_t align = wgpt_gpu_get_info(G)->storage_offset_align;
    uint32_t off = align < 256 ? 256 : align;  // bytes
    const uint32_t n = 300, total = off / 4 + n + 10;
    float *h = calloc(total, sizeof *h);
    wgpt_buf *d = wgpt_buf_create(G, total * 4, "offset dst");
    TU_OK(G, wgpt_buf_upload(G, d, 0, h, total * 4));
    wgpt_view v = {d, off, n * 4};
    tu_scalar p = {n, 7.0f};
    wgpt_bind *b = wgpt_bind_create(G, wgpt_kernel_get(G, "fill_const"), &v, 1, &p, sizeof p);
    TU_NONNULL(G, b);
    TU_OK(G, wgpt_dispatch1d(G, b, wgpt_groups(n)));
    TU_OK(G, wgpt_buf_download(G, d, 0, h, total * 4));
    for (uint32_t i = 0; i < total; i++) {
        float want = (i >= off / 4 && i < off / 4 + n) ? 7.0f : 0.0f;
        if (h[i] != want) fail_msg("element %u: %g, expected %g", i, h[i], want);
    }
    wgpt_bind_free(b), wgpt_buf_free(d), free(h);
}

// wgpt_buf_zero is recorded in order with dispatches.
static void zero_fill_is_ordered(void **st) {
    (void)st;
    const uint32_t n = 777;
    wgpt_buf *d = wgpt_buf_create(G, n * 4, "z");
    wgpt_view v = {d, 0, 0};
    tu_scalar p = {n, 5.0f};
    wgpt_bind *b = wgpt_bind_create(G, wgpt_kernel_get(G, "fill_const"), &v, 1, &p, sizeof p);
    TU_OK(G, wgpt_dispatch1d(G, b, wgpt_groups(n)));
    TU_OK(G, wgpt_buf_zero(G, d, 0, 400 * 4));
    float *h = malloc(n * sizeof *h);
    TU_OK(G, wgpt_buf_download(G, d, 0, h, n * 4));
    for (uint32_t i = 0; i < n; i++) assert_true(h[i] == (i < 400 ? 0.0f : 5.0f));
    wgpt_bind_free(b), wgpt_buf_free(d), free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fill_zero_matches_c),
        cmocka_unit_test(fill_const_matches_c),
        cmocka_unit_test(scale_matches_c),
        cmocka_unit_test(axpy_matches_c),
        cmocka_unit_test(copy_matches_c),
        cmocka_unit_test(clamp_matches_c),
        cmocka_unit_test(fill_zero_vec4_matches_c),
        cmocka_unit_test(fill_const_vec4_matches_c),
        cmocka_unit_test(scale_vec4_matches_c),
        cmocka_unit_test(axpy_vec4_matches_c),
        cmocka_unit_test(copy_vec4_matches_c),
        cmocka_unit_test(vec4_on_a_2d_grid),
        cmocka_unit_test(infra_add_refuses_bad_calls),
        cmocka_unit_test(many_dispatches_one_submission),
        cmocka_unit_test(dispatch_past_65535_workgroups),
        cmocka_unit_test(binding_with_offset),
        cmocka_unit_test(zero_fill_is_ordered),
    };
    return cmocka_run_group_tests_name("infrastructure", tests, group_setup, tu_group_teardown);
}
