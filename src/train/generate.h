// generate.h: text generation from a model: feed the context, pick the next
// token with a sampler, slide the window once it is full.
#ifndef WGPT_GENERATE_H
#define WGPT_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "model/gpt2.h"
#include "train/sampler.h"

// Appends n_new tokens to ids (which holds *n ids, the prompt; capacity cap,
// at least *n + n_new). model must have batch 1; its T is the context window.
// Stops early at the end-of-text id eot (if >= 0). Returns 0, or -1 with err
// (a model error, out of memory, or logits that are not finite).
int wgpt_generate(wgpt_gpt2 *model, uint32_t T, uint32_t vocab, wgpt_sampler *s, int *ids, size_t *n, size_t cap,
                  size_t n_new, int64_t eot, char *err, size_t errlen);

// One sample as text: after a document start (the end-of-text id, or '\n'
// for a tokenizer without one) and the prompt's np ids, up to n_new ids of
// the tokenizer's vocabulary generated as wgpt_generate does. Returns the
// text of the generated ids (malloc'ed, the caller frees it; an end-of-text
// that ended it is left out when drop_eot), or NULL with err.
char *wgpt_generate_text(wgpt_gpt2 *model, uint32_t T, const wgpt_tokenizer *tok, wgpt_sampler *s,
                         const uint32_t *prompt, size_t np, size_t n_new, int drop_eot, char *err, size_t errlen);

#endif
