// test_attention.c: the flash-style causal attention of 04_attention.wgsl
// (through src/model/attention.c) against tests/ref ref_attention_forward /
// ref_attention_backward, which materialise the (T, T) matrices in double.
// Shapes: head sizes 16, 20, 64 (the fast GPU kernels: blocks of 64), 18 and
// 128 (the generic GPU kernels: blocks of 32); T = 1, 33, 37, 70, 130, 200
// (partial blocks, several key blocks); views at non-zero offsets; dqkv pre-filled with
// NaN (it must be overwritten everywhere). Also: a future token's k and v do
// not change earlier outputs (bit for bit), two runs are bit-identical, and
// bad shapes, short views, views past one binding and a written tensor in a
// buffer the same dispatch reads are refused. Every case runs twice: with the
// GPU kernels (fast or generic by head size) and with their flat CPU twins (model/variant.h;
// workgroups of 16 queries, key blocks of 8). The head-size-64 cases run a
// third time through the f16 calls (wgpt_attention_*_f16: the subgroup-matrix
// kernels of 04_attention_sgm.wgsl where the device has them, the H200; they
// say "skipped" elsewhere), on inputs rounded to f16 first, so that the
// reference sees the very values the kernels multiply; and a fourth time with
// the f16 backward keeping dS in a scratch (dq from the dS the dk/dv kernel
// wrote; the scratch starts as NaNs, so a tile read but not written shows).
//
// Tolerance. Every GPU value is a chain of f32 sums of length K in a different
// order than the double reference: a score is a dot of K = hs terms, a row's
// softmax sum and out = P @ V have K = T terms, dk and dv sum K = T queries,
// D and dP have K = hs terms (the CPU twins: the same chains, summed per
// block of 8 and then block after block, at most K + 8 long). A reordered f32 sum of K terms errs by at most
// about K * 2^-24 * sum|terms|; the terms here are O(1) (inputs in [-1, 1],
// probabilities <= 1), so for K <= 130 the bound is ~1e-5 relative to the
// tensor's magnitude, and a score error e moves exp(.) by a relative e.
// We allow |diff| <= 2e-5 * max|expected| + 2e-5 * |expected| per tensor
// (lse, out, dqkv); the observed worst case on lavapipe is 1.4e-6 * max|expected|
// (out with inputs in [-3, 3], T = 200), most tensors 1e-7 to 5e-7.
//
// Tolerance of the f16 kernels. The inputs are exact f16 values and their
// products are summed in f32, so scores, lse and D err as above. What the
// kernels round: P to f16 before O = P V and dv = P^T dout (relative 2^-11 =
// 4.9e-4 a term), and dS = P (dP - D) to f16 before dq = dS K and dk = dS^T Q,
// where dS carries P's rounding and its own (2 x 4.9e-4) plus D's error
// (D = dout . out from out's f16 copy, as the model keeps it: out off by
// 4.9e-4 of |V| from P's rounding, then rounded, another 4.9e-4). Each output is a sum of such
// terms; against the tensor's largest value that is at most about 1.5e-3
// where no cancellation shrinks the sum; we allow 4e-3 x max|expected| for out
// and dqkv (2e-5 for lse, which rounds nothing). Observed on the H200: see
// docs/kernels/04_attention_sgm.md.
#include "test_util.h"

#include "model/attention.h"
#include "model/variant.h"
#include "ref/gpt2_ref.h"

static wgpt_gpu *G;                // the device of the twin in force: one of
static wgpt_gpu *G_GPU, *G_CPU;    // the default adapter opened with each twin (wgpt_gpu_options.kernels)

// Per-test setups: which twin the wrappers pick (see BOTH in main).
static int CPU;  // 1 while the CPU twins are in force
static int F16;  // 1 while the f16 calls are (their subgroup-matrix kernels where the device has them)
static int DS;   // 1 while the f16 backward keeps dS in a scratch (its _ds kernels)
static int use_gpu_kernels_(void **state) {
    (void)state;
    G = G_GPU;
    CPU = 0, F16 = 0, DS = 0;
    return 0;
}
static int use_cpu_kernels_(void **state) {
    (void)state;
    G = G_CPU;
    CPU = 1, F16 = 0, DS = 0;
    return 0;
}
static int use_sgm_kernels_(void **state) {
    (void)state;
    G = G_GPU;
    CPU = 0, F16 = 1, DS = 0;
    return 0;
}
static int use_sgm_ds_kernels_(void **state) {
    use_sgm_kernels_(state);
    DS = 1;
    return 0;
}
// A cmocka skip, saying why, where the f16 calls would not reach subgroup matrices.
static void skip_without_sgm_(void) {
    if (!F16 || wgpt_attention_uses_sgm(G, 64)) return;
    printf("skipped: needs f16 subgroup matrices for attention; '%s' has none (the H100/H200 run this case)\n",
           wgpt_gpu_get_info(G)->name);
    skip();
}

static int group_setup(void **state) {
    (void)state;
    wgpt_gpu_options gpu = {.adapter_index = -1, .kernels = WGPT_KERNELS_GPU};
    wgpt_gpu_options cpu = {.adapter_index = -1, .kernels = WGPT_KERNELS_CPU};
    G_GPU = tu_gpu_open(&gpu);
    G_CPU = tu_gpu_open(&cpu);
    G = G_GPU;
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    wgpt_gpu_close(G_GPU);
    wgpt_gpu_close(G_CPU);
    return 0;
}

typedef struct shape {
    uint32_t B, T, C, NH;
    float range;  // q, k, v in [-range, range): larger values give peaked softmaxes
} shape;

typedef struct result {
    float *out, *lse, *dqkv;  // (B,T,C), (B,NH,T), (B,T,3C)
} result;

static void result_free(result *r) { free(r->out), free(r->lse), free(r->dqkv); }

static size_t n_qkv(const shape *s) { return (size_t)s->B * s->T * 3 * s->C; }
static size_t n_out(const shape *s) { return (size_t)s->B * s->T * s->C; }
static size_t n_lse(const shape *s) { return (size_t)s->B * s->NH * s->T; }

// Bytes rounded up to 256 so that views placed one after another stay aligned.
static uint64_t al256(size_t floats) { return ((uint64_t)floats * 4 + 255) & ~(uint64_t)255; }

// n f32 values as f16 (round to nearest even), in a buffer of their own.
static wgpt_buf *f16_copy_(wgpt_gpu *g, const float *x, size_t n, const char *label) {
    uint16_t *h = malloc((n + 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = ref_f16_from_f32(x[i]);
    h[n] = 0;
    wgpt_buf *b = tu_upload(g, h, ((uint64_t)n * 2 + 3) & ~(uint64_t)3, label);
    free(h);
    return b;
}

// Forward then backward on the GPU, with the tensors grouped as the model
// may place them: qkv | dout (read-only everywhere; qkv after 256 bytes),
// out | lse (written together by the forward), D alone, dqkv alone (NaN
// before the backward: it must be overwritten everywhere).
static void gpu_run(wgpt_gpu *g, const shape *s, const float *qkv, const float *dout, result *r) {
    uint64_t off = 256, bq = al256(n_qkv(s)), bo = al256(n_out(s)), bl = al256(n_lse(s));
    wgpt_buf *in = wgpt_buf_create(g, off + bq + bo, "qkv|dout");
    wgpt_buf *act = wgpt_buf_create(g, bo + bl, "out|lse");
    wgpt_buf *scratch = wgpt_buf_create(g, bl, "D");
    wgpt_buf *grad = wgpt_buf_create(g, bq, "dqkv");
    TU_NONNULL(g, in);
    TU_NONNULL(g, act);
    TU_NONNULL(g, scratch);
    TU_NONNULL(g, grad);
    wgpt_view vqkv = {in, off, n_qkv(s) * 4}, vdout = {in, off + bq, n_out(s) * 4}, vout = {act, 0, n_out(s) * 4},
              vlse = {act, bo, 0}, vD = {scratch, 0, 0}, vdqkv = {grad, 0, 0};
    TU_OK(g, wgpt_buf_upload(g, in, off, qkv, n_qkv(s) * 4));
    TU_OK(g, wgpt_buf_upload(g, in, off + bq, dout, n_out(s) * 4));
    float *nan = malloc(n_qkv(s) * sizeof *nan);
    for (size_t i = 0; i < n_qkv(s); i++) nan[i] = NAN;
    TU_OK(g, wgpt_buf_upload(g, grad, 0, nan, n_qkv(s) * 4));
    free(nan);

    wgpt_op fwd, bwd;
    wgpt_op_init(&fwd), wgpt_op_init(&bwd);
    wgpt_buf *q16 = NULL, *o16t = NULL, *ds = NULL;
    r->out = malloc(n_out(s) * sizeof *r->out);
    if (F16) {
        // the f16 calls read qkv as f16 (a copy in a buffer of its own); the
        // forward writes out in f16 (where the f32 out would be) and its
        // transpose (C, B T), the backward reads that f16 out for D
        q16 = f16_copy_(g, qkv, n_qkv(s), "qkv f16");
        o16t = wgpt_buf_create(g, al256(n_out(s)), "out f16 transposed");
        TU_NONNULL(g, o16t);
        wgpt_view vq16 = {q16, 0, 0}, vo16 = {act, 0, n_out(s) * 2}, vo16t = {o16t, 0, 0};
        // DS: the dS scratch filled with f16 NaNs, so that a tile the dq
        // kernel reads and the dk/dv kernel did not write shows in dq
        wgpt_view vds = {0};
        if (DS) {
            uint64_t nb = wgpt_attention_ds_bytes(s->B, s->T, s->NH);
            uint8_t *ones = malloc(nb);
            memset(ones, 0xff, nb);
            ds = tu_upload(g, ones, nb, "dS");
            free(ones);
            vds = (wgpt_view){ds, 0, 0};
        }
        TU_OK(g, wgpt_attention_forward_f16(g, &fwd, vo16, vo16t, vlse, vq16, s->B, s->T, s->C, s->NH));
        TU_OK(g, wgpt_attention_backward_f16(g, &bwd, vdqkv, vD, vdout, vq16, vo16, vlse, vds, s->B, s->T, s->C,
                                             s->NH));
        assert_int_equal(fwd.n, 1);
        assert_int_equal(bwd.n, 3);
        assert_int_equal(fwd.steps[0].x, (s->T + 63) / 64);
        TU_OK(g, wgpt_op_record(g, &fwd));
        TU_OK(g, wgpt_op_record(g, &bwd));
        size_t n = n_out(s), bt = (size_t)s->B * s->T;
        uint16_t *h = malloc(n * 2), *ht = malloc(n * 2);
        TU_OK(g, wgpt_buf_download(g, act, 0, h, n * 2));
        TU_OK(g, wgpt_buf_download(g, o16t, 0, ht, n * 2));
        for (size_t i = 0; i < n; i++) r->out[i] = ref_f32_from_f16(h[i]);
        // the transposed copy holds the same halves
        for (size_t t = 0; t < bt; t++)
            for (size_t c = 0; c < s->C; c++)
                if (ht[c * bt + t] != h[t * s->C + c])
                    fail_msg("out f16 transposed: (c %zu, token %zu) is 0x%04x, out f16 (token, c) 0x%04x", c, t,
                             ht[c * bt + t], h[t * s->C + c]);
        free(h), free(ht);
    } else {
        TU_OK(g, wgpt_attention_forward(g, &fwd, vout, vlse, vqkv, s->B, s->T, s->C, s->NH));
        TU_OK(g, wgpt_attention_backward(g, &bwd, vdqkv, vD, vdout, vqkv, vout, vlse, s->B, s->T, s->C, s->NH));
        assert_int_equal(fwd.n, 1);
        assert_int_equal(bwd.n, 3);
        // The kernels in force: the CPU twins (they need subgroups of >= 8 lanes:
        // lavapipe has 8) take query blocks of 16; the GPU kernels blocks of 64
        // (fast: hs <= 64, a multiple of 4) or 32 (generic: any other hs).
        uint32_t hs = s->C / s->NH;
        uint32_t blk = CPU && wgpt_gpu_get_info(g)->subgroup_min >= 8 ? 16 : hs <= 64 && hs % 4 == 0 ? 64 : 32;
        assert_int_equal(fwd.steps[0].x, (s->T + blk - 1) / blk);
        TU_OK(g, wgpt_op_record(g, &fwd));
        TU_OK(g, wgpt_op_record(g, &bwd));
        TU_OK(g, wgpt_buf_download(g, act, 0, r->out, n_out(s) * 4));
    }
    r->lse = malloc(n_lse(s) * sizeof *r->lse);
    r->dqkv = malloc(n_qkv(s) * sizeof *r->dqkv);
    TU_OK(g, wgpt_buf_download(g, act, bo, r->lse, n_lse(s) * 4));
    TU_OK(g, wgpt_buf_download(g, grad, 0, r->dqkv, n_qkv(s) * 4));
    wgpt_op_free(&fwd), wgpt_op_free(&bwd);
    wgpt_buf_free(in), wgpt_buf_free(act), wgpt_buf_free(scratch), wgpt_buf_free(grad);
    if (q16) wgpt_buf_free(q16), wgpt_buf_free(o16t);
    if (ds) wgpt_buf_free(ds);
}

// The reference: out and dqkv from tests/ref; lse (which the ref does not
// return) from its preatt: max + log(sum exp(pre - max)) over t2 <= t, in double.
static void ref_run(const shape *s, const float *qkv, const float *dout, result *r) {
    size_t tt = (size_t)s->B * s->NH * s->T * s->T;
    float *preatt = malloc(tt * sizeof *preatt), *att = malloc(tt * sizeof *att);
    float *dpreatt = calloc(tt, sizeof *dpreatt), *datt = calloc(tt, sizeof *datt);
    r->out = malloc(n_out(s) * sizeof *r->out);
    r->lse = malloc(n_lse(s) * sizeof *r->lse);
    r->dqkv = calloc(n_qkv(s), sizeof *r->dqkv);
    ref_attention_forward(r->out, preatt, att, qkv, (int)s->B, (int)s->T, (int)s->C, (int)s->NH);
    for (size_t row = 0; row < n_lse(s); row++) {
        size_t t = row % s->T;
        const float *pre = preatt + row * s->T;
        double mx = -INFINITY, sum = 0.0;
        for (size_t t2 = 0; t2 <= t; t2++) mx = pre[t2] > mx ? pre[t2] : mx;
        for (size_t t2 = 0; t2 <= t; t2++) sum += exp(pre[t2] - mx);
        r->lse[row] = (float)(mx + log(sum));
    }
    ref_attention_backward(r->dqkv, dpreatt, datt, dout, qkv, att, (int)s->B, (int)s->T, (int)s->C, (int)s->NH);
    free(preatt), free(att), free(dpreatt), free(datt);
}

static void make_inputs(const shape *s, float **qkv, float **dout) {
    *qkv = malloc(n_qkv(s) * sizeof **qkv);
    *dout = malloc(n_out(s) * sizeof **dout);
    tu_fill(*qkv, n_qkv(s), -s->range, s->range);
    tu_fill(*dout, n_out(s), -1.0f, 1.0f);
    if (F16) {  // the values the f16 kernels multiply, for both sides
        for (size_t i = 0; i < n_qkv(s); i++) (*qkv)[i] = ref_f32_from_f16(ref_f16_from_f32((*qkv)[i]));
        for (size_t i = 0; i < n_out(s); i++) (*dout)[i] = ref_f32_from_f16(ref_f16_from_f32((*dout)[i]));
    }
}

// See the tolerance note at the top: relative to the tensor's largest value.
// f16: out and dqkv within 4e-3 of the largest (see the note at the top); the
// worst |diff| / max|expected| is printed, for the chapter's figures.
static void assert_close_scaled(const char *what, const shape *s, const float *got, const float *want, size_t n) {
    int rounded = F16 && strcmp(what, "lse") != 0;
    const float TOL = rounded ? 4e-3f : 2e-5f;
    float mx = 0.0f, worst = 0.0f;
    for (size_t i = 0; i < n; i++) mx = fmaxf(mx, fabsf(want[i]));
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(got[i] - want[i]));
    char label[160];
    snprintf(label, sizeof label, "%s, %s (B=%u T=%u C=%u NH=%u range %g)",
             DS ? "f16 kernels, dS kept" : F16 ? "f16 kernels" : CPU ? "cpu kernels" : "gpu kernels", what, s->B, s->T, s->C, s->NH,
             (double)s->range);
    if (F16) printf("%s: worst |diff| %.3g x max|expected| %.3g\n", label, mx > 0 ? worst / mx : worst, mx);
    tu_assert_close(label, got, want, n, TOL * mx, rounded ? 0.0f : TOL);
}

// As check_shape, with the keys at positions >= k_from multiplied by k_gain
// (a power of 2: still exact f16 values).
static void check_shape_keys_scaled(const shape *s, uint32_t k_from, float k_gain) {
    float *qkv, *dout;
    make_inputs(s, &qkv, &dout);
    for (uint32_t b = 0; b < s->B; b++)
        for (uint32_t t = k_from; t < s->T; t++)
            for (uint32_t c = s->C; c < 2 * s->C; c++) qkv[((size_t)b * s->T + t) * 3 * s->C + c] *= k_gain;
    result got, want;
    gpu_run(G, s, qkv, dout, &got);
    ref_run(s, qkv, dout, &want);
    assert_close_scaled("out", s, got.out, want.out, n_out(s));
    assert_close_scaled("lse", s, got.lse, want.lse, n_lse(s));
    assert_close_scaled("dqkv", s, got.dqkv, want.dqkv, n_qkv(s));
    result_free(&got), result_free(&want);
    free(qkv), free(dout);
}

static void check_shape(const shape *s) { check_shape_keys_scaled(s, s->T, 1.0f); }

static void matches_ref_hs16(void **st) {
    (void)st;
    check_shape(&(shape){2, 37, 48, 3, 1.0f});
    check_shape(&(shape){3, 1, 48, 3, 1.0f});  // one query: P = 1, dq = dk = 0, dv = dout
}
static void matches_ref_hs20(void **st) {
    (void)st;
    check_shape(&(shape){2, 33, 60, 3, 1.0f});  // hs not a multiple of 8; one query past a block
}
static void matches_ref_hs64(void **st) {
    (void)st;
    skip_without_sgm_();
    check_shape(&(shape){2, 64, 128, 2, 1.0f});  // one whole block
    check_shape(&(shape){2, 130, 192, 3, 1.0f});
    check_shape(&(shape){1, 70, 128, 2, 3.0f});  // peaked softmax: the running max moves
}
// The other head sizes with fixed-size CPU twins (*_flath_hs24, 32, 48; 16
// and 64 run above), each with a partial last block.
static void matches_ref_hs24_32_48(void **st) {
    (void)st;
    check_shape(&(shape){2, 37, 72, 3, 1.0f});
    check_shape(&(shape){2, 33, 96, 3, 3.0f});
    check_shape(&(shape){1, 40, 96, 2, 1.0f});
}
static void matches_ref_hs18(void **st) {
    (void)st;
    check_shape(&(shape){2, 37, 54, 3, 1.0f});  // hs not a multiple of 4: the generic GPU kernels
}
static void matches_ref_long_peaked(void **st) {
    (void)st;
    skip_without_sgm_();
    check_shape(&(shape){1, 200, 128, 2, 3.0f});  // four blocks of 64, the last partial; peaked softmax
}
// Keys after the first block of 64 sixteen times larger: every row past it
// finds a block max far above its first block's (the f16 forward's
// reference max moves, and O is rescaled, more than once).
static void matches_ref_max_jumps(void **st) {
    (void)st;
    skip_without_sgm_();
    check_shape_keys_scaled(&(shape){1, 200, 128, 2, 1.0f}, 64, 16.0f);
    check_shape_keys_scaled(&(shape){2, 130, 192, 3, 1.0f}, 20, 4.0f);
}
// GPT-2's context: 16 blocks of 64 (the f16 kernels' longest loops).
static void matches_ref_t1024(void **st) {
    (void)st;
    skip_without_sgm_();
    check_shape(&(shape){1, 1024, 64, 1, 1.0f});
}
static void matches_ref_hs128(void **st) {
    (void)st;
    check_shape(&(shape){1, 70, 256, 2, 1.0f});
}

// A token's k and v only reach queries at or after it: changing them at t0
// leaves out, lse and dq of every earlier position bit-for-bit unchanged.
static void future_keys_have_no_effect(void **st) {
    (void)st;
    skip_without_sgm_();
    const shape s = {2, 130, 192, 3, 1.0f};
    const uint32_t t0 = 45;  // inside the second block of 32
    float *qkv, *dout;
    make_inputs(&s, &qkv, &dout);
    result a, b;
    gpu_run(G, &s, qkv, dout, &a);
    for (uint32_t bb = 0; bb < s.B; bb++)
        for (uint32_t t = t0; t < s.T; t++)
            for (uint32_t c = s.C; c < 3 * s.C; c++) qkv[((size_t)bb * s.T + t) * 3 * s.C + c] *= -2.5f;
    gpu_run(G, &s, qkv, dout, &b);
    size_t hs = s.C / s.NH;
    for (uint32_t bb = 0; bb < s.B; bb++) {
        size_t o = (size_t)bb * s.T * s.C, q = (size_t)bb * s.T * 3 * s.C;
        assert_memory_equal(a.out + o, b.out + o, (size_t)t0 * s.C * 4);
        for (uint32_t t = 0; t < t0; t++)
            assert_memory_equal(a.dqkv + q + (size_t)t * 3 * s.C, b.dqkv + q + (size_t)t * 3 * s.C, (size_t)s.C * 4);
        for (uint32_t h = 0; h < s.NH; h++) {
            size_t l = ((size_t)bb * s.NH + h) * s.T;
            assert_memory_equal(a.lse + l, b.lse + l, (size_t)t0 * 4);
        }
        // and the change does reach t0 itself
        assert_true(memcmp(a.out + o + (size_t)t0 * s.C, b.out + o + (size_t)t0 * s.C, hs * 4) != 0);
    }
    result_free(&a), result_free(&b);
    free(qkv), free(dout);
}

// No atomics and fixed summation orders: two runs give the same bits.
static void two_runs_are_bit_identical(void **st) {
    (void)st;
    skip_without_sgm_();
    const shape s = {2, 130, 192, 3, 1.0f};
    float *qkv, *dout;
    make_inputs(&s, &qkv, &dout);
    result a, b;
    gpu_run(G, &s, qkv, dout, &a);
    gpu_run(G, &s, qkv, dout, &b);
    assert_memory_equal(a.out, b.out, n_out(&s) * 4);
    assert_memory_equal(a.lse, b.lse, n_lse(&s) * 4);
    assert_memory_equal(a.dqkv, b.dqkv, n_qkv(&s) * 4);
    result_free(&a), result_free(&b);
    free(qkv), free(dout);
}

// Expects call to fail with a message containing `part` and leave op unchanged.
#define EXPECT_REFUSED(g, op, call, part)                                                     \
    do {                                                                                      \
        int n0_ = (op)->n;                                                                    \
        if ((call) == 0) fail_msg("%s was accepted", #call);                                   \
        if (!strstr(wgpt_gpu_error(g), part))                                                 \
            fail_msg("%s: message '%s' lacks '%s'", #call, wgpt_gpu_error(g), part);            \
        assert_int_equal((op)->n, n0_);                                                       \
    } while (0)

static void refuses_bad_shapes_and_views(void **st) {
    (void)st;
    wgpt_buf *big = wgpt_buf_create(G, 1 << 20, "big");
    TU_NONNULL(G, big);
    wgpt_view v = {big, 0, 0}, small = {big, 0, 64};
    wgpt_op op;
    wgpt_op_init(&op);
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 1, 8, 260, 2), "at most 128");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 1, 8, 50, 3), "bad shape");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, v, 0, 8, 48, 3), "bad shape");
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, v, v, small, 1, 8, 48, 3), "qkv (B, T, 3C) needs");
    EXPECT_REFUSED(G, &op, wgpt_attention_backward(G, &op, v, small, v, v, v, v, 2, 8, 48, 3), "D (B, NH, T)");
    // WebGPU refuses a buffer bound writable and read-only in one dispatch,
    // even at disjoint bytes: the wrappers say so before the submit fails.
    wgpt_buf *other = wgpt_buf_create(G, 1 << 20, "other"), *dbuf = wgpt_buf_create(G, 4096, "D");
    wgpt_view lo = {big, 0, 1 << 16}, hi = {big, 1 << 18, 0}, w = {other, 0, 0}, d = {dbuf, 0, 0};
    EXPECT_REFUSED(G, &op, wgpt_attention_forward(G, &op, lo, w, hi, 2, 8, 48, 3), "out and qkv are in the same buffer");
    EXPECT_REFUSED(G, &op, wgpt_attention_backward(G, &op, lo, d, w, hi, w, w, 2, 8, 48, 3),
                   "dqkv and qkv are in the same buffer");
    wgpt_buf_free(other), wgpt_buf_free(dbuf);
    wgpt_op_free(&op);
    wgpt_buf_free(big);

    // A device that binds at most 64 KiB: out (51 KB) fits, qkv (154 KB) must be refused, not split.
    wgpt_gpu_options opt = {.adapter_index = -1, .max_binding = 64 << 10,
                            .kernels = CPU ? WGPT_KERNELS_CPU : WGPT_KERNELS_GPU};
    wgpt_gpu *g2 = tu_gpu_open(&opt);
    const shape s = {1, 100, 128, 2, 1.0f};
    wgpt_buf *b2 = wgpt_buf_create(g2, n_qkv(&s) * 4, "qkv");
    wgpt_buf *o2 = wgpt_buf_create(g2, n_out(&s) * 4, "out");
    wgpt_buf *l2 = wgpt_buf_create(g2, n_lse(&s) * 4, "lse");
    TU_NONNULL(g2, b2);
    TU_NONNULL(g2, o2);
    TU_NONNULL(g2, l2);
    wgpt_view vq = {b2, 0, 0}, vo = {o2, 0, 0}, vl = {l2, 0, 0};
    wgpt_op_init(&op);
    EXPECT_REFUSED(g2, &op, wgpt_attention_forward(g2, &op, vo, vl, vq, s.B, s.T, s.C, s.NH),
                   "qkv (B, T, 3C) is 153600 bytes; this device binds at most 65536");
    wgpt_op_free(&op);
    wgpt_buf_free(b2), wgpt_buf_free(o2), wgpt_buf_free(l2);
    wgpt_gpu_close(g2);
}

// The 48 KiB twins run only where the device has 48 KiB of workgroup memory
// (the H200; the other tests run them there). Everywhere, their WGSL must
// compile: on a smaller device the pipeline is refused for its workgroup
// memory alone, with Dawn's message naming the sizes, never for a compile
// error. On its own device: a refused pipeline leaves an error behind.
static void kernels_48k_compile_everywhere(void **st) {
    (void)st;
    static const char *const names[] = {"attention_forward_48k", "attention_backward_dq_48k",
                                        "attention_backward_dkdv_48k"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        wgpt_gpu_options opt = {.adapter_index = -1};
        wgpt_gpu *g2 = tu_gpu_open(&opt);
        wgpt_kernel *k = wgpt_kernel_get(g2, names[i]);
        if (wgpt_gpu_get_info(g2)->max_workgroup_storage >= 49152) {
            if (!k) fail_msg("%s: %s", names[i], wgpt_gpu_error(g2));
        } else {
            assert_null(k);
            const char *e = wgpt_gpu_error(g2);
            if (strstr(e, "failed to compile") || !strstr(e, "49152"))
                fail_msg("%s on a %u-byte device: %s", names[i], wgpt_gpu_get_info(g2)->max_workgroup_storage, e);
        }
        wgpt_gpu_close(g2);
    }
}

// Where the device has no f16 subgroup matrices of the kernels' shape (or
// hs != 64) the f16 calls are refused with a message (the model keeps the f32
// calls there); on the H200 only the head size is refused.
static void f16_calls_refused_where_they_cannot_run(void **st) {
    (void)st;
    wgpt_buf *big = wgpt_buf_create(G_GPU, 1 << 20, "big");
    wgpt_buf *big2 = wgpt_buf_create(G_GPU, 1 << 20, "big2");
    wgpt_buf *big3 = wgpt_buf_create(G_GPU, 1 << 20, "big3");
    TU_NONNULL(G_GPU, big);
    TU_NONNULL(G_GPU, big2);
    TU_NONNULL(G_GPU, big3);
    wgpt_view a = {big, 0, 0}, b = {big2, 0, 0}, t = {big3, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 64, 96, 3), "head size 64");
    if (!wgpt_attention_uses_sgm(G_GPU, 64))
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 64, 128, 2), "subgroup");
    else {  // the transposed output goes a pair of tokens at a time
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_forward_f16(G_GPU, &op, a, t, a, b, 1, 63, 128, 2), "T even");
        // the dS scratch: large enough, and in a buffer of its own
        wgpt_buf *d = wgpt_buf_create(G_GPU, 4096, "D"), *g = wgpt_buf_create(G_GPU, 1 << 20, "dqkv");
        TU_NONNULL(G_GPU, d);
        TU_NONNULL(G_GPU, g);
        wgpt_view vd = {d, 0, 0}, vg = {g, 0, 0}, short_ds = {big3, 0, wgpt_attention_ds_bytes(2, 130, 2) - 2};
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_backward_f16(G_GPU, &op, vg, vd, a, b, a, a, short_ds, 2, 130, 128, 2),
                       "ds (the dS^T tiles: wgpt_attention_ds_bytes) needs 196608 bytes");
        EXPECT_REFUSED(G_GPU, &op, wgpt_attention_backward_f16(G_GPU, &op, vg, vd, a, b, a, a, vg, 2, 130, 128, 2),
                       "ds and dqkv are in the same buffer");
        wgpt_buf_free(d), wgpt_buf_free(g);
    }
    wgpt_op_free(&op);
    wgpt_buf_free(big), wgpt_buf_free(big2), wgpt_buf_free(big3);
}

// Each test twice: with the flash kernels, then with their CPU twins; the
// head-size-64 ones a third time with the f16 kernels, and a fourth with
// their backward keeping dS (the _ds kernels).
#define BOTH(f) {#f " [gpu kernels]", f, use_gpu_kernels_, NULL, NULL}, {#f " [cpu kernels]", f, use_cpu_kernels_, NULL, NULL}
#define F16_TOO(f) {#f " [f16 kernels]", f, use_sgm_kernels_, NULL, NULL}, \
                   {#f " [f16 kernels, dS kept]", f, use_sgm_ds_kernels_, NULL, NULL}

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(matches_ref_hs16),
        BOTH(matches_ref_hs20),
        BOTH(matches_ref_hs64),
        F16_TOO(matches_ref_hs64),
        BOTH(matches_ref_hs24_32_48),
        BOTH(matches_ref_hs18),
        BOTH(matches_ref_long_peaked),
        F16_TOO(matches_ref_long_peaked),
        F16_TOO(matches_ref_t1024),
        BOTH(matches_ref_max_jumps),
        F16_TOO(matches_ref_max_jumps),
        BOTH(matches_ref_hs128),
        BOTH(future_keys_have_no_effect),
        F16_TOO(future_keys_have_no_effect),
        BOTH(two_runs_are_bit_identical),
        F16_TOO(two_runs_are_bit_identical),
        cmocka_unit_test(f16_calls_refused_where_they_cannot_run),
        BOTH(refuses_bad_shapes_and_views),
        cmocka_unit_test(kernels_48k_compile_everywhere),
    };
    return cmocka_run_group_tests_name("attention", tests, group_setup, group_teardown);
}
