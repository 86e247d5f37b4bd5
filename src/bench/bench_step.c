// bench_step.c: `wgpt bench`'s training steps (see bench_step.h).
#include "bench/bench_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/kernel_stats.h"
#include "util/clock.h"

// qsort's order of doubles, ascending (the step times' median).
static int cmp_double_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// What a kernel computes, for the profile's sums beside PyTorch's
// (bench/pytorch_gpt2.py --profile): 0 a matmul, with its epilogues and split-k
// reduces (cuBLAS's fused epilogues and splitKreduce count there too); 1 the
// attention; 2 the rest (the bias gradients among them, as PyTorch's own
// reductions; the f16 casts and transposes the matmuls read).
static int kernel_kind_(const char *name) {
    if (strncmp(name, "attention_", 10) == 0 || strncmp(name, "decode_attention", 16) == 0) return 1;
    if (strncmp(name, "matmul_", 7) == 0 && strncmp(name, "matmul_backward_bias", 20) != 0) return 0;
    if (strncmp(name, "decode_matvec", 13) == 0) return 0;  // the decoder's matmuls (model/decode_kernels.h)
    return 2;
}

// Sums the GPU time of the last step's dispatches per kernel, largest first;
// with each, lists every dispatch first, in order.
// stats_file: options.kernel_stats (WGPT_KERNEL_STATS), or NULL.
void wgpt_bench_print_profile(wgpt_gpu *g, int each, const char *stats_file) {
    enum { MAXT = 2048, MAXK = 64 };
    static wgpt_timing t[MAXT];
    int n = wgpt_gpu_timings(g, t, MAXT);
    if (n <= 0) return;
    if (each) printf("GPU time per dispatch over the last step, in order:\n");
    for (int i = 0; each && i < n; i++) printf("  %4d %-40s %8.3f ms\n", i, t[i].kernel, t[i].ms);
    const char *names[MAXK];
    double ms[MAXK] = {0}, total = 0;
    int calls[MAXK] = {0}, nk = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nk && strcmp(names[k], t[i].kernel) != 0) k++;
        if (k == nk) {
            if (nk == MAXK) continue;
            names[nk++] = t[i].kernel;
        }
        ms[k] += t[i].ms, calls[k]++, total += t[i].ms;
    }
    for (int a = 0; a < nk; a++)  // selection sort by time, descending
        for (int b = a + 1; b < nk; b++)
            if (ms[b] > ms[a]) {
                double tm = ms[a];
                ms[a] = ms[b], ms[b] = tm;
                int tc = calls[a];
                calls[a] = calls[b], calls[b] = tc;
                const char *tn = names[a];
                names[a] = names[b], names[b] = tn;
            }
    // Registers and shared memory where the kernel statistics file collected the driver's figures.
    static wgpt_kernel_stat st[256];
    const char *path = stats_file;
    int ns = path && *path ? wgpt_kernel_stats_read(path, st, 256) : -1, any = 0;
    for (int k = 0; k < nk && ns > 0; k++) {
        const wgpt_kernel_stat *s = wgpt_kernel_stats_find(st, ns, names[k]);
        any |= s && s->registers >= 0;
    }
    printf("GPU time per kernel over the last step (%d dispatches, %.1f ms)%s:\n", n, total,
           any ? "; registers a thread and shared memory, as the driver reported them" : "");
    double kind_ms[3] = {0};
    int kind_calls[3] = {0};
    for (int k = 0; k < nk; k++) {
        int kind = kernel_kind_(names[k]);
        kind_ms[kind] += ms[k], kind_calls[kind] += calls[k];
    }
    printf("  by kind: matmuls %.2f ms (%d calls), attention %.2f ms (%d calls), the rest %.2f ms (%d calls)\n",
           kind_ms[0], kind_calls[0], kind_ms[1], kind_calls[1], kind_ms[2], kind_calls[2]);
    for (int k = 0; k < nk; k++) {
        printf("  %-32s %8.2f ms %5.1f%%  %4d calls", names[k], ms[k], 100 * ms[k] / total, calls[k]);
        const wgpt_kernel_stat *s = any ? wgpt_kernel_stats_find(st, ns, names[k]) : NULL;
        if (s && s->registers >= 0) printf("  %4ld registers %6ld B shared", s->registers, s->shared_bytes);
        printf("\n");
    }
    if (!path || !*path)
        printf("(registers and shared memory per kernel, where the driver reports them: WGPT_KERNEL_STATS=FILE)\n");
    else if (!any)
        printf("(%s: this driver reports no pipeline statistics)\n", path);
}

int wgpt_bench_step_run(const wgpt_bench_step_opts *so) {
    wgpt_gpt2_config c = so->config;
    uint32_t B = so->B, T = so->T, steps = so->steps;
    int profile = so->gpu.profile;
    float peak = so->peak_tflops;
    wgpt_precision precision = so->precision;
    const wgpt_gpu_options opt = so->gpu;
    char err[2048], line[512];
    wgpt_gpu *g = wgpt_gpu_open(&opt, err, sizeof err);
    if (!g) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        return -1;
    }
    wgpt_gpu_describe(wgpt_gpu_get_info(g), line, sizeof line);
    printf("adapter: %s\n", line);
    int dims = wgpt_gpt2_check_shape(&c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, sizeof err);
    const wgpt_gpt2_opts mo = {.training = 1, .precision = precision, .recompute = so->recompute};
    wgpt_gpt2 *m = dims ? NULL : wgpt_gpt2_create_opts(g, &c, B, T, &mo, err, sizeof err);
    if (dims) {
        fprintf(stderr, "wgpt bench: %s: change %s%s%s%s%s%s\n", err, dims & WGPT_GPT2_DIM_B ? "--batch " : "",
                dims & WGPT_GPT2_DIM_T ? "--seq " : "", dims & WGPT_GPT2_DIM_C ? "--channels " : "",
                dims & WGPT_GPT2_DIM_NH ? "--heads " : "", dims & WGPT_GPT2_DIM_L ? "--layers " : "",
                dims & WGPT_GPT2_DIM_V ? "--vocab" : "");
        wgpt_gpu_close(g);
        return WGPT_REFUSED;
    }
    if (!m) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        wgpt_gpu_close(g);
        return -1;
    }
    size_t np = wgpt_gpt2_num_params(&c);
    float *params = malloc(np * sizeof *params);
    int *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    double *times = calloc(steps, sizeof *times);  // the timed steps' ms, for the median
    int rc = -1;
    if (!params || !tok || !tgt || !times) {
        fprintf(stderr, "wgpt bench: out of host memory\n");
        goto done;
    }
    wgpt_gpt2_init_params(&c, params, 1337);
    wgpt_gpt2_bench_tokens(&c, tok, tgt, (size_t)B * T);
    if (wgpt_gpt2_set_params(m, params) < 0) {
        fprintf(stderr, "wgpt bench: %s\n", wgpt_gpt2_error(m));
        goto done;
    }
    precision = wgpt_gpt2_precision(m);  // what auto became
    uint64_t pb, ab;
    wgpt_gpt2_memory(m, &pb, &ab);
    printf("model: L=%u H=%u C=%u V=%u (padded %u), %zu parameters; batch %u x %u tokens; precision %s; "
           "recompute %s\n", c.num_layers, c.num_heads, c.channels, c.vocab_size, c.padded_vocab_size, np, B, T,
           wgpt_precision_name(precision), wgpt_recompute_name(wgpt_gpt2_recompute(m)));
    printf("GPU memory: %.1f MiB parameters+gradients+AdamW, %.1f MiB activations and scratch\n", pb / 1048576.0,
           ab / 1048576.0);
    wgpt_adamw_config o = {.lr = 6e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                           .max_grad_norm = 1.0f};
    double t0 = 0;
    for (uint32_t step = 1; step <= steps + 2; step++) {
        if (step == 3) t0 = wgpt_clock_s();
        if (profile && step == steps + 2) {  // keep only the last step's timings
            static wgpt_timing drain[4096];
            while (wgpt_gpu_timings(g, drain, 4096) > 0) {
            }
        }
        wgpt_step_result r;
        double ts = wgpt_clock_s();
        if (wgpt_gpt2_train_step(m, tok, tgt, &o, (int)step, &r) < 0) {
            fprintf(stderr, "wgpt bench: step %u: %s\n", step, wgpt_gpt2_error(m));
            goto done;
        }
        if (!isfinite(r.loss)) {  // timings of a diverged step would be reported as a success
            fprintf(stderr, "wgpt bench: step %u: the loss is %s\n", step, isnan(r.loss) ? "NaN" : "Inf");
            goto done;
        }
        double dt = (wgpt_clock_s() - ts) * 1e3;
        if (step > 2) times[step - 3] = dt;
        printf("step %3u%s: loss %.4f, grad norm %.3f, %.1f ms%s\n", step, step <= 2 ? " (warm-up)" : "", r.loss,
               r.grad_norm, dt, r.skipped ? " (skipped)" : "");
    }
    // The median step: one slow step on a shared GPU (a first-step hiccup
    // read 69.7 ms among 31-32 ms steps on an H100) moves a mean, not this.
    double mean = (wgpt_clock_s() - t0) * 1e3 / steps;
    qsort(times, steps, sizeof *times, cmp_double_);
    double ms = steps % 2 ? times[steps / 2] : (times[steps / 2 - 1] + times[steps / 2]) / 2;
    if (profile) wgpt_bench_print_profile(g, so->profile_calls, so->gpu.kernel_stats);
    double tps = (double)B * T / (ms * 1e-3);
    double flops = wgpt_gpt2_flops_per_token(&c, T);
    double tf = flops * tps * 1e-12;
    // MFU against the peak of what the matmuls ran on: f16 on tensor cores, or fp32
    const wgpt_gpu_info *info = wgpt_gpu_get_info(g);
    int tensor = precision == WGPT_PRECISION_F16 && info->has_subgroup_matrix;
    const char *peak_kind = tensor ? "f16 tensor" : precision == WGPT_PRECISION_F16 ? "fp32 (f16 without tensor cores)"
                                                                                     : "fp32";
    if (!peak) peak = tensor ? info->f16_peak_tflops : info->fp32_peak_tflops;
    char mfu[96] = "";
    if (peak > 0) snprintf(mfu, sizeof mfu, ", MFU %.1f%% of %.0f TFLOP/s %s", 100 * tf / peak, peak, peak_kind);
    uint64_t live, most;
    wgpt_gpu_memory(g, &live, &most);
    // every storage buffer the step's process made (the model's, the kernels' scratch)
    printf("GPU memory allocated: %.1f MiB at most (storage buffers)\n", most / 1048576.0);
    uint64_t by[WGPT_MEM_TAGS];
    wgpt_gpu_memory_tags(g, by);
    printf("GPU memory at its peak: parameters+gradients %.1f MiB, optimizer state %.1f MiB, activations %.1f MiB, "
           "scratch %.1f MiB\n", by[WGPT_MEM_PARAMS] / 1048576.0, by[WGPT_MEM_OPTIMIZER] / 1048576.0,
           by[WGPT_MEM_ACTIVATIONS] / 1048576.0, by[WGPT_MEM_SCRATCH] / 1048576.0);
    printf("result: %.1f ms/step, %.0f tokens/s, %.2f TFLOP/s%s (batch %u, T %u, precision %s; median of %u steps, "
           "mean %.1f ms)\n", ms, tps, tf, mfu, B, T, wgpt_precision_name(precision), steps, mean);
    rc = 0;
done:
    free(params), free(tok), free(tgt), free(times);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(g);
    return rc;
}
