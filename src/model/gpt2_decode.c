// gpt2_decode.c: the decoder's slots, its checks, and the full-recompute
// reference (see gpt2_decode.h); the KV cache is gpt2_decode_kv.c.
#include "model/decode_kernels.h"
#include "model/gpt2_decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static wgpt_decoder *create_(wgpt_gpt2 *model, uint32_t max_slots, int recompute, char *err, size_t errlen) {
    if (max_slots == 0) {
        wgpt_errf(err, errlen, "a decoder needs at least 1 slot");
        return NULL;
    }
    wgpt_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        wgpt_errf(err, errlen, "out of host memory for a decoder");
        return NULL;
    }
    d->m = model;
    d->recompute = recompute;
    d->slots = max_slots;
    d->ctx = model->c.max_seq_len;
    if (recompute && model->T < d->ctx) d->ctx = model->T;
    d->V = model->c.vocab_size;
    d->len = calloc(max_slots, sizeof *d->len);
    int rc = d->len ? 0 : wgpt_errf(err, errlen, "out of host memory for %u slots", max_slots);
    if (rc == 0 && recompute) {
        d->ids = calloc((size_t)max_slots * d->ctx, sizeof *d->ids);
        d->window = calloc((size_t)model->B * model->T, sizeof *d->window);
        if (!d->ids || !d->window)
            rc = wgpt_errf(err, errlen, "out of host memory for %u slots of %u positions", max_slots, d->ctx);
    } else if (rc == 0) {
        rc = wgpt_decoder_kv_init_(d, err, errlen);
    }
    if (rc < 0) {
        wgpt_decoder_free(d);
        return NULL;
    }
    return d;
}

wgpt_decoder *wgpt_decoder_create(wgpt_gpt2 *model, uint32_t max_slots, char *err, size_t errlen) {
    return create_(model, max_slots, 0, err, errlen);
}

wgpt_decoder *wgpt_decoder_create_recompute(wgpt_gpt2 *model, uint32_t max_slots, char *err, size_t errlen) {
    return create_(model, max_slots, 1, err, errlen);
}

void wgpt_decoder_free(wgpt_decoder *d) {
    if (!d) return;
    wgpt_decoder_kv_free_(d);
    free(d->len), free(d->ids), free(d->window);
    free(d);
}

uint32_t wgpt_decoder_max_slots(const wgpt_decoder *d) { return d->slots; }
uint32_t wgpt_decoder_context(const wgpt_decoder *d) { return d->ctx; }
uint32_t wgpt_decoder_vocab(const wgpt_decoder *d) { return d->V; }
uint32_t wgpt_decoder_len(const wgpt_decoder *d, uint32_t slot) { return slot < d->slots ? d->len[slot] : 0; }
uint64_t wgpt_decoder_memory(const wgpt_decoder *d) { return d->bytes; }

void wgpt_decoder_reset(wgpt_decoder *d, uint32_t slot) {
    if (slot < d->slots) d->len[slot] = 0;
}

static int check_ids_(const wgpt_decoder *d, const int32_t *ids, size_t n, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= d->V)
            return wgpt_errf(err, errlen, "token id %d (position %zu) outside the vocabulary [0, %u)", ids[i], i,
                             d->V);
    return 0;
}

// The reference: the logits of slot's last position by a full forward over its context.
static int recompute_(wgpt_decoder *d, uint32_t slot, float *logits, char *err, size_t errlen) {
    uint32_t n = d->len[slot];
    memset(d->window, 0, (size_t)d->m->B * d->m->T * sizeof *d->window);
    for (uint32_t i = 0; i < n; i++) d->window[i] = d->ids[(size_t)slot * d->ctx + i];
    if (wgpt_gpt2_logits(d->m, d->window, 0, n - 1, logits) < 0)
        return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(d->m));
    return 0;
}

static void meta_row_(wgpt_decoder *d, uint32_t r, int32_t id, uint32_t slot, uint32_t pos) {
    uint32_t *e = d->meta_host + WGPT_DECODE_META_U32 + 4 * r;
    e[0] = (uint32_t)id, e[1] = slot, e[2] = pos, e[3] = 0;
}

int wgpt_decoder_prefill(wgpt_decoder *d, uint32_t slot, const int32_t *ids, size_t n, float *logits, char *err,
                         size_t errlen) {
    if (slot >= d->slots) return wgpt_errf(err, errlen, "slot %u outside the decoder's %u", slot, d->slots);
    if (n == 0) return wgpt_errf(err, errlen, "a prefill needs at least 1 token");
    if (n > d->ctx - d->len[slot])
        return wgpt_errf(err, errlen, "%zu tokens do not fit slot %u: it holds %u of a context of %u", n, slot,
                         d->len[slot], d->ctx);
    if (check_ids_(d, ids, n, err, errlen) < 0) return -1;
    if (d->recompute) {
        memcpy(d->ids + (size_t)slot * d->ctx + d->len[slot], ids, n * sizeof *ids);
        d->len[slot] += (uint32_t)n;
        return recompute_(d, slot, logits, err, errlen);
    }
    // chunks of the prefill pass's rows, in order: each one's keys and values
    // are cached before the next attends to them
    for (size_t done = 0; done < n;) {
        uint32_t k = n - done < d->prefill.rows ? (uint32_t)(n - done) : d->prefill.rows;
        for (uint32_t r = 0; r < k; r++) meta_row_(d, r, ids[done + r], slot, d->len[slot] + r);
        if (wgpt_decoder_kv_run_(d, &d->prefill, k, done + k == n ? logits : NULL, err, errlen) < 0) {
            wgpt_decoder_reset(d, slot);  // what it holds is unknown now
            return -1;
        }
        d->len[slot] += k;
        done += k;
    }
    return 0;
}

int wgpt_decoder_step(wgpt_decoder *d, const uint32_t *slots, const int32_t *ids, size_t n, float *logits,
                      char *err, size_t errlen) {
    if (n > d->slots) return wgpt_errf(err, errlen, "%zu slots in one step: the decoder has %u", n, d->slots);
    for (size_t i = 0; i < n; i++) {
        if (slots[i] >= d->slots) return wgpt_errf(err, errlen, "slot %u outside the decoder's %u", slots[i], d->slots);
        for (size_t j = 0; j < i; j++)
            if (slots[j] == slots[i]) return wgpt_errf(err, errlen, "slot %u twice in one step", slots[i]);
        if (d->len[slots[i]] >= d->ctx)
            return wgpt_errf(err, errlen, "slot %u is full: it holds the whole context of %u", slots[i], d->ctx);
    }
    if (check_ids_(d, ids, n, err, errlen) < 0) return -1;
    if (n == 0) return 0;
    if (d->recompute) {
        for (size_t i = 0; i < n; i++) {
            uint32_t s = slots[i];
            d->ids[(size_t)s * d->ctx + d->len[s]++] = ids[i];
            if (recompute_(d, s, logits + i * d->V, err, errlen) < 0) return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < n; i++) meta_row_(d, (uint32_t)i, ids[i], slots[i], d->len[slots[i]]);
    if (wgpt_decoder_kv_run_(d, &d->step, (uint32_t)n, logits, err, errlen) < 0) {
        for (size_t i = 0; i < n; i++) wgpt_decoder_reset(d, slots[i]);
        return -1;
    }
    for (size_t i = 0; i < n; i++) d->len[slots[i]]++;
    return 0;
}
