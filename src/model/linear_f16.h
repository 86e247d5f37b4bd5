// linear_f16.h: the linear layer's matmuls with f16 operands and f32 results:
// on subgroup matrices (tensor cores; kernels/03_linear_sgm.wgsl) where the
// device has them, else the plain kernels of kernels/03_linear_f16.wgsl (same
// bindings and results up to the order of the sums; they need not even
// shader-f16). See docs/kernels/03_linear_sgm.md and 03_linear_f16.md.
// Operands are f16 (views of halves, two a u32: 2 bytes an element), results
// f32; every dimension a multiple of 8; each tensor in one binding (no row
// chunks: a caller whose tensors are larger uses the f32 kernels). The
// fragment shape is the device's (wgpt_gpu_info.sgm_config).
//
// Each appends its dispatches to op and returns 0, or -1 with the message in
// wgpt_gpu_error(g).
#ifndef WGPT_LINEAR_F16_H
#define WGPT_LINEAR_F16_H

#include <stdint.h>

#include "model/op.h"

// 1 if g runs the subgroup-matrix kernels (subgroup matrices with an f16 -> f32 configuration).
int wgpt_linear_f16_uses_sgm(const wgpt_gpu *g);

// out (N, OC) f32 = inp16 (N, C) @ weight16 (OC, C)^T + bias (OC, f32; bias.buf NULL: none).
// On subgroup matrices the input is first transposed into inp_t
// (wgpt_linear_f16_transposed_bytes; unread elsewhere).
//
// On subgroup matrices each pass whose output has few blocks splits its sum
// into parts written to scratch (NULL buf: no split; as many parts as it
// holds, see wgpt_linear_f16_scratch_bytes) and added in order by a second
// dispatch: deterministic for a device and a shape. inp_t and scratch must be
// different buffers (WebGPU binds a buffer either read-only or writable in
// one dispatch).
int wgpt_linear_f16_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp16, wgpt_view weight16,
                            wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC, wgpt_view inp_t, wgpt_view scratch);
// dinp (N, C) f32 = (or += with accumulate) dout16 (N, OC) @ weight16 (OC, C).
int wgpt_linear_f16_backward_input(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dout16, wgpt_view weight16,
                                   uint32_t N, uint32_t C, uint32_t OC, int accumulate, wgpt_view scratch);
// dweight (OC, C) f32 += dout16 (N, OC)^T @ inp16 (N, C); the input
// transposed into inp_t first on subgroup matrices.
int wgpt_linear_f16_backward_weight(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16, wgpt_view inp16,
                                    uint32_t N, uint32_t C, uint32_t OC, wgpt_view inp_t, wgpt_view scratch);
// How a subgroup-matrix pass over an (m, n) output with a sum of k runs on
// a device described by info: the block (matmul_sgm_wide's 128 x 256 or
// matmul_sgm's 128 x 128) and the parts of k, whichever give the least whole
// waves x k a part x the block's cost, partials inside `room` bytes (see
// docs/kernels/03_linear_sgm.md). {0, 1, 0} where info runs no such kernels.
// The passes above use it; public for tests of the choice on made-up devices.
typedef struct wgpt_sgm_plan {
    int wide;        // matmul_sgm_wide rather than matmul_sgm
    uint32_t s;      // parts of k (1: no split)
    uint32_t ks;     // k a part (a multiple of the block's BK); 0 when s is 1
    // Stream-K instead (s 1): the blocks' stages of BK end to end, sk of them
    // a workgroup, on wgs workgroups (at most the compute units); a block's
    // pieces go to at most `slots` partials
    uint32_t sk, wgs, slots;
    uint32_t bk;  // (stream-K) the k a stage of the kernel that runs
} wgpt_sgm_plan;
wgpt_sgm_plan wgpt_linear_f16_plan(const wgpt_gpu_info *info, uint32_t m, uint32_t n, uint32_t k, uint64_t room);

// Bytes of scratch that let each pass of that shape split as much as it wants to (0: none splits).
uint64_t wgpt_linear_f16_scratch_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC);
// Bytes of inp_t the forward and the weight pass of that shape need (0: this device reads none).
uint64_t wgpt_linear_f16_transposed_bytes(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC);

// 1 if that shape's forward and weight pass run on subgroup matrices, which
// multiply the input transposed (C, N): a caller that keeps the input's f16
// copy in that layout (wgpt_cast_f16_transpose) passes it to the _t twins
// below and skips the transposes.
int wgpt_linear_f16_takes_transposed(const wgpt_gpu *g, uint32_t N, uint32_t C, uint32_t OC);
// The forward and the weight pass on inp_t16, the input's f16 copy stored
// transposed (C, N); they refuse a shape that does not take one.
int wgpt_linear_f16_forward_t(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp_t16, wgpt_view weight16,
                              wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch);
// The forward on inp_t16 with an f16 result for the next step, written by
// the matmul itself (no cast, GELU or transpose pass after it):
//   WGPT_OUT16_COPY    out16 (N, OC) = the output rounded to f16; no f32
//                      output (out.buf NULL): the qkv the f16 attention reads
//   WGPT_OUT16_GELU_T  out (N, OC) f32 as wgpt_linear_f16_forward_t, and
//                      out16 (OC, N) = GELU(out) rounded to f16, transposed:
//                      the fc forward, whose GELU fcproj multiplies transposed
// Rounded as wgpt_cast_f16 and wgpt_gelu_forward_f16 round (overflow: inf).
// Its sum over k is never split. Refuses a shape that does not take inp_t16.
// (GPT-2's model does not call it: on an H100 its store through workgroup
// memory cost more than the cast, GELU and transpose passes it saves.)
typedef enum wgpt_out16 { WGPT_OUT16_COPY, WGPT_OUT16_GELU_T } wgpt_out16;
int wgpt_linear_f16_forward_t16(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view out16, wgpt_out16 kind,
                                wgpt_view inp_t16, wgpt_view weight16, wgpt_view bias, uint32_t N, uint32_t C,
                                uint32_t OC);
// The input pass with the GELU's backward after it, on subgroup matrices (a
// device or shape without them is refused): dinp (N, C) f32 = (dout16 (N,
// OC) @ weight16 (OC, C)) * GELU'(gelu_in (N, C) f32), elementwise, and
// dinp16 its f16 copy, as wgpt_gelu_backward_f16 would give from the plain
// input pass (fcproj's, whose input is the GELU's output). Never split.
int wgpt_linear_f16_backward_input_gelu(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dinp16, wgpt_view gelu_in,
                                        wgpt_view dout16, wgpt_view weight16, uint32_t N, uint32_t C, uint32_t OC);
int wgpt_linear_f16_backward_weight_t(wgpt_gpu *g, wgpt_op *op, wgpt_view dweight, wgpt_view dout16,
                                      wgpt_view inp_t16, uint32_t N, uint32_t C, uint32_t OC, wgpt_view scratch);

#endif
