// http.h: the HTTP side of `wgpt serve`, on libmicrohttpd (a thread a
// connection): POST /v1/completions (OpenAI's completions API, streamed as
// server-sent events on request), GET /v1/models, GET /health. Requests are
// parsed here and handed to the batcher; nothing here touches the GPU.
#ifndef WGPT_SERVE_HTTP_H
#define WGPT_SERVE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "serve/batcher.h"

typedef struct wgpt_http_opts {
    const char *host;    // address or name to listen on ("127.0.0.1": loopback only)
    uint16_t port;       // 0: any free port (wgpt_http_port tells which)
    size_t max_body;     // bytes a request body may hold (larger: 413)
    uint32_t max_conns;  // connections at once (each a thread)
    const char *model;   // the model's name in responses
    uint32_t context;    // positions a choice may hold: prompt + max_tokens, after a document start
} wgpt_http_opts;

typedef struct wgpt_http wgpt_http;

// Listens and serves until wgpt_http_stop. NULL with err (the address is
// taken, or not one of this host's).
wgpt_http *wgpt_http_start(const wgpt_http_opts *o, wgpt_batcher *b, const wgpt_tokenizer *tok, char *err,
                           size_t errlen);
uint16_t wgpt_http_port(const wgpt_http *h);
// Stops accepting connections; those open go on.
void wgpt_http_quiesce(wgpt_http *h);
// Requests begun whose response is not yet all sent.
int wgpt_http_inflight(wgpt_http *h);
// Closes every connection and waits for their threads (the batcher must have
// finished or cancelled their jobs first: wgpt_batcher_stop), then frees h.
void wgpt_http_stop(wgpt_http *h);

#endif
