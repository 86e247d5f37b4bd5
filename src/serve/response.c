// response.c: the server's JSON bodies (see response.h).
#include "serve/response.h"

#include <string.h>

static int str_(wgpt_sbuf *b, const char *s) { return wgpt_json_string(b, s, strlen(s)); }

static int str_or_null_(wgpt_sbuf *b, const char *s) { return s ? str_(b, s) : wgpt_sbuf_add(b, "null", 4); }

int wgpt_resp_error(wgpt_sbuf *b, int status, const char *msg, const char *param, const char *code) {
    const char *type = status >= 500 ? "server_error" : status == 404 ? "not_found_error" : "invalid_request_error";
    int rc = wgpt_sbuf_addf(b, "{\"error\": {\"message\": ");
    rc |= str_(b, msg);
    rc |= wgpt_sbuf_addf(b, ", \"type\": \"%s\", \"param\": ", type);
    rc |= str_or_null_(b, param && *param ? param : NULL);
    rc |= wgpt_sbuf_addf(b, ", \"code\": ");
    rc |= str_or_null_(b, code);
    rc |= wgpt_sbuf_addf(b, "}}\n");
    return rc ? -1 : 0;
}

static int head_(wgpt_sbuf *b, const wgpt_serve_job *j, const char *model) {
    int rc = wgpt_sbuf_addf(b, "{\"id\": \"%s\", \"object\": \"text_completion\", \"created\": %lld, \"model\": ", j->id,
                            j->created);
    rc |= str_(b, model);
    return rc | wgpt_sbuf_addf(b, ", \"choices\": [");
}

static int choice_(wgpt_sbuf *b, uint32_t c, const char *text, size_t n, const char *finish) {
    int rc = wgpt_sbuf_addf(b, "{\"text\": ");
    rc |= wgpt_json_string(b, text, n);
    rc |= wgpt_sbuf_addf(b, ", \"index\": %u, \"logprobs\": null, \"finish_reason\": ", c);
    rc |= str_or_null_(b, finish);
    return rc | wgpt_sbuf_add(b, "}", 1);
}

int wgpt_resp_completion(wgpt_sbuf *b, const wgpt_serve_job *j, const char *model) {
    int rc = head_(b, j, model);
    unsigned long long completion = 0;
    for (uint32_t c = 0; c < j->req.n; c++) {
        const wgpt_serve_choice *ch = &j->choice[c];
        if (c) rc |= wgpt_sbuf_add(b, ", ", 2);
        rc |= choice_(b, c, ch->text.p ? ch->text.p : "", ch->text.len, ch->finish);
        completion += ch->tokens;
    }
    // prompt_tokens: the prompt's own, without the document start before it
    unsigned long long prompt = j->nids - 1;
    rc |= wgpt_sbuf_addf(b,
                         "], \"usage\": {\"prompt_tokens\": %llu, \"completion_tokens\": %llu, \"total_tokens\": %llu}}\n",
                         prompt, completion, prompt + completion);
    return rc ? -1 : 0;
}

int wgpt_resp_chunk(wgpt_sbuf *b, const wgpt_serve_job *j, const char *model, uint32_t c, const char *text,
                    size_t n, const char *finish) {
    int rc = wgpt_sbuf_add(b, "data: ", 6);
    rc |= head_(b, j, model);
    rc |= choice_(b, c, text, n, finish);
    rc |= wgpt_sbuf_addf(b, "]}\n\n");
    return rc ? -1 : 0;
}

int wgpt_resp_models(wgpt_sbuf *b, const char *model, long long created, uint32_t context) {
    int rc = wgpt_sbuf_addf(b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    rc |= str_(b, model);
    rc |= wgpt_sbuf_addf(b, ", \"object\": \"model\", \"created\": %lld, \"owned_by\": \"wgpt\", \"context_length\": %u}]}\n",
                         created, context);
    return rc ? -1 : 0;
}

int wgpt_resp_health(wgpt_sbuf *b, const wgpt_batcher_stats *st) {
    return wgpt_sbuf_addf(b,
                          "{\"status\": \"ok\", \"slots\": %u, \"busy\": %u, \"queued\": %u, \"steps\": %llu, "
                          "\"tokens\": %llu}\n",
                          st->slots, st->busy, st->queued, (unsigned long long)st->steps,
                          (unsigned long long)st->tokens);
}
