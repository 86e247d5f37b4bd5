// trainer.c: the training loop (see trainer.h): a step, then its record,
// the spike check, progress, validation, a sample and a checkpoint, until
// the last step or a stop every rank agreed on. Opening the run is
// run_open.c's, its files run_files.c's, the ranks' exchange exchange.c's.
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/evaluate.h"
#include "train/run_internal.h"
#include "train/schedule.h"
#include "train/spike.h"
#include "util/clock.h"
#include "util/err.h"

// The validation loss: 0 with *out, 1 if there is no validation data, -1 on
// a model error or a non-finite loss, VAL_SHARD_SHRANK (the error in r->err).
enum { VAL_SHARD_SHRANK = -2 };
static int validate_(run_ *r, float *out) {
    wgpt_val_loss v;
    char err[2048];
    if (wgpt_val_run(r->model, r->loader, r->o->val_batches, r->inputs, r->targets, &v, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "validation: %s", err), v.data_failed ? VAL_SHARD_SHRANK : -1;
    if (v.nonfinite)
        return -wgpt_run_fail_(r, "the validation loss at step %u is %s: the model has diverged", r->step,
                               isnan(v.bad_loss) ? "NaN" : "Inf");
    if (!v.batches) return 1;
    *out = (float)(v.sum / v.batches);
    return 0;
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

// A shard shrank while step t read it: the parameters are still those of
// step t-1, so they are saved with the data position of the step's start.
static int data_failed_(run_ *r, uint32_t t, const void *loader_at_start) {
    char err[1024], kept[4608];
    wgpt_run_fail_(r, "step %u: %s", t, wgpt_loader_error(r->loader));
    if (wgpt_loader_load_state(r->loader, loader_at_start, wgpt_loader_state_size(), err, sizeof err) == 0 &&
        wgpt_run_write_checkpoint_(r) == 0)
        return wgpt_run_fail_(r,
                              "a checkpoint of step %u was written to %s: run the same command again, once the data is "
                              "whole, to resume from it",
                              r->step, r->path_ckpt);
    return wgpt_run_fail_(r, "%s", wgpt_run_kept_(r, kept, sizeof kept));
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
            if (wgpt_run_accumulate_bucketed_(r, s, k < n, &l, err, sizeof err) < 0)
                return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, err, wgpt_run_kept_(r, kept, sizeof kept));
        } else if (wgpt_gpt2_accumulate(r->model, r->inputs, r->targets, k < n, &l) < 0)
            return wgpt_run_fail_(r, "step %u: %s\n%s", s->t, wgpt_gpt2_error(r->model),
                                  wgpt_run_kept_(r, kept, sizeof kept));
        s->loss += l;
    }
    if (n > 1 && wgpt_run_sum_over_ranks_(r, s) != 0) return 1;
    if (o->inject_loss_at == s->t) wgpt_gpu_force_loss(r->g);
    if (injected_(o->inject_nan, s->t) && wgpt_gpt2_inject_nan_grad(r->model) < 0)
        return wgpt_run_fail_(r, "%s", wgpt_gpt2_error(r->model));
    if (n > 1) {
        if (wgpt_run_update_sharded_(r, ac, s, (int)global) != 0) return 1;
    } else if (wgpt_gpt2_update(r->model, ac, (int)s->t, (int)global, &s->res) < 0)
        return wgpt_run_fail_(r, "step %u: %s\nThe GPU state cannot be trusted after this; %s", s->t,
                              wgpt_gpt2_error(r->model), wgpt_run_kept_(r, kept, sizeof kept));
    if (n > 1 && wgpt_run_gather_params_(r, s) != 0) return 1;
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
    wgpt_run_say_(r, INFO_,
                  "ranks: %d (%s), %u micro-batches each a step; GPU memory per rank: %.1f MiB (fp32 master weights "
                  "%.3f MiB (%s)%s, gradients %.1f MiB, AdamW moments %.3f MiB (%s), activations %.1f MiB)\n",
                  r->nranks, wgpt_comm_kind(), r->accum,
                  (k.masters + k.weights16 + k.grads + k.adam + k.activations) / MiB, k.masters / MiB,
                  k.split_masters ? "matmul weights: this rank's 1/N shard; the rest whole" : "all", f16, k.grads / MiB,
                  k.adam / MiB, r->nranks > 1 ? "this rank's 1/N shard" : "all", k.activations / MiB);
}

// The run's result as wgpt_train_run returns it: rc 0, 1 (failed) or 2
// (options refused) to 0, WGPT_FAILED or WGPT_REFUSED, the message copied to err.
static int result_(const run_ *r, int rc, char *err, size_t errlen) {
    if (rc == 0) return 0;
    wgpt_errf(err, errlen, "%s", r->err);
    return rc == 2 ? WGPT_REFUSED : WGPT_FAILED;
}

// The loop's state beside the run's.
typedef struct loop_ {
    wgpt_lr_schedule sched;
    wgpt_adamw_config ac;
    wgpt_spike spike;  // norms of the last good steps, for the spike threshold
    int tty;
    double t_start;
    uint32_t first_step, last;
    unsigned char loader_at_start[128];  // the loader's state at the start of a step (72 bytes)
} loop_;

// The options checked and the ranks counted: r->accum is each rank's
// micro-batches a step. Returns 0, or WGPT_REFUSED with errbuf filled.
static int begin_(run_ *r, const wgpt_train_opts *o, char *errbuf, size_t errlen) {
    char err[2048];
    r->o = o;
    r->saved_step = -1;
    r->lock = -1;
    if (wgpt_train_check(o, err, sizeof err) < 0) {
        wgpt_errf(errbuf, errlen, "%s", err);
        return WGPT_REFUSED;
    }
    r->comm = o->comm;
    r->rank = r->comm ? wgpt_comm_rank(r->comm) : 0;
    r->nranks = r->comm ? wgpt_comm_size(r->comm) : 1;
    uint64_t micro = (uint64_t)o->batch * o->seq;
    // --total-batch counts all ranks' tokens; 0: one micro-batch a rank.
    uint64_t global = (o->total_batch ? o->total_batch : micro * (uint64_t)r->nranks) / micro;
    if (global % (uint64_t)r->nranks) {
        wgpt_errf(errbuf, errlen,
                  "--total-batch %u is %llu micro-batches of --batch %u x --seq %u, which %d ranks cannot share "
                  "evenly: make it a multiple of %llu",
                  o->total_batch, (unsigned long long)global, o->batch, o->seq, r->nranks,
                  (unsigned long long)(micro * (uint64_t)r->nranks));
        return WGPT_REFUSED;
    }
    r->accum = (uint32_t)(global / (uint64_t)r->nranks);
    return 0;
}

// What runs where: the device, the model, the data and the memory.
static void say_start_(const run_ *r) {
    const wgpt_train_opts *o = r->o;
    char line[512];
    wgpt_gpu_describe(wgpt_gpu_get_info(r->g), line, sizeof line);
    wgpt_run_say_(r, INFO_,
                  "device: %s\nmodel: %u layers, %u heads, %u channels, context %u, vocabulary %u (%s): %zu "
                  "parameters, precision %s\n",
                  line, r->cfg.num_layers, r->cfg.num_heads, r->cfg.channels, r->cfg.max_seq_len, r->cfg.vocab_size,
                  wgpt_tokenizer_name(r->tok), wgpt_gpt2_num_params(&r->cfg),
                  wgpt_precision_name(wgpt_gpt2_precision(r->model)));
    wgpt_run_say_(
        r, INFO_, "data: %llu training tokens, %llu validation batches; %u x %u tokens a micro-batch, %u per step\n",
        (unsigned long long)wgpt_loader_train_tokens(r->loader), (unsigned long long)wgpt_loader_val_batches(r->loader),
        o->batch, o->seq, r->accum * (uint32_t)r->nranks);
    say_memory_(r);
}

// The loss before training, for the plot.
static int validate_first_(run_ *r) {
    float vl;
    int v = validate_(r, &vl), rc = 0;
    if (v < 0) return 1;
    if (v == 0) {
        rc = wgpt_run_log_(r, "{\"kind\":\"val\",\"step\":0,\"loss\":%.9g}\n", vl);
        wgpt_history_add(&r->hist, 1, 0, vl);
        wgpt_run_say_(r, INFO_, "step %5u | val loss %.4f\n", 0, vl);
    }
    return rc;
}

// Step t's record in metrics.jsonl and the history.
static int log_step_(run_ *r, const step_ *s, double tps) {
    char loss_s[32], norm_s[32];  // a skipped step's NaN/Inf is JSON's null
    int rc = wgpt_run_log_(r,
                           "{\"kind\":\"train\",\"step\":%u,\"loss\":%s,\"lr\":%.6g,\"grad_norm\":%s,\"ms\":%.2f,"
                           "\"tokens_per_s\":%.1f,\"skipped\":%d,\"loss_scale\":%g,\"ranks\":%d,\"comm_ms\":%.2f,"
                           "\"exchange_ms\":%.2f,\"overlap_ms\":%.2f}\n",
                           s->t, wgpt_run_json_num_(loss_s, s->loss, "%.9g"), s->lr,
                           wgpt_run_json_num_(norm_s, s->res.grad_norm, "%.6g"), s->seconds * 1e3, tps, s->res.skipped,
                           s->res.loss_scale, r->nranks, s->comm_seconds * 1e3, s->exchange_s * 1e3,
                           s->overlap_s * 1e3);
    if (rc == 0) wgpt_history_add(&r->hist, 0, s->t, (float)s->loss);
    return rc;
}

// A skipped step is a warning, --max-skips of them in a row an error; the
// spike threshold for the next step's update.
static int check_spike_(run_ *r, loop_ *l, const step_ *s) {
    const wgpt_train_opts *o = r->o;
    char kept[4608];
    uint32_t t = s->t;
    if (s->res.skipped)
        wgpt_run_say_(r, WARN_, "step %u: %s: update skipped, parameters unchanged", t,
                      s->res.skipped == 1 ? "the loss or gradient is NaN/Inf"
                                          : "gradient norm spike (above the --spike-factor threshold)");
    uint32_t skips_in_row = wgpt_spike_record(&l->spike, s->res.skipped, s->res.grad_norm);
    if (s->res.skipped && skips_in_row >= o->max_skips && o->max_skips)
        return wgpt_run_fail_(r, "%u steps in a row were skipped: stopping; %s. Lower --lr or check the data",
                              skips_in_row, wgpt_run_kept_(r, kept, sizeof kept));
    l->ac.skip_norm = wgpt_spike_threshold(&l->spike, o->spike_factor, t, o->warmup);
    return 0;
}

// The progress line: live on a terminal, else every --log-every steps.
static void say_progress_(const run_ *r, const loop_ *l, const step_ *s, double tps) {
    const wgpt_train_opts *o = r->o;
    uint32_t t = s->t;
    double elapsed = wgpt_clock_s() - l->t_start, eta = elapsed / (t - l->first_step) * (o->steps - t);
    char etas[32];
    format_eta_(eta, etas, sizeof etas);
    if (l->tty) {
        wgpt_run_say_(r, WGPT_TRAIN_LIVE, "\rstep %5u/%u | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %s left   ",
                      t, o->steps, s->loss, s->lr, s->res.grad_norm, tps, etas);
    } else if (t % (o->log_every ? o->log_every : 1) == 0 || t == o->steps) {
        wgpt_run_say_(r, INFO_, "step %5u/%u | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | %s left\n", t, o->steps,
                      s->loss, s->lr, s->res.grad_norm, tps, etas);
    }
}

// The validation after step t (--val-every), then the plot.
static int validate_at_(run_ *r, const loop_ *l, uint32_t t) {
    char kept[4608];
    float vl;
    int v = validate_(r, &vl);
    if (v == VAL_SHARD_SHRANK)  // a shard shrank: step t itself is whole, save it
        return wgpt_run_write_checkpoint_(r) == 0
                   ? wgpt_run_fail_(r, "a checkpoint of step %u was written to %s: run the same command again, once "
                                    "the data is whole, to resume from it",
                                    r->step, r->path_ckpt)
                   : wgpt_run_fail_(r, "%s", wgpt_run_kept_(r, kept, sizeof kept));
    if (v < 0) return wgpt_run_fail_(r, "%s", wgpt_run_kept_(r, kept, sizeof kept));
    if (v == 0) {
        int rc = wgpt_run_log_(r, "{\"kind\":\"val\",\"step\":%u,\"loss\":%.9g}\n", t, vl);
        if (rc) return rc;
        wgpt_history_add(&r->hist, 1, t, vl);
        wgpt_run_say_(r, INFO_, "%sstep %5u | val loss %.4f\n", l->tty ? "\n" : "", t, vl);
    }
    wgpt_run_plot_(r);
    return 0;
}

// All that follows step s: its record, the spike check, progress,
// validation, a sample, the ranks' agreement on stopping and a checkpoint.
static int after_step_(run_ *r, loop_ *l, const step_ *s) {
    const wgpt_train_opts *o = r->o;
    uint32_t t = s->t;
    double tps = (double)((uint64_t)o->batch * o->seq) * r->accum * r->nranks / s->seconds;
    int rc;
    if ((rc = log_step_(r, s, tps)) != 0) return rc;
    if ((rc = check_spike_(r, l, s)) != 0) return rc;
    say_progress_(r, l, s, tps);
    if (o->val_every && (t % o->val_every == 0 || t == o->steps) && (rc = validate_at_(r, l, t)) != 0) return rc;
    if (o->sample_every && t % o->sample_every == 0 && r->rank == 0) {
        char tag[32];
        snprintf(tag, sizeof tag, "at step %u", t);
        wgpt_run_print_sample_(r, tag);
    }
    if ((rc = wgpt_run_agree_stop_(r)) != 0) return rc;
    if ((o->checkpoint_every && t % o->checkpoint_every == 0) || t == l->last || r->stopping)
        if (wgpt_run_write_checkpoint_(r) < 0) return 1;
    return 0;
}

// The closing lines, then the plot.
static void say_end_(run_ *r, const loop_ *l) {
    const wgpt_train_opts *o = r->o;
    if (l->tty) wgpt_run_say_(r, INFO_, "\n");
    if (r->nranks > 1 && r->step > l->first_step) wgpt_run_say_exchange_(r, r->step - l->first_step);
    if (r->step == l->first_step && r->step < l->last)
        wgpt_run_say_(r, INFO_, "stopped before step %u on request; nothing new to save%s%s\n", r->step + 1,
                      r->saved_step >= 0 ? ", the checkpoint is still " : "", r->saved_step >= 0 ? r->path_ckpt : "");
    else if (r->stopping || r->step < o->steps)
        wgpt_run_say_(r, INFO_, "stopped at step %u of %u; checkpoint %s (run again to continue)\n", r->step, o->steps,
                      r->path_ckpt);
    else
        wgpt_run_say_(r, INFO_, "done: %u steps; checkpoint %s, metrics %s, plot %s\n", r->step, r->path_ckpt,
                      r->path_metrics, r->path_svg);
    wgpt_run_plot_(r);
}

int wgpt_train_run(const wgpt_train_opts *o, char *errbuf, size_t errlen) {
    run_ r;
    memset(&r, 0, sizeof r);
    if (begin_(&r, o, errbuf, errlen) < 0) return WGPT_REFUSED;
    int rc = wgpt_run_open_(&r);
    if (rc == 0) rc = wgpt_run_agree_(&r);
    if (rc) {
        wgpt_run_close_(&r);
        return result_(&r, rc, errbuf, errlen);
    }
    say_start_(&r);
    loop_ l = {.sched = {o->lr, o->min_lr_frac, o->warmup, o->steps},
               .ac = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->grad_clip, 0.0f},
               .tty = o->live,
               .t_start = wgpt_clock_s(),
               .first_step = r.step,
               .last = o->stop_at && o->stop_at < o->steps ? o->stop_at : o->steps};
    if (r.step == 0 && o->val_every) rc = validate_first_(&r);
    if (rc == 0) rc = wgpt_run_agree_stop_(&r);
    while (rc == 0 && r.step < l.last && !r.stopping) {
        step_ s = {.t = r.step + 1};
        if ((rc = train_step_(&r, &l.ac, &l.sched, &s, l.loader_at_start)) != 0) break;
        r.step = s.t;
        rc = after_step_(&r, &l, &s);
    }
    if (rc == 0) say_end_(&r, &l);
    wgpt_run_close_(&r);
    return result_(&r, rc, errbuf, errlen);
}
