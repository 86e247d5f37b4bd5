// test_shard.c: token shards (llm.c's format) without a GPU: round trips
// through the whole-shard and the piecewise writer, the exact byte layout, and
// every malformed file the reader must refuse with both numbers named.
#include "test_util.h"

#include <dirent.h>
#include <unistd.h>

#include "data/shard.h"

static char dir_[256];

static int make_dir_(void **state) {
    (void)state;
    snprintf(dir_, sizeof dir_, "/tmp/wgpt_test_shard_XXXXXX");
    return mkdtemp(dir_) ? 0 : -1;
}

static int remove_dir_(void **state) {
    (void)state;
    DIR *d = opendir(dir_);
    if (!d) return -1;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir_, e->d_name);
            unlink(p);
        }
    closedir(d);
    return rmdir(dir_);
}

static const char *path_(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir_, name);
    return p[k];
}

static long file_size_(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

// A file with a hand-made header: magic, version, count, then `body` bytes.
static void write_raw_(const char *path, int32_t magic, int32_t version, int32_t count, size_t body) {
    unsigned char h[1024] = {0};
    int32_t v[3] = {magic, version, count};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) h[4 * i + b] = (unsigned char)((uint32_t)v[i] >> (8 * b));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(h, 1, sizeof h, f), sizeof h);
    for (size_t i = 0; i < body; i++) fputc((int)(i * 7 & 0xff), f);
    fclose(f);
}

static void round_trip(void **state) {
    (void)state;
    enum { N = 5000 };
    uint16_t *tok = malloc(N * sizeof *tok);
    for (size_t i = 0; i < N; i++) tok[i] = (uint16_t)(tu_randf(0, 65536));
    tok[0] = 0;
    tok[1] = 65535;
    tok[N - 1] = 50256;
    char err[512];
    const char *p = path_("rt.bin");
    assert_int_equal(wgpt_shard_write(p, tok, N, err, sizeof err), 0);
    assert_int_equal(file_size_(p), 1024 + 2 * N);
    assert_int_equal(file_size_(path_("rt.bin.tmp")), -1);  // renamed away

    // The bytes themselves, as llm.c writes them: little-endian everywhere.
    FILE *f = fopen(p, "rb");
    unsigned char raw[1030];
    assert_int_equal(fread(raw, 1, sizeof raw, f), sizeof raw);
    fclose(f);
    const unsigned char head[12] = {136, 216, 52, 1, 1, 0, 0, 0, N & 0xff, N >> 8, 0, 0};  // 20240520, 1, N
    assert_memory_equal(raw, head, sizeof head);
    for (int i = 12; i < 1024; i++) assert_int_equal(raw[i], 0);
    assert_int_equal(raw[1024], 0);
    assert_int_equal(raw[1026], 0xff);
    assert_int_equal(raw[1027], 0xff);
    assert_int_equal(raw[1028], tok[2] & 0xff);
    assert_int_equal(raw[1029], tok[2] >> 8);

    wgpt_shard s;
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), 0);
    assert_int_equal(s.n, N);
    assert_memory_equal(s.tokens, tok, N * sizeof *tok);
    assert_string_equal(s.path, p);
    wgpt_shard_close(&s);
    wgpt_shard_close(&s);  // twice is harmless

    // Overwriting an existing shard replaces it.
    assert_int_equal(wgpt_shard_write(p, tok + 10, 3, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 3);
    assert_memory_equal(s.tokens, tok + 10, 3 * sizeof *tok);
    wgpt_shard_close(&s);
    free(tok);
}

static void piecewise_writer_matches_whole(void **state) {
    (void)state;
    enum { N = 3001 };
    uint16_t tok[N];
    for (size_t i = 0; i < N; i++) tok[i] = (uint16_t)(i * 31 + 7);
    char err[512];
    wgpt_shard_writer w;
    const char *p = path_("pieces.bin");
    assert_int_equal(wgpt_shard_writer_begin(&w, p, NULL, err, sizeof err), 0);
    // Nothing at the path until finish.
    assert_int_equal(file_size_(p), -1);
    size_t done = 0;
    for (size_t k = 1; done < N; k *= 3) {
        size_t m = k < N - done ? k : N - done;
        assert_int_equal(wgpt_shard_writer_append(&w, tok + done, m, err, sizeof err), 0);
        done += m;
    }
    assert_int_equal(wgpt_shard_writer_append(&w, tok, 0, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_finish(&w, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_write(path_("whole.bin"), tok, N, err, sizeof err), 0);

    wgpt_shard a, b;
    assert_int_equal(wgpt_shard_open(p, &a, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_open(path_("whole.bin"), &b, err, sizeof err), 0);
    assert_int_equal(a.map_len, b.map_len);
    assert_memory_equal(a.map, b.map, a.map_len);
    wgpt_shard_close(&a);
    wgpt_shard_close(&b);

    // Abort leaves neither the shard nor the .tmp.
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("aborted.bin"), NULL, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_append(&w, tok, 10, err, sizeof err), 0);
    wgpt_shard_writer_abort(&w);
    wgpt_shard_writer_abort(&w);
    assert_int_equal(file_size_(path_("aborted.bin")), -1);
    assert_int_equal(file_size_(path_("aborted.bin.tmp")), -1);
}

static void empty_shard(void **state) {
    (void)state;
    char err[512];
    const char *p = path_("empty.bin");
    assert_int_equal(wgpt_shard_write(p, NULL, 0, err, sizeof err), 0);
    assert_int_equal(file_size_(p), 1024);
    wgpt_shard s;
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 0, 1, err, sizeof err), 0);
    wgpt_shard_close(&s);
}

static void expect_open_error_(const char *p, const char *const *needles) {
    wgpt_shard s;
    char err[512] = "";
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), -1);
    assert_null(s.tokens);
    wgpt_shard_close(&s);  // safe after a failed open
    if (!strstr(err, p)) fail_msg("error does not name the file %s: %s", p, err);
    for (int i = 0; needles[i]; i++)
        if (!strstr(err, needles[i])) fail_msg("error lacks \"%s\": %s", needles[i], err);
}

static void wrong_magic_and_version(void **state) {
    (void)state;
    write_raw_(path_("magic.bin"), 20240521, 1, 4, 8);
    expect_open_error_(path_("magic.bin"), (const char *const[]){"magic", "20240521", "20240520", NULL});
    write_raw_(path_("version.bin"), 20240520, 2, 4, 8);
    expect_open_error_(path_("version.bin"), (const char *const[]){"version 2", NULL});
    // (llm.c uses version 2 for uint32 tokens, LLaMA 3; 0 is simply wrong.)
    write_raw_(path_("v0.bin"), 20240520, 0, 4, 8);
    expect_open_error_(path_("v0.bin"), (const char *const[]){"version 0", NULL});
}

static void count_disagrees_with_size(void **state) {
    (void)state;
    // Truncated: the header promises 100 tokens, 90 are there.
    write_raw_(path_("short.bin"), 20240520, 1, 100, 180);
    expect_open_error_(path_("short.bin"), (const char *const[]){"100 tokens", "90 tokens", "1204 bytes", NULL});
    // More tokens than the header says.
    write_raw_(path_("long.bin"), 20240520, 1, 10, 40);
    expect_open_error_(path_("long.bin"), (const char *const[]){"10 tokens", "20 tokens", NULL});
    // An odd byte count.
    write_raw_(path_("odd.bin"), 20240520, 1, 10, 21);
    expect_open_error_(path_("odd.bin"), (const char *const[]){"10 tokens", "stray byte", NULL});
    // Negative count.
    write_raw_(path_("neg.bin"), 20240520, 1, -5, 0);
    expect_open_error_(path_("neg.bin"), (const char *const[]){"-5", NULL});
}

static void shorter_than_header_and_missing(void **state) {
    (void)state;
    FILE *f = fopen(path_("tiny.bin"), "wb");
    fputs("hello", f);
    fclose(f);
    expect_open_error_(path_("tiny.bin"), (const char *const[]){"5 bytes", "1024", NULL});
    expect_open_error_(path_("missing.bin"), (const char *const[]){"cannot open", NULL});
    expect_open_error_(dir_, (const char *const[]){"not a regular file", NULL});
}

static void tokens_beyond_vocab(void **state) {
    (void)state;
    uint16_t tok[100];
    for (int i = 0; i < 100; i++) tok[i] = (uint16_t)(i * 9 % 1000);  // all < 1000
    tok[64] = 999;
    char err[512];
    const char *p = path_("vocab.bin");
    assert_int_equal(wgpt_shard_write(p, tok, 100, err, sizeof err), 0);
    wgpt_shard s;
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 100, 1000, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 100, 65536, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 100, 999, err, sizeof err), -1);
    assert_non_null(strstr(err, p));
    assert_non_null(strstr(err, "token 999 at position 64"));
    assert_non_null(strstr(err, "vocabulary size 999"));
    // Only the requested range is checked; the first bad one is reported.
    assert_int_equal(wgpt_shard_check_vocab(&s, 65, 100, 999, err, sizeof err), 0);
    wgpt_shard_close(&s);
    tok[70] = 60000;
    assert_int_equal(wgpt_shard_write(p, tok, 100, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_open(p, &s, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 100, 50257, err, sizeof err), -1);
    assert_non_null(strstr(err, "token 60000 at position 70"));
    assert_int_equal(wgpt_shard_check_vocab(&s, 0, 101, 50257, err, sizeof err), -1);  // past the end
    assert_non_null(strstr(err, "outside"));
    wgpt_shard_close(&s);
}

static void write_errors_name_the_file(void **state) {
    (void)state;
    char err[512];
    uint16_t t = 1;
    const char *p = path_("no_such_dir/x.bin");
    assert_int_equal(wgpt_shard_write(p, &t, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, p));
    wgpt_shard_writer w;
    assert_int_equal(wgpt_shard_writer_begin(&w, path_("limit.bin"), NULL, err, sizeof err), 0);
    w.n = WGPT_SHARD_MAX_TOKENS - 1;  // pretend it is nearly full: the header count is an int32
    assert_int_equal(wgpt_shard_writer_append(&w, &t, 1, err, sizeof err), 0);
    assert_int_equal(wgpt_shard_writer_append(&w, &t, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "2147483647"));
    wgpt_shard_writer_abort(&w);
    assert_int_equal(file_size_(path_("limit.bin.tmp")), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(piecewise_writer_matches_whole),
        cmocka_unit_test(empty_shard),
        cmocka_unit_test(wrong_magic_and_version),
        cmocka_unit_test(count_disagrees_with_size),
        cmocka_unit_test(shorter_than_header_and_missing),
        cmocka_unit_test(tokens_beyond_vocab),
        cmocka_unit_test(write_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, make_dir_, remove_dir_);
}
