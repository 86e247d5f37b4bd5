// text.c: buffers, JSON strings and safe cut points of model text (see text.h).
#include "serve/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve_(wgpt_sbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int wgpt_sbuf_add(wgpt_sbuf *b, const void *bytes, size_t n) {
    if (reserve_(b, n) < 0) return -1;
    if (n) memcpy(b->p + b->len, bytes, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int wgpt_sbuf_addf(wgpt_sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve_(b, (size_t)n) < 0) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void wgpt_sbuf_free(wgpt_sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

// At s[0, n) (n >= 1): one valid character of *len bytes (returns 1), or
// the maximal invalid subpart there, *len >= 1 bytes (returns 0): what
// Unicode's "U+FFFD substitution of maximal subparts" replaces by one U+FFFD,
// as Python's decode(errors="replace") does. *partial: s ends inside a
// sequence that is valid so far.
static int utf8_next_(const unsigned char *s, size_t n, size_t *len, int *partial) {
    *partial = 0;
    *len = 1;
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;  // the second byte's range (RFC 3629's table)
    size_t need;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    for (size_t i = 1; i < need; i++) {
        if (i >= n) {
            *partial = 1;
            *len = i;
            return 0;
        }
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (s[i] < l || s[i] > h) {
            *len = i;
            return 0;
        }
    }
    *len = need;
    return 1;
}

int wgpt_json_string(wgpt_sbuf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (wgpt_sbuf_add(b, "\"", 1) < 0) return -1;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        int partial, rc;
        size_t l;
        if (c == '"' || c == '\\') rc = wgpt_sbuf_addf(b, "\\%c", c), i++;
        else if (c == '\n') rc = wgpt_sbuf_add(b, "\\n", 2), i++;
        else if (c < 0x20 || c == 0x7F) rc = wgpt_sbuf_addf(b, "\\u%04x", c), i++;
        else if (utf8_next_(u + i, n - i, &l, &partial)) rc = wgpt_sbuf_add(b, u + i, l), i += l;
        else rc = wgpt_sbuf_add(b, "\\ufffd", 6), i += l;
        if (rc < 0) return -1;
    }
    return wgpt_sbuf_add(b, "\"", 1);
}

size_t wgpt_utf8_safe_len(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = n > 3 ? n - 3 : 0; i < n; i++) {  // a partial sequence is at most 3 bytes
        int partial;
        size_t l;
        if (u[i] >= 0xC2 && !utf8_next_(u + i, n - i, &l, &partial) && partial) return i;
    }
    return n;
}
