// test_decode.c: the KV-cache decoder (model/gpt2_decode.h) against the
// full-recompute reference (wgpt_decoder_create_recompute: a full forward
// over the whole context for every position) on tiny models:
// - greedy decoding of 64 tokens, KV cache == recompute token for token, in
//   fp32 and f16, one slot and three slots decoded together (prompts of 3, 7
//   and 11 tokens, so the slots sit at different positions);
// - the logits of a prefill appended in two parts, of a prefill longer than
//   one 128-row pass, and of batched steps equal the forward's at the same
//   position;
// - refusals (ids, full slots, repeated slots, a prompt past the context).
//
// Tolerance for logits: both sides sum in f32 in different orders (the
// forward's tiled matmuls vs decode_matvec's lanes; flash attention vs one
// row against the cache); over 64 greedy steps through 2 layers of C = 32
// the worst difference measured on lavapipe is 7e-7 of logits of size ~1-5:
// we allow 2e-5 absolute + 2e-5 relative (2e-4 for the single comparisons
// against wgpt_gpt2_logits). f16: the caches hold keys and values rounded to
// f16 where the reference's attention (lavapipe: no subgroup matrices) reads
// f32: measured 1.3e-3, allowed 1e-2; a missed position moves logits by
// 0.04 and more. Greedy tokens
// are compared exactly; the weights are drawn large (std ~0.1, as
// tests/torch_parity.py does) so that the top two logits are rarely closer
// than the f16 error.
#include "test_util.h"

#include "model/gpt2.h"
#include "model/gpt2_decode.h"

static wgpt_gpu *G;
static const wgpt_gpt2_config CFG = {.max_seq_len = 80, .vocab_size = 61, .padded_vocab_size = 64,
                                     .num_layers = 2, .num_heads = 2, .channels = 32};
static const wgpt_gpt2_config LONG = {.max_seq_len = 160, .vocab_size = 61, .padded_vocab_size = 64,
                                      .num_layers = 1, .num_heads = 2, .channels = 32};

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    return 0;
}

// Weights uniform in [-0.17, 0.17] (std 0.1), wpe in [-1, 1], LayerNorm weights 1 +- 0.1, their biases +- 0.05.
static float *params_(const wgpt_gpt2_config *c) {
    size_t sizes[WGPT_GPT2_NUM_TENSORS], n = wgpt_gpt2_num_params(c), off = 0;
    wgpt_gpt2_param_sizes(c, sizes);
    float *p = malloc(n * sizeof *p);
    tu_rng_state = 0x1234567ull;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        int lnw = t == 2 || t == 8 || t == 14, lnb = t == 3 || t == 9 || t == 15;
        for (size_t i = 0; i < sizes[t]; i++)
            p[off + i] = lnw   ? 1 + tu_randf(-0.1f, 0.1f)
                         : lnb ? tu_randf(-0.05f, 0.05f)
                         : t == 1 ? tu_randf(-1, 1)  // wpe: each position moves the logits, no loop on one token
                                  : tu_randf(-0.17f, 0.17f);
        off += sizes[t];
    }
    return p;
}

static wgpt_gpt2 *model_(const wgpt_gpt2_config *c, wgpt_precision prec) {
    char err[2048];
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(G, c, 1, c->max_seq_len, 0, prec, err, sizeof err);
    if (!m) fail_msg("model: %s", err);
    float *p = params_(c);
    if (wgpt_gpt2_set_params(m, p) < 0) fail_msg("%s", wgpt_gpt2_error(m));
    free(p);
    return m;
}

static uint32_t argmax_(const float *x, uint32_t n) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// Greedy decoding of `steps` tokens in `ns` slots together; out (ns, steps),
// and the logits each token was picked from in all (steps, ns, V).
static void greedy_(wgpt_decoder *d, uint32_t ns, int steps, int32_t *out, float *all) {
    char err[512];
    uint32_t V = wgpt_decoder_vocab(d);
    float *lg = malloc((size_t)ns * V * sizeof *lg);
    int32_t next[3];
    uint32_t slots[3];
    for (uint32_t s = 0; s < ns; s++) {
        int32_t prompt[11];
        for (int i = 0; i < 11; i++) prompt[i] = (int32_t)((s * 13 + i * 7 + 3) % V);
        if (wgpt_decoder_prefill(d, s, prompt, 3 + 4 * s, lg, err, sizeof err) < 0) fail_msg("prefill: %s", err);
        next[s] = (int32_t)argmax_(lg, V);
        memcpy(all + (size_t)s * V, lg, V * sizeof *lg);
        slots[s] = s;
    }
    for (int k = 0; k < steps; k++) {
        for (uint32_t s = 0; s < ns; s++) out[s * steps + k] = next[s];
        if (k + 1 == steps) break;
        if (wgpt_decoder_step(d, slots, next, ns, lg, err, sizeof err) < 0) fail_msg("step %d: %s", k, err);
        for (uint32_t s = 0; s < ns; s++) next[s] = (int32_t)argmax_(lg + (size_t)s * V, V);
        memcpy(all + (size_t)(k + 1) * ns * V, lg, (size_t)ns * V * sizeof *lg);
    }
    free(lg);
}

static void greedy_case_(wgpt_precision prec, uint32_t ns) {
    wgpt_gpt2 *m = model_(&CFG, prec);
    char err[512];
    wgpt_decoder *kv = wgpt_decoder_create(m, ns, err, sizeof err);
    if (!kv) fail_msg("%s", err);
    wgpt_decoder *ref = wgpt_decoder_create_recompute(m, ns, err, sizeof err);
    if (!ref) fail_msg("%s", err);
    enum { N = 64 };
    int32_t got[3 * N], want[3 * N];
    size_t nl = (size_t)N * ns * 61;
    float *lg = malloc(nl * sizeof *lg), *lw = malloc(nl * sizeof *lw);
    greedy_(kv, ns, N, got, lg);
    greedy_(ref, ns, N, want, lw);
    for (uint32_t s = 0; s < ns; s++)
        for (int k = 0; k < N; k++)
            if (got[s * N + k] != want[s * N + k])
                fail_msg("%s, %u slots: slot %u token %d is %d with the KV cache, %d by recompute",
                         wgpt_precision_name(prec), ns, s, k, got[s * N + k], want[s * N + k]);
    float tol = prec == WGPT_PRECISION_F16 ? 1e-2f : 2e-5f;
    float worst = 0;
    for (size_t i = 0; i < nl; i++) worst = fmaxf(worst, fabsf(lg[i] - lw[i]));
    printf("%s, %u slots: max |logit KV - recompute| %.3g over %d steps (bound %.3g)\n", wgpt_precision_name(prec),
           ns, worst, N, tol);
    tu_assert_close("logits of every step", lg, lw, nl, tol, tol);
    for (uint32_t s = 0; s < ns; s++) {  // a text stuck on one token would prove little
        int distinct = 0;
        for (int k = 0; k < N; k++) {
            int seen = 0;
            for (int j = 0; j < k; j++) seen |= got[s * N + j] == got[s * N + k];
            distinct += !seen;
        }
        if (distinct < 8) fail_msg("slot %u: only %d distinct tokens in %d", s, distinct, N);
    }
    free(lg), free(lw);
    wgpt_decoder_free(kv), wgpt_decoder_free(ref);
    wgpt_gpt2_free(m);
}

static void test_greedy_fp32_1(void **state) { (void)state; greedy_case_(WGPT_PRECISION_FP32, 1); }
static void test_greedy_fp32_3(void **state) { (void)state; greedy_case_(WGPT_PRECISION_FP32, 3); }
static void test_greedy_f16_1(void **state) { (void)state; greedy_case_(WGPT_PRECISION_F16, 1); }
static void test_greedy_f16_3(void **state) { (void)state; greedy_case_(WGPT_PRECISION_F16, 3); }

// Logits of a prefill in two parts and of batched steps vs the forward's.
static void test_logits_match_forward(void **state) {
    (void)state;
    wgpt_gpt2 *m = model_(&CFG, WGPT_PRECISION_FP32);
    char err[512];
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    int ids[80] = {0};
    int32_t ids32[80];
    for (int i = 0; i < 20; i++) ids[i] = ids32[i] = (i * 7 + 3) % 61;
    float got[2 * 61], want[61];
    assert_int_equal(wgpt_decoder_prefill(d, 1, ids32, 6, got, err, sizeof err), 0);
    assert_int_equal(wgpt_decoder_prefill(d, 1, ids32 + 6, 4, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 9, want), 0);
    tu_assert_close("prefill in two parts", got, want, 61, 2e-4f, 2e-4f);
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids32, 4, got, err, sizeof err), 0);
    uint32_t slots[2] = {1, 0};
    int32_t next[2] = {ids32[10], ids32[4]};
    assert_int_equal(wgpt_decoder_step(d, slots, next, 2, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 10, want), 0);
    tu_assert_close("step slot 1", got, want, 61, 2e-4f, 2e-4f);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 4, want), 0);
    tu_assert_close("step slot 0", got + 61, want, 61, 2e-4f, 2e-4f);
    assert_int_equal(wgpt_decoder_len(d, 1), 11);
    assert_int_equal(wgpt_decoder_len(d, 0), 5);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
}

// A prompt of 150 tokens: two prefill passes of up to 128 rows.
static void test_long_prefill(void **state) {
    (void)state;
    wgpt_gpt2 *m = model_(&LONG, WGPT_PRECISION_FP32);
    char err[512];
    wgpt_decoder *d = wgpt_decoder_create(m, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    int ids[160] = {0};
    int32_t ids32[160];
    for (int i = 0; i < 160; i++) ids[i] = ids32[i] = (i * 11 + 5) % 61;
    float got[61], want[61];
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids32, 150, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 149, want), 0);
    tu_assert_close("prefill of 150", got, want, 61, 2e-4f, 2e-4f);
    uint32_t slot = 0;
    assert_int_equal(wgpt_decoder_step(d, &slot, ids32 + 150, 1, got, err, sizeof err), 0);
    assert_int_equal(wgpt_gpt2_logits(m, ids, 0, 150, want), 0);
    tu_assert_close("step after it", got, want, 61, 2e-4f, 2e-4f);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(m);
}

static void test_refusals(void **state) {
    (void)state;
    wgpt_gpt2 *m = model_(&CFG, WGPT_PRECISION_FP32);
    char err[512];
    wgpt_decoder *d = wgpt_decoder_create(m, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    assert_int_equal(wgpt_decoder_context(d), 80);
    assert_int_equal(wgpt_decoder_max_slots(d), 2);
    float logits[2 * 61];
    int32_t ids[90] = {0};
    ids[3] = 61;
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 5, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "token id 61"));
    ids[3] = 0;
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 81, logits, err, sizeof err), -1);
    assert_non_null(strstr(err, "context of 80"));
    assert_int_equal(wgpt_decoder_prefill(d, 2, ids, 1, logits, err, sizeof err), -1);
    assert_int_equal(wgpt_decoder_prefill(d, 0, ids, 80, logits, err, sizeof err), 0);
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
        cmocka_unit_test(test_greedy_fp32_1),
        cmocka_unit_test(test_greedy_fp32_3),
        cmocka_unit_test(test_greedy_f16_1),
        cmocka_unit_test(test_greedy_f16_3),
        cmocka_unit_test(test_logits_match_forward),
        cmocka_unit_test(test_long_prefill),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests_name("decode", tests, group_setup, tu_group_teardown);
}
