// schedule.c: learning-rate schedule (see schedule.h).
#include "train/schedule.h"

#include <math.h>

float wgpt_lr_at(const wgpt_lr_schedule *s, uint32_t t) {
    double max = s->max_lr, min = s->max_lr * s->min_lr_frac;
    if (t == 0) t = 1;
    if (s->warmup && t <= s->warmup) return (float)(max * t / s->warmup);
    if (t >= s->total || s->total <= s->warmup) return (float)min;
    double progress = (double)(t - s->warmup) / (double)(s->total - s->warmup);
    return (float)(min + (max - min) * 0.5 * (1.0 + cos(3.14159265358979323846 * progress)));
}
