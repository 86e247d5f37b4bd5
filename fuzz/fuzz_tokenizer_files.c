// fuzz_tokenizer_files.c: libFuzzer target for the GPT-2 tokenizer's file
// parsers (encoder.json and vocab.bpe through wgpt_tokenizer_open_gpt2).
//
// Input: a 9-byte header, then the encoder.json part and the vocab.bpe part,
// split at the first NUL byte. The parsers only reach vocab.bpe, and most of
// encoder.json's checks, with all 50257 entries, so the header can build on
// GPT-2's real files (read once from $WGPT_BPE_DIR, by default the source
// tree's third_party/gpt2-bpe/):
//   [0]        mode; bit 0: 0  encoder.json is the first part
//                           1  GPT-2's encoder.json with the part written over
//                              it at offset ENC_AT mod its size
//              bits 1-2:    0  vocab.bpe is the second part
//                           1  GPT-2's header and first VOC_AT mod 50001 merge
//                              lines, then the part
//                           2  GPT-2's vocab.bpe with the part written over it
//                              at VOC_AT mod its size
//                           3  GPT-2's vocab.bpe with the part appended
//   [1, 5)     u32 ENC_AT   [5, 9)  u32 VOC_AT
// The modes built on real files parse 1.5 MB per run (0.1 to 0.3 s): far
// fewer runs per second than mode 0, but they reach every check.
//
// Invariants: a refusal names one of the two files; a tokenizer that opens is
// GPT-2's shape (50257 ids, end-of-text 50256), round-trips text, and came
// from an encoder.json without \u0000 and a vocab.bpe without NUL bytes (a C
// string would cut such a symbol short).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "fuzz_util.h"

static unsigned char *real_enc_, *real_voc_;
static int verbose_;  // $WGPT_FUZZ_VERBOSE: print each outcome (for checking the seeds)
static size_t real_enc_len_, real_voc_len_;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char enc[4096], voc[4096];
    const char *dir = getenv("WGPT_BPE_DIR");
    verbose_ = getenv("WGPT_FUZZ_VERBOSE") != NULL;
    snprintf(enc, sizeof enc, "%s/encoder.json", dir ? dir : WGPT_SOURCE_DIR "/third_party/gpt2-bpe");
    snprintf(voc, sizeof voc, "%s/vocab.bpe", dir ? dir : WGPT_SOURCE_DIR "/third_party/gpt2-bpe");
    if (access(enc, R_OK) != 0 || access(voc, R_OK) != 0) {
        fprintf(stderr, "fuzz_tokenizer_files: %s or %s is missing (run scripts/setup.sh, or set WGPT_BPE_DIR)\n",
                enc, voc);
        exit(1);
    }
    real_enc_ = fuzz_read_file(enc, &real_enc_len_);
    real_voc_ = fuzz_read_file(voc, &real_voc_len_);
    FUZZ_CHECK(real_enc_len_ > 0 && real_voc_len_ > 0, "%s or %s is empty", enc, voc);
    return 0;
}

typedef struct buf_ {
    unsigned char *p;
    size_t n;
} buf_;

static buf_ copy_(const unsigned char *p, size_t n) {
    buf_ b = {malloc(n ? n : 1), n};
    FUZZ_CHECK(b.p, "out of memory");
    if (n) memcpy(b.p, p, n);
    return b;
}

// real with part written over it at `at` mod its size (clipped at the end).
static buf_ overwrite_(const unsigned char *real, size_t real_len, uint32_t at, const uint8_t *part, size_t len) {
    buf_ b = copy_(real, real_len);
    size_t o = at % real_len, k = len < real_len - o ? len : real_len - o;
    if (k) memcpy(b.p + o, part, k);
    return b;
}

static buf_ concat_(const unsigned char *a, size_t an, const uint8_t *b, size_t bn) {
    buf_ r = {malloc(an + bn + 1), an + bn};
    FUZZ_CHECK(r.p, "out of memory");
    memcpy(r.p, a, an);
    if (bn) memcpy(r.p + an, b, bn);
    return r;
}

// GPT-2's header line and its first k merge lines, then part.
static buf_ first_lines_(size_t k, const uint8_t *part, size_t len) {
    size_t at = 0;
    for (size_t line = 0; line <= k && at < real_voc_len_; line++) {
        const unsigned char *nl = memchr(real_voc_ + at, '\n', real_voc_len_ - at);
        at = nl ? (size_t)(nl - real_voc_) + 1 : real_voc_len_;
    }
    return concat_(real_voc_, at, part, len);
}

// Whether JSON text holds a \u0000 escape: a U+0000 that C strings would cut
// short, and no GPT-2 symbol (byte 0 is spelled U+0100).
static int has_nul_escape_(const unsigned char *s, size_t n) {
    for (size_t i = 0; i + 5 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4)) return 1;
        i++;  // skip the escaped character
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t hdr[9] = {0};
    memcpy(hdr, data, size < 9 ? size : 9);
    uint8_t mode = hdr[0];
    uint32_t enc_at = fuzz_le32(hdr + 1), voc_at = fuzz_le32(hdr + 5);
    const uint8_t *a = data + (size < 9 ? size : 9), *end = data + size, *nul = memchr(a, 0, (size_t)(end - a));
    size_t alen = (size_t)((nul ? nul : end) - a);
    const uint8_t *b = nul ? nul + 1 : end;
    size_t blen = (size_t)(end - b);

    buf_ enc = mode & 1 ? overwrite_(real_enc_, real_enc_len_, enc_at, a, alen) : copy_(a, alen), voc;
    switch ((mode >> 1) & 3) {
    case 0: voc = copy_(b, blen); break;
    case 1: voc = first_lines_(voc_at % 50001, b, blen); break;
    case 2: voc = overwrite_(real_voc_, real_voc_len_, voc_at, b, blen); break;
    default: voc = concat_(real_voc_, real_voc_len_, b, blen); break;
    }
    const char *enc_path = fuzz_path("encoder.json"), *voc_path = fuzz_path("vocab.bpe");
    fuzz_write_file(enc_path, enc.p, enc.n);
    fuzz_write_file(voc_path, voc.p, voc.n);

    char err[1024] = "";
    wgpt_tokenizer *t = wgpt_tokenizer_open_gpt2(enc_path, voc_path, err, sizeof err);
    if (verbose_) fprintf(stderr, "mode %u: %s\n", mode, t ? "opened" : err);
    FUZZ_CHECK(!t || !has_nul_escape_(enc.p, enc.n), "opened an encoder.json whose strings hold \\u0000");
    FUZZ_CHECK(!t || !memchr(voc.p, 0, voc.n), "opened a vocab.bpe holding a NUL byte");
    if (!t) {
        FUZZ_CHECK(strstr(err, enc_path) || strstr(err, voc_path) || strstr(err, "out of memory"),
                   "the message names neither file: %s", err);
    } else {
        FUZZ_CHECK(!strcmp(wgpt_tokenizer_name(t), "gpt2") && wgpt_tokenizer_vocab_size(t) == 50257 &&
                       wgpt_tokenizer_eot(t) == 50256,
                   "opened a tokenizer of another shape: %s, %u ids, end-of-text %lld", wgpt_tokenizer_name(t),
                   wgpt_tokenizer_vocab_size(t), (long long)wgpt_tokenizer_eot(t));
        // Whatever the files said, text must come back as it went in.
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0, dlen = 0;
        const char *text = (const char *)a;
        size_t tlen = (size_t)(end - a);
        FUZZ_CHECK(wgpt_tokenizer_encode(t, text, tlen, &ids, &n, &cap) == 0, "encode failed");
        for (size_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] < 50257, "id %u", ids[i]);
        char *back = wgpt_tokenizer_decode_all_len(t, ids, n, &dlen);
        FUZZ_CHECK(back && dlen == tlen && memcmp(back, text, dlen) == 0, "decode(encode(x)) != x");
        free(back);
        free(ids);
        wgpt_tokenizer_free(t);
    }
    free(enc.p);
    free(voc.p);
    return 0;
}
