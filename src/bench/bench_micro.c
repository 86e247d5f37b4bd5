// bench_micro.c: `wgpt bench --micro` (see bench_micro.h): the device, how
// it is timed, the 124M step's memory, then the matmul and memory sections.
#include "bench/bench_micro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2.h"
#include "model/linear.h"

#define FILL_PIECE (1u << 20)  // floats generated and uploaded at a time (4 MiB)

uint32_t wgpt_bench_micro_scaled(uint64_t x, double scale, uint32_t mult) {
    double v = (double)x * scale / mult;
    uint64_t k = v < 1 ? 1 : (uint64_t)(v + 0.5);
    if (k * mult > UINT32_MAX) k = UINT32_MAX / mult;
    return (uint32_t)(k * mult);
}

wgpt_buf *wgpt_bench_micro_buffer(wgpt_bench_ctx *b, uint64_t floats, float lo, float hi, const char *label) {
    wgpt_buf *buf = wgpt_buf_create(b->g, floats * 4, label);
    float *h = malloc((size_t)(floats < FILL_PIECE ? floats : FILL_PIECE) * sizeof *h);
    if (!buf || !h) {
        fprintf(stderr, "wgpt bench: %s (%.1f MiB): %s\n", label, floats * 4 / 1048576.0,
                buf ? "out of host memory" : wgpt_gpu_error(b->g));
        free(h);
        wgpt_buf_free(buf);
        return NULL;
    }
    for (uint64_t i0 = 0; i0 < floats; i0 += FILL_PIECE) {
        uint64_t n = floats - i0 < FILL_PIECE ? floats - i0 : FILL_PIECE;
        for (uint64_t i = 0; i < n; i++) {  // xorshift64: cheap, and random enough for timing
            b->rng ^= b->rng << 13, b->rng ^= b->rng >> 7, b->rng ^= b->rng << 17;
            h[i] = lo + (hi - lo) * (float)((b->rng >> 40) * (1.0 / 16777216.0));
        }
        if (wgpt_buf_upload(b->g, buf, i0 * 4, h, n * 4) < 0) {
            fprintf(stderr, "wgpt bench: uploading %s: %s\n", label, wgpt_gpu_error(b->g));
            free(h);
            wgpt_buf_free(buf);
            return NULL;
        }
    }
    free(h);
    // Waiting here bounds the staging memory the uploads hold.
    if (wgpt_gpu_finish(b->g) < 0) {
        fprintf(stderr, "wgpt bench: uploading %s: %s\n", label, wgpt_gpu_error(b->g));
        wgpt_buf_free(buf);
        return NULL;
    }
    return buf;
}

// The GPU memory the plain `wgpt bench` allocates (GPT-2 124M, batch 4 x
// 1024): on g, or where g splits its matmuls as asked (--micro-splits: more
// scratch), on a second device of opt's adapter that splits them as usual.
static void print_step_memory_(wgpt_gpu *g, const wgpt_gpu_options *opt) {
    wgpt_gpt2_config c = wgpt_gpt2_124m_config();
    char err[1024];
    wgpt_gpu *plain = NULL;
    if (wgpt_gpu_get_info(g)->matmul_splits) {
        wgpt_gpu_options o = *opt;
        o.matmul_splits = 0, o.profile = 0;
        if (!(plain = wgpt_gpu_open(&o, err, sizeof err))) {
            printf("GPU memory of the 124M training step: not measured (%s)\n", err);
            return;
        }
    }
    wgpt_gpt2 *m = wgpt_gpt2_create(plain ? plain : g, &c, 4, 1024, err, sizeof err);
    uint64_t pb = 0, ab = 0;
    int made = m != NULL;
    if (made) wgpt_gpt2_memory(m, &pb, &ab);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(plain);
    if (!made) {
        printf("GPU memory of the 124M training step: not measured (%s)\n", err);
        return;
    }
    printf("GPU memory of the 124M training step (batch 4 x 1024): %.1f MiB parameters+gradients+AdamW, "
           "%.1f MiB activations and scratch, %.1f MiB in all\n",
           pb / 1048576.0, ab / 1048576.0, (pb + ab) / 1048576.0);
}

// Opens the device with timestamps if it has them (and wall_clock is 0),
// else without: the wall clock.
static wgpt_gpu *open_(const wgpt_gpu_options *opt, uint32_t splits, int sgm_block, int wall_clock, int *timestamps,
                       char *why, size_t whylen) {
    char err[2048];
    wgpt_gpu_options o = *opt;
    o.matmul_splits = splits;
    o.sgm_block = (wgpt_sgm_block)sgm_block;
    wgpt_gpu *g = NULL;
    if (!wall_clock) {
        o.profile = 1;
        g = wgpt_gpu_open(&o, err, sizeof err);
    }
    *timestamps = g != NULL;
    if (g) return g;
    snprintf(why, whylen, "%s", wall_clock ? "--micro-wall asks for the wall clock" : err);
    o.profile = 0;
    g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fprintf(stderr, "wgpt bench: %s\n", err);
    return g;
}

int wgpt_bench_micro_run(const wgpt_gpu_options *opt, const wgpt_bench_micro_opts *mo) {
    char why[2048] = "", line[512];
    double scale = mo->scale, width = mo->width;
    int runs = mo->runs;
    wgpt_bench_ctx b = {.timing = {.warmup = 2, .runs = runs, .min_warmup_ms = 100}, .rng = 0x9E3779B97F4A7C15ull,
                        .only = mo->only};
    b.g = open_(opt, mo->splits, mo->sgm_block, mo->wall_clock, &b.timing.timestamps, why, sizeof why);
    if (!b.g) return -1;
    const wgpt_gpu_info *in = wgpt_gpu_get_info(b.g);
    int cpu = strcmp(in->type, "CPU") == 0;
    b.scale = scale > 0 ? scale : cpu ? 1.0 / 16 : 1.0;
    b.width = width > 0 ? width : cpu ? 1.0 / 16 : 1.0;
    wgpt_gpu_describe(in, line, sizeof line);
    printf("adapter: %s\n", line);
    printf("driver: %s | vendor %s (0x%04x), device 0x%04x | storage binding %llu MiB\n", in->driver, in->vendor,
           in->vendor_id, in->device_id, (unsigned long long)(in->max_storage_binding >> 20));
    printf("timing: %s, median of %d runs after >= %d warm-up runs and >= %.0f ms%s%s\n",
           b.timing.timestamps ? "GPU timestamps (one compute pass a dispatch)"
                               : "wall clock around record + wgpt_gpu_finish (includes the submission)",
           runs, b.timing.warmup, b.timing.min_warmup_ms, b.timing.timestamps ? "" : "; no timestamps: ", why);
    printf("scale: %g (matmul rows N = %u, memory-bound arrays %.1f MiB), width %g (matmul C, OC)%s\n", b.scale,
           wgpt_bench_micro_scaled(4096, b.scale, 64),
           wgpt_bench_micro_scaled(64u << 20, b.scale, 1024) * 4 / 1048576.0, b.width,
           cpu && (scale <= 0 || width <= 0) ? "; a CPU adapter: 1/16 by default" : "");
    print_step_memory_(b.g, opt);
    if (mo->splits) printf("splits: every matmul's k in %u parts (--micro-splits)\n", mo->splits);
    if (mo->sgm_block)
        printf("f16 subgroup-matrix block: %s everywhere (--micro-block)\n",
               mo->sgm_block == WGPT_SGM_WIDE ? "128 x 256 (matmul_sgm_wide)" : "128 x 128 (matmul_sgm)");
    fflush(stdout);
    int mm = mo->only != WGPT_MICRO_MEMORY, mem = !mo->only || mo->only == WGPT_MICRO_MEMORY;
    int rc = (mm && wgpt_bench_micro_matmul(&b) < 0) || (mem && wgpt_bench_micro_memory(&b) < 0) ? -1 : 0;
    wgpt_gpu_close(b.g);
    return rc;
}
