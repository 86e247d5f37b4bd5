// linear_sgm.h: the linear layer's matmuls on subgroup matrices (tensor cores):
// kernels/03_linear_sgm.wgsl, on devices that offer them (docs/kernels/03_linear_sgm.md).
// Operands are f16 (views of halves, two a u32: 2 bytes an element), results
// f32; every dimension a multiple of 8; each tensor in one binding (no row
// chunks: a caller whose tensors are larger uses the f32 kernels). The
// fragment shape is the device's (wgpt_gpu_info.sgm_config).
//
// Each appends one dispatch to op and returns 0, or -1 with the message in
// wgpt_gpu_error(g).
#ifndef WGPT_LINEAR_SGM_H
#define WGPT_LINEAR_SGM_H

#include <stdint.h>

#include "model/op.h"

// 1 if g compiles 03_linear_sgm.wgsl (subgroup matrices and an f16 -> f32 configuration).
int wgpt_linear_sgm_available(const wgpt_gpu *g);

// out (N, OC) f32 = inp16 (N, C) @ weight16 (OC, C)^T + bias (OC, f32; bias.buf NULL: none).
int wgpt_linear_sgm_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp16, wgpt_view weight16,
                            wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC);
// dinp (N, C) f32 = (or += with accumulate) dout16 (N, OC) @ weight16 (OC, C).
int wgpt_linear_sgm_backward_input(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout16, wgpt_view weight16,
                                   uint32_t N, uint32_t C, uint32_t OC, int accumulate);
// dweight (OC, C) f32 += dout16 (N, OC)^T @ inp16 (N, C).
int wgpt_linear_sgm_backward_weight(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16, wgpt_view inp16,
                                    uint32_t N, uint32_t C, uint32_t OC);

#endif
