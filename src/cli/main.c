// main.c: the `wgpt` command. Parses the subcommand and hands over; the work
// lives in the layers below.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "gpu/gpu.h"

static void usage_(FILE *f) {
    fprintf(f,
            "usage: wgpt <command> [options]\n\n"
            "commands:\n"
            "  tokenize  text files -> token shards for training\n"
            "  train     train a GPT-2 model on token shards (resumes where it stopped)\n"
            "  sample    generate text from a checkpoint\n"
            "  serve     a checkpoint behind an OpenAI-compatible HTTP API\n"
            "  eval      validation loss of a checkpoint\n"
            "  info      the GPU adapters Dawn offers, the chosen device and its limits\n"
            "  bench     time GPT-2 training steps (default: 124M, batch 4 x 1024)\n"
            "  export    a model in Hugging Face's or llm.c's format\n\n"
            "Run `wgpt <command> --help` for a command's options.\n");
}

static int run_(int argc, char **argv);

// A command that left a GPU hung (a timeout, a second Ctrl-C) ends with _exit:
// a normal exit would wait for the hung work in the driver's exit handlers.
int main(int argc, char **argv) {
    int rc = run_(argc, argv);
    if (wgpt_gpu_left_hung()) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}

static int run_(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage_(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "info") == 0) return wgpt_cmd_info(argc - 1, argv + 1);
    if (strcmp(argv[1], "bench") == 0) return wgpt_cmd_bench(argc - 1, argv + 1);
    if (strcmp(argv[1], "train") == 0) return wgpt_cmd_train(argc - 1, argv + 1);
    if (strcmp(argv[1], "sample") == 0) return wgpt_cmd_sample(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0) return wgpt_cmd_serve(argc - 1, argv + 1);
    if (strcmp(argv[1], "eval") == 0) return wgpt_cmd_eval(argc - 1, argv + 1);
    if (strcmp(argv[1], "tokenize") == 0) return wgpt_cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(argv[1], "export") == 0) return wgpt_cmd_export(argc - 1, argv + 1);
    fprintf(stderr, "wgpt: unknown command '%s'\n\n", argv[1]);
    usage_(stderr);
    return 2;
}
