// attention.c: the attention family of the op registry (tests/ops/ops.h):
// the flash-style causal attention of 04_attention.wgsl and
// 04_attention_sgm.wgsl through src/model/attention.h against tests/ref
// ref_attention_forward / ref_attention_backward, which materialise the
// (T, T) matrices in double. Shapes: head sizes 16, 20, 64 (the fast GPU
// kernels: blocks of 64), 18 and 128 (the generic GPU kernels: blocks of
// 32), 24, 32, 48 (fixed-size CPU twins); T = 1, 33, 37, 70, 130, 200, 1024
// (partial blocks, several key blocks); views at non-zero offsets; dqkv
// pre-filled with NaN (it must be overwritten everywhere). Variants: the GPU
// kernels (fast or generic by head size; the 48 KiB twins where the device
// has 48 KiB of workgroup memory) and their flat CPU twins (model/variant.h;
// workgroups of 16 queries, key blocks of 8); the head-size-64 shapes also
// through the f16 calls (wgpt_attention_*_f16: the subgroup-matrix kernels
// where the device has them, emulated where it has f16 and 45,568 bytes of
// workgroup memory but none, as wgpt's tuned lavapipe; a skip elsewhere), on inputs rounded to f16
// first, so that the reference sees the very values the kernels multiply;
// and with the f16 backward keeping dS in a scratch (dq from the dS the
// dk/dv kernel wrote; the scratch starts as NaNs, so a tile read but not
// written shows). tests/test_attention.c keeps the special cases on these
// helpers.
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
#include "ops/attention.h"

#include "model/attention.h"
#include "model/variant.h"
#include "ops/ops.h"
#include "ref/gpt2_ref.h"
#include "test_util.h"

// The case in hand (set by att_run and check_): the CPU twins, the f16
// calls, the f16 backward keeping dS.
static int CPU, F16, DS;

void att_result_free(att_result *r) { free(r->out), free(r->lse), free(r->dqkv); }

size_t att_n_qkv(const att_shape *s) { return (size_t)s->B * s->T * 3 * s->C; }
size_t att_n_out(const att_shape *s) { return (size_t)s->B * s->T * s->C; }
size_t att_n_lse(const att_shape *s) { return (size_t)s->B * s->NH * s->T; }

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
void att_run(wgpt_gpu *g, const att_shape *s, const float *qkv, const float *dout, att_result *r, int f16, int ds_kept) {
    CPU = wgpt_kernel_variant_cpu(g), F16 = f16, DS = f16 && ds_kept;
    uint64_t off = 256, bq = al256(att_n_qkv(s)), bo = al256(att_n_out(s)), bl = al256(att_n_lse(s));
    wgpt_buf *in = wgpt_buf_create(g, off + bq + bo, "qkv|dout");
    wgpt_buf *act = wgpt_buf_create(g, bo + bl, "out|lse");
    wgpt_buf *scratch = wgpt_buf_create(g, bl, "D");
    wgpt_buf *grad = wgpt_buf_create(g, bq, "dqkv");
    TU_NONNULL(g, in);
    TU_NONNULL(g, act);
    TU_NONNULL(g, scratch);
    TU_NONNULL(g, grad);
    wgpt_view vqkv = {in, off, att_n_qkv(s) * 4}, vdout = {in, off + bq, att_n_out(s) * 4}, vout = {act, 0, att_n_out(s) * 4},
              vlse = {act, bo, 0}, vD = {scratch, 0, 0}, vdqkv = {grad, 0, 0};
    TU_OK(g, wgpt_buf_upload(g, in, off, qkv, att_n_qkv(s) * 4));
    TU_OK(g, wgpt_buf_upload(g, in, off + bq, dout, att_n_out(s) * 4));
    float *nan = malloc(att_n_qkv(s) * sizeof *nan);
    for (size_t i = 0; i < att_n_qkv(s); i++) nan[i] = NAN;
    TU_OK(g, wgpt_buf_upload(g, grad, 0, nan, att_n_qkv(s) * 4));
    free(nan);

    wgpt_op fwd, bwd;
    wgpt_op_init(&fwd), wgpt_op_init(&bwd);
    wgpt_buf *q16 = NULL, *o16t = NULL, *ds = NULL;
    r->out = malloc(att_n_out(s) * sizeof *r->out);
    if (F16) {
        // the f16 calls read qkv as f16 (a copy in a buffer of its own); the
        // forward writes out in f16 (where the f32 out would be) and its
        // transpose (C, B T), the backward reads that f16 out for D
        q16 = f16_copy_(g, qkv, att_n_qkv(s), "qkv f16");
        o16t = wgpt_buf_create(g, al256(att_n_out(s)), "out f16 transposed");
        TU_NONNULL(g, o16t);
        wgpt_view vq16 = {q16, 0, 0}, vo16 = {act, 0, att_n_out(s) * 2}, vo16t = {o16t, 0, 0};
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
        size_t n = att_n_out(s), bt = (size_t)s->B * s->T;
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
        TU_OK(g, wgpt_buf_download(g, act, 0, r->out, att_n_out(s) * 4));
    }
    r->lse = malloc(att_n_lse(s) * sizeof *r->lse);
    r->dqkv = malloc(att_n_qkv(s) * sizeof *r->dqkv);
    TU_OK(g, wgpt_buf_download(g, act, bo, r->lse, att_n_lse(s) * 4));
    TU_OK(g, wgpt_buf_download(g, grad, 0, r->dqkv, att_n_qkv(s) * 4));
    wgpt_op_free(&fwd), wgpt_op_free(&bwd);
    wgpt_buf_free(in), wgpt_buf_free(act), wgpt_buf_free(scratch), wgpt_buf_free(grad);
    if (q16) wgpt_buf_free(q16), wgpt_buf_free(o16t);
    if (ds) wgpt_buf_free(ds);
}

// The reference: out and dqkv from tests/ref; lse (which the ref does not
// return) from its preatt: max + log(sum exp(pre - max)) over t2 <= t, in double.
static void ref_run(const att_shape *s, const float *qkv, const float *dout, att_result *r) {
    size_t tt = (size_t)s->B * s->NH * s->T * s->T;
    float *preatt = malloc(tt * sizeof *preatt), *att = malloc(tt * sizeof *att);
    float *dpreatt = calloc(tt, sizeof *dpreatt), *datt = calloc(tt, sizeof *datt);
    r->out = malloc(att_n_out(s) * sizeof *r->out);
    r->lse = malloc(att_n_lse(s) * sizeof *r->lse);
    r->dqkv = calloc(att_n_qkv(s), sizeof *r->dqkv);
    ref_attention_forward(r->out, preatt, att, qkv, (int)s->B, (int)s->T, (int)s->C, (int)s->NH);
    for (size_t row = 0; row < att_n_lse(s); row++) {
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

void att_make_inputs(const att_shape *s, float **qkv, float **dout, int f16) {
    F16 = f16;
    *qkv = malloc(att_n_qkv(s) * sizeof **qkv);
    *dout = malloc(att_n_out(s) * sizeof **dout);
    tu_fill(*qkv, att_n_qkv(s), -s->range, s->range);
    tu_fill(*dout, att_n_out(s), -1.0f, 1.0f);
    if (F16) {  // the values the f16 kernels multiply, for both sides
        for (size_t i = 0; i < att_n_qkv(s); i++) (*qkv)[i] = ref_f32_from_f16(ref_f16_from_f32((*qkv)[i]));
        for (size_t i = 0; i < att_n_out(s); i++) (*dout)[i] = ref_f32_from_f16(ref_f16_from_f32((*dout)[i]));
    }
}

// See the tolerance note at the top: relative to the tensor's largest value.
// f16: out and dqkv within 4e-3 of the largest (see the note at the top); the
// worst |diff| / max|expected| is printed, for the chapter's figures.
static void assert_close_scaled(const char *what, const att_shape *s, const float *got, const float *want, size_t n) {
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
static void check_shape_keys_scaled_(wgpt_gpu *G, const att_shape *s, uint32_t k_from, float k_gain, int f16, int ds) {
    float *qkv, *dout;
    att_make_inputs(s, &qkv, &dout, f16);
    for (uint32_t b = 0; b < s->B; b++)
        for (uint32_t t = k_from; t < s->T; t++)
            for (uint32_t c = s->C; c < 2 * s->C; c++) qkv[((size_t)b * s->T + t) * 3 * s->C + c] *= k_gain;
    att_result got, want;
    att_run(G, s, qkv, dout, &got, f16, ds);
    ref_run(s, qkv, dout, &want);
    assert_close_scaled("out", s, got.out, want.out, att_n_out(s));
    assert_close_scaled("lse", s, got.lse, want.lse, att_n_lse(s));
    assert_close_scaled("dqkv", s, got.dqkv, want.dqkv, att_n_qkv(s));
    att_result_free(&got), att_result_free(&want);
    free(qkv), free(dout);
}



// (B, T, C, NH, range of q, k, v (larger values give peaked softmaxes), the
// first position whose keys are scaled (0: none), the factor (a power of 2:
// still exact f16 values)).
static void check_(wgpt_gpu *g, const op_variant *v, const op_shape *s) {
    const att_shape sh = {s->d[0], s->d[1], s->d[2], s->d[3], (float)s->d[4]};
    tu_rng_state = 0x9E3779B97F4A7C15ull;
    check_shape_keys_scaled_(g, &sh, s->d[5] ? s->d[5] : sh.T, s->d[5] ? (float)s->d[6] : 1.0f, v->arg >= 1,
                             v->arg == 2);
}

static const op_variant variants_[] = {
    {.name = "gpu", .kernels = WGPT_KERNELS_GPU},
    {.name = "cpu", .kernels = WGPT_KERNELS_CPU},
    {.name = "f16", .kernels = WGPT_KERNELS_GPU, .emulate_sgm = 1, .needs = OP_NEEDS_SGM_ATTENTION, .arg = 1},
    {.name = "f16-ds-kept", .kernels = WGPT_KERNELS_GPU, .emulate_sgm = 1, .needs = OP_NEEDS_SGM_ATTENTION, .arg = 2},
};
#define BOTH_ (3u << 0)
#define F16_ (3u << 2)

// Head size 16 (and one query: P = 1, dq = dk = 0, dv = dout); 20 (not a
// multiple of 8; one query past a block); 64 (one whole block; a peaked
// softmax: the running max moves); 24, 32, 48 (the fixed-size CPU twins,
// each with a partial last block); 18 (not a multiple of 4: the generic GPU
// kernels); four blocks of 64, the last partial, peaked; GPT-2's context (16
// blocks of 64: the f16 kernels' longest loops); keys after the first block
// of 64 sixteen times larger (every row past it finds a block max far above
// its first block's: the f16 forward's reference max moves, and O is
// rescaled, more than once); head size 128.
static const op_shape shapes_[] = {
    {{2, 37, 48, 3, 1}, 0, BOTH_},
    {{3, 1, 48, 3, 1}, 0, BOTH_},
    {{2, 33, 60, 3, 1}, 0, BOTH_},
    {{2, 64, 128, 2, 1}, 0, BOTH_ | F16_},
    {{2, 130, 192, 3, 1}, 0, BOTH_ | F16_},
    {{1, 70, 128, 2, 3}, 0, BOTH_ | F16_},
    {{2, 37, 72, 3, 1}, 0, BOTH_},
    {{2, 33, 96, 3, 3}, 0, BOTH_},
    {{1, 40, 96, 2, 1}, 0, BOTH_},
    {{2, 37, 54, 3, 1}, 0, BOTH_},
    {{1, 200, 128, 2, 3}, 0, BOTH_ | F16_},
    {{1, 1024, 64, 1, 1}, 0, F16_},
    {{1, 200, 128, 2, 1, 64, 16}, 0, BOTH_ | F16_},
    {{2, 130, 192, 3, 1, 20, 4}, 0, BOTH_ | F16_},
    {{1, 70, 256, 2, 1}, 0, BOTH_},
};

const op_family op_attention = {
    .name = "attention",
    .wrappers = "wgpt_attention_forward/backward, wgpt_attention_forward_f16/backward_f16 (model/attention.h)",
    .reference = "ref_attention_forward, ref_attention_backward (tests/ref/attention.c)",
    .tolerance = "f32: 2e-5 x max|expected| + 2e-5 x |expected| (sums of K <= 130 terms reordered); f16: 4e-3 x "
                 "max|expected| for out and dqkv (P and dS rounded to f16), 2e-5 for lse",
    .variants = variants_,
    .nvariants = OP_COUNT(variants_),
    .shapes = shapes_,
    .nshapes = OP_COUNT(shapes_),
    .check = check_,
};
