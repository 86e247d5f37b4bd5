// corpus.c: text -> documents -> token shards in a temporary folder; the
// replacement of the folder's shard set is in corpus_swap.c (see corpus.h).
#include "data/corpus.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus_internal.h"
#include "data/shard.h"
#include "util/err.h"

#define DEFAULT_CHUNK (1u << 20)
// Pending text without an exact cut is cut anyway past this many chunks.
#define HARD_CHUNKS 4

typedef struct out_ {
    const char *kind;  // "train" or "val": the file name prefix
    wgpt_shard_writer w;
    int open;
    uint32_t next_index;
    uint64_t tokens, docs;
} out_;

typedef struct run_ {
    const wgpt_corpus_opts *o;
    const char *tmp_dir;  // where the shards are written
    size_t chunk;
    out_ train, val;
    wgpt_shard_set *written;  // finished shards, names in tmp_dir
    uint32_t *ids;            // ids of the current piece of text
    size_t nids, capids;
    uint16_t *ids16;  // (chunk) staging for the writer
    // The current document: its text not yet encoded and where it goes.
    char *text;
    size_t len, cap;
    int in_doc, doc_has_text;
    out_ *doc_out;
    wgpt_corpus_result *res;
    char *err;
    size_t errlen;
} run_;

#define FAIL_(r, ...) wgpt_errf((r)->err, (r)->errlen, __VA_ARGS__)

static int stopped_(const run_ *r) { return r->o->stop && *r->o->stop; }

static int finish_shard_(run_ *r, out_ *o) {
    uint64_t n = o->w.n;
    const char *slash = strrchr(o->w.path, '/');
    char name[64];
    snprintf(name, sizeof name, "%s", slash ? slash + 1 : o->w.path);
    o->open = 0;
    if (wgpt_shard_writer_finish(&o->w, r->err, r->errlen) < 0) return -1;
    if (wgpt_shard_set_add(r->written, name, WGPT_SHARD_HEADER_BYTES + 2 * n) < 0)
        return FAIL_(r, "out of host memory");
    return 0;
}

// Writes ids to o's shards, starting a new shard whenever one is full.
static int emit_(run_ *r, out_ *o, const uint32_t *ids, size_t n) {
    while (n) {
        if (!o->open) {
            char path[4200];
            if (o->next_index > 999999) return FAIL_(r, "more than a million %s shards: raise --shard-tokens", o->kind);
            snprintf(path, sizeof path, "%s/%s_%06u.bin", r->tmp_dir, o->kind, o->next_index);
            if (wgpt_shard_writer_begin(&o->w, path, wgpt_tokenizer_name(r->o->tok), r->err, r->errlen) < 0)
                return -1;
            o->open = 1;
            o->next_index++;
        }
        uint64_t room = r->o->shard_tokens - o->w.n;
        size_t m = n < room ? n : (size_t)room;
        if (m > r->chunk) m = r->chunk;
        for (size_t i = 0; i < m; i++) r->ids16[i] = (uint16_t)ids[i];  // ids < vocab <= 65536
        if (wgpt_shard_writer_append(&o->w, r->ids16, m, r->err, r->errlen) < 0) return -1;
        o->tokens += m;
        ids += m;
        n -= m;
        if (o->w.n == r->o->shard_tokens && finish_shard_(r, o) < 0) return -1;
    }
    return 0;
}

// Encodes the first k bytes of the document's pending text and writes their ids.
static int flush_(run_ *r, const char *name, size_t k) {
    if (!k) return 0;
    r->nids = 0;
    if (wgpt_tokenizer_encode(r->o->tok, r->text, k, &r->ids, &r->nids, &r->capids) < 0)
        return FAIL_(r, "%s: the %s tokenizer could not encode a piece of %zu bytes (out of memory?)", name,
                     wgpt_tokenizer_name(r->o->tok), k);
    memmove(r->text, r->text + k, r->len - k);
    r->len -= k;
    return emit_(r, r->doc_out, r->ids, r->nids);
}

// Starts a document: picks train or val and writes the end-of-text token.
static int begin_doc_(run_ *r) {
    double total = (double)(r->train.tokens + r->val.tokens);
    r->doc_out = (double)r->val.tokens < r->o->val_fraction * total ? &r->val : &r->train;
    r->doc_out->docs++;
    r->in_doc = 1;
    r->doc_has_text = 0;
    int64_t eot = wgpt_tokenizer_eot(r->o->tok);
    if (eot < 0) return 0;
    uint32_t id = (uint32_t)eot;
    return emit_(r, r->doc_out, &id, 1);
}

static int end_doc_(run_ *r, const char *name) {
    if (!r->in_doc) return 0;
    r->in_doc = 0;
    return flush_(r, name, r->len);
}

// Text may be cut before `line` when it ends in "X\n" and the line starts with
// Y, X and Y not white space: GPT-2's pattern then makes "\n" a piece of its
// own either way, so the pieces (and ids) are those of the uncut text.
static int safe_cut_(const run_ *r, const char *line, size_t n) {
    return r->len >= 2 && r->text[r->len - 1] == '\n' && !isspace((unsigned char)r->text[r->len - 2]) && n &&
           !isspace((unsigned char)line[0]);
}

// Adds a piece of a line: the whole line (`whole`: it ends in '\n' or the
// file) or a part of a longer one; line_start: it begins the line.
static int add_piece_(run_ *r, const char *name, const char *p, size_t n, int line_start, int whole) {
    if (!r->in_doc && begin_doc_(r) < 0) return -1;
    if (line_start && r->len >= r->chunk && safe_cut_(r, p, n) && flush_(r, name, r->len) < 0) return -1;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return FAIL_(r, "%s: out of host memory for %zu bytes of text", name, r->len + n);
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, p, n);
    r->len += n;
    // Text that offers no cut at line starts (long lines, lines that start
    // with spaces): cut where the tokenizer says the ids stay the same, or,
    // in one "word" of megabytes, anyway. This bounds the memory.
    if (r->len >= HARD_CHUNKS * r->chunk) {
        size_t k = wgpt_tokenizer_cut_point(r->o->tok, r->text, r->len);
        if (k == 0) k = r->len, r->res->forced_cuts++;
        if (flush_(r, name, k) < 0) return -1;
    }
    int blank = line_start && whole && ((n == 1 && p[0] == '\n') || (n == 2 && p[0] == '\r' && p[1] == '\n'));
    // The blank line stays with the document it ends, so that decoding the
    // documents in order gives the text back.
    if (blank && r->doc_has_text && !r->o->split_files) return end_doc_(r, name);
    if (!blank) r->doc_has_text = 1;
    return 0;
}

// Reads the rest of a line, at most max bytes of it, into *buf. Returns the
// byte count (0 at the end of the file); *whole says whether it ended the line.
static size_t read_piece_(FILE *f, char **buf, size_t *cap, size_t max, int *whole) {
    size_t n = 0;
    *whole = 0;
    int c;
    while (n < max && (c = getc_unlocked(f)) != EOF) {
        if (n == *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            char *b = realloc(*buf, nc);
            if (!b) return (size_t)-1;
            *buf = b;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
        if (c == '\n') {
            *whole = 1;
            return n;
        }
    }
    if (n && n < max) *whole = 1;  // the file's last line, without a newline
    return n;
}

static int read_file_(run_ *r, const char *path) {
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    // A FIFO is a fine input (`<(command)`): this open may wait for a writer.
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return FAIL_(r, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n;
    int rc = 0, whole, line_start = 1;
    while (rc == 0 && !stopped_(r)) {
        n = read_piece_(f, &buf, &cap, r->chunk, &whole);
        if (n == (size_t)-1) rc = FAIL_(r, "%s: out of host memory reading a line", name);
        if (n == 0 || rc) break;
        r->res->bytes += n;
        rc = add_piece_(r, name, buf, n, line_start, whole);
        line_start = whole;
    }
    if (rc == 0 && stopped_(r)) rc = FAIL_(r, "interrupted");
    if (rc == 0 && ferror(f)) rc = FAIL_(r, "%s: read error: %s", name, strerror(errno));
    free(buf);
    if (!is_stdin) fclose(f);
    if (rc == 0) rc = end_doc_(r, name);  // a document never spans files
    r->res->files++;
    return rc;
}

static void free_run_(run_ *r) {
    if (r->train.open) wgpt_shard_writer_abort(&r->train.w);
    if (r->val.open) wgpt_shard_writer_abort(&r->val.w);
    free(r->ids);
    free(r->ids16);
    free(r->text);
}

// Reads every input into shards in tmp_dir; *written lists them.
static int write_shards_(const wgpt_corpus_opts *o, const char *tmp_dir, char *const *inputs, size_t n,
                         wgpt_shard_set *written, wgpt_corpus_result *res, char *err, size_t errlen) {
    run_ r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.tmp_dir = tmp_dir;
    r.chunk = o->chunk ? o->chunk : DEFAULT_CHUNK;
    r.train.kind = "train";
    r.val.kind = "val";
    r.written = written;
    r.res = res;
    r.err = err;
    r.errlen = errlen;
    int rc = 0;
    r.ids16 = malloc(r.chunk * sizeof *r.ids16);
    if (!r.ids16) rc = FAIL_(&r, "out of host memory");
    for (size_t i = 0; rc == 0 && i < n; i++) rc = read_file_(&r, inputs[i]);
    if (rc == 0 && r.train.tokens + r.val.tokens == 0)
        rc = FAIL_(&r, "no text in %s%s", inputs[0], n > 1 ? " and the other input files" : "");
    if (rc == 0 && r.train.open) rc = finish_shard_(&r, &r.train);
    if (rc == 0 && r.val.open) rc = finish_shard_(&r, &r.val);
    res->train_tokens = r.train.tokens, res->val_tokens = r.val.tokens;
    res->train_shards = r.train.next_index, res->val_shards = r.val.next_index;
    res->docs = r.train.docs + r.val.docs;
    free_run_(&r);
    return rc;
}

int wgpt_corpus_tokenize(const wgpt_corpus_opts *o, char *const *inputs, size_t n, wgpt_corpus_result *res,
                         char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    if (!n) return wgpt_errf(err, errlen, "no input files");
    if (o->shard_tokens < 1 || o->shard_tokens > WGPT_SHARD_MAX_TOKENS)
        return wgpt_errf(err, errlen, "--shard-tokens %llu: allowed 1 to %llu",
                                 (unsigned long long)o->shard_tokens, (unsigned long long)WGPT_SHARD_MAX_TOKENS);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1))
        return wgpt_errf(err, errlen, "--val-fraction %g: allowed [0, 1)", o->val_fraction);
    uint32_t vocab = wgpt_tokenizer_vocab_size(o->tok);
    if (vocab > 65536)
        return wgpt_errf(err, errlen, "the %s tokenizer has %u ids; shards hold uint16 ids (at most 65536)",
                                 wgpt_tokenizer_name(o->tok), vocab);
    wgpt_corpus_dest d;
    if (wgpt_corpus_dest_open_(&d, o->out_dir, o->force, err, errlen) < 0) return -1;
    wgpt_shard_set written;
    memset(&written, 0, sizeof written);
    int rc = write_shards_(o, d.tmp_dir, inputs, n, &written, res, err, errlen);
    if (rc == 0) rc = wgpt_corpus_dest_swap_(&d, &written, wgpt_tokenizer_name(o->tok), &res->set, err, errlen);
    if (rc == 0) snprintf(res->note, sizeof res->note, "%s", d.note);
    wgpt_corpus_dest_close_(&d);  // removes the temporary folder and what is left in it
    wgpt_shard_set_free(&written);
    if (rc < 0) wgpt_shard_set_free(&res->set);
    return rc;
}
