// options.c: command-line parsing (see options.h).
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void value_(char *buf, size_t n, const wgpt_opt *o) {
    switch (o->type) {
    case WGPT_OPT_STR: snprintf(buf, n, "%s", *(const char **)o->dst ? *(const char **)o->dst : "-"); break;
    case WGPT_OPT_U32: snprintf(buf, n, "%u", *(uint32_t *)o->dst); break;
    case WGPT_OPT_U64:
    case WGPT_OPT_COUNT: snprintf(buf, n, "%llu", (unsigned long long)*(uint64_t *)o->dst); break;
    case WGPT_OPT_F32: snprintf(buf, n, "%g", *(float *)o->dst); break;
    case WGPT_OPT_FLAG: buf[0] = 0; break;
    }
}

static int is_number_(wgpt_opt_type t) { return t != WGPT_OPT_STR && t != WGPT_OPT_FLAG; }

static const wgpt_opt_range *range_of_(const wgpt_opt *o, const wgpt_opt_range *ranges, int nranges) {
    if (!is_number_(o->type)) return NULL;
    for (int i = 0; i < nranges; i++)
        if (strcmp(ranges[i].name, o->name) == 0) return &ranges[i];
    return NULL;
}

// "1 to 1024" for whole numbers with both ends included, else "[0, 1)" style.
static void range_(char *buf, size_t n, const wgpt_opt *o, const wgpt_opt_range *r) {
    if (o->type != WGPT_OPT_F32 && !r->bounds && r->max >= 18446744073709551615.0)
        snprintf(buf, n, "%.17g to 18446744073709551615", r->min);  // 2^64 - 1, which a double rounds up
    else if (o->type != WGPT_OPT_F32 && !r->bounds)
        snprintf(buf, n, "%.17g to %.17g", r->min, r->max);
    else
        snprintf(buf, n, "%c%g, %g%c", r->bounds & WGPT_OPT_GT_MIN ? '(' : '[', r->min, r->max,
                 r->bounds & WGPT_OPT_LT_MAX ? ')' : ']');
}

void wgpt_opts_help(FILE *f, const wgpt_opt *opts, int nopts, const char *usage) {
    wgpt_opts_help_ranged(f, opts, nopts, NULL, 0, usage);
}

void wgpt_opts_help_ranged(FILE *f, const wgpt_opt *opts, int nopts, const wgpt_opt_range *ranges, int nranges,
                           const char *usage) {
    fprintf(f, "%s\noptions:\n", usage);
    for (int i = 0; i < nopts; i++) {
        char v[256], name[64], r[96] = "";
        value_(v, sizeof v, &opts[i]);
        const wgpt_opt_range *rg = range_of_(&opts[i], ranges, nranges);
        if (rg) range_(r, sizeof r, &opts[i], rg);
        snprintf(name, sizeof name, "--%s%s", opts[i].name, opts[i].type == WGPT_OPT_FLAG ? "" : " X");
        fprintf(f, "  %-22s %s", name, opts[i].help);
        if (v[0] || r[0]) fprintf(f, " (%s%s%s%s)", v[0] ? "default: " : "", v, v[0] && r[0] ? "; " : "", r);
        fprintf(f, "\n");
    }
}

// strtoull skips leading blanks and then negates a '-': " -1" would become 2^64 - 1.
static int negative_(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    return *s == '-';
}

// One rule for every number: decimal only. strtod would read "0x10" as 16
// and strtoull (base 10) stops at its 'x': hex is refused everywhere alike.
static int hex_(const char *s) {
    while (isspace((unsigned char)*s)) s++;
    if (*s == '+' || *s == '-') s++;
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

// A whole number with an optional K/M/G suffix ("1.5K" is 1500; "1.5" is refused).
static int count_(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end), mul = 1;
    if (end == s || negative_(s) || hex_(s) || (errno && errno != ERANGE)) return -1;
    if (*end == 'K' || *end == 'k') mul = 1e3, end++;
    else if (*end == 'M' || *end == 'm') mul = 1e6, end++;
    else if (*end == 'G' || *end == 'g') mul = 1e9, end++;
    double x = v * mul;
    if (*end || (!isfinite(v) && errno != ERANGE) || (errno == ERANGE && fabs(v) < 1) || x != floor(x)) return -1;
    if (!isfinite(x) || x >= 18446744073709551616.0) return *out = UINT64_MAX, -2;  // a number, too large
    *out = (uint64_t)x;
    return 0;
}

// The values a numeric type holds, as a range (for an option without one).
static wgpt_opt_range type_range_(const wgpt_opt *o) {
    if (o->type == WGPT_OPT_F32) return (wgpt_opt_range){o->name, -FLT_MAX, FLT_MAX, 0};
    return (wgpt_opt_range){o->name, 0, o->type == WGPT_OPT_U32 ? 4294967295.0 : 18446744073709551615.0, 0};
}

// Parses val as o's type into *num (numbers) without storing it. -1: not of
// the type; -2: a number beyond the type's values (*num holds it, roughly);
// -3: an empty string where a name or path belongs.
static int parse_(const wgpt_opt *o, const char *val, double *num, uint64_t *whole) {
    char *end;
    errno = 0;
    switch (o->type) {
    case WGPT_OPT_U32:
    case WGPT_OPT_U64: {
        unsigned long long v = strtoull(val, &end, 10);
        int range = errno == ERANGE;  // past 2^64 - 1
        if (negative_(val) || *end || end == val || (errno && !range)) return -1;
        *whole = v;
        *num = range ? strtod(val, NULL) : (double)v;
        return range || (o->type == WGPT_OPT_U32 && v > UINT32_MAX) ? -2 : 0;
    }
    case WGPT_OPT_COUNT: {
        int rc = count_(val, whole);
        *num = rc == -2 ? strtod(val, NULL) : (double)*whole;
        return rc;
    }
    case WGPT_OPT_F32: {
        float v = strtof(val, &end);  // strtof itself: a float's nearest value, never rounded twice
        int range = errno == ERANGE;
        if (*end || end == val || hex_(val) || (errno && !range) || (!isfinite(v) && !range)) return -1;
        if (range && fabsf(v) < 1) return -1;  // below a float's least: no value of its own
        *num = range ? strtod(val, NULL) : v;    // too large: what was asked, for the message
        return range ? -2 : 0;
    }
    case WGPT_OPT_STR:
        // An empty path or name ("--out ''", "--checkpoint=") would be taken as
        // some file or folder; only where the default itself is "" (a prompt) is
        // it a value.
        if (!*val && !(*(const char **)o->dst && !**(const char **)o->dst)) return -3;
        return 0;
    default: return 0;
    }
}

static int in_range_(const wgpt_opt_range *r, double v) {
    if (!r) return 1;
    int lo = r->bounds & WGPT_OPT_GT_MIN ? v > r->min : v >= r->min;
    int hi = r->bounds & WGPT_OPT_LT_MAX ? v < r->max : v <= r->max;
    return lo && hi;
}

static void store_(const wgpt_opt *o, const char *val, double num, uint64_t whole) {
    switch (o->type) {
    case WGPT_OPT_STR: *(const char **)o->dst = val; break;
    case WGPT_OPT_U32: *(uint32_t *)o->dst = (uint32_t)whole; break;
    case WGPT_OPT_U64:
    case WGPT_OPT_COUNT: *(uint64_t *)o->dst = whole; break;
    case WGPT_OPT_F32: *(float *)o->dst = (float)num; break;
    case WGPT_OPT_FLAG: *(int *)o->dst = 1; break;
    }
}

static const char *type_name_(wgpt_opt_type t) {
    switch (t) {
    case WGPT_OPT_U32:
    case WGPT_OPT_U64: return "a whole number >= 0 (decimal digits)";
    case WGPT_OPT_COUNT: return "a whole number, K, M or G allowed (e.g. 100M; decimal)";
    case WGPT_OPT_F32: return "a number (decimal, e.g. 3e-4)";
    default: return "a value";
    }
}

int wgpt_opts_parse(int argc, char **argv, const wgpt_opt *opts, int nopts, const char *usage, char **positional,
                    int max_pos, int *npos) {
    return wgpt_opts_parse_ranged(argc, argv, opts, nopts, NULL, 0, usage, positional, max_pos, npos);
}

int wgpt_opts_parse_ranged(int argc, char **argv, const wgpt_opt *opts, int nopts, const wgpt_opt_range *ranges,
                           int nranges, const char *usage, char **positional, int max_pos, int *npos) {
    *npos = 0;
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_positional && strcmp(a, "--") == 0) {
            only_positional = 1;
            continue;
        }
        if (!only_positional && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            wgpt_opts_help_ranged(stdout, opts, nopts, ranges, nranges, usage);
            return 1;
        }
        if (only_positional || strncmp(a, "--", 2) != 0) {
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
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            val = argv[++i];
        } else if (i + 1 < argc) {
            fprintf(stderr, "%s: --%s needs a value (%s), but the next argument is '%s'; to give a value that "
                            "starts with --, write --%s=%s\n",
                    argv[0], o->name, type_name_(o->type), argv[i + 1], o->name, argv[i + 1]);
            return 2;
        } else {
            fprintf(stderr, "%s: --%s needs a value (%s)\n", argv[0], o->name, type_name_(o->type));
            return 2;
        }
        double num = 0;
        uint64_t whole = 0;
        int parsed = parse_(o, val, &num, &whole);
        if (parsed == -3) {
            fprintf(stderr, "%s: --%s: an empty value; give a name or path\n", argv[0], o->name);
            return 2;
        }
        if (parsed == -1) {
            fprintf(stderr, "%s: --%s: '%s' is not %s\n", argv[0], o->name, val, type_name_(o->type));
            return 2;
        }
        const wgpt_opt_range *rg = range_of_(o, ranges, nranges);
        if (parsed == -2 || !in_range_(rg, num)) {
            char r[96];
            wgpt_opt_range whole_type = type_range_(o);
            range_(r, sizeof r, o, rg ? rg : &whole_type);
            fprintf(stderr, "%s: --%s %s: out of range: allowed %s\n", argv[0], o->name, val, r);
            return 2;
        }
        store_(o, val, num, whole);
    }
    return 0;
}
