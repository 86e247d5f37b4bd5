// bench_memory.c: the memory-bound rows of `wgpt bench --micro`: a copy
// (00_infrastructure's `copy`, as its vec4 twin copy_vec4) as the reference
// bandwidth, then axpy, GELU, the residual add, the f16 casts and
// transposes, LayerNorm, AdamW and the cross-entropy forward.
// GB/s counts each byte a kernel must read or write once (its compulsory
// traffic), over the median time; re-reads that hit a cache are not counted.
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_micro.h"
#include "model/cross_entropy.h"
#include "model/elementwise.h"
#include "model/layernorm.h"
#include "model/optimizer.h"
#include "model/precision.h"
#include "bench/microbench.h"

typedef struct mem_arrays {
    uint64_t n;       // floats in each of a, b, c, d
    wgpt_buf *a, *b;  // random inputs
    wgpt_buf *c, *d;  // outputs (zero)
    double copy_gbs;  // the reference, once measured
} mem_arrays;

// Appends a 00_infrastructure kernel over n floats: dst, src (its vec4 twin
// where the sizes allow: wgpt_infra_add).
static int flat_(wgpt_gpu *g, wgpt_op *op, const char *kernel, wgpt_buf *dst, wgpt_buf *src, uint64_t n, float c) {
    wgpt_view v[2] = {{dst, 0, n * 4}, {src, 0, n * 4}};
    return wgpt_infra_add(g, op, kernel, v, 2, n, c);
}

// Times op (prepared: prep_rc 0), prints its row and frees it. bytes: read + written.
static int run_(wgpt_bench_ctx *b, mem_arrays *m, wgpt_op *op, int prep_rc, const char *name, double bytes) {
    wgpt_microbench r;
    int rc = prep_rc < 0 ? -1 : wgpt_microbench_time(b->g, op, &b->timing, &r);
    wgpt_op_free(op);
    wgpt_op_init(op);
    if (rc < 0) {
        fprintf(stderr, "wgpt bench: %s: %s\n", name, wgpt_gpu_error(b->g));
        return -1;
    }
    double gbs = r.ms > 0 ? bytes / (r.ms * 1e-3) * 1e-9 : 0;
    if (!m->copy_gbs) m->copy_gbs = gbs;
    printf("memory %-16s %10.1f %10.3f %9.1f %6.1f%%\n", name, bytes * 1e-6, r.ms, gbs,
           m->copy_gbs > 0 ? 100 * gbs / m->copy_gbs : 0.0);
    fflush(stdout);
    return 0;
}

// Copy, axpy, GELU, residual, LayerNorm, AdamW over the four arrays.
static int arrays_(wgpt_bench_ctx *b, mem_arrays *m) {
    wgpt_gpu *g = b->g;
    uint64_t n = m->n, C = 768, N = n / C;
    wgpt_view A = {m->a, 0, 0}, B = {m->b, 0, 0}, Cv = {m->c, 0, 0}, D = {m->d, 0, 0};
    wgpt_op op;
    wgpt_op_init(&op);
    if (run_(b, m, &op, flat_(g, &op, "copy", m->b, m->a, n, 0), "copy", 8.0 * n) < 0 ||
        run_(b, m, &op, flat_(g, &op, "axpy", m->b, m->a, n, 0.5f), "axpy", 12.0 * n) < 0 ||
        run_(b, m, &op, wgpt_gelu_forward(g, &op, B, A, n), "gelu_forward", 8.0 * n) < 0 ||
        run_(b, m, &op, wgpt_gelu_backward(g, &op, Cv, A, B, n), "gelu_backward", 12.0 * n) < 0 ||
        run_(b, m, &op, wgpt_residual_forward(g, &op, Cv, A, B, n), "residual_forward", 12.0 * n) < 0)
        return -1;
    // The f16 mode's conversions, as (rows, 3072) matrices (fch's shape at
    // GPT-2 124M): into the f16 halves of c, as they are or transposed.
    uint64_t cols = 3072, rows = n / cols / 64 * 64, e = rows * cols;
    if (rows && (run_(b, m, &op, wgpt_cast_f16(g, &op, Cv, A, e), "cast_f16", 6.0 * e) < 0 ||
                 run_(b, m, &op, wgpt_gelu_forward_f16(g, &op, Cv, A, e), "gelu_forward_f16", 6.0 * e) < 0 ||
                 run_(b, m, &op, wgpt_transpose_f16(g, &op, Cv, A, (uint32_t)rows, (uint32_t)cols), "transpose_f16",
                      4.0 * e) < 0 ||
                 run_(b, m, &op, wgpt_cast_f16_transpose(g, &op, Cv, A, (uint32_t)rows, (uint32_t)cols),
                      "cast_f16_transp", 6.0 * e) < 0 ||
                 run_(b, m, &op, wgpt_gelu_f16_transpose(g, &op, Cv, A, (uint32_t)rows, (uint32_t)cols),
                      "gelu_f16_transp", 6.0 * e) < 0))
        return -1;
    // LayerNorm: rows of GPT-2's 768 channels; writes out, mean and rstd.
    wgpt_buf *stats = wgpt_buf_create(g, N * 8 + 256, "layernorm mean, rstd");
    wgpt_buf *wb = wgpt_bench_micro_buffer(b, 2048, 0.5f, 1.5f, "layernorm weight, bias");
    int rc = -1;
    if (!stats || !wb) {
        if (!stats) fprintf(stderr, "wgpt bench: layernorm statistics: %s\n", wgpt_gpu_error(g));
        goto done;
    }
    uint64_t rstd_at = (N * 4 + 255) / 256 * 256;
    int prep = wgpt_layernorm_forward(g, &op, (wgpt_view){m->b, 0, N * C * 4}, (wgpt_view){stats, 0, N * 4},
                                      (wgpt_view){stats, rstd_at, N * 4}, (wgpt_view){m->a, 0, N * C * 4},
                                      (wgpt_view){wb, 0, C * 4}, (wgpt_view){wb, 1024 * 4, C * 4}, (uint32_t)N,
                                      (uint32_t)C);
    if (run_(b, m, &op, prep, "layernorm_fwd", 8.0 * N * C + 8.0 * N + 8.0 * C) < 0) goto done;
    // AdamW over n parameters: reads params, grads, m, v; writes params, m, v.
    // m = c, v = d start at zero (v must stay >= 0); params = a, grads = b.
    const wgpt_optim_state st = {0, 1, 1, 0};
    wgpt_buf *state = wgpt_buf_create(g, sizeof st, "adamw state");
    if (!state || wgpt_buf_upload(g, state, 0, &st, sizeof st) < 0 || wgpt_buf_zero(g, m->c, 0, n * 4) < 0) {
        fprintf(stderr, "wgpt bench: adamw state: %s\n", wgpt_gpu_error(g));
        wgpt_buf_free(state);
        goto done;
    }
    wgpt_adamw_range range = {0, n, 0.1f};
    wgpt_adamw_hparams hp = {6e-4f, 0.9f, 0.95f, 1e-8f, 1};
    wgpt_adamw *h = NULL;
    prep = wgpt_adamw_update(g, &op, A, B, Cv, D, (wgpt_view){state, 0, 0}, &range, 1, &hp, &h);
    rc = run_(b, m, &op, prep, "adamw", 28.0 * n + sizeof st);
    wgpt_adamw_free(h);
    wgpt_buf_free(state);
done:
    wgpt_op_free(&op);
    wgpt_buf_free(stats), wgpt_buf_free(wb);
    return rc;
}

// Cross-entropy forward over (BT, 50304) logits (V 50257 real columns):
// reads the real logits and the targets, writes losses and lse.
static int cross_entropy_(wgpt_bench_ctx *b, mem_arrays *m) {
    wgpt_gpu *g = b->g;
    uint32_t BT = wgpt_bench_micro_scaled(4096, b->scale, 64), V = 50257, Vp = 50304;
    wgpt_buf *logits = wgpt_bench_micro_buffer(b, (uint64_t)BT * Vp, -4, 4, "cross-entropy logits");
    // targets (read) in their own buffer: WebGPU refuses a dispatch that binds
    // one buffer both read-only and writable.
    wgpt_buf *tbuf = wgpt_buf_create(g, BT * 4ull, "cross-entropy targets");
    wgpt_buf *small = tbuf ? wgpt_buf_create(g, 2ull * BT * 4 + 1024, "cross-entropy losses, lse, status") : NULL;
    uint32_t *tgt = malloc((size_t)BT * sizeof *tgt);
    wgpt_op op;
    wgpt_op_init(&op);
    int rc = -1;
    if (!logits || !small || !tgt) {
        if (logits)  // else the fill said why
            fprintf(stderr, "wgpt bench: cross-entropy buffers: %s\n",
                    small ? "out of host memory" : wgpt_gpu_error(g));
        goto done;
    }
    for (uint32_t i = 0; i < BT; i++) {
        b->rng ^= b->rng << 13, b->rng ^= b->rng >> 7, b->rng ^= b->rng << 17;
        tgt[i] = (uint32_t)(b->rng % V);
    }
    uint64_t row = ((uint64_t)BT * 4 + 255) / 256 * 256;  // 256-byte aligned slices of `small`
    wgpt_view targets = {tbuf, 0, BT * 4ull}, losses = {small, 0, BT * 4ull}, lse = {small, row, BT * 4ull};
    wgpt_view status = {small, 2 * row, WGPT_STATUS_BYTES};
    if (wgpt_buf_upload(g, tbuf, 0, tgt, BT * 4ull) < 0) {
        fprintf(stderr, "wgpt bench: cross-entropy targets: %s\n", wgpt_gpu_error(g));
        goto done;
    }
    int prep = wgpt_crossentropy_forward(g, &op, losses, lse, status, (wgpt_view){logits, 0, 0}, targets, BT, V, Vp);
    rc = run_(b, m, &op, prep, "crossentropy_fwd", 4.0 * BT * V + 12.0 * BT);
done:
    wgpt_op_free(&op);
    wgpt_buf_free(logits), wgpt_buf_free(tbuf), wgpt_buf_free(small);
    free(tgt);
    return rc;
}

// What a dispatch costs by itself: DISPATCHES copies of 64 floats (one
// workgroup each) in one run. On lavapipe that is the thread pool's wake-up
// and the state each dispatch sets (the demo's model pays it about 115
// times a step); on a GPU, the gap between dispatches.
#define DISPATCHES 256
static int dispatch_floor_(wgpt_bench_ctx *b) {
    wgpt_buf *src = wgpt_bench_micro_buffer(b, 64, -1, 1, "dispatch src");
    wgpt_buf *dst = src ? wgpt_buf_create(b->g, 64 * 4, "dispatch dst") : NULL;
    wgpt_op op;
    wgpt_op_init(&op);
    int rc = dst ? 0 : -1;
    for (int i = 0; i < DISPATCHES && rc == 0; i++) rc = flat_(b->g, &op, "copy", dst, src, 64, 0);
    wgpt_microbench r;
    if (rc == 0) rc = wgpt_microbench_time(b->g, &op, &b->timing, &r);
    wgpt_op_free(&op);
    wgpt_buf_free(src), wgpt_buf_free(dst);
    if (rc < 0) {
        fprintf(stderr, "wgpt bench: dispatch floor: %s\n", wgpt_gpu_error(b->g));
        return -1;
    }
    printf("# dispatch floor: %d dispatches of a 64-float copy: %.3f ms, %.1f us a dispatch (%s)\n", DISPATCHES, r.ms,
           r.ms * 1e3 / DISPATCHES, r.timestamps ? "GPU timestamps, a compute pass each" : "wall clock");
    fflush(stdout);
    return 0;
}

int wgpt_bench_micro_memory(wgpt_bench_ctx *b) {
    mem_arrays m = {.n = wgpt_bench_micro_scaled(64u << 20, b->scale, 1024)};
    printf("# memory  kernel             MB moved         ms      GB/s  of copy   (bytes read + written once / "
           "time; 1 MB = 1e6 bytes)\n");
    m.a = wgpt_bench_micro_buffer(b, m.n, -1, 1, "memory a");
    m.b = m.a ? wgpt_bench_micro_buffer(b, m.n, -1, 1, "memory b") : NULL;
    m.c = m.b ? wgpt_buf_create(b->g, m.n * 4, "memory c") : NULL;
    m.d = m.c ? wgpt_buf_create(b->g, m.n * 4, "memory d") : NULL;
    int rc = -1;
    if (m.b && !m.d) fprintf(stderr, "wgpt bench: memory arrays: %s\n", wgpt_gpu_error(b->g));
    if (m.d) rc = arrays_(b, &m);
    wgpt_buf_free(m.a), wgpt_buf_free(m.b), wgpt_buf_free(m.c), wgpt_buf_free(m.d);
    return rc < 0 || cross_entropy_(b, &m) < 0 ? -1 : dispatch_floor_(b);
}
