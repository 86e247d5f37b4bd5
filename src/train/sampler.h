// sampler.h: choosing the next token from logits: temperature, top-k, and a
// seeded random generator so the same seed gives the same text.
#ifndef WGPT_SAMPLER_H
#define WGPT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_sampler {
    float temperature;  // 0: greedy (argmax); 1: the model's distribution
    uint32_t top_k;     // 0: all tokens; else only the k most likely
    uint64_t rng;       // state of splitmix64, advanced by every draw
} wgpt_sampler;

void wgpt_sampler_init(wgpt_sampler *s, float temperature, uint32_t top_k, uint64_t seed);
// Picks a token from logits (n). scratch must hold n floats and n uint32s
// (work space; its contents afterwards are unspecified). Deterministic for a
// given state: ties go to the lower id.
uint32_t wgpt_sampler_pick(wgpt_sampler *s, const float *logits, size_t n, float *scratch_f, uint32_t *scratch_i);

#endif
