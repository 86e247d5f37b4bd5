// gpt2_decode_internal.h: the decoder's state, shared by gpt2_decode.c (the
// API, its checks and the full-recompute reference) and gpt2_decode_kv.c
// (the KV cache).
#ifndef WGPT_GPT2_DECODE_INTERNAL_H
#define WGPT_GPT2_DECODE_INTERNAL_H

#include "model/gpt2_decode.h"
#include "model/gpt2_internal.h"

// One decoding pass of up to `rows` rows, prepared once (gpt2_decode_kv.c).
typedef struct wgpt_decode_pass {
    wgpt_op op;
    uint32_t rows;
    int last_only;  // logits of the last live row only (a prefill), else of every row
    int built;
} wgpt_decode_pass;

struct wgpt_decoder {
    wgpt_gpt2 *m;
    int recompute;  // the reference: a full forward per position, no cache
    uint32_t slots, ctx, V;
    uint32_t *len;  // (slots) positions held

    // the reference (recompute)
    int32_t *ids;   // (slots, ctx) the tokens of each slot
    int *window;    // (B, T) the model's input

    // the KV cache
    int f16;                  // caches and matmul weights in f16 (the model runs f16)
    wgpt_buf **kc, **vc;      // (L) each (slots, ctx, C), f32 or f16
    wgpt_buf *meta;           // u32 rows table (decode_kernels.h)
    uint32_t *meta_host;
    uint32_t rows_max;        // rows the activations hold
    wgpt_buf *x, *res2, *ln, *qkv, *atty, *attproj, *fch, *fcproj, *last, *logits;
    float *logits_host;       // (rows, Vp)
    wgpt_decode_pass step, prefill;
    uint64_t bytes;           // GPU memory it holds
};

// gpt2_decode_kv.c: allocation, and the passes over given rows (meta_host
// filled for n rows): logits (n rows of V, or 1 row where the pass is last_only).
int wgpt_decoder_kv_init_(wgpt_decoder *d, char *err, size_t errlen);
void wgpt_decoder_kv_free_(wgpt_decoder *d);
int wgpt_decoder_kv_run_(wgpt_decoder *d, wgpt_decode_pass *pass, uint32_t n, float *logits, char *err,
                         size_t errlen);

#endif
