// cmd_tokenize.c: `wgpt tokenize`: text files -> token shards (data/shard.h)
// for the data loader. Streams: memory stays at about one encoding chunk of
// text and its ids however large the corpus.
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "data/shard.h"
#include "data/tokenizer.h"

// Text is encoded in pieces of about this many bytes, cut only where the cut
// cannot change GPT-2's pre-tokenisation (see tk_safe_cut_).
#ifndef WGPT_TOKENIZE_CHUNK
#define WGPT_TOKENIZE_CHUNK (1u << 20)
#endif

static void tk_usage_(FILE *f) {
    fprintf(f,
            "usage: wgpt tokenize [--tokenizer gpt2|bytes] [--out DIR] [--shard-tokens N] [--val-fraction F]\n"
            "                     [--split blank-line|file] [--bpe-dir DIR] [--force] FILE...\n\n"
            "Encodes text files (\"-\" reads standard input) into token shards for `wgpt train`:\n"
            "DIR/train_000000.bin, train_000001.bin, ... and DIR/val_000000.bin, ... (llm.c's format:\n"
            "a 1024-byte header, then uint16 tokens).\n\n"
            "  --tokenizer T     gpt2 (GPT-2 BPE, 50257 ids; default) or bytes (one id per byte)\n"
            "  --out DIR         output folder, created if missing (default: data)\n"
            "  --shard-tokens N  tokens per shard file, suffix K, M or G allowed (default: 100M)\n"
            "  --val-fraction F  share of the tokens held out for validation, in [0, 1) (default: 0.05).\n"
            "                    Whole documents are held out: a document goes to validation when\n"
            "                    validation holds less than F of the tokens so far (so never the first).\n"
            "  --split MODE      blank-line (default): a document ends at an empty line, as llm.c splits\n"
            "                    its text corpora at \"\\n\\n\"; file: each file is one document\n"
            "  --bpe-dir DIR     folder with encoder.json and vocab.bpe (default: third_party/gpt2-bpe)\n"
            "  --force           replace train_*.bin and val_*.bin shards already in DIR\n\n"
            "With gpt2, every document starts with the end-of-text token 50256 (as llm.c's data\n"
            "scripts do); bytes has no such token and documents simply follow one another.\n");
}

typedef struct tk_out {
    const char *kind;  // "train" or "val": the file name prefix
    wgpt_shard_writer w;
    int open;
    uint32_t next_index;
    uint64_t tokens, docs;
} tk_out;

typedef struct tk_run {
    const wgpt_tokenizer *tok;
    const char *dir;
    uint64_t shard_tokens;
    double val_fraction;
    int split_files;
    tk_out train, val;
    char **written;  // finished shards of this run: removed if the run fails
    size_t nwritten;
    uint32_t *ids;  // ids of the current piece of text
    size_t nids, capids;
    uint16_t *ids16;  // (WGPT_TOKENIZE_CHUNK) staging for the writer
    // The current document: its text not yet encoded and where it goes.
    char *text;
    size_t len, cap;
    int in_doc, doc_has_text;
    tk_out *doc_out;
    uint64_t files, bytes;
    char err[1024];
} tk_run;

static int tk_fail_(tk_run *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int tk_finish_shard_(tk_run *r, tk_out *o) {
    char path[4096];
    snprintf(path, sizeof path, "%s", o->w.path);
    uint64_t n = o->w.n;
    o->open = 0;
    if (wgpt_shard_writer_finish(&o->w, r->err, sizeof r->err) < 0) return -1;
    char **w = realloc(r->written, (r->nwritten + 1) * sizeof *w);
    char *copy = strdup(path);
    if (!w || !copy) {
        free(copy);
        if (w) r->written = w;
        unlink(path);
        return tk_fail_(r, "out of host memory");
    }
    r->written = w;
    r->written[r->nwritten++] = copy;
    printf("wrote %s (%llu tokens)\n", path, (unsigned long long)n);
    return 0;
}

// Writes ids to o's shards, starting a new shard whenever one is full.
static int tk_emit_(tk_run *r, tk_out *o, const uint32_t *ids, size_t n) {
    while (n) {
        if (!o->open) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s_%06u.bin", r->dir, o->kind, o->next_index) >= (int)sizeof path)
                return tk_fail_(r, "%s: output folder name too long", r->dir);
            if (wgpt_shard_writer_begin(&o->w, path, r->err, sizeof r->err) < 0) return -1;
            o->open = 1;
            o->next_index++;
        }
        uint64_t room = r->shard_tokens - o->w.n;
        size_t m = n < room ? n : (size_t)room;
        if (m > WGPT_TOKENIZE_CHUNK) m = WGPT_TOKENIZE_CHUNK;
        for (size_t i = 0; i < m; i++) r->ids16[i] = (uint16_t)ids[i];  // ids < vocab <= 65536
        if (wgpt_shard_writer_append(&o->w, r->ids16, m, r->err, sizeof r->err) < 0) return -1;
        o->tokens += m;
        ids += m;
        n -= m;
        if (o->w.n == r->shard_tokens && tk_finish_shard_(r, o) < 0) return -1;
    }
    return 0;
}

// Encodes the document's pending text and writes its ids.
static int tk_flush_(tk_run *r, const char *name) {
    if (!r->len) return 0;
    r->nids = 0;
    if (wgpt_tokenizer_encode(r->tok, r->text, r->len, &r->ids, &r->nids, &r->capids) < 0)
        return tk_fail_(r, "%s: the %s tokenizer could not encode a piece of %zu bytes (out of memory?)", name,
                        wgpt_tokenizer_name(r->tok), r->len);
    r->len = 0;
    return tk_emit_(r, r->doc_out, r->ids, r->nids);
}

// Starts a document: picks train or val and writes the end-of-text token.
static int tk_begin_doc_(tk_run *r) {
    double total = (double)(r->train.tokens + r->val.tokens);
    r->doc_out = (double)r->val.tokens < r->val_fraction * total ? &r->val : &r->train;
    r->doc_out->docs++;
    r->in_doc = 1;
    r->doc_has_text = 0;
    int64_t eot = wgpt_tokenizer_eot(r->tok);
    if (eot < 0) return 0;
    uint32_t id = (uint32_t)eot;
    return tk_emit_(r, r->doc_out, &id, 1);
}

static int tk_end_doc_(tk_run *r, const char *name) {
    if (!r->in_doc) return 0;
    r->in_doc = 0;
    return tk_flush_(r, name);
}

// Text may be cut before `line` when it ends in "X\n" and the line starts with
// Y, X and Y not white space: GPT-2's pattern then makes "\n" a piece of its
// own either way, so the pieces (and ids) are those of the uncut text.
static int tk_safe_cut_(const tk_run *r, const char *line, size_t n) {
    return r->len >= 2 && r->text[r->len - 1] == '\n' && !isspace((unsigned char)r->text[r->len - 2]) && n &&
           !isspace((unsigned char)line[0]);
}

static int tk_add_line_(tk_run *r, const char *name, const char *line, size_t n) {
    if (!r->in_doc && tk_begin_doc_(r) < 0) return -1;
    if (r->len >= WGPT_TOKENIZE_CHUNK && tk_safe_cut_(r, line, n) && tk_flush_(r, name) < 0) return -1;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return tk_fail_(r, "%s: out of host memory for a line of %zu bytes", name, n);
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, line, n);
    r->len += n;
    int blank = (n == 1 && line[0] == '\n') || (n == 2 && line[0] == '\r' && line[1] == '\n');
    // The blank line stays with the document it ends, so that decoding the
    // documents in order gives the text back.
    if (blank && r->doc_has_text && !r->split_files) return tk_end_doc_(r, name);
    if (!blank) r->doc_has_text = 1;
    return 0;
}

static int tk_read_file_(tk_run *r, const char *path) {
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return tk_fail_(r, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) > 0) {
        r->bytes += (uint64_t)n;
        rc = tk_add_line_(r, name, line, (size_t)n);
    }
    if (rc == 0 && ferror(f)) rc = tk_fail_(r, "%s: read error: %s", name, strerror(errno));
    free(line);
    if (!is_stdin) fclose(f);
    if (rc == 0) rc = tk_end_doc_(r, name);  // a document never spans files
    r->files++;
    return rc;
}

// mkdir -p
static int tk_make_dir_(tk_run *r, const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return tk_fail_(r, "%s: folder name too long", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            struct stat st;
            if (stat(p, &st) != 0 && mkdir(p, 0777) != 0 && errno != EEXIST)
                return tk_fail_(r, "%s: cannot create the folder: %s", p, strerror(errno));
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) return tk_fail_(r, "%s: not a folder", p);
            *s = c;
            if (!c) return 0;
        }
    }
}

// Shards left from an earlier run would be picked up with the new ones.
static int tk_check_old_(tk_run *r, int force) {
    const char *kinds[2] = {"train", "val"};
    for (int k = 0; k < 2; k++) {
        char pat[4096];
        snprintf(pat, sizeof pat, "%s/%s_*.bin", r->dir, kinds[k]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0) continue;
        int rc = 0;
        if (!force)
            rc = tk_fail_(r,
                          "%s already holds shards (%s, %zu in all); remove them, choose another --out, or pass "
                          "--force",
                          r->dir, g.gl_pathv[0], g.gl_pathc);
        for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
            if (unlink(g.gl_pathv[i]) != 0) rc = tk_fail_(r, "%s: cannot remove: %s", g.gl_pathv[i], strerror(errno));
        globfree(&g);
        if (rc) return rc;
    }
    return 0;
}

static int tk_parse_count_(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1e3, end++;
    else if (*end == 'M' || *end == 'm') mul = 1e6, end++;
    else if (*end == 'G' || *end == 'g') mul = 1e9, end++;
    if (end == s || *end || errno || !(v * mul >= 1) || v * mul > (double)WGPT_SHARD_MAX_TOKENS) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static void tk_cleanup_(tk_run *r, int failed) {
    if (r->train.open) wgpt_shard_writer_abort(&r->train.w);
    if (r->val.open) wgpt_shard_writer_abort(&r->val.w);
    for (size_t i = 0; i < r->nwritten; i++) {
        if (failed) unlink(r->written[i]);
        free(r->written[i]);
    }
    free(r->written);
    free(r->ids);
    free(r->ids16);
    free(r->text);
}

static int tk_run_(tk_run *r, char **files, int nfiles, int force) {
    if (tk_make_dir_(r, r->dir) < 0 || tk_check_old_(r, force) < 0) return -1;
    r->ids16 = malloc(WGPT_TOKENIZE_CHUNK * sizeof *r->ids16);
    if (!r->ids16) return tk_fail_(r, "out of host memory");
    for (int i = 0; i < nfiles; i++)
        if (tk_read_file_(r, files[i]) < 0) return -1;
    if (r->train.tokens + r->val.tokens == 0)
        return tk_fail_(r, "no text in %s%s", files[0], nfiles > 1 ? " and the other input files" : "");
    if (r->train.open && tk_finish_shard_(r, &r->train) < 0) return -1;
    if (r->val.open && tk_finish_shard_(r, &r->val) < 0) return -1;
    return 0;
}

static int tk_takes_value_(const char *a) {
    const char *opts[] = {"--tokenizer", "--out", "--bpe-dir", "--shard-tokens", "--val-fraction", "--split"};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
        if (strcmp(a, opts[k]) == 0) return 1;
    return 0;
}

int wgpt_cmd_tokenize(int argc, char **argv) {
    const char *tokname = "gpt2", *bpe_dir = "third_party/gpt2-bpe";
    tk_run r;
    memset(&r, 0, sizeof r);
    r.dir = "data";
    r.shard_tokens = 100000000;
    r.val_fraction = 0.05;
    r.train.kind = "train";
    r.val.kind = "val";
    int force = 0, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tk_usage_(stdout);
            return 0;
        } else if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--force") == 0) {
            force = 1;
            continue;
        } else if (a[0] != '-' || a[1] == 0) {
            break;  // the first file ("-" is standard input)
        } else if (!tk_takes_value_(a)) {
            fprintf(stderr, "wgpt tokenize: unknown option '%s'\n\n", a);
            tk_usage_(stderr);
            return 2;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(a, "--tokenizer") == 0) {
            tokname = v;
            bad = strcmp(v, "gpt2") != 0 && strcmp(v, "bytes") != 0;
        } else if (strcmp(a, "--out") == 0) {
            r.dir = v;
        } else if (strcmp(a, "--bpe-dir") == 0) {
            bpe_dir = v;
        } else if (strcmp(a, "--shard-tokens") == 0) {
            bad = tk_parse_count_(v, &r.shard_tokens) < 0;
        } else if (strcmp(a, "--val-fraction") == 0) {
            char *end;
            r.val_fraction = strtod(v, &end);
            bad = end == v || *end || !(r.val_fraction >= 0 && r.val_fraction < 1);
        } else if (strcmp(a, "--split") == 0) {
            r.split_files = strcmp(v, "file") == 0;
            bad = !r.split_files && strcmp(v, "blank-line") != 0;
        }
        if (bad) {
            fprintf(stderr, "wgpt tokenize: bad value for %s: '%s'%s\n\n", a, v ? v : "(missing)",
                    strcmp(a, "--shard-tokens") == 0 ? " (1 to 2147483647 tokens)"
                    : strcmp(a, "--val-fraction") == 0 ? " (0 <= F < 1)"
                                                        : "");
            tk_usage_(stderr);
            return 2;
        }
        i++;
    }
    if (i >= argc) {
        fprintf(stderr, "wgpt tokenize: no input files\n\n");
        tk_usage_(stderr);
        return 2;
    }

    wgpt_tokenizer *tok;
    if (strcmp(tokname, "bytes") == 0) {
        tok = wgpt_tokenizer_open_bytes();
        if (!tok) snprintf(r.err, sizeof r.err, "out of host memory");
    } else {
        char enc[4096], bpe[4096];
        snprintf(enc, sizeof enc, "%s/encoder.json", bpe_dir);
        snprintf(bpe, sizeof bpe, "%s/vocab.bpe", bpe_dir);
        tok = wgpt_tokenizer_open_gpt2(enc, bpe, r.err, sizeof r.err);
    }
    if (!tok) {
        fprintf(stderr, "wgpt tokenize: %s%s\n", r.err, strcmp(tokname, "gpt2") == 0 ? " (see --bpe-dir)" : "");
        return 1;
    }
    r.tok = tok;
    uint32_t vocab = wgpt_tokenizer_vocab_size(tok);
    int rc = 0;
    if (vocab > 65536) rc = tk_fail_(&r, "the %s tokenizer has %u ids; shards hold uint16 ids (at most 65536)",
                                     tokname, vocab);
    if (rc == 0) rc = tk_run_(&r, argv + i, argc - i, force);
    if (rc < 0) {
        fprintf(stderr, "wgpt tokenize: %s\n", r.err);
        if (r.nwritten) fprintf(stderr, "wgpt tokenize: removed the %zu shards this run had written\n", r.nwritten);
    } else {
        uint64_t total = r.train.tokens + r.val.tokens;
        printf("%llu file%s, %llu bytes, %llu documents -> %llu tokens (%s, %u ids%s): train %llu tokens in %u "
               "shard%s, val %llu tokens (%.2f%%) in %u shard%s, in %s\n",
               (unsigned long long)r.files, r.files == 1 ? "" : "s", (unsigned long long)r.bytes,
               (unsigned long long)(r.train.docs + r.val.docs), (unsigned long long)total, tokname, vocab,
               wgpt_tokenizer_eot(tok) >= 0 ? ", end-of-text before each document" : "",
               (unsigned long long)r.train.tokens, r.train.next_index, r.train.next_index == 1 ? "" : "s",
               (unsigned long long)r.val.tokens, 100.0 * (double)r.val.tokens / (double)total, r.val.next_index,
               r.val.next_index == 1 ? "" : "s", r.dir);
        double share = (double)r.val.tokens / (double)total;
        if (r.val.tokens && share > 2 * r.val_fraction)
            printf("note: validation got %.1f%% of the tokens (asked: %.1f%%) because documents are few and large; "
                   "more files or --split blank-line give a finer split\n",
                   100 * share, 100 * r.val_fraction);
        if (r.val_fraction > 0 && r.val.tokens == 0)
            printf("note: no document went to validation (%llu in all); `wgpt train` will hold out the tail of the "
                   "last train shard instead\n",
                   (unsigned long long)(r.train.docs + r.val.docs));
    }
    tk_cleanup_(&r, rc < 0);
    wgpt_tokenizer_free(tok);
    return rc < 0 ? 1 : 0;
}
