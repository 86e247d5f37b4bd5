// fuzz_shard.c: libFuzzer target for the token-shard reader and the loader
// over it. The input is the whole shard file. The reader ignores header bytes
// [12, 1024) unless [12, 16) holds the tokenizer tag (then [16, 32) is the
// name, checked), so the target takes its knobs from there (a valid shard with
// a zeroed header runs the default knobs):
//   [12]        bits 0-1: B - 1; bits 4-7: val_fraction in sixteenths
//   [13]        bits 0-3: T - 1; bit 4: name the file "val_000.bin"
//   [14, 16)    vocab_size (0 stands for 65536)
//   [16, 24)    u32 begin, u32 end of the check_vocab range (0, 0: the whole shard)
//   [24, 96)    XOR mask applied to a saved loader state before it is loaded
//   [96, 104)   loader seed
// Every answer is compared with one computed here from the format in shard.h
// and the rules in loader.h; a disagreement aborts.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "data/shard.h"
#include "fuzz_util.h"

enum { KNOB_B = 12, KNOB_T = 13, KNOB_VOCAB = 14, KNOB_RANGE = 16, KNOB_STATE = 24, KNOB_SEED = 96 };

typedef struct knobs_ {
    uint32_t B, T, vocab, begin, end;
    float val_fraction;
    int named_val;
    uint64_t seed;
    const uint8_t *state_mask;  // 72 bytes
} knobs_;

static knobs_ knobs_of_(const uint8_t *h) {
    knobs_ k;
    k.B = 1 + (h[KNOB_B] & 3);
    k.val_fraction = (float)(h[KNOB_B] >> 4) / 16.0f;
    k.T = 1 + (h[KNOB_T] & 15);
    k.named_val = (h[KNOB_T] >> 4) & 1;
    k.vocab = (uint32_t)h[KNOB_VOCAB] | (uint32_t)h[KNOB_VOCAB + 1] << 8;
    if (k.vocab == 0) k.vocab = 65536;
    k.begin = fuzz_le32(h + KNOB_RANGE);
    k.end = fuzz_le32(h + KNOB_RANGE + 4);
    k.state_mask = h + KNOB_STATE;
    k.seed = fuzz_le64(h + KNOB_SEED);
    return k;
}

static uint16_t tok_(const uint8_t *data, uint64_t i) {
    return (uint16_t)(data[1024 + 2 * i] | data[1024 + 2 * i + 1] << 8);
}

// wgpt_shard_check_vocab over [begin, end) against the first bad id found here.
static void check_vocab_(const wgpt_shard *s, const uint8_t *data, uint64_t begin, uint64_t end, uint32_t vocab) {
    char err[512] = "";
    int rc = wgpt_shard_check_vocab(s, begin, end, vocab, err, sizeof err);
    if (begin > end || end > s->n) {
        FUZZ_CHECK(rc == -1 && err[0], "range [%llu, %llu) of %llu tokens accepted", (unsigned long long)begin,
                   (unsigned long long)end, (unsigned long long)s->n);
        return;
    }
    uint64_t bad = end;
    for (uint64_t i = begin; i < end && bad == end; i++)
        if (tok_(data, i) >= vocab) bad = i;
    FUZZ_CHECK(rc == (bad == end ? 0 : -1), "check_vocab(%llu, %llu, %u) returned %d, first bad id at %llu: %s",
               (unsigned long long)begin, (unsigned long long)end, vocab, rc, (unsigned long long)bad, err);
    if (rc < 0) {
        char want[64];
        snprintf(want, sizeof want, "position %llu ", (unsigned long long)bad);
        FUZZ_CHECK(strstr(err, want) && strstr(err, s->path), "message does not name %s and the file: %s", want,
                   err);
    }
}

// The window at token offset o: inputs tokens [o, o+T), targets [o+1, o+T+1).
static int is_window_(const uint8_t *data, uint64_t o, uint32_t T, const int *in, const int *tg) {
    for (uint32_t t = 0; t < T; t++)
        if (in[t] != tok_(data, o + t) || tg[t] != tok_(data, o + t + 1)) return 0;
    return 1;
}

static int cmp_rows_T_;  // row length for the qsort comparator
static int cmp_rows_(const void *a, const void *b) {
    return memcmp(a, b, (size_t)cmp_rows_T_ * 2 * sizeof(int));
}

// One epoch of train batches must hold every train window exactly once (as a
// multiset: windows with equal tokens cannot be told apart).
static void check_epoch_(wgpt_loader *l, const uint8_t *data, const knobs_ *k, uint64_t windows) {
    size_t row = (size_t)k->T * 2;  // inputs then targets
    int *seen = malloc(windows * row * sizeof(int)), *all = malloc(windows * row * sizeof(int));
    int *in = malloc((size_t)k->B * k->T * sizeof(int)), *tg = malloc((size_t)k->B * k->T * sizeof(int));
    FUZZ_CHECK(seen && all && in && tg, "out of memory for %llu windows", (unsigned long long)windows);
    uint64_t got = 0;
    while (got < windows) {
        FUZZ_CHECK(wgpt_loader_epoch(l) == 0, "epoch %llu after %llu of %llu windows",
                   (unsigned long long)wgpt_loader_epoch(l), (unsigned long long)got, (unsigned long long)windows);
        wgpt_loader_next_train(l, in, tg);
        for (uint32_t b = 0; b < k->B && got < windows; b++, got++) {
            memcpy(seen + got * row, in + (size_t)b * k->T, k->T * sizeof(int));
            memcpy(seen + got * row + k->T, tg + (size_t)b * k->T, k->T * sizeof(int));
        }
    }
    FUZZ_CHECK(wgpt_loader_epoch(l) == 1 || windows % k->B, "epoch %llu after exactly one epoch",
               (unsigned long long)wgpt_loader_epoch(l));
    for (uint64_t w = 0; w < windows; w++)
        for (uint32_t t = 0; t < k->T; t++) {
            all[w * row + t] = tok_(data, w * k->T + t);
            all[w * row + k->T + t] = tok_(data, w * k->T + t + 1);
        }
    cmp_rows_T_ = (int)k->T;
    qsort(seen, windows, row * sizeof(int), cmp_rows_);
    qsort(all, windows, row * sizeof(int), cmp_rows_);
    FUZZ_CHECK(memcmp(seen, all, windows * row * sizeof(int)) == 0,
               "one epoch of %llu windows is not a permutation of the train windows", (unsigned long long)windows);
    free(seen);
    free(all);
    free(in);
    free(tg);
}

// Validation is read in order: batch j holds windows j*B .. j*B+B-1 of the tail.
static void check_val_(wgpt_loader *l, const uint8_t *data, const knobs_ *k, uint64_t val_begin, uint64_t batches) {
    int *in = malloc((size_t)k->B * k->T * sizeof(int)), *tg = malloc((size_t)k->B * k->T * sizeof(int));
    FUZZ_CHECK(in && tg, "out of memory");
    for (uint64_t j = 0; j < batches && j < 4; j++) {
        FUZZ_CHECK(wgpt_loader_next_val(l, in, tg) == 1, "val batch %llu of %llu missing", (unsigned long long)j,
                   (unsigned long long)batches);
        for (uint32_t b = 0; b < k->B; b++)
            FUZZ_CHECK(is_window_(data, val_begin + (j * k->B + b) * k->T, k->T, in + b * k->T, tg + b * k->T),
                       "val batch %llu row %u is not window %llu of the tail", (unsigned long long)j, b,
                       (unsigned long long)(j * k->B + b));
    }
    if (batches <= 4) FUZZ_CHECK(wgpt_loader_next_val(l, in, tg) == 0, "a val batch past the %llu expected",
                                 (unsigned long long)batches);
    wgpt_loader_reset_val(l);
    free(in);
    free(tg);
}

// A saved state loads into a fresh loader and continues identically; a
// damaged one is refused without touching the loader, or accepted and usable.
static void check_state_(wgpt_loader *l, const char **paths, const knobs_ *k) {
    size_t n = wgpt_loader_state_size();
    unsigned char *st = malloc(n), *before = malloc(n), *after = malloc(n);
    int *a = malloc((size_t)k->B * k->T * 2 * sizeof(int)), *b = malloc((size_t)k->B * k->T * 2 * sizeof(int));
    FUZZ_CHECK(st && before && after && a && b && n == 72, "state size %zu", n);
    char err[512] = "";
    wgpt_loader *l2 = wgpt_loader_open_files(paths, 1, k->B, k->T, k->seed ^ 1, k->val_fraction, k->vocab, err,
                                             sizeof err);
    FUZZ_CHECK(l2, "second open failed: %s", err);
    wgpt_loader_save_state(l, st);
    FUZZ_CHECK(wgpt_loader_load_state(l2, st, n, err, sizeof err) == 0, "own state refused: %s", err);
    wgpt_loader_next_train(l, a, a + k->B * k->T);
    wgpt_loader_next_train(l2, b, b + k->B * k->T);
    FUZZ_CHECK(memcmp(a, b, (size_t)k->B * k->T * 2 * sizeof(int)) == 0, "resumed loader gave another batch");

    int zero = 1;
    for (size_t i = 0; i < n; i++) {
        st[i] ^= k->state_mask[i];
        zero &= k->state_mask[i] == 0;
    }
    wgpt_loader_save_state(l2, before);
    int rc = wgpt_loader_load_state(l2, st, n, err, sizeof err);
    if (rc < 0) {
        wgpt_loader_save_state(l2, after);
        FUZZ_CHECK(err[0] && memcmp(before, after, n) == 0, "refused state changed the loader (message: %s)", err);
    } else {
        wgpt_loader_next_train(l2, b, b + k->B * k->T);  // must stay in bounds (ASan)
    }
    FUZZ_CHECK(!zero || rc == 0, "unmodified state refused: %s", err);
    FUZZ_CHECK(wgpt_loader_load_state(l2, st, n - 1, err, sizeof err) < 0, "short state accepted");
    wgpt_loader_free(l2);
    free(st);
    free(before);
    free(after);
    free(a);
    free(b);
}

// The loader over this one shard: the split and window counts of loader.h,
// then the batches themselves.
static void check_loader_(const char *path, const uint8_t *data, uint64_t n, const knobs_ *k) {
    char err[512] = "";
    const char *paths[1] = {path};
    wgpt_loader *l = wgpt_loader_open_files(paths, 1, k->B, k->T, k->seed, k->val_fraction, k->vocab, err,
                                            sizeof err);
    int ids_ok = 1;
    for (uint64_t i = 0; i < n && ids_ok; i++) ids_ok = tok_(data, i) < k->vocab;
    uint64_t tail = k->val_fraction > 0 ? (uint64_t)((double)k->val_fraction * (double)n) : 0;
    uint64_t train = n - tail, tw = train > k->T ? (train - 1) / k->T : 0, vw = tail > k->T ? (tail - 1) / k->T : 0;
    int want = ids_ok && !k->named_val && tw >= 1 && (k->val_fraction == 0 || vw >= k->B);
    FUZZ_CHECK(!!l == want, "loader open %s (n=%llu B=%u T=%u vf=%g vocab=%u, %llu train / %llu val windows): %s",
               l ? "succeeded" : "failed", (unsigned long long)n, k->B, k->T, (double)k->val_fraction, k->vocab,
               (unsigned long long)tw, (unsigned long long)vw, l ? "" : err);
    if (!l) {
        FUZZ_CHECK(err[0], "no message");
        return;
    }
    FUZZ_CHECK(wgpt_loader_train_windows(l) == tw && wgpt_loader_train_tokens(l) == train &&
                   wgpt_loader_val_batches(l) == vw / k->B,
               "loader counts %llu windows, %llu tokens, %llu val batches; expected %llu, %llu, %llu",
               (unsigned long long)wgpt_loader_train_windows(l), (unsigned long long)wgpt_loader_train_tokens(l),
               (unsigned long long)wgpt_loader_val_batches(l), (unsigned long long)tw, (unsigned long long)train,
               (unsigned long long)(vw / k->B));
    char line[1024];
    wgpt_loader_describe(l, line, sizeof line);
    check_val_(l, data, k, train, vw / k->B);
    check_epoch_(l, data, k, tw);
    check_state_(l, paths, k);
    wgpt_loader_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t zeros[1024];
    const uint8_t *h = size >= 1024 ? data : zeros;
    knobs_ k = knobs_of_(h);
    const char *path = fuzz_path(k.named_val ? "val_000.bin" : "train_000.bin");
    fuzz_write_file(path, data, size);

    // Valid exactly when shard.h says so: a tagged header names its
    // tokenizer in 1..15 printable characters, NUL-padded.
    int32_t count = (int32_t)fuzz_le32(h + 8);
    int name_ok = 1;
    if (fuzz_le32(h + 12) == WGPT_SHARD_TAG) {
        size_t len = 0;
        while (len < 16 && h[16 + len] >= 0x21 && h[16 + len] <= 0x7e) len++;
        name_ok = len >= 1 && len < 16;
        for (size_t i = len; i < 16 && name_ok; i++) name_ok = h[16 + i] == 0;
    }
    int valid = size >= 1024 && fuzz_le32(h) == WGPT_SHARD_MAGIC && fuzz_le32(h + 4) == WGPT_SHARD_VERSION &&
                count >= 0 && (uint64_t)size == 1024 + 2 * (uint64_t)count && name_ok;
    wgpt_shard s;
    char err[512] = "";
    int rc = wgpt_shard_open(path, &s, err, sizeof err);
    FUZZ_CHECK(rc == (valid ? 0 : -1), "shard_open returned %d on a %s file of %zu bytes: %s", rc,
               valid ? "valid" : "invalid", size, err);
    if (rc < 0) {
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0, "the message does not start with the path: %s", err);
        FUZZ_CHECK(s.map == NULL && s.path == NULL, "a failed open left the shard open");
        wgpt_shard_close(&s);
        return 0;
    }
    FUZZ_CHECK(s.n == (uint64_t)count && memcmp(s.tokens, data + 1024, 2 * s.n) == 0, "tokens differ from the file");

    uint64_t begin = k.begin, end = k.end;
    if (begin == 0 && end == 0) end = s.n;
    else begin %= s.n + 2, end %= s.n + 2;  // mostly in range, sometimes past the end
    check_vocab_(&s, data, begin, end, k.vocab);
    check_vocab_(&s, data, 0, s.n, k.vocab);
    wgpt_shard_close(&s);
    wgpt_shard_close(&s);  // twice is safe

    check_loader_(path, data, (uint64_t)count, &k);
    return 0;
}
