// test_util.h: helpers shared by the test programs (cmocka).
#ifndef WGPT_TEST_UTIL_H
#define WGPT_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "cli/gpu_env.h"
#include "gpu/gpu.h"

// The devices tu_gpu_open opened, for tu_group_teardown.
static wgpt_gpu *tu_gpus[16] __attribute__((unused));
static size_t tu_ngpus __attribute__((unused));

// opt (NULL: the defaults) with the settings of the WGPT_ variables that it
// leaves open, as the CLI reads them (cli/gpu_env.h), or fails the test.
static inline wgpt_gpu_options tu_gpu_options(const wgpt_gpu_options *opt) {
    wgpt_gpu_options o = {.adapter_index = -1};
    if (opt) o = *opt;
    char err[1024];
    if (wgpt_cli_gpu_env(&o, err, sizeof err) < 0) fail_msg("%s", err);
    return o;
}

// Opens a device (NULL: the default one), with the settings of the
// environment as the CLI reads them, or fails the test with the reason.
static inline wgpt_gpu *tu_gpu_open(const wgpt_gpu_options *opt) {
    char err[2048];
    wgpt_gpu_options o = tu_gpu_options(opt);
    wgpt_gpu *g = wgpt_gpu_open(&o, err, sizeof err);
    if (!g) fail_msg("cannot open the GPU: %s", err);
    if (tu_ngpus < sizeof tu_gpus / sizeof tu_gpus[0]) tu_gpus[tu_ngpus++] = g;
    return g;
}

// A group teardown that closes every device tu_gpu_open opened, last first.
// Only for programs that close no device themselves.
static inline int tu_group_teardown(void **state) {
    (void)state;
    while (tu_ngpus) wgpt_gpu_close(tu_gpus[--tu_ngpus]);
    return 0;
}

// Asserts a GPU-layer call succeeded, printing the layer's message if not.
#define TU_OK(g, call)                                                   \
    do {                                                                 \
        if ((call) < 0) fail_msg("%s failed: %s", #call, wgpt_gpu_error(g)); \
    } while (0)
#define TU_NONNULL(g, ptr)                                                 \
    do {                                                                   \
        if (!(ptr)) fail_msg("%s returned NULL: %s", #ptr, wgpt_gpu_error(g)); \
    } while (0)

// Deterministic uniform floats in [lo, hi).
static uint64_t tu_rng_state __attribute__((unused)) = 0x9E3779B97F4A7C15ull;
static inline float tu_randf(float lo, float hi) {
    tu_rng_state ^= tu_rng_state << 13;
    tu_rng_state ^= tu_rng_state >> 7;
    tu_rng_state ^= tu_rng_state << 17;
    return lo + (hi - lo) * (float)((tu_rng_state >> 40) * (1.0 / 16777216.0));
}
static inline void tu_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = tu_randf(lo, hi);
}

// Fails on the first element where |got - want| > atol + rtol * |want|.
static inline void tu_assert_close(const char *what, const float *got, const float *want, size_t n, float atol,
                            float rtol) {
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= atol + rtol * fabsf(want[i])))
            fail_msg("%s: element %zu of %zu is %.9g, expected %.9g (|diff| %.3g > %.3g + %.3g*|expected|)", what, i,
                     n, got[i], want[i], d, atol, rtol);
    }
}

// A storage buffer of `bytes` holding host's bytes (as created where host is NULL).
static inline wgpt_buf *tu_upload(wgpt_gpu *g, const void *host, uint64_t bytes, const char *label) {
    wgpt_buf *b = wgpt_buf_create(g, bytes, label);
    TU_NONNULL(g, b);
    if (host) TU_OK(g, wgpt_buf_upload(g, b, 0, host, bytes));
    return b;
}
static inline wgpt_buf *tu_upload_f32(wgpt_gpu *g, const float *x, uint64_t n, const char *label) {
    return tu_upload(g, x, n * 4, label);
}

// The buffer's first `bytes` in a malloc'd copy the caller frees.
static inline void *tu_download(wgpt_gpu *g, wgpt_buf *b, uint64_t bytes) {
    void *h = malloc(bytes);
    assert_non_null(h);
    TU_OK(g, wgpt_buf_download(g, b, 0, h, bytes));
    return h;
}
static inline float *tu_download_f32(wgpt_gpu *g, wgpt_buf *b, uint64_t n) { return tu_download(g, b, n * 4); }

// The folder of this test program (the build folder, where build/wgpt is):
// 0, or -1 if /proc/self/exe cannot be read or does not fit.
static inline int tu_build_dir(char *buf, size_t n) {
    ssize_t k = n > 1 ? readlink("/proc/self/exe", buf, n - 1) : -1;
    if (k <= 0) return -1;
    buf[k] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash) return -1;
    *slash = 0;
    return 0;
}

// Reads a file of the source tree (tests/kernels/..., kernels/...).
static inline char *tu_read_source(const char *rel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", WGPT_SOURCE_DIR, rel);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

// Removes path: a file, or a folder and everything in it (made writable first).
static inline void tu_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0755);
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[4096];
            int w = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (w > 0 && (size_t)w < sizeof sub) tu_rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

// Calls fn(path, rel, ctx) for every .c and .h file under dir (rel: its
// path from the source root, e.g. "src"), into every folder but those whose
// rel skip (may be NULL) names; returns the sum of fn's results.
static inline int tu_c_files(const char *dir, const char *rel, const char *skip,
                             int (*fn)(const char *path, const char *rel, void *ctx), void *ctx) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int sum = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096], sub[4096];
        int pw = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int sw = snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
        struct stat st;
        if (pw < 0 || (size_t)pw >= sizeof path || sw < 0 || (size_t)sw >= sizeof sub)
            fail_msg("%s/%s: path too long", dir, e->d_name);
        if (stat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (!skip || strcmp(sub, skip) != 0) sum += tu_c_files(path, sub, skip, fn, ctx);
            continue;
        }
        size_t n = strlen(e->d_name);
        if (n < 3 || e->d_name[n - 2] != '.' || (e->d_name[n - 1] != 'c' && e->d_name[n - 1] != 'h')) continue;
        sum += fn(path, sub, ctx);
    }
    closedir(d);
    return sum;
}

typedef struct tu_scalar {
    uint32_t n;
    float c;
} tu_scalar;

#endif
