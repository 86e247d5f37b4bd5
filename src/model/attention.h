// attention.h: causal multi-head self-attention (kernels/04_attention.wgsl;
// flat CPU twins where model/variant.h picks them),
// flash style: no (T, T) matrix in global memory. hs = C / NH, at most
// WGPT_ATTENTION_MAX_HS; scale 1/sqrt(hs). Layout as tests/ref:
// qkv (B, T, 3C) = [q | k | v], head h at columns h*hs..(h+1)*hs of each part.
//
// Views: size 0 means "to the buffer's end"; a view may be larger than the
// tensor (only the tensor's bytes are bound). WebGPU checks usage per buffer:
// a tensor a dispatch writes must sit in a buffer that the dispatch does not
// read, even at other bytes. So: out and lse apart from qkv; D apart from dout
// and out; dqkv apart from qkv, dout, lse and D (refused with a message).
// Writable views may share a buffer (out with lse).
// Each tensor must fit one binding (maxStorageBufferBindingSize): there is no
// splitting here, a larger one is refused with a message.
#ifndef WGPT_ATTENTION_H
#define WGPT_ATTENTION_H

#include <stdint.h>

#include "model/op.h"

#define WGPT_ATTENTION_MAX_HS 128u

// Appends the forward: out (B, T, C) and lse (B, NH, T), the log-sum-exp of
// each query's scaled scores (saved for the backward); qkv (B, T, 3C).
// Returns 0, or -1 with the message in wgpt_gpu_error(g).
int wgpt_attention_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view lse, wgpt_view qkv, uint32_t B,
                           uint32_t T, uint32_t C, uint32_t NH);

// Appends the backward (three dispatches): dqkv (B, T, 3C) is OVERWRITTEN
// (attention is its only producer); D (B, NH, T) is scratch, written then read;
// dout, out (B, T, C); qkv (B, T, 3C); lse (B, NH, T) from the forward.
// Deterministic: no atomics, every sum in a fixed order.
int wgpt_attention_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dqkv, wgpt_view D, wgpt_view dout, wgpt_view qkv,
                            wgpt_view out, wgpt_view lse, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);

// The f16 mode's attention on tensor cores (kernels/04_attention_sgm.wgsl),
// only where wgpt_attention_uses_sgm (else refused with a message; the model
// then keeps the f32 calls above). qkv (B, T, 3C) and, in the backward, out
// (B, T, C) are f16 (2 bytes a value, e.g. the f16 copies the matmuls make);
// the forward writes out in f16 twice, out16 (B, T, C) and its transpose
// out16_t (C, B T), the layout the f16 matmuls read their input in (T even);
// lse, dqkv, D and dout are f32. P and dS are
// rounded to f16 for their products; scores, softmax, lse, D and every
// accumulation are f32. Views and rules otherwise as above.
int wgpt_attention_forward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view out16, wgpt_view out16_t, wgpt_view lse,
                               wgpt_view qkv16, uint32_t B, uint32_t T, uint32_t C, uint32_t NH);
// The backward's ds: with a buffer, scratch of wgpt_attention_ds_bytes (the
// dS^T blocks of the causal triangle in f16, O(B NH T^2): 53.5 MB at GPT-2
// 124M's B = 4, T = 1024), in a buffer no other view of the call is in:
// the dk/dv kernel writes dS there and the dq kernel multiplies it, instead
// of recomputing the scores, the softmax and dS (one product a block for dq
// instead of three). ds.buf NULL: no scratch, dq recomputes.
int wgpt_attention_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dqkv, wgpt_view D, wgpt_view dout,
                                wgpt_view qkv16, wgpt_view out16, wgpt_view lse, wgpt_view ds, uint32_t B, uint32_t T,
                                uint32_t C, uint32_t NH);
// Bytes of the backward's ds scratch for (B, T, NH).
uint64_t wgpt_attention_ds_bytes(uint32_t B, uint32_t T, uint32_t NH);
// 1 if the _f16 calls run on g for head size hs: the device has the engine's
// f16 fragment 16x16x8 in subgroups of 32 (gpu.h sgm_config; emulated ones,
// gpu.h emulate_sgm, in subgroups of 8 or 16 as well), 45,568 bytes of
// workgroup memory (WGPT_ATTENTION_SGM_STORAGE), and hs = 64.
int wgpt_attention_uses_sgm(const wgpt_gpu *g, uint32_t hs);
// The workgroup memory the f16 kernels declare (their tiles), in bytes.
#define WGPT_ATTENTION_SGM_STORAGE 45568u

#endif
