// schedule.h: the learning-rate schedule: linear warmup from 0, then cosine
// decay to a floor (as in GPT-2 / llm.c training).
#ifndef WGPT_SCHEDULE_H
#define WGPT_SCHEDULE_H

#include <stdint.h>

typedef struct wgpt_lr_schedule {
    float max_lr;       // reached at the end of warmup
    float min_lr_frac;  // the floor, as a fraction of max_lr (e.g. 0.1)
    uint32_t warmup;    // steps of linear warmup
    uint32_t total;     // steps of the whole run; the cosine ends here
} wgpt_lr_schedule;

// Learning rate at 1-based step t: max_lr * t / warmup during warmup, then
// min + (max - min) * (1 + cos(pi * progress)) / 2, and the floor past total.
float wgpt_lr_at(const wgpt_lr_schedule *s, uint32_t t);

#endif
