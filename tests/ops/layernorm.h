// layernorm.h: the layernorm family's cases (tests/ops/layernorm.c), for the
// registry and for tests/test_layernorm.c's special cases.
#ifndef WGPT_TEST_OPS_LAYERNORM_H
#define WGPT_TEST_OPS_LAYERNORM_H

#include <stdint.h>

#include "gpu/gpu.h"

// The scratch ln_run gives the backward: wgpt_layernorm_scratch_bytes (the
// default), none, 256 bytes (too small for the cases that use it), or the
// partials of blocks of 64 rows (phase 1 apart; too small for the fused
// kernel's blocks of 16 in the cases that use it).
enum { LN_SCRATCH_FULL, LN_SCRATCH_NONE, LN_SCRATCH_SHORT, LN_SCRATCH_PART64 };

// How dweight/dbias are summed for rows of C (layernorm.c's LN_SUMS_*): one
// pass; two phases (the input kernel, then partials of 64-row blocks); or
// fused (the vec4 backward writes partials of 16-row blocks with dinp).
enum { LN_SUMS_ONE_PASS, LN_SUMS_TWO_PHASE, LN_SUMS_FUSED };

// The inputs of one case, and the reference results.
typedef struct ln_case {
    uint32_t N, C;
    float *inp, *w, *b, *dout;       // inputs
    float *dinp0, *dw0, *db0;        // gradients before the backward (random: += is checked)
    float *out, *mean, *rstd;        // reference forward
    float *dinp, *dw, *db;           // reference backward
} ln_case;

// GPU results of one forward + backward, and how dweight/dbias were summed.
typedef struct ln_got {
    float *out, *mean, *rstd, *dinp, *dw, *db;
    int sums;        // LN_SUMS_*
    uint64_t chunk;  // rows per dispatch
} ln_got;

// Random rows (an offset of 2 to 4, +-1) and their reference results.
ln_case ln_case_make(uint32_t N, uint32_t C);
void ln_case_free(ln_case *k);
// Runs the forward, then (backward) the backward on its mean/rstd, as the
// model does, with the scratch LN_SCRATCH_*; checks which kernels ran.
ln_got ln_run(wgpt_gpu *g, const ln_case *k, int backward, int scratch);
void ln_got_free(ln_got *r);
// 1 if the GPU row kernels run as their vec4 versions for rows of C on g.
int ln_vec4(const wgpt_gpu *g, uint32_t C);
// Like tu_assert_close over rows of `width`, with row n's atol scaled by
// scale[n] (the row's error amplification).
void ln_assert_rows_close(const char *what, const float *got, const float *want, uint32_t N, uint32_t width,
                          float atol, const float *scale);

#endif
