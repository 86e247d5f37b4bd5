// test_embedding.c: kernels/01_embedding.wgsl through src/model/embedding.c
// against tests/ref (ref_encoder_forward / ref_encoder_backward), at sizes
// that are multiples of nothing, with wte split into row chunks on a second
// device whose binding limit is small, and the prepared backward op reused
// for a second batch of tokens.
//
// Tolerances:
//  - forward: one f32 add per element, as in the reference: exact.
//  - backward: the GPU sums a bucket's k rows of dout in f32 from 0 in
//    position order, then adds the old gradient; the reference adds them one
//    by one into the gradient (wte) or sums in double (wpe). Both are sums of
//    k+1 terms reordered, so the difference is at most (k+1) * 2^-24 * (sum
//    of |terms|), checked per element with that bound (times 2 for the
//    reference's own rounding).
#include "test_util.h"

#include "model/embedding.h"
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
typedef struct shape {
    uint32_t B, T, C, V, Vp, maxT;
} shape;

static const shape BASE = {2, 37, 48, 97, 128, 40};
// wte (272, 48) = 52224 bytes: chunks of 64 rows (12288 bytes) on SMALL: 64,64,64,64,16.
static const shape SPLIT = {2, 37, 48, 250, 272, 40};

// Tokens in [0, V) with many repeats (half drawn from 0..5) so buckets hold
// several positions, and the first and last ids of the vocabulary present.
static void make_tokens_(uint32_t *tok, int *itok, uint32_t N, uint32_t V) {
    for (uint32_t n = 0; n < N; n++) {
        float r = tu_randf(0, 1);
        tok[n] = r < 0.5f ? (uint32_t)(tu_randf(0, 6)) : (uint32_t)(tu_randf(0, (float)V));
        if (tok[n] >= V) tok[n] = V - 1;
    }
    tok[3] = 0;
    tok[N - 1] = V - 1;
    for (uint32_t n = 0; n < N; n++) itok[n] = (int)tok[n];
}

// Forward on device g for shape s; expect_steps: dispatches (wte chunks) the op must hold.
static void check_forward_(wgpt_gpu *g, shape s, int expect_steps) {
    uint32_t N = s.B * s.T;
    uint32_t *tok = malloc(N * sizeof *tok);
    int *itok = malloc(N * sizeof *itok);
    float *wte = malloc((size_t)s.Vp * s.C * 4), *wpe = malloc((size_t)s.maxT * s.C * 4);
    float *want = malloc((size_t)N * s.C * 4);
    make_tokens_(tok, itok, N, s.V);
    tu_fill(wte, (size_t)s.Vp * s.C, -1, 1);
    tu_fill(wpe, (size_t)s.maxT * s.C, -1, 1);
    ref_encoder_forward(want, itok, wte, wpe, (int)s.B, (int)s.T, (int)s.C);

    wgpt_buf *bout = tu_upload(g, NULL, (uint64_t)N * s.C * 4, "out");
    wgpt_buf *btok = tu_upload(g, tok, N * 4, "tokens");
    wgpt_buf *bwte = tu_upload(g, wte, (uint64_t)s.Vp * s.C * 4, "wte");
    wgpt_buf *bwpe = tu_upload(g, wpe, (uint64_t)s.maxT * s.C * 4, "wpe");
    wgpt_buf *bst = tu_upload(g, NULL, WGPT_STATUS_BYTES, "status");
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_encoder_forward(g, &op, (wgpt_view){bout, 0, 0}, (wgpt_view){bst, 0, 0}, (wgpt_view){btok, 0, 0},
                                  (wgpt_view){bwte, 0, 0}, (wgpt_view){bwpe, 0, 0}, s.B, s.T, s.C, s.V, s.Vp));
    assert_int_equal(op.n, expect_steps);
    TU_OK(g, wgpt_op_record(g, &op));
    float *got = tu_download_f32(g, bout, (uint64_t)N * s.C);
    tu_assert_close("encoder_forward", got, want, (size_t)N * s.C, 0, 0);
    char msg[128];
    assert_int_equal(wgpt_input_status_check(g, (wgpt_view){bst, 0, 0}, s.V, msg, sizeof msg), 0);

    wgpt_op_free(&op);
    wgpt_buf_free(bout), wgpt_buf_free(btok), wgpt_buf_free(bwte), wgpt_buf_free(bwpe), wgpt_buf_free(bst);
    free(tok), free(itok), free(wte), free(wpe), free(want), free(got);
}

static void forward_matches_ref(void **st) {
    (void)st;
    check_forward_(G, BASE, 1);
}

static void forward_split_wte_matches_ref(void **st) {
    (void)st;
    check_forward_(SMALL, SPLIT, 5);
}

// Invalid ids (one in the padded rows [V, Vp), one far past Vp): zero rows,
// the flag and the largest bad id in the status; other rows as usual. On the
// split device, so the flag is raised exactly once over the chunk dispatches.
static void forward_flags_bad_token(void **st) {
    (void)st;
    wgpt_gpu *g = SMALL;
    shape s = SPLIT;
    uint32_t N = s.B * s.T;
    uint32_t *tok = malloc(N * sizeof *tok);
    int *itok = malloc(N * sizeof *itok);
    float *wte = malloc((size_t)s.Vp * s.C * 4), *wpe = malloc((size_t)s.maxT * s.C * 4);
    float *want = malloc((size_t)N * s.C * 4);
    make_tokens_(tok, itok, N, s.V);
    tu_fill(wte, (size_t)s.Vp * s.C, -1, 1);
    tu_fill(wpe, (size_t)s.maxT * s.C, -1, 1);
    ref_encoder_forward(want, itok, wte, wpe, (int)s.B, (int)s.T, (int)s.C);
    const uint32_t bad1 = 5, bad2 = 60;
    tok[bad1] = s.V + 3;
    tok[bad2] = 1000000;
    memset(want + (size_t)bad1 * s.C, 0, s.C * 4);
    memset(want + (size_t)bad2 * s.C, 0, s.C * 4);

    wgpt_buf *bout = tu_upload(g, NULL, (uint64_t)N * s.C * 4, "out");
    float nan_fill[64];
    for (int i = 0; i < 64; i++) nan_fill[i] = NAN;  // bad rows must be overwritten
    TU_OK(g, wgpt_buf_upload(g, bout, (uint64_t)bad2 * s.C * 4, nan_fill, s.C * 4));
    wgpt_buf *btok = tu_upload(g, tok, N * 4, "tokens");
    wgpt_buf *bwte = tu_upload(g, wte, (uint64_t)s.Vp * s.C * 4, "wte");
    wgpt_buf *bwpe = tu_upload(g, wpe, (uint64_t)s.maxT * s.C * 4, "wpe");
    wgpt_buf *bst = tu_upload(g, NULL, WGPT_STATUS_BYTES, "status");
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(g, wgpt_encoder_forward(g, &op, (wgpt_view){bout, 0, 0}, (wgpt_view){bst, 0, 0}, (wgpt_view){btok, 0, 0},
                                  (wgpt_view){bwte, 0, 0}, (wgpt_view){bwpe, 0, 0}, s.B, s.T, s.C, s.V, s.Vp));
    TU_OK(g, wgpt_op_record(g, &op));
    float *got = tu_download_f32(g, bout, (uint64_t)N * s.C);
    tu_assert_close("encoder_forward with bad ids", got, want, (size_t)N * s.C, 0, 0);
    uint32_t words[WGPT_STATUS_WORDS];
    TU_OK(g, wgpt_buf_download(g, bst, 0, words, sizeof words));
    assert_int_equal(words[0], WGPT_STATUS_BAD_TOKEN);
    assert_int_equal(words[1], 1000000);
    assert_int_equal(words[2], 0);
    char msg[128];
    assert_int_equal(wgpt_input_status_check(g, (wgpt_view){bst, 0, 0}, s.V, msg, sizeof msg), 1);
    assert_string_equal(msg, "token id 1000000 out of range [0, 250)");
    // The check cleared the flags.
    assert_int_equal(wgpt_input_status_check(g, (wgpt_view){bst, 0, 0}, s.V, msg, sizeof msg), 0);

    wgpt_op_free(&op);
    wgpt_buf_free(bout), wgpt_buf_free(btok), wgpt_buf_free(bwte), wgpt_buf_free(bwpe), wgpt_buf_free(bst);
    free(tok), free(itok), free(wte), free(wpe), free(want), free(got);
}

// The index: ids distinct and increasing, each bucket's positions increasing
// and holding that id, every position exactly once; a bad id is refused.
static void bucket_index_is_well_formed(void **st) {
    (void)st;
    const uint32_t N = 74, V = 97;
    uint32_t tok[74];
    int itok[74];
    make_tokens_(tok, itok, N, V);
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

// |got - want| <= 2 (k+1) 2^-24 sum|terms| per element; bound (n) holds sum|terms|
// and cnt (n) the number of terms.
static void assert_sum_close_(const char *what, const float *got, const float *want, const double *mag,
                              const int *cnt, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double tol = 2.0 * (cnt[i] + 1) * 0x1p-24 * mag[i];
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol))
            fail_msg("%s: element %zu is %.9g, expected %.9g (|diff| %.3g > %.3g)", what, i, got[i], want[i], d, tol);
    }
}

typedef struct bwd_case {
    wgpt_buf *dwte, *dwpe, *dout, *bucket;
    wgpt_op op;
} bwd_case;

// Prepares the backward op for shape s on g (buffers for the gradients,
// dout and the bucket index).
static void bwd_prepare_(wgpt_gpu *g, shape s, bwd_case *c) {
    uint32_t N = s.B * s.T;
    c->dwte = tu_upload(g, NULL, (uint64_t)s.Vp * s.C * 4, "dwte");
    c->dwpe = tu_upload(g, NULL, (uint64_t)s.maxT * s.C * 4, "dwpe");
    c->dout = tu_upload(g, NULL, (uint64_t)N * s.C * 4, "dout");
    c->bucket = tu_upload(g, NULL, wgpt_embedding_bucket_words(N) * 4, "bucket");
    wgpt_op_init(&c->op);
    TU_OK(g, wgpt_encoder_backward(g, &c->op, (wgpt_view){c->dwte, 0, 0}, (wgpt_view){c->dwpe, 0, 0},
                                   (wgpt_view){c->dout, 0, 0}, (wgpt_view){c->bucket, 0, 0}, s.B, s.T, s.C, s.Vp));
}

static void bwd_free_(bwd_case *c) {
    wgpt_op_free(&c->op);
    wgpt_buf_free(c->dwte), wgpt_buf_free(c->dwpe), wgpt_buf_free(c->dout), wgpt_buf_free(c->bucket);
}

// One step: fresh tokens, dout and starting gradients; runs the prepared op
// and compares with the reference. Returns the GPU dwte and dwpe (for
// determinism checks) through got_wte / got_wpe if not NULL.
static void bwd_step_(wgpt_gpu *g, shape s, bwd_case *c, float **got_wte, float **got_wpe, uint64_t seed) {
    uint32_t N = s.B * s.T;
    size_t nwte = (size_t)s.Vp * s.C, nwpe = (size_t)s.maxT * s.C, nout = (size_t)N * s.C;
    tu_rng_state = seed;
    uint32_t *tok = malloc(N * sizeof *tok);
    int *itok = malloc(N * sizeof *itok);
    float *dwte = malloc(nwte * 4), *dwpe = malloc(nwpe * 4), *dout = malloc(nout * 4);
    make_tokens_(tok, itok, N, s.V);
    tu_fill(dwte, nwte, -1, 1);  // gradients accumulate: start from non-zero
    tu_fill(dwpe, nwpe, -1, 1);
    tu_fill(dout, nout, -1, 1);
    TU_OK(g, wgpt_buf_upload(g, c->dwte, 0, dwte, nwte * 4));
    TU_OK(g, wgpt_buf_upload(g, c->dwpe, 0, dwpe, nwpe * 4));
    TU_OK(g, wgpt_buf_upload(g, c->dout, 0, dout, nout * 4));
    TU_OK(g, wgpt_encoder_bucket_upload(g, (wgpt_view){c->bucket, 0, 0}, tok, N, s.V, NULL));
    TU_OK(g, wgpt_op_record(g, &c->op));

    // Error bounds: per element, the number of terms and the sum of their magnitudes.
    double *mwte = calloc(nwte, sizeof *mwte), *mwpe = calloc(nwpe, sizeof *mwpe);
    int *kwte = calloc(nwte, sizeof *kwte), *kwpe = calloc(nwpe, sizeof *kwpe);
    for (size_t i = 0; i < nwte; i++) mwte[i] = fabs(dwte[i]);
    for (size_t i = 0; i < nwpe; i++) mwpe[i] = fabs(dwpe[i]);
    for (uint32_t n = 0; n < N; n++) {
        for (uint32_t ch = 0; ch < s.C; ch++) {
            float d = dout[(size_t)n * s.C + ch];
            size_t iw = (size_t)tok[n] * s.C + ch, ip = (size_t)(n % s.T) * s.C + ch;
            mwte[iw] += fabs(d), kwte[iw]++;
            mwpe[ip] += fabs(d), kwpe[ip]++;
        }
    }
    ref_encoder_backward(dwte, dwpe, dout, itok, (int)s.B, (int)s.T, (int)s.C);
    float *gw = tu_download_f32(g, c->dwte, nwte), *gp = tu_download_f32(g, c->dwpe, nwpe);
    assert_sum_close_("dwte", gw, dwte, mwte, kwte, nwte);
    assert_sum_close_("dwpe", gp, dwpe, mwpe, kwpe, nwpe);
    if (got_wte) *got_wte = gw; else free(gw);
    if (got_wpe) *got_wpe = gp; else free(gp);
    free(tok), free(itok), free(dwte), free(dwpe), free(dout), free(mwte), free(mwpe), free(kwte), free(kwpe);
}

static void backward_matches_ref(void **st) {
    (void)st;
    bwd_case c;
    bwd_prepare_(G, BASE, &c);
    assert_int_equal(c.op.n, 2);  // wte, wpe
    bwd_step_(G, BASE, &c, NULL, NULL, 11);
    bwd_free_(&c);
    // C not a multiple of 4: CPU devices keep the WG-thread kernel (not the flat4 twin).
    const shape odd = {2, 37, 50, 97, 128, 40};
    bwd_prepare_(G, odd, &c);
    bwd_step_(G, odd, &c, NULL, NULL, 12);
    bwd_free_(&c);
}

static void backward_split_wte_matches_ref(void **st) {
    (void)st;
    bwd_case c;
    bwd_prepare_(SMALL, SPLIT, &c);
    assert_int_equal(c.op.n, 5 + 1);  // 5 wte chunks, wpe
    bwd_step_(SMALL, SPLIT, &c, NULL, NULL, 12);
    bwd_free_(&c);
}

// The prepared op, unchanged, serves a new batch of tokens (a new index) and
// gives bit-identical results when a step is repeated.
static void backward_reused_op_and_deterministic(void **st) {
    (void)st;
    bwd_case c;
    bwd_prepare_(G, BASE, &c);
    float *w1, *p1, *w2, *p2;
    bwd_step_(G, BASE, &c, &w1, &p1, 21);
    bwd_step_(G, BASE, &c, NULL, NULL, 22);  // different tokens, same op
    bwd_step_(G, BASE, &c, &w2, &p2, 21);
    assert_memory_equal(w1, w2, (size_t)BASE.Vp * BASE.C * 4);
    assert_memory_equal(p1, p2, (size_t)BASE.maxT * BASE.C * 4);
    free(w1), free(p1), free(w2), free(p2);
    bwd_free_(&c);
}

// C above one workgroup of channels (2 channel blocks per bucket) and a long
// bucket: every position holds the same token.
static void backward_wide_channels_one_token(void **st) {
    (void)st;
    shape s = {3, 20, 300, 50, 64, 20};
    bwd_case c;
    bwd_prepare_(G, s, &c);
    bwd_step_(G, s, &c, NULL, NULL, 31);
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
    bwd_free_(&c);
}

// N * ceil(C / 256) = 66000 workgroups for the wte backward: past 65535, so
// the host's 2D fallback (65535, 2, 1); the kernel linearises workgroup ids.
static void backward_past_65535_workgroups(void **st) {
    (void)st;
    shape s = {2, 33000, 8, 50, 64, 33000};
    bwd_case c;
    bwd_prepare_(G, s, &c);
    assert_true((uint64_t)s.B * s.T > WGPT_MAX_WG_DIM);
    bwd_step_(G, s, &c, NULL, NULL, 41);
    bwd_free_(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_matches_ref),
        cmocka_unit_test(forward_split_wte_matches_ref),
        cmocka_unit_test(forward_flags_bad_token),
        cmocka_unit_test(bucket_index_is_well_formed),
        cmocka_unit_test(backward_matches_ref),
        cmocka_unit_test(backward_split_wte_matches_ref),
        cmocka_unit_test(backward_reused_op_and_deterministic),
        cmocka_unit_test(backward_wide_channels_one_token),
        cmocka_unit_test(backward_past_65535_workgroups),
    };
    return cmocka_run_group_tests_name("embedding", tests, group_setup, tu_group_teardown);
}
