// run_internal.h: what the files of a training run share (internal to
// src/train; the public entry is trainer.h). A run's state (run_), one
// optimizer step's (step_), and the functions each file gives the others:
//   run_say.c     the run's messages: lines for the user, the error, what is kept
//   run_open.c    opening and closing a run: folder, data, tokenizer, GPU, model
//   run_files.c   the run's files: checkpoint writing and resume, metrics.jsonl, loss.svg
//   exchange.c    the multi-rank gradient exchange (ZeRO-1, buckets)
//   agree.c       the ranks' agreement on the options and on stopping
//   run_sample.c  sampling during training
//   spike.c       the gradient norm spike detector (spike.h)
//   trainer.c     the loop
// Functions here return 0, or 1 with the message in r->err (wgpt_run_fail_),
// unless they say otherwise.
#ifndef WGPT_RUN_INTERNAL_H
#define WGPT_RUN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/comm.h"
#include "model/gpt2.h"
#include "train/history.h"
#include "model/gpt2_decode.h"
#include "train/sampler.h"
#include "train/train_opts.h"

// One bucket of the bucketed gradient exchange: the gradients one backward
// segment finishes (model/gpt2.h), at their place in run_.grads.
typedef struct bucket_ {
    float *host;
    uint64_t *counts;    // of its floats in each rank's optimizer shard (the reduce-scatter's shares)
    wgpt_comm_sum *sum;  // while it is summed over the ranks
    int state;           // BUCKET_
} bucket_;
enum { BUCKET_ON_GPU, BUCKET_SUMMING, BUCKET_DONE };

typedef struct run_ {
    const wgpt_train_opts *o;
    wgpt_gpu *g;
    wgpt_tokenizer *tok;
    wgpt_loader *loader;
    wgpt_gpt2_config cfg;
    wgpt_gpt2 *model, *sampler_model;
    wgpt_decoder *sampler_dec;  // the KV-cache decoder of sampler_model (NULL: the full recompute samples)
    int sampler_tried;          // the decoder was tried (a failure is not retried)
    wgpt_sampler sampler;
    wgpt_history hist;
    FILE *metrics;
    uint32_t accum, step;
    int64_t saved_step;  // step of the checkpoint at path_ckpt that this run may resume from; -1: none
    int *inputs, *targets;
    int lock;  // the output folder's lock (dir_lock.h)
    wgpt_comm *comm;  // NULL: one process
    int rank, nranks;  // rank 0 alone prints, logs and writes checkpoints
    float *grads;      // host copy of the gradients for the sum over the ranks
    // --grad-buckets 1: one bucket per backward segment (NULL: one sum after the backward)
    bucket_ *buckets;
    uint32_t nbuckets;
    uint64_t *counts;  // the shares of the reduce-scatters: one piece's, then each bucket's (nranks each)
    double exchange_s, overlap_s;  // every step's exchange in flight, and the part while the backward ran
    // ZeRO-1 (several ranks): each rank's shard of the padded parameter array;
    // the all-gather of the updated shards (every rank's update, in words:
    // wgpt_gpt2_shard_update_words), and where each rank's lies in it
    uint64_t *shard_off, *shard_n;
    uint32_t *updates;
    uint64_t *update_off, *update_n;
    int stopping;      // a stop every rank agreed on
    char path_ckpt[4096], path_metrics[4096], path_svg[4096];
    char err[8192];  // the error message, one line per fail_
} run_;

#define INFO_ WGPT_TRAIN_INFO
#define WARN_ WGPT_TRAIN_WARN

typedef struct step_ {
    uint32_t t;
    double loss, seconds, comm_seconds;
    double comm0;                   // the comm layer's seconds when the step began
    double exchange_s, overlap_s;   // the gradient exchange in flight; the part while the backward ran
    // the bucketed exchange's clock: sums in flight, the backward's end, the last mark
    int inflight, gpu_done;
    double mark;
    float lr;
    wgpt_step_result res;
} step_;

// run_say.c
// A line for the user, handed to the caller's o->say (rank 0 only).
void wgpt_run_say_(const run_ *r, wgpt_train_say_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Adds a line to r->err and returns 1.
int wgpt_run_fail_(run_ *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int wgpt_run_stop_requested_(const run_ *r);
// What survives a failure, in buf.
const char *wgpt_run_kept_(const run_ *r, char *buf, size_t n);

// run_open.c: everything a run needs, opened in order; 2: options refused.
int wgpt_run_open_(run_ *r);
void wgpt_run_close_(run_ *r);

// run_files.c
// Writes r->path_ckpt (every rank calls it: the others send their shards). 0 or -1.
int wgpt_run_write_checkpoint_(run_ *r);
int wgpt_run_resume_(run_ *r, const char *path);
int wgpt_run_open_metrics_(run_ *r, int resumed);
const char *wgpt_run_json_num_(char buf[32], double x, const char *fmt);
int wgpt_run_log_(run_ *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Draws loss.svg from the history (rank 0); a failure is a warning.
void wgpt_run_plot_(const run_ *r);

// exchange.c (several ranks)
int wgpt_run_gather_state_(run_ *r, float *params, float *adam_m, float *adam_v);  // 0 or -1
int wgpt_run_open_buckets_(run_ *r);
int wgpt_run_sum_over_ranks_(run_ *r, step_ *s);
int wgpt_run_accumulate_bucketed_(run_ *r, step_ *s, int first, float *loss, char *err, size_t errlen);  // 0 or -1
int wgpt_run_update_sharded_(run_ *r, const wgpt_adamw_config *ac, step_ *s, int global);
int wgpt_run_gather_params_(run_ *r, step_ *s);
void wgpt_run_say_exchange_(const run_ *r, uint32_t steps);

// agree.c
int wgpt_run_agree_(run_ *r);
int wgpt_run_agree_stop_(run_ *r);

// run_sample.c
void wgpt_run_print_sample_(run_ *r, const char *tag);

#endif
