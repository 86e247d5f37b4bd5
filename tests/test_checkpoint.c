// test_checkpoint.c: checkpoint files (host only, no GPU): bit-identical round
// trips; every corruption (each flipped byte, truncations, wrong magic,
// future version, a config that disagrees with the sizes, NaN/Inf) is refused
// with a message naming the file; failed writes (bad input, missing folder,
// file-size limit hit mid-write, stale or blocked temp file) leave the old
// checkpoint intact and no .tmp behind; overwriting replaces by rename; a
// writer SIGKILLed at random moments leaves either no file or a valid one.
//
// Damaged files are resealed by a separate implementation of the format spec
// in checkpoint.h (plain zlib crc32 over whole ranges), so the checks behind
// the checksums are reached too.
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "cli/commands.h"
#include "train/checkpoint.h"

// The format, as the spec in checkpoint.h states it.
enum { HDR = 144, TRL = 32, OFF_VERSION = 8, OFF_CONFIG = 16, OFF_STEP = 40, OFF_LEN = 96, OFF_HCRC = 140 };

static char g_dir[64];

static void tpath(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

static uint32_t get32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> 8 * i);
}
static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

// Recomputes every checksum of a (deliberately edited) file image. When the
// header's sizes do not match the image, only the header CRC is redone.
static void reseal(unsigned char *b, size_t n) {
    put32(b + OFF_HCRC, (uint32_t)crc32(0, b, OFF_HCRC));
    uint64_t len[5], end = HDR;
    for (int i = 0; i < 5; i++) {
        len[i] = get64(b + OFF_LEN + 8 * i);
        if (len[i] > n) return;
        end += len[i];
    }
    if (end + TRL != n) return;
    uint64_t at = HDR;
    for (int i = 0; i < 5; i++) {
        put32(b + end + 4 * i, (uint32_t)crc32(0, b + at, (uInt)len[i]));
        at += len[i];
    }
    put32(b + end + 20, (uint32_t)crc32(0, b, (uInt)(end + 20)));
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n ? *n : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s", path);
    assert_int_equal(fwrite(b, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void assert_no_tmp(const char *path) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (exists(tmp)) fail_msg("%s was left behind", tmp);
}

static const wgpt_gpt2_config SMALL = {.max_seq_len = 4, .vocab_size = 10, .padded_vocab_size = 16,
                                       .num_layers = 2, .num_heads = 2, .channels = 4};

// A checkpoint with malloc'ed arrays (freed with wgpt_checkpoint_free).
static wgpt_checkpoint make_ck(const wgpt_gpt2_config *c, uint64_t step, int with_adam) {
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = *c;
    ck.step = step;
    strcpy(ck.tokenizer, step % 2 ? "bytes" : "gpt2");
    for (int i = 0; i < 4; i++) ck.rng[i] = 0x0123456789ABCDEFull * (uint64_t)(i + 1) + step;
    ck.train_opts_len = 13;
    ck.loader_state_len = 7;
    ck.train_opts = malloc(ck.train_opts_len);
    ck.loader_state = malloc(ck.loader_state_len);
    for (size_t i = 0; i < 13; i++) ((unsigned char *)ck.train_opts)[i] = (unsigned char)(i * 37 + step);
    for (size_t i = 0; i < 7; i++) ((unsigned char *)ck.loader_state)[i] = (unsigned char)(250 - i - step);
    size_t n = wgpt_gpt2_num_params(c);
    ck.params = malloc(n * 4);
    tu_fill(ck.params, n, -1, 1);
    if (with_adam) {
        ck.adam_m = malloc(n * 4);
        ck.adam_v = malloc(n * 4);
        tu_fill(ck.adam_m, n, -1e-3f, 1e-3f);
        tu_fill(ck.adam_v, n, 0, 1e-6f);
    }
    return ck;
}

static void assert_ck_equal(const wgpt_checkpoint *a, const wgpt_checkpoint *b) {
    assert_memory_equal(&a->config, &b->config, sizeof a->config);
    assert_true(a->step == b->step);
    assert_string_equal(a->tokenizer, b->tokenizer);
    assert_memory_equal(a->rng, b->rng, sizeof a->rng);
    assert_int_equal(a->train_opts_len, b->train_opts_len);
    assert_int_equal(a->loader_state_len, b->loader_state_len);
    if (a->train_opts_len) assert_memory_equal(a->train_opts, b->train_opts, a->train_opts_len);
    if (a->loader_state_len) assert_memory_equal(a->loader_state, b->loader_state, a->loader_state_len);
    size_t bytes = wgpt_gpt2_num_params(&a->config) * 4;
    assert_memory_equal(a->params, b->params, bytes);  // bits, not values: -0.0 and denormals too
    assert_int_equal(!a->adam_m, !b->adam_m);
    assert_int_equal(!a->adam_v, !b->adam_v);
    if (a->adam_m) assert_memory_equal(a->adam_m, b->adam_m, bytes);
    if (a->adam_v) assert_memory_equal(a->adam_v, b->adam_v, bytes);
}

// Reading must fail with a message naming the file, and own nothing afterwards.
static void expect_bad(const char *path, const char *want_in_err) {
    wgpt_checkpoint ck;
    char err[1024] = "";
    int rc = wgpt_checkpoint_read(path, &ck, err, sizeof err);
    if (rc != -1) fail_msg("%s was accepted (expected an error containing \"%s\")", path, want_in_err);
    if (!strstr(err, path)) fail_msg("error does not name the file: %s", err);
    if (want_in_err && !strstr(err, want_in_err))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want_in_err);
    assert_null(ck.params);
    assert_null(ck.train_opts);
}

// ---- round trips ----

static void round_trip_is_bit_identical(void **state) {
    (void)state;
    char path[256];
    tpath(path, sizeof path, "rt.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 0xFEDCBA9876543210ull, 1);
    const uint32_t odd[] = {0x80000000u /* -0 */, 0x00000001u /* denormal */, 0x7f7fffffu /* FLT_MAX */};
    for (int i = 0; i < 3; i++) memcpy(&ck.params[i], &odd[i], 4);
    char err[512];
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    assert_no_tmp(path);

    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    assert_ck_equal(&ck, &back);

    // The bytes follow the spec: size, magic, little-endian fields, file CRC.
    size_t n;
    unsigned char *b = slurp(path, &n);
    size_t nparams = wgpt_gpt2_num_params(&SMALL);
    assert_int_equal(n, HDR + 13 + 7 + 3 * 4 * nparams + TRL);
    assert_memory_equal(b, "WGPTCKPT", 8);
    assert_int_equal(get32(b + OFF_VERSION), 1);
    assert_int_equal(get32(b + OFF_CONFIG + 4 * 5), SMALL.channels);
    assert_true(get64(b + OFF_STEP) == ck.step);
    assert_memory_equal(b + HDR + 20, ck.params, 4);  // params follow the two blobs (on a little-endian host)
    assert_int_equal(get32(b + n - 12), (uint32_t)crc32(0, b, (uInt)(n - 12)));
    assert_memory_equal(b + n - 8, "WGPTEND", 8);
    free(b);

    wgpt_checkpoint head;
    if (wgpt_checkpoint_peek(path, &head, err, sizeof err) != 0) fail_msg("%s", err);
    assert_memory_equal(&head.config, &ck.config, sizeof ck.config);
    assert_true(head.step == ck.step);
    assert_string_equal(head.tokenizer, ck.tokenizer);
    assert_memory_equal(head.rng, ck.rng, sizeof ck.rng);
    assert_int_equal(head.train_opts_len, 13);
    assert_null(head.params);
    assert_null(head.train_opts);
    wgpt_checkpoint_free(&head);

    wgpt_checkpoint_free(&back);
    wgpt_checkpoint_free(&ck);
}

static void params_only_export_and_empty_blobs(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "export.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 7, 0);
    free(ck.train_opts);
    free(ck.loader_state);
    ck.train_opts = ck.loader_state = NULL;
    ck.train_opts_len = ck.loader_state_len = 0;
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    assert_null(back.adam_m);
    assert_null(back.adam_v);
    assert_null(back.train_opts);
    assert_null(back.loader_state);
    assert_ck_equal(&ck, &back);
    size_t n;
    free(slurp(path, &n));
    assert_int_equal(n, HDR + 4 * wgpt_gpt2_num_params(&SMALL) + TRL);
    wgpt_checkpoint_free(&back);
    wgpt_checkpoint_free(&ck);
}

// ---- corruption ----

// Which part of the file an offset falls in, and a word the error must contain.
static const char *region_word(const unsigned char *b, size_t n, size_t pos) {
    uint64_t at = HDR;
    const char *names[5] = {"train_opts", "loader_state", "params", "adam_m", "adam_v"};
    if (pos < HDR) return NULL;  // header: many different messages
    for (int i = 0; i < 5; i++) {
        uint64_t len = get64(b + OFF_LEN + 8 * i);
        if (pos < at + len) return names[i];
        at += len;
    }
    return pos < n - 12 ? NULL : pos < n - 8 ? "file checksum" : "end marker";  // section CRCs: names a section
}

static void every_flipped_byte_is_caught(void **state) {
    (void)state;
    char path[256], bad[256], err[512];
    tpath(path, sizeof path, "flip_src.ckpt");
    tpath(bad, sizeof bad, "flip.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 3, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *good = slurp(path, &n), *b = malloc(n);
    const unsigned char masks[] = {0x01, 0x80, 0xFF};
    int tried = 0;
    for (size_t pos = 0; pos < n; pos++) {
        int edge = pos < HDR || pos >= n - TRL;
        for (int m = 0; m < (edge ? 3 : 1); m++) {  // every bit pattern on the header and trailer
            memcpy(b, good, n);
            b[pos] ^= masks[m];
            spit(bad, b, n);
            const char *want = region_word(good, n, pos);
            expect_bad(bad, want);
            tried++;
        }
    }
    assert_true(tried > (int)n);
    // Sanity of the harness: the unflipped copy reads.
    spit(bad, good, n);
    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(bad, &back, err, sizeof err) != 0) fail_msg("%s", err);
    wgpt_checkpoint_free(&back);
    free(b);
    free(good);
    wgpt_checkpoint_free(&ck);
}

static void truncations_are_caught(void **state) {
    (void)state;
    char path[256], bad[256], err[512];
    tpath(path, sizeof path, "trunc_src.ckpt");
    tpath(bad, sizeof bad, "trunc.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 4, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *good = slurp(path, &n);
    wgpt_checkpoint head;
    // Every length through the header and the trailer, every 5th in between.
    for (size_t len = 0; len < n; len += (len < HDR + 16 || len + TRL + 16 >= n) ? 1 : 5) {
        spit(bad, good, len);
        expect_bad(bad, "truncated");
        assert_int_equal(wgpt_checkpoint_peek(bad, &head, err, sizeof err), -1);  // peek sees it too
    }
    // Bytes appended after the end marker are refused as well.
    unsigned char *longer = calloc(n + 5, 1);
    memcpy(longer, good, n);
    spit(bad, longer, n + 5);
    expect_bad(bad, "holds");
    free(longer);
    free(good);
    wgpt_checkpoint_free(&ck);
}

static void wrong_magic_and_not_a_checkpoint(void **state) {
    (void)state;
    char path[256], bad[256], err[512];
    tpath(path, sizeof path, "magic_src.ckpt");
    tpath(bad, sizeof bad, "magic.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 5, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *b = slurp(path, &n);
    b[7] = 'X';
    reseal(b, n);  // checksums right, magic wrong
    spit(bad, b, n);
    expect_bad(bad, "not a wgpt checkpoint");
    spit(bad, "hello, world: a text file that is long enough to be a header\n", 62);
    expect_bad(bad, "not a wgpt checkpoint");
    expect_bad(g_dir, "not a regular file");
    tpath(bad, sizeof bad, "does_not_exist.ckpt");
    expect_bad(bad, "cannot open");
    wgpt_checkpoint head;
    assert_int_equal(wgpt_checkpoint_peek(bad, &head, err, sizeof err), -1);
    assert_non_null(strstr(err, "does_not_exist.ckpt"));
    free(b);
    wgpt_checkpoint_free(&ck);
}

static void future_version_is_refused(void **state) {
    (void)state;
    char path[256], bad[256], err[512];
    tpath(path, sizeof path, "ver_src.ckpt");
    tpath(bad, sizeof bad, "ver.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 6, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *b = slurp(path, &n);
    put32(b + OFF_VERSION, 2);
    reseal(b, n);
    spit(bad, b, n);
    expect_bad(bad, "version 2");
    expect_bad(bad, "newer");
    wgpt_checkpoint head;
    assert_int_equal(wgpt_checkpoint_peek(bad, &head, err, sizeof err), -1);
    assert_non_null(strstr(err, "newer"));
    free(b);
    wgpt_checkpoint_free(&ck);
}

// Edits one header field of a good image, reseals, and expects `want` in the error.
static void expect_header_edit_refused(const unsigned char *good, size_t n, size_t off, int width, uint64_t value,
                                       const char *want) {
    char bad[256];
    tpath(bad, sizeof bad, "cfg.ckpt");
    unsigned char *b = malloc(n);
    memcpy(b, good, n);
    if (width == 4)
        put32(b + off, (uint32_t)value);
    else
        put64(b + off, value);
    reseal(b, n);
    spit(bad, b, n);
    expect_bad(bad, want);
    wgpt_checkpoint head;
    char err[512];
    assert_int_equal(wgpt_checkpoint_peek(bad, &head, err, sizeof err), -1);
    assert_non_null(strstr(err, want));
    free(b);
}

static void config_inconsistent_with_sizes(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "cfg_src.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 8, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *g = slurp(path, &n);
    enum { T = OFF_CONFIG, V = T + 4, VP = T + 8, L = T + 12, NH = T + 16, C = T + 20 };
    expect_header_edit_refused(g, n, L, 4, 3, "params section holds");
    expect_header_edit_refused(g, n, C, 4, 8, "params section holds");
    expect_header_edit_refused(g, n, VP, 4, 8, "vocab_size 10 exceeds padded_vocab_size 8");
    expect_header_edit_refused(g, n, NH, 4, 3, "not a multiple of num_heads 3");
    expect_header_edit_refused(g, n, T, 4, 0, "max_seq_len is 0");
    // Sizes that would overflow or exceed the file never reach an allocation.
    expect_header_edit_refused(g, n, C, 4, 0xFFFFFFFEu, "more parameters");
    expect_header_edit_refused(g, n, L, 4, 0xFFFFFFFFu, "params section holds");
    expect_header_edit_refused(g, n, OFF_LEN + 0, 8, 1ull << 62, "add up to");   // train_opts
    expect_header_edit_refused(g, n, OFF_LEN + 8, 8, UINT64_MAX, "add up to");   // loader_state
    expect_header_edit_refused(g, n, OFF_LEN + 16, 8, 4, "params section holds");
    expect_header_edit_refused(g, n, OFF_LEN + 24, 8, 0, "adam_m and adam_v must agree");
    expect_header_edit_refused(g, n, OFF_LEN + 32, 8, 12, "adam_v section");
    free(g);
    wgpt_checkpoint_free(&ck);
}

// Puts a value into element `at` of section `sect` (2 params, 3 adam_m, 4 adam_v) and reseals.
static void poke_float(unsigned char *b, size_t n, int sect, size_t at, uint32_t bits) {
    uint64_t off = HDR;
    for (int i = 0; i < sect; i++) off += get64(b + OFF_LEN + 8 * i);
    put32(b + off + 4 * at, bits);
    reseal(b, n);
}

static void non_finite_tensors_are_named(void **state) {
    (void)state;
    char path[256], bad[256], err[512];
    tpath(path, sizeof path, "nan_src.ckpt");
    tpath(bad, sizeof bad, "nan.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 9, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *good = slurp(path, &n), *b = malloc(n);
    // Element 17 of layer 1's qkvw: after wte (Vp*C), wpe (maxT*C), ln1w, ln1b (L*C each) and layer 0's qkvw.
    size_t C = SMALL.channels, L = SMALL.num_layers;
    size_t at = SMALL.padded_vocab_size * C + SMALL.max_seq_len * C + 2 * L * C + 3 * C * C + 17;
    memcpy(b, good, n);
    poke_float(b, n, 2, at, 0x7fc00000u);  // quiet NaN
    spit(bad, b, n);
    expect_bad(bad, "qkvw, layer 1, element 17 of 48");
    expect_bad(bad, "NaN");
    memcpy(b, good, n);
    poke_float(b, n, 4, 0, 0xff800000u);  // -Inf
    spit(bad, b, n);
    expect_bad(bad, "adam_v element 0 (wte, element 0 of 64) is Inf");
    memcpy(b, good, n);
    poke_float(b, n, 3, wgpt_gpt2_num_params(&SMALL) - 1, 0x7f800001u);  // signalling NaN, last element
    spit(bad, b, n);
    expect_bad(bad, "lnfb, element 3 of 4");

    // The writer refuses to put a NaN on disk and keeps the old checkpoint.
    ck.adam_m[5] = NAN;
    assert_int_equal(wgpt_checkpoint_write(path, &ck, err, sizeof err), -1);
    assert_non_null(strstr(err, "adam_m element 5"));
    assert_non_null(strstr(err, "not written"));
    size_t n2;
    unsigned char *after = slurp(path, &n2);
    assert_int_equal(n2, n);
    assert_memory_equal(after, good, n);
    assert_no_tmp(path);
    free(after);
    free(b);
    free(good);
    wgpt_checkpoint_free(&ck);
}

// ---- failed writes ----

// Asserts path still holds exactly `want` and no temp file is left.
static void assert_unchanged(const char *path, const unsigned char *want, size_t n) {
    size_t got_n;
    unsigned char *got = slurp(path, &got_n);
    assert_int_equal(got_n, n);
    assert_memory_equal(got, want, n);
    free(got);
    assert_no_tmp(path);
}

static void bad_input_is_not_written(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "input.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 10, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *old = slurp(path, &n);

    wgpt_checkpoint b = ck;
    b.config.num_heads = 3;
    assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "num_heads 3"));
    b = ck;
    b.params = NULL;
    assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "params is NULL"));
    b = ck;
    b.adam_v = NULL;
    assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "adam_v is NULL"));
    b = ck;
    b.loader_state = NULL;
    assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "loader_state has length 7"));
    const char *names[] = {"", "has space", "sixteen_chars_xx"};
    for (int i = 0; i < 3; i++) {
        b = ck;
        memset(b.tokenizer, 0, sizeof b.tokenizer);
        memcpy(b.tokenizer, names[i], strlen(names[i]) < 16 ? strlen(names[i]) : 16);
        assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
        assert_non_null(strstr(err, "tokenizer"));
    }
    assert_int_equal(wgpt_checkpoint_write(NULL, &ck, err, sizeof err), -1);
    assert_unchanged(path, old, n);
    // Junk after the name's NUL is not written: the field is NUL-padded.
    b = ck;
    memcpy(b.tokenizer, "gpt2\0junkjunk", 13);
    if (wgpt_checkpoint_write(path, &b, err, sizeof err) != 0) fail_msg("%s", err);
    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    static const char padded[16] = "gpt2";
    assert_memory_equal(back.tokenizer, padded, 16);
    wgpt_checkpoint_free(&back);
    free(old);
    wgpt_checkpoint_free(&ck);
}

// A write that hits the file-size limit at `limit` bytes (as a full disk would).
static int write_with_size_limit(const char *path, const wgpt_checkpoint *ck, rlim_t limit, char *err,
                                 size_t errlen) {
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = limit;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = wgpt_checkpoint_write(path, ck, err, errlen);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    return rc;
}

static void failed_write_keeps_old_checkpoint(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "keep.ckpt");
    wgpt_checkpoint a = make_ck(&SMALL, 11, 1), b = make_ck(&SMALL, 12, 1);
    if (wgpt_checkpoint_write(path, &a, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *old = slurp(path, &n);

    // The disk fills up at various points of the new file: header, blobs, tensors, trailer.
    const rlim_t limits[] = {0, 100, HDR, HDR + 15, n / 2, n - TRL, n - 1};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        err[0] = 0;
        assert_int_equal(write_with_size_limit(path, &b, limits[i], err, sizeof err), -1);
        assert_non_null(strstr(err, path));
        assert_non_null(strstr(err, "left as it was"));
        assert_unchanged(path, old, n);
    }

    // A folder that does not exist.
    char nowhere[256];
    tpath(nowhere, sizeof nowhere, "no/such/folder/x.ckpt");
    assert_int_equal(wgpt_checkpoint_write(nowhere, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, nowhere));
    assert_non_null(strstr(err, "cannot create"));

    // A read-only folder (root ignores permissions, so only as a normal user).
    char ro[256], ro_path[300];
    tpath(ro, sizeof ro, "ro");
    assert_int_equal(mkdir(ro, 0755), 0);
    snprintf(ro_path, sizeof ro_path, "%s/x.ckpt", ro);
    if (wgpt_checkpoint_write(ro_path, &a, err, sizeof err) != 0) fail_msg("%s", err);
    if (geteuid() != 0) {
        assert_int_equal(chmod(ro, 0555), 0);
        assert_int_equal(wgpt_checkpoint_write(ro_path, &b, err, sizeof err), -1);
        assert_non_null(strstr(err, "left as it was"));
        assert_int_equal(chmod(ro, 0755), 0);
        assert_unchanged(ro_path, old, n);
    }

    // A directory where the temp file would go: created by nobody, refused, nothing removed.
    char tmpdir[300];
    snprintf(tmpdir, sizeof tmpdir, "%s.tmp", path);
    assert_int_equal(mkdir(tmpdir, 0755), 0);
    assert_int_equal(wgpt_checkpoint_write(path, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "stale temporary file"));
    assert_int_equal(rmdir(tmpdir), 0);
    assert_unchanged(path, old, n);

    // A directory at path itself: the rename fails and the temp file is removed.
    char dirpath[256];
    tpath(dirpath, sizeof dirpath, "a_dir.ckpt");
    assert_int_equal(mkdir(dirpath, 0755), 0);
    assert_int_equal(wgpt_checkpoint_write(dirpath, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "renaming"));
    assert_no_tmp(dirpath);

    // A stale temp file from a killed writer is simply replaced.
    snprintf(tmpdir, sizeof tmpdir, "%s.tmp", path);
    spit(tmpdir, "half a checkpoint", 17);
    if (wgpt_checkpoint_write(path, &b, err, sizeof err) != 0) fail_msg("%s", err);
    assert_no_tmp(path);
    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    assert_ck_equal(&b, &back);
    wgpt_checkpoint_free(&back);

    free(old);
    wgpt_checkpoint_free(&a);
    wgpt_checkpoint_free(&b);
}

static void overwrite_replaces_atomically(void **state) {
    (void)state;
    char path[256], link_path[256], err[512];
    tpath(path, sizeof path, "over.ckpt");
    tpath(link_path, sizeof link_path, "over_old_link.ckpt");
    wgpt_checkpoint a = make_ck(&SMALL, 13, 1), b = make_ck(&SMALL, 14, 0);
    if (wgpt_checkpoint_write(path, &a, err, sizeof err) != 0) fail_msg("%s", err);
    size_t n;
    unsigned char *old = slurp(path, &n);
    // A second name for the old file: if the writer rewrote path in place, this would change.
    assert_int_equal(link(path, link_path), 0);
    if (wgpt_checkpoint_write(path, &b, err, sizeof err) != 0) fail_msg("%s", err);
    assert_no_tmp(path);
    wgpt_checkpoint back;
    if (wgpt_checkpoint_read(path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    assert_ck_equal(&b, &back);
    wgpt_checkpoint_free(&back);
    assert_unchanged(link_path, old, n);
    if (wgpt_checkpoint_read(link_path, &back, err, sizeof err) != 0) fail_msg("%s", err);
    assert_ck_equal(&a, &back);
    wgpt_checkpoint_free(&back);
    free(old);
    wgpt_checkpoint_free(&a);
    wgpt_checkpoint_free(&b);
}

// ---- a writer killed at random moments ----

static float pattern(uint64_t step, size_t k) {
    return (float)((k * 2654435761u + step) % 100003u) * 1e-5f - 0.5f;
}

// Child: writes ever newer checkpoints (steps first, first+1, ...) until killed.
static void writer_child(const char *path, const wgpt_gpt2_config *c, uint64_t first) {
    alarm(20);  // never outlive a parent that died
    size_t n = wgpt_gpt2_num_params(c);
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = *c;
    strcpy(ck.tokenizer, "gpt2");
    ck.params = malloc(n * 4);
    ck.adam_m = malloc(n * 4);
    ck.adam_v = malloc(n * 4);
    char err[512];
    for (uint64_t step = first;; step++) {
        ck.step = step;
        for (size_t k = 0; k < n; k++) ck.params[k] = ck.adam_m[k] = ck.adam_v[k] = pattern(step, k);
        if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) {
            fprintf(stderr, "writer child: %s\n", err);
            _exit(3);
        }
    }
}

static void killed_writer_leaves_old_or_new(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "kill.ckpt");
    // ~11 MB per checkpoint: long enough to be killed mid-write.
    const wgpt_gpt2_config big = {.max_seq_len = 64, .vocab_size = 1000, .padded_vocab_size = 1024,
                                  .num_layers = 4, .num_heads = 4, .channels = 128};
    size_t n = wgpt_gpt2_num_params(&big);
    uint64_t last_step = 0;
    int seen = 0, mid_write = 0;
    unsigned seed = (unsigned)time(NULL);
    srand(seed);
    for (int round = 0; round < 6; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) writer_child(path, &big, (uint64_t)round * 1000000 + 1);
        // The first kill likely lands before any file exists; later ones once one does (slow disks too).
        struct timespec poll = {0, 2000000L};
        for (int i = 0; round > 0 && !exists(path) && i < 5000; i++) nanosleep(&poll, NULL);
        int ms = round == 0 ? 2 : 1 + rand() % 150;
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) fail_msg("writer child exited by itself");

        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        mid_write += exists(tmp);
        if (!exists(path)) {
            if (seen) fail_msg("round %d (seed %u): %s vanished after a write had completed", round, seed, path);
            continue;
        }
        wgpt_checkpoint ck;
        if (wgpt_checkpoint_read(path, &ck, err, sizeof err) != 0)
            fail_msg("round %d (seed %u): %s", round, seed, err);
        assert_true(ck.step >= last_step);  // old or new, never older
        for (size_t k = 0; k < n; k++)
            if (ck.params[k] != pattern(ck.step, k) || ck.adam_v[k] != pattern(ck.step, k))
                fail_msg("round %d: step %llu element %zu is not that step's value", round,
                         (unsigned long long)ck.step, k);
        last_step = ck.step;
        seen = 1;
        wgpt_checkpoint_free(&ck);
    }
    assert_true(seen);
    print_message("killed a writer 6 times (seed %u); %d kills left a partial kill.ckpt.tmp behind, last step %llu\n",
                  seed, mid_write, (unsigned long long)last_step);
}

// ---- setup ----

static int make_dir(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 32 ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/wgpt_ckpt_XXXXXX", base);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    tu_rm_rf(g_dir);
    return 0;
}


// L13: a disk that fills up before the first checkpoint of a folder says no
// earlier checkpoint exists, not that one "was left as it was".
static void failed_first_write_does_not_promise_an_old_file(void **state) {
    (void)state;
    char path[256], err[512];
    tpath(path, sizeof path, "first.ckpt");
    wgpt_checkpoint b = make_ck(&SMALL, 12, 1);
    assert_int_equal(write_with_size_limit(path, &b, 100, err, sizeof err), -1);
    printf("  %s\n", err);
    assert_non_null(strstr(err, path));
    assert_null(strstr(err, "left as it was"));
    assert_non_null(strstr(err, "no earlier checkpoint"));
    assert_false(exists(path));
    assert_no_tmp(path);
    wgpt_checkpoint_free(&b);
}

// `wgpt info CKPT`: its exit status, stdout+stderr into text.
static int info_(const char *path, char *text, size_t n) {
    char out[300];
    tpath(out, sizeof out, "info.txt");
    fflush(stdout), fflush(stderr);
    int so = dup(1), se = dup(2), fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 1), dup2(fd, 2);
    char *argv[3] = {"info", (char *)path, NULL};
    int rc = wgpt_cmd_info(2, argv);
    fflush(stdout), fflush(stderr);
    dup2(so, 1), dup2(se, 2);
    close(so), close(se), close(fd);
    FILE *f = fopen(out, "r");
    size_t k = fread(text, 1, n - 1, f);
    text[k] = 0;
    fclose(f);
    return rc;
}

// L15: `wgpt info` reads the whole checkpoint: a damaged body is reported as
// damaged (exit 1), a sound one says its checksums were verified.
static void info_verifies_the_body(void **state) {
    (void)state;
    char path[256], err[512], text[4096];
    tpath(path, sizeof path, "info.ckpt");
    wgpt_checkpoint ck = make_ck(&SMALL, 5, 1);
    if (wgpt_checkpoint_write(path, &ck, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(info_(path, text, sizeof text), 0);
    printf("  sound: %s", text);
    assert_non_null(strstr(text, "checksums verified"));
    size_t n;
    unsigned char *b = slurp(path, &n);
    b[HDR + 40] ^= 0x10;  // inside a section, past the header
    spit(path, b, n);
    assert_int_equal(info_(path, text, sizeof text), 1);
    printf("  damaged: %s", text);
    assert_non_null(strstr(text, "checksum mismatch"));
    free(b);
    wgpt_checkpoint_free(&ck);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_is_bit_identical),
        cmocka_unit_test(params_only_export_and_empty_blobs),
        cmocka_unit_test(every_flipped_byte_is_caught),
        cmocka_unit_test(truncations_are_caught),
        cmocka_unit_test(wrong_magic_and_not_a_checkpoint),
        cmocka_unit_test(future_version_is_refused),
        cmocka_unit_test(config_inconsistent_with_sizes),
        cmocka_unit_test(non_finite_tensors_are_named),
        cmocka_unit_test(bad_input_is_not_written),
        cmocka_unit_test(failed_write_keeps_old_checkpoint),
        cmocka_unit_test(overwrite_replaces_atomically),
        cmocka_unit_test(killed_writer_leaves_old_or_new),
        cmocka_unit_test(failed_first_write_does_not_promise_an_old_file),
        cmocka_unit_test(info_verifies_the_body),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, make_dir, remove_dir);
}
