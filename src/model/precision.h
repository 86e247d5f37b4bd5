// precision.h: conversions between f32 tensors and f16 copies
// (kernels/08_precision.wgsl, docs/kernels/08_precision.md).
#ifndef WGPT_MODEL_PRECISION_H
#define WGPT_MODEL_PRECISION_H

#include <stdint.h>

#include "model/op.h"

// dst16 (n halves, 2 bytes each) = f16(src (n floats)), round to nearest even,
// +-inf past f16's range. n even; tensors past the device's binding limit are
// cast in chunks (their views' offsets multiples of 256 bytes then). Returns
// 0, or -1 with the message in wgpt_gpu_error(g).
int wgpt_cast_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint64_t n);

// dst16 (cols x rows halves) = src16 (rows x cols halves) transposed, bit for
// bit; rows and cols even, each tensor in one binding. Returns 0, or -1 with
// the message in wgpt_gpu_error(g).
int wgpt_transpose_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src16, uint32_t rows, uint32_t cols);
// dst16 (cols x rows halves) = f16(src (rows x cols floats)) transposed,
// rounded as wgpt_cast_f16 rounds; the same rules otherwise.
int wgpt_cast_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols);
// dst16 (cols x rows halves) = f16(GELU(src (rows x cols floats))) transposed:
// wgpt_gelu_forward_f16 then wgpt_transpose_f16, bit for bit, in one pass; the
// same rules otherwise.
int wgpt_gelu_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols);
// dst16 (cols x rows halves) = f16(LayerNorm(src (rows x cols floats)))
// transposed, from the row statistics a LayerNorm forward saved (mean, rstd:
// rows floats each; wgpt_layernorm_forward without out writes only those) and
// weight, bias (cols floats each): (x - mean) * rstd * weight + bias as the
// forward computes it, so wgpt_layernorm_forward then wgpt_cast_f16_transpose,
// bit for bit, in one pass; the same rules otherwise.
int wgpt_layernorm_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, wgpt_view mean,
                                 wgpt_view rstd, wgpt_view weight, wgpt_view bias, uint32_t rows, uint32_t cols);

#endif
