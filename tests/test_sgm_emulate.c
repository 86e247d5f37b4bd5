// test_sgm_emulate.c: the subgroup-matrix emulation (src/gpu/sgm_emulate.h)
// against a plain C multiply, with the layouts and element types the linear
// kernel does not use (column-major loads from packed halves and from f32,
// a column-major store into vec4<u32>, offsets that are not zero:
// tests/kernels/test_sgm_emulate.wgsl), and the rewrite's refusals of what it
// cannot emulate, each naming it. The tensor cores' own kernels on it:
// test_linear_f16, test_gpt2_f16.
#include <errno.h>

#include "gpu/sgm_emulate.h"
#include "ref/gpt2_ref.h"  // ref_f16_from_f32, ref_f32_from_f16
#include "test_util.h"


static char dir[] = "/tmp/wgpt-sgm-emu-XXXXXX";
static int made_;

static int teardown_(void **state) {
    if (made_) tu_rm_rf(dir);
    return tu_group_teardown(state);
}

static void write_(const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void emulated_multiply_matches_reference(void **st) {
    (void)st;
    assert_non_null(mkdtemp(dir));
    made_ = 1;
    char *shared = tu_read_source("kernels/00_shared.wgsl");
    write_("00_shared.wgsl", shared);
    free(shared);
    char *kernel = tu_read_source("tests/kernels/test_sgm_emulate.wgsl");
    write_("50_sgm_emu_check.wgsl", kernel);
    free(kernel);
    wgpt_gpu_options o = {.adapter_index = -1, .kernel_dir = dir, .emulate_sgm = 1};
    char err[2048];
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) {
        printf("skipped: needs a device that can emulate subgroup matrices: %s\n", err);  // no f16, or real sizes only
        skip();
    }
    const wgpt_gpu_info *i = wgpt_gpu_get_info(g);
    if (!i->sgm_emulated) {
        printf("skipped: '%s' has real subgroup matrices (test_linear_f16 runs its kernels there)\n", i->name);
        wgpt_gpu_close(g);
        skip();
    }
    printf("'%s': emulated %ux%ux%u fragments in subgroups of %u\n", i->name, WGPT_SGM_EMU_M, WGPT_SGM_EMU_N,
           WGPT_SGM_EMU_K, i->subgroup_min);
    enum { M = 16, N = 8, K = 16 };
    uint16_t ah[(2 + 2 * M) * 8], bh[2 + 16 * N + 16];
    float c[3 + 16 * N], ref[M][N];
    memset(ah, 0, sizeof ah), memset(bh, 0, sizeof bh), memset(c, 0, sizeof c);
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) ah[(2 + 2 * r) * 8 + k] = ref_f16_from_f32(tu_randf(-2, 2));
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) bh[2 + 16 * j + k] = ref_f16_from_f32(tu_randf(-2, 2));
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) c[3 + 16 * j + r] = tu_randf(-1, 1);
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) {
            double s = c[3 + 16 * j + r];
            for (int k = 0; k < K; k++)
                s += (double)ref_f32_from_f16(ah[(2 + 2 * r) * 8 + k]) * ref_f32_from_f16(bh[2 + 16 * j + k]);
            ref[r][j] = (float)s;
        }
    wgpt_buf *ba = wgpt_buf_create(g, sizeof ah, "a"), *bb = wgpt_buf_create(g, sizeof bh, "b"),
             *bc = wgpt_buf_create(g, sizeof c, "c"), *br = wgpt_buf_create(g, M * N * 4, "out_r"),
             *bo = wgpt_buf_create(g, M * N * 4, "out_c");
    TU_OK(g, wgpt_buf_upload(g, ba, 0, ah, sizeof ah));
    TU_OK(g, wgpt_buf_upload(g, bb, 0, bh, sizeof bh));
    TU_OK(g, wgpt_buf_upload(g, bc, 0, c, sizeof c));
    wgpt_kernel *k = wgpt_kernel_get(g, "sgm_emu_check");
    TU_NONNULL(g, k);
    wgpt_view v[5] = {{ba, 0, 0}, {bb, 0, 0}, {bc, 0, 0}, {br, 0, 0}, {bo, 0, 0}};
    wgpt_bind *bd = wgpt_bind_create(g, k, v, 5, NULL, 0);
    TU_NONNULL(g, bd);
    TU_OK(g, wgpt_dispatch(g, bd, 1, 1, 1));
    float out_r[M * N], out_c[M * N];
    TU_OK(g, wgpt_buf_download(g, br, 0, out_r, sizeof out_r));
    TU_OK(g, wgpt_buf_download(g, bo, 0, out_c, sizeof out_c));
    // f32 sums of exact products in order of k against the double sum: a few
    // f32 roundings of values below 2^6
    double worst = 0;
    for (int r = 0; r < M; r++)
        for (int j = 0; j < N; j++) {
            double e1 = fabs(out_r[r * N + j] - ref[r][j]), e2 = fabs(out_c[j * M + r] - ref[r][j]);
            worst = fmax(worst, fmax(e1, e2));
        }
    printf("d = c + a b, both stores: worst error %.2e (bound 1e-4)\n", worst);
    assert_true(worst < 1e-4);
    wgpt_bind_free(bd);
    wgpt_buf_free(ba), wgpt_buf_free(bb), wgpt_buf_free(bc), wgpt_buf_free(br), wgpt_buf_free(bo);
    wgpt_gpu_close(g);
}

// What the rewrite cannot emulate: refused, naming it (never a silent change).
static void refuses_what_it_cannot_emulate(void **st) {
    (void)st;
    const wgpt_matrix_config cfg = {WGPT_MATRIX_F16, WGPT_MATRIX_F32, 16, 8, 16, 8, 8};
    static const struct {
        const char *code, *says;
    } bad[] = {
        {"var<workgroup> t: array<f32, 256>;\nfn f() { let m = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, "
         "row_major>(&t, 0u, 16u); }\n",
         "an f16 matrix loaded from 't', an array of f32"},
        {"var<workgroup> t: array<f32, 256>;\nfn f(p: ptr<workgroup, array<f32, 256>>) { let m = "
         "subgroupMatrixLoad<subgroup_matrix_result<f32, 8, 16>, row_major>(p, 0u, 8u); }\n",
         "emulated ones take &array"},
        {"alias C = subgroup_matrix_result<f32, SGM_N, 16>;\n", "matrix dimension 'SGM_N'"},
        {"alias C = subgroup_matrix_result<f32, 8, 12>;\n", "12 rows in subgroups of 8"},
        {"alias C = subgroup_matrix_result<f32, 8, 16>;\nalias D = subgroup_matrix_result<f32, 16, 16>;\n",
         "two result matrix types"},
        {"alias C = subgroup_matrix_result<f32, 8, 16>;\nfn f(c: C) -> C { return subgroupMatrixScalarMultiply(c, 2.0); }\n",
         "'subgroupMatrixScalarMultiply' is not emulated"},
        {"var<workgroup> t: array<f32, 256>;\nfn f() { let m = subgroupMatrixLoad<subgroup_matrix_result<f32, 8, 16>>"
         "(&t, 0u, false, 8u); }\n",
         "<type, layout>(&array, offset, stride)"},
        {"fn f() { }\n", "no subgroup-matrix type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        char *out = wgpt_sgm_emulate_source(bad[i].code, &cfg, err, sizeof err);
        printf("refused: %s\n", err);
        if (out) fail_msg("case %zu was rewritten, not refused:\n%s", i, out);
        if (!strstr(err, bad[i].says)) fail_msg("case %zu: '%s' does not say '%s'", i, err, bad[i].says);
    }
    // and what it takes keeps every line where it was
    const char *good = "alias C = subgroup_matrix_result<f32, SGM_TN, SGM_TM>;\n// subgroupMatrixLoad in a comment\n"
                       "fn f() -> C { return C(); }\n";
    char err[512];
    char *out = wgpt_sgm_emulate_source(good, &cfg, err, sizeof err);
    if (!out) fail_msg("%s", err);
    assert_non_null(strstr(out, "alias C = SgmEmu0;\n// subgroupMatrixLoad in a comment\nfn f() -> C"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(emulated_multiply_matches_reference),
        cmocka_unit_test(refuses_what_it_cannot_emulate),
    };
    return cmocka_run_group_tests_name("sgm_emulate", tests, NULL, teardown_);
}
