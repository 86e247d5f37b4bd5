// sampler.c: temperature and top-k sampling (see sampler.h).
#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "util/splitmix64.h"


void wgpt_sampler_init(wgpt_sampler *s, float temperature, uint32_t top_k, uint64_t seed) {
    s->temperature = temperature;
    s->top_k = top_k;
    s->rng = seed;
}

static const float *sort_logits_;  // qsort has no context argument in C11

static int by_logit_desc_(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = sort_logits_[i], y = sort_logits_[j];
    if (x != y) return x > y ? -1 : 1;
    return i < j ? -1 : (i > j);
}

uint32_t wgpt_sampler_pick(wgpt_sampler *s, const float *logits, size_t n, float *p, uint32_t *idx) {
    uint32_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = (uint32_t)i;
    if (s->temperature <= 0 || n == 1) return best;
    // candidates: the top k by logit (all of them if k is 0 or >= n)
    size_t k = n;
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    if (s->top_k && s->top_k < n) {
        sort_logits_ = logits;
        qsort(idx, n, sizeof *idx, by_logit_desc_);
        k = s->top_k;
    }
    double sum = 0, mx = logits[best];
    for (size_t i = 0; i < k; i++) {
        p[i] = (float)exp(((double)logits[idx[i]] - mx) / s->temperature);
        sum += p[i];
    }
    double u = (wgpt_splitmix64_next(&s->rng) >> 11) * 0x1p-53 * sum, acc = 0;
    for (size_t i = 0; i < k; i++) {
        acc += p[i];
        if (u < acc) return idx[i];
    }
    return idx[k - 1];
}
