// test_attention.c: the special cases of the flash-style causal attention
// of 04_attention.wgsl and 04_attention_sgm.wgsl through
// src/model/attention.h (the run-and-compare cases are the "attention" family
// of the op registry, tests/ops/attention.c, run by test_ops; these reuse its
// cases): a future token's k and v do not change earlier outputs (bit for
// bit), two runs are bit-identical, and bad shapes, short views, views past
// one binding and a written tensor in a buffer the same dispatch reads are
// refused; the 48 KiB twins compile everywhere. Each runs with the GPU
// kernels and with their flat CPU twins (model/variant.h), and where the
// device has f16 subgroup matrices for attention (the H100/H200, or emulated
// ones where it has f16 and 45,568 bytes of workgroup memory: wgpt's tuned
// lavapipe; a cmocka skip elsewhere) through the f16 calls, with and without
// the dS scratch.
#include "test_util.h"

#include "model/attention.h"
#include "model/variant.h"
#include "ops/attention.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;                // the device of the twin in force: one of
static wgpt_gpu *G_GPU, *G_CPU;    // the default adapter opened with each twin (wgpt_gpu_options.kernels)

// Per-test setups: which twin the wrappers pick (see BOTH in main).
static int CPU;  // 1 while the CPU twins are in force
static int F16;  // 1 while the f16 calls are (their subgroup-matrix kernels where the device has them)
static int DS;   // 1 while the f16 backward keeps dS in a scratch (its _ds kernels)
static int use_gpu_kernels_(void **state) {
    (void)state;
    G = G_GPU;
    CPU = 0, F16 = 0, DS = 0;
    return 0;
}
static int use_cpu_kernels_(void **state) {
    (void)state;
    G = G_CPU;
    CPU = 1, F16 = 0, DS = 0;
    return 0;
}
static int use_sgm_kernels_(void **state) {
    (void)state;
    G = G_GPU;
    CPU = 0, F16 = 1, DS = 0;
    return 0;
}
static int use_sgm_ds_kernels_(void **state) {
    use_sgm_kernels_(state);
    DS = 1;
    return 0;
}
// A cmocka skip, saying why, where the f16 calls would not reach subgroup matrices.
static void skip_without_sgm_(void) {
    if (!F16 || wgpt_attention_uses_sgm(G, 64)) return;
    printf("skipped: needs f16 subgroup matrices for attention, real or emulated, and %u bytes of workgroup memory; "
           "'%s' has %u (the H100/H200 and wgpt's tuned lavapipe run this case)\n",
           WGPT_ATTENTION_SGM_STORAGE, wgpt_gpu_get_info(G)->name, (unsigned)wgpt_gpu_get_info(G)->max_workgroup_storage);
    skip();
}

static int group_setup(void **state) {
    (void)state;
    // (emulated subgroup matrices where the device has f16 but none: the f16
    // cases; the f32 kernels do not use them)
    wgpt_gpu_options gpu = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU, .emulate_sgm = WGPT_SGM_EMULATE_IF_F16};
    wgpt_gpu_options cpu = {.adapter_index = -1, .kernels = WGPT_KERNELS_CPU};
    G_GPU = tu_gpu_open(&gpu);
    G_CPU = tu_gpu_open(&cpu);
    G = G_GPU;
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G_GPU);
    wgpt_gpu_close(G_CPU);
    return 0;
}

// A token's k and v only reach queries at or after it: changing them at t0
// leaves out, lse and dq of every earlier position bit-for-bit unchanged.
static void future_keys_have_no_effect(void **st) {
    (void)st;
    skip_without_sgm_();
    const att_shape s = {2, 130, 192, 3, 1.0f};
    const uint32_t t0 = 45;  // inside the second block of 32
    float *qkv, *dout;
    att_make_inputs(&s, &qkv, &dout, F16);
    att_result a, b;
    att_run(G, &s, qkv, dout, &a, F16, DS);
    for (uint32_t bb = 0; bb < s.B; bb++)
        for (uint32_t t = t0; t < s.T; t++)
            for (uint32_t c = s.C; c < 3 * s.C; c++) qkv[((size_t)bb * s.T + t) * 3 * s.C + c] *= -2.5f;
    att_run(G, &s, qkv, dout, &b, F16, DS);
    size_t hs = s.C / s.NH;
    for (uint32_t bb = 0; bb < s.B; bb++) {
        size_t o = (size_t)bb * s.T * s.C, q = (size_t)bb * s.T * 3 * s.C;
        assert_memory_equal(a.out + o, b.out + o, (size_t)t0 * s.C * 4);
        for (uint32_t t = 0; t < t0; t++)
            assert_memory_equal(a.dqkv + q + (size_t)t * 3 * s.C, b.dqkv + q + (size_t)t * 3 * s.C, (size_t)s.C * 4);
        for (uint32_t h = 0; h < s.NH; h++) {
            size_t l = ((size_t)bb * s.NH + h) * s.T;
            assert_memory_equal(a.lse + l, b.lse + l, (size_t)t0 * 4);
        }
        // and the change does reach t0 itself
        assert_true(memcmp(a.out + o + (size_t)t0 * s.C, b.out + o + (size_t)t0 * s.C, hs * 4) != 0);
    }
    att_result_free(&a), att_result_free(&b);
    free(qkv), free(dout);
}

// No atomics and fixed summation orders: two runs give the same bits.
static void two_runs_are_bit_identical(void **st) {
    (void)st;
    skip_without_sgm_();
    const att_shape s = {2, 130, 192, 3, 1.0f};
    float *qkv, *dout;
    att_make_inputs(&s, &qkv, &dout, F16);
    att_result a, b;
    att_run(G, &s, qkv, dout, &a, F16, DS);
    att_run(G, &s, qkv, dout, &b, F16, DS);
    assert_memory_equal(a.out, b.out, att_n_out(&s) * 4);
    assert_memory_equal(a.lse, b.lse, att_n_lse(&s) * 4);
    assert_memory_equal(a.dqkv, b.dqkv, att_n_qkv(&s) * 4);
    att_result_free(&a), att_result_free(&b);
    free(qkv), free(dout);
}

// Expects call to fail with a message containing `part` and leave op unchanged.
#define EXPECT_REFUSED(g, op, call, part)                                                     \
    do {                                                                                      \
        int n0_ = (op)->n;                                                                    \
        if ((call) == 0) fail_msg("%s was accepted", #call);                                   \
        if (!strstr(wgpt_gpu_error(g), part))                                                 \
            fail_msg("%s: message '%s' lacks '%s'", #call, wgpt_gpu_error(g), part);            \
        assert_int_equal((op)->n, n0_);                                                       \
    } while (0)

static void refuses_bad_shapes_and_views(void **st) {
    (void)st;
    wgpt_buf *big = wgpt_buf_create(G, 1 << 20, "big");
    TU_NONNULL(G, big);
    wgpt_view v = {big, 0, 0}, small = {big, 0, 64};
    wgpt_op op;
    wgpt_op_init(&op);
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 1, 8, 260, 2), "at most 128");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 1, 8, 50, 3), "bad shape");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 0, 8, 48, 3), "bad shape");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, small, 1, 8, 48, 3), "qkv (B, T, 3C) needs");
    EXPECT_REFUSED(G, &op, wgpt_attention_backward(G, &op, v, small, v, v, v, v, 2, 8, 48, 3), "D (B, NH, T)");
    // WebGPU refuses a buffer bound writable and read-only in one dispatch,
    // even at disjoint bytes: the wrappers say so before the submit fails.
    wgpt_buf *other = wgpt_buf_create(G, 1 << 20, "other"), *dbuf = wgpt_buf_create(G, 4096, "D");
    wgpt_view lo = {big, 0, 1 << 16}, hi = {big, 1 << 18, 0}, w = {other, 0, 0}, d = {dbuf, 0, 0};
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, lo, w, hi, 2, 8, 48, 3), "out and qkv are in the same buffer");
    EXPECT_REFUSED(G, &op, wgpt_attention_backward(G, &op, lo, d, w, hi, w, w, 2, 8, 48, 3),
                   "dqkv and qkv are in the same buffer");
    wgpt_buf_free(other), wgpt_buf_free(dbuf);
    wgpt_op_free(&op);
    wgpt_buf_free(big);

    // A device that binds at most 64 KiB: out (51 KB) fits, qkv (154 KB) must be refused, not split.
    wgpt_gpu_options opt = {.adapter_index = -1, .max_binding = 64 << 10,
                            .kernels = CPU ? WGPT_KERNELS_CPU : WGPT_KERNELS_GPU};
    wgpt_gpu *g2 = tu_gpu_open(&opt);
    const att_shape s = {1, 100, 128, 2, 1.0f};
    wgpt_buf *b2 = wgpt_buf_create(g2, att_n_qkv(&s) * 4, "qkv");
    wgpt_buf *o2 = wgpt_buf_create(g2, att_n_out(&s) * 4, "out");
    wgpt_buf *l2 = wgpt_buf_create(g2, att_n_lse(&s) * 4, "lse");
    TU_NONNULL(g2, b2);
    TU_NONNULL(g2, o2);
    TU_NONNULL(g2, l2);
    wgpt_view vq = {b2, 0, 0}, vo = {o2, 0, 0}, vl = {l2, 0, 0};
    wgpt_op_init(&op);
    EXPECT_REFUSED(g2, &op, wgpt_attention_forward(g2, &op, vo, vl, vq, s.B, s.T, s.C, s.NH),
                   "qkv (B, T, 3C) is 153600 bytes; this device binds at most 65536");
    wgpt_op_free(&op);
    wgpt_buf_free(b2), wgpt_buf_free(o2), wgpt_buf_free(l2);
    wgpt_gpu_close(g2);
}

// The 48 KiB twins run only where the device has 48 KiB of workgroup memory
// (the H200; the other tests run them there). Everywhere, their WGSL must
// compile: on a smaller device the pipeline is refused for its workgroup
// memory alone, with Dawn's message naming the sizes, never for a compile
// error. On its own device: a refused pipeline leaves an error behind.
static void kernels_48k_compile_everywhere(void **st) {
    (void)st;
    static const char *const names[] = {"attention_forward_48k", "attention_backward_dq_48k",
                                        "attention_backward_dkdv_48k"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        wgpt_gpu_options opt = {.adapter_index = -1};
        wgpt_gpu *g2 = tu_gpu_open(&opt);
        wgpt_kernel *k = wgpt_kernel_get(g2, names[i]);
        if (wgpt_gpu_get_info(g2)->max_workgroup_storage >= 49152) {
            if (!k) fail_msg("%s: %s", names[i], wgpt_gpu_error(g2));
        } else {
            assert_null(k);
            const char *e = wgpt_gpu_error(g2);
            if (strstr(e, "failed to compile") || !strstr(e, "49152"))
                fail_msg("%s on a %u-byte device: %s", names[i], wgpt_gpu_get_info(g2)->max_workgroup_storage, e);
        }
        wgpt_gpu_close(g2);
    }
}

// Where the device has no f16 subgroup matrices of the kernels' att_shape (or
// hs != 64) the f16 calls are refused with a message (the model keeps the f32
// calls there); on the H200 only the head size is refused.
static void f16_calls_refused_where_they_cannot_run(void **st) {
    (void)st;
    wgpt_buf *big = wgpt_buf_create(G_GPU, 1 << 20, "big");
    wgpt_buf *big2 = wgpt_buf_create(G_GPU, 1 << 20, "big2");
    wgpt_buf *big3 = wgpt_buf_create(G_GPU, 1 << 20, "big3");
    TU_NONNULL(G_GPU, big);
    TU_NONNULL(G_GPU, big2);
    TU_NONNULL(G_GPU, big3);
    wgpt_view a = {big, 0, 0}, b = {big2, 0, 0}, t = {big3, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 64, 96, 3), "head size 64");
    if (!wgpt_attention_uses_sgm(G_GPU, 64))
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 64, 128, 2), "subgroup");
    else {  // the transposed output goes a pair of tokens at a time
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 63, 128, 2), "T even");
        // the dS scratch: large enough, and in a buffer of its own
        wgpt_buf *d = wgpt_buf_create(G_GPU, 4096, "D"), *g = wgpt_buf_create(G_GPU, 1 << 20, "dqkv");
        TU_NONNULL(G_GPU, d);
        TU_NONNULL(G_GPU, g);
        wgpt_view vd = {d, 0, 0}, vg = {g, 0, 0}, short_ds = {big3, 0, wgpt_attention_ds_bytes(2, 130, 2) - 2};
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_backward_f16(G_GPU, &op, vg, vd, a, b, a, a, short_ds, 2, 130, 128, 2),
                       "ds (the dS^T tiles: wgpt_attention_ds_bytes) needs 196608 bytes");
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_backward_f16(G_GPU, &op, vg, vd, a, b, a, a, vg, 2, 130, 128, 2),
                       "ds and dqkv are in the same buffer");
        wgpt_buf_free(d), wgpt_buf_free(g);
    }
    wgpt_op_free(&op);
    wgpt_buf_free(big), wgpt_buf_free(big2), wgpt_buf_free(big3);
}

// Each test twice: with the flash kernels, then with their CPU twins; the
// head-size-64 ones a third time with the f16 kernels, and a fourth with
// their backward keeping dS (the _ds kernels).
#define BOTH(f) {#f " [gpu kernels]", f, use_gpu_kernels_, NULL, NULL}, {#f " [cpu kernels]", f, use_cpu_kernels_, NULL, NULL}
#define F16_TOO(f) {#f " [f16 kernels]", f, use_sgm_kernels_, NULL, NULL}, \
                   {#f " [f16 kernels, dS kept]", f, use_sgm_ds_kernels_, NULL, NULL}

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(future_keys_have_no_effect),
        F16_TOO(future_keys_have_no_effect),
        BOTH(two_runs_are_bit_identical),
        F16_TOO(two_runs_are_bit_identical),
        cmocka_unit_test(f16_calls_refused_where_they_cannot_run),
        BOTH(refuses_bad_shapes_and_views),
        cmocka_unit_test(kernels_48k_compile_everywhere),
    };
    return cmocka_run_group_tests_name("attention", tests, group_setup, group_teardown);
}
