// optimizer.h: the optimizer family's cases (tests/ops/optimizer.c), for
// the registry and for tests/test_optimizer.c's special cases.
#ifndef WGPT_TEST_OPS_OPTIMIZER_H
#define WGPT_TEST_OPS_OPTIMIZER_H

#include <stdint.h>

#include "model/optimizer.h"

// The norm of x (n floats) times grad_scale, x placed `pad` floats into its
// buffer (the floats before it are NaN: reading them would set the flag);
// also checks the spike threshold just under and over the norm.
wgpt_optim_state opt_norm_run(wgpt_gpu *g, const float *x, uint64_t n, uint64_t pad, float max_norm,
                              float grad_scale);
// Relative bound of the norm of n floats on g (tests/ops/optimizer.c).
double opt_norm_rtol(wgpt_gpu *g, uint64_t n);

// Flat arrays, norm and AdamW of one test model on device g.
typedef struct opt_rig {
    wgpt_gpu *g;
    uint64_t n;
    wgpt_buf *p, *gr, *m, *v, *scratch, *state;
    wgpt_op op;
    wgpt_adamw *h;
} opt_rig;
void opt_rig_init(opt_rig *r, wgpt_gpu *g, uint64_t n, float max_norm, const wgpt_adamw_range *ranges, int nranges,
                  const wgpt_adamw_hparams *hp);
void opt_rig_free(opt_rig *r);
// Uploads the arrays given (NULL: left as they are).
void opt_rig_put(opt_rig *r, const float *p, const float *g, const float *m, const float *v);
void opt_rig_get(opt_rig *r, float *p, float *m, float *v, wgpt_optim_state *s);

// Ranges out of order, misaligned offsets, two adjacent ranges with the same
// decay (merged), a gap that must stay untouched, and ranges longer than a
// 64 KiB binding. Total OPT_ADAMW_N floats.
extern const wgpt_adamw_range OPT_RANGES[];
#define OPT_N_RANGES 5
#define OPT_ADAMW_N 40001u

#endif
