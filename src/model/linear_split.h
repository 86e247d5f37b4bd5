// linear_split.h: how many parts the vec4 matmuls (03_linear_vec4.wgsl)
// split their sum over k into: more workgroups for outputs of few tiles,
// against the partials' memory traffic and the reduce. Internal to linear.c.
#ifndef WGPT_LINEAR_SPLIT_H
#define WGPT_LINEAR_SPLIT_H

#include <stdint.h>

#define WGPT_V4_TILE 128u  // MB of 03_linear_vec4.wgsl: output tile edge
#define WGPT_V4_MK 8u      // MK: k per stage; splits keep whole stages

typedef struct wgpt_split {
    uint32_t n, ks;  // parts, k per part (a multiple of WGPT_V4_MK but the last)
} wgpt_split;

// The split of an (m, n) output's sum over k on a device of `units` compute
// units (0: unknown), whose partials (m x n floats each, plus m each if
// with_bias) must fit in scratch_bytes. forced != 0 asks for that many parts.
wgpt_split wgpt_split_pick(uint32_t units, uint64_t m, uint64_t n, uint32_t k, int with_bias,
                           uint64_t scratch_bytes, uint32_t forced);

// The scratch of a split's partials: `parts` (m, n) weight partials, then,
// at this byte offset (256-aligned), the bias partials (m floats each).
uint64_t wgpt_split_weight_bytes(uint32_t parts, uint64_t m, uint64_t n);

// Bytes of partials wgpt_split_pick may want for that output (0: no split).
uint64_t wgpt_split_bytes(uint32_t units, uint64_t m, uint64_t n, uint32_t k, int with_bias, uint32_t forced);

#endif
