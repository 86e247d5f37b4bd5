// cmd_export.c: `wgpt export`: a model in Hugging Face's or llm.c's format.
#include <stdio.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "train/export.h"

int wgpt_cmd_export(int argc, char **argv) {
    const char *format = "hf", *out = NULL;
    int force = 0;
    const wgpt_opt opts[] = {
        {"format", WGPT_OPT_STR, &format, "hf (a folder for transformers' from_pretrained) or llmc (llm.c's .bin)"},
        {"out", WGPT_OPT_STR, &out, "the folder (hf) or file (llmc) to write"},
        {"force", WGPT_OPT_FLAG, &force, "replace an existing --out file that is not an llm.c model file"},
    };
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                             "usage: wgpt export MODEL --format hf|llmc --out PATH [--force]\n\nWrites MODEL (a checkpoint, a "
                             "Hugging Face GPT-2 folder or .safetensors, an llm.c .bin) in another program's format.",
                             pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1 || !out) {
        fprintf(stderr, "wgpt export: give the model to export and --out (see --help)\n");
        return 2;
    }
    char err[4096];
    if (wgpt_export(pos[0], format, out, force, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt export: %s\n", err);
        return 1;
    }
    printf("wrote %s (%s)\n", out, format);
    return 0;
}
