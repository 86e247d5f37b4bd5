// weights.c: what the weight formats share (see weights.h).
#include "weights/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const wgpt_weights_tensor_names[WGPT_GPT2_NUM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

void wgpt_weights_free(wgpt_weights *w) {
    free(w->params);
    memset(w, 0, sizeof *w);
}

const char *wgpt_weights_tokenizer_for(uint32_t vocab_size) {
    return vocab_size == 50257 ? "gpt2" : vocab_size == 256 ? "bytes" : "";
}

uint32_t wgpt_weights_padded_vocab(uint32_t v) { return v > UINT32_MAX - 127 ? v : (v + 127) / 128 * 128; }

int wgpt_weights_check_config(const wgpt_gpt2_config *c, const char *label, char *err, size_t errlen) {
    const uint32_t f[6] = {c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers, c->num_heads,
                           c->channels};
    const char *names[6] = {"context (positions)", "vocabulary", "padded vocabulary", "layers", "heads", "channels"};
    for (int i = 0; i < 6; i++)
        if (f[i] == 0) {
            snprintf(err, errlen, "%s: the model's %s is 0", label, names[i]);
            return -1;
        }
    if (c->channels % c->num_heads) {
        snprintf(err, errlen, "%s: %u channels are not a multiple of %u heads", label, c->channels, c->num_heads);
        return -1;
    }
    if (c->vocab_size > c->padded_vocab_size) {
        snprintf(err, errlen, "%s: vocabulary %u is larger than its padded size %u", label, c->vocab_size,
                 c->padded_vocab_size);
        return -1;
    }
    // Vp*C + maxT*C + L*(12*C*C + 13*C) + 2*C floats, computed where nothing can wrap
    double C = c->channels, n = C * ((double)c->padded_vocab_size + c->max_seq_len + 2) +
                                (double)c->num_layers * (12 * C * C + 13 * C);
    if (n * 4 > (double)SIZE_MAX / 2 || n * 4 > 9.0e15) {
        snprintf(err, errlen, "%s: a model of %.0f parameters is more than this machine can hold", label, n);
        return -1;
    }
    return 0;
}
