// cmd_eval.c: `wgpt eval`: the mean loss of a checkpoint on token shards.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "train/load.h"
#include "cli/options.h"
#include "data/loader.h"

int wgpt_cmd_eval(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *data = "data/fortunes/*.bin", *bpe_dir = wgpt_default_bpe_dir();
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
    const wgpt_opt_range ranges[] = {{"val-fraction", 0, 1, WGPT_OPT_LT_MAX}, {"batch", 1, 65536, 0}};
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges, 2,
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
    // The tokenizer the shards record is compared before their ids are checked.
    wgpt_loader *ld = wgpt_loader_open(data, batch, T, 0, val_fraction, 65536, err, sizeof err);
    const char *made_with = ld ? wgpt_loader_tokenizer(ld) : NULL, *trained_with = wgpt_tokenizer_name(l.tok);
    if (ld && made_with && strcmp(made_with, trained_with) != 0) {
        snprintf(err, sizeof err, "the shards (%s) were made with the %s tokenizer, but %s was trained with %s", data,
                 made_with, ckpt, trained_with);
        wgpt_loader_free(ld);
        ld = NULL;
    }
    if (ld && wgpt_loader_check_vocab(ld, l.cfg.vocab_size, err, sizeof err) < 0) {
        wgpt_loader_free(ld);
        ld = NULL;
    }
    if (!ld) {
        fprintf(stderr, "wgpt eval: %s\n", err);
        wgpt_loaded_free(&l);
        return 1;
    }
    size_t bt = (size_t)batch * T;
    int *in = malloc(bt * sizeof *in), *tg = malloc(bt * sizeof *tg);
    double sum = 0;
    uint32_t n = 0;
    rc = in && tg ? 0 : 1;
    if (rc) fprintf(stderr, "wgpt eval: out of host memory for batches of %u x %u tokens\n", batch, T);
    int got = 0;
    while (rc == 0 && (!batches || n < batches) && (got = wgpt_loader_next_val(ld, in, tg)) == 1) {
        float loss;
        if (wgpt_gpt2_forward(l.model, in, tg, &loss) < 0) {
            fprintf(stderr, "wgpt eval: %s\n", wgpt_gpt2_error(l.model));
            rc = 1;
            break;
        }
        // A NaN is no loss to report: the weights overflow on this data.
        if (!isfinite(loss)) {
            fprintf(stderr, "wgpt eval: the loss of batch %u is %s: %s's weights overflow on this data\n", n + 1,
                    isnan(loss) ? "NaN" : "Inf", ckpt);
            rc = 1;
            break;
        }
        sum += loss;
        n++;
    }
    if (rc == 0 && got < 0) {
        fprintf(stderr, "wgpt eval: %s\n", wgpt_loader_error(ld));
        rc = 1;
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
