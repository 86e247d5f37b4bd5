// cmd_bench.c: `wgpt bench`: times GPT-2 training steps on random tokens.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_micro.h"  // wgpt_bench_micro_run
#include "cli/commands.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"
#include "util/clock.h"

static const char USAGE_[] =
            "usage: wgpt bench [--batch B] [--seq T] [--steps N] [--layers L] [--heads H] [--channels C]\n"
            "                  [--vocab V] [--precision fp32|f16] [--adapter N|NAME] [--profile] [--peak-tflops P]\n"
            "       wgpt bench --micro [--micro-scale F] [--micro-width W] [--micro-runs R] [--micro-wall]\n"
            "                  [--micro-splits S] [--adapter N|NAME]\n\n"
            "Times full training steps (forward, backward, clipping, AdamW) of a GPT-2 model\n"
            "on random tokens. Defaults: GPT-2 124M (L=12, H=12, C=768, V=50257 padded to\n"
            "50304, T=1024), batch 4, 10 timed steps after 2 warm-up steps. --profile times every\n"
            "kernel with GPU timestamps (one compute pass per dispatch: slower steps) and prints\n"
            "where the time goes. MFU is the achieved TFLOP/s over the chip's fp32 peak: P, or\n"
            "the peak wgpt knows for the adapter (NVIDIA H200: 67); without either, no MFU.\n"
            "--precision f16 runs the matmuls on f16 copies (tensor cores where the device has\n"
            "subgroup matrices; see model/gpt2.h); default fp32.\n\n"
            "--micro times single kernels instead (median of R runs, default 10, after 2 warm-up\n"
            "runs; GPU timestamps where the device has them): the matmuls at GPT-2 124M's shapes\n"
            "for 4 x 1024 tokens (ms, TFLOP/s per pass) and the memory-bound kernels (GB/s, as a\n"
            "percentage of a plain copy). F scales the sizes (matmul rows 4096, 256 MiB arrays),\n"
            "W the matmuls' C and OC; both default to 1, or 1/16 on a CPU adapter (lavapipe).\n"
            "--micro-wall times with the wall clock around each submission even where the\n"
            "device has timestamps. --micro-splits S splits every matmul's sum over k in S parts\n"
            "(S = 1: none) instead of the count wgpt picks for the shape: for finding the best.\n";

// Sums the GPU time of the last step's dispatches per kernel, largest first.
static void print_profile_(wgpt_gpu *g) {
    enum { MAXT = 2048, MAXK = 64 };
    static wgpt_timing t[MAXT];
    int n = wgpt_gpu_timings(g, t, MAXT);
    if (n <= 0) return;
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
    printf("GPU time per kernel over the last step (%d dispatches, %.1f ms):\n", n, total);
    for (int k = 0; k < nk; k++)
        printf("  %-32s %8.2f ms %5.1f%%  %4d calls\n", names[k], ms[k], 100 * ms[k] / total, calls[k]);
}

int wgpt_cmd_bench(int argc, char **argv) {
    wgpt_gpt2_config c = wgpt_gpt2_124m_config();
    uint32_t B = 4, T = 1024, steps = 10, micro_runs = 10, micro_splits = 0;
    int profile = 0, micro = 0, micro_wall = 0;
    float scale = 0, width = 0, peak = 0;
    const char *adapter = NULL, *precision_s = "fp32";
    const wgpt_opt opts[] = {
        {"precision", WGPT_OPT_STR, &precision_s, "fp32 or f16: what the matmuls multiply"},
        {"batch", WGPT_OPT_U32, &B, "sequences a step"},
        {"seq", WGPT_OPT_U32, &T, "tokens a sequence"},
        {"steps", WGPT_OPT_U32, &steps, "timed steps"},
        {"layers", WGPT_OPT_U32, &c.num_layers, "transformer blocks"},
        {"heads", WGPT_OPT_U32, &c.num_heads, "attention heads"},
        {"channels", WGPT_OPT_U32, &c.channels, "width"},
        {"vocab", WGPT_OPT_U32, &c.vocab_size, "vocabulary size (padded to a multiple of 128)"},
        {"profile", WGPT_OPT_FLAG, &profile, "GPU time per kernel"},
        {"peak-tflops", WGPT_OPT_F32, &peak, "the chip's fp32 peak for MFU (0: the known figure, if any)"},
        {"micro", WGPT_OPT_FLAG, &micro, "time single kernels instead"},
        {"micro-scale", WGPT_OPT_F32, &scale, "--micro sizes (0: 1, or 1/16 on a CPU)"},
        {"micro-width", WGPT_OPT_F32, &width, "--micro matmul C and OC (0: as --micro-scale's)"},
        {"micro-runs", WGPT_OPT_U32, &micro_runs, "--micro runs behind each median"},
        {"micro-wall", WGPT_OPT_FLAG, &micro_wall, "--micro with the wall clock (implies --micro)"},
        {"micro-splits", WGPT_OPT_U32, &micro_splits, "--micro: split every matmul's k in S parts (0: the default)"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
    };
    const wgpt_opt_range ranges[] = {
        {"batch", 1, 65536, 0},     {"seq", 1, 262144, 0},          {"steps", 1, 1000000, 0},
        {"layers", 1, 1024, 0},     {"heads", 1, 1024, 0},          {"channels", 1, 65536, 0},
        {"vocab", 1, 1u << 24, 0},  {"peak-tflops", 0, 1e6, WGPT_OPT_LT_MAX},
        {"micro-scale", 0, 16, 0},  {"micro-width", 0, 16, 0},      {"micro-runs", 1, 100000, 0},
        {"micro-splits", 0, 64, 0},
    };
    int npos = 0;
    int prc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges,
                                     (int)(sizeof ranges / sizeof ranges[0]), USAGE_, NULL, 0, &npos);
    if (prc) return prc == 1 ? 0 : 2;
    if (c.channels % c.num_heads) {
        fprintf(stderr, "wgpt bench: --channels %u is not a multiple of --heads %u\n", c.channels, c.num_heads);
        return 2;
    }
    wgpt_precision precision;
    if (wgpt_precision_parse(precision_s, &precision) < 0) {
        fprintf(stderr, "wgpt bench: --precision must be fp32 or f16, got '%s'\n", precision_s);
        return 2;
    }
    wgpt_gpu_options opt = {.adapter_index = -1, .profile = profile};
    wgpt_gpu_args_apply(&opt, adapter);
    wgpt_bench_micro_opts mo = {
        .scale = scale, .width = width, .runs = 10, .wall_clock = micro_wall, .splits = micro_splits};
    micro |= micro_wall;
    if (micro) {
        mo.runs = (int)micro_runs;
        return wgpt_bench_micro_run(&opt, &mo);
    }
    c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
    if (T > c.max_seq_len) c.max_seq_len = T;

    char err[2048], line[512];
    wgpt_gpu *g = wgpt_gpu_open(&opt, err, sizeof err);
    if (!g) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        return 1;
    }
    wgpt_gpu_describe(wgpt_gpu_get_info(g), line, sizeof line);
    printf("adapter: %s\n", line);
    int dims = wgpt_gpt2_check_shape(&c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, sizeof err);
    wgpt_gpt2 *m = dims ? NULL : wgpt_gpt2_create_precision(g, &c, B, T, 1, precision, err, sizeof err);
    if (dims) {
        fprintf(stderr, "wgpt bench: %s: change %s%s%s%s%s%s\n", err, dims & WGPT_GPT2_DIM_B ? "--batch " : "",
                dims & WGPT_GPT2_DIM_T ? "--seq " : "", dims & WGPT_GPT2_DIM_C ? "--channels " : "",
                dims & WGPT_GPT2_DIM_NH ? "--heads " : "", dims & WGPT_GPT2_DIM_L ? "--layers " : "",
                dims & WGPT_GPT2_DIM_V ? "--vocab" : "");
        wgpt_gpu_close(g);
        return 2;
    }
    if (!m) {
        fprintf(stderr, "wgpt bench: %s\n", err);
        wgpt_gpu_close(g);
        return 1;
    }
    size_t np = wgpt_gpt2_num_params(&c);
    float *params = malloc(np * sizeof *params);
    int *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    int rc = 1;
    if (!params || !tok || !tgt) {
        fprintf(stderr, "wgpt bench: out of host memory\n");
        goto done;
    }
    wgpt_gpt2_init_params(&c, params, 1337);
    wgpt_gpt2_bench_tokens(&c, tok, tgt, (size_t)B * T);
    if (wgpt_gpt2_set_params(m, params) < 0) {
        fprintf(stderr, "wgpt bench: %s\n", wgpt_gpt2_error(m));
        goto done;
    }
    uint64_t pb, ab;
    wgpt_gpt2_memory(m, &pb, &ab);
    printf("model: L=%u H=%u C=%u V=%u (padded %u), %zu parameters; batch %u x %u tokens; precision %s\n",
           c.num_layers, c.num_heads, c.channels, c.vocab_size, c.padded_vocab_size, np, B, T,
           wgpt_precision_name(precision));
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
        printf("step %3u%s: loss %.4f, grad norm %.3f, %.1f ms%s\n", step, step <= 2 ? " (warm-up)" : "", r.loss,
               r.grad_norm, (wgpt_clock_s() - ts) * 1e3, r.skipped ? " (skipped)" : "");
    }
    double ms = (wgpt_clock_s() - t0) * 1e3 / steps;
    if (profile) print_profile_(g);
    double tps = (double)B * T / (ms * 1e-3);
    double flops = wgpt_gpt2_flops_per_token(&c, T);
    double tf = flops * tps * 1e-12;
    if (!peak) peak = wgpt_gpu_get_info(g)->fp32_peak_tflops;
    char mfu[96] = "";
    if (peak > 0) snprintf(mfu, sizeof mfu, ", MFU %.1f%% of %.0f TFLOP/s fp32", 100 * tf / peak, peak);
    printf("result: %.1f ms/step, %.0f tokens/s, %.2f TFLOP/s%s (batch %u, T %u, precision %s)\n", ms, tps, tf, mfu,
           B, T, wgpt_precision_name(precision));
    rc = 0;
done:
    free(params), free(tok), free(tgt);
    wgpt_gpt2_free(m);
    wgpt_gpu_close(g);
    return rc;
}
