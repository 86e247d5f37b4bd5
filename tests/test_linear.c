// test_linear.c: the linear layer (kernels/03_linear.wgsl through
// src/model/linear.c) against tests/ref's matmul, forward and backward, at
// sizes that are multiples of no tile; the chunked path on a device whose
// binding limit is lowered to 96 KiB; the GPT-2 logits shape on the device's
// own limit; determinism; argument errors. Every case runs twice: with the
// tiled GPU kernels and with their flat CPU twins (model/variant.h), against
// the same reference and bound; plus the variant choice itself and the CPU
// twins' grid reaching every accepted size.
//
// Tolerance, per element: every output is a sum of K products (plus a bias or
// the previous gradient). Summed in f32 in any order, with or without fused
// multiply-adds, its error is at most about (K + 1) * u * S, where u = 2^-24
// and S = the sum of the absolute values of all the terms (Higham, gamma_K).
// The reference sums in double and rounds once: at most u * |result| <= u * S
// more. So |got - want| <= (K + 2) * u * S (+ 1e-30 for S = 0), with S
// computed per element in double here. This bound is rigorous, and still tight
// enough to catch a missing term or a wrong index (errors of order S / K).
// It holds for both twins: the tiled kernels sum k in tiles of 16, the flat
// ones in plain order.
#include "test_util.h"

#include <stdlib.h>

#include "model/linear.h"
#include "model/linear_split.h"
#include "model/variant.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;      // the default device
static wgpt_gpu *GS;     // the same adapter, bindings limited to SPLIT_BINDING bytes
#define SPLIT_BINDING (96u * 1024u)
#define PAD 64           // floats of sentinel before and after every tensor
static const float SENTINEL = -777.25f;

// G and GS opened with each twin (wgpt_gpu_options.kernels); the setups pick.
static wgpt_gpu *G_GPU, *G_CPU, *GS_GPU, *GS_CPU;
static wgpt_kernels KERNELS = WGPT_KERNELS_AUTO;  // the twin in force (AUTO: the device's choice)

static int group_setup(void **state) {
    (void)state;
    wgpt_gpu_options o = {.adapter_index = -1, .max_binding = SPLIT_BINDING};
    o.kernels = WGPT_KERNELS_GPU;
    GS_GPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_CPU;
    GS_CPU = tu_gpu_open(&o);
    o.max_binding = 0;
    G_CPU = tu_gpu_open(&o);
    o.kernels = WGPT_KERNELS_GPU;
    G_GPU = tu_gpu_open(&o);
    G = G_GPU, GS = GS_GPU;
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G_GPU), wgpt_gpu_close(G_CPU), wgpt_gpu_close(GS_GPU), wgpt_gpu_close(GS_CPU);
    return 0;
}

// Per-test setups: which twin the wrappers pick (see BOTH in main).
static const char *VARIANT = "";
static int use_gpu_kernels_(void **state) {
    (void)state;
    G = G_GPU, GS = GS_GPU, KERNELS = WGPT_KERNELS_GPU;
    VARIANT = "gpu kernels";
    return 0;
}
static int use_cpu_kernels_(void **state) {
    (void)state;
    G = G_CPU, GS = GS_CPU, KERNELS = WGPT_KERNELS_CPU;
    VARIANT = "cpu kernels";
    return 0;
}

// --- tensors on the GPU, framed by sentinels ------------------------------------
// The view starts PAD floats (256 bytes) into its buffer, so the wrapper's
// offsets are exercised; the sentinels around it must survive every call.
typedef struct dtensor {
    wgpt_buf *buf;
    size_t n;
    wgpt_view view;
} dtensor;

static dtensor dt_upload_(wgpt_gpu *g, const float *x, size_t n) {
    float *h = malloc((n + 2 * PAD) * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n + 2 * PAD; i++) h[i] = SENTINEL;
    memcpy(h + PAD, x, n * sizeof *h);
    dtensor t = {wgpt_buf_create(g, (n + 2 * PAD) * 4, "linear test"), n, {NULL, PAD * 4, n * 4}};
    TU_NONNULL(g, t.buf);
    t.view.buf = t.buf;
    TU_OK(g, wgpt_buf_upload(g, t.buf, 0, h, (n + 2 * PAD) * 4));
    free(h);
    return t;
}

// Downloads the tensor into out (n floats) and checks its frame.
static void dt_download_(wgpt_gpu *g, const dtensor *t, float *out) {
    float *h = malloc((t->n + 2 * PAD) * sizeof *h);
    assert_non_null(h);
    TU_OK(g, wgpt_buf_download(g, t->buf, 0, h, (t->n + 2 * PAD) * 4));
    for (size_t i = 0; i < PAD; i++)
        if (h[i] != SENTINEL || h[PAD + t->n + i] != SENTINEL) fail_msg("a write outside the tensor's view");
    memcpy(out, h + PAD, t->n * sizeof *out);
    free(h);
}

static void dt_free_(dtensor *t) { wgpt_buf_free(t->buf); }

static float *randv_(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    tu_fill(x, n, -1.0f, 1.0f);
    return x;
}
static float *copyv_(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    assert_non_null(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

// |got - want| <= (K + 2) * 2^-24 * S per element (see the top of the file).
static void check_bound_(const char *what, const float *got, const float *want, const double *S, size_t n, int K) {
    for (size_t i = 0; i < n; i++) {
        double tol = (K + 2) * 0x1p-24 * S[i] + 1e-30;
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol))
            fail_msg("%s: element %zu of %zu is %.9g, expected %.9g (|diff| %.3g > bound %.3g, K=%d)", what, i, n,
                     got[i], want[i], d, tol, K);
    }
}

// --- one linear layer: host inputs, reference results, GPU runs -----------------
typedef struct lcase {
    int N, C, OC, has_bias, accumulate;
    float *inp, *w, *b, *dout;          // inputs
    float *dinp0, *dw0, *db0;           // gradients before the backward
    float *out, *dinp, *dw, *db;        // reference results
    double *s_out, *s_dinp, *s_dw, *s_db;  // their magnitudes S
} lcase;

static void lcase_init_(lcase *c, int N, int C, int OC, int has_bias, int accumulate) {
    *c = (lcase){.N = N, .C = C, .OC = OC, .has_bias = has_bias, .accumulate = accumulate};
    size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
    c->inp = randv_(nc), c->w = randv_(oc), c->b = randv_(OC), c->dout = randv_(no);
    c->dinp0 = randv_(nc), c->dw0 = randv_(oc), c->db0 = randv_(OC);
    c->out = malloc(no * sizeof(float));
    ref_matmul_forward(c->out, c->inp, c->w, has_bias ? c->b : NULL, N, C, OC);
    // The reference accumulates into every gradient: start dinp from 0 for overwrite.
    c->dinp = accumulate ? copyv_(c->dinp0, nc) : calloc(nc, sizeof(float));
    c->dw = copyv_(c->dw0, oc), c->db = copyv_(c->db0, OC);
    ref_matmul_backward(c->dinp, c->dw, has_bias ? c->db : NULL, c->dout, c->inp, c->w, N, C, OC);

    c->s_out = calloc(no, sizeof(double)), c->s_dinp = calloc(nc, sizeof(double));
    c->s_dw = calloc(oc, sizeof(double)), c->s_db = calloc(OC, sizeof(double));
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double d = c->dout[(size_t)n * OC + o];
            double s = has_bias ? fabs(c->b[o]) : 0.0;
            for (int k = 0; k < C; k++) {
                double x = c->inp[(size_t)n * C + k], wv = c->w[(size_t)o * C + k];
                s += fabs(x * wv);
                c->s_dinp[(size_t)n * C + k] += fabs(d * wv);
                c->s_dw[(size_t)o * C + k] += fabs(d * x);
            }
            c->s_out[(size_t)n * OC + o] = s;
            c->s_db[o] += fabs(d);
        }
    for (size_t i = 0; i < nc; i++) c->s_dinp[i] += accumulate ? fabs(c->dinp0[i]) : 0.0;
    for (size_t i = 0; i < oc; i++) c->s_dw[i] += fabs(c->dw0[i]);
    for (int o = 0; o < OC; o++) c->s_db[o] += fabs(c->db0[o]);
}

static void lcase_free_(lcase *c) {
    float *f[] = {c->inp, c->w, c->b, c->dout, c->dinp0, c->dw0, c->db0, c->out, c->dinp, c->dw, c->db};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(c->s_out), free(c->s_dinp), free(c->s_dw), free(c->s_db);
}

// GPU results of one case; steps: dispatches appended by each wrapper.
typedef struct lresult {
    float *out, *dinp, *dw, *db;
    int fwd_steps, bwd_steps;
} lresult;

// scratch_bytes: the split-partials scratch handed to the wrappers (0: none,
// so the 64 x 64 tiled kernels serve).
static lresult run_gpu_(wgpt_gpu *g, const lcase *c, uint64_t scratch_bytes) {
    size_t nc = (size_t)c->N * c->C, oc = (size_t)c->OC * c->C, no = (size_t)c->N * c->OC;
    lresult r = {malloc(no * 4), malloc(nc * 4), malloc(oc * 4), malloc((size_t)c->OC * 4), 0, 0};
    float *zeros = calloc(no, sizeof(float));
    dtensor inp = dt_upload_(g, c->inp, nc), w = dt_upload_(g, c->w, oc), b = dt_upload_(g, c->b, c->OC);
    dtensor out = dt_upload_(g, zeros, no), dout = dt_upload_(g, c->dout, no);
    dtensor dinp = dt_upload_(g, c->dinp0, nc), dw = dt_upload_(g, c->dw0, oc), db = dt_upload_(g, c->db0, c->OC);
    wgpt_view none = {NULL, 0, 0};
    float *zs = calloc(scratch_bytes / 4 + 1, 4);
    dtensor scratch = {0};
    if (scratch_bytes) scratch = dt_upload_(g, zs, scratch_bytes / 4);

    wgpt_op fwd, bwd;
    wgpt_op_init(&fwd), wgpt_op_init(&bwd);
    TU_OK(g, wgpt_linear_forward(g, &fwd, out.view, inp.view, w.view, c->has_bias ? b.view : none, c->N, c->C,
                                 c->OC, scratch.view));
    TU_OK(g, wgpt_linear_backward(g, &bwd, dinp.view, dw.view, c->has_bias ? db.view : none, dout.view, inp.view,
                                  w.view, c->N, c->C, c->OC, c->accumulate, scratch.view));
    TU_OK(g, wgpt_op_record(g, &fwd));
    TU_OK(g, wgpt_op_record(g, &bwd));
    dt_download_(g, &out, r.out), dt_download_(g, &dinp, r.dinp), dt_download_(g, &dw, r.dw);
    dt_download_(g, &db, r.db);
    float *same = malloc(nc * 4);  // inputs must be left as they were
    dt_download_(g, &inp, same);
    assert_memory_equal(same, c->inp, nc * 4);
    free(same);
    r.fwd_steps = fwd.n, r.bwd_steps = bwd.n;
    wgpt_op_free(&fwd), wgpt_op_free(&bwd);
    if (scratch_bytes) {  // the scratch's frame is checked too
        dt_download_(g, &scratch, zs);
        dt_free_(&scratch);
    }
    dtensor *all[] = {&inp, &w, &b, &out, &dout, &dinp, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dt_free_(all[i]);
    free(zeros), free(zs);
    return r;
}

static void lresult_free_(lresult *r) { free(r->out), free(r->dinp), free(r->dw), free(r->db); }

static void check_case_(const char *dev, const lcase *c, const lresult *r) {
    char what[160];
#define WHAT(t) (snprintf(what, sizeof what, "%s, %s: %s N=%d C=%d OC=%d bias=%d acc=%d", dev, VARIANT, t, c->N, \
                          c->C, c->OC, c->has_bias, c->accumulate), what)
    size_t nc = (size_t)c->N * c->C, oc = (size_t)c->OC * c->C, no = (size_t)c->N * c->OC;
    check_bound_(WHAT("out"), r->out, c->out, c->s_out, no, c->C);
    check_bound_(WHAT("dinp"), r->dinp, c->dinp, c->s_dinp, nc, c->OC);
    check_bound_(WHAT("dweight"), r->dw, c->dw, c->s_dw, oc, c->N);
    if (c->has_bias) check_bound_(WHAT("dbias"), r->db, c->db, c->s_db, c->OC, c->N);
    else assert_memory_equal(r->db, c->db0, (size_t)c->OC * 4);  // untouched
#undef WHAT
}

static const int SHAPES[][3] = {{74, 48, 144}, {37, 97, 5}, {130, 200, 260}, {1, 1, 1}, {65, 17, 64}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

// Every shape, with and without bias, overwriting and accumulating dinp.
static void matches_reference_at_odd_sizes(void **st) {
    (void)st;
    for (size_t s = 0; s < NSHAPES; s++)
        for (int v = 0; v < 2; v++) {
            lcase c;
            lcase_init_(&c, SHAPES[s][0], SHAPES[s][1], SHAPES[s][2], v == 0, v == 1);
            lresult r = run_gpu_(G, &c, 0);
            check_case_("default device", &c, &r);
            if (r.fwd_steps != 1) fail_msg("forward split on the default device (%d dispatches)", r.fwd_steps);
            lresult_free_(&r), lcase_free_(&c);
        }
}

// With bindings limited to 96 KiB, (N=130, C=200, OC=260) splits N into
// 64-row chunks (64 * 260 * 4 = 66560 bytes fit, 128 rows do not: 3 chunks)
// and OC into 64-row chunks (96 KiB / 800 bytes = 122 rows -> 64: 5 chunks):
// forward 3 * 5 dispatches; backward 15 (dinp) + 15 (dweight) + 3 (dbias).
// (150, 97, 300): N chunks of 64 (3), OC chunks of 192 (2). (300, 48, 144):
// only N splits, in chunks of 128 (3).
static void matches_reference_when_split(void **st) {
    (void)st;
    static const int shapes[][5] = {
        // N, C, OC, forward dispatches, backward dispatches (with bias)
        {130, 200, 260, 15, 33},
        {150, 97, 300, 6, 15},
        {300, 48, 144, 3, 9},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 2; v++) {
            lcase c;
            lcase_init_(&c, shapes[s][0], shapes[s][1], shapes[s][2], 1, v);
            lresult r = run_gpu_(GS, &c, 0);
            check_case_("96 KiB bindings", &c, &r);
            if (r.fwd_steps != shapes[s][3] || r.bwd_steps != shapes[s][4])
                fail_msg("N=%d C=%d OC=%d: %d + %d dispatches, expected %d + %d", c.N, c.C, c.OC, r.fwd_steps,
                         r.bwd_steps, shapes[s][3], shapes[s][4]);
            lresult_free_(&r), lcase_free_(&c);
        }
}

// The same inputs twice: bit-identical results (no atomics, fixed orders),
// on the plain path and on the split one (dinp summed over weight chunks).
static void results_are_deterministic(void **st) {
    (void)st;
    wgpt_gpu *devs[2] = {G, GS};
    for (int d = 0; d < 2; d++) {
        lcase c;
        lcase_init_(&c, 130, 200, 260, 1, 0);
        lresult a = run_gpu_(devs[d], &c, 0), b = run_gpu_(devs[d], &c, 0);
        assert_memory_equal(a.out, b.out, (size_t)c.N * c.OC * 4);
        assert_memory_equal(a.dinp, b.dinp, (size_t)c.N * c.C * 4);
        assert_memory_equal(a.dw, b.dw, (size_t)c.OC * c.C * 4);
        assert_memory_equal(a.db, b.db, (size_t)c.OC * 4);
        lresult_free_(&a), lresult_free_(&b), lcase_free_(&c);
    }
}

// The GPT-2 124M logits: lnf (N, 768) @ wte (50304, 768)^T, wte 154 MB. On a
// device binding at most 128 MiB (lavapipe) wte is split in two at the real
// limit. Forward only: the backward's chunking is the forward's (same row
// counts), checked above at 96 KiB, and at this size each backward matmul
// costs lavapipe as much again (a 64-row tile for N = 3 rows).
static void gpt2_logits_shape(void **st) {
    (void)st;
    const int N = 3, C = 768, OC = 50304;
    size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
    float *x = randv_(nc), *w = randv_(oc), *want = malloc(no * 4), *got = malloc(no * 4);
    double *S = calloc(no, sizeof *S);
    ref_matmul_forward(want, x, w, NULL, N, C, OC);
    for (size_t n = 0; n < (size_t)N; n++)
        for (size_t o = 0; o < (size_t)OC; o++)
            for (size_t k = 0; k < (size_t)C; k++) S[n * OC + o] += fabs((double)x[n * C + k] * w[o * C + k]);
    dtensor dx = dt_upload_(G, x, nc), dw = dt_upload_(G, w, oc), dout = dt_upload_(G, want, no);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_buf_zero(G, dout.buf, PAD * 4, no * 4));
    TU_OK(G, wgpt_linear_forward(G, &op, dout.view, dx.view, dw.view, none, N, C, OC, none));
    TU_OK(G, wgpt_op_record(G, &op));
    dt_download_(G, &dout, got);
    check_bound_("logits", got, want, S, no, C);
    // Expected weight chunks: 64-row multiples within the binding limit (on
    // lavapipe's 128 MiB: 43648 + 6656 rows); N = 3 rows never split.
    uint64_t max = wgpt_gpu_get_info(G)->max_storage_binding, row = (uint64_t)C * 4;
    uint64_t rows = (uint64_t)OC * row <= max ? (uint64_t)OC : max / row / 64 * 64;
    int nsteps = (int)((OC + rows - 1) / rows);
    if (op.n != nsteps) fail_msg("logits: %d forward dispatches, expected %d", op.n, nsteps);
    wgpt_op_free(&op);
    dt_free_(&dx), dt_free_(&dw), dt_free_(&dout);
    free(x), free(w), free(want), free(got), free(S);
}

// Wrong arguments are refused with a message, before anything is appended.
static void bad_arguments_are_refused(void **st) {
    (void)st;
    float x[64] = {0};
    dtensor a = dt_upload_(G, x, 64), b = dt_upload_(G, x, 64), o = dt_upload_(G, x, 64);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    // out needs 8 * 16 floats, the view holds 64
    assert_int_equal(wgpt_linear_forward(G, &op, o.view, a.view, b.view, none, 8, 4, 16, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "out"));
    assert_int_equal(wgpt_linear_forward(G, &op, o.view, a.view, b.view, none, 0, 4, 4, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "> 0"));
    assert_int_equal(wgpt_linear_backward(G, &op, o.view, b.view, none, a.view, none, b.view, 4, 4, 4, 0, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(G), "inp has no buffer"));
    // 64 rows of 2000 floats (512000 bytes) exceed 96 KiB, and 100 rows must split
    wgpt_buf *big = wgpt_buf_create(GS, 100 * 2000 * 4, "too wide");
    TU_NONNULL(GS, big);
    wgpt_view whole = {big, 0, 0};
    assert_int_equal(wgpt_linear_forward(GS, &op, whole, whole, whole, none, 100, 2000, 1, none), -1);
    assert_non_null(strstr(wgpt_gpu_error(GS), "binding limit"));
    wgpt_buf_free(big);
    assert_int_equal(op.n, 0);
    wgpt_op_free(&op);
    dt_free_(&a), dt_free_(&b), dt_free_(&o);
}

// The choice of twin, per device: WGPT_KERNELS (read when the device is
// opened) overrides the device type, and wgpt_gpu_options.kernels overrides
// both. On lavapipe (type "CPU") auto picks the CPU twins.
// The split-k choice (linear_split.c): whatever it picks covers k exactly
// in whole stages and fits the scratch; outputs with enough tiles for every
// unit are not split; small outputs with a long k are; with no unit count,
// the target-workgroups rule; a forced count is obeyed within k / 8.
static void split_choice(void **st) {
    (void)st;
    const uint32_t units[] = {0, 8, 132, 1000};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        for (uint64_t m = 64; m <= 8192; m *= 4)
            for (uint64_t n = 64; n <= 8192; n *= 4)
                for (uint32_t k = 4; k <= 65536; k *= 8) {
                    wgpt_split sp = wgpt_split_pick(units[u], m, n, k, 1, UINT64_MAX, 0);
                    assert_true(sp.n >= 1 && sp.n <= 16);
                    assert_true((uint64_t)sp.n * sp.ks >= k && (uint64_t)(sp.n - 1) * sp.ks < k);
                    if (sp.n > 1) assert_int_equal(sp.ks % WGPT_V4_MK, 0);
                    if (sp.n > 1) assert_true(sp.ks >= 256);
                    uint64_t need = wgpt_split_bytes(units[u], m, n, k, 1, 0);
                    assert_true(sp.n > 1 ? need >= sp.n * m * n * 4 : need == 0);
                    wgpt_split small = wgpt_split_pick(units[u], m, n, k, 1, need / 2, 0);  // half the room
                    assert_true(small.n == 1 || (uint64_t)small.n * m * n * 4 + small.n * m * 4 <= need / 2);
                }
    // 4096 x 50304 logits (12,576 tiles) never split; 768 x 768 over k = 4096 (36 tiles) does.
    assert_int_equal(wgpt_split_pick(132, 4096, 50304, 768, 0, UINT64_MAX, 0).n, 1);
    assert_int_equal(wgpt_split_pick(0, 4096, 50304, 768, 0, UINT64_MAX, 0).n, 1);
    assert_true(wgpt_split_pick(132, 768, 768, 4096, 1, UINT64_MAX, 0).n > 1);
    assert_int_equal(wgpt_split_pick(0, 768, 768, 4096, 1, UINT64_MAX, 0).n, 15);  // 512 / 36 workgroups
    // forced
    assert_int_equal(wgpt_split_pick(132, 4096, 50304, 768, 0, UINT64_MAX, 3).n, 3);
    assert_int_equal(wgpt_split_pick(132, 64, 64, 16, 0, UINT64_MAX, 5).n, 2);  // k / 8
}

static void variant_choice(void **st) {
    (void)st;
    assert_int_equal(setenv("WGPT_KERNELS", "gpu", 1), 0);
    wgpt_gpu_options o = {.adapter_index = -1};
    wgpt_gpu *g = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);
    assert_int_equal(setenv("WGPT_KERNELS", "cpu", 1), 0);  // already read: no effect
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);
    o.kernels = WGPT_KERNELS_CPU;
    wgpt_gpu *gc = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(gc), 1);
    o.kernels = WGPT_KERNELS_GPU;
    wgpt_gpu *gg = tu_gpu_open(&o);
    assert_int_equal(wgpt_kernel_variant_cpu(gg), 0);
    unsetenv("WGPT_KERNELS");
    assert_int_equal(wgpt_kernel_variant_cpu(g), 0);  // two devices of one process differ, and stay as opened
    assert_int_equal(wgpt_kernel_variant_cpu(gc), 1);
    wgpt_gpu_close(g), wgpt_gpu_close(gc), wgpt_gpu_close(gg);
}

// The flat twins cover 32 rows a workgroup (FLAT_ROWS): their grid reaches
// 65535 * 32 = 2097120 rows, the most the wrapper accepts at all (65535 bias
// workgroups of 32 columns), so they serve every accepted N; the tiled kernels
// (64 rows a workgroup) stay the fallback in pick_. C = OC = 1: N = 2097120
// runs on a grid (1, 65535), 2097121 is refused.
static void cpu_twins_cover_every_accepted_n(void **st) {
    (void)st;
    int cpu = wgpt_kernel_variant_cpu(G);
    const int N = 2097120;
    // The forward's grid: (1, rows of workgroups). (Both kernels' results are
    // checked above; at this N, C = 1 the backward's reduction over N would
    // take lavapipe long.)
    wgpt_buf *x = wgpt_buf_create(G, (uint64_t)(N + 1) * 4, "x"), *y = wgpt_buf_create(G, (uint64_t)(N + 1) * 4, "y");
    wgpt_buf *w = wgpt_buf_create(G, 16, "w");
    TU_NONNULL(G, x);
    TU_NONNULL(G, y);
    TU_NONNULL(G, w);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_linear_forward(G, &op, (wgpt_view){y, 0, 0}, (wgpt_view){x, 0, 0}, (wgpt_view){w, 0, 0}, none,
                                 (uint32_t)N, 1, 1, none));
    assert_int_equal(op.n, 1);
    uint32_t want = cpu ? (uint32_t)(N + 31) / 32 : (uint32_t)(N + 63) / 64;
    if (op.steps[0].x != 1 || op.steps[0].y != want)
        fail_msg("%s N=%d: grid (%u, %u), expected (1, %u)", VARIANT, N, op.steps[0].x, op.steps[0].y, want);
    wgpt_op_free(&op);
    wgpt_op_init(&op);
    assert_int_equal(wgpt_linear_forward(G, &op, (wgpt_view){y, 0, 0}, (wgpt_view){x, 0, 0}, (wgpt_view){w, 0, 0},
                                         none, (uint32_t)N + 1, 1, 1, none),
                     -1);
    wgpt_op_free(&op);
    wgpt_buf_free(x), wgpt_buf_free(y), wgpt_buf_free(w);
}

// The vec4 kernels (03_linear_vec4.wgsl): taken with a scratch on the GPU
// variant when C and OC are multiples of 4. Rows any number; k not a multiple
// of the 8-wide stage; outputs smaller and larger than a 128 x 128 tile; and
// shapes whose sums over k are split (a partial per split in the scratch,
// then the in-order reduce): dispatch counts show which path ran.
//   {N, C, OC, forward dispatches, backward dispatches with bias}
//   (100, 64, 1024): bwd_input k = 1024 on 1 tile -> 4 splits (+1 reduce).
//   (600, 36, 20): bwd_weight k = 600 -> 2 splits (+ weight and bias reduces).
//   (37, 520, 8): forward k = 520 -> 2 splits (+ reduce, which adds the bias).
static void vec4_kernels_match_reference(void **st) {
    (void)st;
    static const int shapes[][5] = {
        {74, 48, 144, 1, 2}, {130, 200, 260, 1, 2}, {37, 20, 4, 1, 2}, {257, 132, 64, 1, 2},
        {100, 64, 1024, 1, 3}, {600, 36, 20, 1, 4}, {37, 520, 8, 2, 2},
    };
    int cpu = wgpt_kernel_variant_cpu(G);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            lcase c;
            int bias = v != 1, acc = v != 0;
            lcase_init_(&c, shapes[s][0], shapes[s][1], shapes[s][2], bias, acc);
            uint64_t bytes = wgpt_linear_scratch_bytes(G, (uint32_t)c.N, (uint32_t)c.C, (uint32_t)c.OC);
            lresult r = run_gpu_(G, &c, bytes);
            check_case_("default device, vec4", &c, &r);
            // the CPU twins ignore the scratch: one dispatch a pass, plus dbias
            int fwd = cpu ? 1 : shapes[s][3], bwd = cpu ? 2 + bias : shapes[s][4] - (!bias && shapes[s][4] == 4);
            if (r.fwd_steps != fwd || r.bwd_steps != bwd)
                fail_msg("%s N=%d C=%d OC=%d bias=%d: %d + %d dispatches, expected %d + %d", VARIANT, c.N, c.C, c.OC,
                         bias, r.fwd_steps, r.bwd_steps, fwd, bwd);
            lresult_free_(&r), lcase_free_(&c);
        }
    // Many parts (forced on a device of their own): the reduce's four-at-a-time loop and its tail.
    {
        wgpt_gpu_options o7 = {.adapter_index = -1, .kernels = KERNELS, .matmul_splits = 7};
        wgpt_gpu *g7 = tu_gpu_open(&o7);
        lcase c;
        lcase_init_(&c, 70, 40, 64, 1, 1);  // forward 5 parts (k 40), input 7 (k 64), weight 7 (k 70)
        lresult r = run_gpu_(g7, &c, wgpt_linear_scratch_bytes(g7, 70, 40, 64));
        check_case_("default device, vec4, 7 parts", &c, &r);
        if (!cpu && (r.fwd_steps != 2 || r.bwd_steps != 5))
            fail_msg("%s forced 7 parts: %d + %d dispatches, expected 2 + 5", VARIANT, r.fwd_steps, r.bwd_steps);
        lresult_free_(&r), lcase_free_(&c);
        wgpt_gpu_close(g7);
    }
    // Split or not, two runs agree bit for bit.
    lcase c;
    lcase_init_(&c, 600, 36, 20, 1, 1);
    uint64_t bytes = wgpt_linear_scratch_bytes(G, 600, 36, 20);
    lresult a = run_gpu_(G, &c, bytes), b = run_gpu_(G, &c, bytes);
    assert_memory_equal(a.dw, b.dw, (size_t)c.OC * c.C * 4);
    assert_memory_equal(a.db, b.db, (size_t)c.OC * 4);
    lresult_free_(&a), lresult_free_(&b), lcase_free_(&c);
}

// The flat8 twins (C and OC multiples of 4, subgroups of at least 8 lanes)
// sum the same products in the same order as the flat twins: the wrapper's
// results (flat8: its forward grid has ceil(N / 64) rows) equal, bit for bit,
// the flat kernels dispatched by hand on the same inputs, in every pass.
typedef struct tparams { uint32_t m, n, k, ld, off, flag, ks, split; } tparams;  // linear.c's linear_params

static uint32_t up_(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

static void flat8_equals_flat(void **st) {
    (void)st;
    if (KERNELS != WGPT_KERNELS_CPU || wgpt_gpu_get_info(G)->subgroup_min < 8) {
        printf("skipped: the flat8 twin is for CPU kernels on subgroups of 8 or more\n");
        skip();
    }
    static const int shapes[][5] = {{74, 48, 144, 1, 0}, {130, 200, 260, 0, 1}, {33, 12, 8, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        lcase c;
        lcase_init_(&c, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4]);
        lresult a = run_gpu_(G, &c, 0);
        uint32_t N = (uint32_t)c.N, C = (uint32_t)c.C, OC = (uint32_t)c.OC;
        size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
        float *zeros = calloc(no, sizeof(float));
        dtensor inp = dt_upload_(G, c.inp, nc), w = dt_upload_(G, c.w, oc), b = dt_upload_(G, c.b, OC);
        dtensor out = dt_upload_(G, zeros, no), dout = dt_upload_(G, c.dout, no);
        dtensor dinp = dt_upload_(G, c.dinp0, nc), dw = dt_upload_(G, c.dw0, oc);
        wgpt_op op;
        wgpt_op_init(&op);
        wgpt_view none = {NULL, 0, 0};
        TU_OK(G, wgpt_linear_forward(G, &op, out.view, inp.view, w.view, none, N, C, OC, none));
        if (op.n != 1 || op.steps[0].y != up_(N, 64))
            fail_msg("N=%u C=%u OC=%u: %d dispatches, %u rows of workgroups (flat8: %u)", N, C, OC, op.n,
                     op.steps[0].y, up_(N, 64));
        wgpt_op_free(&op);
        wgpt_op_init(&op);
        wgpt_view vf[4] = {inp.view, w.view, c.has_bias ? b.view : w.view, out.view};
        tparams pf = {N, OC, C, OC, 0, (uint32_t)c.has_bias, 0, 0};
        wgpt_view vi[3] = {dout.view, w.view, dinp.view};
        tparams pi = {N, C, OC, OC, 0, (uint32_t)c.accumulate, 0, 0};
        wgpt_view vw[3] = {dout.view, inp.view, dw.view};
        tparams pw = {OC, C, N, OC, 0, 0, 0, 0};
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_forward_flat", vf, 4, &pf, sizeof pf, up_(OC, 32), up_(N, 32), 1));
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_backward_input_flat", vi, 3, &pi, sizeof pi, up_(C, 32), up_(N, 32),
                                  1));
        TU_NONNULL(G, wgpt_op_add(G, &op, "matmul_backward_weight_flat", vw, 3, &pw, sizeof pw, up_(C, 32),
                                  up_(OC, 32), 1));
        TU_OK(G, wgpt_op_record(G, &op));
        float *ho = malloc(no * 4), *hi = malloc(nc * 4), *hw = malloc(oc * 4);
        dt_download_(G, &out, ho), dt_download_(G, &dinp, hi), dt_download_(G, &dw, hw);
        if (memcmp(ho, a.out, no * 4) || memcmp(hi, a.dinp, nc * 4) || memcmp(hw, a.dw, oc * 4))
            fail_msg("N=%u C=%u OC=%u: flat8 and flat differ (out %d, dinp %d, dweight %d)", N, C, OC,
                     memcmp(ho, a.out, no * 4) != 0, memcmp(hi, a.dinp, nc * 4) != 0, memcmp(hw, a.dw, oc * 4) != 0);
        free(ho), free(hi), free(hw), free(zeros);
        wgpt_op_free(&op);
        dtensor *all[] = {&inp, &w, &b, &out, &dout, &dinp, &dw};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dt_free_(all[i]);
        lresult_free_(&a), lcase_free_(&c);
    }
}

// wgpt_linear_reduce_parts (matmul_split_reduce) sums the partials in order
// of the part, bit for bit as C sums them one after the other, then adds the
// bias and the present value: for part counts from 1 to 64 (the bias
// gradients' parts), whole batches of the kernel's four loads and partial
// ones, values of mixed magnitude so that another order rounds differently
// (a kernel summing each batch apart first fails it).
static void reduce_parts_sums_in_order(void **st) {
    (void)st;
    static const uint32_t KS[] = {1, 2, 5, 16, 17, 40, 64};
    const uint32_t m = 3, n = 24;
    tu_rng_state = 41;
    for (size_t t = 0; t < sizeof KS / sizeof KS[0]; t++)
        for (int flag = 0; flag < 4; flag++) {
            uint32_t k = KS[t];
            size_t total = (size_t)m * n;
            float *part = malloc(k * total * 4), *bias = malloc(n * 4), *dst = malloc(total * 4);
            for (size_t i = 0; i < k * total; i++) part[i] = tu_randf(-1, 1) * powf(2.0f, tu_randf(-12, 12));
            tu_fill(bias, n, -1, 1), tu_fill(dst, total, -1, 1);
            wgpt_buf *bp = tu_upload_f32(G, part, k * total, "parts"), *bb = tu_upload_f32(G, bias, n, "bias");
            wgpt_buf *bd = tu_upload_f32(G, dst, total, "dst");
            wgpt_op op;
            wgpt_op_init(&op);
            wgpt_view none = {0};
            TU_OK(G, wgpt_linear_reduce_parts(G, &op, (wgpt_view){bp, 0, 0}, flag & 2 ? (wgpt_view){bb, 0, 0} : none,
                                              (wgpt_view){bd, 0, 0}, m, n, k, flag & 1));
            TU_OK(G, wgpt_op_record(G, &op));
            wgpt_op_free(&op);
            float *got = tu_download_f32(G, bd, total);
            for (size_t i = 0; i < total; i++) {
                float sum = part[i];
                for (uint32_t z = 1; z < k; z++) sum += part[z * total + i];
                if (flag & 2) sum += bias[i % n];
                if (flag & 1) sum += dst[i];
                if (memcmp(&sum, &got[i], 4) != 0)
                    fail_msg("%u parts (flag %d): element %zu is %.9g, in order %.9g", k, flag, i, got[i], sum);
            }
            wgpt_buf_free(bp), wgpt_buf_free(bb), wgpt_buf_free(bd);
            free(part), free(bias), free(dst), free(got);
        }
}

// Each test twice: with the tiled GPU kernels, then with their CPU twins.
#define BOTH(f) {#f " [gpu kernels]", f, use_gpu_kernels_, NULL, NULL}, {#f " [cpu kernels]", f, use_cpu_kernels_, NULL, NULL}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_choice),
        cmocka_unit_test(variant_choice),
        BOTH(matches_reference_at_odd_sizes),
        BOTH(vec4_kernels_match_reference),
        BOTH(matches_reference_when_split),
        BOTH(reduce_parts_sums_in_order),
        BOTH(results_are_deterministic),
        BOTH(gpt2_logits_shape),
        BOTH(bad_arguments_are_refused),
        BOTH(cpu_twins_cover_every_accepted_n),
        BOTH(flat8_equals_flat),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
