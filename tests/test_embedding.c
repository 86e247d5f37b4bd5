// test_embedding.c: the special cases of kernels/01_embedding.wgsl through
// src/model/embedding.h (the run-and-compare cases are the "embedding" family
// of the op registry, tests/ops/embedding.c, run by test_ops; these reuse its
// cases): invalid token ids, the bucket index, the prepared backward op
// reused for a second batch of tokens (bit-identical repeats), one token at
// every position (one long bucket, exact).
#include "test_util.h"

#include "model/embedding.h"
#include "ops/embedding.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device
static wgpt_gpu *SMALL;  // max_binding 16 KiB: wte (Vp, 48) splits into 64-row chunks
#define SMALL_BINDING (16u * 1024u)

static int group_setup(void **state) {
    (void)state;
    G = tu_gpu_open(NULL);
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = SMALL_BINDING};
    SMALL = tu_gpu_open(&o);
    return 0;
}
static const emb_shape BASE = {2, 37, 48, 97, 128, 40};
// wte (272, 48) = 52224 bytes: chunks of 64 rows (12288 bytes) on SMALL: 64,64,64,64,16.
static const emb_shape SPLIT = {2, 37, 48, 250, 272, 40};

// Invalid ids (one in the padded rows [V, Vp), one far past Vp): zero rows,
// the flag and the largest bad id in the status; other rows as usual. On the
// split device, so the flag is raised exactly once over the chunk dispatches.
static void forward_flags_bad_token(void **st) {
    (void)st;
    wgpt_gpu *g = SMALL;
    emb_shape s = SPLIT;
    emb_fwd_case c;
    emb_fwd_inputs(s, &c);
    const uint32_t bad1 = 5, bad2 = 60;
    c.tok[bad1] = s.V + 3;
    c.tok[bad2] = 1000000;
    memset(c.want + (size_t)bad1 * s.C, 0, s.C * 4);
    memset(c.want + (size_t)bad2 * s.C, 0, s.C * 4);
    emb_fwd_prepare(g, s, &c);
    float nan_fill[64];
    for (int i = 0; i < 64; i++) nan_fill[i] = NAN;  // bad rows must be overwritten
    TU_OK(g, wgpt_buf_upload(g, c.out, (uint64_t)bad2 * s.C * 4, nan_fill, s.C * 4));
    float *got = emb_fwd_run(g, s, &c);
    tu_assert_close("encoder_forward with bad ids", got, c.want, (size_t)s.B * s.T * s.C, 0, 0);
    uint32_t words[WGPT_STATUS_WORDS];
    TU_OK(g, wgpt_buf_download(g, c.status, 0, words, sizeof words));
    assert_int_equal(words[0], WGPT_STATUS_BAD_TOKEN);
    assert_int_equal(words[1], 1000000);
    assert_int_equal(words[2], 0);
    char msg[128];
    wgpt_view sv = {c.status, 0, 0};
    assert_int_equal(wgpt_input_status_check(g, sv, s.V, msg, sizeof msg), 1);
    assert_string_equal(msg, "token id 1000000 out of range [0, 250)");
    // The check cleared the flags.
    assert_int_equal(wgpt_input_status_check(g, sv, s.V, msg, sizeof msg), 0);
    emb_fwd_free(&c);
    free(got);
}

// The index: ids distinct and increasing, each bucket's positions increasing
// and holding that id, every position exactly once; a bad id is refused.
static void bucket_index_is_well_formed(void **st) {
    (void)st;
    const uint32_t N = 74, V = 97;
    uint32_t tok[74];
    int itok[74];
    emb_make_tokens(tok, itok, N, V);
    uint32_t *idx = malloc(wgpt_embedding_bucket_words(N) * 4);
    assert_int_equal(wgpt_embedding_bucket(idx, tok, N, V, NULL), 0);
    uint32_t U = idx[0], *ids = idx + 1, *starts = idx + 1 + N, *pos = idx + 2 + 2 * N;
    assert_true(U >= 1 && U <= N);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[U], N);
    int seen[74] = {0};
    for (uint32_t u = 0; u < U; u++) {
        if (u) assert_true(ids[u] > ids[u - 1]);
        assert_true(starts[u + 1] > starts[u]);
        for (uint32_t j = starts[u]; j < starts[u + 1]; j++) {
            assert_true(pos[j] < N);
            assert_int_equal(tok[pos[j]], ids[u]);
            if (j > starts[u]) assert_true(pos[j] > pos[j - 1]);
            seen[pos[j]]++;
        }
    }
    for (uint32_t n = 0; n < N; n++) assert_int_equal(seen[n], 1);
    tok[10] = V;
    uint32_t bad = 0;
    assert_int_equal(wgpt_embedding_bucket(idx, tok, N, V, &bad), -1);
    assert_int_equal(bad, V);
    free(idx);
}

// The prepared op, unchanged, serves a new batch of tokens (a new index) and
// gives bit-identical results when a step is repeated.
static void backward_reused_op_and_deterministic(void **st) {
    (void)st;
    emb_bwd_case c;
    emb_bwd_prepare(G, BASE, &c);
    float *w1, *p1, *w2, *p2;
    emb_bwd_step(G, BASE, &c, &w1, &p1, 21);
    emb_bwd_step(G, BASE, &c, NULL, NULL, 22);  // different tokens, same op
    emb_bwd_step(G, BASE, &c, &w2, &p2, 21);
    assert_memory_equal(w1, w2, (size_t)BASE.Vp * BASE.C * 4);
    assert_memory_equal(p1, p2, (size_t)BASE.maxT * BASE.C * 4);
    free(w1), free(p1), free(w2), free(p2);
    emb_bwd_free(&c);
}

// C above one workgroup of channels (2 channel blocks per bucket) and a long
// bucket: every position holds the same token.
static void backward_wide_channels_one_token(void **st) {
    (void)st;
    emb_shape s = {3, 20, 300, 50, 64, 20};
    emb_bwd_case c;
    emb_bwd_prepare(G, s, &c);
    // Now all positions one id: a bucket of N positions.
    uint32_t N = s.B * s.T;
    size_t nwte = (size_t)s.Vp * s.C, nout = (size_t)N * s.C;
    uint32_t *tok = malloc(N * 4);
    float *dout = malloc(nout * 4), *want = calloc(nwte, 4);
    for (uint32_t n = 0; n < N; n++) tok[n] = 7;
    tu_fill(dout, nout, -1, 1);
    TU_OK(G, wgpt_buf_zero(G, c.dwte, 0, nwte * 4));
    TU_OK(G, wgpt_buf_upload(G, c.dout, 0, dout, nout * 4));
    TU_OK(G, wgpt_encoder_bucket_upload(G, (wgpt_view){c.bucket, 0, 0}, tok, N, s.V, NULL));
    TU_OK(G, wgpt_op_record(G, &c.op));
    // Same order as the kernel (f32, positions increasing from 0): exact.
    for (uint32_t n = 0; n < N; n++)
        for (uint32_t ch = 0; ch < s.C; ch++) want[7 * s.C + ch] += dout[(size_t)n * s.C + ch];
    float *got = tu_download_f32(G, c.dwte, nwte);
    tu_assert_close("dwte, one token everywhere", got, want, nwte, 0, 0);
    free(tok), free(dout), free(want), free(got);
    emb_bwd_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_flags_bad_token),
        cmocka_unit_test(bucket_index_is_well_formed),
        cmocka_unit_test(backward_reused_op_and_deterministic),
        cmocka_unit_test(backward_wide_channels_one_token),
    };
    return cmocka_run_group_tests_name("embedding", tests, group_setup, tu_group_teardown);
}
