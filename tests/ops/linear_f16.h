// linear_f16.h: the f16 linear family's cases (tests/ops/linear_f16.c), for
// the registry and for tests/test_linear_f16.c's special cases.
#ifndef WGPT_TEST_OPS_LINEAR_F16_H
#define WGPT_TEST_OPS_LINEAR_F16_H

#include <stdint.h>

#include "model/op.h"

// Dispatches op's steps on g, waits for them, and empties op.
void lf16_run(wgpt_gpu *g, wgpt_op *op);
// f16 copies of n floats, made on the GPU by cast_f16 (as the model makes
// them); groups (if not NULL): the cast's workgroups.
wgpt_buf *lf16_of(wgpt_gpu *g, const float *x, uint64_t n, const char *label);
wgpt_buf *lf16_of_groups(wgpt_gpu *g, const float *x, uint64_t n, const char *label, uint32_t *groups);
// The three passes and the bias gradient at (N, C, OC) on g against
// double-precision sums of the same f16-rounded operands.
void lf16_check_shape(wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC);

#endif
