// generate_stream.c: streaming generation through the KV cache (see generate_stream.h).
#include "train/generate_stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/stop_text.h"
#include "util/clock.h"
#include "util/err.h"

typedef struct sample_ {
    const wgpt_stream_opts *o;
    uint32_t index;
    int32_t *win;          // (ctx) the tokens its slot holds
    uint32_t wlen;
    int live;
    wgpt_stop_text stop;
} sample_;

static void emit_(void *user, const char *bytes, size_t len) {
    sample_ *s = user;
    s->o->emit(s->o->user, s->index, bytes, len);
}

typedef struct run_ {
    wgpt_decoder *d;
    const wgpt_stream_opts *o;
    wgpt_stream_stats *st;
    uint32_t V, ctx, count;
    float *logits;      // (count, V): each sample's next-token logits
    float *step_logits; // (count, V)
    float *pf;
    uint32_t *pi, *slots;
    int32_t *ids;
    sample_ *smp;
} run_;

static int prefill_(run_ *r, sample_ *s, char *err, size_t errlen) {
    double t0 = wgpt_clock_s();
    wgpt_decoder_reset(r->d, s->index);
    int rc = wgpt_decoder_prefill(r->d, s->index, s->win, s->wlen, r->logits + (size_t)s->index * r->V, err, errlen);
    r->st->prefill_s += wgpt_clock_s() - t0;
    return rc;
}

// Picks sample s's next token and emits it; 1 if it goes on (its slot then
// takes the token: ids/slots for the step, or a slide), 0 if it ended.
static int advance_(run_ *r, sample_ *s, wgpt_sampler *smp, const wgpt_tokenizer *tok, int last, size_t *nstep,
                    char *err, size_t errlen) {
    const float *lg = r->logits + (size_t)s->index * r->V;
    for (uint32_t i = 0; i < r->V; i++)
        if (!isfinite(lg[i]))
            return wgpt_errf(err, errlen, "the model's logits hold %s (sample %u): its weights overflow",
                             isnan(lg[i]) ? "NaN" : "Inf", s->index + 1);
    uint32_t t = wgpt_sampler_pick(smp, lg, r->V, r->pf, r->pi);
    int64_t eot = wgpt_tokenizer_eot(tok);
    if (r->o->stop_at_eot && eot >= 0 && t == (uint64_t)eot) return 0;
    size_t len = 0;
    const char *bytes = wgpt_tokenizer_decode(tok, t, &len);
    int st = wgpt_stop_text_feed(&s->stop, bytes ? bytes : "", bytes ? len : 0, emit_, s);
    if (st < 0) return wgpt_errf(err, errlen, "out of host memory holding back a stop string");
    r->st->tokens++;
    if (st == 1 || last) return 0;
    if (s->wlen < r->ctx) {
        s->win[s->wlen++] = (int32_t)t;
        r->slots[*nstep] = s->index, r->ids[*nstep] = (int32_t)t;
        (*nstep)++;
        return 1;
    }
    if (r->o->on_full == WGPT_FULL_STOP) {
        r->st->full = 1;
        return 0;
    }
    // slide: the last half of the context, the new token included
    uint32_t keep = r->ctx / 2 ? r->ctx / 2 : 1;
    memmove(s->win, s->win + (s->wlen - (keep - 1)), (keep - 1) * sizeof *s->win);
    s->win[keep - 1] = (int32_t)t;
    s->wlen = keep;
    r->st->slides++;
    return prefill_(r, s, err, errlen) < 0 ? -1 : 1;
}

static int run_all_(run_ *r, wgpt_sampler *smp, const wgpt_tokenizer *tok, char *err, size_t errlen) {
    for (uint32_t i = 0; i < r->count; i++)
        if (prefill_(r, &r->smp[i], err, errlen) < 0) return -1;
    for (size_t k = 0; k < r->o->n_new; k++) {
        if (r->o->stop && *r->o->stop) {
            r->st->interrupted = 1;
            break;
        }
        size_t nstep = 0, live = 0;
        for (uint32_t i = 0; i < r->count; i++) {
            sample_ *s = &r->smp[i];
            if (!s->live) continue;
            int rc = advance_(r, s, smp, tok, k + 1 == r->o->n_new, &nstep, err, errlen);
            if (rc < 0) return -1;
            s->live = rc;
            live += (size_t)rc;
        }
        if (!live) break;
        if (nstep) {
            double t0 = wgpt_clock_s();
            if (wgpt_decoder_step(r->d, r->slots, r->ids, nstep, r->step_logits, err, errlen) < 0) return -1;
            r->st->decode_s += wgpt_clock_s() - t0;
            r->st->steps++;
            for (size_t j = 0; j < nstep; j++)
                memcpy(r->logits + (size_t)r->slots[j] * r->V, r->step_logits + j * r->V, r->V * sizeof(float));
        }
    }
    return 0;
}

int wgpt_generate_stream(wgpt_decoder *d, const wgpt_tokenizer *tok, wgpt_sampler *s, const uint32_t *prompt,
                         size_t np, uint32_t count, const wgpt_stream_opts *o, wgpt_stream_stats *st, char *err,
                         size_t errlen) {
    memset(st, 0, sizeof *st);
    if (count == 0 || count > wgpt_decoder_max_slots(d))
        return wgpt_errf(err, errlen, "%u samples: the decoder has %u slots", count, wgpt_decoder_max_slots(d));
    run_ r = {.d = d, .o = o, .st = st, .V = wgpt_decoder_vocab(d), .ctx = wgpt_decoder_context(d), .count = count};
    r.logits = malloc((size_t)count * r.V * sizeof *r.logits);
    r.step_logits = malloc((size_t)count * r.V * sizeof *r.step_logits);
    r.pf = malloc(r.V * sizeof *r.pf);
    r.pi = malloc(r.V * sizeof *r.pi);
    r.slots = malloc(count * sizeof *r.slots);
    r.ids = malloc(count * sizeof *r.ids);
    r.smp = calloc(count, sizeof *r.smp);
    int rc = r.logits && r.step_logits && r.pf && r.pi && r.slots && r.ids && r.smp
                 ? 0
                 : wgpt_errf(err, errlen, "out of host memory for %u samples", count);
    // the start of a document, then the prompt: its last half context if it does not fit
    int64_t eot = wgpt_tokenizer_eot(tok);
    size_t total = 1 + np, keep = total;
    if (keep > r.ctx - 1 && r.ctx > 1) {
        keep = r.ctx / 2 ? r.ctx / 2 : 1;
        st->prompt_cut = 1;
    }
    st->prompt_tokens = keep;
    for (uint32_t i = 0; rc == 0 && i < count; i++) {
        sample_ *sm = &r.smp[i];
        sm->o = o, sm->index = i, sm->live = 1;
        wgpt_stop_text_init(&sm->stop, o->stops, o->nstops);
        sm->win = malloc(r.ctx * sizeof *sm->win);
        if (!sm->win) {
            rc = wgpt_errf(err, errlen, "out of host memory for %u samples", count);
            break;
        }
        for (size_t j = total - keep; j < total; j++)
            sm->win[sm->wlen++] = j == 0 ? (int32_t)(eot >= 0 ? eot : '\n') : (int32_t)prompt[j - 1];
    }
    if (rc == 0) rc = run_all_(&r, s, tok, err, errlen);
    for (uint32_t i = 0; r.smp && i < count; i++) {
        if (rc == 0) wgpt_stop_text_flush(&r.smp[i].stop, emit_, &r.smp[i]);
        wgpt_stop_text_free(&r.smp[i].stop);
        free(r.smp[i].win);
    }
    free(r.logits), free(r.step_logits), free(r.pf), free(r.pi), free(r.slots), free(r.ids), free(r.smp);
    return rc;
}
