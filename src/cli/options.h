// options.h: a table-driven command-line parser shared by the commands:
// `--name value` or `--name=value`, typed and range-checked, with the help
// text generated from the same table so that the two never disagree.
#ifndef WGPT_OPTIONS_H
#define WGPT_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

typedef enum {
    WGPT_OPT_STR,
    WGPT_OPT_U32,
    WGPT_OPT_U64,
    WGPT_OPT_F32,
    WGPT_OPT_FLAG,
    WGPT_OPT_COUNT,  // a uint64_t: a whole number with an optional K, M or G (10^3, 10^6, 10^9), e.g. 100M
} wgpt_opt_type;

typedef struct wgpt_opt {
    const char *name;  // without the leading "--"
    wgpt_opt_type type;
    void *dst;         // const char **, uint32_t *, uint64_t *, float *, int *
    const char *help;
} wgpt_opt;

// wgpt_opt_range.bounds: the ends of the range that are excluded.
#define WGPT_OPT_GT_MIN 1u  // the value must be > min (not >=)
#define WGPT_OPT_LT_MAX 2u  // the value must be < max (not <=)

// The allowed values of the numeric option `name` of a table: from min to max,
// ends included unless bounds says otherwise. An option without one takes
// any value of its type.
typedef struct wgpt_opt_range {
    const char *name;
    double min, max;
    unsigned bounds;
} wgpt_opt_range;

// Parses argv[1..argc) (argv[0] is the command's name). Arguments that are not
// options go to positional[] (at most max_pos; *npos receives the count); after
// "--" every argument is positional. A value is only stored when it is of the
// option's type and in its range. In `--name value` form a value that starts
// with "--" is refused as a forgotten value (`--name=--x` passes one).
// Numbers are decimal only (hex such as 0x10 is refused by every numeric
// type alike); a number of the right form but beyond its type (2^32 for a
// U32, 2^64 for a U64 or COUNT, 1e39 for an F32) is "out of range", naming
// the allowed range. An empty string value is refused ("--out ''") unless
// the option's default is itself "" (a prompt).
// Returns 0, 1 if --help was given (usage printed to stdout), or 2 after
// printing what is wrong to stderr (unknown option, missing or bad value,
// naming the option and the allowed range).
int wgpt_opts_parse(int argc, char **argv, const wgpt_opt *opts, int nopts, const char *usage, char **positional,
                    int max_pos, int *npos);
// The same with ranges[0, nranges) checked (and printed by --help).
int wgpt_opts_parse_ranged(int argc, char **argv, const wgpt_opt *opts, int nopts, const wgpt_opt_range *ranges,
                           int nranges, const char *usage, char **positional, int max_pos, int *npos);
// Prints usage then one line per option with its current (default) value and range.
void wgpt_opts_help(FILE *f, const wgpt_opt *opts, int nopts, const char *usage);
void wgpt_opts_help_ranged(FILE *f, const wgpt_opt *opts, int nopts, const wgpt_opt_range *ranges, int nranges,
                           const char *usage);

#endif
