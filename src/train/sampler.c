// sampler.c: temperature, top-k and top-p sampling (see sampler.h).
#include "train/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "util/splitmix64.h"


void wgpt_sampler_init(wgpt_sampler *s, float temperature, uint32_t top_k, uint64_t seed) {
    s->temperature = temperature;
    s->top_k = top_k;
    s->top_p = 1.0f;
    s->rng = seed;
}

void wgpt_sampler_set_top_p(wgpt_sampler *s, float top_p) { s->top_p = top_p > 0 && top_p < 1 ? top_p : 1.0f; }

static const float *sort_logits_;  // qsort has no context argument in C11

// i before j: the larger logit, then the lower id.
static int before_(const float *l, uint32_t i, uint32_t j) { return l[i] > l[j] || (l[i] == l[j] && i < j); }

static int by_logit_desc_(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return before_(sort_logits_, i, j) ? -1 : before_(sort_logits_, j, i);
}

// heap[0, k) a heap whose root comes last in the order (the weakest kept); sift from i down.
static void sift_(const float *l, uint32_t *heap, size_t k, size_t i) {
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, w = i;
        if (a < k && before_(l, heap[w], heap[a])) w = a;
        if (b < k && before_(l, heap[w], heap[b])) w = b;
        if (w == i) return;
        uint32_t t = heap[i];
        heap[i] = heap[w], heap[w] = t;
        i = w;
    }
}

// idx[0, k) = the k first ids in the order, sorted: O(n log k).
static void top_k_(const float *l, size_t n, size_t k, uint32_t *idx) {
    for (size_t i = 0; i < k; i++) idx[i] = (uint32_t)i;
    for (size_t i = k / 2; i-- > 0;) sift_(l, idx, k, i);
    for (size_t i = k; i < n; i++)
        if (before_(l, (uint32_t)i, idx[0])) {
            idx[0] = (uint32_t)i;
            sift_(l, idx, k, 0);
        }
    sort_logits_ = l;
    qsort(idx, k, sizeof *idx, by_logit_desc_);
}

uint32_t wgpt_sampler_pick(wgpt_sampler *s, const float *logits, size_t n, float *p, uint32_t *idx) {
    uint32_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = (uint32_t)i;
    if (s->temperature <= 0 || n == 1) return best;
    // candidates: the top k by logit (all of them if k is 0 or >= n), sorted where top-k or top-p need it
    size_t k = n;
    if (s->top_k && s->top_k < n) {
        k = s->top_k;
        top_k_(logits, n, k, idx);
    } else {
        for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
        if (s->top_p < 1) {
            sort_logits_ = logits;
            qsort(idx, n, sizeof *idx, by_logit_desc_);
        }
    }
    double sum = 0, mx = logits[best];
    for (size_t i = 0; i < k; i++) {
        p[i] = (float)exp(((double)logits[idx[i]] - mx) / s->temperature);
        sum += p[i];
    }
    if (s->top_p < 1) {  // the shortest prefix (most likely first) holding top_p of the mass
        double want = s->top_p * sum, acc = 0;
        size_t m = 0;
        while (m < k && acc < want) acc += p[m++];
        k = m ? m : 1;
        sum = acc > 0 ? acc : p[0];
    }
    double u = (wgpt_splitmix64_next(&s->rng) >> 11) * 0x1p-53 * sum, acc = 0;
    for (size_t i = 0; i < k; i++) {
        acc += p[i];
        if (u < acc) return idx[i];
    }
    return idx[k - 1];
}
