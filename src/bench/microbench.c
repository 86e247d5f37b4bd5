// microbench.c: medians of a prepared op's GPU time (see microbench.h).
#include "bench/microbench.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
static double now_ms_(void) { return wgpt_clock_s() * 1e3; }

static int cmp_double_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double wgpt_microbench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double_);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double wgpt_microbench_kernel_ms(const wgpt_microbench *r, const char *part) {
    double s = 0;
    int hit = 0;
    for (int k = 0; k < r->nkernels; k++)
        if (strstr(r->kernel[k], part)) s += r->kernel_ms[k], hit = 1;
    return hit ? s : -1;
}

// The index of `name` in out->kernel, appended if new; -1 if the table is full.
static int kernel_slot_(wgpt_microbench *out, const char *name) {
    for (int k = 0; k < out->nkernels; k++)
        if (strcmp(out->kernel[k], name) == 0) return k;
    if (out->nkernels == WGPT_MICROBENCH_MAX_KERNELS) return -1;
    out->kernel[out->nkernels] = name;
    return out->nkernels++;
}

// One run with timestamps: total[run] and per-kernel sums kms[k * runs + run].
static int timed_run_(wgpt_gpu *g, const wgpt_op *op, wgpt_timing *t, int run, int runs, double *total,
                      double *kms, wgpt_microbench *out) {
    if (wgpt_op_record(g, op) < 0) return -1;
    int n = wgpt_gpu_timings(g, t, op->n + 1);
    if (n < 0) return -1;
    if (n != op->n)
        return wgpt_gpu_fail(g, "microbench: the op has %d dispatches but %d were timed (the profiler times at "
                                "most 2048 per submission)",
                             op->n, n);
    if (run < 0) return 0;  // warm-up
    total[run] = 0;
    for (int i = 0; i < n; i++) {
        int k = kernel_slot_(out, t[i].kernel);
        if (k < 0)
            return wgpt_gpu_fail(g, "microbench: the op uses more than %d kernels ('%s' is one too many)",
                                 WGPT_MICROBENCH_MAX_KERNELS, t[i].kernel);
        kms[k * runs + run] += t[i].ms;
        total[run] += t[i].ms;
    }
    return 0;
}

// Warm-up runs at most, whatever min_warmup_ms asks (a run of ~0 ms must end).
#define MAX_WARMUP 10000

int wgpt_microbench_time(wgpt_gpu *g, const wgpt_op *op, const wgpt_microbench_opts *o, wgpt_microbench *out) {
    memset(out, 0, sizeof *out);
    int runs = o->runs;
    if (runs < 1 || runs > WGPT_MICROBENCH_MAX_RUNS || o->warmup < 0 || o->warmup > MAX_WARMUP)
        return wgpt_gpu_fail(g, "microbench: %d runs after %d warm-up runs: runs must be in [1, %d], warm-up in "
                                "[0, %d]",
                             runs, o->warmup, WGPT_MICROBENCH_MAX_RUNS, MAX_WARMUP);
    out->timestamps = o->timestamps;
    out->runs = runs;
    // Finish (and, with timestamps, drain) whatever came before: uploads, other ops.
    if (wgpt_gpu_finish(g) < 0) return -1;
    double *total = calloc((size_t)runs, sizeof *total);
    double *kms = calloc((size_t)runs * WGPT_MICROBENCH_MAX_KERNELS, sizeof *kms);
    wgpt_timing *t = calloc((size_t)op->n + 1, sizeof *t);
    int rc = -1;
    if (!total || !kms || !t) {
        wgpt_gpu_fail(g, "microbench: out of host memory for %d runs", runs);
        goto done;
    }
    if (o->timestamps && wgpt_gpu_timings(g, t, 0) < 0) goto done;
    double start = now_ms_();
    for (int w = 0; w < MAX_WARMUP && (w < o->warmup || now_ms_() - start < o->min_warmup_ms); w++)
        if (o->timestamps ? timed_run_(g, op, t, -1, runs, total, kms, out) < 0
                          : wgpt_op_record(g, op) < 0 || wgpt_gpu_finish(g) < 0)
            goto done;
    for (int r = 0; r < runs; r++) {
        if (o->timestamps) {
            if (timed_run_(g, op, t, r, runs, total, kms, out) < 0) goto done;
            continue;
        }
        double t0 = now_ms_();
        if (wgpt_op_record(g, op) < 0 || wgpt_gpu_finish(g) < 0) goto done;
        total[r] = now_ms_() - t0;
    }
    for (int k = 0; k < out->nkernels; k++) out->kernel_ms[k] = wgpt_microbench_median(kms + (size_t)k * runs, runs);
    out->ms = wgpt_microbench_median(total, runs);  // sorted: total[0] is the fastest
    out->min_ms = total[0];
    rc = 0;
done:
    free(total), free(kms), free(t);
    return rc;
}
