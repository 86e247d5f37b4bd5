// elementwise.h: the element-wise family's cases (tests/ops/elementwise.c),
// for the registry and for tests/test_gelu_residual.c's special cases.
#ifndef WGPT_TEST_OPS_ELEMENTWISE_H
#define WGPT_TEST_OPS_ELEMENTWISE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

enum { EW_GELU_FWD, EW_GELU_BWD, EW_RESIDUAL };
// What every buffer holds past its view's floats; no kernel may change it.
#define EW_SENTINEL 12345.5f

// A buffer holding x (n floats) at byte offset `off`, zeros before it and
// EW_SENTINEL after it; the view covers exactly x.
wgpt_view ew_place(wgpt_gpu *g, const float *x, size_t n, uint64_t off, const char *label);
// Downloads what the view covers (malloc'd) and checks that the sentinel after it survived.
float *ew_fetch(wgpt_gpu *g, wgpt_view v, size_t n, const char *what);
// Runs one op kind (EW_*) over n floats through model/elementwise.h: x (and
// y) as inputs, the output prefilled with `prefill`; every view at byte
// offset `off`. Returns the output (malloc'd).
float *ew_run(wgpt_gpu *g, int kind, const float *x, const float *y, float prefill, size_t n, uint64_t off);
// The reference of kind, with the GELU backward's += turned into = (from zero).
void ew_ref(int kind, float *want, const float *x, const float *y, size_t n);

#endif
