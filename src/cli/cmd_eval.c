// cmd_eval.c: `wgpt eval`: the mean loss of a checkpoint on token shards.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/gpu_args.h"
#include "train/load.h"
#include "cli/options.h"
#include "data/loader.h"

int wgpt_cmd_eval(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *data = "data/fortunes/*.bin", *bpe_dir = "third_party/gpt2-bpe";
    const char *adapter = NULL;
    uint32_t batch = 8, batches = 0;
    float val_fraction = 0.1f;
    const wgpt_opt opts[] = {
        {"checkpoint", WGPT_OPT_STR, &ckpt, "checkpoint written by `wgpt train`"},
        {"data", WGPT_OPT_STR, &data, "token shards (a glob); their validation split is evaluated"},
        {"val-fraction", WGPT_OPT_F32, &val_fraction, "with one shard: the share of it held out (as in training)"},
        {"batch", WGPT_OPT_U32, &batch, "sequences per batch"},
        {"batches", WGPT_OPT_U32, &batches, "batches to evaluate (0: the whole validation split)"},
        {"bpe-dir", WGPT_OPT_STR, &bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"adapter", WGPT_OPT_STR, &adapter, "GPU adapter: index or part of its name"},
    };
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]),
                             "usage: wgpt eval [options]\n\nMean cross-entropy of a checkpoint on the validation "
                             "split of token shards.",
                             pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    wgpt_gpu_options gpu = {.adapter_index = -1};
    wgpt_gpu_args_apply(&gpu, adapter);
    wgpt_loaded l;
    if (wgpt_load_for_inference(&l, "wgpt eval", ckpt, bpe_dir, &gpu, batch, 0) < 0) return 1;
    char err[2048];
    uint32_t T = l.cfg.max_seq_len;
    wgpt_loader *ld = wgpt_loader_open(data, batch, T, 0, val_fraction, l.cfg.vocab_size, err, sizeof err);
    if (!ld) {
        fprintf(stderr, "wgpt eval: %s\n", err);
        wgpt_loaded_free(&l);
        return 1;
    }
    int *in = malloc((size_t)batch * T * sizeof *in), *tg = malloc((size_t)batch * T * sizeof *tg);
    double sum = 0;
    uint32_t n = 0;
    rc = in && tg ? 0 : 1;
    while (rc == 0 && (!batches || n < batches) && wgpt_loader_next_val(ld, in, tg) == 1) {
        float loss;
        if (wgpt_gpt2_forward(l.model, in, tg, &loss) < 0) {
            fprintf(stderr, "wgpt eval: %s\n", wgpt_gpt2_error(l.model));
            rc = 1;
            break;
        }
        sum += loss;
        n++;
    }
    if (rc == 0 && n == 0) {
        fprintf(stderr, "wgpt eval: %s has no validation batch of %u x %u tokens\n", data, batch, T);
        rc = 1;
    }
    if (rc == 0)
        printf("checkpoint %s (step %llu): loss %.4f (perplexity %.2f) over %u batches of %u x %u tokens\n", ckpt,
               l.step, sum / n, exp(sum / n), n, batch, T);
    free(in), free(tg);
    wgpt_loader_free(ld);
    wgpt_loaded_free(&l);
    return rc;
}
