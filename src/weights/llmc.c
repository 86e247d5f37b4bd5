// llmc.c: llm.c model files (see llmc.h).
#include "weights/llmc.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights/file_out.h"
#include "util/err.h"

static uint32_t le32_(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Names flat element i of the params for a message: "qkvw element 12".
static void locate_(const wgpt_gpt2_config *c, size_t i, char *out, size_t n) {
    size_t s[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(c, s);
    int t = 0;
    while (t < WGPT_GPT2_NUM_TENSORS - 1 && i >= s[t]) i -= s[t++];
    snprintf(out, n, "%s element %zu", wgpt_weights_tensor_names[t], i);
}

// Reads n elements of `width` bytes (4: f32, 2: bf16) from f into dst as floats.
static int read_params_(FILE *f, float *dst, size_t n, unsigned width, const wgpt_gpt2_config *c, const char *path,
                        char *err, size_t errlen) {
    unsigned char buf[1 << 16];
    size_t per = sizeof buf / width;
    for (size_t at = 0; at < n;) {
        size_t k = n - at < per ? n - at : per;
        if (fread(buf, width, k, f) != k) return wgpt_errf(err, errlen, "%s: cannot read its parameters", path);
        for (size_t j = 0; j < k; j++) {
            uint32_t u = width == 4 ? le32_(buf + 4 * j) : (uint32_t)(buf[2 * j] | buf[2 * j + 1] << 8) << 16;
            float v;
            memcpy(&v, &u, 4);
            if (!isfinite(v)) {
                char where[96];
                locate_(c, at + j, where, sizeof where);
                return wgpt_errf(err, errlen, "%s: %s is %s", path, where, isnan(v) ? "NaN" : "Inf");
            }
            dst[at + j] = v;
        }
        at += k;
    }
    return 0;
}

int wgpt_llmc_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    int fd = open(path, O_RDONLY | O_NONBLOCK);  // a FIFO must not hang: refused below
    if (fd < 0) return wgpt_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    FILE *f = NULL;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || !(f = fdopen(fd, "rb"))) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: not a regular file", path);
    }
    unsigned char h[WGPT_LLMC_HEADER_BYTES];
    int rc = -1;
    if (fread(h, 1, sizeof h, f) != sizeof h) {
        wgpt_errf(err, errlen, "%s: shorter than llm.c's 1024-byte header", path);
        goto done;
    }
    uint32_t v[8];
    for (int i = 0; i < 8; i++) v[i] = le32_(h + 4 * i);
    if (v[0] != WGPT_LLMC_MAGIC) {
        wgpt_errf(err, errlen, "%s: magic %u is not llm.c's model magic %u", path, v[0], WGPT_LLMC_MAGIC);
        goto done;
    }
    if (v[1] != 3 && v[1] != 5) {
        wgpt_errf(err, errlen, "%s: llm.c model version %u; wgpt reads version 3 (fp32) and 5 (bf16)", path, v[1]);
        goto done;
    }
    for (int i = 2; i < 8; i++)
        if (v[i] > INT32_MAX) {
            wgpt_errf(err, errlen, "%s: header field %d is negative", path, i);
            goto done;
        }
    w->config = (wgpt_gpt2_config){.max_seq_len = v[2], .vocab_size = v[3], .padded_vocab_size = v[7],
                                   .num_layers = v[4], .num_heads = v[5], .channels = v[6]};
    if (wgpt_weights_check_config(&w->config, path, err, errlen) < 0) goto done;
    unsigned width = v[1] == 3 ? 4 : 2;
    size_t n = wgpt_gpt2_num_params(&w->config);
    if ((uint64_t)sb.st_size != WGPT_LLMC_HEADER_BYTES + (uint64_t)n * width) {
        wgpt_errf(err, errlen, "%s: %lld bytes, but its header's model (%zu parameters of %u bytes) needs %llu", path,
              (long long)sb.st_size, n, width, (unsigned long long)(WGPT_LLMC_HEADER_BYTES + (uint64_t)n * width));
        goto done;
    }
    if (with_params) {
        if (!(w->params = malloc(n * sizeof *w->params))) {
            wgpt_errf(err, errlen, "%s: out of host memory for %zu parameters", path, n);
            goto done;
        }
        if (read_params_(f, w->params, n, width, &w->config, path, err, errlen) < 0) goto done;
    }
    snprintf(w->tokenizer, sizeof w->tokenizer, "%s", wgpt_weights_tokenizer_for(w->config.vocab_size));
    snprintf(w->format, sizeof w->format, "llm.c model file, version %u (%s)", v[1], width == 4 ? "fp32" : "bf16");
    rc = 0;
done:
    fclose(f);
    if (rc < 0) wgpt_weights_free(w);
    return rc;
}

int wgpt_llmc_write(const char *path, const wgpt_weights *w, char *err, size_t errlen) {
    const wgpt_gpt2_config *c = &w->config;
    if (!w->params) return wgpt_errf(err, errlen, "%s: no parameters to write", path);
    const uint32_t fields[8] = {WGPT_LLMC_MAGIC, 3, c->max_seq_len, c->vocab_size, c->num_layers, c->num_heads,
                                c->channels, c->padded_vocab_size};
    unsigned char h[WGPT_LLMC_HEADER_BYTES] = {0};
    for (int i = 0; i < 8; i++)
        for (int b = 0; b < 4; b++) h[4 * i + b] = (unsigned char)(fields[i] >> (8 * b));
    wgpt_file_out o;
    if (wgpt_file_out_begin(&o, path, err, errlen) < 0) return -1;
    wgpt_file_out_write(&o, h, sizeof h);
    wgpt_file_out_floats(&o, w->params, wgpt_gpt2_num_params(c));
    return wgpt_file_out_finish(&o, err, errlen);
}
