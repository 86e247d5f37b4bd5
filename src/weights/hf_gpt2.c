// hf_gpt2.c: Hugging Face GPT-2 safetensors <-> the reference layout (the
// name mapping is in hf_gpt2.h).
#include "weights/hf_gpt2.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifndef __wasi__
#include <pthread.h>
#endif

#include "util/bus_guard.h"
#include "weights/file_out.h"
#include "weights/hf_config.h"
#include "util/err.h"
#include "util/splitmix64.h"

#define PREFIX "transformer."

// model/gpt2.h's reference order
enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB, LNFW, LNFB };

typedef struct hf_name_ {
    const char *fmt;  // without the prefix; %u: the layer
    int transposed;   // a Conv1D weight, (in, out)
} hf_name_;

static const hf_name_ HF[WGPT_GPT2_NUM_TENSORS] = {
    [WTE] = {"wte.weight", 0},          [WPE] = {"wpe.weight", 0},
    [LN1W] = {"h.%u.ln_1.weight", 0},   [LN1B] = {"h.%u.ln_1.bias", 0},
    [QKVW] = {"h.%u.attn.c_attn.weight", 1}, [QKVB] = {"h.%u.attn.c_attn.bias", 0},
    [ATTPROJW] = {"h.%u.attn.c_proj.weight", 1}, [ATTPROJB] = {"h.%u.attn.c_proj.bias", 0},
    [LN2W] = {"h.%u.ln_2.weight", 0},   [LN2B] = {"h.%u.ln_2.bias", 0},
    [FCW] = {"h.%u.mlp.c_fc.weight", 1}, [FCB] = {"h.%u.mlp.c_fc.bias", 0},
    [FCPROJW] = {"h.%u.mlp.c_proj.weight", 1}, [FCPROJB] = {"h.%u.mlp.c_proj.bias", 0},
    [LNFW] = {"ln_f.weight", 0},        [LNFB] = {"ln_f.bias", 0},
};

static int layered_(int t) { return t >= LN1W && t <= FCPROJB; }

// The HF shape of tensor t: ndim and dims; the ref slice is the same numbers, swapped when transposed.
static uint32_t hf_shape_(int t, const wgpt_gpt2_config *c, uint64_t dims[2]) {
    uint64_t C = c->channels;
    switch (t) {
    case WTE: dims[0] = c->vocab_size, dims[1] = C; return 2;
    case WPE: dims[0] = c->max_seq_len, dims[1] = C; return 2;
    case QKVW: dims[0] = C, dims[1] = 3 * C; return 2;
    case ATTPROJW: dims[0] = C, dims[1] = C; return 2;
    case FCW: dims[0] = C, dims[1] = 4 * C; return 2;
    case FCPROJW: dims[0] = 4 * C, dims[1] = C; return 2;
    case QKVB: dims[0] = 3 * C; return 1;
    case FCB: dims[0] = 4 * C; return 1;
    default: dims[0] = C; return 1;  // LayerNorm weights and biases, attprojb, fcprojb
    }
}

static void name_(char *out, size_t n, int t, uint32_t layer) {
    if (layered_(t)) snprintf(out, n, HF[t].fmt, layer);
    else snprintf(out, n, "%s", HF[t].fmt);
}

// `name` with or without the prefix; both at once is ambiguous. NULL if absent (err untouched).
static const wgpt_st_tensor *lookup_(const wgpt_safetensors *st, const char *name, const char *label, int *dup,
                                     char *err, size_t errlen) {
    char full[160];
    snprintf(full, sizeof full, PREFIX "%s", name);
    const wgpt_st_tensor *a = wgpt_safetensors_find(st, name), *b = wgpt_safetensors_find(st, full);
    if (a && b) {
        *dup = 1;
        wgpt_errf(err, errlen, "%s: both '%s' and '%s' are present", label, name, full);
        return NULL;
    }
    return a ? a : b;
}

// "h.<layer>.<rest>" (after the optional prefix): the layer, and rest in *rest; -1 if not a block's name.
static long block_of_(const char *name, const char **rest) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) == 0) name += strlen(PREFIX);
    if (strncmp(name, "h.", 2) != 0) return -1;
    const char *d = name + 2;
    long v = 0;
    size_t k = 0;
    for (; d[k] >= '0' && d[k] <= '9'; k++) {
        if (k == 6 || (k == 1 && d[0] == '0')) return -1;  // canonical numbers below a million only
        v = v * 10 + (d[k] - '0');
    }
    if (k == 0 || d[k] != '.') return -1;
    *rest = d + k + 1;
    return v;
}

// Sizes from the shapes alone (no config.json).
static int config_from_shapes_(const wgpt_safetensors *st, const char *label, wgpt_gpt2_config *c, char *err,
                               size_t errlen) {
    int dup = 0;
    const wgpt_st_tensor *wte = lookup_(st, "wte.weight", label, &dup, err, errlen);
    const wgpt_st_tensor *wpe = dup ? NULL : lookup_(st, "wpe.weight", label, &dup, err, errlen);
    if (dup) return -1;
    if (!wte || !wpe)
        return wgpt_errf(err, errlen, "%s: no tensor %s: not a GPT-2 model (expected wte.weight, wpe.weight, h.0..., ln_f)",
                     label, !wte ? "wte.weight" : "wpe.weight");
    if (wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1])
        return wgpt_errf(err, errlen, "%s: wte.weight and wpe.weight are not (V, C) and (positions, C)", label);
    long L = 0;
    for (size_t i = 0; i < st->count; i++) {
        const char *rest;
        long b = block_of_(st->tensors[i].name, &rest);
        if (b >= L) L = b + 1;
    }
    uint64_t C = wte->shape[1], V = wte->shape[0], T = wpe->shape[0];
    if (L == 0) return wgpt_errf(err, errlen, "%s: no transformer blocks (h.0.*)", label);
    if (C == 0 || C % 64 || C > UINT32_MAX || V > UINT32_MAX - 127 || T > UINT32_MAX)
        return wgpt_errf(err, errlen,
                     "%s: %llu channels: without a config.json wgpt takes GPT-2's head size 64, which must divide "
                     "the channels; put the model's config.json beside the file",
                     label, (unsigned long long)C);
    *c = (wgpt_gpt2_config){.max_seq_len = (uint32_t)T, .vocab_size = (uint32_t)V,
                            .padded_vocab_size = wgpt_weights_padded_vocab((uint32_t)V), .num_layers = (uint32_t)L,
                            .num_heads = (uint32_t)(C / 64), .channels = (uint32_t)C};
    return wgpt_weights_check_config(c, label, err, errlen);
}

static int shape_is_(const wgpt_st_tensor *t, uint32_t ndim, const uint64_t dims[2]) {
    if (t->ndim != ndim) return 0;
    for (uint32_t k = 0; k < ndim; k++)
        if (t->shape[k] != dims[k]) return 0;
    return 1;
}

static void shape_str_(char *out, size_t n, uint32_t ndim, const uint64_t *dims) {
    size_t at = (size_t)snprintf(out, n, "(");
    for (uint32_t k = 0; k < ndim && at < n; k++)
        at += (size_t)snprintf(out + at, n - at, "%s%llu", k ? ", " : "", (unsigned long long)dims[k]);
    if (at < n) snprintf(out + at, n - at, ")");
}

// The first NaN/Inf of t (after a bulk conversion found one): the error.
static int not_finite_(const wgpt_st_tensor *t, const char *label, char *err, size_t errlen) {
    for (uint64_t i = 0; i < t->count; i++) {
        float v = wgpt_st_get_f32(t, i);
        if (!isfinite(v))
            return wgpt_errf(err, errlen, "%s: tensor '%s' element %llu is %s", label, t->name, (unsigned long long)i,
                             isnan(v) ? "NaN" : "Inf");
    }
    return wgpt_errf(err, errlen, "%s: tensor '%s' holds a NaN or Inf", label, t->name);
}

#define TR_ROWS 32u  // rows converted at once before a transposed tensor is scattered

// One piece of the conversion: rows [r0, r1) of tensor t into dst (the
// tensor's whole destination), transposed or not.
typedef struct job_ {
    const wgpt_st_tensor *t;
    float *dst;
    int transposed;
    uint64_t r0, r1;
    int finite;  // its values were all finite
} job_;

// Converts (and transposes) a job's rows. A transposed tensor goes TR_ROWS
// rows at a time through buf (TR_ROWS x cols floats), so that its scattered
// writes land TR_ROWS floats together.
static int convert_rows_(const job_ *j, float *buf) {
    const wgpt_st_tensor *t = j->t;
    uint64_t rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
    if (!j->transposed || cols == 1)
        return wgpt_st_get_f32_run(t, j->r0 * cols, (j->r1 - j->r0) * cols, j->dst + j->r0 * cols);
    int ok = 1;
    for (uint64_t r0 = j->r0; r0 < j->r1; r0 += TR_ROWS) {
        uint64_t nr = j->r1 - r0 < TR_ROWS ? j->r1 - r0 : TR_ROWS;
        ok &= wgpt_st_get_f32_run(t, r0 * cols, nr * cols, buf);
        for (uint64_t k = 0; k < cols; k++)
            for (uint64_t r = 0; r < nr; r++) j->dst[k * rows + r0 + r] = buf[r * cols + k];
    }
    return ok;
}

#define JOB_FLOATS (1u << 20)  // floats a job converts (about)
#define MAX_THREADS 8

typedef struct pool_ {
    job_ *jobs;
    size_t n;
    atomic_size_t next;
    size_t buf_floats;  // TR_ROWS x the widest transposed row
    atomic_int faulted, oom;
} pool_;

// One thread's share: its scratch is allocated and freed outside the bus
// guard, so that a fault (which jumps out of work_) leaks nothing.
typedef struct worker_ {
    pool_ *p;
    float *buf;
} worker_;

static void work_(void *arg) {
    worker_ *w = arg;
    pool_ *p = w->p;
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) p->jobs[i].finite = convert_rows_(&p->jobs[i], w->buf);
}

// work_ under the bus guard, with its own scratch.
static void *guarded_work_(void *arg) {
    pool_ *p = arg;
    worker_ w = {p, malloc(p->buf_floats * sizeof(float))};
    if (!w.buf) atomic_store(&p->oom, 1);
    else if (wgpt_bus_guard_run_within(work_, &w) < 0) atomic_store(&p->faulted, 1);
    free(w.buf);
    return NULL;
}

// Runs the jobs on up to MAX_THREADS threads (the caller's among them; a
// model's read is mostly this). 0, or -1 if a thread touched a page of the
// file that no longer exists (*faulted) or ran out of memory.
static int run_jobs_(job_ *jobs, size_t n, size_t buf_floats, int *faulted) {
    pool_ p = {.jobs = jobs, .n = n, .buf_floats = buf_floats ? buf_floats : 1};
    atomic_init(&p.next, 0), atomic_init(&p.faulted, 0), atomic_init(&p.oom, 0);
#ifndef __wasi__
    int nt = 0;
    pthread_t th[MAX_THREADS - 1];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cpus > MAX_THREADS ? MAX_THREADS : cpus > 1 ? (int)cpus : 1;
    if ((size_t)want > n) want = (int)(n ? n : 1);
    while (nt < want - 1 && pthread_create(&th[nt], NULL, guarded_work_, &p) == 0) nt++;
#endif
    guarded_work_(&p);  // a fault never skips the joins
#ifndef __wasi__
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
#endif
    *faulted = atomic_load(&p.faulted);
    return *faulted || atomic_load(&p.oom) ? -1 : 0;
}

typedef struct reader_ {
    const wgpt_safetensors *st;
    const wgpt_gpt2_config *c;
    const char *label;
    unsigned char *used;  // (st->count) tensors accounted for
    float *params;        // NULL: check only
    char *err;
    size_t errlen;
    job_ *jobs;           // with params: the conversion's pieces, in order
    size_t njobs, capjobs, buf_floats;
} reader_;

// Tensor x's conversion into dst as jobs of about JOB_FLOATS floats.
static int add_jobs_(reader_ *r, const wgpt_st_tensor *x, float *dst, int transposed) {
    uint64_t rows = x->shape[0], cols = x->ndim == 2 ? x->shape[1] : 1;
    uint64_t per = JOB_FLOATS / cols;
    per = per < TR_ROWS ? TR_ROWS : per / TR_ROWS * TR_ROWS;
    if (transposed && cols > 1 && TR_ROWS * cols > r->buf_floats) r->buf_floats = TR_ROWS * cols;
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        if (r->njobs == r->capjobs) {
            size_t cap = r->capjobs ? 2 * r->capjobs : 256;
            job_ *j = realloc(r->jobs, cap * sizeof *j);
            if (!j) return wgpt_errf(r->err, r->errlen, "%s: out of host memory", r->label);
            r->jobs = j, r->capjobs = cap;
        }
        r->jobs[r->njobs++] = (job_){x, dst, transposed, r0, rows - r0 < per ? rows : r0 + per, 0};
    }
    return 0;
}

// Finds and checks every reference tensor; with params, lists their conversion (r->jobs).
static int map_tensors_(reader_ *r, wgpt_st_dtype *first_dtype, int *mixed) {
    size_t sizes[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(r->c, sizes);
    size_t base = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; base += sizes[t], t++) {
        uint32_t n = layered_(t) ? r->c->num_layers : 1;
        for (uint32_t l = 0; l < n; l++) {
            char name[96], want[64], got[64];
            name_(name, sizeof name, t, l);
            int dup = 0;
            const wgpt_st_tensor *x = lookup_(r->st, name, r->label, &dup, r->err, r->errlen);
            if (dup) return -1;
            if (!x) return wgpt_errf(r->err, r->errlen, "%s: tensor '%s' is missing", r->label, name);
            uint64_t dims[2];
            uint32_t nd = hf_shape_(t, r->c, dims);
            if (!shape_is_(x, nd, dims)) {
                shape_str_(want, sizeof want, nd, dims);
                shape_str_(got, sizeof got, x->ndim, x->shape);
                return wgpt_errf(r->err, r->errlen, "%s: tensor '%s' has shape %s; the model's sizes need %s", r->label,
                             x->name, got, want);
            }
            if (!wgpt_st_is_float(x->dtype))
                return wgpt_errf(r->err, r->errlen, "%s: tensor '%s' is %s; wgpt reads F32, F16 and BF16", r->label,
                             x->name, wgpt_st_dtype_name(x->dtype));
            if (t == WTE) *first_dtype = x->dtype;
            else if (x->dtype != *first_dtype) *mixed = 1;
            r->used[x - r->st->tensors] = 1;
            size_t slice = sizes[t] / n;
            if (r->params && add_jobs_(r, x, r->params + base + l * slice, HF[t].transposed) < 0) return -1;
        }
    }
    return 0;
}

// lm_head.weight, if present, must be wte itself: wgpt ties the two.
static int check_lm_head_(reader_ *r) {
    int dup = 0;
    const wgpt_st_tensor *x = lookup_(r->st, "lm_head.weight", r->label, &dup, r->err, r->errlen);
    if (dup) return -1;
    if (!x) return 0;
    uint64_t dims[2];
    uint32_t nd = hf_shape_(WTE, r->c, dims);
    if (!shape_is_(x, nd, dims) || !wgpt_st_is_float(x->dtype))
        return wgpt_errf(r->err, r->errlen, "%s: lm_head.weight is not a float (V, C) tensor like wte.weight", r->label);
    r->used[x - r->st->tensors] = 1;
    for (uint64_t i = 0; r->params && i < x->count; i++)
        if (wgpt_st_get_f32(x, i) != r->params[i])
            return wgpt_errf(r->err, r->errlen,
                         "%s: lm_head.weight differs from wte.weight at element %llu: wgpt ties the output "
                         "projection to the token embedding, so an untied model cannot be imported",
                         r->label, (unsigned long long)i);
    return 0;
}

// Anything not mapped must be a causal-mask buffer of a block.
static int check_leftovers_(reader_ *r) {
    for (size_t i = 0; i < r->st->count; i++) {
        if (r->used[i]) continue;
        const char *rest = NULL;
        long b = block_of_(r->st->tensors[i].name, &rest);
        if (b >= 0 && (uint64_t)b < r->c->num_layers && (strcmp(rest, "attn.bias") == 0 || strcmp(rest, "attn.masked_bias") == 0))
            continue;
        return wgpt_errf(r->err, r->errlen, "%s: unexpected tensor '%s': not part of a %u-layer GPT-2", r->label,
                     r->st->tensors[i].name, r->c->num_layers);
    }
    return 0;
}

// The tensors' bytes are read under the bus guard: a file cut short while it
// is mapped faults there instead of killing the process.
typedef struct guarded_ {
    reader_ *r;
    wgpt_st_dtype dtype;
    int mixed, rc;
    int shrank;  // a conversion thread touched a page past the file's end
} guarded_;

static void convert_all_(void *arg) {
    guarded_ *g = arg;
    reader_ *r = g->r;
    g->rc = -1;
    if (map_tensors_(r, &g->dtype, &g->mixed) < 0) return;
    int faulted = 0;
    if (run_jobs_(r->jobs, r->njobs, r->buf_floats, &faulted) < 0) {
        g->shrank = faulted;
        if (!faulted) wgpt_errf(r->err, r->errlen, "%s: out of host memory converting the tensors", r->label);
        return;
    }
    for (size_t i = 0; i < r->njobs; i++)  // the first tensor (in order) holding a NaN or Inf
        if (!r->jobs[i].finite) {
            not_finite_(r->jobs[i].t, r->label, r->err, r->errlen);
            return;
        }
    g->rc = check_lm_head_(r) < 0 ? -1 : 0;
}

int wgpt_hf_gpt2_from_safetensors(const wgpt_safetensors *st, const char *config_json, size_t config_len,
                                  const char *label, int with_params, wgpt_weights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    wgpt_gpt2_config c;
    int rc = config_json ? wgpt_hf_config_parse(config_json, config_len, label, &c, err, errlen)
                         : config_from_shapes_(st, label, &c, err, errlen);
    if (rc < 0) return -1;
    reader_ r = {st, &c, label, calloc(st->count ? st->count : 1, 1), NULL, err, errlen, NULL, 0, 0, 0};
    guarded_ g = {&r, WGPT_ST_F32, 0, 0, 0};
    if (!r.used) rc = wgpt_errf(err, errlen, "%s: out of host memory", label);
    // Every name and shape first: a config.json claiming a huge model is refused before memory is taken for it.
    else if (map_tensors_(&r, &g.dtype, &g.mixed) < 0 || check_lm_head_(&r) < 0 || check_leftovers_(&r) < 0) rc = -1;
    else if (with_params && !(r.params = calloc(wgpt_gpt2_num_params(&c), sizeof(float))))  // padded wte rows stay 0
        rc = wgpt_errf(err, errlen, "%s: out of host memory for %zu parameters", label, wgpt_gpt2_num_params(&c));
    else if (with_params && (wgpt_bus_guard_run(convert_all_, &g) < 0 || g.shrank))
        rc = wgpt_errf(err, errlen, "%s: the file shrank while it was read (another program truncated or rewrote it?)",
                       label);
    else if (g.rc < 0) rc = -1;
    free(r.used);
    free(r.jobs);
    if (rc < 0) {
        free(r.params);
        return -1;
    }
    w->config = c;
    w->params = r.params;
    snprintf(w->tokenizer, sizeof w->tokenizer, "%s", wgpt_weights_tokenizer_for(c.vocab_size));
    snprintf(w->format, sizeof w->format, "Hugging Face GPT-2 safetensors (%s%s)", g.mixed ? "mixed, wte " : "",
             wgpt_st_dtype_name(g.dtype));
    return 0;
}

// ---- files ----

static int is_file_(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

// config.json whole, when anything is there by that name; NULL with *len 0
// when nothing is. Something there that is not a readable regular file (a
// dangling symlink, a folder, a FIFO, a symlink loop) is an error: without
// it the heads would be guessed. -1 with err.
static int read_config_(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    *text = NULL, *len = 0;
    struct stat sb;
    if (lstat(path, &sb) < 0) {
        if (errno == ENOENT) return 0;
        return wgpt_errf(err, errlen, "%s: %s", path, strerror(errno));
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK), e = errno;
    const char *why = NULL;
    if (fd < 0) why = e == ENOENT ? "a symlink to nothing (an interrupted download?)" : e == ELOOP ? "a symlink loop" : strerror(e);
    else if (fstat(fd, &sb) < 0) why = strerror(errno);
    else if (S_ISDIR(sb.st_mode)) why = "a folder";
    else if (!S_ISREG(sb.st_mode)) why = S_ISFIFO(sb.st_mode) ? "a FIFO" : "not a regular file";
    else if (sb.st_size > (1 << 24)) why = "larger than 16 MiB";
    if (why) {
        if (fd >= 0) close(fd);
        return wgpt_errf(err, errlen, "%s: %s, not a readable config.json: it gives the model's heads, so wgpt will not guess "
                         "them; restore it or remove it",
                         path, why);
    }
    char *s = malloc((size_t)sb.st_size + 1);
    ssize_t got = s ? read(fd, s, (size_t)sb.st_size) : -1;
    close(fd);
    if (got != sb.st_size) {
        free(s);
        return wgpt_errf(err, errlen, "%s: cannot read it", path);
    }
    s[got] = 0;
    *text = s, *len = (size_t)got;
    return 0;
}

#define EXPORT_ID_KEY "wgpt_export_id"

// A folder wgpt exported holds its export's id in both files: weights that
// carry one need a config.json with the same (else an interrupted export left
// new weights beside an older config.json). -1 with err.
static int check_pair_(const wgpt_safetensors *st, const char *json, size_t json_len, const char *file,
                       const char *cfg, char *err, size_t errlen) {
    const char *want = wgpt_safetensors_meta(st, EXPORT_ID_KEY);
    if (!want) return 0;
    char got[64] = "";
    if (json) wgpt_hf_config_export_id(json, json_len, got, sizeof got);
    if (strcmp(got, want) == 0) return 0;
    if (json && !got[0])
        return wgpt_errf(err, errlen,
                         "%s was written by `wgpt export` (export id %s), but %s has no \"" EXPORT_ID_KEY "\": an interrupted "
                         "export leaves new weights beside an older config.json; export again, or, if you wrote this "
                         "config.json for these weights, add \"" EXPORT_ID_KEY "\": \"%s\" to it",
                         file, want, cfg, want);
    return wgpt_errf(err, errlen,
                     "%s was written by `wgpt export` (export id %s), but %s %s: the two files are not one model (an "
                     "interrupted export?); export again",
                     file, want, cfg, json ? "belongs to another export" : "is missing");
}

int wgpt_hf_gpt2_read(const char *path, int with_params, wgpt_weights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    char file[4096], cfg[4096];
    struct stat sb;
    if (stat(path, &sb) < 0) return wgpt_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        snprintf(file, sizeof file, "%s/model.safetensors", path);
        snprintf(cfg, sizeof cfg, "%s/config.json", path);
        if (!is_file_(file)) {
            char other[4200];
            snprintf(other, sizeof other, "%s/model.safetensors.index.json", path);
            if (is_file_(other))
                return wgpt_errf(err, errlen, "%s: a sharded checkpoint (model.safetensors.index.json): wgpt reads one "
                                          "model.safetensors", path);
            snprintf(other, sizeof other, "%s/pytorch_model.bin", path);
            return wgpt_errf(err, errlen, "%s: a folder without model.safetensors%s", path,
                         is_file_(other) ? " (only pytorch_model.bin: wgpt reads safetensors, not pickles)"
                                         : ": not a checkpoint or a Hugging Face GPT-2 folder");
        }
    } else {
        snprintf(file, sizeof file, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(cfg, sizeof cfg, "%.*s%sconfig.json", slash ? (int)(slash - path) : 0, path, slash ? "/" : "");
    }
    char *json = NULL;
    size_t json_len = 0;
    if (read_config_(cfg, &json, &json_len, err, errlen) < 0) return -1;
    wgpt_safetensors st;
    if (wgpt_safetensors_open(&st, file, err, errlen) < 0) {
        free(json);
        return -1;
    }
    char label[8300];
    if (json) snprintf(label, sizeof label, "%s (with %s)", file, cfg);
    else snprintf(label, sizeof label, "%s", file);
    int rc = check_pair_(&st, json, json_len, file, cfg, err, errlen);
    if (rc == 0) rc = wgpt_hf_gpt2_from_safetensors(&st, json, json_len, json ? label : file, with_params, w, err, errlen);
    wgpt_safetensors_close(&st);
    free(json);
    return rc;
}

// The file's tensors in save_pretrained's order: wte, wpe, block by block, ln_f.
typedef struct entry_ {
    int tensor;
    uint32_t layer;
    char name[96];
} entry_;

static size_t entries_(const wgpt_gpt2_config *c, entry_ *e) {
    size_t k = 0;
    for (int t = WTE; t <= WPE; t++) e[k++] = (entry_){t, 0, ""};
    for (uint32_t l = 0; l < c->num_layers; l++)
        for (int t = LN1W; t <= FCPROJB; t++) e[k++] = (entry_){t, l, ""};
    for (int t = LNFW; t <= LNFB; t++) e[k++] = (entry_){t, 0, ""};
    for (size_t i = 0; i < k; i++) {
        char plain[80];
        name_(plain, sizeof plain, e[i].tensor, e[i].layer);
        snprintf(e[i].name, sizeof e[i].name, PREFIX "%s", plain);
    }
    return k;
}

// Writes path.tmp, sealed (on disk, not yet renamed) in *o. Returns 0, or -1 with err (nothing left).
static int write_safetensors_(const char *path, const wgpt_weights *w, const char *export_id, wgpt_file_out *o,
                              char *err, size_t errlen) {
    const wgpt_gpt2_config *c = &w->config;
    size_t n = 2 + 12 * (size_t)c->num_layers + 2, sizes[WGPT_GPT2_NUM_TENSORS], base[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(c, sizes);
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) base[t] = t ? base[t - 1] + sizes[t - 1] : 0;
    entry_ *e = calloc(n, sizeof *e);
    wgpt_st_spec *spec = calloc(n, sizeof *spec);
    float *tmp = malloc((size_t)c->channels * c->channels * 4 * sizeof *tmp);  // the largest Conv1D weight, 4C x C
    unsigned char *header = NULL;
    size_t hlen = 0;
    int rc = -1;
    if (!e || !spec || !tmp) {
        wgpt_errf(err, errlen, "%s: out of host memory", path);
        goto done;
    }
    entries_(c, e);
    for (size_t i = 0; i < n; i++) {
        spec[i].name = e[i].name;
        spec[i].ndim = hf_shape_(e[i].tensor, c, spec[i].shape);
    }
    if (!(header = wgpt_safetensors_header(spec, n, EXPORT_ID_KEY, export_id, &hlen, err, errlen))) goto done;
    if (wgpt_file_out_begin(o, path, err, errlen) < 0) goto done;
    wgpt_file_out_write(o, header, hlen);
    for (size_t i = 0; i < n; i++) {
        int t = e[i].tensor;
        size_t layers = layered_(t) ? c->num_layers : 1, rows = spec[i].shape[0];
        size_t cols = spec[i].ndim == 2 ? spec[i].shape[1] : 1;
        const float *src = w->params + base[t] + e[i].layer * (sizes[t] / layers);
        if (HF[t].transposed) {  // HF (in, out) from our (out, in)
            for (size_t r = 0; r < rows; r++)
                for (size_t q = 0; q < cols; q++) tmp[r * cols + q] = src[q * rows + r];
            src = tmp;
        }
        wgpt_file_out_floats(o, src, rows * cols);  // wte: its first V rows, the padding left out
    }
    rc = wgpt_file_out_seal(o, err, errlen);
done:
    free(header), free(tmp), free(spec), free(e);
    return rc;
}

int wgpt_hf_gpt2_write(const char *dir, const wgpt_weights *w, char *err, size_t errlen) {
    if (!w->params) return wgpt_errf(err, errlen, "%s: no parameters to write", dir);
    const wgpt_gpt2_config *c = &w->config;
    for (size_t i = (size_t)c->vocab_size * c->channels; i < (size_t)c->padded_vocab_size * c->channels; i++)
        if (w->params[i] != 0)  // the HF file has V rows only: these would be lost
            return wgpt_errf(err, errlen, "%s: wte's padding rows (%u..%u) are not zero; llm.c's format keeps them", dir,
                         c->vocab_size, c->padded_vocab_size);
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) return wgpt_errf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) return wgpt_errf(err, errlen, "%s: not a folder", dir);
    // Both files are written and on disk under .tmp names before either is
    // renamed; the weights go first, so a crash between the two renames
    // leaves new weights beside the old config.json, which the export id
    // tells apart (check_pair_).
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char id[32], cpath[4200], wpath[4200];
    snprintf(id, sizeof id, "%016llx",
             (unsigned long long)wgpt_mix64(((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                                            (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)&ts));
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir);
    char *json = wgpt_hf_config_format(&w->config, w->tokenizer, id);
    if (!json) return wgpt_errf(err, errlen, "%s: out of host memory", cpath);
    wgpt_file_out co, wo;
    int rc = wgpt_file_out_begin(&co, cpath, err, errlen);
    if (rc == 0) {
        wgpt_file_out_write(&co, json, strlen(json));
        wgpt_file_out_write(&co, "\n", 1);
        rc = wgpt_file_out_seal(&co, err, errlen);
    }
    free(json);
    if (rc < 0) return -1;
    if (write_safetensors_(wpath, w, id, &wo, err, errlen) < 0) {
        wgpt_file_out_abort(&co);
        return -1;
    }
    if (wgpt_file_out_commit(&wo, err, errlen) < 0) {
        wgpt_file_out_abort(&co);
        return -1;
    }
    if (wgpt_file_out_commit(&co, err, errlen) < 0) {
        size_t k = strlen(err);
        snprintf(err + k, errlen - k, "; %s is new but config.json is not: wgpt refuses the pair until an export completes",
                 wpath);
        return -1;
    }
    return 0;
}
