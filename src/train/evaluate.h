// evaluate.h: the validation loss: the loop `wgpt train` runs every
// --val-every steps (wgpt_val_run) and `wgpt eval`'s evaluation of a
// checkpoint on token shards (wgpt_eval_checkpoint).
#ifndef WGPT_EVALUATE_H
#define WGPT_EVALUATE_H

#include <stdint.h>

#include "data/loader.h"
#include "gpu/gpu.h"
#include "model/gpt2.h"

typedef struct wgpt_val_loss {
    double sum;          // of the batches' losses (each the mean over its B x T tokens)
    uint32_t batches;    // batches evaluated; 0: the loader holds no validation batch
    uint32_t nonfinite;  // 0, or the first batch (from 1) whose loss is NaN or Inf: the loop stopped there
    float bad_loss;      // that batch's loss
    int data_failed;     // after -1: a shard shrank under the loader (not a model error)
} wgpt_val_loss;

// The forward loss of m over ld's validation batches from the first (the
// loader's validation position is reset), at most max_batches of them (0:
// all). inputs and targets hold one batch (B x T ints: the loader's and the
// model's shape). Returns 0 with *res filled, or -1 with err (a model error,
// or res->data_failed: wgpt_loader_error's message).
int wgpt_val_run(wgpt_gpt2 *m, wgpt_loader *ld, uint32_t max_batches, int *inputs, int *targets, wgpt_val_loss *res,
                 char *err, size_t errlen);

// What `wgpt eval` evaluates.
typedef struct wgpt_eval_opts {
    const char *checkpoint;  // written by `wgpt train`
    const char *data;        // token shards (a glob); their validation split is evaluated
    const char *bpe_dir;     // GPT-2's tokenizer files, for a checkpoint trained with gpt2
    uint32_t batch;          // sequences a batch (the context is the checkpoint's)
    uint32_t batches;        // batches to evaluate (0: the whole validation split)
    float val_fraction;      // with one shard: the share of it held out (as in training)
    wgpt_precision precision;  // of the forward (auto: model/gpt2.h)
    wgpt_gpu_options gpu;
} wgpt_eval_opts;

typedef struct wgpt_eval_result {
    unsigned long long step;  // the checkpoint's
    double loss;              // mean over the batches
    uint32_t batches, T;      // batches of o->batch x T tokens
    wgpt_precision precision;  // what auto became
} wgpt_eval_result;

// Loads the checkpoint (its tokenizer must be the one the shards record) and
// evaluates it. Returns 0 with *res, or -1 with err (a file, the tokenizer,
// the device, no validation batch, or a non-finite loss: weights that
// overflow on this data).
int wgpt_eval_checkpoint(const wgpt_eval_opts *o, wgpt_eval_result *res, char *err, size_t errlen);

#endif
