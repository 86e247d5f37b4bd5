// pipeline_cache.c: Dawn's blob cache as files (see pipeline_cache.h).
//
// An entry file, DIR/<first 40 hex digits of SHA-256(key)>.bin:
//   8 bytes  "WGPTPC01"
//   8 bytes  key size (little-endian u64)
//   8 bytes  value size
//   32 bytes SHA-256 of key then value
//   key bytes, then value bytes
// Anything else (short, long, another key, a wrong digest) is a miss.
#include "pipeline_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"

#define MAGIC "WGPTPC01"
#define HEADER_BYTES 56
#define MAX_ENTRY_BYTES (256ull << 20)  // larger files are not ours: a miss

struct wgpt_pcache {
    char *dir;
    pthread_mutex_t mu;
    wgpt_gpu_cache_stats st;
    // Dawn asks for an entry's size, then for its bytes: the value read and
    // checked by the first call, kept for the second.
    unsigned char memo_hash[32];
    uint8_t *memo;
    size_t memo_size;
};

static int sha256_(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, unsigned char out[32]) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, na) &&
             (!nb || EVP_DigestUpdate(ctx, b, nb)) && EVP_DigestFinal_ex(ctx, out, &n) && n == 32;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

static void put64_(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64_(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void path_of_(const wgpt_pcache *c, const unsigned char key_hash[32], char *out, size_t n) {
    char hex[41];
    for (int i = 0; i < 20; i++) snprintf(hex + 2 * i, 3, "%02x", key_hash[i]);
    snprintf(out, n, "%s/%s.bin", c->dir, hex);
}

// The entry's value, checked against key (malloc'ed, *size set), or NULL: a miss.
// *damaged is set when a file was there but was not a valid entry for key.
static uint8_t *read_entry_(const wgpt_pcache *c, const unsigned char key_hash[32], const uint8_t *key,
                            size_t key_size, size_t *size, int *damaged) {
    char path[4096], err[256];
    path_of_(c, key_hash, path, sizeof path);
    *damaged = 0;
    int fd = wgpt_open_regular(path, O_RDONLY, 0, err, sizeof err);
    if (fd < 0) return NULL;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) < 0 || st.st_size < HEADER_BYTES || (uint64_t)st.st_size > MAX_ENTRY_BYTES) goto bad;
    buf = malloc((size_t)st.st_size);
    if (!buf) goto bad;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) goto bad;
        got += (size_t)r;
    }
    uint64_t ks = get64_(buf + 8), vs = get64_(buf + 16);
    unsigned char digest[32];
    if (memcmp(buf, MAGIC, 8) != 0 || ks != key_size || vs == 0 || vs > MAX_ENTRY_BYTES ||
        HEADER_BYTES + ks + vs != (uint64_t)st.st_size || memcmp(buf + HEADER_BYTES, key, key_size) != 0 ||
        sha256_(buf + HEADER_BYTES, (size_t)(ks + vs), NULL, 0, digest) < 0 || memcmp(digest, buf + 24, 32) != 0)
        goto bad;
    close(fd);
    memmove(buf, buf + HEADER_BYTES + ks, (size_t)vs);
    *size = (size_t)vs;
    return buf;
bad:
    close(fd);
    free(buf);
    *damaged = 1;
    return NULL;
}

// Dawn calls this twice an entry: value NULL for the size (0: a miss), then
// a buffer of that size for the bytes.
static size_t on_load_(size_t key_size, const uint8_t *key, size_t value_size, uint8_t *value, void *u1,
                       void *u2) {
    (void)u2;
    wgpt_pcache *c = u1;
    unsigned char h[32];
    if (sha256_(key, key_size, NULL, 0, h) < 0) return 0;
    pthread_mutex_lock(&c->mu);
    size_t n = 0, size = 0;
    int damaged = 0;
    if (!value) {
        free(c->memo);
        c->memo = read_entry_(c, h, key, key_size, &size, &damaged);
        c->st.lookups++;
        c->st.rejected += (uint64_t)damaged;
        c->st.hits += c->memo != NULL;
        c->memo_size = c->memo ? size : 0;
        memcpy(c->memo_hash, h, 32);
        n = c->memo_size;
    } else {
        uint8_t *v = NULL;
        if (c->memo && memcmp(h, c->memo_hash, 32) == 0) v = c->memo, size = c->memo_size;
        else v = read_entry_(c, h, key, key_size, &size, &damaged);  // (not asked for its size first)
        if (v && size == value_size) memcpy(value, v, n = size);
        if (v == c->memo) c->memo = NULL;
        free(v);
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

static int write_all_(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static void on_store_(size_t key_size, const uint8_t *key, size_t value_size, const uint8_t *value, void *u1,
                      void *u2) {
    (void)u2;
    wgpt_pcache *c = u1;
    unsigned char h[32], head[HEADER_BYTES];
    if (!value_size || value_size > MAX_ENTRY_BYTES || sha256_(key, key_size, NULL, 0, h) < 0) return;
    memcpy(head, MAGIC, 8);
    put64_(head + 8, key_size);
    put64_(head + 16, value_size);
    if (sha256_(key, key_size, value, value_size, head + 24) < 0) return;
    char path[4096], tmp[4200];
    path_of_(c, h, path, sizeof path);
    pthread_mutex_lock(&c->mu);
    static unsigned long seq_;
    snprintf(tmp, sizeof tmp, "%s.%ld.%lu.tmp", path, (long)getpid(), ++seq_);
    pthread_mutex_unlock(&c->mu);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int ok = write_all_(fd, head, sizeof head) == 0 && write_all_(fd, key, key_size) == 0 &&
             write_all_(fd, value, value_size) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->st.stores++;
    pthread_mutex_unlock(&c->mu);
}

wgpt_pcache *wgpt_pcache_open_(const char *dir) {
    char err[512];
    if (!dir || !*dir || wgpt_mkdirs(dir, err, sizeof err) < 0) return NULL;
    wgpt_pcache *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void wgpt_pcache_describe_(wgpt_pcache *c, WGPUDawnCacheDeviceDescriptor *d) {
    memset(d, 0, sizeof *d);
    d->chain.sType = WGPUSType_DawnCacheDeviceDescriptor;
    d->isolationKey = (WGPUStringView){"wgpt", 4};
    d->loadDataCallbackInfo = (WGPUDawnLoadCacheDataCallbackInfo){NULL, on_load_, c, NULL};
    d->storeDataCallbackInfo = (WGPUDawnStoreCacheDataCallbackInfo){NULL, on_store_, c, NULL};
}

void wgpt_pcache_stats_(const wgpt_pcache *c, wgpt_gpu_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    pthread_mutex_lock((pthread_mutex_t *)&c->mu);
    *out = c->st;
    pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
}

void wgpt_pcache_free_(wgpt_pcache *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->mu);
    free(c->memo);
    free(c->dir);
    free(c);
}
