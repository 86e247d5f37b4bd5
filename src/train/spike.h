// spike.h: the gradient norm spike detector of a training run: the norms of
// the last good steps give the threshold above which a step's update is
// skipped (--spike-factor), and skipped steps are counted in a row
// (--max-skips).
#ifndef WGPT_SPIKE_H
#define WGPT_SPIKE_H

#include <stdint.h>

#define WGPT_SPIKE_WINDOW 20  // good steps whose mean norm sets the threshold

typedef struct wgpt_spike {
    float recent[WGPT_SPIKE_WINDOW];  // norms of the last good steps
    uint32_t nrecent, skips_in_row;
} wgpt_spike;

// Records a step: skipped, or good with its gradient norm. Returns the
// number of steps skipped in a row, this one included (0 for a good step).
uint32_t wgpt_spike_record(wgpt_spike *sp, int skipped, float grad_norm);

// The norm above which the update after step t is skipped: factor times the
// mean of the window, once 50 good steps have been seen and t + 1 is past
// the warmup (early training moves the norm a lot); 0 (no threshold) before,
// or when factor is 0.
float wgpt_spike_threshold(const wgpt_spike *sp, float factor, uint32_t t, uint32_t warmup);

#endif
