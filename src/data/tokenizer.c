// tokenizer.c: the tokenizer handle, the byte tokenizer, encode and decode
// (GPT-2's files are read by tokenizer_gpt2.c).
#include <stdio.h>
#include <string.h>

#include "data/tokenizer_internal.h"
#include "util/err.h"

wgpt_tokenizer *wgpt_tokenizer_open_bytes(void) {
    wgpt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->name = "bytes";
    t->vocab_size = 256;
    t->eot = -1;
    t->bytes = malloc(256);
    t->off = malloc(257 * sizeof *t->off);
    if (!t->bytes || !t->off) {
        wgpt_tokenizer_free(t);
        return NULL;
    }
    for (int i = 0; i < 256; i++) {
        t->bytes[i] = (char)i;
        t->off[i] = (uint32_t)i;
    }
    t->off[256] = 256;
    return t;
}

int wgpt_tokenizer_known(const char *name) { return strcmp(name, "gpt2") == 0 || strcmp(name, "bytes") == 0; }

wgpt_tokenizer *wgpt_tokenizer_open(const char *name, const char *bpe_dir, char *err, size_t errlen) {
    if (strcmp(name, "bytes") == 0) {
        wgpt_tokenizer *t = wgpt_tokenizer_open_bytes();
        if (!t) wgpt_errf(err, errlen, "out of host memory");
        return t;
    }
    if (strcmp(name, "gpt2") != 0) {
        wgpt_errf(err, errlen, "unknown tokenizer '%s' (gpt2 or bytes)", name);
        return NULL;
    }
    char enc[4200], voc[4200];
    if ((size_t)snprintf(enc, sizeof enc, "%s/encoder.json", bpe_dir) >= sizeof enc ||
        (size_t)snprintf(voc, sizeof voc, "%s/vocab.bpe", bpe_dir) >= sizeof voc) {
        wgpt_errf(err, errlen, "the folder of GPT-2's tokenizer files, %.64s..., is a path of %zu bytes: too long",
                  bpe_dir, strlen(bpe_dir));
        return NULL;
    }
    return wgpt_tokenizer_open_gpt2(enc, voc, err, errlen);
}

void wgpt_tokenizer_free(wgpt_tokenizer *t) {
    if (!t) return;
    wgpt_bpe_free(t->bpe);
    pcre2_code_free(t->pretok);
    free(t->bytes);
    free(t->off);
    free(t);
}

const char *wgpt_tokenizer_name(const wgpt_tokenizer *t) { return t->name; }
uint32_t wgpt_tokenizer_vocab_size(const wgpt_tokenizer *t) { return t->vocab_size; }
int64_t wgpt_tokenizer_eot(const wgpt_tokenizer *t) { return t->eot; }

typedef struct encode_ctx {
    const wgpt_bpe *bpe;
    wgpt_bpe_scratch scratch;
    uint32_t **ids;
    size_t *n, *cap;
} encode_ctx;

static int encode_piece_(void *ctx, const char *piece, size_t len) {
    encode_ctx *c = ctx;
    return wgpt_bpe_encode(c->bpe, &c->scratch, piece, len, c->ids, c->n, c->cap);
}

int wgpt_tokenizer_encode(const wgpt_tokenizer *t, const char *text, size_t len, uint32_t **ids, size_t *n,
                          size_t *cap) {
    size_t n0 = *n;
    if (!t->bpe) {  // bytes
        if (len > SIZE_MAX - n0) return -1;
        if (n0 + len > *cap) {
            size_t c = *cap ? *cap : 256;
            while (c < n0 + len) c = c > SIZE_MAX / 2 ? n0 + len : c * 2;
            if (c > SIZE_MAX / sizeof **ids) return -1;
            uint32_t *p = realloc(*ids, c * sizeof *p);
            if (!p) return -1;
            *ids = p;
            *cap = c;
        }
        for (size_t i = 0; i < len; i++) (*ids)[n0 + i] = (unsigned char)text[i];
        *n = n0 + len;
        return 0;
    }
    // Scratch memory lives for one call, so a tokenizer can encode on several threads.
    encode_ctx c = {t->bpe, {0}, ids, n, cap};
    int rc = wgpt_pretok_split(t->pretok, text, len, encode_piece_, &c);
    wgpt_bpe_scratch_free(&c.scratch);
    if (rc != 0) {
        *n = n0;
        return -1;
    }
    return 0;
}

typedef struct cut_ctx {
    const char *text;
    size_t limit, best;
} cut_ctx;

// Whether the piece ends in white space (the pattern's \s, see
// tokenizer_pretokenize.c): only the white-space pieces do.
static int ends_in_space_(const char *piece, size_t len) {
    const unsigned char *p = (const unsigned char *)piece;
    size_t i = len - 1, back = 0;
    while (i > 0 && back < 3 && (p[i] & 0xC0) == 0x80) i--, back++;  // the last character's first byte
    uint32_t cp = p[i];
    if (cp >= 0xC0) {
        int extra = cp >= 0xF0 ? 3 : cp >= 0xE0 ? 2 : 1;
        if ((size_t)extra != len - 1 - i) return 0;  // not one whole character: no white space
        cp &= 0x3F >> extra;
        for (size_t k = i + 1; k < len; k++) cp = cp << 6 | (p[k] & 0x3F);
    } else if (cp >= 0x80) {
        return 0;
    }
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static int cut_piece_(void *ctx, const char *piece, size_t len) {
    cut_ctx *c = ctx;
    size_t end = (size_t)(piece - c->text) + len;
    if (end > c->limit) return 1;  // past the limit: stop the split
    // After white space the cut is not exact: at the end of a text, "\s+(?!\S)"
    // takes a run ("\n\n") that a following word would have split ("\n", "\n").
    if (!ends_in_space_(piece, len)) c->best = end;
    return 0;
}

size_t wgpt_tokenizer_cut_point(const wgpt_tokenizer *t, const char *text, size_t len) {
    if (!t->bpe) return len;  // bytes: every byte is its own id
    if (len < 4) return 0;
    // The split looks at most one character (4 bytes) past a piece, so a piece
    // ending that far before len is the one any continuation gives; one that
    // ends in a word, a number or punctuation is also the one the prefix alone gives.
    cut_ctx c = {text, len - 4, 0};
    wgpt_pretok_split(t->pretok, text, len, cut_piece_, &c);
    return c.best;
}

const char *wgpt_tokenizer_decode(const wgpt_tokenizer *t, uint32_t id, size_t *len) {
    if (id >= t->vocab_size) return NULL;
    if (len) *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

char *wgpt_tokenizer_decode_all_len(const wgpt_tokenizer *t, const uint32_t *ids, size_t n, size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->vocab_size) return NULL;
        size_t l = t->off[ids[i] + 1] - t->off[ids[i]];
        if (l > SIZE_MAX - 1 - total) return NULL;
        total += l;
    }
    char *s = malloc(total + 1);
    if (!s) return NULL;
    char *p = s;
    for (size_t i = 0; i < n; i++) {
        size_t l = t->off[ids[i] + 1] - t->off[ids[i]];
        memcpy(p, t->bytes + t->off[ids[i]], l);
        p += l;
    }
    *p = 0;
    if (len) *len = total;
    return s;
}

char *wgpt_tokenizer_decode_all(const wgpt_tokenizer *t, const uint32_t *ids, size_t n) {
    return wgpt_tokenizer_decode_all_len(t, ids, n, NULL);
}
