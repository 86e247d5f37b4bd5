// weights.h: a model's weights as one of the formats wgpt reads hands them
// over (wgpt checkpoints, Hugging Face GPT-2 safetensors, llm.c model files),
// and what the formats share.
#ifndef WGPT_WEIGHTS_H
#define WGPT_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"  // defines: wgpt_gpt2_config, wgpt_gpt2_num_params, wgpt_gpt2_param_sizes

#define WGPT_WEIGHTS_TOKENIZER_MAX 16

typedef struct wgpt_weights {
    wgpt_gpt2_config config;
    float *params;  // (wgpt_gpt2_num_params(&config),) reference layout, owned; NULL when only the config was read
    char tokenizer[WGPT_WEIGHTS_TOKENIZER_MAX];  // "gpt2", "bytes", or "" when the vocabulary fits neither
    char format[96];                             // what was read, for messages ("llm.c model file, version 5 (bf16)")
    uint64_t step;                               // training steps behind it (wgpt checkpoints; else 0)
} wgpt_weights;

// Frees params and zeroes w. Safe on a zeroed w.
void wgpt_weights_free(wgpt_weights *w);

// The tokenizer a vocabulary size implies: "gpt2" (50257 ids), "bytes" (256), else "".
const char *wgpt_weights_tokenizer_for(uint32_t vocab_size);

// The padded vocabulary wgpt gives an imported model: V rounded up to a
// multiple of 128, as llm.c pads (GPT-2's 50257 -> 50304).
uint32_t wgpt_weights_padded_vocab(uint32_t vocab_size);

// Reference-layout tensor names, model/gpt2.h's order: "wte", "wpe", "ln1w", ...
extern const char *const wgpt_weights_tensor_names[WGPT_GPT2_NUM_TENSORS];

// Checks a config an imported file declares: no zero, C a multiple of NH,
// V <= Vp, and a parameter count whose bytes fit in memory sizes. Returns 0,
// or -1 with err (prefixed with label).
int wgpt_weights_check_config(const wgpt_gpt2_config *c, const char *label, char *err, size_t errlen);

#endif
