// options.c: command-line parsing (see options.h).
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void value_(char *buf, size_t n, const wgpt_opt *o) {
    switch (o->type) {
    case WGPT_OPT_STR: snprintf(buf, n, "%s", *(const char **)o->dst ? *(const char **)o->dst : "-"); break;
    case WGPT_OPT_U32: snprintf(buf, n, "%u", *(uint32_t *)o->dst); break;
    case WGPT_OPT_U64: snprintf(buf, n, "%llu", (unsigned long long)*(uint64_t *)o->dst); break;
    case WGPT_OPT_F32: snprintf(buf, n, "%g", *(float *)o->dst); break;
    case WGPT_OPT_FLAG: buf[0] = 0; break;
    }
}

void wgpt_opts_help(FILE *f, const wgpt_opt *opts, int nopts, const char *usage) {
    fprintf(f, "%s\noptions:\n", usage);
    for (int i = 0; i < nopts; i++) {
        char v[256], name[64];
        value_(v, sizeof v, &opts[i]);
        snprintf(name, sizeof name, "--%s%s", opts[i].name, opts[i].type == WGPT_OPT_FLAG ? "" : " X");
        fprintf(f, "  %-22s %s%s%s%s\n", name, opts[i].help, v[0] ? " (default: " : "", v, v[0] ? ")" : "");
    }
}

// strtoull skips leading blanks and then negates a '-': " -1" would become 2^64 - 1.
static int negative_(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return *s == '-';
}

static int set_(const wgpt_opt *o, const char *val) {
    char *end;
    errno = 0;
    switch (o->type) {
    case WGPT_OPT_STR: *(const char **)o->dst = val; return 0;
    case WGPT_OPT_U32: {
        unsigned long long v = strtoull(val, &end, 10);
        if (negative_(val) || *end || end == val || errno || v > UINT32_MAX) return -1;
        *(uint32_t *)o->dst = (uint32_t)v;
        return 0;
    }
    case WGPT_OPT_U64: {
        unsigned long long v = strtoull(val, &end, 10);
        if (negative_(val) || *end || end == val || errno) return -1;
        *(uint64_t *)o->dst = v;
        return 0;
    }
    case WGPT_OPT_F32: {
        float v = strtof(val, &end);
        if (*end || end == val || errno || !isfinite(v)) return -1;
        *(float *)o->dst = v;
        return 0;
    }
    case WGPT_OPT_FLAG: *(int *)o->dst = 1; return 0;
    }
    return -1;
}

static const char *type_name_(wgpt_opt_type t) {
    switch (t) {
    case WGPT_OPT_U32:
    case WGPT_OPT_U64: return "a whole number >= 0";
    case WGPT_OPT_F32: return "a number";
    default: return "a value";
    }
}

int wgpt_opts_parse(int argc, char **argv, const wgpt_opt *opts, int nopts, const char *usage, char **positional,
                    int max_pos, int *npos) {
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            wgpt_opts_help(stdout, opts, nopts, usage);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
            if (*npos >= max_pos) {
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0], a);
                return 2;
            }
            positional[(*npos)++] = argv[i];
            continue;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const wgpt_opt *o = NULL;
        for (int k = 0; k < nopts && !o; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, name, len) == 0) o = &opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", argv[0], a);
            return 2;
        }
        const char *val = NULL;
        if (o->type == WGPT_OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "%s: --%s takes no value\n", argv[0], o->name);
                return 2;
            }
        } else if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(stderr, "%s: --%s needs a value (%s)\n", argv[0], o->name, type_name_(o->type));
            return 2;
        }
        if (set_(o, val) < 0) {
            fprintf(stderr, "%s: --%s: '%s' is not %s\n", argv[0], o->name, val, type_name_(o->type));
            return 2;
        }
    }
    return 0;
}
