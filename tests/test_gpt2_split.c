// test_gpt2_split.c: a device that binds little (wgpt_gpu_options.max_binding,
// the `--binding-limit` of train and bench) trains the same model bit for
// bit, in fp32 and in f16: every array larger than one binding (the
// parameters, their f16 copy, the gradients, AdamW's moments) is bound in
// pieces whose kernels compute each element alone (casts, AdamW) or sum in
// the same order however they split (the gradient norm's slices). The
// classifier runs in chunks only where its logits exceed a binding (as few
// as fit, of equal size): both runs are given limits under the logits'
// bytes that cut them alike, so that d wte sums the same chunks.
//
// The model: L=21, NH=2, C=32, V=250 padded to 256, B=32, T=64 (2048
// positions), at a limit of 1 MiB + 8 KiB: the parameters (and so each moment; 1.1
// MB) and the logits (2048 x 256 floats, 2 MiB) exceed it, a layer's MLP
// activation (2048 x 128 floats) and one chunk of 1024 rows of logits fit it.
// The run it is compared with binds up to WHOLE (1.5 MiB): every tensor
// whole but the logits, which both limits cut into 2 chunks of 1024 rows.
#include "test_util.h"

#include "model/gpt2.h"
#include "model/linear_f16.h"  // wgpt_linear_f16_uses_sgm
#include "ref/gpt2_ref.h"

static const wgpt_gpt2_config CFG = {.max_seq_len = 64, .vocab_size = 250, .padded_vocab_size = 256,
                                     .num_layers = 21, .num_heads = 2, .channels = 32};
enum { B = 32, T = 64, STEPS = 3 };
#define LIMIT ((1u << 20) + (8u << 10))  // (not a multiple of the norm's 16 KiB slices)
#define WHOLE (3u << 19)
static int tokens[B * T], targets[B * T];
static float *params;
static size_t np;

static int group_setup(void **state) {
    (void)state;
    for (int i = 0; i < B * T; i++) tokens[i] = (int)((i * 7919u + 13u) % CFG.vocab_size);
    for (int i = 0; i < B * T; i++) targets[i] = i + 1 < B * T ? tokens[i + 1] : 5;
    np = wgpt_gpt2_num_params(&CFG);
    params = malloc(np * sizeof *params);
    if (!params) return -1;
    wgpt_gpt2_init_params(&CFG, params, 7);
    return 0;
}

static int group_teardown(void **state) {
    free(params);
    return tu_group_teardown(state);
}

static const wgpt_adamw_config OPT = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                                      .max_grad_norm = 1.0f};

// STEPS training steps at binding limit `limit` (0: the device's): the
// losses, the gradient norms and the parameters after them.
static void run_(wgpt_gpu *g, wgpt_precision p, float *loss, float *norm, float *after) {
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(g, &CFG, B, T, 1, p, err, sizeof err);
    if (!m) fail_msg("model (%s): %s", wgpt_precision_name(p), err);
    if (wgpt_gpt2_set_params(m, params) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    for (int t = 1; t <= STEPS; t++) {
        wgpt_step_result r;
        if (wgpt_gpt2_train_step(m, tokens, targets, &OPT, t, &r) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        assert_int_equal(r.skipped, 0);
        loss[t - 1] = r.loss, norm[t - 1] = r.grad_norm;
    }
    if (wgpt_gpt2_get_params(m, after) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    wgpt_gpt2_free(m);
}

static void same_bits_(wgpt_precision p) {
    wgpt_gpu_options ow = {.adapter_index = -1, .max_binding = WHOLE};
    wgpt_gpu *whole = tu_gpu_open(&ow);
    if (p == WGPT_PRECISION_F16 && !wgpt_gpu_get_info(whole)->has_f16) {
        printf("skipped: '%s' has no f16\n", wgpt_gpu_get_info(whole)->name);
        wgpt_gpu_close(whole);
        skip();
    }
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = LIMIT};
    wgpt_gpu *small = tu_gpu_open(&o);
    assert_int_equal(wgpt_gpu_get_info(small)->max_storage_binding, LIMIT);
    // the premises: these exceed the limit, a layer's activation does not
    assert_true(np * 4 > LIMIT);
    assert_true((uint64_t)B * T * CFG.padded_vocab_size * 4 > LIMIT);
    assert_true((uint64_t)B * T * 4 * CFG.channels * 4 <= LIMIT);
    assert_true(np * 4 <= WHOLE && (uint64_t)B * T * CFG.padded_vocab_size * 4 > WHOLE);
    assert_true((uint64_t)B * T * CFG.padded_vocab_size * 4 <= 2ull * LIMIT);  // 2 chunks at either limit
    float lw[STEPS], ls[STEPS], nw[STEPS], ns[STEPS];
    float *pw = malloc(np * 4), *ps = malloc(np * 4);
    run_(whole, p, lw, nw, pw);
    run_(small, p, ls, ns, ps);
    for (int t = 0; t < STEPS; t++)
        printf("%s step %d: loss %.9g / %.9g, norm %.9g / %.9g (whole / split)\n", wgpt_precision_name(p), t + 1,
               lw[t], ls[t], nw[t], ns[t]);
    assert_true(lw[STEPS - 1] < lw[0]);  // it trains
    assert_memory_equal(ls, lw, sizeof lw);
    assert_memory_equal(ns, nw, sizeof nw);
    assert_memory_equal(ps, pw, np * 4);
    free(pw), free(ps);
}

static void fp32_split_bindings_same_bits(void **st) {
    (void)st;
    same_bits_(WGPT_PRECISION_FP32);
}

static void f16_split_bindings_same_bits(void **st) {
    (void)st;
    same_bits_(WGPT_PRECISION_F16);
}

// The chunked classifier against the C reference (tests/ref), on one layer
// of the model above at LIMIT: 2048 positions, so two chunks of 1024 rows (the
// logits of the second chunk overwrite the first's; d wte sums both). The loss and
// every gradient tensor: fp32 with test_gpt2.c's bounds (the GPU sums in
// other orders than the reference's doubles: loss within 2e-5 relative,
// each tensor within 2e-4 relative L2 and 1e-3 of its largest element); f16
// with test_gpt2_f16.c's (every matmul operand rounded to 11 bits: loss
// within 5e-3 relative, each tensor within 3e-3 relative L2, after dividing
// by the loss scale). A chunk that reads or writes the wrong rows moves a
// tensor by O(1).
static void chunked_classifier_matches_reference(void **st) {
    (void)st;
    wgpt_gpu_options lo = {.adapter_index = -1, .max_binding = LIMIT};
    wgpt_gpu *g = tu_gpu_open(&lo);
    wgpt_gpt2_config c = CFG;
    c.num_layers = 1;
    const ref_gpt2_config rc = {c.max_seq_len, c.vocab_size, c.padded_vocab_size, 1, c.num_heads, c.channels};
    ref_gpt2 ref;
    assert_int_equal(ref_gpt2_init(&ref, &rc, B, T), 0);
    ref_gpt2_init_params(&ref, 5);
    float want = ref_gpt2_forward(&ref, tokens, targets);
    ref_gpt2_zero_grad(&ref);
    assert_int_equal(ref_gpt2_backward(&ref), 0);
    size_t n = ref.num_params;
    float *got = malloc(n * 4);
    // fp32, f16, and f16 on (emulated, where the device has none) subgroup
    // matrices: there the other linears keep their inputs transposed and the
    // classifier reads lnf's f16 copy row-major
    wgpt_gpu_options eo = {.adapter_index = -1, .emulate_sgm = 1, .kernels = WGPT_KERNELS_GPU, .max_binding = LIMIT};
    for (int k = 0; k < 3; k++) {
        int p = k > 0;
        if (p && !wgpt_gpu_get_info(g)->has_f16) break;
        if (k == 2 && !wgpt_linear_f16_uses_sgm(g)) g = tu_gpu_open(&eo);
        char err[2048];
        wgpt_gpt2 *m = wgpt_gpt2_create_precision(g, &c, B, T, 1, (wgpt_precision)p, err, sizeof err);
        if (!m) fail_msg("%s", err);
        float loss;
        if (wgpt_gpt2_set_params(m, ref.params) < 0 || wgpt_gpt2_forward_backward(m, tokens, targets, &loss) < 0 ||
            wgpt_gpt2_get_grads(m, got) < 0)
            fail_msg("%s", wgpt_gpt2_error(m));
        float s = wgpt_gpt2_loss_scale(m);
        wgpt_gpt2_free(m);
        printf("%s: loss %.7f, reference %.7f\n", k == 2 ? "f16 on subgroup matrices" : p ? "f16" : "fp32", loss, want);
        assert_true(fabsf(loss - want) <= (p ? 5e-3f : 2e-5f) * want);
        for (int t = 0, off = 0; t < REF_NUM_PARAM_TENSORS; off += (int)ref.param_sizes[t], t++) {
            double d2 = 0, r2 = 0, mx = 0, worst = 0;
            for (size_t i = 0; i < ref.param_sizes[t]; i++) {
                double w = ref.grads[off + i], d = got[off + i] / s - w;
                d2 += d * d, r2 += w * w;
                if (fabs(w) > mx) mx = fabs(w);
                if (fabs(d) > worst) worst = fabs(d);
            }
            double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
            if (rel > (p ? 3e-3 : 2e-4) || (!p && worst > 1e-3 * mx + 1e-7))
                fail_msg("%s d%s: relative L2 %.3g, largest difference %.3g of max %.3g", p ? "f16" : "fp32",
                         ref_gpt2_param_names[t], rel, worst, mx);
        }
    }
    free(got);
    ref_gpt2_free(&ref);
}

// A limit below 64 rows of logits cannot be met by splitting: refused, naming it.
static void too_small_a_limit_is_refused(void **st) {
    (void)st;
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = 32u << 10};
    wgpt_gpu *tiny = tu_gpu_open(&o);
    char err[2048];
    assert_null(wgpt_gpt2_create_precision(tiny, &CFG, B, T, 1, WGPT_PRECISION_FP32, err, sizeof err));
    printf("%s\n", err);
    assert_non_null(strstr(err, "64 rows of the logits"));
    assert_non_null(strstr(err, "32768"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp32_split_bindings_same_bits),
        cmocka_unit_test(f16_split_bindings_same_bits),
        cmocka_unit_test(chunked_classifier_matches_reference),
        cmocka_unit_test(too_small_a_limit_is_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
