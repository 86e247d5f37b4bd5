// trainer.c: the training loop (see trainer.h).
#include "train/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/comm.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/history.h"
#include "train/model_file.h"
#include "train/sampler.h"
#include "train/schedule.h"
#include "util/clock.h"
#include "util/dir_lock.h"
#include "util/err.h"
#include "util/fs.h"

#define LOCK_FILE ".wgpt-train.lock"

// What a checkpoint must agree on to resume exactly (stored as its opaque
// blob), and since version 2 the precision and the dynamic loss scale's state
// (a version 1 blob, 64 bytes, is an fp32 run's).
typedef struct saved_opts_ {
    uint32_t version, batch, seq, accum, steps, warmup;
    float lr, min_lr_frac, weight_decay, beta1, beta2, eps, grad_clip;
    uint32_t pad0_;  // the padding before seed, named so that it is 0 in files and in the options hash
    uint64_t seed;
    uint32_t precision, loss_clean_steps;  // version 2: wgpt_precision of the run (never auto)
    float loss_scale;
    uint32_t pad_;
} saved_opts_;
#define SAVED_OPTS_V1_SIZE offsetof(saved_opts_, precision)
_Static_assert(SAVED_OPTS_V1_SIZE == 64, "a version 1 blob is 64 bytes");

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

// A line for the user, handed to the caller's o->say (the library prints nothing).
static void say_(const run_ *r, wgpt_train_say_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say_(const run_ *r, wgpt_train_say_kind kind, const char *fmt, ...) {
    if (!r->o->say || r->rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;  // a sample may be megabytes
    if (!text) return;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    r->o->say(r->o->say_ctx, kind, text);
    free(text);
}
#define INFO_ WGPT_TRAIN_INFO
#define WARN_ WGPT_TRAIN_WARN

// Adds a line to the run's error message (what failed, then what is kept)
// and returns 1, so that a failing step reads `return fail_(r, ...)`.
static int fail_(run_ *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_(run_ *r, const char *fmt, ...) {
    size_t n = strlen(r->err);
    if (n && n + 1 < sizeof r->err) r->err[n++] = '\n', r->err[n] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, sizeof r->err - n, fmt, ap);
    va_end(ap);
    return 1;
}

static int stop_requested_(const run_ *r) { return r->o->stop && *r->o->stop; }

// What survives a failure: the checkpoint this run can resume from, if any.
static const char *kept_(const run_ *r, char *buf, size_t n) {
    if (r->saved_step >= 0)
        snprintf(buf, n, "the last checkpoint (%s, step %lld) is kept: run the same command again to resume from it",
                 r->path_ckpt, (long long)r->saved_step);
    else
        snprintf(buf, n, "no checkpoint had been written yet (--checkpoint-every %u): the steps of this run are lost",
                 r->o->checkpoint_every);
    return buf;
}

static saved_opts_ saved_(const run_ *r) {
    const wgpt_train_opts *o = r->o;
    return (saved_opts_){2, o->batch, o->seq, r->accum * (uint32_t)r->nranks, o->steps, o->warmup, o->lr, o->min_lr_frac,
                         o->weight_decay, o->beta1, o->beta2, o->eps, o->grad_clip, 0, o->seed,
                         (uint32_t)wgpt_gpt2_precision(r->model), wgpt_gpt2_loss_scale_clean_steps(r->model),
                         wgpt_gpt2_loss_scale(r->model), 0};
}

// Several ranks: each holds 1/N of the moments and, in f16, of the fp32
// matmul weights (ZeRO-1): the fp32 parameters and both moments are gathered
// to rank 0 in the padded layout and returned there in the reference layout
// (every rank's true fp32 masters: the f16 copies are not what a checkpoint
// holds). Every rank must call it at the same step.
static int gather_state_(run_ *r, float *params, float *adam_m, float *adam_v) {
    uint64_t P = wgpt_gpt2_padded_params(r->model), off = r->shard_off[r->rank], n = r->shard_n[r->rank];
    uint64_t each = r->rank == 0 ? P : n;  // rank 0 receives the whole padded arrays; the others send their shard
    char err[1024];
    float *pp = malloc(each * sizeof *pp), *pm = malloc(each * sizeof *pm), *pv = malloc(each * sizeof *pv);
    int rc = -1;
    if (!pp || !pm || !pv) {
        fail_(r, "out of host memory gathering the parameters and optimizer state");
    } else {
        uint64_t at = r->rank == 0 ? off : 0;
        if (wgpt_gpt2_get_param_shard(r->model, pp + at) < 0 || wgpt_gpt2_get_adam_shard(r->model, pm + at, pv + at) < 0)
            fail_(r, "reading the parameters and optimizer state for a checkpoint: %s", wgpt_gpt2_error(r->model));
        else if (wgpt_comm_gather_floats(r->comm, pp + at, pp, r->shard_off, r->shard_n, 0, err, sizeof err) < 0 ||
                 wgpt_comm_gather_floats(r->comm, pm + at, pm, r->shard_off, r->shard_n, 0, err, sizeof err) < 0 ||
                 wgpt_comm_gather_floats(r->comm, pv + at, pv, r->shard_off, r->shard_n, 0, err, sizeof err) < 0)
            fail_(r, "gathering the parameters and optimizer state for a checkpoint: %s", err);
        else {
            if (r->rank == 0)
                wgpt_gpt2_unpad(r->model, pp, params), wgpt_gpt2_unpad(r->model, pm, adam_m),
                    wgpt_gpt2_unpad(r->model, pv, adam_v);
            rc = 0;
        }
    }
    free(pp), free(pm), free(pv);
    return rc;
}

static int write_checkpoint_(run_ *r) {
    if (r->rank != 0) {  // rank 0 writes the checkpoint, with every rank's shard
        if (gather_state_(r, NULL, NULL, NULL) < 0) return -1;
        return (void)(r->saved_step = r->step), 0;
    }
    size_t np = wgpt_gpt2_num_params(&r->cfg);
    wgpt_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    ck.config = r->cfg;
    ck.step = r->step;
    snprintf(ck.tokenizer, sizeof ck.tokenizer, "%s", wgpt_tokenizer_name(r->tok));
    ck.rng[0] = r->sampler.rng;
    saved_opts_ so = saved_(r);
    ck.train_opts = &so;
    ck.train_opts_len = sizeof so;
    ck.loader_state_len = wgpt_loader_state_size();
    ck.loader_state = malloc(ck.loader_state_len);
    ck.params = malloc(np * sizeof(float));
    ck.adam_m = malloc(np * sizeof(float));
    ck.adam_v = malloc(np * sizeof(float));
    int rc = -1;
    char err[1024];
    if (!ck.loader_state || !ck.params || !ck.adam_m || !ck.adam_v) {
        fail_(r, "out of host memory writing a checkpoint");
    } else if (r->nranks > 1 && gather_state_(r, ck.params, ck.adam_m, ck.adam_v) < 0) {
        // the message is in r->err
    } else if (r->nranks == 1 && (wgpt_gpt2_get_params(r->model, ck.params) < 0 ||
                                  wgpt_gpt2_get_adam(r->model, ck.adam_m, ck.adam_v) < 0)) {
        fail_(r, "reading the model for a checkpoint: %s", wgpt_gpt2_error(r->model));
    } else {
        wgpt_loader_save_state(r->loader, ck.loader_state);
        if (wgpt_checkpoint_write(r->path_ckpt, &ck, err, sizeof err) < 0) fail_(r, "%s", err);
        else rc = 0, r->saved_step = r->step;
    }
    free(ck.loader_state), free(ck.params), free(ck.adam_m), free(ck.adam_v);
    return rc;
}

// An f16 run resumed from an f16 checkpoint goes on with its loss scale;
// from an fp32 one (or a version 1 checkpoint) it starts from the initial scale.
static int restore_loss_scale_(run_ *r, const saved_opts_ *was, const char *path) {
    if (wgpt_gpt2_precision(r->model) != WGPT_PRECISION_F16) return 0;
    if (was->version < 2 || was->precision != WGPT_PRECISION_F16) {
        say_(r, INFO_, "%s is an fp32 run's: the f16 run starts with the loss scale %g\n", path,
             (double)WGPT_LOSS_SCALE_INIT);
        return 0;
    }
    return wgpt_gpt2_restore_loss_scale(r->model, was->loss_scale, was->loss_clean_steps);
}

// Loads a checkpoint into the run. Returns 0, or 1 (the error in r->err).
static int resume_(run_ *r, const char *path) {
    char err[1024];
    wgpt_checkpoint ck;
    if (wgpt_checkpoint_read(path, &ck, err, sizeof err) < 0) return fail_(r, "cannot resume: %s", err);
    int rc = 1;
    saved_opts_ now = saved_(r), was;
    memset(&was, 0, sizeof was);
    if (ck.train_opts_len == sizeof was || ck.train_opts_len == SAVED_OPTS_V1_SIZE)
        memcpy(&was, ck.train_opts, ck.train_opts_len);
    if (strcmp(ck.tokenizer, wgpt_tokenizer_name(r->tok)) != 0) {
        fail_(r, "%s was trained with the '%s' tokenizer, not '%s' (--tokenizer)", path, ck.tokenizer,
              wgpt_tokenizer_name(r->tok));
    } else if (memcmp(&ck.config, &r->cfg, sizeof r->cfg) != 0) {
        fail_(r, "%s holds a model of L=%u H=%u C=%u T=%u V=%u; the options ask for L=%u H=%u C=%u T=%u V=%u "
              "(pass the same --layers/--heads/--channels/--seq, or --resume none to start afresh)",
              path, ck.config.num_layers, ck.config.num_heads, ck.config.channels, ck.config.max_seq_len,
              ck.config.vocab_size, r->cfg.num_layers, r->cfg.num_heads, r->cfg.channels, r->cfg.max_seq_len,
              r->cfg.vocab_size);
    } else if (was.batch != now.batch || was.seq != now.seq || was.seed != now.seed || was.accum != now.accum) {
        fail_(r, "%s was made with batch %u x %u, %u micro-batches a step (all ranks together) and seed %llu; "
              "resuming exactly needs the same (--batch, --seq, --total-batch, --seed)",
              path, was.batch, was.seq, was.accum, (unsigned long long)was.seed);
    } else if (!ck.adam_m) {
        fail_(r, "%s holds no optimizer state (a weights-only export): it cannot resume training", path);
    } else if (wgpt_loader_load_state(r->loader, ck.loader_state, ck.loader_state_len, err, sizeof err) < 0) {
        fail_(r, "%s: %s", path, err);
    } else if (wgpt_gpt2_set_params(r->model, ck.params) < 0 || wgpt_gpt2_set_adam(r->model, ck.adam_m, ck.adam_v) < 0) {
        fail_(r, "%s", wgpt_gpt2_error(r->model));
    } else if (ck.step > r->o->steps) {
        fail_(r, "%s is at step %llu, past the end of this run (--steps %u)", path, (unsigned long long)ck.step,
              r->o->steps);
    } else if (restore_loss_scale_(r, &was, path) < 0) {
        fail_(r, "%s: %s", path, wgpt_gpt2_error(r->model));
    } else {
        r->step = (uint32_t)ck.step;
        r->sampler.rng = ck.rng[0];
        if (strcmp(path, r->path_ckpt) == 0) r->saved_step = r->step;
        rc = 0;
    }
    wgpt_checkpoint_free(&ck);
    return rc;
}

// The validation loss: 0 with *out, 1 if there is no validation data, -1 on
// a model error or a non-finite loss, -2 if a shard shrank (the error in r->err).
static int validate_(run_ *r, float *out) {
    wgpt_val_loss v;
    char err[2048];
    if (wgpt_val_run(r->model, r->loader, r->o->val_batches, r->inputs, r->targets, &v, err, sizeof err) < 0)
        return fail_(r, "validation: %s", err), v.data_failed ? -2 : -1;
    if (v.nonfinite)
        return -fail_(r, "the validation loss at step %u is %s: the model has diverged", r->step,
                      isnan(v.bad_loss) ? "NaN" : "Inf");
    if (!v.batches) return 1;
    *out = (float)(v.sum / v.batches);
    return 0;
}

// A sample for the user; a failure is a warning: the run goes on.
static void print_sample_(run_ *r, const char *tag) {
    char err[1024];
    if (!r->sampler_model) {
        r->sampler_model = wgpt_gpt2_create_inference(r->model, 1, r->o->seq, err, sizeof err);
        if (!r->sampler_model) {
            say_(r, WARN_, "sampling: %s", err);
            return;
        }
    }
    char *text = wgpt_generate_text(r->sampler_model, r->o->seq, r->tok, &r->sampler, NULL, 0, r->o->sample_tokens,
                                    0, err, sizeof err);
    if (!text) {
        say_(r, WARN_, "sampling: %s", err);
        return;
    }
    say_(r, INFO_, "\n--- sample %s ---\n%s\n---\n", tag, text);
    free(text);
}

// Whether step t is in the comma-separated list (testing hook).
static int injected_(const char *list, uint32_t t) {
    if (!list) return 0;
    for (const char *p = list; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p) return 0;
        if (v == t) return 1;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return 0;
}

static void format_eta_(double s, char *buf, size_t n) {
    if (s < 0 || !isfinite(s)) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else snprintf(buf, n, "%.0fh%02.0fm", floor(s / 3600), fmod(s / 60, 60));
}

// --init-from: the model's sizes from the file, which must fit the tokenizer
// and the context asked for (checked before any step). With params, its
// weights into the model. Returns 0, or 1 (error printed).
static int init_from_(run_ *r, int with_params) {
    const wgpt_train_opts *o = r->o;
    char err[4096];
    wgpt_weights w;
    if (wgpt_model_file_read(o->init_from, with_params, &w, err, sizeof err) < 0) return fail_(r, "--init-from %s", err);
    int rc = 1;
    uint32_t V = wgpt_tokenizer_vocab_size(r->tok);
    const char *tn = wgpt_tokenizer_name(r->tok);
    if (w.config.vocab_size != V)
        fail_(r, "%s has a vocabulary of %u ids but the '%s' tokenizer has %u%s%s%s", o->init_from, w.config.vocab_size,
              tn, V, w.tokenizer[0] ? " (pass --tokenizer " : "", w.tokenizer, w.tokenizer[0] ? ")" : "");
    else if (w.tokenizer[0] && strcmp(w.tokenizer, tn) != 0)
        fail_(r, "%s was trained with the '%s' tokenizer, not '%s' (--tokenizer)", o->init_from, w.tokenizer, tn);
    else if (o->seq > w.config.max_seq_len)
        fail_(r, "--seq %u is longer than the context of %s (%u positions)", o->seq, o->init_from, w.config.max_seq_len);
    else if (with_params && memcmp(&w.config, &r->cfg, sizeof r->cfg) != 0)  // the sizes were read first
        fail_(r, "%s changed while it was being read", o->init_from);
    else if (with_params && wgpt_gpt2_set_params(r->model, w.params) < 0)
        fail_(r, "%s", wgpt_gpt2_error(r->model));
    else
        rc = 0;
    if (rc == 0 && !with_params) r->cfg = w.config;
    wgpt_weights_free(&w);
    return rc;
}

// Which options set the numbers a model-shape limit involves (gpt2.h's dims).
static void shape_options_(int dims, char *buf, size_t n) {
    static const struct {
        int dim;
        const char *opt;
    } names[] = {{WGPT_GPT2_DIM_B, "--batch"}, {WGPT_GPT2_DIM_T, "--seq"},       {WGPT_GPT2_DIM_C, "--channels"},
                 {WGPT_GPT2_DIM_NH, "--heads"}, {WGPT_GPT2_DIM_L, "--layers"}, {WGPT_GPT2_DIM_V, "--tokenizer"}};
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (dims & names[i].dim)
            k += (size_t)snprintf(buf + k, k < n ? n - k : 0, "%s%s", k ? ", " : "", names[i].opt);
}

// The tokenizer: --tokenizer, checked against what the shards record, or
// (without --tokenizer) what they record, bytes if they record none.
static int open_tokenizer_(run_ *r) {
    const wgpt_train_opts *o = r->o;
    const char *recorded = wgpt_loader_tokenizer(r->loader), *name = o->tokenizer;
    if (name && recorded && strcmp(name, recorded) != 0)
        return fail_(r, "--tokenizer %s, but the shards (%s) were made with the %s tokenizer: pass --tokenizer %s "
                     "or leave it out",
                     name, o->data, recorded, recorded);
    if (!name) name = recorded ? recorded : "bytes";
    char err[2048];
    if (!wgpt_tokenizer_known(name))
        return fail_(r, "the shards (%s) record the tokenizer '%s', which this wgpt does not know", o->data, name);
    r->tok = wgpt_tokenizer_open(name, o->bpe_dir, err, sizeof err);
    if (!r->tok) return fail_(r, "%s", err);
    if (wgpt_loader_check_vocab(r->loader, wgpt_tokenizer_vocab_size(r->tok), err, sizeof err) < 0)
        return fail_(r, "%s", err);
    return 0;
}

// Each rank of a host its own GPU: local rank i takes the host's GPU i (mod
// their number), in wgpt_gpu_list's order, which numbers identical GPUs one by
// one. Ranks of a host without a GPU share its CPU adapter. A rank told
// --adapter keeps it.
static int pick_rank_gpu_(const run_ *r, wgpt_gpu_options *gpu, char *err, size_t errlen) {
    if (!r->comm || wgpt_comm_local_size(r->comm) < 2 || gpu->adapter_index >= 0 || gpu->adapter_name) return 0;
    wgpt_gpu_info list[16];
    int n = wgpt_gpu_list(list, 16, err, errlen);
    if (n < 0) return -1;
    int ng, local = wgpt_comm_local_rank(r->comm), size = wgpt_comm_local_size(r->comm);
    gpu->adapter_index = wgpt_gpu_list_nth_gpu(list, n, local, &ng);
    if (ng == 0) return 0;
    char line[512];
    int off = snprintf(line, sizeof line, "the %d ranks of this host on its %d GPU(s):", size, ng);
    for (int i = 0; i < ng && i < size && off > 0 && (size_t)off < sizeof line; i++) {
        const wgpt_gpu_info *e = &list[wgpt_gpu_list_nth_gpu(list, n, i, NULL)];
        off += snprintf(line + off, sizeof line - off, "%s %s%s%s%s", i ? "," : "", e->name, e->pci[0] ? " (" : "",
                        e->pci, e->pci[0] ? ")" : "");
    }
    say_(r, INFO_, "%s\n", line);
    if (size > ng)
        say_(r, WARN_, "the %d ranks of this host share %d GPU(s): local rank i runs on GPU i mod %d", size, ng, ng);
    return 0;
}

// The GPU and the model, refusing a shape the kernels or the device cannot take.
static int open_model_(run_ *r) {
    const wgpt_train_opts *o = r->o;
    char err[2048], opts[128];
    wgpt_gpu_options gpu = o->gpu;
    if (pick_rank_gpu_(r, &gpu, err, sizeof err) < 0) return fail_(r, "%s", err);
    r->g = wgpt_gpu_open(&gpu, err, sizeof err);
    if (!r->g) return fail_(r, "%s", err);
    int dims = wgpt_gpt2_check_shape(&r->cfg, o->batch, o->seq, wgpt_gpu_get_info(r->g)->max_buffer, err, sizeof err);
    if (dims) {
        shape_options_(dims, opts, sizeof opts);
        fail_(r, "%s on '%s': change %s", err, wgpt_gpu_get_info(r->g)->name, opts);
        return 2;
    }
    wgpt_precision precision = WGPT_PRECISION_FP32;
    wgpt_precision_parse(o->precision, &precision);  // checked by wgpt_train_check
    wgpt_recompute recompute = WGPT_RECOMPUTE_AUTO;
    wgpt_recompute_parse(o->recompute, &recompute);  // checked by wgpt_train_check
    // Several ranks: each keeps the AdamW moments of its 1/N of the parameters (ZeRO-1).
    const wgpt_gpt2_opts mo = {.training = 1, .precision = precision, .shard = (uint32_t)r->rank,
                               .nshards = (uint32_t)r->nranks, .recompute = recompute};
    r->model = wgpt_gpt2_create_opts(r->g, &r->cfg, o->batch, o->seq, &mo, err, sizeof err);
    if (!r->model && strstr(err, "out of GPU memory")) {  // WebGPU cannot say how much memory there is beforehand
        fail_(r, "%s on '%s': the model does not fit: change --batch, --seq, --layers, --channels", err,
              wgpt_gpu_get_info(r->g)->name);
        return 2;
    }
    if (!r->model) return fail_(r, "%s", err);
    return 0;
}

// A fresh run starts a fresh log; a resumed one drops the records past its checkpoint.
static int open_metrics_(run_ *r, int resumed) {
    char err[2048];
    if (resumed) {
        if (wgpt_history_load(&r->hist, r->path_metrics, err, sizeof err) < 0) return fail_(r, "%s", err);
        wgpt_history_truncate(&r->hist, r->step);
        if (wgpt_history_trim_log(r->path_metrics, r->step, err, sizeof err) < 0) return fail_(r, "%s", err);
    } else {
        struct stat st;
        if (lstat(r->path_metrics, &st) == 0 && !S_ISREG(st.st_mode))  // not a log of ours: leave it
            return fail_(r, "%s: not a regular file (a FIFO, a link?): not the log of an earlier run", r->path_metrics);
        if (unlink(r->path_metrics) != 0 && errno != ENOENT)
            return fail_(r, "%s: cannot remove the log of the earlier run: %s", r->path_metrics, strerror(errno));
    }
    r->metrics = wgpt_fopen_regular(r->path_metrics, "a", err, sizeof err);
    if (!r->metrics) return fail_(r, "%s", err);
    return 0;
}

// The exchange's pieces: the whole gradient (reference layout) and with
// --grad-buckets 1 one bucket per segment, at its place in r->grads, each
// cut into the ranks' optimizer shards (a reduce-scatter gives each rank the
// sum of its own shard: ZeRO-1 reads no other).
static int open_buckets_(run_ *r) {
    uint32_t nb = r->o->grad_buckets ? wgpt_gpt2_grad_segments(r->model) : 0;
    size_t N = (size_t)r->nranks;
    r->counts = calloc((1 + (size_t)nb) * N, sizeof *r->counts);
    r->buckets = nb ? calloc(nb, sizeof *r->buckets) : NULL;
    if (!r->counts || (nb && !r->buckets)) return fail_(r, "out of host memory for the gradient buckets");
    wgpt_gpt2_shard_counts(r->model, -1, r->counts);
    r->nbuckets = nb;
    float *at = r->grads;
    for (uint32_t i = 0; i < nb; i++) {
        r->buckets[i].host = at;
        r->buckets[i].counts = r->counts + (1 + i) * N;
        wgpt_gpt2_shard_counts(r->model, (int)i, r->buckets[i].counts);
        at += wgpt_gpt2_segment_floats(r->model, i);
    }
    return 0;
}

static int open_run_(run_ *r) {
    const wgpt_train_opts *o = r->o;
    char err[2048];
    // The folder first: a second run there must not touch the first's files.
    if (r->rank == 0) {  // rank 0 owns the folder; the others only read a checkpoint there
        if (wgpt_mkdirs(o->out_dir, err, sizeof err) < 0) return fail_(r, "--out: %s", err);
        r->lock = wgpt_dir_lock(o->out_dir, LOCK_FILE, "another `wgpt train`", err, sizeof err);
        if (r->lock < 0) return fail_(r, "%s", err);
    }
    snprintf(r->path_ckpt, sizeof r->path_ckpt, "%s/latest.ckpt", o->out_dir);
    snprintf(r->path_metrics, sizeof r->path_metrics, "%s/metrics.jsonl", o->out_dir);
    snprintf(r->path_svg, sizeof r->path_svg, "%s/loss.svg", o->out_dir);

    // Tokens are checked against the vocabulary once the tokenizer is known.
    r->loader = wgpt_loader_open(o->data, o->batch, o->seq, o->seed, o->val_fraction, 65536, err, sizeof err);
    if (!r->loader) return fail_(r, "%s", err);
    int rc = open_tokenizer_(r);
    if (rc) return rc;
    uint32_t V = wgpt_tokenizer_vocab_size(r->tok);
    r->cfg = (wgpt_gpt2_config){.max_seq_len = o->seq, .vocab_size = V, .padded_vocab_size = (V + 127) / 128 * 128,
                                .num_layers = o->layers, .num_heads = o->heads, .channels = o->channels};
    if (o->init_from && init_from_(r, 0)) return 1;  // its sizes, checked before anything runs
    if ((rc = open_model_(r)) != 0) return rc;
    size_t bt = (size_t)o->batch * o->seq;
    r->inputs = malloc(bt * sizeof *r->inputs);
    r->targets = malloc(bt * sizeof *r->targets);
    if (!r->inputs || !r->targets) return fail_(r, "out of host memory for batches of %zu tokens", bt);
    wgpt_sampler_init(&r->sampler, o->temperature, o->top_k, o->seed ^ 0x5DEECE66Dull);

    const char *resume = o->resume;
    struct stat st;
    if (!resume && lstat(r->path_ckpt, &st) == 0) resume = r->path_ckpt;
    int resumed = resume && strcmp(resume, "none") != 0;
    if (resumed) {
        if (resume_(r, resume)) return 1;
        say_(r, INFO_, "resumed from %s at step %u\n", resume, r->step);
    } else if (o->init_from) {
        if (init_from_(r, 1)) return 1;
        say_(r, INFO_, "starting from %s\n", o->init_from);
    } else {
        size_t np = wgpt_gpt2_num_params(&r->cfg);
        float *p = malloc(np * sizeof *p);
        if (!p) return fail_(r, "out of host memory for %zu parameters", np);
        wgpt_gpt2_init_params(&r->cfg, p, o->seed);
        rc = wgpt_gpt2_set_params(r->model, p);
        free(p);
        if (rc < 0) return fail_(r, "%s", wgpt_gpt2_error(r->model));
    }
    if (r->nranks > 1) {
        size_t N = (size_t)r->nranks;
        r->grads = malloc(wgpt_gpt2_num_params(&r->cfg) * sizeof *r->grads);
        r->shard_off = malloc(N * sizeof *r->shard_off), r->shard_n = malloc(N * sizeof *r->shard_n);
        r->update_off = malloc(N * sizeof *r->update_off), r->update_n = malloc(N * sizeof *r->update_n);
        if (!r->grads || !r->shard_off || !r->shard_n || !r->update_off || !r->update_n)
            return fail_(r, "out of host memory for the gradients and parameters");
        uint64_t words = 0;
        for (uint32_t i = 0; i < N; i++) {
            wgpt_gpt2_shard_range(r->model, i, &r->shard_off[i], &r->shard_n[i]);
            r->update_off[i] = words;
            words += r->update_n[i] = wgpt_gpt2_shard_update_words(r->model, i);
        }
        if (!(r->updates = malloc(words * sizeof *r->updates)))
            return fail_(r, "out of host memory for the parameters' exchange (%llu words)", (unsigned long long)words);
        if (open_buckets_(r) < 0) return 1;
    }
    return r->rank == 0 ? open_metrics_(r, resumed) : 0;
}

static void close_run_(run_ *r) {
    if (r->metrics) fclose(r->metrics);
    wgpt_history_free(&r->hist);
    wgpt_gpt2_free(r->sampler_model);
    wgpt_gpt2_free(r->model);
    wgpt_gpu_close(r->g);
    wgpt_loader_free(r->loader);
    wgpt_tokenizer_free(r->tok);
    for (uint32_t i = 0; r->buckets && i < r->nbuckets; i++) wgpt_comm_sum_free(r->comm, r->buckets[i].sum);
    free(r->buckets), free(r->counts);
    free(r->inputs), free(r->targets), free(r->grads), free(r->shard_off), free(r->shard_n);
    free(r->updates), free(r->update_off), free(r->update_n);
    if (r->lock >= 0) wgpt_dir_unlock(r->lock);
}

// x as a JSON number, or null if it is NaN or Inf (JSON has neither).
static const char *json_num_(char buf[32], double x, const char *fmt) {
    if (!isfinite(x)) return "null";
    snprintf(buf, 32, fmt, x);
    return buf;
}

// Appends one record to metrics.jsonl. A write that fails (a full disk) is
// reported with the system's reason: the run stops rather than lose its log.
static int log_(run_ *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int log_(run_ *r, const char *fmt, ...) {
    if (!r->metrics) return 0;  // ranks other than 0
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int bad = vfprintf(r->metrics, fmt, ap) < 0;
    va_end(ap);
    if (fflush(r->metrics) != 0 || bad) {
        char kept[4608];
        fail_(r, "%s: cannot write: %s", r->path_metrics, strerror(errno ? errno : EIO));
        // rank 0 alone is here: with several ranks the moments it would gather are out of reach
        if (r->nranks == 1 && r->step > 0 && r->saved_step != (int64_t)r->step && write_checkpoint_(r) == 0)
            return fail_(r, "a checkpoint of step %u was written to %s: free some space, then run the same command "
                         "again to resume",
                         r->step, r->path_ckpt);
        return fail_(r, "%s", kept_(r, kept, sizeof kept));
    }
    return 0;
}

// A shard shrank while step t read it: the parameters are still those of
// step t-1, so they are saved with the data position of the step's start.
static int data_failed_(run_ *r, uint32_t t, const void *loader_at_start) {
    char err[1024], kept[4608];
    fail_(r, "step %u: %s", t, wgpt_loader_error(r->loader));
    if (wgpt_loader_load_state(r->loader, loader_at_start, wgpt_loader_state_size(), err, sizeof err) == 0 &&
        write_checkpoint_(r) == 0)
        return fail_(r, "a checkpoint of step %u was written to %s: run the same command again, once the data is "
                     "whole, to resume from it",
                     r->step, r->path_ckpt);
    return fail_(r, "%s", kept_(r, kept, sizeof kept));
}

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

// The gradients (in one piece unless bucketed: then they are summed) and the
// loss summed over the ranks, through host memory (dist/comm.h: a fixed
// order), back on the GPU before the update.
static int sum_over_ranks_(run_ *r, step_ *s) {
    char err[1024], kept[4608];
    size_t np = wgpt_gpt2_num_params(&r->cfg);
    if (!r->buckets) {
        if (wgpt_gpt2_get_grads(r->model, r->grads) < 0)
            return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
        double t0 = wgpt_clock_s();
        wgpt_comm_sum *sum = wgpt_comm_reduce_begin(r->comm, r->grads, np, r->counts, err, sizeof err);
        int rc = sum ? wgpt_comm_sum_wait(r->comm, sum, err, sizeof err) : -1;
        wgpt_comm_sum_free(r->comm, sum);
        if (rc < 0) return fail_(r, "step %u: %s\n%s", s->t, err, kept_(r, kept, sizeof kept));
        s->exchange_s = wgpt_clock_s() - t0;  // after the backward: nothing overlaps
        if (wgpt_gpt2_set_grads(r->model, r->grads) < 0)
            return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
    }
    if (wgpt_comm_sum_double(r->comm, &s->loss, err, sizeof err) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, err, kept_(r, kept, sizeof kept));
    s->comm_seconds = wgpt_comm_seconds(r->comm) - s->comm0;
    r->exchange_s += s->exchange_s, r->overlap_s += s->overlap_s;
    return 0;
}

// The bucketed exchange's clock: time with a sum in flight counts as
// overlapped until the backward's last segment has landed, exposed after.
static void exchange_tick_(step_ *s) {
    double now = wgpt_clock_s();
    if (s->inflight) {
        s->exchange_s += now - s->mark;
        if (!s->gpu_done) s->overlap_s += now - s->mark;
    }
    s->mark = now;
}

// Bucket i's gradients have landed (wait: block until they do): they are
// copied out and their sum begins. Returns 1 if it began, 0 if not yet, -1.
static int bucket_begin_(run_ *r, step_ *s, uint32_t i, int wait, char *err, size_t errlen) {
    bucket_ *b = &r->buckets[i];
    int ready = wait ? 1 : wgpt_gpt2_segment_ready(r->model, i);
    if (ready <= 0) return ready < 0 ? wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model)) : 0;
    if (wgpt_gpt2_segment_take(r->model, i, b->host) < 0)
        return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model));
    exchange_tick_(s);
    if (i + 1 == r->nbuckets) s->gpu_done = 1;  // the backward has ended
    b->sum = wgpt_comm_reduce_begin(r->comm, b->host, wgpt_gpt2_segment_floats(r->model, i), b->counts, err, errlen);
    if (!b->sum) return -1;
    b->state = BUCKET_SUMMING;
    s->inflight++;
    return 1;
}

// Advances the buckets of the first `submitted` segments: the landed ones
// begin their sums (in segment order, the same on every rank), the summed
// ones go back to the GPU. wait: block for the next landing. 0 or -1.
static int buckets_advance_(run_ *r, step_ *s, uint32_t submitted, int wait, char *err, size_t errlen) {
    int beginning = 1;  // every earlier bucket's sum has begun
    for (uint32_t i = 0; i < submitted; i++) {
        bucket_ *b = &r->buckets[i];
        if (b->state == BUCKET_ON_GPU && beginning) {
            int rc = bucket_begin_(r, s, i, wait, err, errlen);
            if (rc < 0) return -1;
            wait = 0;
            if (rc == 0) beginning = 0;
        }
        if (b->state != BUCKET_SUMMING) continue;
        int done = wgpt_comm_sum_test(r->comm, b->sum, err, errlen);
        if (done < 0) return -1;
        if (!done) continue;
        exchange_tick_(s);
        s->inflight--;
        wgpt_comm_sum_free(r->comm, b->sum);
        b->sum = NULL;
        b->state = BUCKET_DONE;
        if (wgpt_gpt2_segment_put(r->model, i, b->host) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(r->model));
    }
    return 0;
}

static int buckets_done_(const run_ *r) {
    for (uint32_t i = 0; i < r->nbuckets; i++)
        if (r->buckets[i].state != BUCKET_DONE) return 0;
    return 1;
}

// A step's last micro-batch with buckets: its backward segment by segment,
// each bucket's sum over the ranks begun as soon as its gradients land and
// written back once summed, while the GPU computes the next segments.
// Returns 0, or -1 with err filled.
static int accumulate_bucketed_(run_ *r, step_ *s, int first, float *loss, char *err, size_t errlen) {
    wgpt_gpt2 *m = r->model;
    for (uint32_t i = 0; i < r->nbuckets; i++) r->buckets[i].state = BUCKET_ON_GPU;
    s->inflight = s->gpu_done = 0;
    s->mark = wgpt_clock_s();
    if (wgpt_gpt2_accumulate_begin(m, r->inputs, r->targets, first) < 0)
        return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
    for (uint32_t i = 0; i < r->nbuckets; i++) {
        if (wgpt_gpt2_backward_segment(m, i) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
        if (buckets_advance_(r, s, i + 1, 0, err, errlen) < 0) return -1;
    }
    while (!buckets_done_(r)) {
        // Nothing in flight: only the GPU to wait for (with its timeout).
        if (buckets_advance_(r, s, r->nbuckets, s->inflight == 0, err, errlen) < 0) return -1;
        struct timespec ts = {0, 100000};
        if (s->inflight) nanosleep(&ts, NULL);  // off the cores the GPU (lavapipe) computes on
    }
    if (wgpt_gpt2_accumulate_end(m, loss) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
    return 0;
}

// ZeRO-1's update: each rank holds the sum of its shard's gradients only;
// the global norm is the sum of the shards' squares in rank order, and a
// NaN/Inf anywhere skips the step on every rank.
static int update_sharded_(run_ *r, const wgpt_adamw_config *ac, step_ *s, int global) {
    char err[1024], kept[4608];
    double sumsq, c0 = wgpt_comm_seconds(r->comm);
    int bad;
    uint64_t lo, hi;
    if (wgpt_gpt2_update_shard_begin(r->model, ac, global, &sumsq, &bad) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
    if (wgpt_comm_sum_double(r->comm, &sumsq, err, sizeof err) < 0 ||
        wgpt_comm_min_max_u64(r->comm, (uint64_t)bad, &lo, &hi, err, sizeof err) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, err, kept_(r, kept, sizeof kept));
    s->comm_seconds += wgpt_comm_seconds(r->comm) - c0;
    if (wgpt_gpt2_update_shard_end(r->model, ac, (int)s->t, sumsq, hi != 0, &s->res) < 0)
        return fail_(r, "step %u: %s\nThe GPU state cannot be trusted after this; %s", s->t,
                     wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
    return 0;
}

// ZeRO-1: each rank updated its shard of the parameters; the updates are
// gathered in rank order and every rank takes them all (a skipped step
// gathers the unchanged ones). In f16 an update is the shard's f16 copy and
// the fp32 values of the tensors every rank keeps whole (model/gpt2.h).
static int gather_params_(run_ *r, step_ *s) {
    char err[1024], kept[4608];
    double c0 = wgpt_comm_seconds(r->comm);
    uint32_t *mine = r->updates + r->update_off[r->rank];
    if (wgpt_gpt2_get_shard_update(r->model, mine) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
    if (wgpt_comm_gather_words(r->comm, mine, r->updates, r->update_off, r->update_n, -1, err, sizeof err) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, err, kept_(r, kept, sizeof kept));
    if (wgpt_gpt2_set_shard_updates(r->model, r->updates) < 0)
        return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
    s->comm_seconds += wgpt_comm_seconds(r->comm) - c0;
    return 0;
}

// One optimizer step: accum micro-batches, then the update. Returns 0, or
// 1 with what failed and what is kept in r->err.
static int train_step_(run_ *r, wgpt_adamw_config *ac, const wgpt_lr_schedule *sched, step_ *s,
                       unsigned char *loader_at_start) {
    char kept[4608];
    const wgpt_train_opts *o = r->o;
    double t0 = wgpt_clock_s();
    ac->lr = s->lr = wgpt_lr_at(sched, s->t);
    s->loss = 0;
    s->comm0 = r->comm ? wgpt_comm_seconds(r->comm) : 0;
    wgpt_loader_save_state(r->loader, loader_at_start);
    // Every rank reads the global batch in the same seeded order and trains
    // micro-batches rank, rank + N, ...: N ranks of accum micro-batches are one
    // process of N x accum.
    uint32_t n = (uint32_t)r->nranks, global = r->accum * n;
    for (uint32_t k = 0; k < global; k++) {
        float l;
        if (wgpt_loader_next_train(r->loader, r->inputs, r->targets) < 0) return data_failed_(r, s->t, loader_at_start);
        if (k % n != (uint32_t)r->rank) continue;
        if (r->buckets && k + n >= global) {  // this rank's last: its gradients are final, the buckets travel
            char err[1024];
            if (accumulate_bucketed_(r, s, k < n, &l, err, sizeof err) < 0)
                return fail_(r, "step %u: %s\n%s", s->t, err, kept_(r, kept, sizeof kept));
        } else if (wgpt_gpt2_accumulate(r->model, r->inputs, r->targets, k < n, &l) < 0)
            return fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model), kept_(r, kept, sizeof kept));
        s->loss += l;
    }
    if (n > 1 && sum_over_ranks_(r, s) != 0) return 1;
    if (o->inject_loss_at == s->t) wgpt_gpu_force_loss(r->g);
    if (injected_(o->inject_nan, s->t) && wgpt_gpt2_inject_nan_grad(r->model) < 0)
        return fail_(r, "%s", wgpt_gpt2_error(r->model));
    if (n > 1) {
        if (update_sharded_(r, ac, s, (int)global) != 0) return 1;
    } else if (wgpt_gpt2_update(r->model, ac, (int)s->t, (int)global, &s->res) < 0)
        return fail_(r, "step %u: %s\nThe GPU state cannot be trusted after this; %s", s->t, wgpt_gpt2_error(r->model),
                     kept_(r, kept, sizeof kept));
    if (n > 1 && gather_params_(r, s) != 0) return 1;
    s->loss /= global;
    s->seconds = wgpt_clock_s() - t0;
    return 0;
}

// GPU memory per rank by kind: with several ranks the moments are this
// rank's 1/N shard (ZeRO-1), and in f16 the fp32 matmul weights too.
static void say_memory_(const run_ *r) {
    wgpt_gpt2_memory_kinds k;
    wgpt_gpt2_memory_split(r->model, &k);
    const double MiB = 1048576.0;
    char f16[64] = "";
    if (k.weights16) snprintf(f16, sizeof f16, ", f16 weights %.1f MiB", k.weights16 / MiB);
    say_(r, INFO_, "ranks: %d (%s), %u micro-batches each a step; GPU memory per rank: %.1f MiB (fp32 master weights "
         "%.3f MiB (%s)%s, gradients %.1f MiB, AdamW moments %.3f MiB (%s), activations %.1f MiB)\n",
         r->nranks, wgpt_comm_kind(), r->accum,
         (k.masters + k.weights16 + k.grads + k.adam + k.activations) / MiB, k.masters / MiB,
         k.split_masters ? "matmul weights: this rank's 1/N shard; the rest whole" : "all", f16, k.grads / MiB,
         k.adam / MiB, r->nranks > 1 ? "this rank's 1/N shard" : "all", k.activations / MiB);
}

// The summary of the gradient exchange over the run's steps (rank 0 says it).
static void say_exchange_(const run_ *r, uint32_t steps) {
    double ms = r->exchange_s * 1e3 / steps, pct = r->exchange_s > 0 ? 100 * r->overlap_s / r->exchange_s : 0;
    if (r->buckets)
        say_(r, INFO_, "gradient exchange: %u buckets a step, %.2f ms a step in flight, %.0f%% of it while the "
             "backward computed (overlap)\n", r->nbuckets, ms, pct);
    else
        say_(r, INFO_, "gradient exchange: one sum after the backward (--grad-buckets 0), %.2f ms a step, 0%% "
             "overlap\n", ms);
}

// FNV-1a, for the options hash.
static uint64_t fnv_(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// Every rank must train the same model on the same data from the same step:
// a hash of the options, the shape, the data glob and the step, compared.
static int agree_on_run_(run_ *r) {
    if (r->nranks < 2) return 0;
    saved_opts_ so = saved_(r);
    uint64_t h = fnv_(1469598103934665603ull, &so, sizeof so), lo, hi;
    h = fnv_(h, &r->cfg, sizeof r->cfg);
    h = fnv_(h, r->o->data, strlen(r->o->data));
    h = fnv_(h, &r->step, sizeof r->step);
    h = fnv_(h, &r->o->grad_buckets, sizeof r->o->grad_buckets);  // the collectives differ
    char err[1024];
    if (wgpt_comm_min_max_u64(r->comm, h, &lo, &hi, err, sizeof err) < 0) return fail_(r, "%s", err);
    if (lo != hi)
        return fail_(r, "the %d ranks differ in their options, data or starting step (rank %d's hash %016llx): start "
                     "every rank with the same command line and the same --out",
                     r->nranks, r->rank, (unsigned long long)h);
    return 0;
}

// A stop request on any rank (SIGTERM to one of them) stops them all after
// the same step. Returns 0 with r->stopping set, or 1.
static int agree_stop_(run_ *r) {
    uint64_t lo, hi;
    char err[1024], kept[4608];
    if (!r->comm) return r->stopping = stop_requested_(r), 0;
    if (wgpt_comm_min_max_u64(r->comm, (uint64_t)stop_requested_(r), &lo, &hi, err, sizeof err) < 0)
        return fail_(r, "%s\n%s", err, kept_(r, kept, sizeof kept));
    r->stopping = hi != 0;
    return 0;
}

// The run's result as wgpt_train_run returns it: rc 0, 1 (failed) or 2
// (options refused) to 0, -1 or -2, the message copied to err.
static int result_(const run_ *r, int rc, char *err, size_t errlen) {
    if (rc == 0) return 0;
    wgpt_errf(err, errlen, "%s", r->err);
    return rc == 2 ? -2 : -1;
}

int wgpt_train_run(const wgpt_train_opts *o, char *errbuf, size_t errlen) {
    run_ r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.saved_step = -1;
    r.lock = -1;
    char err[2048], kept[4608];
    if (wgpt_train_check(o, err, sizeof err) < 0) {
        wgpt_errf(errbuf, errlen, "%s", err);
        return -2;
    }
    r.comm = o->comm;
    r.rank = r.comm ? wgpt_comm_rank(r.comm) : 0;
    r.nranks = r.comm ? wgpt_comm_size(r.comm) : 1;
    uint64_t micro = (uint64_t)o->batch * o->seq;
    // --total-batch counts all ranks' tokens; 0: one micro-batch a rank.
    uint64_t global = (o->total_batch ? o->total_batch : micro * (uint64_t)r.nranks) / micro;
    if (global % (uint64_t)r.nranks) {
        wgpt_errf(errbuf, errlen,
                  "--total-batch %u is %llu micro-batches of --batch %u x --seq %u, which %d ranks cannot share "
                  "evenly: make it a multiple of %llu",
                  o->total_batch, (unsigned long long)global, o->batch, o->seq, r.nranks,
                  (unsigned long long)(micro * (uint64_t)r.nranks));
        return -2;
    }
    r.accum = (uint32_t)(global / (uint64_t)r.nranks);

    int rc = open_run_(&r);
    if (rc == 0) rc = agree_on_run_(&r);
    if (rc) {
        close_run_(&r);
        return result_(&r, rc, errbuf, errlen);
    }
    char line[512];
    wgpt_gpu_describe(wgpt_gpu_get_info(r.g), line, sizeof line);
    say_(&r, INFO_,
         "device: %s\nmodel: %u layers, %u heads, %u channels, context %u, vocabulary %u (%s): %zu parameters, "
         "precision %s\n",
         line, r.cfg.num_layers, r.cfg.num_heads, r.cfg.channels, r.cfg.max_seq_len, r.cfg.vocab_size,
         wgpt_tokenizer_name(r.tok), wgpt_gpt2_num_params(&r.cfg), wgpt_precision_name(wgpt_gpt2_precision(r.model)));
    say_(&r, INFO_, "data: %llu training tokens, %llu validation batches; %u x %u tokens a micro-batch, %u per step\n",
         (unsigned long long)wgpt_loader_train_tokens(r.loader), (unsigned long long)wgpt_loader_val_batches(r.loader),
         o->batch, o->seq, r.accum * (uint32_t)r.nranks);
    say_memory_(&r);

    wgpt_lr_schedule sched = {o->lr, o->min_lr_frac, o->warmup, o->steps};
    wgpt_adamw_config ac = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->grad_clip, 0.0f};
    float recent[20];  // norms of the last good steps, for the spike threshold
    uint32_t nrecent = 0, skips_in_row = 0;
    int tty = o->live;
    double t_start = wgpt_clock_s();
    uint32_t first_step = r.step;
    unsigned char loader_at_start[128];  // the loader's state at the start of a step (72 bytes)
    if (r.step == 0 && o->val_every) {  // the loss before training, for the plot
        float vl;
        int v = validate_(&r, &vl);
        if (v < 0) rc = 1;
        else if (v == 0) {
            rc = log_(&r, "{\"kind\":\"val\",\"step\":0,\"loss\":%.9g}\n", vl);
            wgpt_history_add(&r.hist, 1, 0, vl);
            say_(&r, INFO_, "step %5u | val loss %.4f\n", 0, vl);
        }
    }
    uint32_t last = o->stop_at && o->stop_at < o->steps ? o->stop_at : o->steps;
    if (rc == 0) rc = agree_stop_(&r);
    while (rc == 0 && r.step < last && !r.stopping) {
        step_ s = {.t = r.step + 1};
        if ((rc = train_step_(&r, &ac, &sched, &s, loader_at_start)) != 0) break;
        uint32_t t = s.t;
        r.step = t;
        double tps = (double)micro * r.accum * r.nranks / s.seconds;
        char loss_s[32], norm_s[32];  // a skipped step's NaN/Inf is JSON's null
        if ((rc = log_(&r,
                       "{\"kind\":\"train\",\"step\":%u,\"loss\":%s,\"lr\":%.6g,\"grad_norm\":%s,\"ms\":%.2f,"
                       "\"tokens_per_s\":%.1f,\"skipped\":%d,\"loss_scale\":%g,\"ranks\":%d,\"comm_ms\":%.2f,"
                       "\"exchange_ms\":%.2f,\"overlap_ms\":%.2f}\n",
                       t, json_num_(loss_s, s.loss, "%.9g"), s.lr, json_num_(norm_s, s.res.grad_norm, "%.6g"),
                       s.seconds * 1e3, tps, s.res.skipped, s.res.loss_scale, r.nranks, s.comm_seconds * 1e3,
                       s.exchange_s * 1e3, s.overlap_s * 1e3)) != 0)
            break;
        wgpt_history_add(&r.hist, 0, t, (float)s.loss);
        if (s.res.skipped) {
            say_(&r, WARN_, "step %u: %s: update skipped, parameters unchanged", t,
                 s.res.skipped == 1 ? "the loss or gradient is NaN/Inf"
                                    : "gradient norm spike (above the --spike-factor threshold)");
            if (++skips_in_row >= o->max_skips && o->max_skips) {
                rc = fail_(&r, "%u steps in a row were skipped: stopping; %s. Lower --lr or check the data", skips_in_row,
                           kept_(&r, kept, sizeof kept));
                break;
            }
        } else {
            skips_in_row = 0;
            recent[nrecent++ % 20] = s.res.grad_norm;
        }
        ac.skip_norm = 0;
        // only against a settled history: early training moves the norm a lot
        if (o->spike_factor > 0 && nrecent >= 50 && t + 1 > o->warmup) {
            double mean = 0;
            for (uint32_t i = 0; i < 20; i++) mean += recent[i];
            ac.skip_norm = (float)(o->spike_factor * mean / 20);
        }
        double elapsed = wgpt_clock_s() - t_start, eta = elapsed / (t - first_step) * (o->steps - t);
        char etas[32];
        format_eta_(eta, etas, sizeof etas);
        if (tty) {
            say_(&r, WGPT_TRAIN_LIVE, "\rstep %5u/%u | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %s left   ", t,
                 o->steps, s.loss, s.lr, s.res.grad_norm, tps, etas);
        } else if (t % (o->log_every ? o->log_every : 1) == 0 || t == o->steps) {
            say_(&r, INFO_, "step %5u/%u | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %s left\n", t, o->steps, s.loss,
                 s.lr, s.res.grad_norm, tps, etas);
        }
        if (o->val_every && (t % o->val_every == 0 || t == o->steps)) {
            float vl;
            int v = validate_(&r, &vl);
            if (v == -2) {  // a shard shrank: step t itself is whole, save it
                rc = write_checkpoint_(&r) == 0
                         ? fail_(&r, "a checkpoint of step %u was written to %s: run the same command again, once the "
                                 "data is whole, to resume from it",
                                 r.step, r.path_ckpt)
                         : fail_(&r, "%s", kept_(&r, kept, sizeof kept));
                break;
            }
            if (v < 0) {
                rc = fail_(&r, "%s", kept_(&r, kept, sizeof kept));
                break;
            }
            if (v == 0) {
                if ((rc = log_(&r, "{\"kind\":\"val\",\"step\":%u,\"loss\":%.9g}\n", t, vl)) != 0) break;
                wgpt_history_add(&r.hist, 1, t, vl);
                say_(&r, INFO_, "%sstep %5u | val loss %.4f\n", tty ? "\n" : "", t, vl);
            }
            if (r.rank == 0 && wgpt_history_plot_svg(&r.hist, r.path_svg, "wgpt training loss", err, sizeof err) < 0)
                say_(&r, WARN_, "%s", err);
        }
        if (o->sample_every && t % o->sample_every == 0 && r.rank == 0) {
            char tag[32];
            snprintf(tag, sizeof tag, "at step %u", t);
            print_sample_(&r, tag);
        }
        if ((rc = agree_stop_(&r)) != 0) break;
        if ((o->checkpoint_every && t % o->checkpoint_every == 0) || t == last || r.stopping)
            if (write_checkpoint_(&r) < 0) rc = 1;
    }
    if (rc == 0) {
        if (tty) say_(&r, INFO_, "\n");
        if (r.nranks > 1 && r.step > first_step) say_exchange_(&r, r.step - first_step);
        if (r.step == first_step && r.step < last)
            say_(&r, INFO_, "stopped before step %u on request; nothing new to save%s%s\n", r.step + 1,
                 r.saved_step >= 0 ? ", the checkpoint is still " : "", r.saved_step >= 0 ? r.path_ckpt : "");
        else if (r.stopping || r.step < o->steps)
            say_(&r, INFO_, "stopped at step %u of %u; checkpoint %s (run again to continue)\n", r.step, o->steps,
                 r.path_ckpt);
        else say_(&r, INFO_, "done: %u steps; checkpoint %s, metrics %s, plot %s\n", r.step, r.path_ckpt, r.path_metrics,
                  r.path_svg);
        if (r.rank == 0 && wgpt_history_plot_svg(&r.hist, r.path_svg, "wgpt training loss", err, sizeof err) < 0)
            say_(&r, WARN_, "%s", err);
    }
    close_run_(&r);
    return result_(&r, rc, errbuf, errlen);
}
