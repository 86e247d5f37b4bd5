// batcher.c: the decode thread and its queue (see batcher.h).
#include "serve/batcher.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    wgpt_serve_job *job;  // NULL: free
    uint32_t c;           // which of its choices
} holder_;

struct wgpt_batcher {
    wgpt_decoder *d;
    const wgpt_tokenizer *tok;
    uint32_t nslots, V;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;      // the decode thread waits here for jobs
    pthread_cond_t progress;  // HTTP threads wait here for text
    wgpt_serve_job *head, *tail;
    uint32_t queued;
    holder_ *slot;            // (nslots)
    int stopping, cancel_all, joined;
    wgpt_batcher_stats st;
    // the decode thread's work space
    float *logits;            // (nslots, V)
    float *pf;                // (V) the sampler's scratch
    uint32_t *pi;             // (V)
    uint32_t *rows;           // (nslots) slots of a step
    int32_t *feed;            // (nslots) their tokens
    uint32_t *picks;          // (nslots) the tokens sampled
    char err[512];
};

// Drops the batcher's reference once no choice of j runs or waits.
static void settle_(wgpt_batcher *b, wgpt_serve_job *j) {
    if (j->admitted < j->req.n || j->finished < j->req.n) return;  // (still queued, or running)
    for (uint32_t c = 0; c < j->req.n; c++)
        if (j->choice[c].slot >= 0) return;
    if (--j->refs == 0) wgpt_serve_job_free(j);
    (void)b;
}

static void fail_job_(wgpt_serve_job *j, int status, const char *msg) {
    if (!j->status) {
        j->status = status;
        snprintf(j->error, sizeof j->error, "%s", msg);
    }
    for (uint32_t c = 0; c < j->req.n; c++) wgpt_serve_job_finish(j, c, "error");
}

static void free_slot_(wgpt_batcher *b, uint32_t s) {
    holder_ *h = &b->slot[s];
    if (!h->job) return;
    wgpt_serve_job *j = h->job;
    j->choice[h->c].slot = -1;
    h->job = NULL;
    b->st.busy--;
    settle_(b, j);
}

// Frees the slots of finished or cancelled choices; fails the queue when stopping. (Lock held.)
static void sweep_(wgpt_batcher *b) {
    for (uint32_t s = 0; s < b->nslots; s++) {
        holder_ *h = &b->slot[s];
        if (!h->job) continue;
        if (h->job->cancelled || b->cancel_all) wgpt_serve_job_finish(h->job, h->c, "cancelled");
        if (h->job->choice[h->c].finish) free_slot_(b, s);
    }
    wgpt_serve_job **pp = &b->head;
    while (*pp) {
        wgpt_serve_job *j = *pp;
        if (!j->cancelled && !j->status && !b->stopping) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        b->queued--;
        if (!j->cancelled) fail_job_(j, 503, "the server is shutting down");  // (keeps an earlier failure)
        for (uint32_t c = j->admitted; c < j->req.n; c++) wgpt_serve_job_finish(j, c, "cancelled");
        j->admitted = j->req.n;
        settle_(b, j);
    }
    b->tail = NULL;
    for (wgpt_serve_job *j = b->head; j; j = j->next) b->tail = j;
}

// Samples row r of the logits for choice ch into *out; -1 if they are not finite.
static int pick_(wgpt_batcher *b, wgpt_serve_choice *ch, uint32_t r, uint32_t *out) {
    const float *l = b->logits + (size_t)r * b->V;
    for (uint32_t i = 0; i < b->V; i++)
        if (!isfinite(l[i])) return -1;
    *out = wgpt_sampler_pick(&ch->sampler, l, b->V, b->pf, b->pi);
    return 0;
}

// Adds the sampled token to choice c of j (lock held); frees its slot when it ends.
static void deliver_(wgpt_batcher *b, wgpt_serve_job *j, uint32_t c, uint32_t id) {
    wgpt_serve_choice *ch = &j->choice[c];
    b->st.tokens++;
    ch->next = (int32_t)id;
    if (!wgpt_serve_job_add_token(j, c, b->tok, id) && ch->slot >= 0 &&
        wgpt_decoder_len(b->d, (uint32_t)ch->slot) >= wgpt_decoder_context(b->d))
        wgpt_serve_job_finish(j, c, "length");
    if (ch->finish && ch->slot >= 0) free_slot_(b, (uint32_t)ch->slot);
}

// Gives free slots to queued choices, one prefill each. (Lock held; released around the GPU.)
static void admit_(wgpt_batcher *b) {
    uint32_t s = 0;
    while (b->head && !b->stopping) {
        while (s < b->nslots && b->slot[s].job) s++;
        if (s == b->nslots) return;
        wgpt_serve_job *j = b->head;
        if (j->cancelled || j->status) {  // (sweep_ takes it off the queue)
            sweep_(b);
            continue;
        }
        uint32_t c = j->admitted++;
        if (j->admitted == j->req.n) {
            b->head = j->next;
            if (!b->head) b->tail = NULL;
            b->queued--;
        }
        b->slot[s] = (holder_){j, c};
        j->choice[c].slot = (int)s;
        b->st.busy++;
        pthread_mutex_unlock(&b->mu);
        wgpt_decoder_reset(b->d, s);
        uint32_t id = 0;
        int rc = wgpt_decoder_prefill(b->d, s, j->ids, j->nids, b->logits, b->err, sizeof b->err);
        int finite = rc == 0 && pick_(b, &j->choice[c], 0, &id) == 0;
        pthread_mutex_lock(&b->mu);
        if (rc == 0 && finite) {
            deliver_(b, j, c, id);  // (frees the slot if that ended the choice, and j with it if it was the last reference)
        } else {
            fail_job_(j, 500, rc < 0 ? b->err : "the model's logits are not finite: its weights overflow");
            free_slot_(b, s);
        }
        pthread_cond_broadcast(&b->progress);
    }
}

// One decoding step over every running choice. (Lock held; released around the GPU.)
static void step_(wgpt_batcher *b) {
    uint32_t n = 0;
    for (uint32_t s = 0; s < b->nslots; s++) {
        holder_ *h = &b->slot[s];
        if (!h->job || h->job->choice[h->c].finish) continue;
        b->rows[n] = s;
        b->feed[n++] = h->job->choice[h->c].next;
    }
    if (n == 0) return;
    pthread_mutex_unlock(&b->mu);
    int rc = wgpt_decoder_step(b->d, b->rows, b->feed, n, b->logits, b->err, sizeof b->err);
    int bad[n];  // (n <= nslots, a handful)
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        holder_ *h = &b->slot[b->rows[i]];  // (only this thread changes holders)
        bad[i] = pick_(b, &h->job->choice[h->c], i, &b->picks[i]);
    }
    pthread_mutex_lock(&b->mu);
    b->st.steps++;
    for (uint32_t i = 0; i < n; i++) {
        holder_ *h = &b->slot[b->rows[i]];
        wgpt_serve_job *j = h->job;
        if (rc < 0) fail_job_(j, 500, b->err);
        else if (bad[i]) fail_job_(j, 500, "the model's logits are not finite: its weights overflow");
        else deliver_(b, j, h->c, b->picks[i]);
    }
    sweep_(b);
    pthread_cond_broadcast(&b->progress);
}

static void *run_(void *arg) {
    wgpt_batcher *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        sweep_(b);
        admit_(b);
        if (b->st.busy == 0) {
            pthread_cond_broadcast(&b->progress);
            if (b->stopping && !b->head) break;
            if (!b->head) pthread_cond_wait(&b->work, &b->mu);
            continue;
        }
        step_(b);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

wgpt_batcher *wgpt_batcher_start(wgpt_decoder *d, const wgpt_tokenizer *tok, char *err, size_t errlen) {
    wgpt_batcher *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    b->d = d;
    b->tok = tok;
    b->nslots = wgpt_decoder_max_slots(d);
    b->V = wgpt_decoder_vocab(d);
    b->slot = calloc(b->nslots, sizeof *b->slot);
    b->logits = malloc((size_t)b->nslots * b->V * sizeof *b->logits);
    b->pf = malloc((size_t)b->V * sizeof *b->pf);
    b->pi = malloc((size_t)b->V * sizeof *b->pi);
    b->rows = malloc(b->nslots * sizeof *b->rows);
    b->feed = malloc(b->nslots * sizeof *b->feed);
    b->picks = malloc(b->nslots * sizeof *b->picks);
    if (!b->slot || !b->logits || !b->pf || !b->pi || !b->rows || !b->feed || !b->picks) goto oom;
    b->st.slots = b->nslots;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->progress, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&b->thread, NULL, run_, b);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the decode thread: %s", strerror(rc));
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->work);
        pthread_cond_destroy(&b->progress);
        b->thread = 0;
        goto fail;
    }
    return b;
oom:
    snprintf(err, errlen, "out of host memory for the batcher");
fail:
    if (b) {
        free(b->slot), free(b->logits), free(b->pf), free(b->pi), free(b->rows), free(b->feed), free(b->picks);
        free(b);
    }
    return NULL;
}

void wgpt_batcher_drain(wgpt_batcher *b, int cancel) {
    pthread_mutex_lock(&b->mu);
    b->stopping = 1;
    if (cancel) b->cancel_all = 1;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
}

int wgpt_batcher_idle(wgpt_batcher *b) {
    pthread_mutex_lock(&b->mu);
    int idle = b->st.busy == 0 && !b->head;
    pthread_mutex_unlock(&b->mu);
    return idle;
}

void wgpt_batcher_stop(wgpt_batcher *b, int cancel) {
    wgpt_batcher_drain(b, cancel);
    pthread_mutex_lock(&b->mu);
    int joined = b->joined;
    pthread_mutex_unlock(&b->mu);
    if (joined) return;
    pthread_join(b->thread, NULL);
    pthread_mutex_lock(&b->mu);
    b->joined = 1;
    sweep_(b);
    pthread_cond_broadcast(&b->progress);
    pthread_mutex_unlock(&b->mu);
}

void wgpt_batcher_free(wgpt_batcher *b) {
    if (!b) return;
    wgpt_batcher_stop(b, 1);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->work);
    pthread_cond_destroy(&b->progress);
    free(b->slot), free(b->logits), free(b->pf), free(b->pi), free(b->rows), free(b->feed), free(b->picks);
    free(b);
}

int wgpt_batcher_submit(wgpt_batcher *b, wgpt_serve_job *j) {
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        pthread_mutex_unlock(&b->mu);
        return -1;
    }
    j->refs++;
    j->next = NULL;
    if (b->tail) b->tail->next = j;
    else b->head = j;
    b->tail = j;
    b->queued++;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

void wgpt_batcher_cancel(wgpt_batcher *b, wgpt_serve_job *j) {
    pthread_mutex_lock(&b->mu);
    j->cancelled = 1;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
}

void wgpt_batcher_release(wgpt_batcher *b, wgpt_serve_job *j) {
    pthread_mutex_lock(&b->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&b->mu);
    if (last) wgpt_serve_job_free(j);
}

void wgpt_batcher_lock(wgpt_batcher *b) { pthread_mutex_lock(&b->mu); }
void wgpt_batcher_unlock(wgpt_batcher *b) { pthread_mutex_unlock(&b->mu); }

void wgpt_batcher_wait(wgpt_batcher *b, int ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&b->progress, &b->mu, &t);
}

void wgpt_batcher_get_stats(wgpt_batcher *b, wgpt_batcher_stats *out) {
    pthread_mutex_lock(&b->mu);
    *out = b->st;
    out->queued = b->queued;
    pthread_mutex_unlock(&b->mu);
}
