// bench_matmul.c: the matmul rows of `wgpt bench --micro`: the linear layer's
// kernels (model/linear.h) at GPT-2 124M's shapes for B x T = 4 x 1024 tokens
// (N = 4096 rows, scaled by --micro-scale; C and OC scaled by --micro-width),
// forward and both backward passes, and a square N x N x N forward.
#include <stdio.h>

#include "bench/bench_micro.h"
#include "model/linear.h"
#include "model/linear_f16.h"
#include "model/precision.h"
#include "bench/microbench.h"

typedef struct mm_shape {
    const char *name;
    uint32_t C, OC;
    int bias, backward;  // GPT-2 has biases on every linear but the tied logits one
} mm_shape;

// ms and passes * 2*N*C*OC / time ("-" if the time is 0: below the timer's resolution).
static void row_(const char *name, uint32_t N, uint32_t C, uint32_t OC, const char *pass, double ms, int passes) {
    if (ms <= 0) {
        printf("matmul %-8s %6u %6u %6u %-11s %10.3f %8s\n", name, N, C, OC, pass, ms, "-");
        return;
    }
    double tflops = passes * 2.0 * N * C * OC / (ms * 1e-3) * 1e-12;
    printf("matmul %-8s %6u %6u %6u %-11s %10.3f %8.3f\n", name, N, C, OC, pass, ms, tflops);
}

// Times one prepared op and prints the error if it fails.
static int time_(wgpt_bench_ctx *b, const wgpt_op *op, const char *what, wgpt_microbench *r) {
    if (wgpt_microbench_time(b->g, op, &b->timing, r) == 0) return 0;
    fprintf(stderr, "wgpt bench: timing %s: %s\n", what, wgpt_gpu_error(b->g));
    return -1;
}

// An f16 copy of n floats of src (the cast kernel, run once).
static wgpt_buf *f16_copy_(wgpt_bench_ctx *b, wgpt_buf *src, uint64_t n, const char *label) {
    wgpt_buf *d = wgpt_buf_create(b->g, n * 2, label);
    wgpt_op op;
    wgpt_op_init(&op);
    wgpt_view vd = {d, 0, 0}, vs = {src, 0, 0};
    int ok = d && wgpt_cast_f16(b->g, &op, vd, vs, n) == 0;
    for (int i = 0; ok && i < op.n; i++)
        ok = wgpt_dispatch(b->g, op.steps[i].bind, op.steps[i].x, op.steps[i].y, op.steps[i].z) == 0;
    ok = ok && wgpt_gpu_finish(b->g) == 0;
    wgpt_op_free(&op);
    if (!ok) {
        fprintf(stderr, "wgpt bench: f16 copy of %s: %s\n", label, wgpt_gpu_error(b->g));
        wgpt_buf_free(d);
        return NULL;
    }
    return d;
}

// The same passes on subgroup matrices (f16 operands, f32 results), rows named
// "<pass>_f16", where the device has them and the shape takes them.
static int shape_f16_(wgpt_bench_ctx *b, const char *name, uint32_t N, uint32_t C, uint32_t OC, int has_bias,
                      int backward, wgpt_buf *inp, wgpt_buf *w, wgpt_buf *bias, wgpt_buf *dout, wgpt_buf *out,
                      wgpt_buf *dinp, wgpt_buf *dw) {
    wgpt_gpu *g = b->g;
    if (!wgpt_linear_f16_uses_sgm(g) || N % 8 || C % 8 || OC % 8) return 0;
    wgpt_buf *i16 = f16_copy_(b, inp, (uint64_t)N * C, "matmul inp f16");
    wgpt_buf *w16 = i16 ? f16_copy_(b, w, (uint64_t)OC * C, "matmul weight f16") : NULL;
    wgpt_buf *d16 = w16 && backward ? f16_copy_(b, dout, (uint64_t)N * OC, "matmul dout f16") : NULL;
    wgpt_op fwd, bin, bw;
    wgpt_op_init(&fwd), wgpt_op_init(&bin), wgpt_op_init(&bw);
    wgpt_buf *scr = NULL, *tr = NULL;
    int rc = -1;
    if (!w16 || (backward && !d16)) goto done;
    wgpt_view none = {0}, vi = {i16, 0, 0}, vw = {w16, 0, 0}, vd = {d16, 0, 0}, vb = {bias, 0, 0}, vo = {out, 0, 0};
    wgpt_view vdi = {dinp, 0, 0}, vdw = {dw, 0, 0}, vscr = {0};
    uint64_t sb = wgpt_linear_f16_scratch_bytes(g, N, C, OC);  // split-k partials
    if (sb && !(scr = wgpt_buf_create(g, sb, "matmul f16 scratch"))) {
        fprintf(stderr, "wgpt bench: f16 matmul %s: %s\n", name, wgpt_gpu_error(g));
        goto done;
    }
    vscr.buf = scr;
    // the transposed input: its transpose is in the forward's and the weight pass's times
    uint64_t tb = wgpt_linear_f16_transposed_bytes(g, N, C, OC);
    if (tb && !(tr = wgpt_buf_create(g, tb, "matmul f16 input transposed"))) {
        fprintf(stderr, "wgpt bench: f16 matmul %s: %s\n", name, wgpt_gpu_error(g));
        goto done;
    }
    wgpt_view vt = {tr, 0, 0};
    if (wgpt_linear_f16_forward(g, &fwd, vo, vi, vw, has_bias ? vb : none, N, C, OC, vt, vscr) < 0 ||
        (backward && (wgpt_linear_f16_backward_input(g, &bin, vdi, vd, vw, N, C, OC, 0, vscr) < 0 ||
                      wgpt_linear_f16_backward_weight(g, &bw, vdw, vd, vi, N, C, OC, vt, vscr) < 0))) {
        fprintf(stderr, "wgpt bench: preparing f16 matmul %s: %s\n", name, wgpt_gpu_error(g));
        goto done;
    }
    wgpt_microbench r;
    if (time_(b, &fwd, name, &r) < 0) goto done;
    row_(name, N, C, OC, "forward_f16", r.ms, 1);
    if (backward) {
        if (time_(b, &bin, name, &r) < 0) goto done;
        row_(name, N, C, OC, "bwd_input_f16", r.ms, 1);
        if (time_(b, &bw, name, &r) < 0) goto done;
        row_(name, N, C, OC, "bwd_weight_f16", r.ms, 1);
    }
    rc = 0;
done:
    wgpt_op_free(&fwd), wgpt_op_free(&bin), wgpt_op_free(&bw);
    wgpt_buf_free(i16), wgpt_buf_free(w16), wgpt_buf_free(d16), wgpt_buf_free(scr), wgpt_buf_free(tr);
    return rc;
}

// The fp32 passes, each as the model runs it: with the split-k reduce where
// it splits, the weight pass with the bias gradient where the layer has one.
static int shape_fp32_(wgpt_bench_ctx *b, const mm_shape *s, uint32_t N, wgpt_buf *inp, wgpt_buf *w, wgpt_buf *bias,
                       wgpt_buf *dout, wgpt_buf *out, wgpt_buf *dinp, wgpt_buf *dw, wgpt_buf *db, wgpt_buf *scratch) {
    wgpt_gpu *g = b->g;
    wgpt_op fwd, bwd_in, bwd_w;
    wgpt_op_init(&fwd), wgpt_op_init(&bwd_in), wgpt_op_init(&bwd_w);
    int rc = -1;
    wgpt_view none = {NULL, 0, 0}, vinp = {inp, 0, 0}, vw = {w, 0, 0}, vb = {bias, 0, 0}, vout = {out, 0, 0};
    wgpt_view vdinp = {dinp, 0, 0}, vdw = {dw, 0, 0}, vdout = {dout, 0, 0}, vdb = {db, 0, 0};
    wgpt_view vs = {scratch, 0, 0}, vdbias = s->bias ? vdb : none;
    if (wgpt_linear_forward(g, &fwd, vout, vinp, vw, s->bias ? vb : none, N, s->C, s->OC, vs) < 0 ||
        (s->backward && (wgpt_linear_backward_passes(g, &bwd_in, vdinp, vdw, vdbias, vdout, vinp, vw, N, s->C, s->OC,
                                                     0, vs, WGPT_LINEAR_PASS_INPUT) < 0 ||
                         wgpt_linear_backward_passes(g, &bwd_w, vdinp, vdw, vdbias, vdout, vinp, vw, N, s->C, s->OC,
                                                     0, vs, WGPT_LINEAR_PASS_WEIGHT) < 0))) {
        fprintf(stderr, "wgpt bench: preparing matmul %s: %s\n", s->name, wgpt_gpu_error(g));
        goto done;
    }
    wgpt_microbench r;
    if (time_(b, &fwd, s->name, &r) < 0) goto done;
    row_(s->name, N, s->C, s->OC, "forward", r.ms, 1);
    if (s->backward) {
        if (time_(b, &bwd_in, s->name, &r) < 0) goto done;
        row_(s->name, N, s->C, s->OC, "bwd_input", r.ms, 1);
        if (time_(b, &bwd_w, s->name, &r) < 0) goto done;
        row_(s->name, N, s->C, s->OC, "bwd_weight", r.ms, 1);
    }
    rc = 0;
done:
    wgpt_op_free(&fwd), wgpt_op_free(&bwd_in), wgpt_op_free(&bwd_w);
    return rc;
}

static int shape_(wgpt_bench_ctx *b, const mm_shape *s, uint32_t N) {
    wgpt_gpu *g = b->g;
    uint64_t C = s->C, OC = s->OC;
    wgpt_buf *inp = wgpt_bench_micro_buffer(b, N * C, -1, 1, "matmul inp");
    wgpt_buf *w = inp ? wgpt_bench_micro_buffer(b, OC * C, -0.05f, 0.05f, "matmul weight") : NULL;
    wgpt_buf *bias = w ? wgpt_bench_micro_buffer(b, OC, -0.1f, 0.1f, "matmul bias") : NULL;
    wgpt_buf *dout = bias && s->backward ? wgpt_bench_micro_buffer(b, N * OC, -1e-3f, 1e-3f, "matmul dout") : NULL;
    wgpt_buf *out = bias ? wgpt_buf_create(g, N * OC * 4, "matmul out") : NULL;
    wgpt_buf *dinp = s->backward ? wgpt_buf_create(g, N * C * 4, "matmul dinp") : NULL;
    wgpt_buf *dw = s->backward ? wgpt_buf_create(g, OC * C * 4, "matmul dweight") : NULL;
    wgpt_buf *db = s->backward ? wgpt_buf_create(g, OC * 4, "matmul dbias") : NULL;
    wgpt_buf *scratch = wgpt_buf_create(g, wgpt_linear_scratch_bytes(g, N, s->C, s->OC), "matmul split partials");
    int rc = -1;
    if (!bias || (s->backward && !dout)) goto done;  // the fill printed why
    if (!out || !scratch || (s->backward && (!dinp || !dw || !db))) {
        fprintf(stderr, "wgpt bench: matmul %s buffers: %s\n", s->name, wgpt_gpu_error(g));
        goto done;
    }
    if (b->only != WGPT_MICRO_F16 && shape_fp32_(b, s, N, inp, w, bias, dout, out, dinp, dw, db, scratch) < 0)
        goto done;
    if (shape_f16_(b, s->name, N, s->C, s->OC, s->bias, s->backward, inp, w, bias, dout, out, dinp, dw) < 0) goto done;
    fflush(stdout);
    rc = 0;
done:
    wgpt_buf_free(inp), wgpt_buf_free(w), wgpt_buf_free(bias), wgpt_buf_free(dout);
    wgpt_buf_free(out), wgpt_buf_free(dinp), wgpt_buf_free(dw), wgpt_buf_free(db), wgpt_buf_free(scratch);
    return rc;
}

// How many compute units the device has (WebGPU does not say): W
// workgroups of the same work (a (128 W, 1024) x (1024, 128) forward, one
// 128 x 128 tile each) take about as long as one while each has a unit to
// itself, then step up. Prints the time per W and the W before the first
// step of > 30% (the H200: 132; compare wgpt info's compute units).
static int waves_(wgpt_bench_ctx *b) {
    wgpt_gpu *g = b->g;
    const uint32_t K = 1024, OC = 128, STEP = 33, MOST = 16;  // W = 33, 66, ..., 528
    uint64_t rows = (uint64_t)STEP * MOST * 128;
    wgpt_buf *inp = wgpt_bench_micro_buffer(b, rows * K, -1, 1, "waves inp");
    wgpt_buf *w = inp ? wgpt_bench_micro_buffer(b, (uint64_t)OC * K, -0.05f, 0.05f, "waves weight") : NULL;
    wgpt_buf *out = w ? wgpt_buf_create(g, rows * OC * 4, "waves out") : NULL;
    wgpt_buf *scratch = out ? wgpt_buf_create(g, 256, "waves scratch") : NULL;
    int rc = -1;
    if (w && (!out || !scratch)) fprintf(stderr, "wgpt bench: waves buffers: %s\n", wgpt_gpu_error(g));
    double first = 0, prev = 0;
    uint32_t held = 0;
    printf("# waves: W workgroups of one 128 x 128 x %u tile each (forward, no split)\n", K);
    for (uint32_t i = 1; scratch && i <= MOST; i++) {
        uint32_t W = STEP * i;
        wgpt_view none = {NULL, 0, 0}, vi = {inp, 0, 0}, vw = {w, 0, 0}, vo = {out, 0, 0}, vs = {scratch, 0, 0};
        wgpt_op op;
        wgpt_op_init(&op);
        wgpt_microbench r;
        int prepared = wgpt_linear_forward(g, &op, vo, vi, vw, none, W * 128, K, OC, vs) == 0;
        if (!prepared) fprintf(stderr, "wgpt bench: preparing waves W=%u: %s\n", W, wgpt_gpu_error(g));
        int ok = prepared && time_(b, &op, "waves", &r) == 0;  // time_ prints its error
        wgpt_op_free(&op);
        if (!ok) break;
        printf("waves %4u %10.3f\n", W, r.ms);
        if (i == 1) first = r.ms;
        if (!held && i > 1 && r.ms > prev * 1.3 && prev < first * 1.3) held = W - STEP;
        prev = r.ms;
        if (i == MOST) rc = 0;
    }
    if (rc == 0) {
        if (held) printf("# waves: time steps up past W = %u: about %u compute units\n", held, held);
        else printf("# waves: no step up to W = %u\n", STEP * MOST);
    }
    fflush(stdout);
    wgpt_buf_free(inp), wgpt_buf_free(w), wgpt_buf_free(out), wgpt_buf_free(scratch);
    return rc;
}

int wgpt_bench_micro_matmul(wgpt_bench_ctx *b) {
    uint32_t N = wgpt_bench_micro_scaled(4096, b->scale, 64);
    uint32_t C = wgpt_bench_micro_scaled(768, b->width, 64), C3 = wgpt_bench_micro_scaled(2304, b->width, 64);
    uint32_t C4 = wgpt_bench_micro_scaled(3072, b->width, 64), Vp = wgpt_bench_micro_scaled(50304, b->width, 64);
    const mm_shape shapes[] = {
        {"qkv", C, C3, 1, 1},   {"attproj", C, C, 1, 1}, {"fc", C, C4, 1, 1},
        {"fcproj", C4, C, 1, 1}, {"logits", C, Vp, 0, 1}, {"square", N, N, 0, 0},
    };
    printf("# matmul  shape        N      C     OC pass                ms  TFLOP/s   (2*N*C*OC / time; "
           "backward = input + weight passes, 4*N*C*OC)\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (shape_(b, &shapes[i], N) < 0) return -1;
    // the wave count is a GPU's figure (on a CPU: one tile at a time)
    return b->scale < 1 || b->only == WGPT_MICRO_F16 ? 0 : waves_(b);
}
