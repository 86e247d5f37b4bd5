// layernorm.h: LayerNorm over the last axis (eps 1e-5), forward and backward,
// appended to a prepared op (kernels/02_layernorm.wgsl; the row kernels have
// flat CPU twins that model/variant.h picks on llvmpipe). Tensors larger than
// the device's maxStorageBufferBindingSize are split into row chunks.
// Views: size 0 means "to the buffer's end"; a nonzero size must cover the
// tensor. Every function returns 0, or -1 with the message in wgpt_gpu_error
// (a view smaller than its tensor returns -1 without one).
#ifndef WGPT_MODEL_LAYERNORM_H
#define WGPT_MODEL_LAYERNORM_H

#include "model/op.h"

// out = (inp - mean) * rstd * weight + bias, row by row; saves mean and rstd.
// out, inp (N, C); mean, rstd (N); weight, bias (C)
// out without a buffer: mean and rstd only (the same floats), for
// wgpt_layernorm_f16_transpose (model/precision.h) to normalise from.
int wgpt_layernorm_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view mean, wgpt_view rstd, wgpt_view inp,
                           wgpt_view weight, wgpt_view bias, uint32_t N, uint32_t C);

// res = a + b, then mean and rstd of res as wgpt_layernorm_forward without
// out saves them: the same floats. Where the vec4 GPU kernels serve (C % 4 ==
// 0, C <= 1024, views on 16 bytes) one kernel does both, so res is written
// but not read back; elsewhere wgpt_residual_forward, then the stats-only
// forward. res, a, b (N, C), res overlapping neither; mean, rstd (N)
int wgpt_layernorm_residual_stats(wgpt_gpu *g, wgpt_op *op, wgpt_view res, wgpt_view mean, wgpt_view rstd,
                                  wgpt_view a, wgpt_view b, uint32_t N, uint32_t C);

// dinp += the input gradient; dweight += sum over rows of dout * xhat;
// dbias += sum over rows of dout. Deterministic (no atomics).
// dinp, dout, inp (N, C); dweight, dbias, weight (C); mean, rstd (N) from the forward
// scratch: a buffer range of wgpt_layernorm_scratch_bytes(N, C) bytes that
// only this call's dispatches use (no other binding may share its buffer).
// With it, on GPUs, dweight/dbias are summed in two phases (blocks of rows
// into the scratch, then the blocks in order): the whole GPU works on them;
// on rows the vec4 kernels take, the first phase rides in the dinp kernel
// (one read of dout and inp). Without one (buf NULL), with a smaller one, or
// with the CPU twins (model/variant.h), one kernel walks every row of its 32
// columns.
int wgpt_layernorm_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                            wgpt_view dout, wgpt_view inp, wgpt_view weight, wgpt_view mean, wgpt_view rstd,
                            uint32_t N, uint32_t C, wgpt_view scratch);

// Bytes of scratch for the two-phase dweight/dbias of an (N, C) layernorm
// (a multiple of 256, at least 256): two partials of C floats per block of
// 16 rows (the fused kernel's; the separate phase 1 takes blocks of 64).
uint64_t wgpt_layernorm_scratch_bytes(uint32_t N, uint32_t C);

#endif
