// cmd_sample.c: `wgpt sample`: parses options and prints text from a checkpoint
// (train/load.h, train/generate.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "train/load.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "train/generate.h"
#include "train/sampler.h"
#include "train/train_opts.h"  // defines: WGPT_TRAIN_MAX_SAMPLE_TOKENS

int wgpt_cmd_sample(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *prompt = "", *bpe_dir = wgpt_default_bpe_dir(), *adapter = NULL;
    const char *precision_s = "auto";
    uint32_t tokens = 200, top_k = 40, count = 1;
    float temperature = 0.8f;
    uint64_t seed = 42;
    const wgpt_opt opts[] = {
        {"checkpoint", WGPT_OPT_STR, &ckpt, "checkpoint written by `wgpt train`"},
        {"prompt", WGPT_OPT_STR, &prompt, "text to continue (default: start of a document)"},
        {"tokens", WGPT_OPT_U32, &tokens, "tokens to generate"},
        {"temperature", WGPT_OPT_F32, &temperature, "0: always the most likely token; higher: more varied"},
        {"top-k", WGPT_OPT_U32, &top_k, "sample among the k most likely tokens (0: all)"},
        {"seed", WGPT_OPT_U64, &seed, "random seed: the same seed gives the same text"},
        {"count", WGPT_OPT_U32, &count, "number of samples"},
        {"bpe-dir", WGPT_OPT_STR, &bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32 or f16: what the matmuls multiply (auto: f16 where the GPU has tensor cores)"},
    };
    const wgpt_opt_range ranges[] = {
        {"tokens", 1, WGPT_TRAIN_MAX_SAMPLE_TOKENS, 0},
        {"temperature", 0, 100, 0},
        {"top-k", 0, 65536, 0},
        {"count", 1, 10000, 0},
    };
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges,
                                    (int)(sizeof ranges / sizeof ranges[0]),
                                    "usage: wgpt sample [options]\n\nGenerates text from a trained model.", pos, 0,
                                    &npos);
    if (rc) return rc == 1 ? 0 : 2;
    wgpt_precision precision;
    if (wgpt_precision_arg("sample", precision_s, &precision) < 0) return 2;
    wgpt_gpu_options gpu = {.adapter_index = -1};
    wgpt_gpu_args_apply(&gpu, adapter);
    wgpt_loaded l;
    char err[4096];
    if (wgpt_load_for_inference(&l, ckpt, bpe_dir, &gpu, 1, 0, precision, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt sample: %s\n", err);
        return 1;
    }
    uint32_t *pids = NULL;
    size_t np = 0, pcap = 0;
    if (wgpt_tokenizer_encode(l.tok, prompt, strlen(prompt), &pids, &np, &pcap) < 0) {
        fprintf(stderr, "wgpt sample: out of memory encoding the prompt\n");
        wgpt_loaded_free(&l);
        return 1;
    }
    wgpt_sampler s;
    wgpt_sampler_init(&s, temperature, top_k, seed);
    for (uint32_t c = 0; c < count && rc == 0; c++) {
        char *text = wgpt_generate_text(l.model, l.cfg.max_seq_len, l.tok, &s, pids, np, tokens, 1, err, sizeof err);
        if (!text) {
            fprintf(stderr, "wgpt sample: %s: %s\n", ckpt, err);
            rc = 1;
            break;
        }
        if (count > 1) printf("--- sample %u ---\n", c + 1);
        printf("%s%s\n", prompt, text);
        free(text);
    }
    free(pids);
    wgpt_loaded_free(&l);
    return rc;
}
