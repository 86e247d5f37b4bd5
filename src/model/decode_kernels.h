// decode_kernels.h: the KV-cache decoder's kernels (kernels/09_decode.wgsl,
// kernels/09_decode_attention.wgsl) appended to a prepared op. Every pass
// reads `meta`, the rows' u32 table (WGPT_DECODE_META_U32 + 4 per row):
// meta[0] the live rows n, row r's token, slot and position at 4 + 4r.
// Rows n.. of the R bound are idle. Each returns 0, or -1 with the message
// in wgpt_gpu_error.
#ifndef WGPT_MODEL_DECODE_KERNELS_H
#define WGPT_MODEL_DECODE_KERNELS_H

#include "model/op.h"

#define WGPT_DECODE_META_U32 4u  // u32s before row 0's entry

// x (R, C) = wte[token] + wpe[position]; rows >= n zero. ids are checked by the host.
int wgpt_decode_embed(wgpt_gpu *g, wgpt_op *op, wgpt_view x, wgpt_view wte, wgpt_view wpe, wgpt_view meta,
                      uint32_t R, uint32_t C, uint32_t T, uint32_t V);
// dst (C) = src (R, C)'s last live row.
int wgpt_decode_take_row(wgpt_gpu *g, wgpt_op *op, wgpt_view dst, wgpt_view src, wgpt_view meta, uint32_t R,
                         uint32_t C);
// The live rows' keys and values (qkv (R, 3C) at [C, 3C)) into the caches
// kc, vc (slots, T, C): f32, or f16 (halves; C even) where f16.
int wgpt_decode_kv_write(wgpt_gpu *g, wgpt_op *op, wgpt_view kc, wgpt_view vc, wgpt_view qkv, wgpt_view meta,
                         uint32_t R, uint32_t C, uint32_t T, int f16);
// out (R, C) = each live row's attention over its slot's cached positions 0..pos.
// write_kv: each row first stores its own key and value (as wgpt_decode_kv_write,
// one dispatch fewer), which needs the live rows in distinct slots (a step, not
// a prefill) and, for f16 caches, an even head size.
int wgpt_decode_attention(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view qkv, wgpt_view kc, wgpt_view vc,
                          wgpt_view meta, uint32_t R, uint32_t C, uint32_t NH, uint32_t T, int f16, int write_kv);
// res = a + b, out = LayerNorm(res) (weight, bias; eps 1e-5) on the live
// rows; without b (no buffer) out = LayerNorm(a) and res is not written.
// res, out, a, b (R, C); res overlapping nothing else.
int wgpt_decode_residual_layernorm(wgpt_gpu *g, wgpt_op *op, wgpt_view res, wgpt_view out, wgpt_view a, wgpt_view b,
                                   wgpt_view weight, wgpt_view bias, wgpt_view meta, uint32_t R, uint32_t C);
// out (rows, n) = inp (rows, k) @ w (n, k)^T (+ bias (n) if it has a buffer),
// then GELU (tanh form) where gelu; w f32, or f16 (halves) where f16, which
// also rounds the input to f16. live: only the first min(rows, meta[0]) rows.
// k a multiple of 4.
int wgpt_decode_matvec(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view w, wgpt_view bias,
                       wgpt_view meta, uint32_t rows, uint32_t k, uint32_t n, int live, int f16, int gelu);

#endif
