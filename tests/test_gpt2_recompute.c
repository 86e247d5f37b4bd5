// test_gpt2_recompute.c: activation recomputation (model/gpt2.h
// wgpt_recompute, `--recompute` of train and bench). The backward recomputes
// what the forward did not keep with the forward's own kernels on the same
// inputs, so the losses, gradient norms and parameters after a few AdamW
// steps must equal those of NONE bit for bit (a bound looser than that would
// let a recomputation from the wrong layer's slice through only if it moved
// no bit: it moves many), in fp32, in f16 on the plain f16 kernels and, where
// f16 has (or emulates) subgroup matrices, on those, whose LayerNorms keep
// only a transposed f16 copy. And each level keeps fewer activation bytes.
// The model: L=2, NH=4, C=64, T=24, V=97 padded to 128, B=2.
#include "test_util.h"

#include "model/gpt2.h"
#include "model/linear_f16.h"  // wgpt_linear_f16_uses_sgm

static const wgpt_gpt2_config CFG = {.max_seq_len = 32, .vocab_size = 97, .padded_vocab_size = 128,
                                     .num_layers = 2, .num_heads = 4, .channels = 64};
enum { B = 2, T = 24, STEPS = 3 };
static int tokens[B * T], targets[B * T];
static float *params;
static size_t np;

static int group_setup(void **state) {
    (void)state;
    for (int i = 0; i < B * T; i++) tokens[i] = (int)((i * 31u + 7u) % CFG.vocab_size);
    for (int i = 0; i < B * T; i++) targets[i] = i + 1 < B * T ? tokens[i + 1] : 5;
    np = wgpt_gpt2_num_params(&CFG);
    params = malloc(np * sizeof *params);
    if (!params) return -1;
    wgpt_gpt2_init_params(&CFG, params, 9);
    return 0;
}

static int group_teardown(void **state) {
    free(params);
    return tu_group_teardown(state);
}

static const wgpt_adamw_config OPT = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                                      .max_grad_norm = 1.0f};

// STEPS steps of the model at recompute level r: losses, norms, the
// parameters after them, and the activation bytes.
static uint64_t run_(wgpt_gpu *g, wgpt_precision p, wgpt_recompute r, float *loss, float *norm, float *after) {
    char err[2048];
    wgpt_gpt2_opts o = {.training = 1, .precision = p, .recompute = r};
    wgpt_gpt2 *m = wgpt_gpt2_create_opts(g, &CFG, B, T, &o, err, sizeof err);
    if (!m) fail_msg("model (%s, recompute %s): %s", wgpt_precision_name(p), wgpt_recompute_name(r), err);
    assert_int_equal(wgpt_gpt2_recompute(m), r);
    if (wgpt_gpt2_set_params(m, params) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    for (int t = 1; t <= STEPS; t++) {
        wgpt_step_result s;
        if (wgpt_gpt2_train_step(m, tokens, targets, &OPT, t, &s) < 0) fail_msg("%s", wgpt_gpt2_error(m));
        loss[t - 1] = s.loss, norm[t - 1] = s.grad_norm;
    }
    if (wgpt_gpt2_get_params(m, after) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    uint64_t pb, ab;
    wgpt_gpt2_memory(m, &pb, &ab);
    wgpt_gpt2_free(m);
    return ab;
}

static void same_bits_(wgpt_gpu *g, wgpt_precision p, const char *what) {
    float loss[3][STEPS], norm[3][STEPS];
    float *after[3];
    uint64_t bytes[3];
    for (int r = 0; r < 3; r++) {
        after[r] = malloc(np * 4);
        bytes[r] = run_(g, p, (wgpt_recompute)r, loss[r], norm[r], after[r]);
    }
    for (int r = 0; r < 3; r++)
        printf("%s, recompute %-4s: losses %.9g %.9g %.9g, activations %llu bytes\n", what,
               wgpt_recompute_name((wgpt_recompute)r), loss[r][0], loss[r][1], loss[r][2],
               (unsigned long long)bytes[r]);
    assert_true(loss[0][STEPS - 1] < loss[0][0]);
    for (int r = 1; r < 3; r++) {
        assert_memory_equal(loss[r], loss[0], sizeof loss[0]);
        assert_memory_equal(norm[r], norm[0], sizeof norm[0]);
        assert_memory_equal(after[r], after[0], np * 4);
        assert_true(bytes[r] < bytes[r - 1]);
    }
    for (int r = 0; r < 3; r++) free(after[r]);
}

static void fp32_recompute_same_bits(void **st) {
    (void)st;
    same_bits_(tu_gpu_open(NULL), WGPT_PRECISION_FP32, "fp32");
}

static void f16_recompute_same_bits(void **st) {
    (void)st;
    wgpt_gpu *g = tu_gpu_open(NULL);
    if (!wgpt_gpu_get_info(g)->has_f16) {
        printf("skipped: '%s' has no f16\n", wgpt_gpu_get_info(g)->name);
        wgpt_gpu_close(g);
        skip();
    }
    same_bits_(g, WGPT_PRECISION_F16, wgpt_linear_f16_uses_sgm(g) ? "f16 (subgroup matrices)" : "f16");
    if (wgpt_linear_f16_uses_sgm(g)) return;
    // the subgroup-matrix model (transposed f16 copies), on emulated ones
    wgpt_gpu_options o = {.adapter_index = -1, .emulate_sgm = 1, .kernels = WGPT_KERNELS_GPU};
    same_bits_(tu_gpu_open(&o), WGPT_PRECISION_F16, "f16 (emulated subgroup matrices)");
}

static void names_parse(void **st) {
    (void)st;
    wgpt_recompute r;
    assert_int_equal(wgpt_recompute_parse("gelu", &r), 0);
    assert_int_equal(r, WGPT_RECOMPUTE_GELU);
    assert_int_equal(wgpt_recompute_parse("2", &r), -1);
    assert_string_equal(wgpt_recompute_name(WGPT_RECOMPUTE_ALL), "all");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp32_recompute_same_bits),
        cmocka_unit_test(f16_recompute_same_bits),
        cmocka_unit_test(names_parse),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
