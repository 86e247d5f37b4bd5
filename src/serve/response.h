// response.h: the JSON bodies the server sends, in OpenAI's shapes:
// errors, a completion, a stream's chunks, the model list, the health line.
// Model text goes through wgpt_json_string (any bytes, valid JSON out).
#ifndef WGPT_SERVE_RESPONSE_H
#define WGPT_SERVE_RESPONSE_H

#include "serve/batcher.h"
#include "serve/job.h"
#include "serve/text.h"

// {"error": {"message", "type", "param", "code"}}: type from the status
// (invalid_request_error for 4xx, server_error for 5xx); param and code may be NULL.
int wgpt_resp_error(wgpt_sbuf *b, int status, const char *msg, const char *param, const char *code);
// The whole completion of a finished job (lock held).
int wgpt_resp_completion(wgpt_sbuf *b, const wgpt_serve_job *j, const char *model);
// One server-sent event: "data: {...}\n\n" holding text[0, n) of choice c
// and its finish reason (NULL while it runs).
int wgpt_resp_chunk(wgpt_sbuf *b, const wgpt_serve_job *j, const char *model, uint32_t c, const char *text,
                    size_t n, const char *finish);
int wgpt_resp_models(wgpt_sbuf *b, const char *model, long long created, uint32_t context);
int wgpt_resp_health(wgpt_sbuf *b, const wgpt_batcher_stats *st);

#endif
