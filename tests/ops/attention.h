// attention.h: the attention family's cases (tests/ops/attention.c), for
// the registry and for tests/test_attention.c's special cases.
#ifndef WGPT_TEST_OPS_ATTENTION_H
#define WGPT_TEST_OPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

typedef struct att_shape {
    uint32_t B, T, C, NH;
    float range;  // q, k, v in [-range, range): larger values give peaked softmaxes
} att_shape;

typedef struct att_result {
    float *out, *lse, *dqkv;  // (B,T,C), (B,NH,T), (B,T,3C)
} att_result;
void att_result_free(att_result *r);

size_t att_n_qkv(const att_shape *s);
size_t att_n_out(const att_shape *s);
size_t att_n_lse(const att_shape *s);

// Random qkv in [-range, range) and dout in [-1, 1) (malloc'd); f16: rounded
// to f16 values (what the f16 kernels multiply, for both sides).
void att_make_inputs(const att_shape *s, float **qkv, float **dout, int f16);
// Forward then backward on g through model/attention.h (f16: the f16 calls,
// ds_kept: with the dS scratch), with the tensors grouped as the model may
// place them; dqkv starts as NaN.
void att_run(wgpt_gpu *g, const att_shape *s, const float *qkv, const float *dout, att_result *r, int f16,
             int ds_kept);

#endif
