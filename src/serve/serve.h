// serve.h: `wgpt serve`: a model behind an OpenAI-compatible HTTP API.
// The pieces: http.c (libmicrohttpd, routes), request.c (the JSON a client
// sends), batcher.c (the one thread that decodes, continuous batching),
// job.c (a request's text as it grows), response.c (the JSON sent back).
#ifndef WGPT_SERVE_H
#define WGPT_SERVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "model/gpt2.h"

typedef struct wgpt_serve_opts {
    const char *host;      // where to listen: "127.0.0.1" (loopback) unless the user says otherwise
    uint16_t port;         // 0: a free one (said through say)
    uint32_t max_batch;    // choices decoded together (decoder slots)
    size_t max_body;       // bytes a request body may hold
    uint32_t max_conns;    // connections at once
    const char *model;     // the model's name in responses
    // Set by the caller's signal handler: stop (finish the requests in
    // flight, take no new ones, return), stop_now (cancel those too).
    volatile sig_atomic_t *stop, *stop_now;
    // Lines for the user (where it listens, that it stops); NULL: none.
    void (*say)(void *user, const char *line);
    void *say_user;
} wgpt_serve_opts;

// Serves model (its GPU is then used by the decode thread only) until *stop.
// Returns 0, or -1 with err (the decoder could not be made, the address is
// taken, ...).
int wgpt_serve_run(const wgpt_serve_opts *o, wgpt_gpt2 *model, const wgpt_tokenizer *tok, char *err, size_t errlen);

#endif
