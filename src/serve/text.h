// text.h: model text on its way to a client: a growable byte buffer, JSON
// string literals of arbitrary bytes (a model may emit NUL bytes or half a
// UTF-8 character), and where a stream may cut text that is still growing
// (not inside a UTF-8 character; stop strings are train/stop_text.h's).
#ifndef WGPT_SERVE_TEXT_H
#define WGPT_SERVE_TEXT_H

#include <stddef.h>

typedef struct wgpt_sbuf {
    char *p;  // NUL-terminated after every append (p may be NULL while empty)
    size_t len, cap;
} wgpt_sbuf;

// 0, or -1 when out of memory (the buffer is unchanged).
int wgpt_sbuf_add(wgpt_sbuf *b, const void *bytes, size_t n);
int wgpt_sbuf_addf(wgpt_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wgpt_sbuf_free(wgpt_sbuf *b);

// Appends s[0, n) as a JSON string literal, quotes included: valid UTF-8 as
// it is, control characters and NUL as \u00XX, each byte that is not part of
// a valid UTF-8 sequence as U+FFFD.
int wgpt_json_string(wgpt_sbuf *b, const char *s, size_t n);

// The length of the longest prefix of s[0, n) that does not end inside a
// UTF-8 sequence that the next bytes could still complete.
size_t wgpt_utf8_safe_len(const char *s, size_t n);

#endif
