// cmd_bench.c: `wgpt bench`: parses options and runs the benchmark they ask
// for (src/bench): training steps on random tokens, or --micro.
#include <stdio.h>
#include <string.h>

#include "bench/bench_generate.h"  // wgpt_bench_generate_run
#include "bench/bench_micro.h"  // wgpt_bench_micro_run
#include "bench/bench_step.h"   // wgpt_bench_step_run
#include "cli/commands.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"

static const char USAGE_[] =
            "usage: wgpt bench [--batch B] [--seq T] [--steps N] [--layers L] [--heads H] [--channels C]\n"
            "                  [--vocab V] [--precision auto|fp32|f16] [--recompute auto|none|gelu|all]\n"
            "                  [--adapter N|NAME] [--profile] [--profile-calls]\n"
            "                  [--peak-tflops P] [--binding-limit BYTES]\n"
            "       wgpt bench --micro [--micro-scale F] [--micro-width W] [--micro-runs R] [--micro-wall]\n"
            "                  [--micro-splits S] [--micro-block auto|base|wide] [--micro-only matmul|f16|memory]\n"
            "                  [--adapter N|NAME]\n"
            "       wgpt bench --generate [--gen-prompt P] [--gen-tokens N] [--gen-batch B] [--gen-recompute] [--profile]\n"
            "                  [--seq T] [--layers L] [--heads H] [--channels C] [--vocab V] [--precision ...]\n\n"
            "Times full training steps (forward, backward, clipping, AdamW) of a GPT-2 model\n"
            "on random tokens. Defaults: GPT-2 124M (L=12, H=12, C=768, V=50257 padded to\n"
            "50304, T=1024), batch 4, 10 timed steps after 2 warm-up steps; it reports the median\n"
            "step (the mean beside it). --profile times every\n"
            "kernel with GPU timestamps (one compute pass per dispatch: slower steps) and prints\n"
            "where the time goes (--profile-calls: and every dispatch of the step, in order).\n"
            "--precision f16 runs the matmuls on f16 copies (tensor cores\n"
            "where the device has subgroup matrices; see model/gpt2.h); auto (the default): f16\n"
            "where the device has them, fp32 elsewhere. MFU is the achieved TFLOP/s over the\n"
            "chip's peak for what the matmuls ran on: P, or the peak wgpt knows for the adapter\n"
            "(NVIDIA H200: 67 fp32, 989 dense f16 on tensor cores); without either, no MFU.\n"
            "--recompute recomputes activations in the backward instead of keeping them\n"
            "(llm.c's -r: gelu the GELU's output, all the LayerNorms' too; auto, the default:\n"
            "none where it fits, else gelu, else all); the losses are the same bit for bit.\n"
            "--binding-limit (a test knob) binds at most BYTES at once, as a device with that\n"
            "maxStorageBufferBindingSize would: every tensor larger is bound in pieces.\n\n"
            "--micro times single kernels instead (median of R runs, default 10, after 2 warm-up\n"
            "runs; GPU timestamps where the device has them): the matmuls at GPT-2 124M's shapes\n"
            "for 4 x 1024 tokens (ms, TFLOP/s per pass) and the memory-bound kernels (GB/s, as a\n"
            "percentage of a plain copy). F scales the sizes (matmul rows 4096, 256 MiB arrays),\n"
            "W the matmuls' C and OC; both default to 1, or 1/16 on a CPU adapter (lavapipe).\n"
            "--micro-wall times with the wall clock around each submission even where the\n"
            "device has timestamps. --micro-splits S splits every matmul's sum over k in S parts\n"
            "(S = 1: none) instead of the count wgpt picks for the shape: for finding the best.\n"
            "--micro-block base|wide runs every f16 subgroup-matrix matmul on the 128 x 128 or\n"
            "the 128 x 256 block instead of the one wgpt picks for the shape (auto).\n"
            "--micro-only runs one section: the matmuls, the f16 matmuls alone (no fp32 rows, no\n"
            "wave count), or the memory-bound kernels.\n\n"
            "--generate times text generation with the KV cache instead: a prefill of P prompt\n"
            "tokens (default 128) and N decoding steps (default 128, after 4 warm-up steps) at\n"
            "batch 1 and B (default 8), greedy, on random weights; prefill and decode tokens/s.\n"
            "--gen-recompute also times the full-recompute reference (a forward over the whole\n"
            "context T for each token) at batch 1. --profile prints the GPU time of every kernel of\n"
            "one decoding step at batch 1.\n";

int wgpt_cmd_bench(int argc, char **argv) {
    wgpt_gpt2_config c = wgpt_gpt2_124m_config();
    uint32_t B = 4, T = 1024, steps = 10, micro_runs = 10, micro_splits = 0;
    int profile = 0, profile_calls = 0, micro = 0, micro_wall = 0, generate = 0, gen_recompute = 0;
    uint32_t gen_prompt = 128, gen_tokens = 128, gen_batch = 8;
    uint64_t binding_limit = 0;
    float scale = 0, width = 0, peak = 0;
    const char *adapter = NULL, *precision_s = "auto", *only = NULL, *block = NULL, *recompute_s = "auto";
    const wgpt_opt opts[] = {
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32 or f16: what the matmuls multiply"},
        {"recompute", WGPT_OPT_STR, &recompute_s, "none, gelu, all or auto: activations recomputed in the backward"},
        {"batch", WGPT_OPT_U32, &B, "sequences a step"},
        {"seq", WGPT_OPT_U32, &T, "tokens a sequence"},
        {"steps", WGPT_OPT_U32, &steps, "timed steps"},
        {"layers", WGPT_OPT_U32, &c.num_layers, "transformer blocks"},
        {"heads", WGPT_OPT_U32, &c.num_heads, "attention heads"},
        {"channels", WGPT_OPT_U32, &c.channels, "width"},
        {"vocab", WGPT_OPT_U32, &c.vocab_size, "vocabulary size (padded to a multiple of 128)"},
        {"profile", WGPT_OPT_FLAG, &profile, "GPU time per kernel"},
        {"profile-calls", WGPT_OPT_FLAG, &profile_calls, "--profile, and the GPU time of every dispatch in order"},
        {"peak-tflops", WGPT_OPT_F32, &peak, "the chip's peak for MFU, of the precision run (0: the known figure, if any)"},
        {"micro", WGPT_OPT_FLAG, &micro, "time single kernels instead"},
        {"micro-scale", WGPT_OPT_F32, &scale, "--micro sizes (0: 1, or 1/16 on a CPU)"},
        {"micro-width", WGPT_OPT_F32, &width, "--micro matmul C and OC (0: as --micro-scale's)"},
        {"micro-runs", WGPT_OPT_U32, &micro_runs, "--micro runs behind each median"},
        {"micro-wall", WGPT_OPT_FLAG, &micro_wall, "--micro with the wall clock (implies --micro)"},
        {"micro-splits", WGPT_OPT_U32, &micro_splits, "--micro: split every matmul's k in S parts (0: the default)"},
        {"micro-block", WGPT_OPT_STR, &block, "--micro: the f16 subgroup-matrix block, auto, base or wide"},
        {"micro-only", WGPT_OPT_STR, &only, "--micro: one section, matmul, f16 or memory (implies --micro)"},
        {"generate", WGPT_OPT_FLAG, &generate, "time text generation (KV cache) instead"},
        {"gen-prompt", WGPT_OPT_U32, &gen_prompt, "--generate: prompt tokens a sequence"},
        {"gen-tokens", WGPT_OPT_U32, &gen_tokens, "--generate: tokens decoded a sequence"},
        {"gen-batch", WGPT_OPT_U32, &gen_batch, "--generate: the batch beside batch 1"},
        {"gen-recompute", WGPT_OPT_FLAG, &gen_recompute, "--generate: also the full-recompute reference"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
        {"binding-limit", WGPT_OPT_COUNT, &binding_limit, "testing: bind at most this many bytes at once (0: the device's limit)"},
    };
    const wgpt_opt_range ranges[] = {
        {"batch", 1, 65536, 0},     {"seq", 1, 262144, 0},          {"steps", 1, 1000000, 0},
        {"layers", 1, 1024, 0},     {"heads", 1, 1024, 0},          {"channels", 1, 65536, 0},
        {"vocab", 1, 1u << 24, 0},  {"peak-tflops", 0, 1e6, WGPT_OPT_LT_MAX},
        {"micro-scale", 0, 16, 0},  {"micro-width", 0, 16, 0},      {"micro-runs", 1, 100000, 0},
        {"micro-splits", 0, 64, 0}, {"gen-prompt", 1, 65536, 0},   {"gen-tokens", 1, 65536, 0},
        {"gen-batch", 1, 256, 0},
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
    if (wgpt_precision_arg("bench", precision_s, &precision) < 0) return 2;
    wgpt_recompute recompute;
    if (wgpt_recompute_parse(recompute_s, &recompute) < 0) {
        fprintf(stderr, "wgpt bench: --recompute must be none, gelu, all or auto, got '%s'\n", recompute_s);
        return 2;
    }
    wgpt_gpu_options opt = {.adapter_index = -1, .profile = profile || profile_calls, .max_binding = binding_limit};
    char env_err[1024];
    if (wgpt_gpu_args_apply(&opt, adapter, env_err, sizeof env_err) < 0) {
        fprintf(stderr, "wgpt bench: %s\n", env_err);
        return 1;
    }
    wgpt_bench_micro_opts mo = {
        .scale = scale, .width = width, .runs = 10, .wall_clock = micro_wall, .splits = micro_splits};
    if (block) {
        static const char *const names[] = {"auto", "base", "wide"};
        mo.sgm_block = -1;
        for (int i = 0; i < 3 && mo.sgm_block < 0; i++)
            if (strcmp(block, names[i]) == 0) mo.sgm_block = i;
        if (mo.sgm_block < 0) {
            fprintf(stderr, "wgpt bench: --micro-block must be auto, base or wide, got '%s'\n", block);
            return 2;
        }
    }
    if (only) {
        static const char *const names[] = {"matmul", "f16", "memory"};
        for (int i = 0; i < 3 && !mo.only; i++)
            if (strcmp(only, names[i]) == 0) mo.only = i + 1;
        if (!mo.only) {
            fprintf(stderr, "wgpt bench: --micro-only must be matmul, f16 or memory, got '%s'\n", only);
            return 2;
        }
    }
    micro |= micro_wall || only || block;
    if (micro) {
        mo.runs = (int)micro_runs;
        return wgpt_bench_micro_run(&opt, &mo) < 0 ? 1 : 0;
    }
    c.padded_vocab_size = (c.vocab_size + 127) / 128 * 128;
    if (T > c.max_seq_len) c.max_seq_len = T;
    if (generate) {
        c.max_seq_len = T;
        wgpt_bench_generate_opts go = {.config = c, .prompt = gen_prompt, .tokens = gen_tokens, .max_batch = gen_batch,
                                       .recompute = gen_recompute, .precision = precision, .gpu = opt};
        return wgpt_bench_generate_run(&go) < 0 ? 1 : 0;
    }
    wgpt_bench_step_opts so = {.config = c, .B = B, .T = T, .steps = steps, .peak_tflops = peak,
                               .precision = precision, .recompute = recompute, .gpu = opt,
                               .profile_calls = profile_calls};
    int rc = wgpt_bench_step_run(&so);
    return rc == WGPT_REFUSED ? 2 : rc < 0 ? 1 : 0;
}
