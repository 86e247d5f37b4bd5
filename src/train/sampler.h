// sampler.h: choosing the next token from logits: temperature, top-k, top-p
// (nucleus), and a seeded random generator so the same seed gives the same text.
#ifndef WGPT_SAMPLER_H
#define WGPT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wgpt_sampler {
    float temperature;  // 0: greedy (argmax); 1: the model's distribution
    uint32_t top_k;     // 0: all tokens; else only the k most likely
    float top_p;        // 1: all; else the fewest most likely tokens whose probability sums to >= top_p
    uint64_t rng;       // state of splitmix64, advanced by every draw
} wgpt_sampler;

// top_p starts at 1 (off).
void wgpt_sampler_init(wgpt_sampler *s, float temperature, uint32_t top_k, uint64_t seed);
// top_p in (0, 1]; the probabilities it sums are those after temperature and top-k.
void wgpt_sampler_set_top_p(wgpt_sampler *s, float top_p);
// Picks a token from logits (n). scratch must hold n floats and n uint32s
// (work space; its contents afterwards are unspecified). Deterministic for a
// given state: ties go to the lower id. One draw of the generator per pick
// unless greedy.
uint32_t wgpt_sampler_pick(wgpt_sampler *s, const float *logits, size_t n, float *scratch_f, uint32_t *scratch_i);

#endif
