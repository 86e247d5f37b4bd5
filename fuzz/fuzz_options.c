// fuzz_options.c: libFuzzer target for the command-line parser
// (wgpt_opts_parse) with an options table like `wgpt train`'s.
//
// Input: argv, its strings separated by NUL bytes; the first one is argv[0]
// (the name the messages print) and its length mod 3 is how many positional
// arguments are allowed (the commands allow 0). The parser's return code,
// positional arguments and every option's value are compared with a plain
// model of the rules in options.h; numbers must be what they say: decimal
// digits for counts (after optional blanks and a '+'), never a wrapped
// negative, and finite floats.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "fuzz_util.h"

enum { MAX_ARGS = 128 };

// The destinations of `wgpt train`'s table (see cli/cmd_train.c), one of each type at least.
typedef struct vals_ {
    const char *data, *out, *resume, *tokenizer, *adapter;
    uint32_t layers, heads, channels, batch, seq, steps, warmup, top_k;
    uint64_t seed;
    float lr, beta1, beta2, val_fraction, temperature;
    int quiet;
} vals_;

static void defaults_(vals_ *v) {
    memset(v, 0, sizeof *v);
    v->data = "data/*.bin";
    v->tokenizer = "gpt2";
    v->layers = 12, v->heads = 12, v->channels = 768, v->batch = 4, v->seq = 1024, v->steps = 1000;
    v->warmup = 100, v->top_k = 40, v->seed = 1337;
    v->lr = 6e-4f, v->beta1 = 0.9f, v->beta2 = 0.95f, v->val_fraction = 0.05f, v->temperature = 1.0f;
}

static int table_(vals_ *v, wgpt_opt *o) {
    const wgpt_opt t[] = {
        {"data", WGPT_OPT_STR, &v->data, "token shards (a glob)"},
        {"out", WGPT_OPT_STR, &v->out, "output folder"},
        {"resume", WGPT_OPT_STR, &v->resume, "checkpoint to resume"},
        {"tokenizer", WGPT_OPT_STR, &v->tokenizer, "gpt2 or bytes"},
        {"layers", WGPT_OPT_U32, &v->layers, "transformer blocks"},
        {"heads", WGPT_OPT_U32, &v->heads, "attention heads"},
        {"channels", WGPT_OPT_U32, &v->channels, "width"},
        {"batch", WGPT_OPT_U32, &v->batch, "sequences per micro-batch"},
        {"seq", WGPT_OPT_U32, &v->seq, "tokens per sequence"},
        {"steps", WGPT_OPT_U32, &v->steps, "optimizer steps"},
        {"warmup", WGPT_OPT_U32, &v->warmup, "warmup steps"},
        {"top-k", WGPT_OPT_U32, &v->top_k, "sample among the k most likely"},
        {"seed", WGPT_OPT_U64, &v->seed, "seed"},
        {"lr", WGPT_OPT_F32, &v->lr, "peak learning rate"},
        {"beta1", WGPT_OPT_F32, &v->beta1, "AdamW beta1"},
        {"beta2", WGPT_OPT_F32, &v->beta2, "AdamW beta2"},
        {"val-fraction", WGPT_OPT_F32, &v->val_fraction, "share held out"},
        {"temperature", WGPT_OPT_F32, &v->temperature, "sampling temperature"},
        {"adapter", WGPT_OPT_STR, &v->adapter, "GPU adapter"},
        {"quiet", WGPT_OPT_FLAG, &v->quiet, "print errors only"},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    memcpy(o, t, sizeof t);
    return n;
}

// Ranges of a few of them, as `wgpt train` has.
static const wgpt_opt_range RANGES_[] = {
    {"layers", 1, 1024, 0},
    {"lr", 0, 10, WGPT_OPT_GT_MIN},
    {"beta1", 0, 1, WGPT_OPT_LT_MAX},
    {"seed", 5, 1e6, 0},
};
enum { NRANGES = sizeof RANGES_ / sizeof RANGES_[0] };

static int model_in_range_(const char *name, double v) {
    for (int i = 0; i < NRANGES; i++) {
        const wgpt_opt_range *r = &RANGES_[i];
        if (strcmp(r->name, name) != 0) continue;
        int lo = r->bounds & WGPT_OPT_GT_MIN ? v > r->min : v >= r->min;
        int hi = r->bounds & WGPT_OPT_LT_MAX ? v < r->max : v <= r->max;
        return lo && hi;
    }
    return 1;
}

// "a whole number >= 0": blanks, an optional '+', then decimal digits only.
static int model_uint_(const char *s, uint64_t max, uint64_t *out) {
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    if (*s == '+') s++;
    if (!*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

// A float is whatever strtof reads whole, if finite and in range (no oracle
// but the C library here; the model checks the parser's control flow), and
// decimal: blanks, an optional sign, then "0x" is hex, refused.
static int model_float_(const char *s, float *out) {
    const char *p = s;
    while (*p == ' ' || (*p >= '\t' && *p <= '\r')) p++;
    if (*p == '+' || *p == '-') p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) return -1;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int model_set_(const wgpt_opt *o, const char *val) {
    uint64_t u;
    float f;
    switch (o->type) {
    case WGPT_OPT_STR: {
        // an empty value names no file: refused, unless the value it replaces is "" itself
        const char *now = *(const char **)o->dst;
        if (!*val && !(now && !*now)) return -1;
        *(const char **)o->dst = val;
        return 0;
    }
    case WGPT_OPT_U32:
        if (model_uint_(val, UINT32_MAX, &u) < 0 || !model_in_range_(o->name, (double)u)) return -1;
        *(uint32_t *)o->dst = (uint32_t)u;
        return 0;
    case WGPT_OPT_U64:
        if (model_uint_(val, UINT64_MAX, &u) < 0 || !model_in_range_(o->name, (double)u)) return -1;
        *(uint64_t *)o->dst = u;
        return 0;
    case WGPT_OPT_F32:
        if (model_float_(val, &f) < 0 || !model_in_range_(o->name, f)) return -1;
        *(float *)o->dst = f;
        return 0;
    case WGPT_OPT_FLAG: *(int *)o->dst = 1; return 0;
    default: return -1;
    }
}

// The rules of options.h, written out plainly.
static int model_parse_(int argc, char **argv, const wgpt_opt *opts, int nopts, char **pos, int max_pos, int *npos) {
    *npos = 0;
    int rest = 0;  // after "--": positional only
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!rest && !strcmp(a, "--")) {
            rest = 1;
            continue;
        }
        if (!rest && (!strcmp(a, "--help") || !strcmp(a, "-h"))) return 1;
        if (rest || a[0] != '-' || a[1] != '-') {
            if (*npos == max_pos) return 2;
            pos[(*npos)++] = argv[i];
            continue;
        }
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        const wgpt_opt *o = NULL;
        for (int k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == len && !memcmp(opts[k].name, a + 2, len)) o = &opts[k];
        if (!o) return 2;
        const char *val = NULL;
        if (o->type == WGPT_OPT_FLAG) {
            if (eq) return 2;
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else {
            return 2;
        }
        if (model_set_(o, val) < 0) return 2;
    }
    return 0;
}

static int same_float_(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // argv: the input's NUL-separated strings, copied so that each ends in a NUL.
    char *buf = malloc(size + 1);
    FUZZ_CHECK(buf, "out of memory");
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (size_t at = 0; at <= size && argc < MAX_ARGS; at += strlen(buf + at) + 1) argv[argc++] = buf + at;
    argv[argc] = NULL;
    int max_pos = (int)(strlen(argv[0]) % 3);

    vals_ got, want;
    wgpt_opt opts[32], mopts[32];
    defaults_(&got);
    defaults_(&want);
    int nopts = table_(&got, opts);
    table_(&want, mopts);
    char *pos[3] = {0}, *mpos[3] = {0};
    int npos = -1, mnpos = -1;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, nopts, RANGES_, NRANGES, "usage: fuzz [options]", pos, max_pos,
                                    &npos);
    int mrc = model_parse_(argc, argv, mopts, nopts, mpos, max_pos, &mnpos);

    FUZZ_CHECK(rc == mrc, "wgpt_opts_parse returned %d, the rules say %d (argc %d)", rc, mrc, argc);
    FUZZ_CHECK(npos >= 0 && npos <= max_pos, "%d positional arguments, at most %d allowed", npos, max_pos);
    if (rc == 0) {
        FUZZ_CHECK(npos == mnpos && !memcmp(pos, mpos, sizeof pos), "positional arguments differ (%d vs %d)", npos,
                   mnpos);
    }
    // Every value, also those set before an error stopped the parse.
    FUZZ_CHECK(got.data == want.data && got.out == want.out && got.resume == want.resume &&
                   got.tokenizer == want.tokenizer && got.adapter == want.adapter,
               "a string option differs");
    FUZZ_CHECK(got.layers == want.layers && got.heads == want.heads && got.channels == want.channels &&
                   got.batch == want.batch && got.seq == want.seq && got.steps == want.steps &&
                   got.warmup == want.warmup && got.top_k == want.top_k && got.quiet == want.quiet,
               "a whole-number option or the flag differs (layers %u vs %u, steps %u vs %u)", got.layers,
               want.layers, got.steps, want.steps);
    FUZZ_CHECK(got.seed == want.seed, "--seed is %llu, the rules say %llu", (unsigned long long)got.seed,
               (unsigned long long)want.seed);
    FUZZ_CHECK(same_float_(got.lr, want.lr) && same_float_(got.beta1, want.beta1) &&
                   same_float_(got.beta2, want.beta2) && same_float_(got.val_fraction, want.val_fraction) &&
                   same_float_(got.temperature, want.temperature),
               "a float option differs (lr %g vs %g)", (double)got.lr, (double)want.lr);

    wgpt_opts_help_ranged(stdout, opts, nopts, RANGES_, NRANGES, argv[0]);  // with the parsed values as defaults
    free(buf);
    return 0;
}
