// checkpoint.c: writing and reading checkpoint files (the format is in
// checkpoint.h). Writes go to path.tmp and are renamed over path only once
// they are complete and on disk; reads trust nothing in the file until its
// checksums and sizes agree.
#include "train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>  // defines: crc32, crc32_combine

#include "util/err.h"
#include "util/fs.h"

enum { HEADER_SIZE = 144, HEADER_CRC_AT = 140, TRAILER_SIZE = 32, NSECT = 5 };
enum { S_OPTS, S_LOADER, S_PARAMS, S_ADAM_M, S_ADAM_V };

static const char MAGIC[8] = {'W', 'G', 'P', 'T', 'C', 'K', 'P', 'T'};
static const char END_MARK[8] = "WGPTEND";  // with its NUL: 8 bytes
static const char *const SECT_NAME[NSECT] = {"train_opts", "loader_state", "params", "adam_m", "adam_v"};
// model/gpt2.h's reference order.
static const char *const TENSOR_NAME[WGPT_GPT2_NUM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

typedef unsigned long long ull;  // for printf

// ---- little-endian fields, checked arithmetic, CRC ----

static void put_u32_(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64_(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32_(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64_(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static int host_le_(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}
// Byte-swaps n floats in place (big-endian hosts only: the file is little-endian).
static void swap_floats_(float *x, uint64_t n) {
    unsigned char *b = (unsigned char *)x;
    for (uint64_t i = 0; i < n; i++, b += 4) {
        unsigned char t0 = b[0], t1 = b[1];
        b[0] = b[3], b[1] = b[2], b[2] = t1, b[3] = t0;
    }
}

static int mul_(uint64_t a, uint64_t b, uint64_t *r) {
    if (a && b > UINT64_MAX / a) return -1;
    *r = a * b;
    return 0;
}
static int add_(uint64_t a, uint64_t b, uint64_t *r) {
    if (b > UINT64_MAX - a) return -1;
    *r = a + b;
    return 0;
}

// zlib's crc32 takes a 32-bit length: feed large sections in pieces.
static uint32_t crc_(uint32_t crc, const void *p, uint64_t n) {
    const unsigned char *b = p;
    while (n) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, k);
        b += k;
        n -= k;
    }
    return crc;
}
static uint32_t crc_combine_(uint32_t a, uint32_t b, uint64_t len_b) {
    return (uint32_t)crc32_combine(a, b, (z_off_t)len_b);
}

// ---- validation shared by writer and reader ----

// Checks a config and returns its parameter count in *floats. Refuses zeros,
// C % NH != 0, V > Vp and any size whose bytes would overflow size_t, so that
// a damaged header can never lead to a wrapped allocation size.
static int config_floats_(const wgpt_gpt2_config *c, uint64_t *floats, char *msg, size_t msglen) {
    const uint32_t f[6] = {c->max_seq_len, c->vocab_size, c->padded_vocab_size,
                           c->num_layers,  c->num_heads,  c->channels};
    const char *names[6] = {"max_seq_len", "vocab_size", "padded_vocab_size", "num_layers", "num_heads", "channels"};
    for (int i = 0; i < 6; i++)
        if (f[i] == 0) return wgpt_errf(msg, msglen, "config %s is 0 (must be >= 1)", names[i]);
    if (c->channels % c->num_heads)
        return wgpt_errf(msg, msglen, "config channels %u is not a multiple of num_heads %u", c->channels, c->num_heads);
    if (c->vocab_size > c->padded_vocab_size)
        return wgpt_errf(msg, msglen, "config vocab_size %u exceeds padded_vocab_size %u", c->vocab_size,
                     c->padded_vocab_size);
    // Vp*C + maxT*C + L*(12*C*C + 13*C) + 2*C (see model/gpt2.h's tensor list)
    uint64_t C = c->channels, a, b, layer, n;
    int bad = mul_(C, C, &a) || mul_(a, 12, &a) || mul_(C, 13, &b) || add_(a, b, &layer) ||
              mul_(layer, c->num_layers, &n) || mul_(C, (uint64_t)c->padded_vocab_size + c->max_seq_len + 2, &a) ||
              add_(n, a, &n) || n > SIZE_MAX / 4 || n > UINT64_MAX / 4;
    if (bad)
        return wgpt_errf(msg, msglen,
                     "config (maxT=%u, Vp=%u, L=%u, C=%u) has more parameters than this machine can address",
                     c->max_seq_len, c->padded_vocab_size, c->num_layers, c->channels);
    if ((uint64_t)wgpt_gpt2_num_params(c) != n)  // the model's own count must agree with the format's
        return wgpt_errf(msg, msglen, "config parameter count %llu disagrees with the model's %zu (a wgpt bug)",
                     (ull)n, wgpt_gpt2_num_params(c));
    *floats = n;
    return 0;
}

// The name field holds 1..15 printable ASCII characters then NULs only.
static int tokenizer_ok_(const char t[WGPT_CHECKPOINT_TOKENIZER_MAX], int strict_padding) {
    size_t n = 0;
    while (n < WGPT_CHECKPOINT_TOKENIZER_MAX && t[n]) {
        if (t[n] < 0x21 || t[n] > 0x7e) return 0;
        n++;
    }
    if (n == 0 || n == WGPT_CHECKPOINT_TOKENIZER_MAX) return 0;
    for (size_t i = n; strict_padding && i < WGPT_CHECKPOINT_TOKENIZER_MAX; i++)
        if (t[i]) return 0;
    return 1;
}

// Describes flat element `at` of a params-shaped array: "qkvw, layer 2, element 17 of 768".
static void locate_(const wgpt_gpt2_config *c, uint64_t at, char *out, size_t outlen) {
    size_t s[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(c, s);
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        if (at >= s[t]) {
            at -= s[t];
            continue;
        }
        int layered = t >= 2 && t <= 13;  // ln1w .. fcprojb are (L, ...)
        if (layered) {
            uint64_t per = s[t] / c->num_layers;
            snprintf(out, outlen, "%s, layer %llu, element %llu of %llu", TENSOR_NAME[t], (ull)(at / per),
                     (ull)(at % per), (ull)per);
        } else {
            snprintf(out, outlen, "%s, element %llu of %zu", TENSOR_NAME[t], (ull)at, s[t]);
        }
        return;
    }
    snprintf(out, outlen, "past the last tensor");
}

// Returns 0 if x holds only finite floats, else -1 with msg naming the first bad one.
static int finite_(const wgpt_gpt2_config *c, const char *what, const float *x, uint64_t n, char *msg,
                   size_t msglen) {
    for (uint64_t i = 0; i < n; i++) {
        if (isfinite(x[i])) continue;
        char where[128];
        locate_(c, i, where, sizeof where);
        return wgpt_errf(msg, msglen, "%s element %llu (%s) is %s", what, (ull)i, where, isnan(x[i]) ? "NaN" : "Inf");
    }
    return 0;
}

// ---- writing ----

typedef struct writer_ {
    FILE *f;
    uint64_t done;  // bytes written so far
    int errnum;     // errno of the first failure; 0 while all is well
} writer_;

// Writes n bytes (unless an earlier write failed) and returns crc extended over them.
static uint32_t put_(writer_ *w, uint32_t crc, const void *p, uint64_t n) {
    if (w->errnum || n == 0) return crc;
    errno = 0;
    if (fwrite(p, 1, (size_t)n, w->f) != n) {
        w->errnum = errno ? errno : EIO;
        return crc;
    }
    w->done += n;
    return crc_(crc, p, n);
}

static uint32_t put_floats_(writer_ *w, uint32_t crc, const float *x, uint64_t n) {
    if (host_le_()) return put_(w, crc, x, n * 4);
    float buf[1024];
    for (uint64_t i = 0; i < n; i += 1024) {
        uint64_t k = n - i < 1024 ? n - i : 1024;
        memcpy(buf, x + i, k * 4);
        swap_floats_(buf, k);
        crc = put_(w, crc, buf, k * 4);
    }
    return crc;
}

// Checks everything about ck before a byte is written; fills the header and section sizes.
static int write_prepare_(const char *path, const wgpt_checkpoint *ck, unsigned char hdr[HEADER_SIZE],
                          uint64_t len[NSECT], char *err, size_t errlen) {
    char msg[512];
    uint64_t floats;
    if (config_floats_(&ck->config, &floats, msg, sizeof msg) < 0)
        return wgpt_errf(err, errlen, "%s: not written: %s", path, msg);
    if (!ck->params) return wgpt_errf(err, errlen, "%s: not written: params is NULL", path);
    if (!ck->adam_m != !ck->adam_v)
        return wgpt_errf(err, errlen, "%s: not written: adam_m is %s but adam_v is %s (give both moments or neither)",
                     path, ck->adam_m ? "set" : "NULL", ck->adam_v ? "set" : "NULL");
    if ((ck->train_opts_len && !ck->train_opts) || (ck->loader_state_len && !ck->loader_state))
        return wgpt_errf(err, errlen, "%s: not written: %s has length %zu but its pointer is NULL", path,
                     ck->train_opts_len && !ck->train_opts ? "train_opts" : "loader_state",
                     ck->train_opts_len && !ck->train_opts ? ck->train_opts_len : ck->loader_state_len);
    if (!tokenizer_ok_(ck->tokenizer, 0))
        return wgpt_errf(err, errlen,
                     "%s: not written: tokenizer name must be 1 to %d printable characters without spaces "
                     "(e.g. \"gpt2\", \"bytes\")",
                     path, WGPT_CHECKPOINT_TOKENIZER_MAX - 1);
    const float *t[3] = {ck->params, ck->adam_m, ck->adam_v};
    for (int i = 0; i < 3; i++)
        if (t[i] && finite_(&ck->config, SECT_NAME[S_PARAMS + i], t[i], floats, msg, sizeof msg) < 0)
            return wgpt_errf(err, errlen, "%s: not written (training has diverged?): %s", path, msg);

    len[S_OPTS] = ck->train_opts_len;
    len[S_LOADER] = ck->loader_state_len;
    len[S_PARAMS] = floats * 4;
    len[S_ADAM_M] = len[S_ADAM_V] = ck->adam_m ? floats * 4 : 0;

    memset(hdr, 0, HEADER_SIZE);
    memcpy(hdr, MAGIC, 8);
    put_u32_(hdr + 8, WGPT_CHECKPOINT_VERSION);
    put_u32_(hdr + 12, HEADER_SIZE);
    const wgpt_gpt2_config *c = &ck->config;
    const uint32_t cf[6] = {c->max_seq_len, c->vocab_size, c->padded_vocab_size,
                            c->num_layers,  c->num_heads,  c->channels};
    for (int i = 0; i < 6; i++) put_u32_(hdr + 16 + 4 * i, cf[i]);
    put_u64_(hdr + 40, ck->step);
    memcpy(hdr + 48, ck->tokenizer, strlen(ck->tokenizer));  // checked: < 16, the rest stays 0
    for (int i = 0; i < 4; i++) put_u64_(hdr + 64 + 8 * i, ck->rng[i]);
    for (int i = 0; i < NSECT; i++) put_u64_(hdr + 96 + 8 * i, len[i]);
    put_u32_(hdr + HEADER_CRC_AT, crc_(0, hdr, HEADER_CRC_AT));
    return 0;
}

// Writes the whole file through w; returns the file size it meant to write.
static uint64_t write_body_(writer_ *w, const wgpt_checkpoint *ck, const unsigned char hdr[HEADER_SIZE],
                            const uint64_t len[NSECT]) {
    uint32_t file = put_(w, 0, hdr, HEADER_SIZE), sect[NSECT];
    sect[S_OPTS] = put_(w, 0, ck->train_opts, len[S_OPTS]);
    sect[S_LOADER] = put_(w, 0, ck->loader_state, len[S_LOADER]);
    sect[S_PARAMS] = put_floats_(w, 0, ck->params, len[S_PARAMS] / 4);
    sect[S_ADAM_M] = put_floats_(w, 0, ck->adam_m, len[S_ADAM_M] / 4);
    sect[S_ADAM_V] = put_floats_(w, 0, ck->adam_v, len[S_ADAM_V] / 4);
    uint64_t total = HEADER_SIZE + TRAILER_SIZE;
    unsigned char tr[TRAILER_SIZE];
    for (int i = 0; i < NSECT; i++) {
        file = crc_combine_(file, sect[i], len[i]);
        put_u32_(tr + 4 * i, sect[i]);
        total += len[i];
    }
    file = crc_(file, tr, 20);
    put_u32_(tr + 20, file);
    memcpy(tr + 24, END_MARK, 8);
    put_(w, 0, tr, TRAILER_SIZE);
    return total;
}

int wgpt_checkpoint_write(const char *path, const wgpt_checkpoint *ck, char *err, size_t errlen) {
    if (!path || !*path || !ck) return wgpt_errf(err, errlen, "checkpoint write: path and checkpoint are required");
    unsigned char hdr[HEADER_SIZE];
    uint64_t len[NSECT];
    if (write_prepare_(path, ck, hdr, len, err, errlen) < 0) return -1;

    struct stat before;
    const char *kept = lstat(path, &before) == 0 ? "was left as it was" : "was not written (there was no earlier checkpoint)";
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return wgpt_errf(err, errlen, "%s: not written: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    // A stale path.tmp (a write killed earlier) is replaced; O_EXCL then never follows a link planted there.
    if (unlink(tmp) != 0 && errno != ENOENT) {
        int e = errno;
        free(tmp);
        return wgpt_errf(err, errlen, "%s.tmp: cannot remove the stale temporary file: %s", path, strerror(e));
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return wgpt_errf(err, errlen, "%s.tmp: cannot create (%s); %s %s", path, strerror(e), path, kept);
    }
    writer_ w = {fdopen(fd, "wb"), 0, 0};
    if (!w.f) {
        w.errnum = errno ? errno : ENOMEM;
        close(fd);
    }
    uint64_t total = w.f ? write_body_(&w, ck, hdr, len) : 0;
    const char *stage = "writing";
    if (w.f) {
        if (!w.errnum && fflush(w.f) != 0) w.errnum = errno ? errno : EIO;
        if (!w.errnum && fsync(fileno(w.f)) != 0) w.errnum = errno, stage = "syncing";
        if (fclose(w.f) != 0 && !w.errnum) w.errnum = errno ? errno : EIO, stage = "closing";
    }
    if (!w.errnum && rename(tmp, path) != 0) w.errnum = errno, stage = "renaming";
    if (w.errnum) {
        unlink(tmp);
        free(tmp);
        return wgpt_errf(err, errlen, "%s.tmp: %s failed after %llu of %llu bytes (%s); %s %s", path, stage,
                         (ull)w.done, (ull)total, strerror(w.errnum), path, kept);
    }
    free(tmp);
    int e = wgpt_sync_parent(path);
    if (e)
        return wgpt_errf(err, errlen,
                     "%s: written and renamed into place, but its folder could not be synced (%s): "
                     "the new checkpoint may not survive a power loss",
                     path, strerror(e));
    return 0;
}

int wgpt_checkpoint_remove_stale_tmp(const char *path, char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct stat sb;
    if (lstat(tmp, &sb) != 0) return 0;
    if (S_ISDIR(sb.st_mode)) return 0;  // not a file a writer of ours left: the next write refuses it, naming it
    if (unlink(tmp) != 0 && errno != ENOENT)
        return wgpt_errf(err, errlen, "%s: cannot remove the stale temporary file: %s", tmp, strerror(errno));
    return 0;
}

// ---- reading ----

// Reads and checks the header against the file size; fills ck's scalars, len and raw.
static int read_header_(FILE *f, const char *path, uint64_t fsize, wgpt_checkpoint *ck, uint64_t len[NSECT],
                        unsigned char raw[HEADER_SIZE], char *err, size_t errlen) {
    size_t want = fsize < HEADER_SIZE ? (size_t)fsize : HEADER_SIZE;
    if (fread(raw, 1, want, f) != want)
        return wgpt_errf(err, errlen, "%s: cannot read the header: %s", path, strerror(errno));
    if (memcmp(raw, MAGIC, want < 8 ? want : 8) != 0)
        return wgpt_errf(err, errlen, "%s: not a wgpt checkpoint (it does not start with \"WGPTCKPT\")", path);
    if (fsize >= 12) {
        uint32_t v = get_u32_(raw + 8);
        if (v != WGPT_CHECKPOINT_VERSION)
            return wgpt_errf(err, errlen,
                         "%s: format version %u, this build reads version %u (%s)", path, v, WGPT_CHECKPOINT_VERSION,
                         v > WGPT_CHECKPOINT_VERSION ? "written by a newer wgpt, or the header is damaged"
                                                     : "the header is damaged");
    }
    if (fsize < HEADER_SIZE + TRAILER_SIZE)
        return wgpt_errf(err, errlen, "%s: truncated: %llu bytes, a checkpoint has at least %d", path, (ull)fsize,
                     HEADER_SIZE + TRAILER_SIZE);
    if (get_u32_(raw + 12) != HEADER_SIZE)
        return wgpt_errf(err, errlen, "%s: header size field says %u, version 1 headers are %d bytes (damaged header)",
                     path, get_u32_(raw + 12), HEADER_SIZE);
    uint32_t stored = get_u32_(raw + HEADER_CRC_AT), got = crc_(0, raw, HEADER_CRC_AT);
    if (stored != got)
        return wgpt_errf(err, errlen,
                     "%s: header checksum mismatch (stored 0x%08x, computed 0x%08x): the header is damaged", path,
                     stored, got);
    if (get_u32_(raw + 136) != 0)
        return wgpt_errf(err, errlen, "%s: unknown header flags 0x%08x (written by a newer wgpt?)", path,
                     get_u32_(raw + 136));

    wgpt_gpt2_config *c = &ck->config;
    uint32_t *cf[6] = {&c->max_seq_len, &c->vocab_size, &c->padded_vocab_size,
                       &c->num_layers,  &c->num_heads,  &c->channels};
    for (int i = 0; i < 6; i++) *cf[i] = get_u32_(raw + 16 + 4 * i);
    char msg[512];
    uint64_t floats;
    if (config_floats_(c, &floats, msg, sizeof msg) < 0) return wgpt_errf(err, errlen, "%s: %s", path, msg);
    ck->step = get_u64_(raw + 40);
    memcpy(ck->tokenizer, raw + 48, WGPT_CHECKPOINT_TOKENIZER_MAX);
    if (!tokenizer_ok_(ck->tokenizer, 1))
        return wgpt_errf(err, errlen, "%s: the tokenizer name field is not 1 to %d printable characters", path,
                     WGPT_CHECKPOINT_TOKENIZER_MAX - 1);
    for (int i = 0; i < 4; i++) ck->rng[i] = get_u64_(raw + 64 + 8 * i);
    for (int i = 0; i < NSECT; i++) len[i] = get_u64_(raw + 96 + 8 * i);

    if (len[S_PARAMS] != floats * 4)
        return wgpt_errf(err, errlen,
                     "%s: the params section holds %llu bytes but the config (maxT=%u V=%u Vp=%u L=%u NH=%u C=%u) "
                     "needs %llu (%llu floats)",
                     path, (ull)len[S_PARAMS], c->max_seq_len, c->vocab_size, c->padded_vocab_size, c->num_layers,
                     c->num_heads, c->channels, (ull)(floats * 4), (ull)floats);
    for (int i = S_ADAM_M; i <= S_ADAM_V; i++)
        if (len[i] != len[S_ADAM_M] || (len[i] != 0 && len[i] != floats * 4))
            return wgpt_errf(err, errlen,
                         "%s: the %s section holds %llu bytes; it must be 0 (no moments) or %llu like params, "
                         "and adam_m and adam_v must agree",
                         path, SECT_NAME[i], (ull)len[i], (ull)(floats * 4));
    uint64_t total = HEADER_SIZE + TRAILER_SIZE;
    for (int i = 0; i < NSECT; i++)
        if (add_(total, len[i], &total) < 0) total = UINT64_MAX;
    if (total != fsize)
        return wgpt_errf(err, errlen,
                     "%s: the header's section sizes add up to a %llu-byte file but it holds %llu bytes "
                     "(truncated, or the header is damaged)",
                     path, (ull)total, (ull)fsize);
    for (int i = 0; i < NSECT; i++)
        if ((uint64_t)(size_t)len[i] != len[i])  // only on 32-bit machines
            return wgpt_errf(err, errlen, "%s: the %s section (%llu bytes) is too large for this machine", path,
                         SECT_NAME[i], (ull)len[i]);
    ck->train_opts_len = (size_t)len[S_OPTS];
    ck->loader_state_len = (size_t)len[S_LOADER];
    return 0;
}

// Opens path as a regular file and returns its size.
static FILE *open_(const char *path, uint64_t *fsize, char *err, size_t errlen) {
    if (!path) {
        wgpt_errf(err, errlen, "checkpoint read: path is NULL");
        return NULL;
    }
    // A FIFO or a device there is refused without blocking in open.
    FILE *f = wgpt_fopen_regular(path, "rb", err, errlen);
    if (!f) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        wgpt_errf(err, errlen, "%s: cannot read its size: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    *fsize = (uint64_t)st.st_size;
    return f;
}

int wgpt_checkpoint_peek(const char *path, wgpt_checkpoint *ck, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    uint64_t fsize, len[NSECT];
    unsigned char raw[HEADER_SIZE];
    FILE *f = open_(path, &fsize, err, errlen);
    if (!f) return -1;
    int rc = read_header_(f, path, fsize, ck, len, raw, err, errlen);
    fclose(f);
    if (rc < 0) memset(ck, 0, sizeof *ck);
    return rc;
}

// Reads the trailer after the sections and checks it: the end marker, each
// section's checksum (crc, over len bytes), the file's (the header's bytes
// raw, the sections, the trailer's first 20 bytes).
static int check_trailer_(FILE *f, const char *path, const unsigned char raw[HEADER_SIZE], const uint32_t crc[NSECT],
                          const uint64_t len[NSECT], char *err, size_t errlen) {
    unsigned char tr[TRAILER_SIZE];
    if (fread(tr, 1, TRAILER_SIZE, f) != TRAILER_SIZE)
        return wgpt_errf(err, errlen, "%s: cannot read the trailer: %s", path,
                         ferror(f) ? strerror(errno) : "file shrank while reading");
    if (memcmp(tr + 24, END_MARK, 8) != 0)
        return wgpt_errf(err, errlen,
                         "%s: the end marker \"WGPTEND\" is missing (damaged or incompletely written file)", path);
    uint32_t file = crc_(0, raw, HEADER_SIZE);
    for (int i = 0; i < NSECT; i++) file = crc_combine_(file, crc[i], len[i]);
    file = crc_(file, tr, 20);
    uint32_t stored = get_u32_(tr + 20);
    uint64_t at = HEADER_SIZE;
    for (int i = 0; i < NSECT; at += len[i], i++)
        if (crc[i] != get_u32_(tr + 4 * i))
            return wgpt_errf(err, errlen,
                             "%s: checksum mismatch in the %s section (bytes %llu..%llu): the data or its stored "
                             "checksum is damaged",
                             path, SECT_NAME[i], (ull)at, (ull)(at + len[i]));
    if (file != stored)
        return wgpt_errf(err, errlen,
                         "%s: file checksum mismatch (stored 0x%08x, computed 0x%08x): the trailer is damaged", path,
                         stored, file);
    return 0;
}

// Reads the sections and the trailer, checks every checksum. Fills sect[].
static int read_body_(FILE *f, const char *path, const uint64_t len[NSECT], const unsigned char raw[HEADER_SIZE],
                      void *sect[NSECT], char *err, size_t errlen) {
    uint32_t crc[NSECT];
    uint64_t at = HEADER_SIZE;
    for (int i = 0; i < NSECT; i++) {
        if (len[i] && !(sect[i] = malloc((size_t)len[i])))
            return wgpt_errf(err, errlen, "%s: cannot allocate %llu bytes for the %s section", path, (ull)len[i],
                         SECT_NAME[i]);
        if (len[i] && fread(sect[i], 1, (size_t)len[i], f) != len[i])
            return wgpt_errf(err, errlen, "%s: cannot read the %s section (bytes %llu..%llu): %s", path, SECT_NAME[i],
                         (ull)at, (ull)(at + len[i]), ferror(f) ? strerror(errno) : "file shrank while reading");
        crc[i] = crc_(0, sect[i], len[i]);
        at += len[i];
    }
    return check_trailer_(f, path, raw, crc, len, err, errlen);
}

int wgpt_checkpoint_read(const char *path, wgpt_checkpoint *ck, char *err, size_t errlen) {
    memset(ck, 0, sizeof *ck);
    uint64_t fsize, len[NSECT];
    unsigned char raw[HEADER_SIZE];
    void *sect[NSECT] = {0};
    FILE *f = open_(path, &fsize, err, errlen);
    if (!f) return -1;
    int rc = read_header_(f, path, fsize, ck, len, raw, err, errlen);
    if (rc == 0) rc = read_body_(f, path, len, raw, sect, err, errlen);
    fclose(f);
    if (rc == 0 && !host_le_())
        for (int i = S_PARAMS; i <= S_ADAM_V; i++)
            if (sect[i]) swap_floats_(sect[i], len[i] / 4);
    char msg[512];
    for (int i = S_PARAMS; rc == 0 && i <= S_ADAM_V; i++)
        if (sect[i] && finite_(&ck->config, SECT_NAME[i], sect[i], len[i] / 4, msg, sizeof msg) < 0)
            rc = wgpt_errf(err, errlen, "%s: %s", path, msg);
    if (rc < 0) {
        for (int i = 0; i < NSECT; i++) free(sect[i]);
        memset(ck, 0, sizeof *ck);
        return -1;
    }
    ck->train_opts = sect[S_OPTS];
    ck->loader_state = sect[S_LOADER];
    ck->params = sect[S_PARAMS];
    ck->adam_m = sect[S_ADAM_M];
    ck->adam_v = sect[S_ADAM_V];
    return 0;
}

int wgpt_checkpoint_verify(const char *path, char *err, size_t errlen) {
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    uint64_t fsize, len[NSECT];
    unsigned char raw[HEADER_SIZE];
    FILE *f = open_(path, &fsize, err, errlen);
    if (!f) return -1;
    int rc = read_header_(f, path, fsize, &ck, len, raw, err, errlen);
    enum { CHUNK = 1 << 20 };
    float *buf = rc == 0 ? malloc(CHUNK) : NULL;
    if (rc == 0 && !buf) rc = wgpt_errf(err, errlen, "%s: out of memory", path);
    uint32_t crc[NSECT] = {0};
    uint64_t at = HEADER_SIZE;
    for (int i = 0; rc == 0 && i < NSECT; at += len[i], i++)
        for (uint64_t done = 0; rc == 0 && done < len[i];) {
            size_t k = len[i] - done < CHUNK ? (size_t)(len[i] - done) : CHUNK;
            if (fread(buf, 1, k, f) != k) {
                rc = wgpt_errf(err, errlen, "%s: cannot read the %s section (bytes %llu..%llu): %s", path, SECT_NAME[i],
                               (ull)at, (ull)(at + len[i]), ferror(f) ? strerror(errno) : "file shrank while reading");
                break;
            }
            crc[i] = crc_(crc[i], buf, k);
            if (i >= S_PARAMS) {  // whole floats: CHUNK and the section sizes are multiples of 4
                if (!host_le_()) swap_floats_(buf, k / 4);
                for (size_t j = 0; j < k / 4; j++)
                    if (!isfinite(buf[j])) {
                        char where[128];
                        locate_(&ck.config, done / 4 + j, where, sizeof where);
                        rc = wgpt_errf(err, errlen, "%s: %s element %llu (%s) is %s", path, SECT_NAME[i],
                                       (ull)(done / 4 + j), where, isnan(buf[j]) ? "NaN" : "Inf");
                        break;
                    }
            }
            done += k;
        }
    free(buf);
    if (rc == 0) rc = check_trailer_(f, path, raw, crc, len, err, errlen);
    fclose(f);
    return rc;
}

void wgpt_checkpoint_free(wgpt_checkpoint *ck) {
    if (!ck) return;
    free(ck->train_opts);
    free(ck->loader_state);
    free(ck->params);
    free(ck->adam_m);
    free(ck->adam_v);
    memset(ck, 0, sizeof *ck);
}
