// microbench.h: times a prepared op (model/op.h) for micro-benchmarks: the
// median over runs of its GPU time, per kernel, from GPU timestamps
// (a device opened with wgpt_gpu_options.profile), or of the wall time of
// record + wgpt_gpu_finish where the device has no timestamps.
#ifndef WGPT_MICROBENCH_H
#define WGPT_MICROBENCH_H

#include "model/op.h"

// Distinct kernels one timed op may hold (a linear backward has three).
#define WGPT_MICROBENCH_MAX_KERNELS 8
// Timed runs at most (the per-run samples live on the heap; this bounds them).
#define WGPT_MICROBENCH_MAX_RUNS 100000

// How to time: warm-up runs (at least `warmup`, and until min_warmup_ms of
// wall time has passed: a GPU that idled while the host prepared buffers
// needs time to reach its clocks), then `runs` timed runs.
typedef struct wgpt_microbench_opts {
    int timestamps;        // 1: GPU timestamps (device opened with profiling); 0: wall clock
    int warmup, runs;      // warm-up runs at least; timed runs in [1, WGPT_MICROBENCH_MAX_RUNS]
    double min_warmup_ms;  // 0: only the warm-up runs
} wgpt_microbench_opts;

typedef struct wgpt_microbench {
    int timestamps;  // 1: GPU timestamps; 0: wall clock around record + finish
    int runs;        // timed runs behind each median
    double ms;       // median over runs of one run's time (all its dispatches)
    double min_ms;   // fastest run
    int nkernels;    // kernels seen, in order of first dispatch (timestamps only; 0 with the wall clock)
    const char *kernel[WGPT_MICROBENCH_MAX_KERNELS];  // names, valid while the gpu is open
    double kernel_ms[WGPT_MICROBENCH_MAX_KERNELS];    // median over runs of the kernel's summed time in a run
} wgpt_microbench;

// Records op for the warm-up and then o->runs times, one submission and one
// wait per run, and fills *out from the timed runs. With timestamps every
// dispatch of a run must be timed (at most 2048: the profiler's query set),
// else -1. Returns 0, or -1 with the message in wgpt_gpu_error(g) (runs
// outside [1, WGPT_MICROBENCH_MAX_RUNS], more than
// WGPT_MICROBENCH_MAX_KERNELS kernels, a GPU error). Work recorded before the
// call is finished first and not counted.
int wgpt_microbench_time(wgpt_gpu *g, const wgpt_op *op, const wgpt_microbench_opts *o, wgpt_microbench *out);

// The summed per-kernel median of the kernels whose name contains `part`
// (e.g. "backward_input"); -1 if none matched or the result has no kernels.
double wgpt_microbench_kernel_ms(const wgpt_microbench *r, const char *part);

// The median of v[0..n) (the mean of the middle two for even n); sorts v in
// place. 0 for n <= 0.
double wgpt_microbench_median(double *v, int n);

#endif
