// shard.c: reading (mmap) and crash-safe writing of token shards (see shard.h).
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/bus_guard.h"
#include "util/err.h"
#include "util/fs.h"

// Tokens are used straight from the map and written straight from memory.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "token shards are little-endian and are mapped without conversion: this host is big-endian"
#endif

static int32_t get_i32_(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static void put_i32_(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(u >> (8 * i));
}

static char *dup_(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

// The name field: 1..15 printable characters, then NULs only.
static int name_ok_(const unsigned char *f) {
    size_t n = 0;
    while (n < WGPT_SHARD_TOKENIZER_MAX && f[n]) {
        if (f[n] < 0x21 || f[n] > 0x7e) return 0;
        n++;
    }
    if (n == 0 || n == WGPT_SHARD_TOKENIZER_MAX) return 0;
    for (size_t i = n; i < WGPT_SHARD_TOKENIZER_MAX; i++)
        if (f[i]) return 0;
    return 1;
}

int wgpt_shard_open(const char *path, wgpt_shard *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    int fd = wgpt_open_regular(path, O_RDONLY, 0, err, errlen);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return wgpt_errf(err, errlen, "%s: cannot read its size: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char h[32];
    if (size < WGPT_SHARD_HEADER_BYTES) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: %llu bytes, shorter than the %d-byte shard header (truncated, or not a shard)",
                     path, (unsigned long long)size, WGPT_SHARD_HEADER_BYTES);
    }
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: cannot read the header: %s", path, strerror(errno));
    }
    int32_t magic = get_i32_(h), version = get_i32_(h + 4), count = get_i32_(h + 8), tag = get_i32_(h + 12);
    if (magic != WGPT_SHARD_MAGIC) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: not a token shard: magic number %d, expected %d", path, magic,
                     WGPT_SHARD_MAGIC);
    }
    if (version != WGPT_SHARD_VERSION) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: shard version %d; this build reads version %d", path, version,
                     WGPT_SHARD_VERSION);
    }
    if (count < 0) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: header says %d tokens (negative)", path, count);
    }
    if (tag == WGPT_SHARD_TAG) {
        if (!name_ok_(h + 16)) {
            close(fd);
            return wgpt_errf(err, errlen, "%s: the header's tokenizer field (bytes 16..31) is damaged", path);
        }
        memcpy(s->tokenizer, h + 16, WGPT_SHARD_TOKENIZER_MAX);
    }
    uint64_t want = WGPT_SHARD_HEADER_BYTES + 2 * (uint64_t)count;
    if (size != want) {
        close(fd);
        uint64_t body = size - WGPT_SHARD_HEADER_BYTES;
        return wgpt_errf(err, errlen,
                     "%s: header says %d tokens (%llu bytes) but the file holds %llu tokens%s (%llu bytes)%s", path,
                     count, (unsigned long long)want, (unsigned long long)(body / 2),
                     body % 2 ? " and a stray byte" : "",
                     (unsigned long long)size, size < want ? ": truncated?" : "");
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);  // the map keeps the file
    if (map == MAP_FAILED) return wgpt_errf(err, errlen, "%s: cannot map %llu bytes: %s", path,
                                        (unsigned long long)size, strerror(map_errno));
    s->path = dup_(path);
    if (!s->path) {
        munmap(map, (size_t)size);
        memset(s, 0, sizeof *s);
        return wgpt_errf(err, errlen, "%s: out of host memory", path);
    }
    s->map = map;
    s->map_len = (size_t)size;
    s->tokens = (const uint16_t *)((const unsigned char *)map + WGPT_SHARD_HEADER_BYTES);
    s->n = (uint64_t)count;
    return 0;
}

void wgpt_shard_close(wgpt_shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    free(s->path);
    memset(s, 0, sizeof *s);
}

typedef struct scan_ {
    const uint16_t *t;
    uint64_t begin, end, bad;  // bad: the first id >= vocab, or end
    uint32_t vocab;
} scan_;

static void scan_vocab_(void *arg) {
    scan_ *c = arg;
    uint64_t i = c->begin;
    while (i < c->end && c->t[i] < c->vocab) i++;
    c->bad = i;
}

int wgpt_shard_check_vocab(const wgpt_shard *s, uint64_t begin, uint64_t end, uint32_t vocab_size, char *err,
                           size_t errlen) {
    if (end > s->n || begin > end)
        return wgpt_errf(err, errlen, "%s: token range [%llu, %llu) is outside the shard's %llu tokens", s->path,
                     (unsigned long long)begin, (unsigned long long)end, (unsigned long long)s->n);
    if (vocab_size > 65535) return 0;  // every uint16 fits
    scan_ c = {s->tokens, begin, end, end, vocab_size};
    if (wgpt_bus_guard_run(scan_vocab_, &c) < 0)
        return wgpt_errf(err, errlen, "%s: the file shrank while being read (it held %zu bytes when opened): another "
                     "process truncated or rewrote it", s->path, s->map_len);
    if (c.bad < end)
        return wgpt_errf(err, errlen,
                     "%s: token %u at position %llu (byte offset %llu) is not below the vocabulary size %u (shards "
                     "made with another tokenizer? see --tokenizer)",
                     s->path, (unsigned)s->tokens[c.bad], (unsigned long long)c.bad,
                     (unsigned long long)(WGPT_SHARD_HEADER_BYTES + 2 * c.bad), vocab_size);
    return 0;
}

// ---- writing ----

int wgpt_shard_writer_begin(wgpt_shard_writer *w, const char *path, const char *tokenizer, char *err,
                            size_t errlen) {
    memset(w, 0, sizeof *w);
    unsigned char name[WGPT_SHARD_TOKENIZER_MAX] = {0};
    if (tokenizer) {
        size_t k = strlen(tokenizer);
        if (k < WGPT_SHARD_TOKENIZER_MAX) memcpy(name, tokenizer, k);
        if (!name_ok_(name))
            return wgpt_errf(err, errlen, "%s: tokenizer name '%s' is not 1 to %d printable characters", path, tokenizer,
                         WGPT_SHARD_TOKENIZER_MAX - 1);
    }
    size_t n = strlen(path);
    w->path = dup_(path);
    w->tmp = malloc(n + 5);
    if (!w->path || !w->tmp) {
        wgpt_shard_writer_abort(w);
        return wgpt_errf(err, errlen, "%s: out of host memory", path);
    }
    memcpy(w->tmp, path, n);
    memcpy(w->tmp + n, ".tmp", 5);
    // A stale .tmp (a run killed earlier) is replaced; O_EXCL then never
    // follows a link or opens a FIFO planted there.
    int fd = unlink(w->tmp) == 0 || errno == ENOENT ? open(w->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644) : -1;
    w->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!w->f) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(w->tmp);
        free(w->path);
        free(w->tmp);
        memset(w, 0, sizeof *w);
        return wgpt_errf(err, errlen, "%s.tmp: cannot create: %s", path, strerror(e));
    }
    // The count is written by finish; until then the header says 0 tokens.
    unsigned char h[WGPT_SHARD_HEADER_BYTES] = {0};
    put_i32_(h, WGPT_SHARD_MAGIC);
    put_i32_(h + 4, WGPT_SHARD_VERSION);
    if (tokenizer) {
        put_i32_(h + 12, WGPT_SHARD_TAG);
        memcpy(h + 16, name, sizeof name);
    }
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h) {
        int e = errno;
        wgpt_shard_writer_abort(w);
        return wgpt_errf(err, errlen, "%s.tmp: cannot write the header: %s", path, strerror(e));
    }
    return 0;
}

int wgpt_shard_writer_append(wgpt_shard_writer *w, const uint16_t *tokens, size_t n, char *err, size_t errlen) {
    if (!w->f) return wgpt_errf(err, errlen, "shard writer is not open");
    if ((uint64_t)n > WGPT_SHARD_MAX_TOKENS - w->n)
        return wgpt_errf(err, errlen, "%s: %llu + %zu tokens exceed a shard's limit of %llu (the header count is an int32)",
                     w->path, (unsigned long long)w->n, n, (unsigned long long)WGPT_SHARD_MAX_TOKENS);
    if (n && fwrite(tokens, 2, n, w->f) != n)
        return wgpt_errf(err, errlen, "%s: write failed: %s", w->tmp, strerror(errno));
    w->n += n;
    return 0;
}

int wgpt_shard_writer_finish(wgpt_shard_writer *w, char *err, size_t errlen) {
    if (!w->f) return wgpt_errf(err, errlen, "shard writer is not open");
    unsigned char c[4];
    put_i32_(c, (int32_t)w->n);
    int ok = fseek(w->f, 8, SEEK_SET) == 0 && fwrite(c, 1, 4, w->f) == 4 && fflush(w->f) == 0 &&
             fsync(fileno(w->f)) == 0;
    int e = errno;
    if (!ok) {
        wgpt_errf(err, errlen, "%s: cannot finish writing: %s", w->tmp, strerror(e));
        wgpt_shard_writer_abort(w);  // after the message: it frees the names
        return -1;
    }
    int rc = 0;
    if (fclose(w->f) != 0) rc = wgpt_errf(err, errlen, "%s: close failed: %s", w->tmp, strerror(errno));
    w->f = NULL;
    if (rc == 0 && rename(w->tmp, w->path) != 0)
        rc = wgpt_errf(err, errlen, "%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
    // The rename made durable; a folder that cannot be synced holds the data already.
    if (rc == 0) wgpt_sync_parent(w->path);
    else unlink(w->tmp);
    free(w->path);
    free(w->tmp);
    memset(w, 0, sizeof *w);
    return rc;
}

void wgpt_shard_writer_abort(wgpt_shard_writer *w) {
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    free(w->path);
    free(w->tmp);
    memset(w, 0, sizeof *w);
}

int wgpt_shard_write(const char *path, const uint16_t *tokens, size_t n, char *err, size_t errlen) {
    wgpt_shard_writer w;
    if (wgpt_shard_writer_begin(&w, path, NULL, err, errlen) < 0) return -1;
    if (wgpt_shard_writer_append(&w, tokens, n, err, errlen) < 0) {
        wgpt_shard_writer_abort(&w);
        return -1;
    }
    return wgpt_shard_writer_finish(&w, err, errlen);
}
