// generate.c: sampling text from a model (see generate.h).
#include "train/generate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wgpt_generate(wgpt_gpt2 *m, uint32_t T, uint32_t vocab, wgpt_sampler *s, int *ids, size_t *n, size_t cap,
                  size_t n_new, int64_t eot, char *err, size_t errlen) {
    int *window = calloc(T, sizeof *window);
    float *logits = malloc(vocab * sizeof *logits), *pf = malloc(vocab * sizeof *pf);
    uint32_t *pi = malloc(vocab * sizeof *pi);
    int rc = 0;
    if (!window || !logits || !pf || !pi) {
        snprintf(err, errlen, "out of host memory for a context of %u and a vocabulary of %u", T, vocab);
        rc = -1;
    }
    for (size_t k = 0; rc == 0 && k < n_new && *n < cap; k++) {
        // the last T ids of the context; positions after it hold 0s, which
        // causal attention keeps from influencing the ones before
        size_t len = *n < T ? *n : T;
        if (len == 0) {
            ids[(*n)++] = eot >= 0 ? (int)eot : 0;
            continue;
        }
        memcpy(window, ids + (*n - len), len * sizeof *window);
        memset(window + len, 0, (T - len) * sizeof *window);
        if (wgpt_gpt2_logits(m, window, 0, (uint32_t)(len - 1), logits) < 0) {
            snprintf(err, errlen, "%s", wgpt_gpt2_error(m));
            rc = -1;
            break;
        }
        // A NaN would be sampled as some token: no text from a broken model.
        for (uint32_t i = 0; i < vocab && rc == 0; i++)
            if (!isfinite(logits[i])) {
                snprintf(err, errlen, "the model's logits hold %s (token %zu of the text): its weights overflow",
                         isnan(logits[i]) ? "NaN" : "Inf", *n);
                rc = -1;
            }
        if (rc) break;
        uint32_t next = wgpt_sampler_pick(s, logits, vocab, pf, pi);
        ids[(*n)++] = (int)next;
        if (eot >= 0 && next == (uint64_t)eot) break;
    }
    free(window), free(logits), free(pf), free(pi);
    return rc;
}

char *wgpt_generate_text(wgpt_gpt2 *m, uint32_t T, const wgpt_tokenizer *tok, wgpt_sampler *s,
                         const uint32_t *prompt, size_t np, size_t n_new, int drop_eot, char *err, size_t errlen) {
    size_t cap = 1 + np + n_new;  // size_t: n_new + 1 in 32 bits could wrap to 0
    int *ids = malloc(cap * sizeof *ids);
    uint32_t *out = malloc(cap * sizeof *out);
    char *text = NULL;
    int64_t eot = wgpt_tokenizer_eot(tok);
    size_t n = 0;
    if (!ids || !out) {
        snprintf(err, errlen, "out of host memory for %zu tokens", cap);
        goto done;
    }
    ids[n++] = eot >= 0 ? (int)eot : '\n';  // documents start after an end-of-text (or a newline)
    for (size_t i = 0; i < np; i++) ids[n++] = (int)prompt[i];
    size_t start = n;
    if (wgpt_generate(m, T, wgpt_tokenizer_vocab_size(tok), s, ids, &n, cap, n_new, eot, err, errlen) < 0) goto done;
    if (drop_eot && n > start && eot >= 0 && ids[n - 1] == eot) n--;
    for (size_t i = start; i < n; i++) out[i - start] = (uint32_t)ids[i];
    text = wgpt_tokenizer_decode_all(tok, out, n - start);
    if (!text) snprintf(err, errlen, "out of host memory decoding %zu tokens", n - start);
done:
    free(ids), free(out);
    return text;
}
