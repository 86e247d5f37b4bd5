// embedding.h: GPT-2's input layer (kernels/01_embedding.wgsl): token plus
// position embedding, its backward, and the host-built bucket index that makes
// the token-embedding gradient deterministic without float atomics.
//
// Per training step the model: uploads the tokens, records the forward op,
// calls wgpt_encoder_bucket_upload with the same tokens, records the backward
// op. The ops are prepared once (their grids cover the largest possible index).
#ifndef WGPT_EMBEDDING_H
#define WGPT_EMBEDDING_H

#include <stdint.h>

#include "model/input_status.h"
#include "model/op.h"

// u32 words of the bucket index for N = B*T positions:
// [0] U (distinct ids) | ids (N; U used, increasing) | starts (N+1; U+1 used,
// bucket u is positions[starts[u] .. starts[u+1])) | positions (N; increasing
// within a bucket).
static inline uint64_t wgpt_embedding_bucket_words(uint32_t N) { return 3ull * N + 2; }

// Builds the bucket index of tokens (N) into idx (wgpt_embedding_bucket_words(N)
// words; unused words are zeroed). Returns 0, or -1 if a token is >= V (then
// *bad, if not NULL, is the first such token) or host memory runs out.
int wgpt_embedding_bucket(uint32_t *idx, const uint32_t *tokens, uint32_t N, uint32_t V, uint32_t *bad);

// out (B,T,C) = wte[tokens[b,t]] + wpe[t]. tokens (B,T) u32, wte (Vp,C), wpe (>= T,C),
// status (WGPT_STATUS_WORDS u32). A token id >= V gives a zero row and sets
// WGPT_STATUS_BAD_TOKEN. wte is bound in row chunks if it exceeds the device's
// binding limit (one dispatch per chunk). Views need 256-byte aligned offsets.
int wgpt_encoder_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view status, wgpt_view tokens, wgpt_view wte,
                         wgpt_view wpe, uint32_t B, uint32_t T, uint32_t C, uint32_t V, uint32_t Vp);

// dwte (Vp,C) += per token id, the sum of dout (B,T,C) over its positions;
// dwpe (>= T,C) += per t, the sum over b of dout[b,t]. bucket: the index
// (wgpt_embedding_bucket_words(B*T) u32) of this step's tokens, uploaded with
// wgpt_encoder_bucket_upload before the op is recorded. Deterministic.
int wgpt_encoder_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dwte, wgpt_view dwpe, wgpt_view dout,
                          wgpt_view bucket, uint32_t B, uint32_t T, uint32_t C, uint32_t Vp);

// Per step: builds the index of tokens (N) and uploads it to bucket (in order
// with the work recorded so far). -1 with the message in wgpt_gpu_error on a
// token >= V (*bad, if not NULL, is the first such token), a view too small,
// out of memory or a GPU error.
int wgpt_encoder_bucket_upload(wgpt_gpu *g, wgpt_view bucket, const uint32_t *tokens, uint32_t N, uint32_t V,
                               uint32_t *bad);

#endif
