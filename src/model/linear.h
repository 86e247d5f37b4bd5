// linear.h: the linear layer (llm.c's matmul), forward and backward, as
// prepared dispatches of the tiled kernels in kernels/03_linear.wgsl, or of
// their flat CPU twins where model/variant.h says so
// (docs/kernels/03_linear.md).
//
// Tensors are row-major f32 views: inp (N, C), weight (OC, C), bias (OC),
// out (N, OC). A view of size 0 reaches to its buffer's end; its offset must
// be a multiple of the device's storage offset alignment (256 always works).
// Tensors larger than the device's maxStorageBufferBindingSize (the GPT-2
// logits: wte (50304, 768) is 154 MB) are split into chunks of 64-row
// multiples, one dispatch per chunk pair, summed in a fixed order.
// A written tensor (out, dinp, dweight, dbias) must not overlap any tensor it
// is computed from: WebGPU refuses a dispatch whose writable binding overlaps
// another binding of the same buffer.
//
// scratch: a buffer range of wgpt_linear_scratch_bytes(g, N, C, OC) bytes that
// only the layer's own dispatches use (no other binding may share its
// buffer). With it, on GPUs, shapes whose C and OC are multiples of 4 take
// the register-tiled vec4 kernels of 03_linear_vec4.wgsl, splitting the sum
// over k where the output has few tiles; a smaller scratch splits less, and
// without one (buf NULL) the 64 x 64 tiled kernels serve.
//
// Both functions append to op (see model/op.h) and return 0, or -1 with the
// message in wgpt_gpu_error(g); after -1, op may hold some of the steps and
// should be freed.
#ifndef WGPT_LINEAR_H
#define WGPT_LINEAR_H

#include <stdint.h>

#include "model/op.h"

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC). bias.buf NULL: no bias.
int wgpt_linear_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view weight, wgpt_view bias,
                        uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch);

// dinp (N, C) = dout (N, OC) @ weight (OC, C), or += when accumulate_dinp;
// dweight (OC, C) += dout^T @ inp (N, C);
// dbias (OC) += the column sums of dout; dbias.buf NULL: skipped.
int wgpt_linear_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                         wgpt_view dout, wgpt_view inp, wgpt_view weight, uint32_t N, uint32_t C, uint32_t OC,
                         int accumulate_dinp, wgpt_view scratch);

// dbias (OC) += the column sums of dout (N, OC) alone (the f16 mode's matmuls
// leave the bias to this). On GPUs, with OC a multiple of 4 and a scratch of
// wgpt_linear_bias_scratch_bytes: rows in parts summed side by side, then
// the parts in order (matmul_backward_bias_part, matmul_split_reduce); else
// (scratch.buf NULL, a CPU, other shapes) one workgroup per 32 columns.
int wgpt_linear_backward_bias(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout, uint32_t N, uint32_t OC,
                              wgpt_view scratch);
uint64_t wgpt_linear_bias_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t OC);
// 1 if wgpt_linear_backward_bias and the two passes below run on the GPU
// path (matmul_backward_bias_part*) for an (N, OC) gradient with
// scratch_bytes of scratch, 0 if they take the other one (CPU kernels, OC
// not a multiple of 4, too little scratch, N x OC floats past one binding).
int wgpt_linear_bias_on_gpu(const wgpt_gpu *g, uint32_t N, uint32_t OC, uint64_t scratch_bytes);

// wgpt_linear_backward_bias, and dout16 (N x OC halves) = dout rounded to f16
// as wgpt_cast_f16 rounds it: the f16 mode's two uses of a linear's gradient.
// Where the GPU path above runs, in one pass over dout
// (matmul_backward_bias_part_f16: the same sums, the same halves); else the
// cast and the bias one after the other.
int wgpt_linear_backward_bias_cast(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dout16, wgpt_view dout,
                                   uint32_t N, uint32_t OC, wgpt_view scratch);
// wgpt_linear_backward_bias_cast of g = GELU'(pre) * dout (the GELU's input
// gradient from its output's, gelu_backward_f16's product): dbias += its
// column sums, dg16 = g rounded to f16. Where the GPU path above runs
// (wgpt_linear_bias_on_gpu), one pass (matmul_backward_bias_part_gelu_f16)
// that writes no f32 g and leaves dg alone (it may have no buffer); else
// wgpt_gelu_backward_f16 into dg (N x OC floats, checked) and dg16, then the
// bias of dg.
int wgpt_linear_backward_bias_gelu_cast(wgpt_gpu *g, wgpt_op *op, wgpt_view dbias, wgpt_view dg16, wgpt_view dg,
                                        wgpt_view dout, wgpt_view pre, uint32_t N, uint32_t OC, wgpt_view scratch);
// dst (m, n) = (dst if accumulate, else 0) + the sum of nparts (m, n)
// partials at parts, in order of the parts (matmul_split_reduce), + bias (n;
// bias.buf NULL: none); n a multiple of 4. For other matmuls' split-k.
int wgpt_linear_reduce_parts(wgpt_gpu *g, wgpt_op *op, wgpt_view parts, wgpt_view bias, wgpt_view dst, uint32_t m,
                             uint32_t n, uint32_t nparts, int accumulate);

// One or both passes of wgpt_linear_backward (for benchmarks): the input
// pass (dinp), the weight pass (dweight and dbias).
#define WGPT_LINEAR_PASS_INPUT 1u
#define WGPT_LINEAR_PASS_WEIGHT 2u
int wgpt_linear_backward_passes(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dweight, wgpt_view dbias,
                                wgpt_view dout, wgpt_view inp, wgpt_view weight, uint32_t N, uint32_t C, uint32_t OC,
                                int accumulate_dinp, wgpt_view scratch, unsigned passes);

// On a device opened with wgpt_gpu_options.matmul_splits = S > 0 (for
// benchmarks), every vec4 matmul splits its sum over k into S parts (at most
// k / 16; a smaller scratch splits less) instead of as many as its shape asks
// for. That changes the order of the sums, so results differ in the last bits
// between split counts.

// Bytes of scratch that let every pass of an (N, C, OC) layer split as much
// as it wants to on g's device (at least 256).
uint64_t wgpt_linear_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC);

#endif
