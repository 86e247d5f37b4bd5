// run_open.c: opening a training run in order (the folder and its lock,
// the data, the tokenizer, --init-from's sizes, the GPU and the model, the
// starting weights or the checkpoint resumed) and closing it.
#include "train/run_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/checkpoint.h"
#include "train/load.h"  // defines: wgpt_check_f16_range
#include "train/model_file.h"
#include "util/dir_lock.h"
#include "util/fs.h"

#define LOCK_FILE ".wgpt-train.lock"

// --init-from: the model's sizes from the file, which must fit the tokenizer
// and the context asked for (checked before any step). With params, its
// weights into the model. Returns 0, or 1 (error printed).
static int init_from_(run_ *r, int with_params) {
    const wgpt_train_opts *o = r->o;
    char err[4096];
    wgpt_weights w;
    if (wgpt_model_file_read(o->init_from, with_params, &w, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "--init-from %s", err);
    int rc = 1;
    uint32_t V = wgpt_tokenizer_vocab_size(r->tok);
    const char *tn = wgpt_tokenizer_name(r->tok);
    const char *recorded = wgpt_loader_tokenizer(r->loader);  // the shards' own: --tokenizer cannot change it
    if (w.config.vocab_size != V && w.tokenizer[0] && recorded && strcmp(recorded, w.tokenizer) != 0)
        wgpt_run_fail_(
            r,
            "%s is a model of the '%s' tokenizer (%u ids), but the shards (%s) were made with the '%s' tokenizer: "
            "tokenize the text again with `wgpt tokenize --tokenizer %s` and train on those shards",
            o->init_from, w.tokenizer, w.config.vocab_size, o->data, recorded, w.tokenizer);
    else if (w.config.vocab_size != V)
        wgpt_run_fail_(r, "%s has a vocabulary of %u ids but the '%s' tokenizer has %u%s%s%s", o->init_from,
                       w.config.vocab_size, tn, V, w.tokenizer[0] ? " (pass --tokenizer " : "", w.tokenizer,
                       w.tokenizer[0] ? ")" : "");
    else if (w.tokenizer[0] && strcmp(w.tokenizer, tn) != 0)
        wgpt_run_fail_(r, "%s was trained with the '%s' tokenizer, not '%s' (--tokenizer)", o->init_from, w.tokenizer,
                       tn);
    else if (o->seq > w.config.max_seq_len)
        wgpt_run_fail_(r, "--seq %u is longer than the context of %s (%u positions)", o->seq, o->init_from,
                       w.config.max_seq_len);
    else if (with_params && memcmp(&w.config, &r->cfg, sizeof r->cfg) != 0)  // the sizes were read first
        wgpt_run_fail_(r, "%s changed while it was being read", o->init_from);
    else if (with_params && wgpt_gpt2_precision(r->model) == WGPT_PRECISION_F16 &&
             wgpt_check_f16_range(&w.config, w.params, o->init_from, err, sizeof err) < 0)
        wgpt_run_fail_(r, "--init-from %s", err);
    else if (with_params && wgpt_gpt2_set_params(r->model, w.params) < 0)
        wgpt_run_fail_(r, "%s", wgpt_gpt2_error(r->model));
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
        return wgpt_run_fail_(
            r,
            "--tokenizer %s, but the shards (%s) were made with the %s tokenizer: pass --tokenizer %s "
            "or leave it out",
            name, o->data, recorded, recorded);
    if (!name) name = recorded ? recorded : "bytes";
    char err[2048];
    if (!wgpt_tokenizer_known(name))
        return wgpt_run_fail_(r, "the shards (%s) record the tokenizer '%s', which this wgpt does not know", o->data,
                              name);
    r->tok = wgpt_tokenizer_open(name, o->bpe_dir, err, sizeof err);
    if (!r->tok) return wgpt_run_fail_(r, "%s", err);
    if (wgpt_loader_check_vocab(r->loader, wgpt_tokenizer_vocab_size(r->tok), err, sizeof err) < 0)
        return wgpt_run_fail_(r, "%s", err);
    return 0;
}

// Each rank of a host its own GPU: local rank i takes the host's GPU i (mod
// their number), in wgpt_gpu_list's order, which numbers identical GPUs one by
// one. Ranks of a host without a GPU share its CPU adapter. A rank told
// --adapter keeps it.
static int pick_rank_gpu_(const run_ *r, wgpt_gpu_options *gpu, char *err, size_t errlen) {
    if (!r->comm || wgpt_comm_local_size(r->comm) < 2 || gpu->adapter_index >= 0 || gpu->adapter_name) return 0;
    wgpt_gpu_info list[16];
    int n = wgpt_gpu_list(gpu, list, 16, err, errlen);
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
    wgpt_run_say_(r, INFO_, "%s\n", line);
    if (size > ng)
        wgpt_run_say_(r, WARN_, "the %d ranks of this host share %d GPU(s): local rank i runs on GPU i mod %d", size,
                      ng, ng);
    return 0;
}

// The GPU and the model, refusing a shape the kernels or the device cannot take.
static int open_model_(run_ *r) {
    const wgpt_train_opts *o = r->o;
    char err[2048], opts[128];
    wgpt_gpu_options gpu = o->gpu;
    if (pick_rank_gpu_(r, &gpu, err, sizeof err) < 0) return wgpt_run_fail_(r, "%s", err);
    r->g = wgpt_gpu_open(&gpu, err, sizeof err);
    if (!r->g) return wgpt_run_fail_(r, "%s", err);
    int dims = wgpt_gpt2_check_shape(&r->cfg, o->batch, o->seq, wgpt_gpu_get_info(r->g)->max_buffer, err, sizeof err);
    if (dims) {  // under --init-from the model's sizes are the file's: no option changes them
        int file = o->init_from ? dims & (WGPT_GPT2_DIM_C | WGPT_GPT2_DIM_NH | WGPT_GPT2_DIM_L) : 0;
        shape_options_(dims & ~file, opts, sizeof opts);
        if (file)
            wgpt_run_fail_(r, "%s on '%s': the model of %s (%u layers, %u heads, %u channels) cannot run here%s%s", err,
                           wgpt_gpu_get_info(r->g)->name, o->init_from, r->cfg.num_layers, r->cfg.num_heads,
                           r->cfg.channels, opts[0] ? "; or change " : "", opts);
        else
            wgpt_run_fail_(r, "%s on '%s': change %s", err, wgpt_gpu_get_info(r->g)->name, opts);
        return 2;
    }
    wgpt_recompute recompute = WGPT_RECOMPUTE_AUTO;
    wgpt_recompute_parse(o->recompute, &recompute);  // checked by wgpt_train_check
    // Several ranks: each keeps the AdamW moments of its 1/N of the parameters (ZeRO-1).
    const wgpt_gpt2_opts mo = {.training = 1, .precision = o->precision, .shard = (uint32_t)r->rank,
                               .nshards = (uint32_t)r->nranks, .recompute = recompute};
    r->model = wgpt_gpt2_create_opts(r->g, &r->cfg, o->batch, o->seq, &mo, err, sizeof err);
    if (!r->model && strstr(err, "out of GPU memory")) {  // WebGPU cannot say how much memory there is beforehand
        wgpt_run_fail_(r, "%s on '%s': the model does not fit: change --batch, --seq%s", err,
                       wgpt_gpu_get_info(r->g)->name,
                       o->init_from ? " (the model's sizes are --init-from's file's)" : ", --layers, --channels");
        return 2;
    }
    if (!r->model) return wgpt_run_fail_(r, "%s", err);
    return 0;
}

int wgpt_run_open_(run_ *r) {
    const wgpt_train_opts *o = r->o;
    char err[2048];
    // The folder first: a second run there must not touch the first's files.
    if (r->rank == 0) {  // rank 0 owns the folder; the others only read a checkpoint there
        if (wgpt_mkdirs(o->out_dir, err, sizeof err) < 0) return wgpt_run_fail_(r, "--out: %s", err);
        r->lock = wgpt_dir_lock(o->out_dir, LOCK_FILE, "another `wgpt train`", err, sizeof err);
        if (r->lock < 0) return wgpt_run_fail_(r, "%s", err);
    }
    snprintf(r->path_ckpt, sizeof r->path_ckpt, "%s/latest.ckpt", o->out_dir);
    // A latest.ckpt.tmp a killed writer left goes now that the folder is ours.
    if (r->rank == 0 && wgpt_checkpoint_remove_stale_tmp(r->path_ckpt, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "%s", err);
    snprintf(r->path_metrics, sizeof r->path_metrics, "%s/metrics.jsonl", o->out_dir);
    snprintf(r->path_svg, sizeof r->path_svg, "%s/loss.svg", o->out_dir);

    // Tokens are checked against the vocabulary once the tokenizer is known.
    r->loader = wgpt_loader_open(o->data, o->batch, o->seq, o->seed, o->val_fraction, 65536, err, sizeof err);
    if (!r->loader) return wgpt_run_fail_(r, "%s", err);
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
    if (!r->inputs || !r->targets) return wgpt_run_fail_(r, "out of host memory for batches of %zu tokens", bt);
    wgpt_sampler_init(&r->sampler, o->temperature, o->top_k, o->seed ^ 0x5DEECE66Dull);

    const char *resume = o->resume;
    struct stat st;
    if (!resume && lstat(r->path_ckpt, &st) == 0) resume = r->path_ckpt;
    int resumed = resume && strcmp(resume, "none") != 0;
    if (resumed) {
        if (wgpt_run_resume_(r, resume)) return 1;
        wgpt_run_say_(r, INFO_, "resumed from %s at step %u\n", resume, r->step);
    } else if (o->init_from) {
        if (init_from_(r, 1)) return 1;
        wgpt_run_say_(r, INFO_, "starting from %s\n", o->init_from);
    } else {
        size_t np = wgpt_gpt2_num_params(&r->cfg);
        float *p = malloc(np * sizeof *p);
        if (!p) return wgpt_run_fail_(r, "out of host memory for %zu parameters", np);
        wgpt_gpt2_init_params(&r->cfg, p, o->seed);
        rc = wgpt_gpt2_set_params(r->model, p);
        free(p);
        if (rc < 0) return wgpt_run_fail_(r, "%s", wgpt_gpt2_error(r->model));
    }
    if (r->nranks > 1) {
        size_t N = (size_t)r->nranks;
        r->grads = malloc(wgpt_gpt2_num_params(&r->cfg) * sizeof *r->grads);
        r->shard_off = malloc(N * sizeof *r->shard_off), r->shard_n = malloc(N * sizeof *r->shard_n);
        r->update_off = malloc(N * sizeof *r->update_off), r->update_n = malloc(N * sizeof *r->update_n);
        if (!r->grads || !r->shard_off || !r->shard_n || !r->update_off || !r->update_n)
            return wgpt_run_fail_(r, "out of host memory for the gradients and parameters");
        uint64_t words = 0;
        for (uint32_t i = 0; i < N; i++) {
            wgpt_gpt2_shard_range(r->model, i, &r->shard_off[i], &r->shard_n[i]);
            r->update_off[i] = words;
            words += r->update_n[i] = wgpt_gpt2_shard_update_words(r->model, i);
        }
        if (!(r->updates = malloc(words * sizeof *r->updates)))
            return wgpt_run_fail_(r, "out of host memory for the parameters' exchange (%llu words)",
                                  (unsigned long long)words);
        if (wgpt_run_open_buckets_(r) != 0) return 1;
    }
    return r->rank == 0 ? wgpt_run_open_metrics_(r, resumed) : 0;
}

void wgpt_run_close_(run_ *r) {
    if (r->metrics) fclose(r->metrics);
    wgpt_history_free(&r->hist);
    wgpt_decoder_free(r->sampler_dec);
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
