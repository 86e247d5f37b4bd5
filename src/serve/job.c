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
        j->choice[c].slot = -1;
    }
    j->refs = 1;
    return j;
}

void wgpt_serve_job_free(wgpt_serve_job *j) {
    if (!j) return;
    for (uint32_t c = 0; c < WGPT_SERVE_MAX_N; c++) wgpt_sbuf_free(&j->choice[c].text);
    wgpt_completion_req_free(&j->req);
    free(j->ids);
    free(j);
}

void wgpt_serve_job_finish(wgpt_serve_job *j, uint32_t c, const char *reason) {
    wgpt_serve_choice *ch = &j->choice[c];
    if (ch->finish) return;
    ch->finish = reason;
    ch->ready = ch->text.len;
    j->finished++;
}

int wgpt_serve_job_add_token(wgpt_serve_job *j, uint32_t c, const wgpt_tokenizer *tok, uint32_t id) {
    wgpt_serve_choice *ch = &j->choice[c];
    const wgpt_completion_req *r = &j->req;
    if (ch->finish) return 1;
    ch->tokens++;
    if (j->eot >= 0 && id == (uint64_t)j->eot) {
        wgpt_serve_job_finish(j, c, "stop");
        return 1;
    }
    size_t len = 0, before = ch->text.len;
    const char *bytes = wgpt_tokenizer_decode(tok, id, &len);
    if (bytes && wgpt_sbuf_add(&ch->text, bytes, len) < 0) {
        wgpt_serve_job_finish(j, c, "length");  // (out of host memory: end it where it is)
        return 1;
    }
    size_t longest = 0;
    for (int k = 0; k < r->nstops; k++)
        if (r->stop_lens[k] > longest) longest = r->stop_lens[k];
    size_t from = before + 1 > longest ? before + 1 - longest : 0;  // a new match ends in the new bytes
    size_t at = wgpt_stop_find(ch->text.p, ch->text.len, from, r->stops, r->stop_lens, r->nstops);
    if (at < ch->text.len) {
        ch->text.len = at;
        ch->text.p[at] = 0;
        wgpt_serve_job_finish(j, c, "stop");
        return 1;
    }
    if (ch->tokens >= r->max_tokens) {
        wgpt_serve_job_finish(j, c, "length");
        return 1;
    }
    size_t hold = wgpt_stop_holdback(ch->text.p, ch->text.len, r->stops, r->stop_lens, r->nstops);
    size_t ready = wgpt_utf8_safe_len(ch->text.p, ch->text.len - hold);
    if (ready > ch->ready) ch->ready = ready;
    return 0;
}
