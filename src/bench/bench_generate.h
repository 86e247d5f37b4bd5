// bench_generate.h: `wgpt bench --generate`: prefill and decode speed of the
// KV-cache decoder (model/gpt2_decode.h) at batch 1 and 8 on a GPT-2 model of
// random weights, and optionally the full-recompute reference beside it.
#ifndef WGPT_BENCH_GENERATE_H
#define WGPT_BENCH_GENERATE_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "model/gpt2.h"

typedef struct wgpt_bench_generate_opts {
    wgpt_gpt2_config config;  // padded vocabulary and context set
    uint32_t prompt;          // prompt tokens a sequence
    uint32_t tokens;          // tokens decoded a sequence (timed, after a warm-up)
    uint32_t max_batch;       // batches 1 and this (1: batch 1 only)
    int recompute;            // also time the full-recompute reference at batch 1 (a few tokens)
    wgpt_precision precision;
    wgpt_gpu_options gpu;
} wgpt_bench_generate_opts;

// Runs and prints the benchmark; the last line begins "result:". Returns 0,
// or -1 after printing an error.
int wgpt_bench_generate_run(const wgpt_bench_generate_opts *o);

#endif
