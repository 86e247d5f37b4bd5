// elementwise.h: the element-wise layers, GELU and the residual add, appended
// to a prepared op (kernels/05_gelu.wgsl, kernels/05_residual.wgsl). n counts
// floats; tensors larger than the device's maxStorageBufferBindingSize are
// split into chunks of the flat range. Views: size 0 means "to the buffer's
// end"; a nonzero size must cover n floats. Every function returns 0, or -1
// with the message in wgpt_gpu_error (a view smaller than n floats returns -1
// without one).
#ifndef WGPT_MODEL_ELEMENTWISE_H
#define WGPT_MODEL_ELEMENTWISE_H

#include "model/op.h"

// out = gelu(inp), tanh approximation. out, inp (n), e.g. (B, T, 4C)
int wgpt_gelu_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, uint64_t n);
// dinp = dout * gelu'(inp): OVERWRITES dinp (its one producer). dinp, inp, dout (n)
int wgpt_gelu_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view inp, wgpt_view dout, uint64_t n);
// out = a + b. out, a, b (n), e.g. (B, T, C). The backward needs no kernel:
// da = db = dout, which the model gets by aliasing the gradient buffers.
int wgpt_residual_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view a, wgpt_view b, uint64_t n);

#endif
