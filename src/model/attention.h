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

#endif
