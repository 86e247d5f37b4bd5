// tokenizer_pretokenize.c: GPT-2's pre-tokenization, the regex that cuts text
// into words, numbers, punctuation and whitespace before BPE:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
#include <stdio.h>

#include "data/tokenizer_internal.h"

// \s as encoder.py's `regex` module and tiktoken's Rust regex mean it: the
// Unicode White_Space property. PCRE2's own \s (UCP) also takes U+180E, and
// JavaScript's takes U+FEFF but not U+0085, so the set is spelled out.
#define WS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static const char PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
                              "|[" WS "]+(?![^" WS "])|[" WS "]+";

pcre2_code *wgpt_pretok_compile(char *err, size_t errlen) {
    int code = 0;
    PCRE2_SIZE at = 0;
    // MATCH_INVALID_UTF: bytes that are not UTF-8 are never part of a match
    // (rather than an error), so wgpt_pretok_split can hand them on as they are.
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)PATTERN, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
    if (!re) {
        char msg[256];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
        if (err && errlen)
            snprintf(err, errlen, "PCRE2 rejects the GPT-2 pattern at offset %zu: %s (PCRE2 %d.%d)", (size_t)at, msg,
                     PCRE2_MAJOR, PCRE2_MINOR);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // several times faster; the interpreter is the fallback
    return re;
}

// PCRE2 sees the text through a window of this many bytes, doubled while a
// piece reaches its end. Without a window, PCRE2's interpreter (used where JIT
// is unavailable) checks the UTF-8 of all the rest of the text on every call:
// quadratic time.
enum { WINDOW = 256 };

int wgpt_pretok_split(const pcre2_code *re, const char *text, size_t len, wgpt_pretok_fn fn, void *ctx) {
    if (len == 0) return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) return -1;
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t pos = 0;
    int rc = 0;
    while (pos < len && rc == 0) {
        size_t ms, me;
        for (size_t win = WINDOW;; win *= 2) {
            size_t wend = len - pos <= win ? len : pos + win;
            int m = pcre2_match(re, (PCRE2_SPTR)(text + pos), wend - pos, 0, 0, md, NULL);
            if (m < 0 && m != PCRE2_ERROR_NOMATCH) {
                pcre2_match_data_free(md);
                return -1;
            }
            ms = m >= 0 ? pos + ov[0] : wend;
            me = m >= 0 ? pos + ov[1] : wend;
            // The pattern looks at most one character past a match, and a
            // match that fails at the window's end fails within 3 bytes of
            // it ("'r|"). So a piece ending 4 bytes or more before the end is
            // the one the whole text gives; one nearer may run on (or end at a
            // character the window cut in two): look again through a wider one.
            if (wend == len || me + 4 <= wend) break;
        }
        // Every valid character starts a match, so what is skipped is not UTF-8.
        if (ms > pos) rc = fn(ctx, text + pos, ms - pos);
        if (rc == 0 && me > ms) rc = fn(ctx, text + ms, me - ms);
        if (me == ms && ms < len) {  // the pattern matches no empty string; never loop on one
            if (rc == 0) rc = fn(ctx, text + ms, 1);
            me = ms + 1;
        }
        pos = me;
    }
    pcre2_match_data_free(md);
    return rc;
}
