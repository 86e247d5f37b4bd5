// fuzz_util.h: what the libFuzzer targets share: a failed-invariant abort that
// says what broke, a private scratch folder for the files the readers under
// test open, and little-endian field helpers. Header-only (static inline):
// each target is one translation unit plus the host sources it exercises.
#ifndef WGPT_FUZZ_UTIL_H
#define WGPT_FUZZ_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>  // defines: __sanitizer_report_error_summary

// An invariant of the code under test does not hold: say why and abort, so
// that libFuzzer saves the input as a crash artifact.
#define FUZZ_CHECK(cond, ...)                                           \
    do {                                                                \
        if (!(cond)) fuzz_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

// The message goes where the sanitizers report (libFuzzer keeps that open
// under -close_fd_mask=3, which silences the code under test).
static inline void fuzz_fail_(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
static inline void fuzz_fail_(const char *file, int line, const char *cond, const char *fmt, ...) {
    char msg[4096];
    int k = snprintf(msg, sizeof msg, "%s:%d: fuzz invariant failed: %s\n  ", file, line, cond);
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof msg) vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    __sanitizer_report_error_summary(msg);
    abort();
}

// ---- scratch folder: one per process, removed at exit ----

static char fuzz_dir_[256];
static char fuzz_paths_[8][320];  // files made in it, for the cleanup
static int fuzz_npaths_;

static inline void fuzz_cleanup_(void) {
    for (int i = 0; i < fuzz_npaths_; i++) unlink(fuzz_paths_[i]);
    if (fuzz_dir_[0]) rmdir(fuzz_dir_);
}

// The path of `name` inside the scratch folder (made on first use, in /dev/shm
// when there is one: the targets write a file per input). The string is
// static; each name gets its own slot, at most 8 names per process.
static inline const char *fuzz_path(const char *name) {
    if (!fuzz_dir_[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_, sizeof fuzz_dir_, "%s/wgpt_fuzz_XXXXXX", base);
        if (!mkdtemp(fuzz_dir_)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_cleanup_);
    }
    for (int i = 0; i < fuzz_npaths_; i++) {
        const char *slash = strrchr(fuzz_paths_[i], '/');
        if (strcmp(slash + 1, name) == 0) return fuzz_paths_[i];
    }
    if (fuzz_npaths_ == 8) {
        fprintf(stderr, "fuzz: more than 8 scratch file names\n");
        abort();
    }
    snprintf(fuzz_paths_[fuzz_npaths_], sizeof fuzz_paths_[0], "%s/%s", fuzz_dir_, name);
    return fuzz_paths_[fuzz_npaths_++];
}

// Replaces the file at path with data[0, size). A harness failure (disk full)
// aborts: it is not a finding but must not pass for one either.
static inline void fuzz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

// Reads a whole file into a malloc'ed buffer (*size bytes). Aborts on failure.
static inline unsigned char *fuzz_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        perror(path);
        abort();
    }
    long n = ftell(f);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (n < 0 || !b || fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        abort();
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

static inline uint32_t fuzz_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fuzz_le64(const uint8_t *p) { return (uint64_t)fuzz_le32(p) | (uint64_t)fuzz_le32(p + 4) << 32; }
static inline void fuzz_put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
