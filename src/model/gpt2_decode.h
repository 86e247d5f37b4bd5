// gpt2_decode.h: KV-cache decoding over a GPT-2 model: a prefill of a prompt
// in one pass, then one position per step against the cached keys and values
// of every layer (f16 where the model runs f16), for up to max_slots
// sequences at once (a server's continuous batch, or `sample --count`).
#ifndef WGPT_GPT2_DECODE_H
#define WGPT_GPT2_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"

typedef struct wgpt_decoder wgpt_decoder;

// A decoder for model (any batch/T it was made with; the cache holds up to
// the model's max_seq_len positions per slot) with max_slots slots. Returns
// NULL with err (too little device memory: say how much it wanted).
wgpt_decoder *wgpt_decoder_create(wgpt_gpt2 *model, uint32_t max_slots, char *err, size_t errlen);
// The reference decoder: the same API with no cache; every prefill and step
// runs the model's full forward over the slot's whole context (batch row 0
// of a model of any B; the context is min(T, max_seq_len)) and reads the logits
// of its last position. Slow (the cost grows with the context); the tests
// compare the KV cache against it.
wgpt_decoder *wgpt_decoder_create_recompute(wgpt_gpt2 *model, uint32_t max_slots, char *err, size_t errlen);
void wgpt_decoder_free(wgpt_decoder *d);
// Bytes of GPU memory the decoder holds (its caches and activations; 0 for the reference).
uint64_t wgpt_decoder_memory(const wgpt_decoder *d);

uint32_t wgpt_decoder_max_slots(const wgpt_decoder *d);
uint32_t wgpt_decoder_context(const wgpt_decoder *d);   // positions a slot can hold (max_seq_len)
uint32_t wgpt_decoder_vocab(const wgpt_decoder *d);     // V: floats of logits per row (unpadded)
uint32_t wgpt_decoder_len(const wgpt_decoder *d, uint32_t slot);  // positions cached in slot

// Empties slot (its length becomes 0); the others are untouched.
void wgpt_decoder_reset(wgpt_decoder *d, uint32_t slot);

// Appends n tokens ids[0..n) to slot in one pass (the prompt: prefill) and
// writes the logits of the last of them (V floats) to logits. Fails (-1, err
// naming the limit) when len + n > context. ids outside [0, V) are refused.
int wgpt_decoder_prefill(wgpt_decoder *d, uint32_t slot, const int32_t *ids, size_t n, float *logits,
                         char *err, size_t errlen);

// One decoding step for n distinct slots at once: slot slots[i] appends
// ids[i]; logits gets n rows of V floats, row i for slots[i]. Fails when a
// slot is full (len == context) or n > max_slots.
int wgpt_decoder_step(wgpt_decoder *d, const uint32_t *slots, const int32_t *ids, size_t n, float *logits,
                      char *err, size_t errlen);

#endif
