// tokenizer_internal.h: what the tokenizer's files share (not for callers):
// the handle, the BPE merge tables (tokenizer_bpe.c) and the GPT-2
// pre-tokenization regex (tokenizer_pretokenize.c).
#ifndef WGPT_TOKENIZER_INTERNAL_H
#define WGPT_TOKENIZER_INTERNAL_H

#include <stdlib.h>

#include "data/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

typedef struct wgpt_bpe wgpt_bpe;

struct wgpt_tokenizer {
    const char *name;
    uint32_t vocab_size;
    int64_t eot;         // -1: none
    char *bytes;         // every token's bytes, concatenated
    uint32_t *off;       // (vocab_size + 1): id i is bytes[off[i], off[i+1])
    wgpt_bpe *bpe;       // gpt2 only
    pcre2_code *pretok;  // gpt2 only
};

// Appends one id to a growable array (see wgpt_tokenizer_encode). -1 on out of memory.
static inline int wgpt_tokenizer_push_(uint32_t **ids, size_t *n, size_t *cap, uint32_t id) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        if (c < *cap || c > SIZE_MAX / sizeof **ids) return -1;
        uint32_t *p = realloc(*ids, c * sizeof *p);
        if (!p) return -1;
        *ids = p;
        *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

// --- tokenizer_bpe.c: byte-level BPE by merge rank ---------------------------

// The bytes -> id map of a vocabulary of n tokens (bytes/off laid out as in
// struct wgpt_tokenizer; both must outlive the result). Returns NULL on out of
// memory, or if two ids have the same bytes (then *dup_a < *dup_b name them).
wgpt_bpe *wgpt_bpe_create(const char *bytes, const uint32_t *off, uint32_t n, uint32_t *dup_a, uint32_t *dup_b);
void wgpt_bpe_free(wgpt_bpe *b);
// The id whose bytes are s[0, len), or -1.
int64_t wgpt_bpe_find(const wgpt_bpe *b, const char *s, size_t len);

enum {
    WGPT_BPE_OK = 0,
    WGPT_BPE_OOM = -1,
    WGPT_BPE_NO_RESULT = -2,  // the bytes of left+right are no token (or merges >= tokens)
    WGPT_BPE_REPEATED = -3,   // the pair was added before (*rank says when)
    WGPT_BPE_MISSING_BYTE = -4,  // wgpt_bpe_finish: a byte has no token (*missing_byte)
};
// Adds the merge left+right with the next rank (0 for the first call). On
// WGPT_BPE_REPEATED, *rank is the earlier rank of the pair.
int wgpt_bpe_add_merge(wgpt_bpe *b, uint32_t left, uint32_t right, uint32_t *rank);
// Call after the last merge: every byte must have a token (else
// WGPT_BPE_MISSING_BYTE with *missing_byte set); precomputes which tokens BPE
// yields whole. WGPT_BPE_OOM on out of memory.
int wgpt_bpe_finish(wgpt_bpe *b, int *missing_byte);

// Per-call working memory of wgpt_bpe_encode (zero-initialise; free with _free).
typedef struct wgpt_bpe_scratch {
    uint32_t *sym, *prev, *next;  // (cap) the symbols of one word, a linked list (one block at sym)
    size_t cap;
    struct wgpt_bpe_cand *heap, *pend;  // candidate merges, pending ones of a rank
    size_t nheap, npend, heap_cap, pend_cap;
} wgpt_bpe_scratch;
void wgpt_bpe_scratch_free(wgpt_bpe_scratch *w);
// Appends the BPE ids of one pre-token s[0, len) (len >= 1) to the growable
// array. Returns 0, -1 on out of memory.
int wgpt_bpe_encode(const wgpt_bpe *b, wgpt_bpe_scratch *w, const char *s, size_t len, uint32_t **ids, size_t *n,
                    size_t *cap);

// --- tokenizer_pretokenize.c: GPT-2's pre-tokenization regex ------------------

// Compiles GPT-2's pattern (UTF-8, Unicode properties, invalid UTF-8 allowed).
// NULL with err on failure. Free with pcre2_code_free.
pcre2_code *wgpt_pretok_compile(char *err, size_t errlen);
// Calls fn on each piece of text[0, len), in order; the pieces cover every
// byte: regex matches, and runs of bytes that are not valid UTF-8 (which no
// match can contain) as pieces of their own. Returns 0, fn's nonzero return,
// or -1 if PCRE2 fails (out of memory or a resource limit).
typedef int (*wgpt_pretok_fn)(void *ctx, const char *piece, size_t len);
int wgpt_pretok_split(const pcre2_code *re, const char *text, size_t len, wgpt_pretok_fn fn, void *ctx);

#endif
