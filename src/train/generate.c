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
