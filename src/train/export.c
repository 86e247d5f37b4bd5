// export.c: any model file -> Hugging Face or llm.c files (see export.h).
#include "train/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/model_file.h"
#include "util/err.h"
#include "weights/hf_gpt2.h"
#include "weights/llmc.h"

// Whether a and b name the same file (symlinks followed, hard links too).
static int same_file_(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// The input's files: itself, and in a folder its model.safetensors and config.json.
static int is_input_(const char *in, const char *path) {
    char sub[4200];
    if (same_file_(in, path)) return 1;
    snprintf(sub, sizeof sub, "%s/model.safetensors", in);
    if (same_file_(sub, path)) return 1;
    snprintf(sub, sizeof sub, "%s/config.json", in);
    return same_file_(sub, path);
}

// An existing file export would replace: never the input, never anything but
// a regular file, and (llmc) another kind of file only with force.
static int check_target_(const char *in, const char *path, int llmc, int force, char *err, size_t errlen) {
    struct stat sb;
    if (stat(path, &sb) < 0) return errno == ENOENT ? 0 : wgpt_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (is_input_(in, path))
        return wgpt_errf(err, errlen, "--out %s is the model being exported (%s): choose another path", path, in);
    if (!S_ISREG(sb.st_mode))
        return wgpt_errf(err, errlen, "%s exists and is %s, not a regular file: export replaces only files",
                         path, S_ISDIR(sb.st_mode) ? "a folder" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                                                  : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                                                : "something else");
    if (!llmc || force) return 0;
    unsigned char h[4] = {0};
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    ssize_t got = fd >= 0 ? read(fd, h, 4) : -1;
    if (fd >= 0) close(fd);
    uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    if (got == 4 && magic == WGPT_LLMC_MAGIC) return 0;  // an earlier export: replaced
    return wgpt_errf(err, errlen, "%s exists and is not an llm.c model file%s: pass --force to replace it", path,
                     got >= 4 && memcmp(h, "WGPT", 4) == 0 ? " (a wgpt checkpoint)" : "");
}

int wgpt_export(const char *in, const char *format, const char *out, int force, char *err, size_t errlen) {
    int hf = strcmp(format, "hf") == 0;
    if (!hf && strcmp(format, "llmc") != 0) {
        snprintf(err, errlen, "unknown export format '%s' (hf or llmc)", format);
        return -1;
    }
    if (!hf && check_target_(in, out, 1, force, err, errlen) < 0) return -1;
    if (hf) {
        struct stat sb;
        char sub[4200];
        if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return wgpt_errf(err, errlen, "%s exists and is not a folder: --format hf writes a folder", out);
        if (stat(out, &sb) == 0 && is_input_(in, out))
            return wgpt_errf(err, errlen, "--out %s is the model being exported (%s): choose another folder", out, in);
        const char *names[2] = {"config.json", "model.safetensors"};
        for (int i = 0; i < 2; i++) {
            snprintf(sub, sizeof sub, "%s/%s", out, names[i]);
            if (check_target_(in, sub, 0, force, err, errlen) < 0) return -1;
        }
    }
    wgpt_weights w;
    if (wgpt_model_file_read(in, 1, &w, err, errlen) < 0) return -1;
    int rc = hf ? wgpt_hf_gpt2_write(out, &w, err, errlen) : wgpt_llmc_write(out, &w, err, errlen);
    wgpt_weights_free(&w);
    return rc;
}
