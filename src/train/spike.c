// spike.c: the gradient norm spike detector (see spike.h).
#include "train/spike.h"

uint32_t wgpt_spike_record(wgpt_spike *sp, int skipped, float grad_norm) {
    if (skipped) return ++sp->skips_in_row;
    sp->skips_in_row = 0;
    sp->recent[sp->nrecent++ % WGPT_SPIKE_WINDOW] = grad_norm;
    return 0;
}

float wgpt_spike_threshold(const wgpt_spike *sp, float factor, uint32_t t, uint32_t warmup) {
    if (!(factor > 0 && sp->nrecent >= 50 && t + 1 > warmup)) return 0;
    double mean = 0;
    for (uint32_t i = 0; i < WGPT_SPIKE_WINDOW; i++) mean += sp->recent[i];
    return (float)(factor * mean / WGPT_SPIKE_WINDOW);
}
