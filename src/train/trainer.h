// trainer.h: the training loop: data, model, AdamW with warmup and cosine
// decay, gradient accumulation, validation, sampling, metrics, checkpoints
// and exact resume.
#ifndef WGPT_TRAINER_H
#define WGPT_TRAINER_H

#include <stdint.h>

#include "gpu/gpu.h"

typedef struct wgpt_train_opts {
    const char *data;       // shard files: a glob, e.g. "data/fortunes/*.bin"
    const char *out_dir;    // checkpoint, metrics.jsonl, loss.svg, samples go here
    const char *resume;     // NULL: fresh unless out_dir/latest.ckpt exists; "none": always fresh; else a path
    const char *tokenizer;  // "gpt2" or "bytes" (must match how the shards were made)
    const char *bpe_dir;    // encoder.json and vocab.bpe for "gpt2"
    const char *init_from;  // NULL: random init; else a model file (model_file.h) whose weights and sizes
                            // a fresh run starts from (fresh optimizer and schedule; layers/heads/channels unused)
    uint32_t layers, heads, channels;
    uint32_t batch, seq;       // micro-batch B x T
    uint32_t total_batch;      // tokens per optimizer step: a multiple of batch*seq (accumulation)
    uint32_t steps;            // optimizer steps in the whole run (the schedule's length)
    uint32_t stop_at;          // 0: run to the end; else stop (with a checkpoint) after this step
    float lr, min_lr_frac;     // peak learning rate; cosine floor as a fraction of it
    uint32_t warmup;           // warmup steps
    float weight_decay, beta1, beta2, eps, grad_clip;
    uint32_t val_every, val_batches;  // validation every N steps over M batches (0: off)
    uint32_t sample_every, sample_tokens;
    float temperature;
    uint32_t top_k;
    uint32_t checkpoint_every;  // also at the end and on SIGINT/SIGTERM
    uint32_t log_every;         // progress lines when stdout is not a terminal
    float val_fraction;         // with a single shard: its tail used for validation
    float spike_factor;         // skip a step whose gradient norm exceeds this x the recent mean (0: off)
    uint32_t max_skips;         // stop after this many skipped steps in a row (the last checkpoint is kept)
    const char *inject_nan;     // testing: comma-separated steps whose gradients get a NaN
    uint32_t inject_loss_at;    // testing: lose the GPU device during this step
    uint64_t seed;
    int quiet;
    wgpt_gpu_options gpu;
} wgpt_train_opts;

// Defaults: a small model for the demo (see wgpt_train_defaults in trainer.c).
void wgpt_train_defaults(wgpt_train_opts *o);

// Runs (or resumes) a training run. Returns 0 when it finished or was
// interrupted cleanly (a checkpoint is written either way), 1 on an error
// (the message is printed, prefixed with "wgpt train: "), 2 on bad options.
int wgpt_train_run(const wgpt_train_opts *o);

// Set by SIGINT/SIGTERM: the loop finishes the current step, checkpoints, stops.
extern volatile int wgpt_train_stop_requested;

#endif
