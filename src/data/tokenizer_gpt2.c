// tokenizer_gpt2.c: reads GPT-2's encoder.json and vocab.bpe into a tokenizer.
// Both files spell each byte as one printable character (encoder.py's
// bytes_to_unicode); tokens are stored here as the raw bytes they stand for.
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "data/tokenizer_internal.h"
#include "util/err.h"
#include "util/fs.h"

enum {
    GPT2_VOCAB = 50257,
    GPT2_EOT = 50256,
    GPT2_MERGES = GPT2_VOCAB - 256 - 1,  // every merge adds one token to the 256 bytes
    MAX_FILE = 64 << 20,                 // GPT-2's files are 1 MB and 0.5 MB
};
static const char EOT_TEXT[] = "<|endoftext|>";

// The whole file, nul-terminated; NULL with err. The caller frees it.
static char *read_file_(const char *path, size_t *len, char *err, size_t errlen) {
    char why[4200];
    FILE *f = wgpt_fopen_regular(path, "rb", why, sizeof why);
    if (!f) {
        wgpt_errf(err, errlen, "%s (GPT-2's tokenizer files come from scripts/setup.sh; see --bpe-dir)", why);
        return NULL;
    }
    char *s = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        wgpt_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    } else if (n > MAX_FILE) {
        wgpt_errf(err, errlen, "%s: is %ld bytes, more than the %d a tokenizer file may have", path, n, MAX_FILE);
    } else if (!(s = malloc((size_t)n + 1))) {
        wgpt_errf(err, errlen, "%s: out of memory for %ld bytes", path, n);
    } else if (fread(s, 1, (size_t)n, f) != (size_t)n) {
        wgpt_errf(err, errlen, "%s: cannot read %ld bytes: %s", path, n, ferror(f) ? strerror(errno) : "file shrank");
        free(s);
        s = NULL;
    } else {
        s[n] = 0;
        *len = (size_t)n;
    }
    fclose(f);
    return s;
}

// encoder.py's bytes_to_unicode, inverted: the byte each code point stands
// for (-1: none). Printable Latin-1 stands for itself; the other 68 bytes, in
// order, are U+0100..U+0143.
enum { MAP_CPS = 256 + 68 };
static void byte_of_cp_(int map[MAP_CPS]) {
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        map[b] = printable ? b : -1;
        if (!printable) map[next++] = b;
    }
}

// Writes the bytes that the GPT-2 symbol s[0, len) stands for to out (room
// for len bytes). Returns their count, or -1 if s holds a character outside
// the map (*bad: its byte offset in s).
static long unmap_(const int map[MAP_CPS], const char *s, size_t len, char *out, size_t *bad) {
    const unsigned char *u = (const unsigned char *)s;
    long n = 0;
    for (size_t i = 0; i < len;) {
        int cp = -1, w = 1;
        if (u[i] < 0x80) {
            cp = u[i];
        } else if (u[i] >= 0xC2 && u[i] <= 0xDF && i + 1 < len && (u[i + 1] & 0xC0) == 0x80) {
            cp = (u[i] & 0x1F) << 6 | (u[i + 1] & 0x3F);
            w = 2;
        }
        if (cp < 0 || cp >= MAP_CPS || map[cp] < 0) {
            *bad = i;
            return -1;
        }
        out[n++] = (char)map[cp];
        i += (size_t)w;
    }
    return n;
}

// Line and column (from 1) of byte `at` of text, for JSON error messages.
static void line_col_(const char *text, size_t at, size_t *line, size_t *col) {
    *line = 1;
    size_t start = 0;
    for (size_t i = 0; i < at; i++)
        if (text[i] == '\n') {
            (*line)++;
            start = i + 1;
        }
    *col = at - start + 1;
}

// cJSON ends a string at a \u0000 escape (it keeps C strings), so a token
// holding one would lose its tail unseen; no GPT-2 token holds U+0000 (byte 0
// is spelled U+0100). The offset of the first such escape, or len if none.
static size_t nul_escape_(const char *s, size_t len) {
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 6 <= len && memcmp(s + i + 2, "0000", 4) == 0) return i;
        i++;  // the escaped character: the second backslash of "\\" starts nothing
    }
    return len;
}

// Fills t->bytes, t->off (GPT2_VOCAB tokens) from encoder.json. -1 with err.
static int read_encoder_(wgpt_tokenizer *t, const char *path, const int map[MAP_CPS], char *err, size_t errlen) {
    size_t len = 0;
    char *text = read_file_(path, &len, err, errlen);
    if (!text) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    const char **key = NULL;  // (GPT2_VOCAB) the token of each id, as the file spells it
    int rc = -1;
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len, line, col, last = len;
        line_col_(text, at, &line, &col);
        while (last > 0 && strchr(" \t\r\n", text[last - 1])) last--;
        wgpt_errf(err, errlen, "%s: not valid JSON (line %zu, column %zu)%s", path, line, col,
              last > 0 && text[last - 1] != '}' ? "; it ends before its closing '}': truncated?" : "");
        goto done;
    }
    size_t nul = nul_escape_(text, len);
    if (nul < len) {
        size_t line, col;
        line_col_(text, nul, &line, &col);
        wgpt_errf(err, errlen, "%s: line %zu, column %zu: a string holds \\u0000, which no GPT-2 token has", path, line,
              col);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        wgpt_errf(err, errlen, "%s: expected a JSON object of token -> id, found %s", path,
              cJSON_IsArray(root) ? "an array" : "a single value");
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    if (count != GPT2_VOCAB) {
        wgpt_errf(err, errlen, "%s: has %d entries, GPT-2's vocabulary has %d", path, count, GPT2_VOCAB);
        goto done;
    }
    key = calloc(GPT2_VOCAB, sizeof *key);
    size_t total = 0;
    if (!key) goto oom;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(v >= 0 && v < GPT2_VOCAB) || v != (double)(long)v) {
            char *shown = cJSON_PrintUnformatted(it);
            wgpt_errf(err, errlen, "%s: token \"%.40s\" has id %.40s; ids are whole numbers 0..%d", path, it->string,
                  shown ? shown : "?", GPT2_VOCAB - 1);
            free(shown);
            goto done;
        }
        long id = (long)v;
        if (key[id]) {
            wgpt_errf(err, errlen, "%s: id %ld is given twice, to \"%.40s\" and \"%.40s\"", path, id, key[id], it->string);
            goto done;
        }
        key[id] = it->string;
        total += strlen(it->string);
    }
    // GPT2_VOCAB entries with distinct ids in 0..GPT2_VOCAB-1: every id has a token.
    if (strcmp(key[GPT2_EOT], EOT_TEXT) != 0) {
        wgpt_errf(err, errlen, "%s: id %d is \"%.40s\"; GPT-2's end-of-text token %s should be there", path, GPT2_EOT,
              key[GPT2_EOT], EOT_TEXT);
        goto done;
    }
    t->bytes = malloc(total ? total : 1);
    t->off = malloc((GPT2_VOCAB + 1) * sizeof *t->off);
    if (!t->bytes || !t->off) goto oom;
    uint32_t pos = 0;
    for (uint32_t id = 0; id < GPT2_VOCAB; id++) {
        t->off[id] = pos;
        size_t bad = 0, klen = strlen(key[id]);
        if (klen == 0) {
            wgpt_errf(err, errlen, "%s: id %u is the empty string; every token has at least one byte", path, id);
            goto done;
        }
        long n = unmap_(map, key[id], klen, t->bytes + pos, &bad);
        if (n < 0) {
            wgpt_errf(err, errlen,
                  "%s: token \"%.40s\" (id %u) has a character (at byte %zu) outside GPT-2's byte-to-unicode map",
                  path, key[id], id, bad);
            goto done;
        }
        pos += (uint32_t)n;
    }
    t->off[GPT2_VOCAB] = pos;
    rc = 0;
    goto done;
oom:
    wgpt_errf(err, errlen, "%s: out of memory", path);
done:
    free(key);
    cJSON_Delete(root);
    free(text);
    return rc;
}

// Adds vocab.bpe's merges, in rank order, to t->bpe. -1 with err.
static int read_merges_(wgpt_tokenizer *t, const char *path, const int map[MAP_CPS], char *err, size_t errlen) {
    size_t len = 0;
    char *text = read_file_(path, &len, err, errlen);
    if (!text) return -1;
    char *buf = malloc(len + 1);  // the bytes of one symbol
    int rc = -1;
    uint32_t nmerges = 0;
    if (!buf) {
        wgpt_errf(err, errlen, "%s: out of memory", path);
        goto done;
    }
    size_t lineno = 0;
    for (size_t at = 0; at < len;) {
        char *line = text + at;
        char *nl = memchr(line, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - line) : len - at;
        at += ll + (nl ? 1 : 0);
        lineno++;
        if (ll && line[ll - 1] == '\r') ll--;
        line[ll] = 0;
        const char *zero = memchr(line, 0, ll);  // the symbols are C strings from here on: one would end there
        if (zero) {
            wgpt_errf(err, errlen, "%s:%zu: a NUL byte at byte %zu of the line (vocab.bpe is text)", path, lineno,
                  (size_t)(zero - line) + 1);
            goto done;
        }
        if (lineno == 1) {  // encoder.py skips the first line: "#version: 0.2"
            if (line[0] != '#') {
                wgpt_errf(err, errlen, "%s:1: expected a header such as \"#version: 0.2\", found \"%.40s\"", path, line);
                goto done;
            }
            continue;
        }
        char *sp = memchr(line, ' ', ll);
        if (!sp || sp == line || sp == line + ll - 1 || memchr(sp + 1, ' ', ll - (size_t)(sp + 1 - line)) ||
            strpbrk(line, "\t\v\f\r")) {
            wgpt_errf(err, errlen, "%s:%zu: cannot parse merge \"%.60s\": expected two symbols separated by one space",
                  path, lineno, line);
            goto done;
        }
        *sp = 0;
        const char *sym[2] = {line, sp + 1};
        uint32_t id[2];
        for (int k = 0; k < 2; k++) {
            size_t bad = 0;
            long n = unmap_(map, sym[k], strlen(sym[k]), buf, &bad);
            int64_t found = n < 0 ? -1 : wgpt_bpe_find(t->bpe, buf, (size_t)n);
            if (found < 0) {
                wgpt_errf(err, errlen, "%s:%zu: symbol \"%.40s\" %s", path, lineno, sym[k],
                      n < 0 ? "has a character outside GPT-2's byte-to-unicode map" : "is not a token of encoder.json");
                goto done;
            }
            id[k] = (uint32_t)found;
        }
        if (nmerges == GPT2_MERGES) {
            wgpt_errf(err, errlen, "%s:%zu: one merge too many: GPT-2 has %d (%d tokens - 256 bytes - %s)", path, lineno,
                  GPT2_MERGES, GPT2_VOCAB, EOT_TEXT);
            goto done;
        }
        uint32_t rank = 0;
        int r = wgpt_bpe_add_merge(t->bpe, id[0], id[1], &rank);
        if (r == WGPT_BPE_NO_RESULT) {
            wgpt_errf(err, errlen,
                  "%s:%zu: merge \"%.40s %.40s\" makes \"%.40s%.40s\", which is not a token of encoder.json", path,
                  lineno, sym[0], sym[1], sym[0], sym[1]);
            goto done;
        } else if (r == WGPT_BPE_REPEATED) {
            wgpt_errf(err, errlen, "%s:%zu: merge \"%.40s %.40s\" repeats line %u", path, lineno, sym[0], sym[1], rank + 2);
            goto done;
        } else if (r != WGPT_BPE_OK) {
            wgpt_errf(err, errlen, "%s: out of memory", path);
            goto done;
        }
        nmerges++;
    }
    if (nmerges != GPT2_MERGES) {
        wgpt_errf(err, errlen, "%s: has %u merges; GPT-2 has %d (%d tokens - 256 bytes - %s)", path, nmerges, GPT2_MERGES,
              GPT2_VOCAB, EOT_TEXT);
        goto done;
    }
    rc = 0;
done:
    free(buf);
    free(text);
    return rc;
}

wgpt_tokenizer *wgpt_tokenizer_open_gpt2(const char *encoder_json, const char *vocab_bpe, char *err, size_t errlen) {
    int map[MAP_CPS];
    byte_of_cp_(map);
    wgpt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        wgpt_errf(err, errlen, "out of memory for the GPT-2 tokenizer");
        return NULL;
    }
    t->name = "gpt2";
    t->vocab_size = GPT2_VOCAB;
    t->eot = GPT2_EOT;
    if (read_encoder_(t, encoder_json, map, err, errlen) < 0) goto fail;
    uint32_t dup_a, dup_b;
    t->bpe = wgpt_bpe_create(t->bytes, t->off, GPT2_VOCAB, &dup_a, &dup_b);
    if (!t->bpe) {
        if (dup_a == UINT32_MAX)
            wgpt_errf(err, errlen, "%s: out of memory", encoder_json);
        else
            wgpt_errf(err, errlen, "%s: ids %u and %u are the same token", encoder_json, dup_a, dup_b);
        goto fail;
    }
    for (int c = 0; c < 256; c++) {
        char ch = (char)c;
        if (wgpt_bpe_find(t->bpe, &ch, 1) < 0) {
            wgpt_errf(err, errlen, "%s: has no token for the byte 0x%02X; GPT-2 has one for each of the 256 bytes",
                  encoder_json, c);
            goto fail;
        }
    }
    if (read_merges_(t, vocab_bpe, map, err, errlen) < 0) goto fail;
    int missing = -1;
    int fin = wgpt_bpe_finish(t->bpe, &missing);
    if (fin == WGPT_BPE_MISSING_BYTE) {
        wgpt_errf(err, errlen, "%s: has no token for the byte 0x%02X", encoder_json, missing);
        goto fail;
    }
    if (fin < 0) {
        wgpt_errf(err, errlen, "out of memory for the GPT-2 tokenizer");
        goto fail;
    }
    t->pretok = wgpt_pretok_compile(err, errlen);
    if (!t->pretok) goto fail;
    return t;
fail:
    wgpt_tokenizer_free(t);
    return NULL;
}
