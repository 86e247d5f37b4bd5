// decode.c: the decode family of the op registry (tests/ops/ops.h): the
// KV-cache decoder's kernels (kernels/09_decode.wgsl,
// 09_decode_attention.wgsl through src/model/decode_kernels.c) against the
// plain C reference (tests/ref/decode.c, double).
//
// Shapes: decode_matvec with rows 1 (the _r1 variant), 3, 8 and 11 (two row
// blocks, the second partial), k = 40 and 136 (a lane's last vec4 ragged
// across the 32 lanes) and 1000 (the main loop's four vec4s a lane, some
// lanes twice, then the ragged rest), n = 37 (a partial block of 8 outputs), with and
// without bias, f32 and f16 weights, the GELU epilogue, the live-rows flag
// (rows past meta[0] must keep what they held), and weights past a 16 KiB
// binding (pieces of rows). decode_residual_layernorm: C = 768 and 20, with
// and without the residual, an idle row. decode_attention: head sizes 16 and 128
// (2 output channels a thread), positions 0, 100, 256 and 299 of a cache of
// T = 300 (one and two chunks of 256 scores), rows of several slots, f32 and
// f16 caches, an idle row that must stay untouched; and with each row storing
// its own key and value first (write_kv, one row a slot). decode_kv_write:
// only the rows' (slot, position) entries change.
//
// Tolerance. Every GPU value is an f32 sum of K terms in another order than
// the double reference: matvec K = k <= 1000 products of values in [-1, 1];
// attention K = hs for a score and K = pos + 1 <= 300 for the softmax sums
// and out = P @ V. A reordered f32 sum errs by about K * 2^-24 * sum|terms|,
// at most 2e-5 of the result's scale here, so we allow 3e-5 * max|expected|
// + 3e-5 * |expected|; for k = 1000 the bound is looser (1000 terms) but the
// errors of a long f32 sum add like a random walk, about sqrt(k) 2^-24 times
// its partial sums (~1e-5 of the scale here). An f16 operand is rounded the
// same way on both sides (the reference reads the very halves the kernel
// reads), so f16 needs no more. A wrong index, a missed chunk or the scale left out moves values by
// far more (1e-2 and up).
#include "model/decode_kernels.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

static wgpt_gpu *G_;  // the device of the case in hand

static float max_abs_(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

static void close_(const char *what, const float *got, const float *want, size_t n) {
    tu_assert_close(what, got, want, n, 3e-5f * max_abs_(want, n), 3e-5f);
}

// halves of x (n even) packed in pairs as the f16 kernels read them; x is rounded in place.
static uint32_t *pack16_(float *x, size_t n) {
    uint32_t *u = calloc(n / 2 + 1, sizeof *u);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = ref_f16_from_f32(x[i]);
        x[i] = ref_f32_from_f16(h);
        u[i / 2] |= (uint32_t)h << (16 * (i % 2));
    }
    return u;
}

static wgpt_buf *meta_(uint32_t n, const uint32_t *tok, const uint32_t *slot, const uint32_t *pos, uint32_t R) {
    uint32_t *m = calloc(WGPT_DECODE_META_U32 + 4 * R, 4);
    m[0] = n;
    for (uint32_t r = 0; r < R; r++) {
        m[4 + 4 * r] = tok ? tok[r] : 0;
        m[5 + 4 * r] = slot ? slot[r] : 0;
        m[6 + 4 * r] = pos ? pos[r] : 0;
    }
    wgpt_buf *b = tu_upload(G_, m, (WGPT_DECODE_META_U32 + 4 * R) * 4, "meta");
    free(m);
    return b;
}

static void run_(wgpt_op *op) {
    TU_OK(G_, wgpt_op_record(G_, op));
    TU_OK(G_, wgpt_gpu_finish(G_));
    wgpt_op_free(op);
}

static void matvec_case_(uint32_t rows, uint32_t k, uint32_t n, int with_bias, int f16, int live, int gelu) {
    float *x = malloc(rows * k * 4), *w = malloc(n * k * 4), *b = malloc(n * 4);
    float *got = malloc(rows * n * 4), *want = malloc(rows * n * 4);
    tu_fill(x, rows * k, -1, 1), tu_fill(w, n * k, -1, 1), tu_fill(b, n, -1, 1);
    uint32_t *w16 = f16 ? pack16_(w, (size_t)n * k) : NULL;
    uint32_t nlive = live ? rows - 1 : rows;
    if (nlive == 0) nlive = rows;
    ref_decode_matvec(want, x, w, with_bias ? b : NULL, (int)nlive, (int)k, (int)n, f16);
    if (gelu) ref_gelu_forward(want, want, (size_t)nlive * n);
    for (uint32_t i = nlive * n; i < rows * n; i++) want[i] = 12345.0f;  // untouched
    for (uint32_t i = 0; i < rows * n; i++) got[i] = 12345.0f;
    wgpt_buf *bx = tu_upload(G_, x, rows * k * 4, "x"), *bb = tu_upload(G_, b, n * 4, "b");
    wgpt_buf *bw = f16 ? tu_upload(G_, w16, (n * k / 2 + 1) * 4, "w16") : tu_upload(G_, w, n * k * 4, "w");
    wgpt_buf *bo = tu_upload(G_, got, rows * n * 4, "out"), *bm = meta_(nlive, NULL, NULL, NULL, rows);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view none = {NULL, 0, 0}, vb = {bb, 0, 0};
    TU_OK(G_, wgpt_decode_matvec(G_, &op, (wgpt_view){bo, 0, 0}, (wgpt_view){bx, 0, 0}, (wgpt_view){bw, 0, 0},
                                with_bias ? vb : none, (wgpt_view){bm, 0, 0}, rows, k, n, live, f16, gelu));
    run_(&op);
    TU_OK(G_, wgpt_buf_download(G_, bo, 0, got, rows * n * 4));
    char what[96];
    snprintf(what, sizeof what, "matvec rows %u k %u n %u bias %d f16 %d live %d gelu %d", rows, k, n, with_bias, f16,
             live, gelu);
    close_(what, got, want, (size_t)rows * n);
    wgpt_buf *bufs[] = {bx, bb, bw, bo, bm};
    for (int i = 0; i < 5; i++) wgpt_buf_free(bufs[i]);
    free(x), free(w), free(b), free(got), free(want), free(w16);
}

// Caches of S slots x T positions, rows attending at (slot, pos); row R-1
// idle. fused: each live row (one a slot) stores its own key and value first
// (write_kv): the caches must then hold them, exactly, and the attention read them.
static void attention_case_(uint32_t C, uint32_t NH, int f16, int fused) {
    enum { S = 4, T = 300, R = 5 };
    const uint32_t slots[2][R] = {{0, 2, 1, 2, 0}, {0, 2, 1, 3, 0}}, pos[R] = {0, 299, 256, 100, 7};
    const uint32_t *slot = slots[fused];
    int islot[R], ipos[R];
    for (int r = 0; r < R; r++) islot[r] = (int)slot[r], ipos[r] = (int)pos[r];
    size_t cn = (size_t)S * T * C;
    float *kc = malloc(cn * 4), *vc = malloc(cn * 4), *qkv = malloc(R * 3 * C * 4);
    float *got = malloc(R * C * 4), *want = malloc(R * C * 4), *cache = malloc(cn * 4);
    tu_fill(kc, cn, -1, 1), tu_fill(vc, cn, -1, 1), tu_fill(qkv, R * 3 * C, -1, 1);
    uint32_t *k16 = f16 ? pack16_(kc, cn) : NULL, *v16 = f16 ? pack16_(vc, cn) : NULL;
    wgpt_buf *bk = f16 ? tu_upload(G_, k16, (cn / 2 + 1) * 4, "k16") : tu_upload(G_, kc, cn * 4, "k");
    wgpt_buf *bv = f16 ? tu_upload(G_, v16, (cn / 2 + 1) * 4, "v16") : tu_upload(G_, vc, cn * 4, "v");
    for (uint32_t r = 0; fused && r < R - 1; r++)  // what the rows store (rounded to f16 where the caches are)
        for (uint32_t c = 0; c < C; c++) {
            float k = qkv[r * 3 * C + C + c], v = qkv[r * 3 * C + 2 * C + c];
            size_t e = ((size_t)slot[r] * T + pos[r]) * C + c;
            kc[e] = f16 ? ref_f32_from_f16(ref_f16_from_f32(k)) : k;
            vc[e] = f16 ? ref_f32_from_f16(ref_f16_from_f32(v)) : v;
        }
    ref_decode_attention(want, qkv, kc, vc, islot, ipos, R - 1, (int)C, (int)NH, T);
    for (uint32_t i = 0; i < C; i++) want[(R - 1) * C + i] = got[(R - 1) * C + i] = -7.0f;
    wgpt_buf *bq = tu_upload(G_, qkv, R * 3 * C * 4, "qkv"), *bo = tu_upload(G_, got, R * C * 4, "out");
    wgpt_buf *bm = meta_(R - 1, NULL, slot, pos, R);
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G_, wgpt_decode_attention(G_, &op, (wgpt_view){bo, 0, 0}, (wgpt_view){bq, 0, 0}, (wgpt_view){bk, 0, 0},
                                   (wgpt_view){bv, 0, 0}, (wgpt_view){bm, 0, 0}, R, C, NH, T, f16, fused));
    run_(&op);
    TU_OK(G_, wgpt_buf_download(G_, bo, 0, got, R * C * 4));
    char what[80];
    snprintf(what, sizeof what, "decode attention C %u NH %u f16 %d fused %d", C, NH, f16, fused);
    close_(what, got, want, (size_t)R * C);
    for (int which = 0; fused && which < 2; which++) {
        if (f16) {
            uint32_t *u = calloc(cn / 2 + 1, 4);
            TU_OK(G_, wgpt_buf_download(G_, which ? bv : bk, 0, u, cn * 2));
            for (size_t i = 0; i < cn; i++) cache[i] = ref_f32_from_f16((uint16_t)(u[i / 2] >> (16 * (i % 2))));
            free(u);
        } else {
            TU_OK(G_, wgpt_buf_download(G_, which ? bv : bk, 0, cache, cn * 4));
        }
        tu_assert_close(which ? "attention's stored v" : "attention's stored k", cache, which ? vc : kc, cn, 0, 0);
    }
    wgpt_buf *bufs[] = {bk, bv, bq, bo, bm};
    for (int i = 0; i < 5; i++) wgpt_buf_free(bufs[i]);
    free(kc), free(vc), free(qkv), free(got), free(want), free(k16), free(v16), free(cache);
}

// kv_write: rows' k and v land at (slot, pos); every other entry stays.
static void kv_write_case_(int f16) {
    enum { S = 2, T = 9, C = 24, R = 4 };
    const uint32_t slot[R] = {1, 0, 1, 0}, pos[R] = {8, 0, 3, 5};
    {
        size_t cn = (size_t)S * T * C;
        float kc[S * T * C], vc[S * T * C], qkv[R * 3 * C], got[S * T * C];
        tu_fill(kc, cn, -1, 1), tu_fill(vc, cn, -1, 1), tu_fill(qkv, R * 3 * C, -1, 1);
        uint32_t *k16 = f16 ? pack16_(kc, cn) : NULL, *v16 = f16 ? pack16_(vc, cn) : NULL;
        wgpt_buf *bk = f16 ? tu_upload(G_, k16, cn * 2, "k16") : tu_upload(G_, kc, cn * 4, "k");
        wgpt_buf *bv = f16 ? tu_upload(G_, v16, cn * 2, "v16") : tu_upload(G_, vc, cn * 4, "v");
        wgpt_buf *bq = tu_upload(G_, qkv, sizeof qkv, "qkv"), *bm = meta_(R - 1, NULL, slot, pos, R);
        wgpt_op op;
        wgpt_op_init(&op);
        TU_OK(G_, wgpt_decode_kv_write(G_, &op, (wgpt_view){bk, 0, 0}, (wgpt_view){bv, 0, 0}, (wgpt_view){bq, 0, 0},
                                      (wgpt_view){bm, 0, 0}, R, C, T, f16));
        run_(&op);
        for (int which = 0; which < 2; which++) {
            float *want = which ? vc : kc;
            for (uint32_t r = 0; r < R - 1; r++)  // row R-1 is idle
                for (uint32_t c = 0; c < C; c++) {
                    float v = qkv[r * 3 * C + (which + 1) * C + c];
                    want[((size_t)slot[r] * T + pos[r]) * C + c] = f16 ? ref_f32_from_f16(ref_f16_from_f32(v)) : v;
                }
            if (f16) {
                uint32_t u[S * T * C / 2];
                TU_OK(G_, wgpt_buf_download(G_, which ? bv : bk, 0, u, cn * 2));
                for (size_t i = 0; i < cn; i++) got[i] = ref_f32_from_f16((uint16_t)(u[i / 2] >> (16 * (i % 2))));
            } else {
                TU_OK(G_, wgpt_buf_download(G_, which ? bv : bk, 0, got, cn * 4));
            }
            tu_assert_close(which ? "kv_write v" : "kv_write k", got, want, cn, 0, 0);
        }
        wgpt_buf *bufs[] = {bk, bv, bq, bm};
        for (int i = 0; i < 4; i++) wgpt_buf_free(bufs[i]);
        free(k16), free(v16);
    }
}

// embed: wte[token] + wpe[pos] on live rows, 0 on idle ones; take_row: the last live row;
// on SMALL wte comes in pieces of 64 rows, one dispatch each.
static void embed_case_(void) {
    enum { R = 4, C = 64, V = 200, T = 6 };  // wte: 51 KiB, past SMALL's bindings (pieces of 64 rows)
    const uint32_t tok[R] = {199, 0, 70, 3}, pos[R] = {5, 1, 0, 2};
    static float wte[V * C], wpe[T * C], want[R * C], got[R * C], last[C];
    tu_fill(wte, V * C, -1, 1), tu_fill(wpe, T * C, -1, 1);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) want[r * C + c] = r < R - 1 ? wte[tok[r] * C + c] + wpe[pos[r] * C + c] : 0.0f;
    for (int i = 0; i < R * C; i++) got[i] = 9.0f;  // the idle row must become 0
    wgpt_buf *bx = tu_upload(G_, got, sizeof got, "x"), *be = tu_upload(G_, wte, sizeof wte, "wte");
    wgpt_buf *bp = tu_upload(G_, wpe, sizeof wpe, "wpe"), *bl = tu_upload(G_, NULL, sizeof last, "last");
    wgpt_buf *bm = meta_(R - 1, tok, NULL, pos, R);
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G_, wgpt_decode_embed(G_, &op, (wgpt_view){bx, 0, 0}, (wgpt_view){be, 0, 0}, (wgpt_view){bp, 0, 0},
                               (wgpt_view){bm, 0, 0}, R, C, T, V));
    TU_OK(G_, wgpt_decode_take_row(G_, &op, (wgpt_view){bl, 0, 0}, (wgpt_view){bx, 0, 0}, (wgpt_view){bm, 0, 0}, R, C));
    run_(&op);
    TU_OK(G_, wgpt_buf_download(G_, bx, 0, got, sizeof got));
    TU_OK(G_, wgpt_buf_download(G_, bl, 0, last, sizeof last));
    tu_assert_close("decode_embed", got, want, R * C, 0, 0);
    tu_assert_close("decode_take_row", last, want + (R - 2) * C, C, 0, 0);
    wgpt_buf *bufs[] = {bx, be, bp, bl, bm};
    for (int i = 0; i < 5; i++) wgpt_buf_free(bufs[i]);
}

// residual_layernorm: res = a + b and LayerNorm(res) on live rows (C 768: 3 channels
// a thread; C 20: most threads idle); without b LayerNorm(a), res untouched.
static void ln_case_(uint32_t C, int with_b) {
    enum { R = 3 };
    size_t n = (size_t)R * C;
    float *a = malloc(n * 4), *b = malloc(n * 4), *w = malloc(C * 4), *bias = malloc(C * 4);
    float *res = malloc(n * 4), *out = malloc(n * 4), *want_res = malloc(n * 4), *want = malloc(n * 4);
    float mean[R], rstd[R];
    tu_fill(a, n, -2, 2), tu_fill(b, n, -1, 1), tu_fill(w, C, 0.5f, 1.5f), tu_fill(bias, C, -0.5f, 0.5f);
    if (with_b) ref_residual_forward(want_res, a, b, n);
    else memcpy(want_res, a, n * 4);
    ref_layernorm_forward(want, mean, rstd, want_res, w, bias, R - 1, (int)C);
    for (size_t i = (size_t)(R - 1) * C; i < n; i++) want[i] = 5.0f;  // row R-1 idle
    for (size_t i = 0; i < n; i++) out[i] = res[i] = 5.0f;
    if (!with_b)
        for (size_t i = 0; i < n; i++) want_res[i] = 5.0f;
    else
        for (size_t i = (size_t)(R - 1) * C; i < n; i++) want_res[i] = 5.0f;
    wgpt_buf *ba = tu_upload(G_, a, n * 4, "a"), *bb = tu_upload(G_, b, n * 4, "b"), *bw = tu_upload(G_, w, C * 4, "w");
    wgpt_buf *bbi = tu_upload(G_, bias, C * 4, "bias"), *br = tu_upload(G_, res, n * 4, "res");
    wgpt_buf *bo = tu_upload(G_, out, n * 4, "out"), *bm = meta_(R - 1, NULL, NULL, NULL, R);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view none = {NULL, 0, 0};
    TU_OK(G_, wgpt_decode_residual_layernorm(G_, &op, (wgpt_view){br, 0, 0}, (wgpt_view){bo, 0, 0}, (wgpt_view){ba, 0, 0},
                                            with_b ? (wgpt_view){bb, 0, 0} : none, (wgpt_view){bw, 0, 0},
                                            (wgpt_view){bbi, 0, 0}, (wgpt_view){bm, 0, 0}, R, C));
    run_(&op);
    TU_OK(G_, wgpt_buf_download(G_, bo, 0, out, n * 4));
    TU_OK(G_, wgpt_buf_download(G_, br, 0, res, n * 4));
    tu_assert_close("residual_layernorm res", res, want_res, n, 0, 0);
    close_("residual_layernorm out", out, want, n);
    wgpt_buf *bufs[] = {ba, bb, bw, bbi, br, bo, bm};
    for (int i = 0; i < 7; i++) wgpt_buf_free(bufs[i]);
    free(a), free(b), free(w), free(bias), free(res), free(out), free(want_res), free(want);
}

enum { MATVEC, ATTENTION, KV_WRITE, EMBED, RESIDUAL_LN };

// The kind of case is the variant's arg / 2, f16 its arg % 2.
//   matvec: (rows, k, n, bias, live rows flag, GELU)
//   attention: (C, NH, rows store their own key and value)
//   residual_layernorm: (C, with b)
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    G_ = g;
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    int f16 = v->arg % 2;
    const uint32_t *d = s->d;
    switch (v->arg / 2) {
    case MATVEC: matvec_case_(d[0], d[1], d[2], (int)d[3], f16, (int)d[4], (int)d[5]); break;
    case ATTENTION: attention_case_(d[0], d[1], f16, (int)d[2]); break;
    case KV_WRITE: kv_write_case_(f16); break;
    case EMBED: embed_case_(); break;
    default: ln_case_(d[0], (int)d[1]); break;
    }
}

static const op_variant variants_[] = {
    {.name = "matvec", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * MATVEC},
    {.name = "matvec-f16", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * MATVEC + 1},
    {.name = "attention", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * ATTENTION},
    {.name = "attention-f16", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * ATTENTION + 1},
    {.name = "kv-write", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * KV_WRITE},
    {.name = "kv-write-f16", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * KV_WRITE + 1},
    {.name = "embed-take-row", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * EMBED},
    {.name = "residual-layernorm", .kernels = WGPT_KERNELS_AUTO, .arg = 2 * RESIDUAL_LN},
};
#define MV_ (3u << 0)
#define ATT_ (3u << 2)
#define KV_ (3u << 4)
#define EMB_ (1u << 6)
#define LN_ (1u << 7)

// See the top for what each shape is for; 16 KiB bindings: weights (matvec:
// 200 outputs of 160 bytes a row, 80 in f16; embed: wte of 51 KiB) taken in
// pieces of 64 rows.
static const op_shape shapes_[] = {
    {{1, 40, 37, 1, 0, 0}, 0, MV_},
    {{1, 136, 37, 0, 0, 0}, 0, MV_},
    {{3, 40, 37, 1, 0, 0}, 0, MV_},
    {{3, 136, 37, 0, 0, 0}, 0, MV_},
    {{3, 40, 37, 1, 1, 1}, 0, MV_},
    {{8, 40, 37, 1, 0, 0}, 0, MV_},
    {{8, 136, 37, 0, 0, 1}, 0, MV_},
    {{8, 40, 37, 1, 1, 0}, 0, MV_},
    {{11, 40, 37, 1, 0, 0}, 0, MV_},
    {{11, 136, 37, 0, 0, 0}, 0, MV_},
    {{11, 40, 37, 1, 1, 0}, 0, MV_},
    {{1, 1000, 37, 1, 0, 0}, 0, MV_},
    {{3, 1000, 37, 1, 0, 1}, 0, MV_},
    {{3, 40, 200, 1, 0, 0}, 16384, MV_},
    {{1, 40, 200, 0, 0, 1}, 16384, MV_},
    {{48, 3, 0}, 0, ATT_},
    {{256, 2, 0}, 0, ATT_},
    {{48, 3, 1}, 0, ATT_},
    {{256, 2, 1}, 0, ATT_},
    {{2, 9, 24, 4}, 0, KV_},
    {{4, 64, 200, 6}, 0, EMB_},
    {{4, 64, 200, 6}, 16384, EMB_},
    {{768, 1}, 0, LN_},
    {{20, 1}, 0, LN_},
    {{768, 0}, 0, LN_},
};

const op_family op_decode = {
    .name = "decode",
    .wrappers = "wgpt_decode_matvec, _attention, _kv_write, _embed, _take_row, _residual_layernorm "
                "(model/decode_kernels.h)",
    .reference = "ref_decode_matvec, ref_decode_attention (tests/ref/decode.c), ref_layernorm_forward, ref_gelu_forward",
    .tolerance = "3e-5 x max|expected| + 3e-5 x |expected| (sums of K <= 300 terms reordered); copies exact",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
