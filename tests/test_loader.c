// test_loader.c: the data loader without a GPU. Shards are filled with
// distinct token values (a running counter), so every sequence in a batch tells
// which shard and position it came from: the tests check the window rule, that
// an epoch visits every window exactly once, the train/val split, determinism
// per seed, checkpoint state, shard matching, and that a large corpus is not
// copied into memory.
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/loader.h"
#include "data/shard.h"
#include "data/shard_set.h"
#include "data/tokenizer.h"

// `wgpt tokenize`'s pipeline (data/corpus.h) is tested here end to end (text
// -> shards -> loader); a small chunk makes long documents be encoded in
// several pieces.
enum { CHUNK_ = 256 };

static char dir_[256];

static int make_dir_(void **state) {
    (void)state;
    snprintf(dir_, sizeof dir_, "/tmp/wgpt_test_loader_XXXXXX");
    return mkdtemp(dir_) ? 0 : -1;
}

// Removes everything inside `dir` (files and the folders `wgpt tokenize` made).
static void clear_dir_(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0) {
                clear_dir_(p);
                rmdir(p);
            }
        }
    closedir(d);
}

static int clear_(void **state) {
    (void)state;
    clear_dir_(dir_);
    return 0;
}

static int remove_dir_(void **state) {
    (void)state;
    clear_dir_(dir_);
    int rc = rmdir(dir_);
    if (rc) perror(dir_);
    return rc;
}

static const char *path_(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir_, name);
    return p[k];
}

// A shard whose tokens are first, first+1, ... (mod 65536).
static void make_shard_(const char *name, uint32_t first, size_t n) {
    uint16_t *t = malloc((n ? n : 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    char err[512];
    if (wgpt_shard_write(path_(name), t, n, err, sizeof err) < 0) fail_msg("%s", err);
    free(t);
}

static wgpt_loader *open_(const char *pattern, uint32_t B, uint32_t T, uint64_t seed, float frac) {
    char err[1024];
    wgpt_loader *l = wgpt_loader_open(pattern, B, T, seed, frac, 65536, err, sizeof err);
    if (!l) fail_msg("wgpt_loader_open(%s): %s", pattern, err);
    return l;
}

static void expect_open_error_(const char *pattern, uint32_t B, uint32_t T, float frac, uint32_t vocab,
                               const char *const *needles) {
    char err[1024] = "";
    wgpt_loader *l = wgpt_loader_open(pattern, B, T, 1, frac, vocab, err, sizeof err);
    if (l) fail_msg("wgpt_loader_open(%s) succeeded; expected an error", pattern);
    for (int i = 0; needles[i]; i++)
        if (!strstr(err, needles[i])) fail_msg("error lacks \"%s\": %s", needles[i], err);
}

// Checks that sequence b of a batch is T+1 consecutive counter values and
// returns its first token (the window's identity).
static uint32_t window_of_(const int *in, const int *tg, uint32_t b, uint32_t T) {
    const int *x = in + (size_t)b * T, *y = tg + (size_t)b * T;
    for (uint32_t t = 0; t < T; t++) {
        if (x[t] != (uint16_t)(x[0] + t)) fail_msg("sequence %u: input %u is %d after %d", b, t, x[t], x[0]);
        if (y[t] != (uint16_t)(x[t] + 1)) fail_msg("sequence %u: target %u is %d, input %d", b, t, y[t], x[t]);
    }
    return (uint32_t)x[0];
}

// Three train shards of odd sizes (counter values 0..), windows of T tokens.
enum { T_ = 16, B_ = 5 };
static const uint32_t SHARD_N_[3] = {1000, 1536 /* a multiple of T: the last token starts no window */,
                                     17 /* exactly one window */};
static const uint32_t SHARD_FIRST_[3] = {0, 10000, 20000};

static void make_three_(void) {
    make_shard_("a_000.bin", SHARD_FIRST_[0], SHARD_N_[0]);
    make_shard_("a_001.bin", SHARD_FIRST_[1], SHARD_N_[1]);
    make_shard_("a_002.bin", SHARD_FIRST_[2], SHARD_N_[2]);
}

// mark[v] = 1 for each window start v the spec allows: shard first + k*T for
// k < (n - 1) / T.
static uint64_t expected_windows_(unsigned char *mark) {
    uint64_t w = 0;
    for (int s = 0; s < 3; s++)
        for (uint32_t k = 0; k < (SHARD_N_[s] - 1) / T_; k++, w++) mark[SHARD_FIRST_[s] + k * T_] = 1;
    return w;
}

static void every_window_once_per_epoch(void **state) {
    (void)state;
    make_three_();
    static unsigned char allowed[65536];
    memset(allowed, 0, sizeof allowed);
    uint64_t W = expected_windows_(allowed);
    wgpt_loader *l = open_(path_("a_*.bin"), B_, T_, 42, 0);
    assert_int_equal(wgpt_loader_train_windows(l), W);
    assert_int_equal(wgpt_loader_train_tokens(l), SHARD_N_[0] + SHARD_N_[1] + SHARD_N_[2]);
    assert_int_equal(wgpt_loader_val_batches(l), 0);

    // Three epochs' worth of windows (W is not a multiple of B: batches straddle epochs).
    uint64_t total = 3 * W, got = 0;
    uint32_t *order = malloc(total * sizeof *order);
    int in[B_ * T_], tg[B_ * T_];
    while (got < total) {
        assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
        for (uint32_t b = 0; b < B_ && got < total; b++) order[got++] = window_of_(in, tg, b, T_);
    }
    static unsigned char seen[65536];
    for (int e = 0; e < 3; e++) {
        memset(seen, 0, sizeof seen);
        uint64_t in_order = 0;
        for (uint64_t i = 0; i < W; i++) {
            uint32_t v = order[e * W + i];
            if (!allowed[v]) fail_msg("epoch %d: window starting at token %u is not a window", e, v);
            if (seen[v]++) fail_msg("epoch %d: window starting at token %u seen twice", e, v);
            if (i && v == order[e * W + i - 1] + T_) in_order++;
        }
        // Shuffled: hardly any window follows its neighbour.
        if (in_order > W / 10) fail_msg("epoch %d: %llu of %llu windows follow their neighbour", e,
                                        (unsigned long long)in_order, (unsigned long long)W);
    }
    assert_true(memcmp(order, order + W, W * sizeof *order) != 0);  // a new order each epoch
    assert_int_equal(wgpt_loader_epoch(l), (total + B_ - 1) / B_ * B_ / W);
    free(order);
    wgpt_loader_free(l);
}

static void more_windows_than_a_batch_needs_is_not_required(void **state) {
    (void)state;
    // One window in all: every sequence of every batch is that window.
    make_shard_("one.bin", 7, T_ + 1);
    wgpt_loader *l = open_(path_("one.bin"), 3, T_, 1, 0);
    int in[3 * T_], tg[3 * T_];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
        for (uint32_t b = 0; b < 3; b++) assert_int_equal(window_of_(in, tg, b, T_), 7);
    }
    assert_int_equal(wgpt_loader_epoch(l), 12);
    wgpt_loader_free(l);
}

// The first `n` batches of a loader, flattened (inputs then targets per batch).
static int *batches_(wgpt_loader *l, int n, uint32_t B, uint32_t T) {
    int *out = malloc((size_t)n * 2 * B * T * sizeof *out);
    for (int i = 0; i < n; i++) {
        int *in = out + (size_t)i * 2 * B * T;
        assert_int_equal(wgpt_loader_next_train(l, in, in + (size_t)B * T), 0);
    }
    return out;
}

static void same_seed_same_batches(void **state) {
    (void)state;
    make_three_();
    enum { N = 80 };  // more than an epoch (159 windows / 5)
    size_t bytes = (size_t)N * 2 * B_ * T_ * sizeof(int);
    wgpt_loader *a = open_(path_("a_*.bin"), B_, T_, 7, 0), *b = open_(path_("a_*.bin"), B_, T_, 7, 0),
                *c = open_(path_("a_*.bin"), B_, T_, 8, 0);
    int *x = batches_(a, N, B_, T_), *y = batches_(b, N, B_, T_), *z = batches_(c, N, B_, T_);
    assert_memory_equal(x, y, bytes);
    assert_true(memcmp(x, z, bytes) != 0);
    // Not merely a rotation: the first batches differ too.
    assert_true(memcmp(x, z, 2 * B_ * T_ * sizeof(int)) != 0);
    free(x), free(y), free(z);
    wgpt_loader_free(a), wgpt_loader_free(b), wgpt_loader_free(c);
}

static void val_shards_by_name(void **state) {
    (void)state;
    make_shard_("train_000.bin", 0, 3000);
    make_shard_("train_001.bin", 5000, 3000);
    make_shard_("val_000.bin", 10000, 1000);
    make_shard_("val_001.bin", 12000, 520);
    wgpt_loader *l = open_(dir_, 4, T_, 3, 0.5f);  // a directory means DIR/*.bin; the fraction is unused
    assert_int_equal(wgpt_loader_train_tokens(l), 6000);
    uint64_t vw = (1000 - 1) / T_ + (520 - 1) / T_;
    assert_int_equal(wgpt_loader_val_batches(l), vw / 4);
    int in[4 * T_], tg[4 * T_];
    // In order: val_000's windows, then val_001's.
    uint64_t k = 0;
    for (uint64_t i = 0; i < vw / 4; i++) {
        assert_int_equal(wgpt_loader_next_val(l, in, tg), 1);
        for (uint32_t b = 0; b < 4; b++, k++) {
            uint32_t want = k < 62 ? 10000 + (uint32_t)k * T_ : 12000 + (uint32_t)(k - 62) * T_;
            assert_int_equal(window_of_(in, tg, b, T_), want);
        }
    }
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 0);
    wgpt_loader_reset_val(l);
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 1);
    assert_int_equal(window_of_(in, tg, 0, T_), 10000);
    // Train batches never come from the val shards.
    for (int i = 0; i < 200; i++) {
        assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
        for (uint32_t b = 0; b < 4; b++) assert_true(window_of_(in, tg, b, T_) < 10000);
    }
    char line[512];
    wgpt_loader_describe(l, line, sizeof line);
    assert_non_null(strstr(line, "train: 2 shards, 6000 tokens"));
    assert_non_null(strstr(line, "val: 2 shards, 1520 tokens"));
    wgpt_loader_free(l);
}

static void single_shard_tail_is_val(void **state) {
    (void)state;
    make_shard_("corpus.bin", 0, 2000);
    wgpt_loader *l = open_(path_("corpus.bin"), 3, T_, 5, 0.1f);
    assert_int_equal(wgpt_loader_train_tokens(l), 1800);
    assert_int_equal(wgpt_loader_train_windows(l), 1799 / T_);
    assert_int_equal(wgpt_loader_val_batches(l), (199 / T_) / 3);
    int in[3 * T_], tg[3 * T_];
    uint32_t k = 0;
    while (wgpt_loader_next_val(l, in, tg) == 1)
        for (uint32_t b = 0; b < 3; b++, k++) assert_int_equal(window_of_(in, tg, b, T_), 1800 + k * T_);
    assert_int_equal(k, (199 / T_) / 3 * 3);
    // No train sequence reads a validation token (its targets included).
    for (int i = 0; i < 300; i++) {
        assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
        for (uint32_t j = 0; j < 3 * T_; j++) assert_true(tg[j] < 1800);
    }
    wgpt_loader_free(l);

    // Fraction 0: everything is train, there is no validation.
    l = open_(path_("corpus.bin"), 3, T_, 5, 0);
    assert_int_equal(wgpt_loader_train_tokens(l), 2000);
    assert_int_equal(wgpt_loader_val_batches(l), 0);
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 0);
    wgpt_loader_free(l);

    // Several shards, none named val: the tail of the last one.
    make_shard_("corpus2.bin", 3000, 1000);
    l = open_(path_("corpus*.bin"), 3, T_, 5, 0.2f);
    assert_int_equal(wgpt_loader_train_tokens(l), 2800);
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 1);
    assert_int_equal(window_of_(in, tg, 0, T_), 3800);
    wgpt_loader_free(l);
}

static void state_resumes_identically(void **state) {
    (void)state;
    make_three_();
    make_shard_("a_val.bin", 30000, 400);
    char err[1024];
    wgpt_loader *a = open_(path_("a_*.bin"), B_, T_, 99, 0);
    free(batches_(a, 45, B_, T_));  // past the first epoch (159 windows)
    int in[B_ * T_], tg[B_ * T_];
    assert_int_equal(wgpt_loader_next_val(a, in, tg), 1);  // mid-way through validation too
    size_t n = wgpt_loader_state_size();
    unsigned char *st = malloc(n);
    wgpt_loader_save_state(a, st);
    int *want = batches_(a, 60, B_, T_);
    int want_val[B_ * T_], got_val[B_ * T_];
    assert_int_equal(wgpt_loader_next_val(a, want_val, tg), 1);

    // A fresh loader opened with another seed continues exactly where a was.
    wgpt_loader *b = open_(path_("a_*.bin"), B_, T_, 12345, 0);
    assert_int_equal(wgpt_loader_load_state(b, st, n, err, sizeof err), 0);
    int *got = batches_(b, 60, B_, T_);
    assert_memory_equal(got, want, (size_t)60 * 2 * B_ * T_ * sizeof(int));
    assert_int_equal(wgpt_loader_next_val(b, got_val, tg), 1);
    assert_memory_equal(got_val, want_val, sizeof want_val);
    assert_int_equal(wgpt_loader_epoch(b), wgpt_loader_epoch(a));
    free(got);
    wgpt_loader_free(b);

    // Another B continues the same stream of windows.
    b = open_(path_("a_*.bin"), 3, T_, 1, 0);
    assert_int_equal(wgpt_loader_load_state(b, st, n, err, sizeof err), 0);
    int *three = batches_(b, 5, 3, T_);
    for (int k = 0; k < 15; k++) {
        const int *w5 = want + (size_t)(k / B_) * 2 * B_ * T_, *w3 = three + (size_t)(k / 3) * 2 * 3 * T_;
        assert_int_equal(window_of_(w3, w3 + 3 * T_, (uint32_t)k % 3, T_),
                         window_of_(w5, w5 + B_ * T_, (uint32_t)k % B_, T_));
    }
    free(three);
    wgpt_loader_free(b);

    // Refusals: wrong length, not a state, another T, other shards.
    b = open_(path_("a_*.bin"), B_, T_, 99, 0);
    assert_int_equal(wgpt_loader_load_state(b, st, n - 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "bytes"));
    unsigned char *bad = malloc(n);
    memcpy(bad, st, n);
    bad[0] ^= 1;
    assert_int_equal(wgpt_loader_load_state(b, bad, n, err, sizeof err), -1);
    assert_non_null(strstr(err, "magic"));
    free(bad);
    wgpt_loader_free(b);
    b = open_(path_("a_*.bin"), B_, T_ + 1, 99, 0);
    assert_int_equal(wgpt_loader_load_state(b, st, n, err, sizeof err), -1);
    assert_non_null(strstr(err, "T = 16"));
    wgpt_loader_free(b);
    b = open_(path_("a_00[01].bin"), B_, T_, 99, 0);
    assert_int_equal(wgpt_loader_load_state(b, st, n, err, sizeof err), -1);
    assert_non_null(strstr(err, "other shards"));
    // A refused state leaves the loader where it was.
    wgpt_loader *c = open_(path_("a_00[01].bin"), B_, T_, 99, 0);
    int *x = batches_(b, 3, B_, T_), *y = batches_(c, 3, B_, T_);
    assert_memory_equal(x, y, (size_t)3 * 2 * B_ * T_ * sizeof(int));
    free(x), free(y);
    wgpt_loader_free(b), wgpt_loader_free(c);
    free(want), free(st);
    wgpt_loader_free(a);
}

static void patterns_lists_and_sorting(void **state) {
    (void)state;
    make_three_();
    // A glob, a comma list of globs, a directory and an explicit unsorted list
    // with a duplicate all name the same shards and give the same batches.
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", path_("a_002.bin"), path_("a_00[01].bin"));
    char names[4][512];
    const char *files[4] = {names[0], names[1], names[2], names[3]};
    const char *order[4] = {"a_002.bin", "a_000.bin", "a_001.bin", "a_000.bin"};
    for (int i = 0; i < 4; i++) snprintf(names[i], sizeof names[i], "%s/%s", dir_, order[i]);
    char err[1024];
    wgpt_loader *l[4] = {open_(path_("a_*.bin"), B_, T_, 1, 0), open_(list, B_, T_, 1, 0), open_(dir_, B_, T_, 1, 0),
                         wgpt_loader_open_files(files, 4, B_, T_, 1, 0, 65536, err, sizeof err)};
    assert_non_null(l[3]);
    int *ref = batches_(l[0], 10, B_, T_);
    for (int i = 1; i < 4; i++) {
        int *x = batches_(l[i], 10, B_, T_);
        assert_memory_equal(x, ref, (size_t)10 * 2 * B_ * T_ * sizeof(int));
        free(x);
        wgpt_loader_free(l[i]);
    }
    free(ref);
    wgpt_loader_free(l[0]);
    expect_open_error_(path_("nothing_*.bin"), B_, T_, 0, 65536, (const char *const[]){"nothing_*.bin", NULL});
    snprintf(list, sizeof list, "%s,%s", path_("a_*.bin"), path_("zzz*.bin"));
    expect_open_error_(list, B_, T_, 0, 65536, (const char *const[]){"zzz*.bin", NULL});
}

static void bad_data_and_arguments(void **state) {
    (void)state;
    make_three_();
    // A token outside the vocabulary: file and position named, found at open.
    expect_open_error_(path_("a_*.bin"), B_, T_, 0, 20010,
                       (const char *const[]){"a_002.bin", "token 20010 at position 10", NULL});
    // Too little data for one sequence.
    expect_open_error_(path_("a_002.bin"), B_, 17, 0, 65536, (const char *const[]){"a_002.bin", "T+1 = 18", NULL});
    // Too little validation for one batch.
    expect_open_error_(path_("a_001.bin"), B_, T_, 0.05f, 65536,
                       (const char *const[]){"a_001.bin", "76 tokens", "B = 5", NULL});
    // Only val shards: nothing to train on.
    make_shard_("val.bin", 0, 100);
    expect_open_error_(path_("val.bin"), B_, T_, 0, 65536, (const char *const[]){"no train shard", NULL});
    // A broken shard among good ones.
    FILE *f = fopen(path_("a_003.bin"), "wb");
    fputs("not a shard", f);
    fclose(f);
    expect_open_error_(path_("a_*.bin"), B_, T_, 0, 65536, (const char *const[]){"a_003.bin", NULL});
    expect_open_error_(path_("a_000.bin"), 0, T_, 0, 65536, (const char *const[]){"B = 0", NULL});
    expect_open_error_(path_("a_000.bin"), B_, T_, 1.0f, 65536, (const char *const[]){"fraction 1", NULL});
    expect_open_error_(path_("a_000.bin"), B_, T_, 0, 70000, (const char *const[]){"70000", NULL});
}

// Linux: anonymous resident memory (heap, not the mapped shard files), in kB.
static long rss_anon_kb_(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

static void large_corpus_is_not_copied(void **state) {
    (void)state;
    // 16M tokens (32 MB): a copy of the tokens, or an array of 64-bit window
    // offsets (2 MB at T = 64), would show as anonymous memory.
    enum { N = 16 << 20 };
    wgpt_shard_writer w;
    char err[1024];
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("big.bin"), NULL, err, sizeof err), 0);
    static uint16_t chunk[1 << 16];
    for (size_t i = 0; i < (1 << 16); i++) chunk[i] = (uint16_t)i;
    for (int k = 0; k < N >> 16; k++)
        assert_int_equal(wgpt_shard_writer_append(&w, chunk, 1 << 16, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_finish(&w, err, sizeof err), 0);
    enum { B = 8, T = 64 };
    static int in[B * T], tg[B * T];
    long before = rss_anon_kb_();
    if (before < 0) {
        printf("skipped: needs RssAnon in /proc/self/status; this system has none\n");
        skip();
    }
    wgpt_loader *l = open_(path_("big.bin"), B, T, 1, 0.1f);
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
        window_of_(in, tg, (uint32_t)i % B, T);
    }
    while (wgpt_loader_next_val(l, in, tg) == 1) {
    }
    long grown = rss_anon_kb_() - before;
#ifdef __SANITIZE_ADDRESS__
    // AddressSanitizer's shadow of the mapped file (1 byte per 8) is anonymous
    // memory that it touches as the loader reads: allow it, not a copy.
    grown -= N * 2 / 8 / 1024;
#endif
    if (grown > 1024) fail_msg("anonymous memory grew by %ld kB for a %d kB corpus", grown, N * 2 / 1024);
    assert_int_equal(wgpt_loader_train_windows(l), (N - N / 10 - 1) / T);
    wgpt_loader_free(l);
}

// ---- wgpt tokenize ----

// The tokens of every DIR/kind_*.bin, in file order, appended to *out.
static size_t read_kind_(const char *dir, const char *kind, uint32_t **out) {
    char pat[1024];
    snprintf(pat, sizeof pat, "%s/%s_*.bin", dir, kind);
    glob_t g;
    size_t n = 0;
    *out = NULL;
    if (glob(pat, 0, NULL, &g) != 0) return 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        wgpt_shard s;
        char err[512];
        if (wgpt_shard_open(g.gl_pathv[i], &s, err, sizeof err) < 0) fail_msg("%s", err);
        *out = realloc(*out, (n + s.n + 1) * sizeof **out);
        for (uint64_t k = 0; k < s.n; k++) (*out)[n++] = s.tokens[k];
        wgpt_shard_close(&s);
    }
    globfree(&g);
    return n;
}

static wgpt_tokenizer *gpt2_(void) {
    char err[1024], enc[600], voc[600];
    snprintf(enc, sizeof enc, "%s/third_party/gpt2-bpe/encoder.json", WGPT_SOURCE_DIR);
    snprintf(voc, sizeof voc, "%s/third_party/gpt2-bpe/vocab.bpe", WGPT_SOURCE_DIR);
    wgpt_tokenizer *tok = wgpt_tokenizer_open_gpt2(enc, voc, err, sizeof err);
    if (!tok) fail_msg("%s", err);
    return tok;
}

// The options `wgpt tokenize` starts from, with the test's small chunk.
static wgpt_corpus_opts corpus_opts_(const wgpt_tokenizer *tok, const char *out) {
    wgpt_corpus_opts o = {.tok = tok, .out_dir = out, .shard_tokens = 100000000, .val_fraction = 0.05,
                          .chunk = CHUNK_};
    return o;
}

// Runs the pipeline; returns 0 or -1 (the message in err, if given).
static int tokenize_(const wgpt_corpus_opts *o, const char *const *files, size_t n, char *err, size_t errlen) {
    char buf[2048];
    if (!err) err = buf, errlen = sizeof buf;
    wgpt_corpus_result res;
    int rc = wgpt_corpus_tokenize(o, (char *const *)files, n, &res, err, errlen);
    if (rc == 0) wgpt_shard_set_free(&res.set);
    return rc;
}

static void write_file_(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void tokenize_gpt2_documents(void **state) {
    (void)state;
    // Documents as `wgpt tokenize` should find them: each ends with its blank
    // line; one starts with an extra blank line; one is long (cut into pieces,
    // with lines that begin or end with spaces, where a cut would change GPT-2's
    // tokens); one uses CRLF; the last has no blank line after it.
    enum { NDOC = 300 };
    static char docs[NDOC][4096];
    static char text[NDOC * 4096];
    size_t tl = 0;
    for (int d = 0; d < NDOC; d++) {
        char *p = docs[d];
        size_t cap = sizeof docs[d], k = 0;
        if (d == 11) k += (size_t)snprintf(p + k, cap - k, "\n");
        int lines = d == 7 ? 60 : 1 + d % 3;
        for (int l = 0; l < lines; l++) {
            // In the long one, " \n" then a letter must stay " ", "\n" (a cut
            // there would make it the single token " \n").
            const char *lead = (d == 7 ? l % 3 == 1 : l % 4 == 1) ? "  " : "";
            const char *trail = d == 7 ? (l % 2 ? "" : " ") : l % 5 == 2 ? "   " : "";
            k += (size_t)snprintf(p + k, cap - k, "%sDocument %d line %d: the fox's %d dogs%s%s", lead, d, l, d * l,
                                  trail, d == 20 ? "\r\n" : "\n");
        }
        if (d < NDOC - 1) k += (size_t)snprintf(p + k, cap - k, d == 20 ? "\r\n" : "\n");
        assert_true(k < cap - 1);
        memcpy(text + tl, p, k);
        tl += k;
    }
    text[tl] = 0;
    assert_true(strlen(docs[7]) > 4 * CHUNK_);
    write_file_(path_("corpus.txt"), text);

    char out[512], err[1024];
    snprintf(out, sizeof out, "%s/shards", dir_);
    wgpt_tokenizer *tok = gpt2_();
    wgpt_corpus_opts o = corpus_opts_(tok, out);
    o.shard_tokens = 1500;
    o.val_fraction = 0.1;
    const char *files[] = {path_("corpus.txt")};
    if (tokenize_(&o, files, 1, err, sizeof err) < 0) fail_msg("%s", err);
    uint32_t *tr, *va;
    size_t ntr = read_kind_(out, "train", &tr), nva = read_kind_(out, "val", &va);
    assert_true(ntr > 0 && nva > 0);
    // Shards hold at most 1500 tokens: several train shards.
    char one[600];
    snprintf(one, sizeof one, "%s/train_000002.bin", out);
    wgpt_shard s;
    assert_int_equal(wgpt_shard_open(one, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 1500);
    assert_string_equal(s.tokenizer, "gpt2");  // recorded in the header
    wgpt_shard_close(&s);

    // Walk the documents in order: each is the next one of train or of val,
    // an end-of-text token followed by exactly the ids of its text.
    size_t it = 0, iv = 0;
    int nval = 0;
    uint32_t *ids = NULL;
    size_t nids = 0, capids = 0;
    for (int d = 0; d < NDOC; d++) {
        nids = 0;
        assert_int_equal(wgpt_tokenizer_encode(tok, docs[d], strlen(docs[d]), &ids, &nids, &capids), 0);
        int matched = 0;
        for (int side = 0; side < 2 && !matched; side++) {
            uint32_t *st = side ? va : tr;
            size_t *pos = side ? &iv : &it, len = side ? nva : ntr;
            if (*pos + 1 + nids <= len && st[*pos] == 50256 && memcmp(st + *pos + 1, ids, nids * sizeof *ids) == 0 &&
                (*pos + 1 + nids == len || st[*pos + 1 + nids] == 50256)) {
                *pos += 1 + nids;
                matched = 1;
                nval += side;
            }
        }
        if (!matched) fail_msg("document %d is neither the next train nor the next val document", d);
    }
    assert_int_equal(it, ntr);
    assert_int_equal(iv, nva);
    double share = (double)nva / (double)(ntr + nva);
    if (share < 0.08 || share > 0.12) fail_msg("validation holds %.3f of the tokens, asked 0.1", share);
    assert_true(nval > 10);

    // The loader reads them: val by name, every train token counted.
    wgpt_loader *l = open_(out, 4, 32, 1, 0);
    assert_int_equal(wgpt_loader_train_tokens(l), ntr);
    assert_true(wgpt_loader_val_batches(l) > 0);
    int in[4 * 32], tg[4 * 32];
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 1);
    for (int t = 0; t < 32; t++) assert_int_equal(in[t], (int)va[t]);
    wgpt_loader_free(l);

    // A second run into the same folder is refused without --force.
    assert_int_equal(tokenize_(&o, files, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "already holds shards"));
    free(tr), free(va), free(ids);
    wgpt_tokenizer_free(tok);
}

static void tokenize_gpt2_long_file(void **state) {
    (void)state;
    // One document (--split file) of many chunks whose lines are followed by
    // runs of blank lines: GPT-2 encodes "\n\n\n" as "\n\n", "\n", so no
    // cut may fall inside such a run.
    static char text[16384];
    size_t k = 0;
    for (int l = 0; l < 120; l++)
        k += (size_t)snprintf(text + k, sizeof text - k, "Line %d of the file.%s", l, l % 3 ? "\n" : "\n\n\n\n");
    assert_true(k > 8 * CHUNK_ && k < sizeof text - 1);
    write_file_(path_("long.txt"), text);
    char out[512], err[1024];
    snprintf(out, sizeof out, "%s/long", dir_);
    wgpt_tokenizer *tok = gpt2_();
    wgpt_corpus_opts o = corpus_opts_(tok, out);
    o.split_files = 1;
    o.val_fraction = 0;
    const char *files[] = {path_("long.txt")};
    if (tokenize_(&o, files, 1, err, sizeof err) < 0) fail_msg("%s", err);
    size_t nwant = 0, cap = 1 + k;  // room for the end-of-text token and one id per byte
    uint32_t *want = malloc(cap * sizeof *want), *got;
    want[nwant++] = 50256;
    assert_int_equal(wgpt_tokenizer_encode(tok, text, k, &want, &nwant, &cap), 0);
    size_t n = read_kind_(out, "train", &got);
    assert_int_equal(n, nwant);
    assert_memory_equal(got, want, n * sizeof *got);
    free(want), free(got);
    wgpt_tokenizer_free(tok);
}

static void tokenize_bytes_files_and_stdin(void **state) {
    (void)state;
    write_file_(path_("a.txt"), "first file\n\nwith two paragraphs\n");
    write_file_(path_("b.txt"), "second\n");
    write_file_(path_("c.txt"), "from standard input\n");
    FILE *in = freopen(path_("c.txt"), "rb", stdin);
    assert_non_null(in);
    char out[512];
    snprintf(out, sizeof out, "%s/bytes", dir_);
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts o = corpus_opts_(bytes, out);
    o.split_files = 1;
    o.val_fraction = 0;
    const char *files[] = {path_("a.txt"), path_("b.txt"), "-"};
    char err[1024];
    if (tokenize_(&o, files, 3, err, sizeof err) < 0) fail_msg("%s", err);
    wgpt_tokenizer_free(bytes);
    uint32_t *tr, *va;
    size_t n = read_kind_(out, "train", &tr);
    assert_int_equal(read_kind_(out, "val", &va), 0);
    const char *want = "first file\n\nwith two paragraphs\nsecond\nfrom standard input\n";
    assert_int_equal(n, strlen(want));
    for (size_t i = 0; i < n; i++) assert_int_equal(tr[i], (unsigned char)want[i]);
    free(tr), free(va);
}

static int count_bin_(const char *dir) {
    char pat[1024];
    snprintf(pat, sizeof pat, "%s/*.bin*", dir);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0) return 0;
    int n = (int)g.gl_pathc;
    globfree(&g);
    return n;
}

// The shards of DIR/kind_*.bin: their count and their tokens' sum (a fingerprint).
static uint64_t set_sum_(const char *dir, int *count) {
    uint32_t *tr, *va;
    size_t nt = read_kind_(dir, "train", &tr), nv = read_kind_(dir, "val", &va);
    uint64_t sum = nt * 1000003ull + nv;
    for (size_t i = 0; i < nt; i++) sum = sum * 31 + tr[i];
    for (size_t i = 0; i < nv; i++) sum = sum * 37 + va[i];
    free(tr), free(va);
    *count = count_bin_(dir);
    return sum;
}

static int count_tmp_dirs_(const char *dir) {
    char pat[1024];
    snprintf(pat, sizeof pat, "%s/.wgpt-tokenize-*", dir);
    glob_t g;
    if (glob(pat, GLOB_PERIOD, NULL, &g) != 0) return 0;
    int n = (int)g.gl_pathc;
    globfree(&g);
    return n;
}

static void tokenize_errors(void **state) {
    (void)state;
    // Enough text for several finished shards, then a missing file: the run
    // fails naming it, and leaves no shard behind.
    static char text[20001];  // 1000 lines of 20 bytes and the nul
    for (int i = 0; i < 1000; i++) strcat(text, "abcdefghijklmnopqrs\n");
    write_file_(path_("ok.txt"), text);
    char out[512], err[1024];
    snprintf(out, sizeof out, "%s/err", dir_);
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts o = corpus_opts_(bytes, out);
    o.shard_tokens = 1000;
    const char *files[] = {path_("ok.txt"), path_("missing.txt")};
    assert_int_equal(tokenize_(&o, files, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "missing.txt"));
    assert_int_equal(count_bin_(out), 0);
    assert_int_equal(count_tmp_dirs_(out), 0);
    // Empty input is an error too.
    write_file_(path_("empty.txt"), "");
    const char *empty[] = {path_("empty.txt")};
    assert_int_equal(tokenize_(&o, empty, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "no text"));
    assert_int_equal(count_bin_(out), 0);
    wgpt_tokenizer_free(bytes);
}

// --force replaces a set only once the new one is complete: a missing or
// empty input, or a stop request, leaves the old set whole; a good run
// replaces it, removing old shards the new set does not overwrite.
static void force_replaces_only_a_complete_set(void **state) {
    (void)state;
    static char text[40001];
    for (int i = 0; i < 2000; i++) strcat(text, "ABCDEFGHIJKLMNOPQRS\n");
    write_file_(path_("a.txt"), text);
    write_file_(path_("b.txt"), "short\n");
    write_file_(path_("empty.txt"), "");
    char out[512], err[1024];
    snprintf(out, sizeof out, "%s/set", dir_);
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts o = corpus_opts_(bytes, out);
    o.shard_tokens = 1000;
    o.val_fraction = 0;
    const char *a[] = {path_("a.txt")};
    if (tokenize_(&o, a, 1, err, sizeof err) < 0) fail_msg("%s", err);
    int n0, n;
    uint64_t s0 = set_sum_(out, &n0);
    assert_int_equal(n0, 40);

    o.force = 1;
    const char *missing[] = {path_("b.txt"), path_("missing.txt")}, *empty[] = {path_("empty.txt")};
    assert_int_equal(tokenize_(&o, missing, 2, err, sizeof err), -1);
    assert_true(set_sum_(out, &n) == s0 && n == n0);
    assert_int_equal(tokenize_(&o, empty, 1, err, sizeof err), -1);
    assert_true(set_sum_(out, &n) == s0 && n == n0);
    volatile sig_atomic_t stop = 1;  // as the CLI's Ctrl-C handler sets it
    o.stop = &stop;
    const char *b[] = {path_("b.txt")};
    assert_int_equal(tokenize_(&o, b, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "interrupted"));
    assert_true(set_sum_(out, &n) == s0 && n == n0);
    assert_int_equal(count_tmp_dirs_(out), 0);

    o.stop = NULL;
    if (tokenize_(&o, b, 1, err, sizeof err) < 0) fail_msg("%s", err);
    uint32_t *tr, *va;
    assert_int_equal(read_kind_(out, "train", &tr), 6);
    assert_int_equal(tr[0], 's');
    free(tr);
    assert_int_equal(read_kind_(out, "val", &va), 0);
    free(va);
    assert_int_equal(count_bin_(out), 1);  // the 39 other old shards are gone
    wgpt_tokenizer_free(bytes);
}

// Files wgpt did not write are never removed, --force or not: an input that
// lives in the folder, other .bin files, and files named like shards that are
// not (no record) or that the folder's record does not list.
static void force_never_removes_foreign_files(void **state) {
    (void)state;
    char out[512], err[1024], p[700];
    snprintf(out, sizeof out, "%s/mine", dir_);
    assert_int_equal(mkdir(out, 0777), 0);
    snprintf(p, sizeof p, "%s/train_000000.bin", out);
    write_file_(p, "my notes, named like a shard\n");
    char input[700];
    snprintf(input, sizeof input, "%s/train_notes.bin", out);
    write_file_(input, "text to tokenize, in the output folder\n");
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts o = corpus_opts_(bytes, out);
    o.force = 1;
    const char *files[] = {input};
    assert_int_equal(tokenize_(&o, files, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "train_000000.bin"));
    assert_non_null(strstr(err, "not one"));
    struct stat st;
    assert_int_equal(stat(p, &st), 0);  // untouched
    assert_int_equal(unlink(p), 0);

    wgpt_corpus_result res;
    if (wgpt_corpus_tokenize(&o, (char *const *)files, 1, &res, err, sizeof err) < 0) fail_msg("%s", err);
    assert_non_null(strstr(res.note, "train_notes.bin"));  // the other .bin is pointed out
    wgpt_shard_set_free(&res.set);
    assert_int_equal(stat(input, &st), 0);
    // A real shard that the record does not list: refused, kept.
    snprintf(p, sizeof p, "%s/val_000042.bin", out);
    uint16_t t[4] = {1, 2, 3, 4};
    assert_int_equal(wgpt_shard_write(p, t, 4, err, sizeof err), 0);
    assert_int_equal(tokenize_(&o, files, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "val_000042.bin"));
    assert_non_null(strstr(err, WGPT_SHARD_SET_FILE));
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(stat(input, &st), 0);
    // The loader refuses it too, rather than training on it with the set.
    expect_open_error_(out, 1, 2, 0, 256, (const char *const[]){"val_000042.bin", "does not list", NULL});
    wgpt_tokenizer_free(bytes);
}

// A replacement that stopped half way (the record says "replacing") is
// refused by the loader and repaired by the next run with --force.
static void interrupted_replacement_is_refused(void **state) {
    (void)state;
    static char text[4001];
    for (int i = 0; i < 200; i++) strcat(text, "abcdefghijklmnopqrs\n");
    write_file_(path_("t.txt"), text);
    char out[512], err[1024];
    snprintf(out, sizeof out, "%s/half", dir_);
    wgpt_tokenizer *bytes = wgpt_tokenizer_open_bytes();
    wgpt_corpus_opts o = corpus_opts_(bytes, out);
    o.shard_tokens = 1000;
    const char *files[] = {path_("t.txt")};
    if (tokenize_(&o, files, 1, err, sizeof err) < 0) fail_msg("%s", err);
    wgpt_shard_set rec;
    assert_int_equal(wgpt_shard_set_read(out, &rec, err, sizeof err), 1);
    assert_true(rec.complete);
    assert_string_equal(rec.tokenizer, "bytes");
    assert_int_equal(rec.n, 4);  // one document of 4000 bytes: 4 train shards
    rec.complete = 0;  // as a run killed during its swap leaves it
    assert_int_equal(wgpt_shard_set_write(out, &rec, err, sizeof err), 0);
    wgpt_shard_set_free(&rec);
    expect_open_error_(out, 1, 8, 0, 256, (const char *const[]){"incomplete", "--force", NULL});
    assert_int_equal(tokenize_(&o, files, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "incomplete"));
    o.force = 1;
    if (tokenize_(&o, files, 1, err, sizeof err) < 0) fail_msg("%s", err);
    wgpt_loader *l = open_(out, 1, 8, 1, 0);
    assert_string_equal(wgpt_loader_tokenizer(l), "bytes");
    wgpt_loader_free(l);
    // A shard changed since the record was written is refused.
    char p[700];
    snprintf(p, sizeof p, "%s/train_000000.bin", out);
    uint16_t t[40] = {0};
    assert_int_equal(wgpt_shard_write(p, t, 40, err, sizeof err), 0);
    expect_open_error_(out, 1, 8, 0, 256, (const char *const[]){"train_000000.bin", "recorded", NULL});
    wgpt_tokenizer_free(bytes);
}

// Shards made with two tokenizers are not mixed; the recorded one is reported.
static void tokenizer_recorded_and_mixes_refused(void **state) {
    (void)state;
    char err[1024];
    uint16_t t[64];
    for (int i = 0; i < 64; i++) t[i] = (uint16_t)i;
    wgpt_shard_writer w;
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("a_000.bin"), "gpt2", err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_append(&w, t, 64, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_finish(&w, err, sizeof err), 0);
    make_shard_("b_000.bin", 0, 64);  // records none
    char pat[600];
    snprintf(pat, sizeof pat, "%s/*.bin", dir_);
    wgpt_loader *l = open_(pat, 1, 8, 1, 0);
    assert_string_equal(wgpt_loader_tokenizer(l), "gpt2");
    assert_int_equal(wgpt_loader_check_vocab(l, 50257, err, sizeof err), 0);
    assert_int_equal(wgpt_loader_check_vocab(l, 32, err, sizeof err), -1);
    assert_non_null(strstr(err, "--tokenizer"));
    wgpt_loader_free(l);
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("c_000.bin"), "bytes", err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_append(&w, t, 64, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_finish(&w, err, sizeof err), 0);
    expect_open_error_(pat, 1, 8, 0, 65536, (const char *const[]){"gpt2", "bytes", "mixed", NULL});
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("d.bin"), "no spaces", err, sizeof err), -1);
}

// A shard truncated by another process while the loader maps it: the next
// batch that touches the lost pages is an error naming the file, not SIGBUS.
static void shard_shrinking_under_the_loader(void **state) {
    (void)state;
    enum { N = 1 << 20 };  // 2 MB: many pages
    make_shard_("big_000.bin", 0, N);
    wgpt_loader *l = open_(path_("big_000.bin"), 8, 64, 1, 0);
    assert_int_equal(truncate(path_("big_000.bin"), 4096), 0);
    static int in[8 * 64], tg[8 * 64];
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++) rc = wgpt_loader_next_train(l, in, tg);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(wgpt_loader_error(l), "big_000.bin"));
    assert_non_null(strstr(wgpt_loader_error(l), "shrank"));
    wgpt_loader_free(l);
    // The vocabulary scan of a shard that shrinks after it was mapped, too.
    make_shard_("big_001.bin", 0, N);
    wgpt_shard s;
    char err[1024];
    assert_int_equal(wgpt_shard_open(path_("big_001.bin"), &s, err, sizeof err), 0);
    assert_int_equal(truncate(path_("big_001.bin"), 4096), 0);
    // Every id is below 65535 until position 65535, far past the first page.
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, s.n, 65535, err, sizeof err), -1);
    assert_non_null(strstr(err, "shrank"));
    wgpt_shard_close(&s);
}

// L12: a shard rewritten in place after the vocabulary check (same size, an
// id past the vocabulary): the batch that meets it fails naming the file and
// the position (the model would only have named a position in the batch).
static void rewritten_token_names_file_and_position(void **state) {
    (void)state;
    make_shard_("ids_000.bin", 0, 4000);  // ids 0..3999
    wgpt_loader *l = open_(path_("ids_000.bin"), 4, 16, 1, 0);
    char err[1024];
    assert_int_equal(wgpt_loader_check_vocab(l, 4000, err, sizeof err), 0);
    static int in[4 * 16], tg[4 * 16];
    assert_int_equal(wgpt_loader_next_train(l, in, tg), 0);
    int fd = open(path_("ids_000.bin"), O_WRONLY);
    assert_true(fd >= 0);
    uint16_t bad = 4321;
    enum { AT = 2500 };
    assert_int_equal(pwrite(fd, &bad, 2, WGPT_SHARD_HEADER_BYTES + 2 * AT), 2);
    close(fd);
    int rc = 0;
    for (int i = 0; i < 200 && rc == 0; i++) rc = wgpt_loader_next_train(l, in, tg);  // an epoch is 62 batches
    assert_int_equal(rc, -1);
    const char *e = wgpt_loader_error(l);
    if (!strstr(e, "ids_000.bin") || !strstr(e, "token 4321 at position 2500") || !strstr(e, "vocabulary size 4000"))
        fail_msg("%s", e);
    wgpt_loader_free(l);
}

// M8: evaluation opens the validation split alone: shards all named "val",
// or beside a train shard too small for a window, are evaluated; training
// still refuses both.
static void validation_alone_for_evaluation(void **state) {
    (void)state;
    make_shard_("val_000.bin", 0, 200);
    make_shard_("train_000.bin", 1000, 5);  // too small for one window of 17 tokens
    char err[1024];
    wgpt_loader *l = wgpt_loader_open_val(path_("val_*.bin"), 2, 16, 0.1f, 65536, err, sizeof err);
    if (!l) fail_msg("%s", err);
    assert_int_equal(wgpt_loader_val_batches(l), 6);  // 199 / 16 = 12 windows
    static int in[2 * 16], tg[2 * 16];
    assert_int_equal(wgpt_loader_next_val(l, in, tg), 1);
    assert_int_equal(in[0], 0);
    wgpt_loader_free(l);
    char all[600];
    snprintf(all, sizeof all, "%s/*.bin", dir_);
    l = wgpt_loader_open_val(all, 2, 16, 0.1f, 65536, err, sizeof err);
    if (!l) fail_msg("%s", err);
    assert_int_equal(wgpt_loader_val_batches(l), 6);
    wgpt_loader_free(l);
    expect_open_error_(path_("val_*.bin"), 2, 16, 0.1f, 65536, (const char *const[]){"no train shard", NULL});
    expect_open_error_(all, 2, 16, 0.1f, 65536, (const char *const[]){"train_000.bin", "too small", NULL});
    // Nothing to evaluate: no "val" shard and no fraction held out, or too little.
    assert_null(wgpt_loader_open_val(path_("train_000.bin"), 2, 16, 0, 65536, err, sizeof err));
    assert_non_null(strstr(err, "no validation data"));
    assert_null(wgpt_loader_open_val(path_("val_*.bin"), 13, 16, 0, 65536, err, sizeof err));
    assert_non_null(strstr(err, "fewer than one batch"));
}

static void on_alarm_(int sig) {
    (void)sig;
    static const char msg[] = "a FIFO blocked the open (no answer in 20 s)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

// A FIFO in place of a shard is refused at once, not waited on.
static void fifo_shard_is_refused_without_blocking(void **state) {
    (void)state;
    make_shard_("a_000.bin", 0, 100);
    assert_int_equal(mkfifo(path_("b_000.bin"), 0600), 0);
    signal(SIGALRM, on_alarm_);
    alarm(20);
    char pat[600];
    snprintf(pat, sizeof pat, "%s/*.bin", dir_);
    expect_open_error_(pat, 1, 8, 0, 65536, (const char *const[]){"b_000.bin", "FIFO", NULL});
    wgpt_shard s;
    char err[1024];
    assert_int_equal(wgpt_shard_open(path_("b_000.bin"), &s, err, sizeof err), -1);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(every_window_once_per_epoch, clear_),
        cmocka_unit_test_teardown(more_windows_than_a_batch_needs_is_not_required, clear_),
        cmocka_unit_test_teardown(same_seed_same_batches, clear_),
        cmocka_unit_test_teardown(val_shards_by_name, clear_),
        cmocka_unit_test_teardown(single_shard_tail_is_val, clear_),
        cmocka_unit_test_teardown(state_resumes_identically, clear_),
        cmocka_unit_test_teardown(patterns_lists_and_sorting, clear_),
        cmocka_unit_test_teardown(bad_data_and_arguments, clear_),
        cmocka_unit_test_teardown(large_corpus_is_not_copied, clear_),
        cmocka_unit_test_teardown(tokenize_gpt2_documents, clear_),
        cmocka_unit_test_teardown(tokenize_gpt2_long_file, clear_),
        cmocka_unit_test_teardown(tokenize_bytes_files_and_stdin, clear_),
        cmocka_unit_test_teardown(tokenize_errors, clear_),
        cmocka_unit_test_teardown(force_replaces_only_a_complete_set, clear_),
        cmocka_unit_test_teardown(force_never_removes_foreign_files, clear_),
        cmocka_unit_test_teardown(interrupted_replacement_is_refused, clear_),
        cmocka_unit_test_teardown(tokenizer_recorded_and_mixes_refused, clear_),
        cmocka_unit_test_teardown(shard_shrinking_under_the_loader, clear_),
        cmocka_unit_test_teardown(fifo_shard_is_refused_without_blocking, clear_),
        cmocka_unit_test_teardown(rewritten_token_names_file_and_position, clear_),
        cmocka_unit_test_teardown(validation_alone_for_evaluation, clear_),
    };
    return cmocka_run_group_tests(tests, make_dir_, remove_dir_);
}
