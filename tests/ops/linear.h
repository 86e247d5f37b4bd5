// linear.h: the fp32 linear family's cases (tests/ops/linear.c), for the
// registry and for tests/test_linear.c's special cases.
#ifndef WGPT_TEST_OPS_LINEAR_H
#define WGPT_TEST_OPS_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

// A tensor on the GPU, framed by sentinels: the view starts 64 floats (256
// bytes) into its buffer, so the wrapper's offsets are exercised; the
// sentinels around it must survive every call.
typedef struct lin_tensor {
    wgpt_buf *buf;
    size_t n;
    wgpt_view view;
} lin_tensor;
lin_tensor lin_upload(wgpt_gpu *g, const float *x, size_t n);
// Downloads the tensor into out (n floats) and checks its frame.
void lin_download(wgpt_gpu *g, const lin_tensor *t, float *out);
void lin_tensor_free(lin_tensor *t);
// n uniform floats in [-1, 1) (malloc'd).
float *lin_randv(size_t n);
// |got - want| <= (K + 2) * 2^-24 * S per element (tests/ops/linear.c).
void lin_check_bound(const char *what, const float *got, const float *want, const double *S, size_t n, int K);

// One linear layer: host inputs, reference results.
typedef struct lin_case {
    int N, C, OC, has_bias, accumulate;
    float *inp, *w, *b, *dout;          // inputs
    float *dinp0, *dw0, *db0;           // gradients before the backward
    float *out, *dinp, *dw, *db;        // reference results
    double *s_out, *s_dinp, *s_dw, *s_db;  // their magnitudes S
} lin_case;
void lin_case_init(lin_case *c, int N, int C, int OC, int has_bias, int accumulate);
void lin_case_free(lin_case *c);

// GPU results of one case; steps: dispatches appended by each wrapper.
typedef struct lin_result {
    float *out, *dinp, *dw, *db;
    int fwd_steps, bwd_steps;
} lin_result;
// Forward and backward through model/linear.h; scratch_bytes: the
// split-partials scratch handed to the wrappers (0: none, so the 64 x 64
// tiled kernels serve).
lin_result lin_run(wgpt_gpu *g, const lin_case *c, uint64_t scratch_bytes);
void lin_result_free(lin_result *r);
// Every result of r against c's reference, within the bound.
void lin_check(const char *dev, const char *variant, const lin_case *c, const lin_result *r);

#endif
