// fuzz_tokenizer_encode.c: libFuzzer target for encoding arbitrary bytes with
// GPT-2's tokenizer and the byte tokenizer.
//
// Input: any bytes, encoded as text. Checks, aborting on a miss:
//   - decode(encode(x)) == x for both tokenizers; the byte tokenizer's ids are the bytes;
//   - GPT-2's ids are below 50257, never the end-of-text id, and are appended
//     after what the array held;
//   - the pre-tokenizer's pieces (cut through a sliding window) are those of
//     one regex pass over the whole text;
//   - the ids are those of encoder.py's BPE, written out plainly here from
//     vocab.bpe's ranks (pieces up to 512 bytes; longer ones cost too much).
// GPT-2's files are read once (LLVMFuzzerInitialize) from $WGPT_BPE_DIR, by
// default third_party/gpt2-bpe/ of the source tree (scripts/setup.sh fetches them).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"  // the pre-tokenizer, to compare its pieces
#include "fuzz_util.h"

enum { VOCAB = 50257, EOT = 50256, MAX_REF_PIECE = 512 };

static wgpt_tokenizer *gpt2_, *bytes_;
static uint32_t by_bytes_[VOCAB];  // ids sorted by their bytes, for lookups
static uint64_t *pair_;            // (nmerges) left << 32 | right, sorted; with its rank and result:
static uint32_t *pair_rank_, *pair_merged_;
static size_t nmerges_;
static pcre2_match_data *md_;

// ---- an id's bytes, and the id of some bytes ----

static const char *bytes_of_(uint32_t id, size_t *len) { return wgpt_tokenizer_decode(gpt2_, id, len); }

static int cmp_bytes_(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}
static int cmp_ids_(const void *x, const void *y) {
    size_t al, bl;
    const char *a = bytes_of_(*(const uint32_t *)x, &al), *b = bytes_of_(*(const uint32_t *)y, &bl);
    return cmp_bytes_(a, al, b, bl);
}
static int64_t find_(const char *s, size_t len) {
    size_t lo = 0, hi = VOCAB;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, ml;
        const char *m = bytes_of_(by_bytes_[mid], &ml);
        int c = cmp_bytes_(m, ml, s, len);
        if (c == 0) return by_bytes_[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

// ---- vocab.bpe's ranks, read here (encoder.py's bytes_to_unicode, inverted) ----

static int byte_of_cp_[256 + 68];  // the byte each code point stands for, -1: none

static void byte_map_(void) {
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_of_cp_[b] = printable ? b : -1;
        if (!printable) byte_of_cp_[next++] = b;
    }
}

// The id of a vocab.bpe symbol (UTF-8 text, each character standing for a byte).
static uint32_t symbol_id_(const char *s, size_t len) {
    char buf[256];
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        const unsigned char *u = (const unsigned char *)s + i;
        uint32_t cp = u[0] < 0x80 ? u[0] : (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
        i += u[0] < 0x80 ? 1 : 2;
        int b = cp < 256 + 68 ? byte_of_cp_[cp] : -1;
        FUZZ_CHECK(b >= 0 && n < sizeof buf, "vocab.bpe: bad symbol %.*s", (int)len, s);
        buf[n] = (char)b;
    }
    int64_t id = find_(buf, n);
    FUZZ_CHECK(id >= 0, "vocab.bpe: symbol %.*s is no token", (int)len, s);
    return (uint32_t)id;
}

static int cmp_u64_(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void load_ranks_(const char *path) {
    size_t len;
    char *text = (char *)fuzz_read_file(path, &len);
    uint64_t *tmp = malloc(60000 * sizeof *tmp);  // (rank) left << 32 | right
    pair_ = malloc(60000 * sizeof *pair_);
    pair_rank_ = malloc(60000 * sizeof *pair_rank_);
    pair_merged_ = malloc(60000 * sizeof *pair_merged_);
    uint32_t *left = malloc(60000 * sizeof *left), *right = malloc(60000 * sizeof *right);
    FUZZ_CHECK(tmp && pair_ && pair_rank_ && pair_merged_ && left && right, "out of memory");
    size_t at = 0, line = 0, n = 0;
    while (at < len) {
        char *nl = memchr(text + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
        if (line++ > 0 && ll > 0) {
            char *sp = memchr(text + at, ' ', ll);
            FUZZ_CHECK(sp && n < 60000, "vocab.bpe line %zu", line);
            left[n] = symbol_id_(text + at, (size_t)(sp - (text + at)));
            right[n] = symbol_id_(sp + 1, ll - (size_t)(sp + 1 - (text + at)));
            tmp[n] = (uint64_t)left[n] << 32 | right[n];
            n++;
        }
        at += ll + 1;
    }
    FUZZ_CHECK(n == 50000, "vocab.bpe has %zu merges", n);
    // The keys sorted for lookups; each rank's place found by search.
    memcpy(pair_, tmp, n * sizeof *pair_);
    qsort(pair_, n, sizeof *pair_, cmp_u64_);
    for (size_t r = 0; r < n; r++) {
        uint64_t *p = bsearch(&tmp[r], pair_, n, sizeof *pair_, cmp_u64_);
        size_t i = (size_t)(p - pair_), al, bl;
        pair_rank_[i] = (uint32_t)r;
        char buf[512];
        const char *a = bytes_of_(left[r], &al), *b = bytes_of_(right[r], &bl);
        FUZZ_CHECK(al + bl <= sizeof buf, "long merge");
        memcpy(buf, a, al);
        memcpy(buf + al, b, bl);
        int64_t m = find_(buf, al + bl);
        FUZZ_CHECK(m >= 0, "merge %zu makes no token", r);
        pair_merged_[i] = (uint32_t)m;
    }
    nmerges_ = n;
    free(tmp);
    free(left);
    free(right);
    free(text);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char enc[4096], voc[4096], err[1024];
    const char *dir = getenv("WGPT_BPE_DIR");
    snprintf(enc, sizeof enc, "%s/encoder.json", dir ? dir : WGPT_SOURCE_DIR "/third_party/gpt2-bpe");
    snprintf(voc, sizeof voc, "%s/vocab.bpe", dir ? dir : WGPT_SOURCE_DIR "/third_party/gpt2-bpe");
    gpt2_ = wgpt_tokenizer_open_gpt2(enc, voc, err, sizeof err);
    bytes_ = wgpt_tokenizer_open_bytes();
    if (!gpt2_ || !bytes_) {
        fprintf(stderr, "fuzz_tokenizer_encode: %s (run scripts/setup.sh, or set WGPT_BPE_DIR)\n",
                gpt2_ ? "out of memory" : err);
        exit(1);
    }
    for (uint32_t i = 0; i < VOCAB; i++) by_bytes_[i] = i;
    qsort(by_bytes_, VOCAB, sizeof *by_bytes_, cmp_ids_);
    byte_map_();
    load_ranks_(voc);
    md_ = pcre2_match_data_create_from_pattern(gpt2_->pretok, NULL);
    FUZZ_CHECK(md_, "out of memory");
    return 0;
}

// ---- the references ----

typedef struct pieces_ {
    size_t *at, *len, n, cap;
    const char *text;
} pieces_;

static int add_piece_(void *ctx, const char *piece, size_t len) {
    pieces_ *p = ctx;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->at = realloc(p->at, p->cap * sizeof *p->at);
        p->len = realloc(p->len, p->cap * sizeof *p->len);
        FUZZ_CHECK(p->at && p->len, "out of memory");
    }
    p->at[p->n] = (size_t)(piece - p->text);
    p->len[p->n++] = len;
    return 0;
}

// The pieces of one regex pass over the whole text (no window): each match,
// the unmatched bytes before it (not UTF-8) as one piece, and a lone byte
// where the pattern matches nothing.
static void ref_pieces_(const char *text, size_t len, pieces_ *p) {
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md_);
    for (size_t pos = 0; pos < len;) {
        int m = pcre2_match(gpt2_->pretok, (PCRE2_SPTR)(text + pos), len - pos, 0, 0, md_, NULL);
        FUZZ_CHECK(m >= 0 || m == PCRE2_ERROR_NOMATCH, "PCRE2 error %d at byte %zu of %zu", m, pos, len);
        size_t ms = m >= 0 ? pos + ov[0] : len, me = m >= 0 ? pos + ov[1] : len;
        if (ms > pos) add_piece_(p, text + pos, ms - pos);
        if (me > ms) add_piece_(p, text + ms, me - ms);
        if (me == ms && ms < len) add_piece_(p, text + ms, 1), me = ms + 1;
        pos = me;
    }
}

static int64_t rank_(uint32_t a, uint32_t b, uint32_t *merged) {
    uint64_t key = (uint64_t)a << 32 | b;
    uint64_t *p = bsearch(&key, pair_, nmerges_, sizeof *pair_, cmp_u64_);
    if (!p) return -1;
    *merged = pair_merged_[p - pair_];
    return pair_rank_[p - pair_];
}

// encoder.py's bpe(): merge the lowest-ranked adjacent pair, every occurrence
// left to right, until no pair has a rank. Appends the ids to out (room: len).
static size_t ref_bpe_(const char *s, size_t len, uint32_t *out) {
    uint32_t *w = malloc(len * sizeof *w);
    FUZZ_CHECK(w, "out of memory");
    size_t n = len;
    for (size_t i = 0; i < len; i++) {
        int64_t id = find_(s + i, 1);
        FUZZ_CHECK(id >= 0, "no token for byte %02x", (unsigned char)s[i]);
        w[i] = (uint32_t)id;
    }
    while (n > 1) {
        int64_t best = -1;
        uint32_t a = 0, b = 0, merged = 0, m;
        for (size_t i = 0; i + 1 < n; i++) {
            int64_t r = rank_(w[i], w[i + 1], &m);
            if (r >= 0 && (best < 0 || r < best)) best = r, a = w[i], b = w[i + 1], merged = m;
        }
        if (best < 0) break;
        size_t k = 0;
        for (size_t i = 0; i < n; k++) {
            if (i + 1 < n && w[i] == a && w[i + 1] == b) w[k] = merged, i += 2;
            else w[k] = w[i], i += 1;
        }
        n = k;
    }
    memcpy(out, w, n * sizeof *w);
    free(w);
    return n;
}

// ---- the target ----

static void check_bytes_tokenizer_(const uint8_t *data, size_t size) {
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, dlen = 0;
    FUZZ_CHECK(wgpt_tokenizer_encode(bytes_, (const char *)data, size, &ids, &n, &cap) == 0, "bytes: encode failed");
    FUZZ_CHECK(n == size && n <= cap, "bytes: %zu ids for %zu bytes", n, size);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] == data[i], "bytes: id %zu is %u, the byte is %u", i, ids[i], data[i]);
    char *back = wgpt_tokenizer_decode_all_len(bytes_, ids, n, &dlen);
    FUZZ_CHECK(back && dlen == size && memcmp(back, data, size) == 0 && back[size] == 0, "bytes: round trip differs");
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    check_bytes_tokenizer_(data, size);

    // Appended after two ids already there, which must stay.
    size_t n = 2, cap = 2, dlen = 0;
    uint32_t *ids = malloc(cap * sizeof *ids);
    FUZZ_CHECK(ids, "out of memory");
    ids[0] = 7, ids[1] = EOT;
    int rc = wgpt_tokenizer_encode(gpt2_, text, size, &ids, &n, &cap);
    FUZZ_CHECK(rc == 0, "gpt2: encode gave up on %zu bytes", size);
    FUZZ_CHECK(ids[0] == 7 && ids[1] == EOT && n >= 2 && n <= cap, "gpt2: the ids already there changed");
    for (size_t i = 2; i < n; i++) FUZZ_CHECK(ids[i] < EOT, "gpt2: id %zu is %u", i - 2, ids[i]);
    char *back = wgpt_tokenizer_decode_all_len(gpt2_, ids + 2, n - 2, &dlen);
    size_t diff = 0;
    while (back && diff < dlen && diff < size && back[diff] == text[diff]) diff++;
    FUZZ_CHECK(back && dlen == size && diff == size,
               "gpt2: decode(encode(x)) differs from x at byte %zu (%zu vs %zu bytes)", diff, dlen, size);
    free(back);

    // Pieces: windowed (the tokenizer's) against one pass over the whole text.
    pieces_ got = {.text = text}, want = {.text = text};
    FUZZ_CHECK(wgpt_pretok_split(gpt2_->pretok, text, size, add_piece_, &got) == 0, "pretok_split failed");
    ref_pieces_(text, size, &want);
    size_t first_diff = 0;
    while (first_diff < got.n && first_diff < want.n && got.at[first_diff] == want.at[first_diff] &&
           got.len[first_diff] == want.len[first_diff])
        first_diff++;
    FUZZ_CHECK(got.n == want.n && first_diff == got.n,
               "pre-tokenization differs at piece %zu: (%zu, +%zu) windowed, (%zu, +%zu) whole text", first_diff,
               first_diff < got.n ? got.at[first_diff] : 0, first_diff < got.n ? got.len[first_diff] : 0,
               first_diff < want.n ? want.at[first_diff] : 0, first_diff < want.n ? want.len[first_diff] : 0);

    // BPE ids against encoder.py's algorithm.
    int short_pieces = 1;
    for (size_t i = 0; i < want.n; i++) short_pieces &= want.len[i] <= MAX_REF_PIECE;
    if (short_pieces) {
        uint32_t *ref = malloc((size + 1) * sizeof *ref);
        FUZZ_CHECK(ref, "out of memory");
        size_t k = 0;
        for (size_t i = 0; i < want.n; i++) k += ref_bpe_(text + want.at[i], want.len[i], ref + k);
        size_t d = 0;
        while (d < k && d + 2 < n && ref[d] == ids[d + 2]) d++;
        FUZZ_CHECK(k == n - 2 && d == k, "gpt2: id %zu is %u, encoder.py's BPE gives %u (%zu vs %zu ids)", d,
                   d + 2 < n ? ids[d + 2] : 0, d < k ? ref[d] : 0, n - 2, k);
        free(ref);
    }
    free(got.at), free(got.len), free(want.at), free(want.len);
    free(ids);
    return 0;
}
