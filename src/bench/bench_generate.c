// bench_generate.c: `wgpt bench --generate` (see bench_generate.h).
#include "bench/bench_generate.h"

#include "bench/bench_step.h"  // wgpt_bench_print_profile

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/gpt2_decode.h"
#include "util/clock.h"
#include "util/splitmix64.h"

// tokens/s with 3 or more significant digits: lavapipe decodes GPT-2 124M at about one a second
static const char *rate_(double x, char *buf, size_t n) {
    snprintf(buf, n, x < 10 ? "%.2f" : x < 100 ? "%.1f" : "%.0f", x);
    return buf;
}

// Random weights for a timing, quickly: GPT-2's initialisation (model/gpt2.h)
// draws a normal per weight, about a minute for GPT-2 774M; here each weight
// is uniform with the same standard deviation (0.02, or 0.02 / sqrt(2L) for the
// residual projections; LayerNorm gains 1, biases 0), two from one draw.
static void fast_params_(const wgpt_gpt2_config *c, float *params) {
    size_t sizes[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(c, sizes);
    const double resid = 0.02 / sqrt(2.0 * c->num_layers), s3 = sqrt(3.0);  // uniform on [-a, a]: std a / sqrt(3)
    const double stdev[WGPT_GPT2_NUM_TENSORS] = {0.02, 0.02, -1, 0, 0.02, 0, resid, 0, -1, 0, 0.02, 0, resid, 0, -1, 0};
    uint64_t st = 1337;
    float *p = params;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        float a = (float)(stdev[t] * s3), scale = a * 0x1p-31f;
        if (stdev[t] <= 0) {
            for (size_t i = 0; i < sizes[t]; i++) p[i] = stdev[t] < 0 ? 1.0f : 0.0f;
        } else {
            for (size_t i = 0; i < sizes[t]; i += 2) {
                uint64_t r = wgpt_splitmix64_next(&st);
                p[i] = (float)(int32_t)(uint32_t)r * scale;
                if (i + 1 < sizes[t]) p[i + 1] = (float)(int32_t)(uint32_t)(r >> 32) * scale;
            }
        }
        if (t == 0)  // padded vocabulary rows stay zero, as in the real initialisation
            for (size_t i = (size_t)c->vocab_size * c->channels; i < sizes[t]; i++) p[i] = 0.0f;
        p += sizes[t];
    }
}

typedef struct timing_ {
    double prefill_s, decode_s;
    uint32_t steps;
} timing_;

static uint32_t argmax_(const float *x, uint32_t n) {
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// b sequences: a prefill of np tokens each, then `steps` greedy steps of all b together.
static int run_(wgpt_decoder *d, uint32_t b, uint32_t np, uint32_t steps, const int32_t *prompt, float *logits,
                timing_ *t) {
    char err[1024];
    uint32_t V = wgpt_decoder_vocab(d), slots[256];
    int32_t next[256];
    double t0 = wgpt_clock_s();
    for (uint32_t s = 0; s < b; s++) {
        wgpt_decoder_reset(d, s);
        if (wgpt_decoder_prefill(d, s, prompt + s, np, logits + (size_t)s * V, err, sizeof err) < 0) {
            fprintf(stderr, "wgpt bench: prefill: %s\n", err);
            return -1;
        }
        slots[s] = s;
    }
    double t1 = wgpt_clock_s();
    for (uint32_t k = 0; k < steps; k++) {
        for (uint32_t s = 0; s < b; s++) next[s] = (int32_t)argmax_(logits + (size_t)s * V, V);
        if (wgpt_decoder_step(d, slots, next, b, logits, err, sizeof err) < 0) {
            fprintf(stderr, "wgpt bench: step %u: %s\n", k, err);
            return -1;
        }
    }
    t->prefill_s = t1 - t0;
    t->decode_s = wgpt_clock_s() - t1;
    t->steps = steps;
    return 0;
}

// --profile: the GPU time of each kernel in one decoding step at batch 1
// (after a prefill of the prompt), beside that step's wall time.
static int profile_step_(wgpt_decoder *d, wgpt_gpu *g, const wgpt_bench_generate_opts *o, const int32_t *prompt,
                         float *logits) {
    char err[1024];
    static wgpt_timing drain[4096];
    uint32_t slot = 0;
    int32_t next = 1;
    wgpt_decoder_reset(d, 0);
    if (wgpt_decoder_prefill(d, 0, prompt, o->prompt, logits, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt bench: prefill: %s\n", err);
        return -1;
    }
    while (wgpt_gpu_timings(g, drain, 4096) > 0) {
    }
    double t0 = wgpt_clock_s();
    if (wgpt_decoder_step(d, &slot, &next, 1, logits, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt bench: step: %s\n", err);
        return -1;
    }
    printf("profile: one decoding step at batch 1 after %u prompt tokens, %.3f ms wall (one compute pass a "
           "dispatch while profiling)\n", o->prompt, 1e3 * (wgpt_clock_s() - t0));
    wgpt_bench_print_profile(g, 1, o->gpu.kernel_stats);
    return 0;
}

static int bench_(wgpt_gpu *g, wgpt_gpt2 *m, const wgpt_bench_generate_opts *o, const int32_t *prompt, timing_ *res,
                  uint32_t *batches, int *nb) {
    char err[1024];
    uint32_t maxb = o->max_batch;
    wgpt_decoder *d = wgpt_decoder_create(m, maxb, err, sizeof err);
    if (!d) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        return -1;
    }
    printf("decoder: %u slots of %u positions, %.1f MiB of caches and rows\n", maxb, wgpt_decoder_context(d),
           wgpt_decoder_memory(d) / 1048576.0);
    fflush(stdout);  // a slow device (lavapipe) shows how far it got
    float *logits = malloc((size_t)maxb * wgpt_decoder_vocab(d) * sizeof *logits);
    int rc = logits ? 0 : -1;
    if (!logits) fprintf(stderr, "wgpt bench: out of host memory\n");
    *nb = 0;
    batches[(*nb)++] = 1;
    if (maxb > 1) batches[(*nb)++] = maxb;
    for (int i = 0; i < *nb && rc == 0; i++) {
        timing_ warm;
        rc = run_(d, batches[i], o->prompt, 4, prompt, logits, &warm);  // builds the passes, warms the caches
        if (rc == 0) rc = run_(d, batches[i], o->prompt, o->tokens, prompt, logits, &res[i]);
    }
    if (rc == 0 && o->gpu.profile) rc = profile_step_(d, g, o, prompt, logits);
    free(logits);
    wgpt_decoder_free(d);
    return rc;
}

// The reference at batch 1: a full forward over the context for each of a few tokens.
static int bench_recompute_(wgpt_gpt2 *m, const wgpt_bench_generate_opts *o, const int32_t *prompt, timing_ *t) {
    char err[1024];
    wgpt_gpt2 *full = wgpt_gpt2_create_inference(m, 1, o->config.max_seq_len, err, sizeof err);
    wgpt_decoder *d = full ? wgpt_decoder_create_recompute(full, 1, err, sizeof err) : NULL;
    float *logits = malloc(o->config.vocab_size * sizeof *logits);
    int rc = -1;
    if (!d || !logits) {
        fprintf(stderr, "wgpt bench: the full-recompute reference: %s\n", d ? "out of host memory" : err);
    } else {
        uint32_t steps = o->tokens < 8 ? o->tokens : 8;
        timing_ warm;
        rc = run_(d, 1, o->prompt, 1, prompt, logits, &warm);
        if (rc == 0) rc = run_(d, 1, o->prompt, steps, prompt, logits, t);
    }
    free(logits);
    wgpt_decoder_free(d);
    wgpt_gpt2_free(full);
    return rc;
}

int wgpt_bench_generate_run(const wgpt_bench_generate_opts *o) {
    wgpt_gpt2_config c = o->config;
    char err[2048], line[512];
    if ((uint64_t)o->prompt + (o->tokens > 4 ? o->tokens : 4) > c.max_seq_len) {
        fprintf(stderr, "wgpt bench: --gen-prompt %u + --gen-tokens %u exceed the context of %u (--seq)\n", o->prompt,
                o->tokens, c.max_seq_len);
        return -1;
    }
    wgpt_gpu *g = wgpt_gpu_open(&o->gpu, err, sizeof err);
    if (!g) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        return -1;
    }
    wgpt_gpu_describe(wgpt_gpu_get_info(g), line, sizeof line);
    printf("adapter: %s\n", line);
    wgpt_gpt2 *m = wgpt_gpt2_create_precision(g, &c, 1, c.max_seq_len < 8 ? c.max_seq_len : 8, 0, o->precision,
                                              err, sizeof err);
    size_t np = wgpt_gpt2_num_params(&c);
    float *params = malloc(np * sizeof *params);
    int32_t *prompt = malloc((o->prompt + 256) * sizeof *prompt);
    int rc = -1;
    if (!m) fprintf(stderr, "wgpt bench: %s\n", err);
    if (!m || !params || !prompt) goto done;
    fast_params_(&c, params);
    if (wgpt_gpt2_set_params(m, params) < 0) {
        fprintf(stderr, "wgpt bench: %s\n", wgpt_gpt2_error(m));
        goto done;
    }
    for (uint32_t i = 0; i < o->prompt + 256; i++) prompt[i] = (int32_t)((i * 2654435761u) % c.vocab_size);
    const char *prec = wgpt_precision_name(wgpt_gpt2_precision(m));
    printf("model: L=%u H=%u C=%u V=%u (padded %u), %zu parameters, context %u, precision %s; prompt %u tokens, "
           "%u decoded\n", c.num_layers, c.num_heads, c.channels, c.vocab_size, c.padded_vocab_size, np,
           c.max_seq_len, prec, o->prompt, o->tokens);
    timing_ res[2], ref;
    uint32_t batches[2];
    int nb = 0;
    if (bench_(g, m, o, prompt, res, batches, &nb) < 0) goto done;
    for (int i = 0; i < nb; i++) {
        double ptoks = (double)batches[i] * o->prompt, dtoks = (double)batches[i] * res[i].steps;
        char a[32], b[32];
        printf("batch %u: prefill %s tokens/s (%.2f ms for %u x %u); decode %s tokens/s (%.3f ms a step of "
               "%u tokens, %u steps)\n", batches[i], rate_(ptoks / res[i].prefill_s, a, sizeof a),
               1e3 * res[i].prefill_s, batches[i], o->prompt, rate_(dtoks / res[i].decode_s, b, sizeof b),
               1e3 * res[i].decode_s / res[i].steps, batches[i], res[i].steps);
        fflush(stdout);
    }
    if (o->recompute) {
        if (bench_recompute_(m, o, prompt, &ref) < 0) goto done;
        double ms = 1e3 * ref.decode_s / ref.steps, kv = 1e3 * res[0].decode_s / res[0].steps;
        char a[32];
        printf("full recompute (the reference), batch 1: %s tokens/s (%.2f ms a token over a context of %u, %u "
               "steps): the KV cache is %.1fx faster\n", rate_(1e3 / ms, a, sizeof a), ms, c.max_seq_len, ref.steps,
               ms / kv);
    }
    char a[32], b[32], p[32];
    printf("result: decode %s tokens/s at batch 1 (%.3f ms/token)", rate_(res[0].steps / res[0].decode_s, a, sizeof a),
           1e3 * res[0].decode_s / res[0].steps);
    if (nb > 1)
        printf(", %s tokens/s at batch %u", rate_(batches[1] * res[1].steps / res[1].decode_s, b, sizeof b), batches[1]);
    printf("; prefill %s tokens/s at batch 1 (%s, %s)\n", rate_(o->prompt / res[0].prefill_s, p, sizeof p), prec,
           wgpt_gpu_get_info(g)->name);
    rc = 0;
done:
    free(params), free(prompt);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(g);
    return rc;
}
