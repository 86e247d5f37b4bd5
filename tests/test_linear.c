// test_linear.c: the special cases of the linear layer (kernels/03_linear.wgsl
// through src/model/linear.h; the run-and-compare cases are the "linear"
// family of the op registry, tests/ops/linear.c, run by test_ops; these reuse
// its cases): determinism, argument errors, the split-k choice, the variant
// choice itself, the CPU twins' grid reaching every accepted size, the flat8
// twins against the flat ones, the split reduce's order. Most run twice:
// with the tiled GPU kernels and with their flat CPU twins (model/variant.h).
#include "test_util.h"

#include <stdlib.h>

#include "model/linear.h"
#include "model/linear_split.h"
#include "model/variant.h"
#include "ops/linear.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device
static wgpt_gpu *GS;     // the same adapter, bindings limited to SPLIT_BINDING bytes
#define SPLIT_BINDING (96u * 1024u)

// G and GS opened with each twin (wgpt_gpu_options.kernels); the setups pick.
static wgpt_gpu *G_GPU, *G_CPU, *GS_GPU, *GS_CPU;
static wgpt_kernels KERNELS = WGPT_KERNELS_AUTO;  // the twin in force (AUTO: the device's choice)

static int group_setup(void **state) {
    (void)state;
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = SPLIT_BINDING};
    o.kernels = WGPT_KERNELS_GPU;
    GS_GPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_CPU;
    GS_CPU = tu_gpu_open(&o);
    o.max_binding = 0;
    G_CPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_GPU;
    G_GPU = tu_gpu_open(&o);
    G = G_GPU, GS = GS_GPU;
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G_GPU), wgpt_gpu_close(G_CPU), wgpt_gpu_close(GS_GPU), wgpt_gpu_close(GS_CPU);
    return 0;
}

// Per-test setups: which twin the wrappers pick (see BOTH in main).
static const char *VARIANT = "";
static int use_gpu_kernels_(void **state) {
    (void)state;
    G = G_GPU, GS = GS_GPU, KERNELS = WGPT_KERNELS_GPU;
    VARIANT = "gpu kernels";
    return 0;
}
static int use_cpu_kernels_(void **state) {
    (void)state;
    G = G_CPU, GS = GS_CPU, KERNELS = WGPT_KERNELS_CPU;
    VARIANT = "cpu kernels";
    return 0;
}

// The same inputs twice: bit-identical results (no atomics, fixed orders),
// on the plain path and on the split one (dinp summed over weight chunks).
static void results_are_deterministic(void **st) {
    (void)st;
    wgpt_gpu *devs[2] = {G, GS};
    for (int d = 0; d < 2; d++) {
        lin_case c;
        lin_case_init(&c, 130, 200, 260, 1, 0);
        lin_result a = lin_run(devs[d], &c, 0), b = lin_run(devs[d], &c, 0);
        assert_memory_equal(a.out, b.out, (size_t)c.N * c.OC * 4);
        assert_memory_equal(a.dinp, b.dinp, (size_t)c.N * c.C * 4);
        assert_memory_equal(a.dw, b.dw, (size_t)c.OC * c.C * 4);
        assert_memory_equal(a.db, b.db, (size_t)c.OC * 4);
        lin_result_free(&a), lin_result_free(&b), lin_case_free(&c);
    }
}

// Wrong arguments are refused with a message, before anything is appended.
static void bad_arguments_are_refused(void **st) {
    (void)st;
    float x[64] = {0};
    lin_tensor a = lin_upload(G, x, 64), b = lin_upload(G, x, 64), o = lin_upload(G, x, 64);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    // out needs 8 * 16 floats, the view holds 64
    assert_int_equal(wgpt_linear_forward(G, &op, o.view, a.view, b.view, none, 8, 4, 16, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "out"));
    assert_int_equal(wgpt_linear_forward(G, &op, o.view, a.view, b.view, none, 0, 4, 4, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "> 0"));
    assert_int_equal(wgpt_linear_backward(G, &op, o.view, b.view, none, a.view, none, b.view, 4, 4, 4, 0, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "inp has no buffer"));
    // 64 rows of 2000 floats (512000 bytes) exceed 96 KiB, and 100 rows must split
    wgpt_buf *big = wgpt_buf_create(GS, 100 * 2000 * 4, "too wide");
    TU_NONNULL(GS, big);
    wgpt_view whole = {big, 0, 0};
    assert_int_equal(wgpt_linear_forward(GS, &op, whole, whole, whole, none, 100, 2000, 1, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(GS), "binding limit"));
    wgpt_buf_free(big);
    assert_int_equal(op.n, 0);
    wgpt_op_free(&op);
    lin_tensor_free(&a), lin_tensor_free(&b), lin_tensor_free(&o);
}

// The choice of twin, per device: WGPT_KERNELS (read when the device is
// opened) overrides the device type, and wgpt_gpu_options.kernels overrides
// both. On lavapipe (type "CPU") auto picks the CPU twins.
// The split-k choice (linear_split.c): whatever it picks covers k exactly
// in whole stages and fits the scratch; outputs with enough tiles for every
// unit are not split; small outputs with a long k are; with no unit count,
// the target-workgroups rule; a forced count is obeyed within k / 8.
static void split_choice(void **st) {
    (void)st;
    const uint32_t units[] = {0, 8, 132, 1000};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        for (uint64_t m = 64; m <= 8192; m *= 4)
            for (uint64_t n = 64; n <= 8192; n *= 4)
                for (uint32_t k = 4; k <= 65536; k *= 8) {
                    wgpt_split sp = wgpt_split_pick(units[u], m, n, k, 1, UINT64_MAX, 0);
                    assert_true(sp.n >= 1 && sp.n <= 16);
                    assert_true((uint64_t)sp.n * sp.ks >= k && (uint64_t)(sp.n - 1) * sp.ks < k);
                    if (sp.n > 1) assert_int_equal(sp.ks % WGPT_V4_MK, 0);
                    if (sp.n > 1) assert_true(sp.ks >= 256);
                    uint64_t need = wgpt_split_bytes(units[u], m, n, k, 1, 0);
                    assert_true(sp.n > 1 ? need >= sp.n * m * n * 4 : need == 0);
                    wgpt_split small = wgpt_split_pick(units[u], m, n, k, 1, need / 2, 0);  // half the room
                    assert_true(small.n == 1 || (uint64_t)small.n * m * n * 4 + small.n * m * 4 <= need / 2);
                }
    // 4096 x 50304 logits (12,576 tiles) never split; 768 x 768 over k = 4096 (36 tiles) does.
    assert_int_equal(wgpt_split_pick(132, 4096, 50304, 768, 0, UINT64_MAX, 0).n, 1);
    assert_int_equal(wgpt_split_pick(0, 4096, 50304, 768, 0, UINT64_MAX, 0).n, 1);
    assert_true(wgpt_split_pick(132, 768, 768, 4096, 1, UINT64_MAX, 0).n > 1);
    assert_int_equal(wgpt_split_pick(0, 768, 768, 4096, 1, UINT64_MAX, 0).n, 15);  // 512 / 36 workgroups
    // forced
    assert_int_equal(wgpt_split_pick(132, 4096, 50304, 768, 0, UINT64_MAX, 3).n, 3);
    assert_int_equal(wgpt_split_pick(132, 64, 64, 16, 0, UINT64_MAX, 5).n, 2);  // k / 8
}

static void variant_choice(void **st) {
    (void)st;
    assert_int_equal(setenv("WGPT_KERNELS", "gpu", 1), 0);
    wgpt_gpu_options o = {.adapter_index = -1};
    wgpt_gpu *g = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);
    assert_int_equal(setenv("WGPT_KERNELS", "cpu", 1), 0);  // already read: no effect
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);
    o.kernels = WGPT_KERNELS_CPU;
    wgpt_gpu *gc = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(gc), 1);
    o.kernels = WGPT_KERNELS_GPU;
    wgpt_gpu *gg = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(gg), 0);
    unsetenv("WGPT_KERNELS");
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);  // two devices of one process differ, and stay as opened
    assert_int_equal(wgpt_kernel_variant_cpu(gc), 1);
    wgpt_gpu_close(g), wgpt_gpu_close(gc), wgpt_gpu_close(gg);
}

// The flat twins cover 32 rows a workgroup (FLAT_ROWS): their grid reaches
// 65535 * 32 = 2097120 rows, the most the wrapper accepts at all (65535 bias
// workgroups of 32 columns), so they serve every accepted N; the tiled kernels
// (64 rows a workgroup) stay the fallback in pick_. C = OC = 1: N = 2097120
// runs on a grid (1, 65535), 2097121 is refused.
static void cpu_twins_cover_every_accepted_n(void **st) {
    (void)st;
    int cpu = wgpt_kernel_variant_cpu(G);
    const int N = 2097120;
    // The forward's grid: (1, rows of workgroups). (Both kernels' results are
    // checked above; at this N, C = 1 the backward's reduction over N would
    // take lavapipe long.)
    wgpt_buf *x = wgpt_buf_create(G, (uint64_t)(N + 1) * 4, "x"), *y = wgpt_buf_create(G, (uint64_t)(N + 1) * 4, "y");
    wgpt_buf *w = wgpt_buf_create(G, 16, "w");
    TU_NONNULL(G, x);
    TU_NONNULL(G, y);
    TU_NONNULL(G, w);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_linear_forward(G, &op, (wgpt_view){y, 0, 0}, (wgpt_view){x, 0, 0}, (wgpt_view){w, 0, 0}, none,
                                 (uint32_t)N, 1, 1, none));
    assert_int_equal(op.n, 1);
    uint32_t want = cpu ? (uint32_t)(N + 31) / 32 : (uint32_t)(N + 63) / 64;
    if (op.steps[0].x != 1 || op.steps[0].y != want)
        fail_msg("%s N=%d: grid (%u, %u), expected (1, %u)", VARIANT, N, op.steps[0].x, op.steps[0].y, want);
    wgpt_op_free(&op);
    wgpt_op_init(&op);
    assert_int_equal(wgpt_linear_forward(G, &op, (wgpt_view){y, 0, 0}, (wgpt_view){x, 0, 0}, (wgpt_view){w, 0, 0},
                                         none, (uint32_t)N + 1, 1, 1, none),
                     -1);
    wgpt_op_free(&op);
    wgpt_buf_free(x), wgpt_buf_free(y), wgpt_buf_free(w);
}

// The vec4 kernels' split sums (a partial per split in the scratch, then the
// in-order reduce): two runs agree bit for bit.
static void vec4_results_are_deterministic(void **st) {
    (void)st;
    lin_case c;
    lin_case_init(&c, 600, 36, 20, 1, 1);
    uint64_t bytes = wgpt_linear_scratch_bytes(G, 600, 36, 20);
    lin_result a = lin_run(G, &c, bytes), b = lin_run(G, &c, bytes);
    assert_memory_equal(a.dw, b.dw, (size_t)c.OC * c.C * 4);
    assert_memory_equal(a.db, b.db, (size_t)c.OC * 4);
    lin_result_free(&a), lin_result_free(&b), lin_case_free(&c);
}

// The flat8 twins (C and OC multiples of 4, subgroups of at least 8 lanes)
// sum the same products in the same order as the flat twins: the wrapper's
// results (flat8: its forward grid has ceil(N / 64) rows) equal, bit for bit,
// the flat kernels dispatched by hand on the same inputs, in every pass.
typedef struct tparams { uint32_t m, n, k, ld, off, flag, ks, split; } tparams;  // linear.c's linear_params

static uint32_t up_(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

static void flat8_equals_flat(void **st) {
    (void)st;
    if (KERNELS != WGPT_KERNELS_CPU || wgpt_gpu_get_info(G)->subgroup_min < 8) {
        printf("skipped: the flat8 twin is for CPU kernels on subgroups of 8 or more\n");
        skip();
    }
    static const int shapes[][5] = {{74, 48, 144, 1, 0}, {130, 200, 260, 0, 1}, {33, 12, 8, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        lin_case c;
        lin_case_init(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        lin_result a = lin_run(G, &c, 0);
        uint32_t N = (uint32_t)c.N, C = (uint32_t)c.C, OC = (uint32_t)c.OC;
        size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
        float *zeros = calloc(no, sizeof(float));
        lin_tensor inp = lin_upload(G, c.inp, nc), w = lin_upload(G, c.w, oc), b = lin_upload(G, c.b, OC);
        lin_tensor out = lin_upload(G, zeros, no), dout = lin_upload(G, c.dout, no);
        lin_tensor dinp = lin_upload(G, c.dinp0, nc), dw = lin_upload(G, c.dw0, oc);
        wgpt_op op;
        wgpt_op_init(&op);
        wgpt_view none = {NULL, 0, 0};
        TU_OK(G, wgpt_linear_forward(G, &op, out.view, inp.view, w.view, none, N, C, OC, none));
        if (op.n != 1 || op.steps[0].y != up_(N, 64))
            fail_msg("N=%u C=%u OC=%u: %d dispatches, %u rows of workgroups (flat8: %u)", N, C, OC, op.n,
                     op.steps[0].y, up_(N, 64));
        wgpt_op_free(&op);
        wgpt_op_init(&op);
        wgpt_view vf[4] = {inp.view, w.view, c.has_bias ? b.view : w.view, out.view};
        tparams pf = {N, OC, C, OC, 0, (uint32_t)c.has_bias, 0, 0};
        wgpt_view vi[3] = {dout.view, w.view, dinp.view};
        tparams pi = {N, C, OC, OC, 0, (uint32_t)c.accumulate, 0, 0};
        wgpt_view vw[3] = {dout.view, inp.view, dw.view};
        tparams pw = {OC, C, N, OC, 0, 0, 0, 0};
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_forward_flat", vf, 4, &pf, sizeof pf, up_(OC, 32), up_(N, 32), 1));
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_backward_input_flat", vi, 3, &pi, sizeof pi, up_(C, 32), up_(N, 32),
                                  1));
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_backward_weight_flat", vw, 3, &pw, sizeof pw, up_(C, 32),
                                  up_(OC, 32), 1));
        TU_OK(G, wgpt_op_record(G, &op));
        float *ho = malloc(no * 4), *hi = malloc(nc * 4), *hw = malloc(oc * 4);
        lin_download(G, &out, ho), lin_download(G, &dinp, hi), lin_download(G, &dw, hw);
        if (memcmp(ho, a.out, no * 4) || memcmp(hi, a.dinp, nc * 4) || memcmp(hw, a.dw, oc * 4))
            fail_msg("N=%u C=%u OC=%u: flat8 and flat differ (out %d, dinp %d, dweight %d)", N, C, OC,
                     memcmp(ho, a.out, no * 4) != 0, memcmp(hi, a.dinp, nc * 4) != 0, memcmp(hw, a.dw, oc * 4) != 0);
        free(ho), free(hi), free(hw), free(zeros);
        wgpt_op_free(&op);
        lin_tensor *all[] = {&inp, &w, &b, &out, &dout, &dinp, &dw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lin_tensor_free(all[i]);
        lin_result_free(&a), lin_case_free(&c);
    }
}

// wgpt_linear_reduce_parts (matmul_split_reduce) sums the partials in order
// of the part, bit for bit as C sums them one after the other, then adds the
// bias and the present value: for part counts from 1 to 64 (the bias
// gradients' parts), whole batches of the kernel's four loads and partial
// ones, values of mixed magnitude so that another order rounds differently
// (a kernel summing each batch apart first fails it).
static void reduce_parts_sums_in_order(void **st) {
    (void)st;
    static const uint32_t KS[] = {1, 2, 5, 16, 17, 40, 64};
    const uint32_t m = 3, n = 24;
    tu_rng_state = 41;
    for (size_t t = 0; t < sizeof KS / sizeof KS[0]; t++)
        for (int flag = 0; flag < 4; flag++) {
            uint32_t k = KS[t];
            size_t total = (size_t)m * n;
            float *part = malloc(k * total * 4), *bias = malloc(n * 4), *dst = malloc(total * 4);
            for (size_t i = 0; i < k * total; i++) part[i] = tu_randf(-1, 1) * powf(2.0f, tu_randf(-12, 12));
            tu_fill(bias, n, -1, 1), tu_fill(dst, total, -1, 1);
            wgpt_buf *bp = tu_upload_f32(G, part, k * total, "parts"), *bb = tu_upload_f32(G, bias, n, "bias");
            wgpt_buf *bd = tu_upload_f32(G, dst, total, "dst");
            wgpt_op op;
            wgpt_op_init(&op);
            wgpt_view none = {0};
            TU_OK(G, wgpt_linear_reduce_parts(G, &op, (wgpt_view){bp, 0, 0}, flag & 2 ? (wgpt_view){bb, 0, 0} : none,
                                              (wgpt_view){bd, 0, 0}, m, n, k, flag & 1));
            TU_OK(G, wgpt_op_record(G, &op));
            wgpt_op_free(&op);
            float *got = tu_download_f32(G, bd, total);
            for (size_t i = 0; i < total; i++) {
                float sum = part[i];
                for (uint32_t z = 1; z < k; z++) sum += part[z * total + i];
                if (flag & 2) sum += bias[i % n];
                if (flag & 1) sum += dst[i];
                if (memcmp(&sum, &got[i], 4) != 0)
                    fail_msg("%u parts (flag %d): element %zu is %.9g, in order %.9g", k, flag, i, got[i], sum);
            }
            wgpt_buf_free(bp), wgpt_buf_free(bb), wgpt_buf_free(bd);
            free(part), free(bias), free(dst), free(got);
        }
}

// Each test twice: with the tiled GPU kernels, then with their CPU twins.
#define BOTH(f) {#f " [gpu kernels]", f, use_gpu_kernels_, NULL, NULL}, {#f " [cpu kernels]", f, use_cpu_kernels_, NULL, NULL}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_choice),
        cmocka_unit_test(variant_choice),
        BOTH(vec4_results_are_deterministic),
        BOTH(reduce_parts_sums_in_order),
        BOTH(results_are_deterministic),
        BOTH(bad_arguments_are_refused),
        BOTH(cpu_twins_cover_every_accepted_n),
        BOTH(flat8_equals_flat),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
