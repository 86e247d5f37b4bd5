// stop_text.c: stop strings over a byte stream (see stop_text.h).
#include "train/stop_text.h"

#include <stdlib.h>
#include <string.h>

void wgpt_stop_text_init(wgpt_stop_text *s, const char *const *stops, size_t nstops) {
    memset(s, 0, sizeof *s);
    s->stops = stops;
    s->nstops = nstops;
}

void wgpt_stop_text_free(wgpt_stop_text *s) {
    free(s->held);
    s->held = NULL;
    s->nheld = s->cap = 0;
}

// The first offset of needle (m > 0 bytes) in hay (n bytes), or n.
static size_t find_(const char *hay, size_t n, const char *needle, size_t m) {
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return i;
    return n;
}

// Bytes at the end of held that begin some stop string (and are not one whole).
static size_t tail_(const wgpt_stop_text *s) {
    size_t keep = 0;
    for (size_t k = 0; k < s->nstops; k++) {
        size_t m = strlen(s->stops[k]);
        for (size_t t = m - (m > 0); t > keep; t--)
            if (t <= s->nheld && memcmp(s->held + s->nheld - t, s->stops[k], t) == 0) {
                keep = t;
                break;
            }
    }
    return keep;
}

int wgpt_stop_text_feed(wgpt_stop_text *s, const char *bytes, size_t len, wgpt_emit_fn emit, void *user) {
    if (s->stopped) return 1;
    if (s->nheld + len > s->cap) {
        size_t cap = (s->nheld + len) * 2 + 16;
        char *h = realloc(s->held, cap);
        if (!h) return -1;
        s->held = h, s->cap = cap;
    }
    memcpy(s->held + s->nheld, bytes, len);
    s->nheld += len;
    size_t at = s->nheld;
    for (size_t k = 0; k < s->nstops; k++) {
        size_t m = strlen(s->stops[k]);
        if (m == 0) continue;
        size_t i = find_(s->held, s->nheld, s->stops[k], m);
        if (i < at) at = i;  // the earliest stop string wins
    }
    if (at < s->nheld) {
        if (at) emit(user, s->held, at);
        s->stopped = 1;
        s->nheld = 0;
        return 1;
    }
    size_t out = s->nheld - tail_(s);
    if (out) {
        emit(user, s->held, out);
        memmove(s->held, s->held + out, s->nheld - out);
        s->nheld -= out;
    }
    return 0;
}

void wgpt_stop_text_flush(wgpt_stop_text *s, wgpt_emit_fn emit, void *user) {
    if (!s->stopped && s->nheld) emit(user, s->held, s->nheld);
    s->nheld = 0;
}
