// run_files.c: a training run's files in its --out folder: the checkpoint
// (written, and resumed exactly), metrics.jsonl and the loss plot loss.svg.
#include "train/run_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "train/load.h"  // defines: wgpt_check_f16_range
#include "util/fs.h"

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

static saved_opts_ saved_(const run_ *r) {
    const wgpt_train_opts *o = r->o;
    return (saved_opts_){2,
                         o->batch,
                         o->seq,
                         r->accum * (uint32_t)r->nranks,
                         o->steps,
                         o->warmup,
                         o->lr,
                         o->min_lr_frac,
                         o->weight_decay,
                         o->beta1,
                         o->beta2,
                         o->eps,
                         o->grad_clip,
                         0,
                         o->seed,
                         (uint32_t)wgpt_gpt2_precision(r->model),
                         wgpt_gpt2_loss_scale_clean_steps(r->model),
                         wgpt_gpt2_loss_scale(r->model),
                         0};
}

int wgpt_run_write_checkpoint_(run_ *r) {
    if (r->rank != 0) {  // rank 0 writes the checkpoint, with every rank's shard
        if (wgpt_run_gather_state_(r, NULL, NULL, NULL) < 0) return -1;
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
        wgpt_run_fail_(r, "out of host memory writing a checkpoint");
    } else if (r->nranks > 1 && wgpt_run_gather_state_(r, ck.params, ck.adam_m, ck.adam_v) < 0) {
        // the message is in r->err
    } else if (r->nranks == 1 && (wgpt_gpt2_get_params(r->model, ck.params) < 0 ||
                                  wgpt_gpt2_get_adam(r->model, ck.adam_m, ck.adam_v) < 0)) {
        wgpt_run_fail_(r, "reading the model for a checkpoint: %s", wgpt_gpt2_error(r->model));
    } else {
        wgpt_loader_save_state(r->loader, ck.loader_state);
        if (wgpt_checkpoint_write(r->path_ckpt, &ck, err, sizeof err) < 0) wgpt_run_fail_(r, "%s", err);
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
        wgpt_run_say_(r, INFO_, "%s is an fp32 run's: the f16 run starts with the loss scale %g\n", path,
                      (double)WGPT_LOSS_SCALE_INIT);
        return 0;
    }
    return wgpt_gpt2_restore_loss_scale(r->model, was->loss_scale, was->loss_clean_steps);
}

// Loads a checkpoint into the run. Returns 0, or 1 (the error in r->err).
int wgpt_run_resume_(run_ *r, const char *path) {
    char err[1024];
    wgpt_checkpoint ck;
    if (wgpt_checkpoint_read(path, &ck, err, sizeof err) < 0) return wgpt_run_fail_(r, "cannot resume: %s", err);
    int rc = 1;
    saved_opts_ now = saved_(r), was;
    memset(&was, 0, sizeof was);
    if (ck.train_opts_len == sizeof was || ck.train_opts_len == SAVED_OPTS_V1_SIZE)
        memcpy(&was, ck.train_opts, ck.train_opts_len);
    if (strcmp(ck.tokenizer, wgpt_tokenizer_name(r->tok)) != 0) {
        wgpt_run_fail_(r, "%s was trained with the '%s' tokenizer, not '%s' (--tokenizer)", path, ck.tokenizer,
                       wgpt_tokenizer_name(r->tok));
    } else if (memcmp(&ck.config, &r->cfg, sizeof r->cfg) != 0) {
        wgpt_run_fail_(r, "%s holds a model of L=%u H=%u C=%u T=%u V=%u; the options ask for L=%u H=%u C=%u T=%u V=%u "
                       "(pass the same --layers/--heads/--channels/--seq, or --resume none to start afresh)",
                       path, ck.config.num_layers, ck.config.num_heads, ck.config.channels, ck.config.max_seq_len,
                       ck.config.vocab_size, r->cfg.num_layers, r->cfg.num_heads, r->cfg.channels, r->cfg.max_seq_len,
                       r->cfg.vocab_size);
    } else if (was.batch != now.batch || was.seq != now.seq || was.seed != now.seed || was.accum != now.accum) {
        wgpt_run_fail_(r, "%s was made with batch %u x %u, %u micro-batches a step (all ranks together) and seed %llu; "
                       "resuming exactly needs the same (--batch, --seq, --total-batch, --seed)",
                       path, was.batch, was.seq, was.accum, (unsigned long long)was.seed);
    } else if (!ck.adam_m) {
        wgpt_run_fail_(r, "%s holds no optimizer state (a weights-only export): it cannot resume training", path);
    } else if (wgpt_loader_load_state(r->loader, ck.loader_state, ck.loader_state_len, err, sizeof err) < 0) {
        wgpt_run_fail_(r, "%s: %s", path, err);
    } else if (wgpt_gpt2_precision(r->model) == WGPT_PRECISION_F16 &&
               wgpt_check_f16_range(&ck.config, ck.params, path, err, sizeof err) < 0) {
        wgpt_run_fail_(r, "%s", err);
    } else if (wgpt_gpt2_set_params(r->model, ck.params) < 0 ||
               wgpt_gpt2_set_adam(r->model, ck.adam_m, ck.adam_v) < 0) {
        wgpt_run_fail_(r, "%s", wgpt_gpt2_error(r->model));
    } else if (ck.step > r->o->steps) {
        wgpt_run_fail_(r, "%s is at step %llu, past the end of this run (--steps %u)", path,
                       (unsigned long long)ck.step, r->o->steps);
    } else if (restore_loss_scale_(r, &was, path) < 0) {
        wgpt_run_fail_(r, "%s: %s", path, wgpt_gpt2_error(r->model));
    } else {
        r->step = (uint32_t)ck.step;
        r->sampler.rng = ck.rng[0];
        if (strcmp(path, r->path_ckpt) == 0) r->saved_step = r->step;
        rc = 0;
    }
    wgpt_checkpoint_free(&ck);
    return rc;
}

// A fresh run starts a fresh log; a resumed one drops the records past its checkpoint.
int wgpt_run_open_metrics_(run_ *r, int resumed) {
    char err[2048];
    if (resumed) {
        if (wgpt_history_load(&r->hist, r->path_metrics, err, sizeof err) < 0) return wgpt_run_fail_(r, "%s", err);
        wgpt_history_truncate(&r->hist, r->step);
        if (wgpt_history_trim_log(r->path_metrics, r->step, err, sizeof err) < 0) return wgpt_run_fail_(r, "%s", err);
    } else {
        struct stat st;
        if (lstat(r->path_metrics, &st) == 0 && !S_ISREG(st.st_mode))  // not a log of ours: leave it
            return wgpt_run_fail_(r, "%s: not a regular file (a FIFO, a link?): not the log of an earlier run",
                                  r->path_metrics);
        if (unlink(r->path_metrics) != 0 && errno != ENOENT)
            return wgpt_run_fail_(r, "%s: cannot remove the log of the earlier run: %s", r->path_metrics,
                                  strerror(errno));
    }
    r->metrics = wgpt_fopen_regular(r->path_metrics, "a", err, sizeof err);
    if (!r->metrics) return wgpt_run_fail_(r, "%s", err);
    return 0;
}

// x as a JSON number, or null if it is NaN or Inf (JSON has neither).
const char *wgpt_run_json_num_(char buf[32], double x, const char *fmt) {
    if (!isfinite(x)) return "null";
    snprintf(buf, 32, fmt, x);
    return buf;
}

// Appends one record to metrics.jsonl. A write that fails (a full disk) is
// reported with the system's reason: the run stops rather than lose its log.
int wgpt_run_log_(run_ *r, const char *fmt, ...) {
    if (!r->metrics) return 0;  // ranks other than 0
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int bad = vfprintf(r->metrics, fmt, ap) < 0;
    va_end(ap);
    if (fflush(r->metrics) != 0 || bad) {
        char kept[4608];
        wgpt_run_fail_(r, "%s: cannot write: %s", r->path_metrics, strerror(errno ? errno : EIO));
        // rank 0 alone is here: with several ranks the moments it would gather are out of reach
        if (r->nranks == 1 && r->step > 0 && r->saved_step != (int64_t)r->step && wgpt_run_write_checkpoint_(r) == 0)
            return wgpt_run_fail_(
                r,
                "a checkpoint of step %u was written to %s: free some space, then run the same command "
                "again to resume",
                r->step, r->path_ckpt);
        return wgpt_run_fail_(r, "%s", wgpt_run_kept_(r, kept, sizeof kept));
    }
    return 0;
}

void wgpt_run_plot_(const run_ *r) {
    char err[2048];
    if (r->rank == 0 && wgpt_history_plot_svg(&r->hist, r->path_svg, "wgpt training loss", err, sizeof err) < 0)
        wgpt_run_say_(r, WARN_, "%s", err);
}
