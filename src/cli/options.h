// options.h: a table-driven command-line parser shared by the commands:
// `--name value` or `--name=value`, typed, with the help text generated from
// the same table so that the two never disagree.
#ifndef WGPT_OPTIONS_H
#define WGPT_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

typedef enum { WGPT_OPT_STR, WGPT_OPT_U32, WGPT_OPT_U64, WGPT_OPT_F32, WGPT_OPT_FLAG } wgpt_opt_type;

typedef struct wgpt_opt {
    const char *name;  // without the leading "--"
    wgpt_opt_type type;
    void *dst;         // const char **, uint32_t *, uint64_t *, float *, int *
    const char *help;
} wgpt_opt;

// Parses argv[1..argc) (argv[0] is the command's name). Arguments that are not
// options go to positional[] (at most max_pos; *npos receives the count).
// Returns 0, 1 if --help was given (usage printed to stdout), or 2 after
// printing what is wrong to stderr (unknown option, missing or bad value).
int wgpt_opts_parse(int argc, char **argv, const wgpt_opt *opts, int nopts, const char *usage, char **positional,
                    int max_pos, int *npos);
// Prints usage then one line per option with its current (default) value.
void wgpt_opts_help(FILE *f, const wgpt_opt *opts, int nopts, const char *usage);

#endif
