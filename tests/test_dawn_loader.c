// test_dawn_loader.c: finding and checking Dawn at run time (src/gpu/dawn_loader.c).
// Each bad file is refused with a message naming it and what is wrong, and
// leaves nothing loaded, so the real dawn.node still loads afterwards; the
// loaded build then names its own feature values as dawn_api.h declares them.
#define _GNU_SOURCE
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/dawn_loader.h"
#include "test_util.h"

static char dawn_[4096], tmp_[256];

static int group_setup(void **state) {
    (void)state;
    char self[3000];
    if (tu_build_dir(self, sizeof self) < 0) return -1;
    snprintf(dawn_, sizeof dawn_, "%s/../third_party/dawn/dawn.node", self);
    snprintf(tmp_, sizeof tmp_, "/tmp/wgpt-test-dawn-XXXXXX");
    return mkdtemp(tmp_) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_);
    return system(cmd) == 0 ? 0 : -1;
}

static unsigned char *read_all_(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s (run scripts/setup.sh)", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_all_(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void sha256_(const void *b, size_t n, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    assert_true(EVP_Digest(b, n, md, &len, EVP_sha256(), NULL));
    for (unsigned i = 0; i < len; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

// Fails unless loading path is refused with a message holding both parts.
static void refused_(const char *path, const char *pin, const char *part1, const char *part2) {
    char err[2048] = "";
    if (wgpt_dawn_load_file_(path, pin, err, sizeof err) == 0) fail_msg("%s was accepted", path);
    printf("refused: %s\n", err);
    if (!strstr(err, part1) || (part2 && !strstr(err, part2)))
        fail_msg("message for %s lacks '%s'/'%s': %s", path, part1, part2 ? part2 : "", err);
    assert_string_equal(wgpt_dawn_loaded_(), "");
}

static void missing_file(void **st) {
    (void)st;
    char p[400];
    snprintf(p, sizeof p, "%s/no-such-dawn.node", tmp_);
    refused_(p, NULL, p, "scripts/setup.sh");
}

static void not_elf_and_not_regular(void **st) {
    (void)st;
    char p[400];
    snprintf(p, sizeof p, "%s/text.node", tmp_);
    const char text[] = "this is not a shared library, but it is long enough to hold an ELF header or two\n";
    write_all_(p, text, sizeof text);
    refused_(p, NULL, p, "not an x86-64 ELF");
    snprintf(p, sizeof p, "%s/short.node", tmp_);
    write_all_(p, "\x7f" "ELF", 4);
    refused_(p, NULL, p, "not an ELF");
    snprintf(p, sizeof p, "%s/fifo.node", tmp_);
    assert_int_equal(mkfifo(p, 0600), 0);
    refused_(p, NULL, p, "not a regular file");  // and does not block in open()
    refused_(tmp_, NULL, tmp_, "not a regular file");
}

// One flipped byte: the file is no longer the pinned build, whose symbols we know.
static void wrong_sha(void **st) {
    (void)st;
    size_t n;
    unsigned char *b = read_all_(dawn_, &n);
    b[n / 2] ^= 0x55;
    char p[400], got[65];
    snprintf(p, sizeof p, "%s/flipped.node", tmp_);
    write_all_(p, b, n);
    sha256_(b, n, got);
    refused_(p, NULL, got, WGPT_DAWN_NODE_SHA256);
    free(b);
}

// The pinned build with one symbol's name changed in its string table, pinned by
// its own hash so that the loader gets as far as looking the symbol up.
static void missing_symbol(void **st) {
    (void)st;
    static const char *const names[] = {"_ZN4dawn6native8GetProcsEv", "dawnProcSetProcs"};
    for (size_t s = 0; s < 2; s++) {
        size_t n, hits = 0, len = strlen(names[s]);
        unsigned char *b = read_all_(dawn_, &n);
        for (unsigned char *q = b; (q = memmem(q, n - (size_t)(q - b), names[s], len)) != NULL; q += len) {
            if (q[len] != 0) continue;  // only whole names
            q[len - 1] ^= 0x20;        // "...Ev" -> "...EV"
            hits++;
        }
        assert_true(hits >= 1);
        char p[400], pin[65];
        snprintf(p, sizeof p, "%s/renamed%zu.node", tmp_, s);
        write_all_(p, b, n);
        sha256_(b, n, pin);
        refused_(p, pin, p, names[s]);
        free(b);
    }
    // a shared library that exports no C API and is not the pinned addon
    refused_("/lib/x86_64-linux-gnu/libz.so.1", NULL, "libz.so.1", "sha256");
}

static void pinned_build_loads_and_names_its_features(void **st) {
    (void)st;
    char err[2048];
    if (wgpt_dawn_load_(NULL, err, sizeof err) < 0) fail_msg("%s", err);
    printf("loaded: %s\n", wgpt_dawn_loaded_());
    assert_non_null(strstr(wgpt_dawn_loaded_(), "dawn.node (Dawn 77f9a9aa5f71)"));
    int checked = 0;
    if (wgpt_dawn_check_features_(&checked, err, sizeof err) < 0) fail_msg("%s", err);
    assert_int_equal(checked, 5);  // every WGPUFeatureName value dawn_api.h declares
    assert_int_equal(wgpt_dawn_load_file_(dawn_, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "already loaded"));
    assert_int_equal(wgpt_dawn_load_(NULL, err, sizeof err), 0);  // the first result stands
}

// WGPT_DAWN_LIB names the file; a bad one is an error naming it and the variable.
static void env_names_the_library(void **st) {
    (void)st;
    char self[3000], cmd[4000];
    assert_int_equal(tu_build_dir(self, sizeof self), 0);
    snprintf(cmd, sizeof cmd, "WGPT_DAWN_LIB=%s/nope.so '%s/wgpt' info 2>&1", tmp_, self);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char out[4096] = "";
    size_t got = fread(out, 1, sizeof out - 1, f);
    out[got] = 0;
    int status = pclose(f);
    printf("%s", out);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    assert_non_null(strstr(out, "nope.so"));
    assert_non_null(strstr(out, "WGPT_DAWN_LIB"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(missing_file),
        cmocka_unit_test(not_elf_and_not_regular),
        cmocka_unit_test(wrong_sha),
        cmocka_unit_test(missing_symbol),
        cmocka_unit_test(pinned_build_loads_and_names_its_features),
        cmocka_unit_test(env_names_the_library),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
