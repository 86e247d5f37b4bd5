// job.c: a request's tokens and its choices' growing text (see job.h).
#include "serve/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

wgpt_serve_job *wgpt_serve_job_new(wgpt_completion_req *req, const wgpt_tokenizer *tok, uint64_t seed) {
    wgpt_serve_job *j = calloc(1, sizeof *j);
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (!j || wgpt_tokenizer_encode(tok, req->prompt, req->prompt_len, &ids, &n, &cap) < 0 ||
        !(j->ids = malloc((n + 1) * sizeof *j->ids))) {
        free(ids);
        free(j);
        return NULL;
    }
    j->eot = wgpt_tokenizer_eot(tok);
    j->ids[0] = j->eot >= 0 ? (int32_t)j->eot : '\n';  // documents start after an end-of-text (or a newline)
    for (size_t i = 0; i < n; i++) j->ids[i + 1] = (int32_t)ids[i];
    j->nids = n + 1;
    free(ids);
    j->req = *req;
    memset(req, 0, sizeof *req);
    if (j->req.seed_given) seed = j->req.seed;
    for (uint32_t c = 0; c < j->req.n; c++) {
        wgpt_sampler_init(&j->choice[c].sampler, j->req.temperature, j->req.top_k, seed + c);
        wgpt_sampler_set_top_p(&j->choice[c].sampler, j->req.top_p);
        wgpt_stop_text_init(&j->choice[c].stopper, (const char *const *)j->req.stops, (size_t)j->req.nstops);
        j->choice[c].slot = -1;
    }
    j->refs = 1;
    return j;
}

void wgpt_serve_job_free(wgpt_serve_job *j) {
    if (!j) return;
    for (uint32_t c = 0; c < WGPT_SERVE_MAX_N; c++) {
        wgpt_sbuf_free(&j->choice[c].text);
        wgpt_stop_text_free(&j->choice[c].stopper);
    }
    wgpt_completion_req_free(&j->req);
    free(j->ids);
    free(j);
}

// Where the stopper lets bytes out: the choice's text.
typedef struct {
    wgpt_sbuf *text;
    int failed;  // out of host memory
} sink_;

static void emit_(void *user, const char *bytes, size_t len) {
    sink_ *k = user;
    if (wgpt_sbuf_add(k->text, bytes, len) < 0) k->failed = 1;
}

void wgpt_serve_job_finish(wgpt_serve_job *j, uint32_t c, const char *reason) {
    wgpt_serve_choice *ch = &j->choice[c];
    if (ch->finish) return;
    sink_ k = {&ch->text, 0};
    wgpt_stop_text_flush(&ch->stopper, emit_, &k);
    ch->finish = reason;
    ch->ready = ch->text.len;
    j->finished++;
}

int wgpt_serve_job_add_token(wgpt_serve_job *j, uint32_t c, const wgpt_tokenizer *tok, uint32_t id) {
    wgpt_serve_choice *ch = &j->choice[c];
    if (ch->finish) return 1;
    ch->tokens++;
    if (j->eot >= 0 && id == (uint64_t)j->eot) {
        wgpt_serve_job_finish(j, c, "stop");
        return 1;
    }
    size_t len = 0;
    const char *bytes = wgpt_tokenizer_decode(tok, id, &len);
    sink_ k = {&ch->text, 0};
    int st = bytes ? wgpt_stop_text_feed(&ch->stopper, bytes, len, emit_, &k) : 0;
    if (st < 0 || k.failed) {  // out of host memory: end it where it is
        wgpt_serve_job_finish(j, c, "length");
        return 1;
    }
    if (st == 1 || ch->tokens >= j->req.max_tokens) {
        wgpt_serve_job_finish(j, c, st == 1 ? "stop" : "length");
        return 1;
    }
    ch->ready = wgpt_utf8_safe_len(ch->text.p, ch->text.len);
    return 0;
}
