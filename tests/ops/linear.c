// linear.c: the fp32 linear family of the op registry (tests/ops/ops.h): the
// linear layer (kernels/03_linear.wgsl, 03_linear_vec4.wgsl through
// src/model/linear.h) against tests/ref's matmul, forward and backward, at
// sizes that are multiples of no tile, with and without bias, dinp
// overwritten and accumulated; every tensor framed by sentinels 256 bytes
// into its buffer. Variants: the tiled GPU kernels and their flat CPU twins
// (model/variant.h) without a scratch; with the split-k scratch (the vec4
// kernels on the GPU, splitting the sum over k where the output has few
// tiles; the CPU twins ignore it); forced to 7 parts. Shapes on a device
// whose binding limit is lowered to 96 KiB take the chunked path; the GPT-2
// logits shape the device's own limit. Dispatch counts show which path ran.
// tests/test_linear.c keeps the special cases on these helpers.
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
#include "ops/linear.h"

#include "model/linear.h"
#include "model/variant.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

#define PAD 64  // floats of sentinel before and after every tensor
static const float SENTINEL = -777.25f;

// --- tensors on the GPU, framed by sentinels ------------------------------------
// The view starts PAD floats (256 bytes) into its buffer, so the wrapper's
// offsets are exercised; the sentinels around it must survive every call.
lin_tensor lin_upload(wgpt_gpu *g, const float *x, size_t n) {
    float *h = malloc((n + 2 * PAD) * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n + 2 * PAD; i++) h[i] = SENTINEL;
    memcpy(h + PAD, x, n * sizeof *h);
    lin_tensor t = {wgpt_buf_create(g, (n + 2 * PAD) * 4, "linear test"), n, {NULL, PAD * 4, n * 4}};
    TU_NONNULL(g, t.buf);
    t.view.buf = t.buf;
    TU_OK(g, wgpt_buf_upload(g, t.buf, 0, h, (n + 2 * PAD) * 4));
    free(h);
    return t;
}

// Downloads the tensor into out (n floats) and checks its frame.
void lin_download(wgpt_gpu *g, const lin_tensor *t, float *out) {
    float *h = malloc((t->n + 2 * PAD) * sizeof *h);
    assert_non_null(h);
    TU_OK(g, wgpt_buf_download(g, t->buf, 0, h, (t->n + 2 * PAD) * 4));
    for (size_t i = 0; i < PAD; i++)
        if (h[i] != SENTINEL || h[PAD + t->n + i] != SENTINEL) fail_msg("a write outside the tensor's view");
    memcpy(out, h + PAD, t->n * sizeof *out);
    free(h);
}

void lin_tensor_free(lin_tensor *t) { wgpt_buf_free(t->buf); }

float *lin_randv(size_t n) {
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
void lin_check_bound(const char *what, const float *got, const float *want, const double *S, size_t n, int K) {
    for (size_t i = 0; i < n; i++) {
        double tol = (K + 2) * 0x1p-24 * S[i] + 1e-30;
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol))
            fail_msg("%s: element %zu of %zu is %.9g, expected %.9g (|diff| %.3g > bound %.3g, K=%d)", what, i, n,
                     got[i], want[i], d, tol, K);
    }
}

void lin_case_init(lin_case *c, int N, int C, int OC, int has_bias, int accumulate) {
    *c = (lin_case){.N = N, .C = C, .OC = OC, .has_bias = has_bias, .accumulate = accumulate};
    size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
    c->inp = lin_randv(nc), c->w = lin_randv(oc), c->b = lin_randv(OC), c->dout = lin_randv(no);
    c->dinp0 = lin_randv(nc), c->dw0 = lin_randv(oc), c->db0 = lin_randv(OC);
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

void lin_case_free(lin_case *c) {
    float *f[] = {c->inp, c->w, c->b, c->dout, c->dinp0, c->dw0, c->db0, c->out, c->dinp, c->dw, c->db};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(c->s_out), free(c->s_dinp), free(c->s_dw), free(c->s_db);
}

// scratch_bytes: the split-partials scratch handed to the wrappers (0: none,
// so the 64 x 64 tiled kernels serve).
lin_result lin_run(wgpt_gpu *g, const lin_case *c, uint64_t scratch_bytes) {
    size_t nc = (size_t)c->N * c->C, oc = (size_t)c->OC * c->C, no = (size_t)c->N * c->OC;
    lin_result r = {malloc(no * 4), malloc(nc * 4), malloc(oc * 4), malloc((size_t)c->OC * 4), 0, 0};
    float *zeros = calloc(no, sizeof(float));
    lin_tensor inp = lin_upload(g, c->inp, nc), w = lin_upload(g, c->w, oc), b = lin_upload(g, c->b, c->OC);
    lin_tensor out = lin_upload(g, zeros, no), dout = lin_upload(g, c->dout, no);
    lin_tensor dinp = lin_upload(g, c->dinp0, nc), dw = lin_upload(g, c->dw0, oc), db = lin_upload(g, c->db0, c->OC);
    wgpt_view none = {NULL, 0, 0};
    float *zs = calloc(scratch_bytes / 4 + 1, 4);
    lin_tensor scratch = {0};
    if (scratch_bytes) scratch = lin_upload(g, zs, scratch_bytes / 4);

    wgpt_op fwd, bwd;
    wgpt_op_init(&fwd), wgpt_op_init(&bwd);
    TU_OK(g, wgpt_linear_forward(g, &fwd, out.view, inp.view, w.view, c->has_bias ? b.view : none, c->N, c->C,
                                 c->OC, scratch.view));
    TU_OK(g, wgpt_linear_backward(g, &bwd, dinp.view, dw.view, c->has_bias ? db.view : none, dout.view, inp.view,
                                  w.view, c->N, c->C, c->OC, c->accumulate, scratch.view));
    TU_OK(g, wgpt_op_record(g, &fwd));
    TU_OK(g, wgpt_op_record(g, &bwd));
    lin_download(g, &out, r.out), lin_download(g, &dinp, r.dinp), lin_download(g, &dw, r.dw);
    lin_download(g, &db, r.db);
    float *same = malloc(nc * 4);  // inputs must be left as they were
    lin_download(g, &inp, same);
    assert_memory_equal(same, c->inp, nc * 4);
    free(same);
    r.fwd_steps = fwd.n, r.bwd_steps = bwd.n;
    wgpt_op_free(&fwd), wgpt_op_free(&bwd);
    if (scratch_bytes) {  // the scratch's frame is checked too
        lin_download(g, &scratch, zs);
        lin_tensor_free(&scratch);
    }
    lin_tensor *all[] = {&inp, &w, &b, &out, &dout, &dinp, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) lin_tensor_free(all[i]);
    free(zeros), free(zs);
    return r;
}

void lin_result_free(lin_result *r) { free(r->out), free(r->dinp), free(r->dw), free(r->db); }

void lin_check(const char *dev, const char *variant, const lin_case *c, const lin_result *r) {
    char what[160];
#define WHAT(t) (snprintf(what, sizeof what, "%s, %s: %s N=%d C=%d OC=%d bias=%d acc=%d", dev, variant, t, c->N, \
                          c->C, c->OC, c->has_bias, c->accumulate), what)
    size_t nc = (size_t)c->N * c->C, oc = (size_t)c->OC * c->C, no = (size_t)c->N * c->OC;
    lin_check_bound(WHAT("out"), r->out, c->out, c->s_out, no, c->C);
    lin_check_bound(WHAT("dinp"), r->dinp, c->dinp, c->s_dinp, nc, c->OC);
    lin_check_bound(WHAT("dweight"), r->dw, c->dw, c->s_dw, oc, c->N);
    if (c->has_bias) lin_check_bound(WHAT("dbias"), r->db, c->db, c->s_db, c->OC, c->N);
    else assert_memory_equal(r->db, c->db0, (size_t)c->OC * 4);  // untouched
#undef WHAT
}

// The GPT-2 124M logits: lnf (N, 768) @ wte (50304, 768)^T, wte 154 MB. On a
// device binding at most 128 MiB (lavapipe) wte is split in two at the real
// limit. Forward only: the backward's chunking is the forward's (same row
// counts), checked above at 96 KiB, and at this size each backward matmul
// costs lavapipe as much again (a 64-row tile for N = 3 rows).
static void logits_(wgpt_gpu *G) {
    const int N = 3, C = 768, OC = 50304;
    size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
    float *x = lin_randv(nc), *w = lin_randv(oc), *want = malloc(no * 4), *got = malloc(no * 4);
    double *S = calloc(no, sizeof *S);
    ref_matmul_forward(want, x, w, NULL, N, C, OC);
    for (size_t n = 0; n < (size_t)N; n++)
        for (size_t o = 0; o < (size_t)OC; o++)
            for (size_t k = 0; k < (size_t)C; k++) S[n * OC + o] += fabs((double)x[n * C + k] * w[o * C + k]);
    lin_tensor dx = lin_upload(G, x, nc), dw = lin_upload(G, w, oc), dout = lin_upload(G, want, no);
    wgpt_view none = {NULL, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    TU_OK(G, wgpt_buf_zero(G, dout.buf, PAD * 4, no * 4));
    TU_OK(G, wgpt_linear_forward(G, &op, dout.view, dx.view, dw.view, none, N, C, OC, none));
    TU_OK(G, wgpt_op_record(G, &op));
    lin_download(G, &dout, got);
    lin_check_bound("logits", got, want, S, no, C);
    // Expected weight chunks: 64-row multiples within the binding limit (on
    // lavapipe's 128 MiB: 43648 + 6656 rows); N = 3 rows never split.
    uint64_t max = wgpt_gpu_get_info(G)->max_storage_binding, row = (uint64_t)C * 4;
    uint64_t rows = (uint64_t)OC * row <= max ? (uint64_t)OC : max / row / 64 * 64;
    int nsteps = (int)((OC + rows - 1) / rows);
    if (op.n != nsteps) fail_msg("logits: %d forward dispatches, expected %d", op.n, nsteps);
    wgpt_op_free(&op);
    lin_tensor_free(&dx), lin_tensor_free(&dw), lin_tensor_free(&dout);
    free(x), free(w), free(want), free(got), free(S);
}


// Flags of a shape (d[3]).
#define BIAS 1u
#define ACC 2u
#define FWD_ONLY 4u  // the logits: forward only, no bias, the step count from the binding limit

// (N, C, OC, flags, forward dispatches, backward dispatches; 0: not checked)
// with the GPU kernels; the CPU twins ignore the scratch: one dispatch a
// pass, plus dbias.
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    if (s->d[3] & FWD_ONLY) {
        logits_(g);
        return;
    }
    lin_case c;
    int bias = (s->d[3] & BIAS) != 0;
    lin_case_init(&c, (int)s->d[0], (int)s->d[1], (int)s->d[2], bias, (s->d[3] & ACC) != 0);
    uint64_t bytes = v->arg ? wgpt_linear_scratch_bytes(g, s->d[0], s->d[1], s->d[2]) : 0;
    lin_result r = lin_run(g, &c, bytes);
    lin_check(s->max_binding ? "small bindings" : "default device", v->name, &c, &r);
    int cpu = wgpt_kernel_variant_cpu(g), fwd = (int)s->d[4], bwd = (int)s->d[5];
    if (cpu && v->arg) fwd = 1, bwd = 2 + bias;
    if ((fwd && r.fwd_steps != fwd) || (bwd && r.bwd_steps != bwd))
        fail_msg("%s N=%d C=%d OC=%d bias=%d: %d + %d dispatches, expected %d + %d", v->name, c.N, c.C, c.OC, bias,
                 r.fwd_steps, r.bwd_steps, fwd, bwd);
    lin_result_free(&r), lin_case_free(&c);
}

static const op_variant variants_[] = {
    {.name = "gpu", .kernels = WGPT_KERNELS_GPU},
    {.name = "cpu", .kernels = WGPT_KERNELS_CPU},
    {.name = "gpu-scratch", .kernels = WGPT_KERNELS_GPU, .arg = 1},
    {.name = "cpu-scratch", .kernels = WGPT_KERNELS_CPU, .arg = 1},
    {.name = "gpu-7-parts", .kernels = WGPT_KERNELS_GPU, .arg = 1, .matmul_splits = 7},
    {.name = "cpu-7-parts", .kernels = WGPT_KERNELS_CPU, .arg = 1, .matmul_splits = 7},
};
#define PLAIN_ (3u << 0)
#define SCRATCH_ (3u << 2)
#define PARTS7_ (3u << 4)

// Sizes that are multiples of no tile; with bias and dinp overwritten, then
// without bias and dinp accumulated. On 96 KiB bindings, (130, 200, 260)
// splits N into 64-row chunks (64 * 260 * 4 = 66560 bytes fit, 128 rows do
// not: 3 chunks) and OC into 64-row chunks (96 KiB / 800 bytes = 122 rows ->
// 64: 5 chunks): forward 3 * 5 dispatches; backward 15 (dinp) + 15 (dweight)
// + 3 (dbias); (150, 97, 300): N chunks of 64 (3), OC chunks of 192 (2);
// (300, 48, 144): only N splits, in chunks of 128 (3). With the scratch (the
// vec4 kernels on the GPU: C and OC multiples of 4): rows any number; k not a
// multiple of the 8-wide stage; outputs smaller and larger than a 128 x 128
// tile; (100, 64, 1024): bwd_input k = 1024 on 1 tile -> 4 splits (+1
// reduce); (600, 36, 20): bwd_weight k = 600 -> 2 splits (+ weight and bias
// reduces); (37, 520, 8): forward k = 520 -> 2 splits (+ reduce, which adds
// the bias). 7 parts forced: forward 5 parts (k 40), input 7 (k 64), weight
// 7 (k 70): the reduce's four-at-a-time loop and its tail. The GPT-2 124M
// logits: lnf (3, 768) @ wte (50304, 768)^T.
static const op_shape shapes_[] = {
    {{74, 48, 144, 1, 1, 0}, 0, PLAIN_},
    {{74, 48, 144, 2, 1, 0}, 0, PLAIN_},
    {{37, 97, 5, 1, 1, 0}, 0, PLAIN_},
    {{37, 97, 5, 2, 1, 0}, 0, PLAIN_},
    {{130, 200, 260, 1, 1, 0}, 0, PLAIN_},
    {{130, 200, 260, 2, 1, 0}, 0, PLAIN_},
    {{1, 1, 1, 1, 1, 0}, 0, PLAIN_},
    {{1, 1, 1, 2, 1, 0}, 0, PLAIN_},
    {{65, 17, 64, 1, 1, 0}, 0, PLAIN_},
    {{65, 17, 64, 2, 1, 0}, 0, PLAIN_},
    // 96 KiB bindings (fwd, bwd dispatches with bias)
    {{130, 200, 260, 1, 15, 33}, 96 * 1024, PLAIN_},
    {{130, 200, 260, 3, 15, 33}, 96 * 1024, PLAIN_},
    {{150, 97, 300, 1, 6, 15}, 96 * 1024, PLAIN_},
    {{150, 97, 300, 3, 6, 15}, 96 * 1024, PLAIN_},
    {{300, 48, 144, 1, 3, 9}, 96 * 1024, PLAIN_},
    {{300, 48, 144, 3, 3, 9}, 96 * 1024, PLAIN_},
    // with the scratch (fwd, bwd dispatches on the GPU)
    {{74, 48, 144, 1, 1, 2}, 0, SCRATCH_},
    {{74, 48, 144, 2, 1, 2}, 0, SCRATCH_},
    {{74, 48, 144, 3, 1, 2}, 0, SCRATCH_},
    {{130, 200, 260, 1, 1, 2}, 0, SCRATCH_},
    {{130, 200, 260, 2, 1, 2}, 0, SCRATCH_},
    {{130, 200, 260, 3, 1, 2}, 0, SCRATCH_},
    {{37, 20, 4, 1, 1, 2}, 0, SCRATCH_},
    {{37, 20, 4, 2, 1, 2}, 0, SCRATCH_},
    {{37, 20, 4, 3, 1, 2}, 0, SCRATCH_},
    {{257, 132, 64, 1, 1, 2}, 0, SCRATCH_},
    {{257, 132, 64, 2, 1, 2}, 0, SCRATCH_},
    {{257, 132, 64, 3, 1, 2}, 0, SCRATCH_},
    {{100, 64, 1024, 1, 1, 3}, 0, SCRATCH_},
    {{100, 64, 1024, 2, 1, 3}, 0, SCRATCH_},
    {{100, 64, 1024, 3, 1, 3}, 0, SCRATCH_},
    {{600, 36, 20, 1, 1, 4}, 0, SCRATCH_},
    {{600, 36, 20, 2, 1, 3}, 0, SCRATCH_},
    {{600, 36, 20, 3, 1, 4}, 0, SCRATCH_},
    {{37, 520, 8, 1, 2, 2}, 0, SCRATCH_},
    {{37, 520, 8, 2, 2, 2}, 0, SCRATCH_},
    {{37, 520, 8, 3, 2, 2}, 0, SCRATCH_},
    {{70, 40, 64, 3, 2, 5}, 0, PARTS7_},
    {{3, 768, 50304, FWD_ONLY, 0, 0}, 0, PLAIN_},
};

const op_family op_linear = {
    .name = "linear",
    .wrappers = "wgpt_linear_forward, wgpt_linear_backward (model/linear.h)",
    .reference = "ref_matmul_forward, ref_matmul_backward (tests/ref/layers.c)",
    .tolerance = "(K + 2) 2^-24 S per element, S the sum of |terms| (Higham's gamma_K, the reference's rounding)",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
