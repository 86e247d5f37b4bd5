// request.h: the body of an OpenAI-style `POST /v1/completions`, parsed and
// checked. Every refusal names the field and what it takes, for a 400 body.
#ifndef WGPT_SERVE_REQUEST_H
#define WGPT_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define WGPT_SERVE_MAX_STOPS 4  // as OpenAI's API
#define WGPT_SERVE_MAX_STOP_BYTES 256
#define WGPT_SERVE_MAX_N 16     // choices a request may ask for

typedef struct wgpt_completion_req {
    char *prompt;           // malloc'ed text (may hold NUL bytes: prompt_len says how long)
    size_t prompt_len;
    uint32_t max_tokens;    // default 16
    float temperature;      // [0, 2], default 1; 0: greedy
    float top_p;            // (0, 1], default 1
    uint32_t top_k;         // default 0: all tokens
    uint64_t seed;          // default: seed_given 0 and a seed of the caller's choosing
    int seed_given;
    uint32_t n;             // choices, default 1
    int stream;             // server-sent events
    int nstops;
    char *stops[WGPT_SERVE_MAX_STOPS];  // malloc'ed, non-empty
    size_t stop_lens[WGPT_SERVE_MAX_STOPS];
} wgpt_completion_req;

// Parses body (len bytes of JSON). Returns 0, or -1 with msg (the error
// message) and param (the field at fault, "" for none) filled. r is empty
// after a failure; free it with wgpt_completion_req_free either way.
int wgpt_completion_req_parse(wgpt_completion_req *r, const char *body, size_t len, char *msg, size_t msglen,
                              char *param, size_t paramlen);
void wgpt_completion_req_free(wgpt_completion_req *r);

#endif
