// clock.h: the one monotonic clock wgpt times things with (steps, benchmarks,
// GPU waits): seconds since an arbitrary start, never going backwards.
#ifndef WGPT_UTIL_CLOCK_H
#define WGPT_UTIL_CLOCK_H

#include <time.h>

static inline double wgpt_clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
