// batcher.h: continuous batching. One thread owns the decoder (and so the
// GPU): between decoding steps it gives free slots to queued requests
// (prefilling their prompts), then decodes one token for every running
// choice in one step. HTTP threads submit jobs and wait for their text under
// the batcher's lock; a cancelled job's slots are freed before the next step.
#ifndef WGPT_SERVE_BATCHER_H
#define WGPT_SERVE_BATCHER_H

#include "data/tokenizer.h"
#include "model/gpt2_decode.h"
#include "serve/job.h"

typedef struct wgpt_batcher wgpt_batcher;

// Starts the decode thread over d (which it then owns until wgpt_batcher_free;
// nothing else may touch d or its GPU meanwhile). NULL with err.
wgpt_batcher *wgpt_batcher_start(wgpt_decoder *d, const wgpt_tokenizer *tok, char *err, size_t errlen);
// Stops taking jobs (wgpt_batcher_submit then fails) and fails the queued
// ones with 503; the running ones finish (cancel: are ended). Returns at once.
void wgpt_batcher_drain(wgpt_batcher *b, int cancel);
// 1 when no choice runs or waits.
int wgpt_batcher_idle(wgpt_batcher *b);
// Drains (wgpt_batcher_drain) and waits for the decode thread: d is the
// caller's again. HTTP threads may still read their jobs and release them.
// Once only; a second call does nothing.
void wgpt_batcher_stop(wgpt_batcher *b, int cancel);
// Stops (cancelling) if not stopped, and frees b: after every job was released.
void wgpt_batcher_free(wgpt_batcher *b);

// Queues j (the batcher takes a reference). -1 when shutting down.
int wgpt_batcher_submit(wgpt_batcher *b, wgpt_serve_job *j);
// The client went away: its slots are freed before the next step.
void wgpt_batcher_cancel(wgpt_batcher *b, wgpt_serve_job *j);
// Drops the caller's reference to j (freed with the last one).
void wgpt_batcher_release(wgpt_batcher *b, wgpt_serve_job *j);

// The lock over every job's shared fields, and a wait (lock held) until any
// job moved on or ms passed.
void wgpt_batcher_lock(wgpt_batcher *b);
void wgpt_batcher_unlock(wgpt_batcher *b);
void wgpt_batcher_wait(wgpt_batcher *b, int ms);

typedef struct wgpt_batcher_stats {
    uint32_t slots, busy, queued;  // decoder slots, those holding a choice, jobs waiting for one
    uint64_t steps, tokens;        // decoding steps so far, tokens they produced (prefills' first ones too)
} wgpt_batcher_stats;
void wgpt_batcher_get_stats(wgpt_batcher *b, wgpt_batcher_stats *out);

#endif
