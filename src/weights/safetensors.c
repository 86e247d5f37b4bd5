// safetensors.c: the safetensors reader (nothing in the file is trusted until
// checked) and the F32 header writer; see safetensors.h.
#include "weights/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>  // defines: cJSON_ParseWithLengthOpts, cJSON_Print..., cJSON_Delete

#include "util/err.h"

static const struct {
    const char *name;
    unsigned size;
} DTYPES[WGPT_ST_NUM_DTYPES] = {
    {"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},  {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4},  {"U32", 4},  {"F32", 4},     {"F64", 8},     {"I64", 8},  {"U64", 8},
};

const char *wgpt_st_dtype_name(wgpt_st_dtype d) { return d < WGPT_ST_NUM_DTYPES ? DTYPES[d].name : "?"; }
unsigned wgpt_st_dtype_size(wgpt_st_dtype d) { return d < WGPT_ST_NUM_DTYPES ? DTYPES[d].size : 0; }
int wgpt_st_is_float(wgpt_st_dtype d) { return d == WGPT_ST_F32 || d == WGPT_ST_F16 || d == WGPT_ST_BF16; }

// ---- element access ----

static uint32_t le32_(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static float bits_f32_(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_bits_(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// IEEE binary16 -> binary32, exactly (subnormals normalised, Inf/NaN kept).
static float half_f32_(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0 && m == 0) return bits_f32_(s);
    if (e == 0) {  // subnormal: m * 2^-24, renormalised to 1.f * 2^(e-127)
        e = 127 - 14;
        while (!(m & 0x400)) m <<= 1, e--;
        return bits_f32_(s | e << 23 | (m & 0x3ff) << 13);
    }
    if (e == 31) return bits_f32_(s | 0x7f800000u | m << 13);
    return bits_f32_(s | (e + 127 - 15) << 23 | m << 13);
}

float wgpt_st_get_f32(const wgpt_st_tensor *t, uint64_t i) {
    const unsigned char *p = t->data + i * DTYPES[t->dtype].size;
    switch (t->dtype) {
    case WGPT_ST_F32: return bits_f32_(le32_(p));
    case WGPT_ST_F16: return half_f32_((uint16_t)(p[0] | p[1] << 8));
    case WGPT_ST_BF16: return bits_f32_((uint32_t)(p[0] | p[1] << 8) << 16);  // the top half of an f32
    default: return NAN;
    }
}

// half_f32_ without branches on the common path (F. Giesen's conversion):
// the exponent and mantissa shifted into place and rebiased; Inf/NaN get the
// all-ones exponent, a subnormal is renormalised by an exact float
// subtraction. The same bits as half_f32_ for every half (test_weights).
static float half_f32_fast_(uint16_t h) {
    uint32_t o = (uint32_t)(h & 0x7fff) << 13, exp = o & 0x0f800000u;
    o += (127 - 15) << 23;
    if (exp == 0x0f800000u) o += (128 - 16) << 23;
    else if (exp == 0) o = (uint32_t)(o + (1u << 23)), o = f32_bits_(bits_f32_(o) - bits_f32_(113u << 23));
    return bits_f32_(o | (uint32_t)(h & 0x8000) << 16);
}

int wgpt_st_get_f32_run(const wgpt_st_tensor *t, uint64_t i, uint64_t n, float *dst) {
    const unsigned char *p = t->data + i * DTYPES[t->dtype].size;
    uint32_t bad = 0;  // exponent all ones somewhere: Inf or NaN
    switch (t->dtype) {
    case WGPT_ST_F32:
        for (uint64_t j = 0; j < n; j++) {
            uint32_t u = le32_(p + 4 * j);
            bad |= (~u & 0x7f800000u) == 0;
            dst[j] = bits_f32_(u);
        }
        break;
    case WGPT_ST_F16: {
        for (uint64_t j = 0; j < n; j++) {
            uint16_t h = (uint16_t)(p[2 * j] | p[2 * j + 1] << 8);
            bad |= (~h & 0x7c00u) == 0;
            dst[j] = half_f32_fast_(h);
        }
        break;
    }
    case WGPT_ST_BF16:
        for (uint64_t j = 0; j < n; j++) {
            uint32_t u = (uint32_t)(p[2 * j] | p[2 * j + 1] << 8) << 16;
            bad |= (~u & 0x7f800000u) == 0;
            dst[j] = bits_f32_(u);
        }
        break;
    default:
        for (uint64_t j = 0; j < n; j++) dst[j] = NAN;
        return 0;
    }
    return !bad;
}

// ---- header checks before JSON ----

// Valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// the offset of the first bad byte, or n.
static size_t utf8_bad_(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
        if (k == 9 || i + k >= n) return i;  // a lead byte that fits no form, or a cut sequence
        if (k == 0) {
            i++;
            continue;
        }
        uint32_t cp = c & (0x3f >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += k + 1;
    }
    return n;
}

// The first \u0000 escape (not one whose backslash is itself escaped), or n.
static size_t nul_escape_(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 6 <= n && memcmp(s + i + 2, "0000", 4) == 0) return i;
        i++;
    }
    return n;
}

// ---- the JSON entries ----

static int whole_(const cJSON *x, uint64_t *v) {
    if (!cJSON_IsNumber(x)) return 0;
    double d = x->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0 && d == floor(d))) return 0;  // exact in a double: <= 2^53
    *v = (uint64_t)d;
    return 1;
}

// Fills t (not its name) from one tensor's JSON object; data_offsets into begin/end.
static int tensor_entry_(const cJSON *o, wgpt_st_tensor *t, uint64_t *begin, uint64_t *end, const char *label,
                         char *err, size_t errlen) {
    const char *name = o->string;
    if (!cJSON_IsObject(o)) return wgpt_errf(err, errlen, "%s: tensor '%s': not a JSON object", label, name);
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *c = o->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0 ? &dtype
                             : strcmp(c->string, "shape") == 0 ? &shape
                             : strcmp(c->string, "data_offsets") == 0 ? &offs : NULL;
        if (!slot) return wgpt_errf(err, errlen, "%s: tensor '%s': unknown field '%s'", label, name, c->string);
        if (*slot) return wgpt_errf(err, errlen, "%s: tensor '%s': field '%s' given twice", label, name, c->string);
        *slot = c;
    }
    if (!dtype || !shape || !offs)
        return wgpt_errf(err, errlen, "%s: tensor '%s': missing '%s'", label, name,
                     !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype)) return wgpt_errf(err, errlen, "%s: tensor '%s': dtype is not a string", label, name);
    int d = -1;
    for (int k = 0; k < WGPT_ST_NUM_DTYPES && d < 0; k++)
        if (strcmp(dtype->valuestring, DTYPES[k].name) == 0) d = k;
    if (d < 0) return wgpt_errf(err, errlen, "%s: tensor '%s': unknown dtype '%s'", label, name, dtype->valuestring);
    t->dtype = (wgpt_st_dtype)d;
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > WGPT_ST_MAX_DIMS)
        return wgpt_errf(err, errlen, "%s: tensor '%s': shape is not an array of at most %d sizes", label, name,
                     WGPT_ST_MAX_DIMS);
    t->ndim = 0;
    t->count = 1;
    for (const cJSON *c = shape->child; c; c = c->next) {
        uint64_t v;
        if (!whole_(c, &v)) return wgpt_errf(err, errlen, "%s: tensor '%s': a shape entry is not a whole number", label, name);
        if (v && t->count > UINT64_MAX / v) return wgpt_errf(err, errlen, "%s: tensor '%s': shape overflows", label, name);
        t->shape[t->ndim++] = v;
        t->count *= v;
    }
    unsigned sz = DTYPES[d].size;
    if (t->count > UINT64_MAX / sz) return wgpt_errf(err, errlen, "%s: tensor '%s': shape overflows", label, name);
    t->nbytes = t->count * sz;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !whole_(offs->child, begin) ||
        !whole_(offs->child->next, end))
        return wgpt_errf(err, errlen, "%s: tensor '%s': data_offsets is not [begin, end] in whole numbers", label, name);
    if (*end < *begin || *end - *begin != t->nbytes)
        return wgpt_errf(err, errlen,
                     "%s: tensor '%s': data_offsets [%llu, %llu] do not hold its %llu elements of %s (%llu bytes)",
                     label, name, (unsigned long long)*begin, (unsigned long long)*end,
                     (unsigned long long)t->count, DTYPES[d].name, (unsigned long long)t->nbytes);
    return 0;
}

static int metadata_ok_(const cJSON *m) {
    if (!cJSON_IsObject(m)) return 0;
    for (const cJSON *c = m->child; c; c = c->next)
        if (!cJSON_IsString(c)) return 0;
    return 1;
}

// Keeps the metadata as "key\0value\0" pairs in st->meta.
static int keep_metadata_(wgpt_safetensors *st, const cJSON *m) {
    size_t n = 0;
    for (const cJSON *c = m->child; c; c = c->next) n += strlen(c->string) + strlen(c->valuestring) + 2;
    if (!(st->meta = malloc(n ? n : 1))) return -1;
    char *at = st->meta;
    for (const cJSON *c = m->child; c; c = c->next) {
        size_t a = strlen(c->string) + 1, b = strlen(c->valuestring) + 1;
        memcpy(at, c->string, a), memcpy(at + a, c->valuestring, b);
        at += a + b;
    }
    st->meta_len = n;
    return 0;
}

const char *wgpt_safetensors_meta(const wgpt_safetensors *st, const char *key) {
    for (size_t at = 0; at < st->meta_len;) {
        const char *k = st->meta + at, *v = k + strlen(k) + 1;
        if (strcmp(k, key) == 0) return v;
        at = (size_t)(v + strlen(v) + 1 - st->meta);
    }
    return NULL;
}

typedef struct span_ {
    uint64_t begin, end;
    size_t index;
} span_;

static int by_name_(const void *a, const void *b) {
    return strcmp(((const wgpt_st_tensor *)a)->name, ((const wgpt_st_tensor *)b)->name);
}
static int by_offset_(const void *a, const void *b) {
    const span_ *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

// The tensors, in order of their bytes, must tile the data buffer [0, size).
static int check_tiling_(span_ *s, size_t n, uint64_t size, const wgpt_st_tensor *ts, const char *label, char *err,
                         size_t errlen) {
    qsort(s, n, sizeof *s, by_offset_);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i].end > size)
            return wgpt_errf(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] run past the data's %llu bytes",
                         label, ts[s[i].index].name, (unsigned long long)s[i].begin, (unsigned long long)s[i].end,
                         (unsigned long long)size);
        if (s[i].begin < at)
            return wgpt_errf(err, errlen, "%s: tensor '%s' overlaps tensor '%s' (bytes [%llu, %llu))", label,
                         ts[s[i].index].name, ts[s[i - 1].index].name, (unsigned long long)s[i].begin,
                         (unsigned long long)at);
        if (s[i].begin > at)
            return wgpt_errf(err, errlen, "%s: bytes [%llu, %llu) of the data, before tensor '%s', belong to no tensor",
                         label, (unsigned long long)at, (unsigned long long)s[i].begin, ts[s[i].index].name);
        at = s[i].end;
    }
    if (at != size)
        return wgpt_errf(err, errlen, "%s: bytes [%llu, %llu) at the end of the data belong to no tensor", label,
                     (unsigned long long)at, (unsigned long long)size);
    return 0;
}

// Tensors from the parsed header; the data buffer is data[0, data_size).
static int read_entries_(wgpt_safetensors *st, const cJSON *root, const unsigned char *data, uint64_t data_size,
                         const char *label, char *err, size_t errlen) {
    size_t n = 0, name_bytes = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (!metadata_ok_(c)) return wgpt_errf(err, errlen, "%s: __metadata__ is not an object of strings", label);
            continue;
        }
        n++;
        name_bytes += strlen(c->string) + 1;
    }
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    st->names = malloc(name_bytes ? name_bytes : 1);
    span_ *spans = malloc((n ? n : 1) * sizeof *spans);
    int rc = -1;
    if (!st->tensors || !st->names || !spans) {
        wgpt_errf(err, errlen, "%s: out of memory for %zu tensors", label, n);
        goto out;
    }
    char *np = st->names;
    int metadata_seen = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (metadata_seen++) {
                wgpt_errf(err, errlen, "%s: __metadata__ given twice", label);
                goto out;
            }
            if (keep_metadata_(st, c) < 0) {
                wgpt_errf(err, errlen, "%s: out of memory for the metadata", label);
                goto out;
            }
            continue;
        }
        wgpt_st_tensor *t = &st->tensors[st->count];
        size_t len = strlen(c->string) + 1;
        memcpy(np, c->string, len);
        t->name = np;
        np += len;
        if (tensor_entry_(c, t, &spans[st->count].begin, &spans[st->count].end, label, err, errlen) < 0) goto out;
        spans[st->count].index = st->count;
        st->count++;
    }
    if (check_tiling_(spans, n, data_size, st->tensors, label, err, errlen) < 0) goto out;
    for (size_t i = 0; i < n; i++) st->tensors[spans[i].index].data = data + spans[i].begin;
    qsort(st->tensors, n, sizeof *st->tensors, by_name_);
    for (size_t i = 1; i < n; i++)
        if (strcmp(st->tensors[i].name, st->tensors[i - 1].name) == 0) {
            wgpt_errf(err, errlen, "%s: tensor '%s' appears twice", label, st->tensors[i].name);
            goto out;
        }
    rc = 0;
out:
    free(spans);
    return rc;
}

// b: the first bytes of a file of `size` bytes: the 8-byte length and, once
// that is in bounds, the whole JSON header; data: the data buffer (NULL: it
// follows the header in b).
static int parse_(wgpt_safetensors *st, const unsigned char *b, size_t size, const unsigned char *data,
                  const char *label, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    if (size < 8)
        return wgpt_errf(err, errlen, "%s: %zu bytes, too short for a safetensors file (8-byte header length first)",
                     label, size);
    uint64_t n = (uint64_t)le32_(b) | (uint64_t)le32_(b + 4) << 32;
    if (n < 2 || n > WGPT_ST_MAX_HEADER || n > size - 8)
        return wgpt_errf(err, errlen,
                     "%s: header length %llu is outside [2, %llu] or past the file's end (%zu bytes): not a "
                     "safetensors file",
                     label, (unsigned long long)n, (unsigned long long)WGPT_ST_MAX_HEADER, size);
    const char *h = (const char *)b + 8;
    if (h[0] != '{') return wgpt_errf(err, errlen, "%s: the header does not start with '{': not a safetensors file", label);
    const char *nul = memchr(h, 0, (size_t)n);
    if (nul) return wgpt_errf(err, errlen, "%s: a NUL byte at byte %zu of the JSON header", label, (size_t)(nul - h));
    size_t bad = utf8_bad_((const unsigned char *)h, (size_t)n);
    if (bad < n) return wgpt_errf(err, errlen, "%s: the JSON header is not UTF-8 (byte %zu)", label, bad);
    bad = nul_escape_(h, (size_t)n);
    if (bad < n) return wgpt_errf(err, errlen, "%s: the JSON header holds \\u0000 (byte %zu)", label, bad);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)n, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= h && at <= h + n ? (size_t)(at - h) : 0;
        return wgpt_errf(err, errlen, "%s: the header is not valid JSON (near byte %zu of %llu)", label, off,
                     (unsigned long long)n);
    }
    int rc = -1;
    while (end && end < h + n && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (!cJSON_IsObject(root)) wgpt_errf(err, errlen, "%s: the header is not a JSON object", label);
    else if (end != h + n) wgpt_errf(err, errlen, "%s: bytes after the JSON header's end (byte %zu)", label, (size_t)(end - h));
    else rc = read_entries_(st, root, data ? data : b + 8 + n, size - 8 - n, label, err, errlen);
    cJSON_Delete(root);
    if (rc < 0) {
        wgpt_safetensors_close(st);
        return -1;
    }
    st->bytes = b;
    st->size = size;
    return 0;
}

int wgpt_safetensors_parse(wgpt_safetensors *st, const void *bytes, size_t size, const char *label, char *err,
                           size_t errlen) {
    return parse_(st, bytes, size, NULL, label, err, errlen);
}

// Reads n bytes at off whole; -1 if the file ended first or failed.
static int pread_all_(int fd, unsigned char *b, size_t n, off_t off) {
    while (n) {
        ssize_t k = pread(fd, b, n, off);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) errno = 0;  // the end of the file: no system error
        if (k <= 0) return -1;
        b += k, n -= (size_t)k, off += k;
    }
    return 0;
}

int wgpt_safetensors_open(wgpt_safetensors *st, const char *path, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    // O_NONBLOCK: a FIFO must not hang the open; it is refused just below.
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return wgpt_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wgpt_errf(err, errlen, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    // The header is read, not mapped: only the tensors' bytes are read through
    // the map, where the readers guard against the file shrinking (bus_guard.h).
    unsigned char len8[8] = {0}, *head = NULL;
    size_t hl = size < 8 ? size : 8;
    uint64_t n = 0;
    if (hl == 8 && pread_all_(fd, len8, 8, 0) == 0) n = (uint64_t)le32_(len8) | (uint64_t)le32_(len8 + 4) << 32;
    if (n >= 2 && n <= WGPT_ST_MAX_HEADER && n <= size - 8) hl = 8 + (size_t)n;
    void *map = NULL;
    int rc = -1;
    if (!(head = malloc(hl ? hl : 1))) wgpt_errf(err, errlen, "%s: out of memory for a %zu-byte header", path, hl);
    else if ((hl && pread_all_(fd, head, hl, 0) < 0) || (hl >= 8 && memcmp(head, len8, 8) != 0))
        wgpt_errf(err, errlen, "%s: cannot read its header: %s", path,
                  errno ? strerror(errno) : "the file changed while it was read");
    else if (size > hl && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        map = NULL, wgpt_errf(err, errlen, "%s: cannot map %zu bytes: %s", path, size, strerror(errno));
    else if (parse_(st, head, size, map ? (const unsigned char *)map + hl : head + hl, path, err, errlen) == 0)
        rc = 0;
    close(fd);
    if (rc < 0) {
        if (map) munmap(map, size);
        free(head);
        return -1;
    }
    st->head = head;  // st->bytes points into it
    st->map = map;
    st->map_size = map ? size : 0;
    return 0;
}

void wgpt_safetensors_close(wgpt_safetensors *st) {
    free(st->tensors);
    free(st->names);
    free(st->meta);
    free(st->head);
    if (st->map) munmap(st->map, st->map_size);
    memset(st, 0, sizeof *st);
}

const wgpt_st_tensor *wgpt_safetensors_find(const wgpt_safetensors *st, const char *name) {
    size_t lo = 0, hi = st->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->tensors[mid].name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

// ---- writing ----

unsigned char *wgpt_safetensors_header(const wgpt_st_spec *t, size_t n, const char *meta_key, const char *meta_value,
                                       size_t *len, char *err, size_t errlen) {
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    unsigned char *out = NULL;
    char *json = NULL;
    if (!root || !meta || !cJSON_AddStringToObject(meta, "format", "pt")) goto oom;
    if (meta_key && !cJSON_AddStringToObject(meta, meta_key, meta_value)) goto oom;
    cJSON_AddItemToObject(root, "__metadata__", meta);
    meta = NULL;
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t count = 1;
        double dims[WGPT_ST_MAX_DIMS];
        for (uint32_t k = 0; k < t[i].ndim; k++) count *= t[i].shape[k], dims[k] = (double)t[i].shape[k];
        // cJSON prints whole numbers below 1e15 exactly (15 significant digits)
        if (count > (uint64_t)1e14 / 4 || at > (uint64_t)1e14) {
            wgpt_errf(err, errlen, "tensor '%s': too large for this writer (%llu elements)", t[i].name,
                  (unsigned long long)count);
            goto fail;
        }
        double offs[2] = {(double)at, (double)(at + 4 * count)};
        at += 4 * count;
        cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateDoubleArray(dims, (int)t[i].ndim);
        cJSON *o = cJSON_CreateDoubleArray(offs, 2);
        if (!e || !shape || !o || !cJSON_AddStringToObject(e, "dtype", "F32")) {
            cJSON_Delete(e), cJSON_Delete(shape), cJSON_Delete(o);
            goto oom;
        }
        cJSON_AddItemToObject(e, "shape", shape);
        cJSON_AddItemToObject(e, "data_offsets", o);
        cJSON_AddItemToObject(root, t[i].name, e);
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) goto oom;
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;  // 8 + padded: the data starts 8-byte aligned
    out = malloc(8 + padded);
    if (!out) goto oom;
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, json, jl);
    memset(out + 8 + jl, ' ', padded - jl);
    *len = 8 + padded;
    free(json);
    cJSON_Delete(root);
    return out;
oom:
    wgpt_errf(err, errlen, "out of memory writing a safetensors header");
fail:
    free(json);
    cJSON_Delete(meta);
    cJSON_Delete(root);
    return NULL;
}
