// splitmix64.h: the one small seedable generator wgpt uses on the host
// (weight init, batch order, sampling): tiny, fast, and the same everywhere.
#ifndef WGPT_SPLITMIX64_H
#define WGPT_SPLITMIX64_H

#include <stdint.h>

// splitmix64's output mix: a bijection that scatters the bits of z.
static inline uint64_t wgpt_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Advances *state and returns the next 64 random bits.
static inline uint64_t wgpt_splitmix64_next(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return wgpt_mix64(*state);
}

#endif
