// embedding.c: the embedding family of the op registry (tests/ops/ops.h):
// kernels/01_embedding.wgsl through src/model/embedding.h against tests/ref
// (ref_encoder_forward / ref_encoder_backward), at sizes that are multiples
// of nothing, with wte split into row chunks on a device whose binding limit
// is small, C not a multiple of 4, C above one workgroup of channels, and
// the wte backward past 65535 workgroups. tests/test_embedding.c keeps the
// special cases (bad tokens, the bucket index, the prepared op reused, one
// token everywhere) on these helpers.
//
// Tolerances:
//  - forward: one f32 add per element, as in the reference: exact.
//  - backward: the GPU sums a bucket's k rows of dout in f32 from 0 in
//    position order, then adds the old gradient; the reference adds them one
//    by one into the gradient (wte) or sums in double (wpe). Both are sums of
//    k+1 terms reordered, so the difference is at most (k+1) * 2^-24 * (sum
//    of |terms|), checked per element with that bound (times 2 for the
//    reference's own rounding).
#include "ops/embedding.h"

#include "model/embedding.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

// Tokens in [0, V) with many repeats (half drawn from 0..5) so buckets hold
// several positions, and the first and last ids of the vocabulary present.
void emb_make_tokens(uint32_t *tok, int *itok, uint32_t N, uint32_t V) {
    for (uint32_t n = 0; n < N; n++) {
        float r = tu_randf(0, 1);
        tok[n] = r < 0.5f ? (uint32_t)(tu_randf(0, 6)) : (uint32_t)(tu_randf(0, (float)V));
        if (tok[n] >= V) tok[n] = V - 1;
    }
    tok[3] = 0;
    tok[N - 1] = V - 1;
    for (uint32_t n = 0; n < N; n++) itok[n] = (int)tok[n];
}

void emb_fwd_inputs(emb_shape s, emb_fwd_case *c) {
    uint32_t N = s.B * s.T;
    memset(c, 0, sizeof *c);
    c->tok = malloc(N * sizeof *c->tok);
    c->itok = malloc(N * sizeof *c->itok);
    c->wte = malloc((size_t)s.Vp * s.C * 4), c->wpe = malloc((size_t)s.maxT * s.C * 4);
    c->want = malloc((size_t)N * s.C * 4);
    emb_make_tokens(c->tok, c->itok, N, s.V);
    tu_fill(c->wte, (size_t)s.Vp * s.C, -1, 1);
    tu_fill(c->wpe, (size_t)s.maxT * s.C, -1, 1);
    ref_encoder_forward(c->want, c->itok, c->wte, c->wpe, (int)s.B, (int)s.T, (int)s.C);
}

void emb_fwd_prepare(wgpt_gpu *g, emb_shape s, emb_fwd_case *c) {
    uint32_t N = s.B * s.T;
    c->out = tu_upload(g, NULL, (uint64_t)N * s.C * 4, "out");
    c->btok = tu_upload(g, c->tok, N * 4, "tokens");
    c->bwte = tu_upload(g, c->wte, (uint64_t)s.Vp * s.C * 4, "wte");
    c->bwpe = tu_upload(g, c->wpe, (uint64_t)s.maxT * s.C * 4, "wpe");
    c->status = tu_upload(g, NULL, WGPT_STATUS_BYTES, "status");
    wgpt_op_init(&c->op);
    TU_OK(g, wgpt_encoder_forward(g, &c->op, (wgpt_view){c->out, 0, 0}, (wgpt_view){c->status, 0, 0},
                                  (wgpt_view){c->btok, 0, 0}, (wgpt_view){c->bwte, 0, 0}, (wgpt_view){c->bwpe, 0, 0},
                                  s.B, s.T, s.C, s.V, s.Vp));
}

float *emb_fwd_run(wgpt_gpu *g, emb_shape s, emb_fwd_case *c) {
    TU_OK(g, wgpt_op_record(g, &c->op));
    return tu_download_f32(g, c->out, (uint64_t)s.B * s.T * s.C);
}

void emb_fwd_free(emb_fwd_case *c) {
    wgpt_op_free(&c->op);
    wgpt_buf_free(c->out), wgpt_buf_free(c->btok), wgpt_buf_free(c->bwte), wgpt_buf_free(c->bwpe);
    wgpt_buf_free(c->status);
    free(c->tok), free(c->itok), free(c->wte), free(c->wpe), free(c->want);
}

// Forward on device g for shape s; expect_steps: dispatches (wte chunks) the op must hold.
static void check_forward_(wgpt_gpu *g, emb_shape s, int expect_steps) {
    emb_fwd_case c;
    emb_fwd_inputs(s, &c);
    emb_fwd_prepare(g, s, &c);
    assert_int_equal(c.op.n, expect_steps);
    float *got = emb_fwd_run(g, s, &c);
    tu_assert_close("encoder_forward", got, c.want, (size_t)s.B * s.T * s.C, 0, 0);
    char msg[128];
    assert_int_equal(wgpt_input_status_check(g, (wgpt_view){c.status, 0, 0}, s.V, msg, sizeof msg), 0);
    emb_fwd_free(&c);
    free(got);
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

// Prepares the backward op for shape s on g (buffers for the gradients,
// dout and the bucket index).
void emb_bwd_prepare(wgpt_gpu *g, emb_shape s, emb_bwd_case *c) {
    uint32_t N = s.B * s.T;
    c->dwte = tu_upload(g, NULL, (uint64_t)s.Vp * s.C * 4, "dwte");
    c->dwpe = tu_upload(g, NULL, (uint64_t)s.maxT * s.C * 4, "dwpe");
    c->dout = tu_upload(g, NULL, (uint64_t)N * s.C * 4, "dout");
    c->bucket = tu_upload(g, NULL, wgpt_embedding_bucket_words(N) * 4, "bucket");
    wgpt_op_init(&c->op);
    TU_OK(g, wgpt_encoder_backward(g, &c->op, (wgpt_view){c->dwte, 0, 0}, (wgpt_view){c->dwpe, 0, 0},
                                   (wgpt_view){c->dout, 0, 0}, (wgpt_view){c->bucket, 0, 0}, s.B, s.T, s.C, s.Vp));
}

void emb_bwd_free(emb_bwd_case *c) {
    wgpt_op_free(&c->op);
    wgpt_buf_free(c->dwte), wgpt_buf_free(c->dwpe), wgpt_buf_free(c->dout), wgpt_buf_free(c->bucket);
}

// One step: fresh tokens, dout and starting gradients; runs the prepared op
// and compares with the reference. Returns the GPU dwte and dwpe (for
// determinism checks) through got_wte / got_wpe if not NULL.
void emb_bwd_step(wgpt_gpu *g, emb_shape s, emb_bwd_case *c, float **got_wte, float **got_wpe, uint64_t seed) {
    uint32_t N = s.B * s.T;
    size_t nwte = (size_t)s.Vp * s.C, nwpe = (size_t)s.maxT * s.C, nout = (size_t)N * s.C;
    tu_rng_state = seed;
    uint32_t *tok = malloc(N * sizeof *tok);
    int *itok = malloc(N * sizeof *itok);
    float *dwte = malloc(nwte * 4), *dwpe = malloc(nwpe * 4), *dout = malloc(nout * 4);
    emb_make_tokens(tok, itok, N, s.V);
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


// Forward or backward (v->arg) of shape (B, T, C, V, Vp, maxT); the wrapper
// must append one dispatch per wte chunk (and one for wpe in the backward).
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *sh) {
    const emb_shape s = {sh->d[0], sh->d[1], sh->d[2], sh->d[3], sh->d[4], sh->d[5]};
    uint64_t rows = wgpt_op_chunk_rows(g, s.Vp, s.C);
    int chunks = (int)((s.Vp + rows - 1) / rows);
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    if (!v->arg) {
        check_forward_(g, s, chunks);
        return;
    }
    emb_bwd_case c;
    emb_bwd_prepare(g, s, &c);
    assert_int_equal(c.op.n, chunks + 1);
    emb_bwd_step(g, s, &c, NULL, NULL, 11);
    emb_bwd_free(&c);
}

static const op_variant variants_[] = {
    {.name = "forward", .kernels = WGPT_KERNELS_AUTO},
    {.name = "backward-gpu", .kernels = WGPT_KERNELS_GPU, .arg = 1},
    {.name = "backward-cpu", .kernels = WGPT_KERNELS_CPU, .arg = 1},
};
#define FWD_ (1u << 0)
#define BWD_ (3u << 1)

// (B, T, C, V, Vp, maxT). B=2, T=37, C=48; wte (272, 48) = 52224 bytes on 16
// KiB bindings: chunks of 64 rows, 64,64,64,64,16; C = 50, not a multiple of
// 4 (CPU devices keep the WG-thread kernel, not the flat4 twin); C = 300,
// above one workgroup of channels (2 channel blocks per bucket); N *
// ceil(C / 256) = 66000 workgroups for the wte backward: the host's 2D
// fallback (65535, 2, 1).
static const op_shape shapes_[] = {
    {{2, 37, 48, 97, 128, 40}, 0, 0},
    {{2, 37, 48, 250, 272, 40}, 16 * 1024, 0},
    {{2, 37, 50, 97, 128, 40}, 0, BWD_},
    {{3, 20, 300, 50, 64, 20}, 0, BWD_},
    {{2, 33000, 8, 50, 64, 33000}, 0, BWD_},
};

const op_family op_embedding = {
    .name = "embedding",
    .wrappers = "wgpt_encoder_forward, wgpt_encoder_backward, wgpt_encoder_bucket_upload (model/embedding.h)",
    .reference = "ref_encoder_forward, ref_encoder_backward (tests/ref/layers.c)",
    .tolerance = "forward exact; backward 2 (k+1) 2^-24 sum|terms| per element (a reordered sum of k+1 terms)",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
