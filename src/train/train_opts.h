// train_opts.h: the options of a training run, their defaults and the rules
// every one of them must satisfy before anything is opened.
#ifndef WGPT_TRAIN_OPTS_H
#define WGPT_TRAIN_OPTS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "model/gpt2.h"  // defines: wgpt_precision

// The kinds of line a run hands to its caller (wgpt_train_opts.say). The
// library prints nothing; the command prints these.
typedef enum wgpt_train_say_kind {
    WGPT_TRAIN_INFO,  // progress: device, model, data, step lines, validation losses, samples; ends in '\n'
    WGPT_TRAIN_LIVE,  // the live step line: starts with '\r', no newline (opts.live)
    WGPT_TRAIN_WARN,  // one line on a problem the run continues past: a skipped step, a failed sample or plot
} wgpt_train_say_kind;
typedef void (*wgpt_train_say_fn)(void *ctx, wgpt_train_say_kind kind, const char *text);

typedef struct wgpt_train_opts {
    const char *data;       // shard files: a glob, e.g. "data/fortunes/*.bin"
    const char *out_dir;    // checkpoint, metrics.jsonl, loss.svg, samples go here
    const char *resume;     // NULL: fresh unless out_dir/latest.ckpt exists; "none": always fresh; else a path
    const char *tokenizer;  // "gpt2" or "bytes"; NULL: the one the shards record (bytes if they record none)
    const char *bpe_dir;    // encoder.json and vocab.bpe for "gpt2"
    wgpt_precision precision;  // what the matmuls multiply (model/gpt2.h; the CLI parses --precision)
    const char *recompute;  // "auto", "none", "gelu" or "all": activations recomputed in the backward (model/gpt2.h)
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
    uint32_t checkpoint_every;  // also at the end and on a stop request
    uint32_t log_every;         // progress lines when not live
    float val_fraction;         // with a single shard: its tail used for validation
    float spike_factor;         // skip a step whose gradient norm exceeds this x the recent mean (0: off)
    uint32_t max_skips;         // stop after this many skipped steps in a row (the last checkpoint is kept)
    const char *inject_nan;     // testing: comma-separated steps whose gradients get a NaN
    uint32_t inject_loss_at;    // testing: lose the GPU device during this step
    uint64_t seed;
    // What the run tells its user, handed to say (NULL: nothing); the caller
    // prints it. live: the step line is a WGPT_TRAIN_LIVE line rewritten in
    // place (a terminal) rather than an INFO line every log_every steps.
    wgpt_train_say_fn say;
    void *say_ctx;
    int live;
    // Set nonzero by the caller (its SIGINT/SIGTERM handler): the run finishes
    // the current step, writes a checkpoint and returns 0. NULL: never.
    volatile sig_atomic_t *stop;
    // The ranks of a data-parallel run (dist/comm.h; NULL: one process). Each
    // rank trains batch x seq sequences of every micro-batch on its own GPU;
    // total_batch counts the tokens of all ranks together.
    struct wgpt_comm *comm;
    // With several ranks: 1 sums the gradients in buckets (one per backward
    // segment, model/gpt2.h) while the backward runs, 0 in one piece after it;
    // the same result bit for bit.
    uint32_t grad_buckets;
    wgpt_gpu_options gpu;  // gpu.interrupt ends a stuck GPU wait (see gpu.h)
} wgpt_train_opts;

// Defaults: a small model for the demo.
void wgpt_train_defaults(wgpt_train_opts *o);

// The allowed values of a numeric option, by its `wgpt train` name ("lr"):
// from min to max, an end excluded where open_min / open_max say so. NULL for
// an option without a range (a seed, a string).
typedef struct wgpt_train_limit {
    const char *option;
    double min, max;
    int open_min, open_max;
} wgpt_train_limit;
const wgpt_train_limit *wgpt_train_limit_of(const char *option);

// Checks every option against its range and against the others (channels a
// multiple of heads, total batch a multiple of batch x seq, stop-at
// within steps, ...). Returns 0, or -1 with err naming the option (as
// --name), its value and what is allowed.
int wgpt_train_check(const wgpt_train_opts *o, char *err, size_t errlen);

// Largest sample a run prints (--sample-tokens), and micro-batches a step.
#define WGPT_TRAIN_MAX_SAMPLE_TOKENS (1u << 20)
#define WGPT_TRAIN_MAX_ACCUM (1u << 20)

#endif
