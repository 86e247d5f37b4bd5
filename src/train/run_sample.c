// run_sample.c: a sample of text during training, for the user: through the
// KV-cache decoder (model/gpt2_decode.h), or by full recompute where the
// model cannot have one (an f16 ZeRO-1 rank keeps only its shard of the
// fp32 weights).
#include "train/run_internal.h"

#include <stdlib.h>
#include <string.h>

#include "train/generate.h"
#include "train/generate_stream.h"

typedef struct text_ {
    char *buf;
    size_t len, cap;
    int failed;  // out of host memory
} text_;

static void collect_(void *user, uint32_t sample, const char *bytes, size_t len) {
    text_ *t = user;
    (void)sample;
    if (t->failed) return;
    if (t->len + len + 1 > t->cap) {
        size_t cap = (t->len + len + 1) * 2;
        char *b = realloc(t->buf, cap);
        if (!b) {
            t->failed = 1;
            return;
        }
        t->buf = b, t->cap = cap;
    }
    memcpy(t->buf + t->len, bytes, len);
    t->len += len;
    t->buf[t->len] = 0;
}

// The text of a sample by the KV-cache decoder (malloc'ed), or NULL with err.
static char *decode_text_(run_ *r, char *err, size_t errlen) {
    text_ t = {0};
    wgpt_stream_opts so = {.n_new = r->o->sample_tokens, .stop_at_eot = 1, .on_full = WGPT_FULL_SLIDE,
                           .emit = collect_, .user = &t};
    wgpt_stream_stats st;
    if (wgpt_generate_stream(r->sampler_dec, r->tok, &r->sampler, NULL, 0, 1, &so, &st, err, errlen) < 0) {
        free(t.buf);
        return NULL;
    }
    if (t.failed || (!t.buf && !(t.buf = calloc(1, 1)))) {
        free(t.buf);
        snprintf(err, errlen, "out of host memory for the sample's text");
        return NULL;
    }
    return t.buf;
}

// A sample for the user; a failure is a warning: the run goes on.
void wgpt_run_print_sample_(run_ *r, const char *tag) {
    char err[1024];
    if (!r->sampler_model) {
        r->sampler_model = wgpt_gpt2_create_inference(r->model, 1, r->o->seq, err, sizeof err);
        if (!r->sampler_model) {
            wgpt_run_say_(r, WARN_, "sampling: %s", err);
            return;
        }
    }
    if (!r->sampler_tried) {
        r->sampler_tried = 1;
        r->sampler_dec = wgpt_decoder_create(r->sampler_model, 1, err, sizeof err);
        if (!r->sampler_dec) wgpt_run_say_(r, INFO_, "sampling by full recompute (no KV cache: %s)", err);
    }
    char *text = r->sampler_dec ? decode_text_(r, err, sizeof err)
                                : wgpt_generate_text(r->sampler_model, r->o->seq, r->tok, &r->sampler, NULL, 0,
                                                     r->o->sample_tokens, 0, err, sizeof err);
    if (!text) {
        wgpt_run_say_(r, WARN_, "sampling: %s", err);
        return;
    }
    wgpt_run_say_(r, INFO_, "\n--- sample %s ---\n%s\n---\n", tag, text);
    free(text);
}
