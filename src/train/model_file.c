// model_file.c: any model file -> wgpt_weights (see model_file.h).
#include "train/model_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "weights/hf_gpt2.h"
#include "weights/llmc.h"

static int from_checkpoint_(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen) {
    wgpt_checkpoint ck;
    int rc = with_params ? wgpt_checkpoint_read(path, &ck, err, errlen) : wgpt_checkpoint_peek(path, &ck, err, errlen);
    if (rc < 0) return -1;
    w->config = ck.config;
    w->step = ck.step;
    snprintf(w->tokenizer, sizeof w->tokenizer, "%s", ck.tokenizer);
    snprintf(w->format, sizeof w->format, "wgpt checkpoint");
    w->params = ck.params;  // taken over; the rest is freed
    ck.params = NULL;
    wgpt_checkpoint_free(&ck);
    return 0;
}

int wgpt_model_file_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    struct stat sb;
    if (stat(path, &sb) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(sb.st_mode)) return wgpt_hf_gpt2_read(path, with_params, w, err, errlen);
    unsigned char head[8] = {0};
    int fd = open(path, O_RDONLY | O_NONBLOCK);  // a FIFO must not hang the open
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: %s", path,
                 fd < 0 ? strerror(errno)
                 : S_ISFIFO(sb.st_mode) ? "a FIFO, not a model file (a regular file or a folder)"
                                        : "not a regular file or a folder");
        if (fd >= 0) close(fd);
        return -1;
    }
    ssize_t got = read(fd, head, sizeof head);
    close(fd);
    if (got == (ssize_t)sizeof head && memcmp(head, "WGPTCKPT", 8) == 0)
        return from_checkpoint_(path, with_params, w, err, errlen);
    uint32_t magic = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24;
    if (got >= 4 && magic == WGPT_LLMC_MAGIC) return wgpt_llmc_read(path, with_params, w, err, errlen);
    uint64_t hlen = magic | (uint64_t)(head[4] | head[5] << 8 | head[6] << 16 | (uint32_t)head[7] << 24) << 32;
    if (got < (ssize_t)sizeof head || hlen < 2 || hlen > (uint64_t)sb.st_size) {
        snprintf(err, errlen,
                 "%s: not a model file wgpt reads (a wgpt checkpoint, a Hugging Face GPT-2 folder or .safetensors "
                 "file, an llm.c model .bin)",
                 path);
        return -1;
    }
    return wgpt_hf_gpt2_read(path, with_params, w, err, errlen);
}
