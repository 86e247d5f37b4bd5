// test_decode.c: the decoder (model/gpt2_decode.h) on a tiny model: its
// logits equal a full forward's at the same position, and its checks.
#include "test_util.h"

#include "model/gpt2.h"
#include "model/gpt2_decode.h"

static wgpt_gpu *G;
static const wgpt_gpt2_config CFG = {.max_seq_len = 32, .vocab_size = 61, .padded_vocab_size = 64,
                                     .num_layers = 2, .num_heads = 2, .channels = 32};

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    return 0;
}

static wgpt_gpt2 *model_(void) {
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create_forward_only(G, &CFG, 1, CFG.max_seq_len, err, sizeof err);
    if (!m) fail_msg("model: %s", err);
    float *p = malloc(wgpt_gpt2_num_params(&CFG) * sizeof *p);
    wgpt_gpt2_init_params(&CFG, p, 5);
    if (wgpt_gpt2_set_params(m, p) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    free(p);
    return m;
}

// Prefill then steps: each row equals wgpt_gpt2_logits at the same position.
static void test_matches_forward(void **state) {
    (void)state;
    wgpt_gpt2 *m = model_();
    char err[512];
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    assert_int_equal(wgpt_decoder_vocab(d), 61);
    int ids[32] = {0};
    int32_t ids32[32];
    for (int i = 0; i < 20; i++) ids[i] = ids32[i] = (i * 7 + 3) % 61;
    float got[2 * 61], want[61];
    assert_int_equal(wgpt_decoder_prefill(d, 1, ids32, 10, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 9, want), 0);
    tu_assert_close("prefill", got, want, 61, 1e-5f, 1e-5f);
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids32, 4, got, err, sizeof err), 0);
    uint32_t slots[2] = {1, 0};
    int32_t next[2] = {ids32[10], ids32[4]};
    assert_int_equal(wgpt_decoder_step(d, slots, next, 2, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 10, want), 0);
    tu_assert_close("step slot 1", got, want, 61, 1e-5f, 1e-5f);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 4, want), 0);
    tu_assert_close("step slot 0", got + 61, want, 61, 1e-5f, 1e-5f);
    assert_int_equal(wgpt_decoder_len(d, 1), 11);
    assert_int_equal(wgpt_decoder_len(d, 0), 5);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
}

static void test_refusals(void **state) {
    (void)state;
    wgpt_gpt2 *m = model_();
    char err[512];
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    float logits[2 * 61];
    int32_t ids[40] = {0};
    ids[3] = 61;
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 5, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "token id 61"));
    ids[3] = 0;
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 33, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "context of 32"));
    assert_int_equal(wgpt_decoder_prefill(d, 2, ids, 1, logits, err, sizeof err), -1);
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 32, logits, err, sizeof err), 0);
    uint32_t s[3] = {0, 1, 1};
    assert_int_equal(wgpt_decoder_step(d, s, ids, 1, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "full"));
    assert_int_equal(wgpt_decoder_step(d, s, ids, 3, logits, err, sizeof err), -1);
    assert_int_equal(wgpt_decoder_step(d, s + 1, ids, 2, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "twice"));
    wgpt_decoder_reset(d, 0);
    assert_int_equal(wgpt_decoder_len(d, 0), 0);
    assert_int_equal(wgpt_decoder_step(d, s, ids, 1, logits, err, sizeof err), 0);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_forward),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("decode", tests, group_setup, tu_group_teardown);
}
