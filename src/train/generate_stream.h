// generate_stream.h: text generation through the KV-cache decoder
// (model/gpt2_decode.h): `count` samples of one prompt decoded together, one
// slot each, every token's bytes handed to a callback as soon as it is
// picked (stop strings held back until they cannot match: train/stop_text.h).
#ifndef WGPT_GENERATE_STREAM_H
#define WGPT_GENERATE_STREAM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "model/gpt2_decode.h"
#include "train/sampler.h"

// When a sample fills its slot's context: go on from the last half of it
// (re-prefilled: the model then sees only that half), or end that sample.
typedef enum wgpt_on_full { WGPT_FULL_SLIDE = 0, WGPT_FULL_STOP = 1 } wgpt_on_full;

typedef struct wgpt_stream_opts {
    size_t n_new;                  // tokens to generate a sample
    const char *const *stops;      // stop strings (none: NULL, 0)
    size_t nstops;
    int stop_at_eot;               // an end-of-text token ends its sample (and is not emitted)
    wgpt_on_full on_full;
    volatile sig_atomic_t *stop;   // NULL, or a flag: once set, no further step starts
    // Bytes of sample `sample` (any byte, NUL included), in order.
    void (*emit)(void *user, uint32_t sample, const char *bytes, size_t len);
    void *user;
} wgpt_stream_opts;

typedef struct wgpt_stream_stats {
    size_t prompt_tokens;  // tokens prefilled a sample at the start (the document start included)
    size_t tokens;         // tokens generated, all samples
    size_t steps;          // decoding steps (each decodes every live sample at once)
    double prefill_s, decode_s;
    uint32_t slides;       // refills after a full context
    int prompt_cut;        // the prompt was longer than the context: only its last part was kept
    int full;              // a sample ended on a full context (WGPT_FULL_STOP)
    int interrupted;       // o->stop ended it
} wgpt_stream_stats;

// After a document start (the end-of-text id, or '\n' for a tokenizer without
// one) and the prompt's np ids, up to o->n_new tokens for each of count
// samples (count <= the decoder's slots; slots 0..count-1 are reset and used),
// picked by s in sample order each step. Returns 0 (stats filled), or -1 with
// err (a decoder error, out of memory, logits that are not finite).
int wgpt_generate_stream(wgpt_decoder *d, const wgpt_tokenizer *tok, wgpt_sampler *s, const uint32_t *prompt,
                         size_t np, uint32_t count, const wgpt_stream_opts *o, wgpt_stream_stats *stats, char *err,
                         size_t errlen);

#endif
