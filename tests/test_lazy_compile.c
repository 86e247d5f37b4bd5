// test_lazy_compile.c: a command compiles only the kernels it runs. A
// forward-only model compiles none at creation (its forward is prepared at
// its first forward); a KV-cache decoder over it compiles only its own; the
// first forward then adds the forward's.
#include "test_util.h"

#include "model/gpt2.h"
#include "model/gpt2_decode.h"

static const wgpt_gpt2_config CFG = {.max_seq_len = 16, .vocab_size = 61, .padded_vocab_size = 64,
                                     .num_layers = 1, .num_heads = 2, .channels = 32};

static void forward_only_model_compiles_at_first_use(void **st) {
    (void)st;
    wgpt_gpu *g = tu_gpu_open(NULL);
    char err[1024];
    wgpt_gpt2 *m = wgpt_gpt2_create_forward_only(g, &CFG, 1, CFG.max_seq_len, err, sizeof err);
    if (!m) fail_msg("%s", err);
    int at_create = wgpt_gpu_kernels_compiled(g);
    float *p = malloc(wgpt_gpt2_num_params(&CFG) * sizeof *p);
    wgpt_gpt2_init_params(&CFG, p, 3);
    if (wgpt_gpt2_set_params(m, p) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    free(p);
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    int32_t ids[3] = {1, 2, 3};
    float logits[61];
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 3, logits, err, sizeof err), 0);
    int decoding = wgpt_gpu_kernels_compiled(g);
    int tokens[16] = {1, 2, 3};
    assert_int_equal(wgpt_gpt2_logits(m, tokens, 0, 2, logits), 0);
    int forward = wgpt_gpu_kernels_compiled(g);
    printf("kernels compiled: %d at creation, %d after a decoder's prefill, %d after a forward\n", at_create,
           decoding, forward);
    assert_int_equal(at_create, 0);
    assert_true(decoding > 0 && forward > decoding);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_only_model_compiles_at_first_use),
    };
    return cmocka_run_group_tests(tests, NULL, tu_group_teardown);
}
