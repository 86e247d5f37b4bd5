// bench_step.h: `wgpt bench` without --micro: times full training steps
// (forward, backward, clipping, AdamW) of a GPT-2 model on random tokens and
// prints them (the benchmarks print their own reports: this folder is the
// top of the tree beside src/cli), with GPU time per kernel on a device
// opened with profiling.
#ifndef WGPT_BENCH_STEP_H
#define WGPT_BENCH_STEP_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "model/gpt2.h"
#include "util/err.h"  // WGPT_REFUSED

typedef struct wgpt_bench_step_opts {
    wgpt_gpt2_config config;  // padded vocabulary and context set
    uint32_t B, T, steps;     // batch, sequence, timed steps (after 2 warm-up steps)
    float peak_tflops;        // the chip's fp32 peak for MFU; 0: the one wgpt knows, if any
    wgpt_precision precision;
    wgpt_recompute recompute;
    wgpt_gpu_options gpu;     // .profile: GPU time per kernel of the last step
    int profile_calls;        // with .profile: and of each of its dispatches, in order
} wgpt_bench_step_opts;

// Runs and prints the benchmark. Returns 0, WGPT_FAILED after printing an
// error, or WGPT_REFUSED (util/err.h) after printing that the shape does not
// fit the device (naming the options).
int wgpt_bench_step_run(const wgpt_bench_step_opts *o);

// Prints the GPU time of the dispatches since the last read of the timings
// (gpu opened with profile), per kernel, largest first (each: and every
// dispatch in order first). Nothing without timestamps. stats_file: the
// driver statistics file (wgpt_gpu_options.kernel_stats), or NULL.
void wgpt_bench_print_profile(wgpt_gpu *g, int each, const char *stats_file);

#endif
