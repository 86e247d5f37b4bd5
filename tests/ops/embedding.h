// embedding.h: the embedding family's cases (tests/ops/embedding.c), for
// the registry and for tests/test_embedding.c's special cases.
#ifndef WGPT_TEST_OPS_EMBEDDING_H
#define WGPT_TEST_OPS_EMBEDDING_H

#include <stdint.h>

#include "model/op.h"

typedef struct emb_shape {
    uint32_t B, T, C, V, Vp, maxT;
} emb_shape;

// Tokens in [0, V) with many repeats (half drawn from 0..5) so buckets hold
// several positions, and the first and last ids of the vocabulary present.
void emb_make_tokens(uint32_t *tok, int *itok, uint32_t N, uint32_t V);

// A forward case: its tokens, tables and reference output (host), then its
// device buffers and prepared op.
typedef struct emb_fwd_case {
    uint32_t *tok;
    int *itok;
    float *wte, *wpe, *want;
    wgpt_buf *out, *btok, *bwte, *bwpe, *status;
    wgpt_op op;
} emb_fwd_case;
// Tokens (emb_make_tokens), tables in [-1, 1] and the reference output for shape s.
void emb_fwd_inputs(emb_shape s, emb_fwd_case *c);
// Uploads the host side as it is now and prepares wgpt_encoder_forward on g.
void emb_fwd_prepare(wgpt_gpu *g, emb_shape s, emb_fwd_case *c);
// Runs the prepared op; returns the output (malloc'd).
float *emb_fwd_run(wgpt_gpu *g, emb_shape s, emb_fwd_case *c);
void emb_fwd_free(emb_fwd_case *c);

// A prepared backward op and its buffers.
typedef struct emb_bwd_case {
    wgpt_buf *dwte, *dwpe, *dout, *bucket;
    wgpt_op op;
} emb_bwd_case;
// Prepares the backward op for shape s on g (buffers for the gradients,
// dout and the bucket index).
void emb_bwd_prepare(wgpt_gpu *g, emb_shape s, emb_bwd_case *c);
void emb_bwd_free(emb_bwd_case *c);
// One step: fresh tokens, dout and starting gradients (from seed); runs the
// prepared op and compares with the reference. Returns the GPU dwte and
// dwpe (malloc'd, for determinism checks) through got_wte / got_wpe if not NULL.
void emb_bwd_step(wgpt_gpu *g, emb_shape s, emb_bwd_case *c, float **got_wte, float **got_wpe, uint64_t seed);

#endif
