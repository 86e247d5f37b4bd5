// cross_entropy.h: the cross-entropy family's cases (tests/ops/cross_entropy.c),
// for the registry and for tests/test_cross_entropy.c's special cases.
#ifndef WGPT_TEST_OPS_CROSS_ENTROPY_H
#define WGPT_TEST_OPS_CROSS_ENTROPY_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "model/input_status.h"

typedef struct ce_shape {
    uint32_t B, T, V, Vp;
} ce_shape;

// What ce_run_ops downloads.
typedef struct ce_run {
    uint32_t BT;
    float *losses, *lse, *dlogits, mean;
    uint32_t status[WGPT_STATUS_WORDS];
    int fwd_steps, bwd_steps;
} ce_run;
void ce_run_free(ce_run *r);
// Forward, mean and backward (dloss 1/BT) on g, recorded as three prepared ops.
ce_run ce_run_ops(wgpt_gpu *g, ce_shape s, const float *logits, const uint32_t *targets);

// Random logits in [-8, 8); targets cover 0 and V-1. The padded columns hold
// NaN (even rows) or 3e4 (odd rows). itargets: the same targets as int.
void ce_make_inputs(ce_shape s, float *logits, uint32_t *targets, int *itargets);

// Inputs of shape s (ce_make_inputs) and the reference's results on them:
// losses, lse (BT), dl (BT, Vp) for dloss = 1/BT.
typedef struct ce_ref {
    float *logits, *probs, *dl, *losses, *lse, *dloss;
    uint32_t *tg;
    int *itg;
} ce_ref;
ce_ref ce_ref_case(ce_shape s);
void ce_ref_case_free(ce_ref *c);

#endif
