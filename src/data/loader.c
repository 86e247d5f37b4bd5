// loader.c: shuffled train batches and in-order validation batches over
// memory-mapped token shards (see loader.h for the window and order rules).
#include "data/loader.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/bus_guard.h"
#include "data/shard.h"
#include "data/shard_set.h"
#include "util/err.h"
#include "util/splitmix64.h"

#define FEISTEL_ROUNDS 6

// A run of tokens of one shard that belongs to train or to val. Only regions
// holding at least one window are kept, so a window index maps to exactly one.
typedef struct region_ {
    uint32_t shard;
    uint64_t begin, end;  // tokens [begin, end) of the shard
    uint64_t windows;     // (end - begin - 1) / T
    uint64_t first;       // global index of its first window
} region_;

struct wgpt_loader {
    uint32_t B, T;
    uint64_t seed;
    wgpt_shard *shards;
    uint32_t nshards;
    region_ *train, *val;
    uint32_t ntrain, nval;
    uint32_t train_shards, val_shards;  // shards contributing tokens, for describe
    uint64_t train_windows, val_windows, train_tokens, val_tokens;
    int val_is_tail;      // validation is the tail of the last shard
    uint64_t fingerprint;  // of names, sizes and the split, checked on load_state
    // Position: the next train window is number `next` of epoch `epoch`.
    uint64_t epoch, next, val_next;
    // The current epoch's permutation: a Feistel network over 2^(2*half_bits).
    uint32_t half_bits;
    uint64_t keys[FEISTEL_ROUNDS];
    const char *tokenizer;  // what the tagged shards record (one of theirs), or NULL
    uint32_t vocab;         // every id was checked below this (65536: nothing checked); batches check again
    char err[1024];         // why the last next_train / next_val failed
};

// splitmix64 (Steele, Lea, Flood 2014): a full-period generator whose output
// function is also a good 64-bit mixer; both the round keys and the round
// function use it.

// Round keys of epoch e: splitmix64 seeded by mix(seed) ^ mix(e + 1).
static void epoch_keys_(wgpt_loader *l) {
    uint64_t st = wgpt_mix64(l->seed) ^ wgpt_mix64(l->epoch + 1);
    for (int r = 0; r < FEISTEL_ROUNDS; r++) l->keys[r] = wgpt_splitmix64_next(&st);
}

// A bijection of [0, 4^half_bits); cycle-walking restricts it to a bijection of
// [0, train_windows) (the domain is < 4x that, so under 4 steps on average).
static uint64_t permute_(const wgpt_loader *l, uint64_t i) {
    uint32_t h = l->half_bits;
    uint64_t mask = (h >= 64) ? ~0ull : ((1ull << h) - 1);
    do {
        uint64_t left = i >> h, right = i & mask;
        for (int r = 0; r < FEISTEL_ROUNDS; r++) {
            uint64_t f = wgpt_mix64(right ^ l->keys[r]) & mask;
            uint64_t nl = right;
            right = left ^ f;
            left = nl;
        }
        i = (left << h) | right;
    } while (i >= l->train_windows);
    return i;
}

// The region holding global window g (regions sorted by `first`, none empty).
static const region_ *locate_(const region_ *r, uint32_t n, uint64_t g) {
    uint32_t lo = 0, hi = n;  // answer in [lo, hi)
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[mid].first <= g) lo = mid;
        else hi = mid;
    }
    return &r[lo];
}

// Copies window g of r; returns the position in its shard of the first id
// not below l->vocab (a shard rewritten in place since it was checked), or
// UINT64_MAX.
static uint64_t copy_window_(const wgpt_loader *l, const region_ *r, uint64_t g, int *inputs, int *targets) {
    uint64_t at = r->begin + (g - r->first) * l->T;
    const uint16_t *p = l->shards[r->shard].tokens + at;
    uint32_t bad = 0;
    for (uint32_t t = 0; t < l->T; t++) {
        inputs[t] = p[t];
        targets[t] = p[t + 1];
        bad |= p[t] >= l->vocab;
    }
    if (!bad && p[l->T] < l->vocab) return UINT64_MAX;
    for (uint32_t t = 0;; t++)
        if (p[t] >= l->vocab) return at + t;
}

static const char *base_name_(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static uint64_t fnv_(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static uint64_t fnv_u64_(uint64_t h, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return fnv_(h, b, 8);
}

// Appends the region if it holds a window; counts its tokens either way.
static void add_region_(wgpt_loader *l, int val, uint32_t shard, uint64_t begin, uint64_t end) {
    uint64_t len = end - begin, w = len > l->T ? (len - 1) / l->T : 0;
    uint64_t *windows = val ? &l->val_windows : &l->train_windows;
    if (val) l->val_tokens += len;
    else l->train_tokens += len;
    if (len) {
        if (val) l->val_shards++;
        else l->train_shards++;
    }
    const char *name = base_name_(l->shards[shard].path);
    l->fingerprint = fnv_(l->fingerprint, name, strlen(name) + 1);
    l->fingerprint = fnv_u64_(fnv_u64_(fnv_u64_(l->fingerprint, (uint64_t)val), begin), end);
    if (!w) return;
    region_ *r = val ? &l->val[l->nval++] : &l->train[l->ntrain++];
    *r = (region_){shard, begin, end, w, *windows};
    *windows += w;
}

static int cmp_str_(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Splits the shards into regions (see loader.h) and checks there is enough of
// each (val_only: of the validation split alone).
static int split_(wgpt_loader *l, float val_fraction, int val_only, char *err, size_t errlen) {
    uint32_t named_val = 0;
    for (uint32_t i = 0; i < l->nshards; i++)
        if (strstr(base_name_(l->shards[i].path), "val")) named_val++;
    if (val_only && !named_val && !(val_fraction > 0))
        return wgpt_errf(err, errlen,
                         "no validation data: no shard's name contains \"val\" (e.g. %s) and the validation "
                         "fraction is 0",
                         l->shards[0].path);
    if (named_val == l->nshards && !val_only)
        return wgpt_errf(err, errlen, "no train shard: the name of every shard (%u, e.g. %s) contains \"val\"", l->nshards,
                     l->shards[0].path);
    uint64_t tail = 0;
    uint32_t last = l->nshards - 1;
    if (named_val == 0 && val_fraction > 0) {
        tail = (uint64_t)floor((double)val_fraction * (double)l->shards[last].n);
        l->val_is_tail = 1;  // even if the tail rounds to 0 tokens: the message below says so
    }
    for (uint32_t i = 0; i < l->nshards; i++) {
        uint64_t n = l->shards[i].n;
        if (named_val && strstr(base_name_(l->shards[i].path), "val")) add_region_(l, 1, i, 0, n);
        else if (i == last && tail) {
            add_region_(l, 0, i, 0, n - tail);
            add_region_(l, 1, i, n - tail, n);
        } else add_region_(l, 0, i, 0, n);
    }
    uint64_t need = (uint64_t)l->T + 1;
    if (l->train_windows == 0 && !val_only) {
        uint32_t first = 0;
        while (named_val && strstr(base_name_(l->shards[first].path), "val")) first++;
        return wgpt_errf(err, errlen,
                     "the train data (%s%s, %llu tokens) is too small: one sequence needs T+1 = %llu tokens within "
                     "one shard",
                     l->shards[first].path, l->nshards - named_val > 1 ? " and the other train shards" : "",
                     (unsigned long long)l->train_tokens, (unsigned long long)need);
    }
    if ((named_val || val_fraction > 0 || val_only) && l->val_windows < l->B)
        return wgpt_errf(err, errlen,
                     "the validation data (%s%s: %llu tokens) holds %llu sequences of T+1 = %llu tokens, fewer than "
                     "one batch of B = %u; %s",
                     l->val_is_tail ? "the last part of " : "",
                     l->val_is_tail ? l->shards[last].path : "shards named \"val\"",
                     (unsigned long long)l->val_tokens, (unsigned long long)l->val_windows, (unsigned long long)need,
                     l->B,
                     l->val_is_tail ? "raise the validation fraction, or set it to 0 for no validation"
                                    : "add validation data or use a smaller B or T");
    return 0;
}

static wgpt_loader *open_files_(const char *const *paths, size_t npaths, uint32_t B, uint32_t T, uint64_t seed,
                                float val_fraction, uint32_t vocab_size, int val_only, char *err, size_t errlen) {
    if (npaths == 0) return wgpt_errf(err, errlen, "no shard files given"), NULL;
    if (npaths > UINT32_MAX / 4) return wgpt_errf(err, errlen, "%zu shard files: too many", npaths), NULL;
    if (B == 0 || T == 0 || B > (1u << 20) || T > (1u << 24))
        return wgpt_errf(err, errlen, "batch B = %u, sequence T = %u: each must be at least 1 (B <= 2^20, T <= 2^24)", B,
                     T), NULL;
    if (!(val_fraction >= 0 && val_fraction < 1))
        return wgpt_errf(err, errlen, "validation fraction %g: must be in [0, 1)", (double)val_fraction), NULL;
    if (vocab_size == 0 || vocab_size > 65536)
        return wgpt_errf(err, errlen, "vocabulary size %u: shards hold uint16 ids, so it must be in 1..65536", vocab_size),
               NULL;
    wgpt_loader *l = calloc(1, sizeof *l);
    char **sorted = malloc(npaths * sizeof *sorted);
    if (!l || !sorted) goto oom;
    memcpy(sorted, paths, npaths * sizeof *sorted);
    qsort(sorted, npaths, sizeof *sorted, cmp_str_);
    l->shards = calloc(npaths, sizeof *l->shards);
    // At most one train and one val region per shard.
    l->train = calloc(npaths, sizeof *l->train);
    l->val = calloc(npaths, sizeof *l->val);
    if (!l->shards || !l->train || !l->val) goto oom;
    l->B = B;
    l->T = T;
    l->seed = seed;
    l->fingerprint = fnv_u64_(0xCBF29CE484222325ull, T);
    l->vocab = vocab_size;
    // A set `wgpt tokenize` is still replacing, or files not of its set, are refused first.
    if (wgpt_shard_set_check((const char *const *)sorted, npaths, err, errlen) < 0) goto fail;
    const wgpt_shard *tagged = NULL;
    for (size_t i = 0; i < npaths; i++) {
        if (i && strcmp(sorted[i], sorted[i - 1]) == 0) continue;  // listed twice
        wgpt_shard *s = &l->shards[l->nshards];
        if (wgpt_shard_open(sorted[i], s, err, errlen) < 0) goto fail;
        l->nshards++;
        if (s->tokenizer[0] && tagged && strcmp(s->tokenizer, tagged->tokenizer) != 0) {
            wgpt_errf(err, errlen, "%s was made with the %s tokenizer but %s with %s: shards of two tokenizations mixed",
                  tagged->path, tagged->tokenizer, s->path, s->tokenizer);
            goto fail;
        }
        if (s->tokenizer[0] && !tagged) tagged = s;
        if (wgpt_shard_check_vocab(s, 0, s->n, vocab_size, err, errlen) < 0) goto fail;
    }
    if (tagged) l->tokenizer = tagged->tokenizer;
    if (split_(l, val_fraction, val_only, err, errlen) < 0) goto fail;
    uint32_t h = 1;
    while (h < 32 && (1ull << (2 * h)) < l->train_windows) h++;
    l->half_bits = h;
    epoch_keys_(l);
    free(sorted);
    return l;
oom:
    wgpt_errf(err, errlen, "out of host memory opening %zu shards", npaths);
fail:
    free(sorted);
    wgpt_loader_free(l);
    return NULL;
}

wgpt_loader *wgpt_loader_open_files(const char *const *paths, size_t npaths, uint32_t B, uint32_t T, uint64_t seed,
                                    float val_fraction, uint32_t vocab_size, char *err, size_t errlen) {
    return open_files_(paths, npaths, B, T, seed, val_fraction, vocab_size, 0, err, errlen);
}

static wgpt_loader *open_(const char *pattern, uint32_t B, uint32_t T, uint64_t seed, float val_fraction,
                          uint32_t vocab_size, int val_only, char *err, size_t errlen) {
    size_t plen = strlen(pattern);
    char *copy = malloc(plen + 1), *piece = NULL;
    if (!copy) return wgpt_errf(err, errlen, "out of host memory"), NULL;
    memcpy(copy, pattern, plen + 1);
    glob_t g;
    memset(&g, 0, sizeof g);
    int flags = 0;
    wgpt_loader *l = NULL;
    char *save = NULL;
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        struct stat st;
        const char *pat = p;
        free(piece);
        piece = NULL;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            size_t n = strlen(p);
            piece = malloc(n + 8);
            if (!piece) {
                wgpt_errf(err, errlen, "out of host memory");
                goto done;
            }
            snprintf(piece, n + 8, "%s/*.bin", p);
            pat = piece;
        }
        int rc = glob(pat, flags, NULL, &g);
        if (rc == GLOB_NOMATCH) {
            wgpt_errf(err, errlen, "no shard file matches %s%s", pat,
                  strchr(pattern, ',') ? " (one of the comma-separated patterns)" : "");
            goto done;
        }
        if (rc != 0) {
            wgpt_errf(err, errlen, "%s: cannot list the matching files (glob error %d)", pat, rc);
            goto done;
        }
        flags = GLOB_APPEND;
    }
    if (flags == 0) {
        wgpt_errf(err, errlen, "no shard pattern given (\"%s\")", pattern);
        goto done;
    }
    l = open_files_((const char *const *)g.gl_pathv, g.gl_pathc, B, T, seed, val_fraction, vocab_size, val_only,
                    err, errlen);
done:
    if (flags) globfree(&g);
    free(piece);
    free(copy);
    return l;
}

wgpt_loader *wgpt_loader_open(const char *pattern, uint32_t B, uint32_t T, uint64_t seed, float val_fraction,
                              uint32_t vocab_size, char *err, size_t errlen) {
    return open_(pattern, B, T, seed, val_fraction, vocab_size, 0, err, errlen);
}

wgpt_loader *wgpt_loader_open_val(const char *pattern, uint32_t B, uint32_t T, float val_fraction,
                                  uint32_t vocab_size, char *err, size_t errlen) {
    return open_(pattern, B, T, 0, val_fraction, vocab_size, 1, err, errlen);
}

void wgpt_loader_free(wgpt_loader *l) {
    if (!l) return;
    if (l->shards)
        for (uint32_t i = 0; i < l->nshards; i++) wgpt_shard_close(&l->shards[i]);
    free(l->shards);
    free(l->train);
    free(l->val);
    free(l);
}

// One batch's copies out of the maps, run under the SIGBUS guard: `shard` is
// the one being read when a fault cuts the copy short.
typedef struct batch_ {
    wgpt_loader *l;
    int *inputs, *targets;
    int val;
    volatile uint32_t shard;
    uint64_t bad_at;  // position in that shard of an id past the vocabulary, or UINT64_MAX
} batch_;

static void copy_batch_(void *arg) {
    batch_ *c = arg;
    wgpt_loader *l = c->l;
    for (uint32_t b = 0; b < l->B; b++) {
        uint64_t g = c->val ? l->val_next : permute_(l, l->next);
        const region_ *r = c->val ? locate_(l->val, l->nval, g) : locate_(l->train, l->ntrain, g);
        c->shard = r->shard;
        c->bad_at = copy_window_(l, r, g, c->inputs + (size_t)b * l->T, c->targets + (size_t)b * l->T);
        if (c->bad_at != UINT64_MAX) return;
        if (c->val) {
            l->val_next++;
        } else if (++l->next == l->train_windows) {
            l->next = 0;
            l->epoch++;
            epoch_keys_(l);
        }
    }
}

static int guarded_batch_(wgpt_loader *l, int *inputs, int *targets, int val) {
    batch_ c = {l, inputs, targets, val, 0, UINT64_MAX};
    int rc = wgpt_bus_guard_run(copy_batch_, &c);
    const wgpt_shard *s = &l->shards[c.shard];
    if (rc == 0 && c.bad_at != UINT64_MAX) {
        wgpt_errf(l->err, sizeof l->err,
                  "%s: token %u at position %llu (byte offset %llu) is not below the vocabulary size %u, though "
                  "every token was checked when the run opened it: the file was rewritten in place since; restore "
                  "it (or tokenize again) before resuming",
                  s->path, (unsigned)s->tokens[c.bad_at], (unsigned long long)c.bad_at,
                  (unsigned long long)(WGPT_SHARD_HEADER_BYTES + 2 * c.bad_at), l->vocab);
        return -1;
    }
    if (rc == 0) return 0;
    wgpt_errf(l->err, sizeof l->err,
          "%s shrank while it was being read (it held %zu bytes when opened): another process truncated or "
          "rewrote it; restore it (or tokenize again) before resuming",
          s->path, s->map_len);
    return -1;
}

int wgpt_loader_next_train(wgpt_loader *l, int *inputs, int *targets) {
    return guarded_batch_(l, inputs, targets, 0);
}

int wgpt_loader_next_val(wgpt_loader *l, int *inputs, int *targets) {
    if (l->val_windows < l->B || l->val_next > l->val_windows - l->B) return 0;
    return guarded_batch_(l, inputs, targets, 1) < 0 ? -1 : 1;
}

const char *wgpt_loader_error(const wgpt_loader *l) { return l->err; }
const char *wgpt_loader_tokenizer(const wgpt_loader *l) { return l->tokenizer; }

int wgpt_loader_check_vocab(wgpt_loader *l, uint32_t vocab_size, char *err, size_t errlen) {
    for (uint32_t i = 0; i < l->nshards; i++)
        if (wgpt_shard_check_vocab(&l->shards[i], 0, l->shards[i].n, vocab_size, err, errlen) < 0) return -1;
    if (vocab_size < l->vocab) l->vocab = vocab_size;
    return 0;
}

void wgpt_loader_reset_val(wgpt_loader *l) { l->val_next = 0; }

uint64_t wgpt_loader_val_batches(const wgpt_loader *l) { return l->val_windows / l->B; }
uint64_t wgpt_loader_train_tokens(const wgpt_loader *l) { return l->train_tokens; }
uint64_t wgpt_loader_train_windows(const wgpt_loader *l) { return l->train_windows; }
uint64_t wgpt_loader_epoch(const wgpt_loader *l) { return l->epoch; }

void wgpt_loader_describe(const wgpt_loader *l, char *buf, size_t len) {
    char val[512];
    if (l->val_windows == 0) snprintf(val, sizeof val, "none");
    else if (l->val_is_tail)
        snprintf(val, sizeof val, "the last %llu tokens of %s, %llu batch%s", (unsigned long long)l->val_tokens,
                 l->shards[l->nshards - 1].path, (unsigned long long)wgpt_loader_val_batches(l),
                 wgpt_loader_val_batches(l) == 1 ? "" : "es");
    else
        snprintf(val, sizeof val, "%u shard%s, %llu tokens, %llu batch%s", l->val_shards,
                 l->val_shards == 1 ? "" : "s", (unsigned long long)l->val_tokens,
                 (unsigned long long)wgpt_loader_val_batches(l), wgpt_loader_val_batches(l) == 1 ? "" : "es");
    snprintf(buf, len, "train: %u shard%s, %llu tokens, %llu sequences of %u+1 tokens per epoch; val: %s",
             l->train_shards, l->train_shards == 1 ? "" : "s", (unsigned long long)l->train_tokens,
             (unsigned long long)l->train_windows, l->T, val);
}

// ---- checkpoint state: little-endian fields at fixed offsets ----

enum {
    ST_MAGIC = 0,         // "WGPTLDR" + NUL
    ST_VERSION = 8,       // u32
    ST_T = 12,            // u32
    ST_SEED = 16,         // u64
    ST_FINGERPRINT = 24,  // u64
    ST_WINDOWS = 32,      // u64 train windows per epoch
    ST_EPOCH = 40,        // u64
    ST_NEXT = 48,         // u64 next window of the epoch
    ST_VAL_NEXT = 56,     // u64 next validation window
    ST_B = 64,            // u32 (informational)
    ST_SIZE = 72
};
static const char ST_MAGIC_TEXT[8] = "WGPTLDR";

static void put_u64_(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64_(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void put_u32_(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32_(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t wgpt_loader_state_size(void) { return ST_SIZE; }

void wgpt_loader_save_state(const wgpt_loader *l, void *buf) {
    unsigned char *p = buf;
    memset(p, 0, ST_SIZE);
    memcpy(p + ST_MAGIC, ST_MAGIC_TEXT, 8);
    put_u32_(p + ST_VERSION, 1);
    put_u32_(p + ST_T, l->T);
    put_u64_(p + ST_SEED, l->seed);
    put_u64_(p + ST_FINGERPRINT, l->fingerprint);
    put_u64_(p + ST_WINDOWS, l->train_windows);
    put_u64_(p + ST_EPOCH, l->epoch);
    put_u64_(p + ST_NEXT, l->next);
    put_u64_(p + ST_VAL_NEXT, l->val_next);
    put_u32_(p + ST_B, l->B);
}

int wgpt_loader_load_state(wgpt_loader *l, const void *buf, size_t len, char *err, size_t errlen) {
    const unsigned char *p = buf;
    if (len != ST_SIZE) return wgpt_errf(err, errlen, "loader state is %zu bytes, expected %d", len, ST_SIZE);
    if (memcmp(p + ST_MAGIC, ST_MAGIC_TEXT, 8) != 0) return wgpt_errf(err, errlen, "not a data loader state (bad magic)");
    if (get_u32_(p + ST_VERSION) != 1)
        return wgpt_errf(err, errlen, "data loader state version %u; this build reads version 1", get_u32_(p + ST_VERSION));
    uint32_t T = get_u32_(p + ST_T);
    if (T != l->T)
        return wgpt_errf(err, errlen, "the data loader state is for sequences of T = %u tokens; this loader has T = %u", T,
                     l->T);
    uint64_t windows = get_u64_(p + ST_WINDOWS), fp = get_u64_(p + ST_FINGERPRINT);
    if (fp != l->fingerprint || windows != l->train_windows)
        return wgpt_errf(err, errlen,
                     "the data loader state was saved over other shards or another train/val split (%llu train "
                     "sequences per epoch then, %llu now; shard fingerprint %016llx then, %016llx now)",
                     (unsigned long long)windows, (unsigned long long)l->train_windows, (unsigned long long)fp,
                     (unsigned long long)l->fingerprint);
    uint64_t next = get_u64_(p + ST_NEXT), val_next = get_u64_(p + ST_VAL_NEXT);
    if (next >= l->train_windows || val_next > l->val_windows)
        return wgpt_errf(err, errlen, "corrupt data loader state: position %llu of %llu train sequences, %llu of %llu val",
                     (unsigned long long)next, (unsigned long long)l->train_windows, (unsigned long long)val_next,
                     (unsigned long long)l->val_windows);
    l->seed = get_u64_(p + ST_SEED);
    l->epoch = get_u64_(p + ST_EPOCH);
    l->next = next;
    l->val_next = val_next;
    epoch_keys_(l);
    return 0;
}
