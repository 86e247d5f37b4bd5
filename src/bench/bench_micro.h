// bench_micro.h: `wgpt bench --micro`: micro-benchmarks of the kernels on the
// chosen device: the matmuls at GPT-2 124M's shapes (bench_matmul.c) and the
// memory-bound kernels against a plain copy (bench_memory.c). The output is
// one row per measurement, first word "matmul" or "memory", so that
// bench/compare.sh can pick the rows with awk.
#ifndef WGPT_BENCH_MICRO_H
#define WGPT_BENCH_MICRO_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "bench/microbench.h"

// What the sections share: the open device and how to time.
typedef struct wgpt_bench_ctx {
    wgpt_gpu *g;
    wgpt_microbench_opts timing;  // timestamps or wall clock, warm-up, runs behind every median
    double scale;                 // sizes relative to the H200 defaults: matmul rows 4096, 256 MiB arrays
    double width;                 // matmul channel dimensions (C, OC) relative to GPT-2 124M's
    uint64_t rng;                 // state of the fill's generator
    int only;                     // wgpt_bench_micro_opts.only
} wgpt_bench_ctx;

// What `wgpt bench --micro` was asked for.
typedef struct wgpt_bench_micro_opts {
    double scale;    // <= 0: 1, or 1/16 on a CPU adapter (lavapipe, whose matmuls run at a few GFLOP/s)
    double width;    // <= 0: the same default
    int runs;        // timed runs behind each median
    int wall_clock;  // time with the wall clock even where the device has timestamps
    uint32_t splits; // 0, or every matmul's split count over k (wgpt_gpu_options.matmul_splits)
    int sgm_block;   // wgpt_sgm_block: the f16 subgroup-matrix matmuls' block (0: per shape)
    int only;        // 0: every section; WGPT_MICRO_MATMUL, _F16 (the f16 matmul rows alone) or _MEMORY
} wgpt_bench_micro_opts;

enum { WGPT_MICRO_MATMUL = 1, WGPT_MICRO_F16, WGPT_MICRO_MEMORY };

// Runs the micro-benchmarks on the device opt selects and prints them (the
// benchmarks print their own reports and errors: this folder is the top of
// the tree beside src/cli). Returns 0, or -1 after printing the error to stderr.
int wgpt_bench_micro_run(const wgpt_gpu_options *opt, const wgpt_bench_micro_opts *mo);

// The sections: each prints its rows and returns 0, or -1 with the error
// printed to stderr. Buffers are freed before they return.
int wgpt_bench_micro_matmul(wgpt_bench_ctx *b);
int wgpt_bench_micro_memory(wgpt_bench_ctx *b);

// A buffer of `floats` floats filled with uniform values in [lo, hi) from
// b->rng (uploaded in pieces); NULL with the error printed to stderr.
wgpt_buf *wgpt_bench_micro_buffer(wgpt_bench_ctx *b, uint64_t floats, float lo, float hi, const char *label);

// Rounds x * scale to a multiple of `mult`, at least `mult`.
uint32_t wgpt_bench_micro_scaled(uint64_t x, double scale, uint32_t mult);

#endif
