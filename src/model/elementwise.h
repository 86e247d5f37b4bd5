// elementwise.h: the element-wise layers, GELU and the residual add, appended
// to a prepared op (kernels/05_gelu.wgsl, kernels/05_residual.wgsl), and the
// flat glue kernels of kernels/00_infrastructure.wgsl. n counts floats;
// tensors larger than the device's maxStorageBufferBindingSize are split into
// chunks of the flat range. Views: size 0 means "to the buffer's end"; a
// nonzero size must cover n floats. Every function returns 0, or -1 with the
// message in wgpt_gpu_error.
//
// Each kernel has a vec4 twin (name + "_vec4": 16-byte loads and stores,
// several per thread); it is used when wgpt_ew_vec4_ok holds, the scalar
// kernel otherwise. Both give the same results.
#ifndef WGPT_MODEL_ELEMENTWISE_H
#define WGPT_MODEL_ELEMENTWISE_H

#include "model/op.h"

// out = gelu(inp), tanh approximation. out, inp (n), e.g. (B, T, 4C)
int wgpt_gelu_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, uint64_t n);
// out16 (n halves, 2 bytes each) = f16(gelu(inp)): the f16 mode's input of
// the next matmul, with no f32 copy. n a multiple of 8, views on 16-byte boundaries.
int wgpt_gelu_forward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view out16, wgpt_view inp, uint64_t n);
// dinp = dout * gelu'(inp): OVERWRITES dinp (its one producer). dinp, inp, dout (n)
int wgpt_gelu_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view inp, wgpt_view dout, uint64_t n);
// The same dinp (bit for bit), and its f16 copy in dinp16 (n halves, the
// cast's rounding) for the f16 mode's next matmul. n a multiple of 8, views on
// 16-byte boundaries.
int wgpt_gelu_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dinp16, wgpt_view inp,
                           wgpt_view dout, uint64_t n);
// out = a + b. out, a, b (n), e.g. (B, T, C). The backward needs no kernel:
// da = db = dout, which the model gets by aliasing the gradient buffers.
int wgpt_residual_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view a, wgpt_view b, uint64_t n);

// One of 00_infrastructure.wgsl's "fill_zero", "fill_const", "scale" (1 view:
// dst) or "axpy", "copy" (2 views: dst, src; not overlapping) over n floats
// with constant c (fill value, factor, alpha; ignored by fill_zero and copy).
int wgpt_infra_add(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews, uint64_t n,
                   float c);

// The vec4 twins need n % 4 == 0 and every view offset a multiple of 16 bytes.
int wgpt_ew_vec4_ok(const wgpt_view *views, int nviews, uint64_t n);

// Workgroups of a _vec4 twin over n floats: each of its WGPT_WG threads moves
// WGPT_EW_V4_PER_THREAD vec4s (V4_PER_THREAD in the kernel files).
#define WGPT_EW_V4_PER_THREAD 4u
static inline uint64_t wgpt_ew_vec4_groups(uint64_t n) {
    uint64_t per_group = 4ull * WGPT_EW_V4_PER_THREAD * WGPT_WG;
    return (n + per_group - 1) / per_group;
}

#endif
