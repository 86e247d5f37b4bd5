// cmd_eval.c: `wgpt eval`: parses options and prints the mean loss of a
// checkpoint on token shards (train/evaluate.h).
#include <math.h>
#include <stdio.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/gpu_args.h"
#include "cli/options.h"
#include "cli/precision_arg.h"
#include "train/evaluate.h"

int wgpt_cmd_eval(int argc, char **argv) {
    const char *ckpt = "runs/demo/latest.ckpt", *data = "data/fortunes/*.bin", *bpe_dir = wgpt_default_bpe_dir();
    const char *adapter = NULL, *precision_s = "auto";
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
        {"precision", WGPT_OPT_STR, &precision_s, "auto, fp32 or f16: what the matmuls multiply (auto: f16 where the GPU has tensor cores)"},
    };
    const wgpt_opt_range ranges[] = {{"val-fraction", 0, 1, WGPT_OPT_LT_MAX}, {"batch", 1, 65536, 0}};
    char *pos[1];
    int npos;
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges, 2,
                             "usage: wgpt eval [options]\n\nMean cross-entropy of a checkpoint on the validation "
                             "split of token shards.",
                             pos, 0, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    wgpt_precision precision;
    if (wgpt_precision_arg("eval", precision_s, &precision) < 0) return 2;
    wgpt_eval_opts eo = {.checkpoint = ckpt, .data = data, .bpe_dir = bpe_dir, .batch = batch, .batches = batches,
                         .val_fraction = val_fraction, .precision = precision, .gpu = {.adapter_index = -1}};
    char err[4096];
    if (wgpt_gpu_args_apply(&eo.gpu, adapter, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt eval: %s\n", err);
        return 1;
    }
    wgpt_eval_result res;
    if (wgpt_eval_checkpoint(&eo, &res, err, sizeof err) < 0) {
        fprintf(stderr, "wgpt eval: %s\n", err);
        return 1;
    }
    printf("checkpoint %s (step %llu): loss %.4f (perplexity %.2f) over %u batches of %u x %u tokens, precision %s\n",
           ckpt, res.step, res.loss, exp(res.loss), res.batches, batch, res.T, wgpt_precision_name(res.precision));
    return 0;
}
