// evaluate.c: the validation loss (see evaluate.h).
#include "train/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/load.h"
#include "util/err.h"

int wgpt_val_run(wgpt_gpt2 *m, wgpt_loader *ld, uint32_t max_batches, int *inputs, int *targets, wgpt_val_loss *res,
                 char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    wgpt_loader_reset_val(ld);
    while (!max_batches || res->batches < max_batches) {
        int got = wgpt_loader_next_val(ld, inputs, targets);
        if (got < 0) {
            res->data_failed = 1;
            return wgpt_errf(err, errlen, "%s", wgpt_loader_error(ld));
        }
        if (got == 0) break;
        float loss;
        if (wgpt_gpt2_forward(m, inputs, targets, &loss) < 0) return wgpt_errf(err, errlen, "%s", wgpt_gpt2_error(m));
        res->batches++;
        if (!isfinite(loss)) {
            res->nonfinite = res->batches;
            res->bad_loss = loss;
            break;
        }
        res->sum += loss;
    }
    return 0;
}

// The loader over o->data, refusing shards of another tokenizer than the
// checkpoint's (compared before their ids are checked against its vocabulary).
static wgpt_loader *open_data_(const wgpt_eval_opts *o, const wgpt_loaded *l, char *err, size_t errlen) {
    // the validation split alone: a train shard eval never reads need not hold a window
    wgpt_loader *ld = wgpt_loader_open_val(o->data, o->batch, l->cfg.max_seq_len, o->val_fraction, 65536, err, errlen);
    if (!ld) return NULL;
    const char *made_with = wgpt_loader_tokenizer(ld), *trained_with = wgpt_tokenizer_name(l->tok);
    if (made_with && strcmp(made_with, trained_with) != 0) {
        wgpt_errf(err, errlen, "the shards (%s) were made with the %s tokenizer, but %s was trained with %s", o->data,
                  made_with, o->checkpoint, trained_with);
    } else if (wgpt_loader_check_vocab(ld, l->cfg.vocab_size, err, errlen) == 0) {
        return ld;
    }
    wgpt_loader_free(ld);
    return NULL;
}

int wgpt_eval_checkpoint(const wgpt_eval_opts *o, wgpt_eval_result *res, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    wgpt_loaded l;
    if (wgpt_load_for_inference(&l, o->checkpoint, o->bpe_dir, &o->gpu, o->batch, 0, o->precision, err, errlen) < 0)
        return -1;
    uint32_t T = l.cfg.max_seq_len;
    res->precision = wgpt_gpt2_precision(l.model);
    res->step = l.step;
    res->T = T;
    wgpt_loader *ld = open_data_(o, &l, err, errlen);
    int rc = -1;
    if (ld) {
        size_t bt = (size_t)o->batch * T;
        int *in = malloc(bt * sizeof *in), *tg = malloc(bt * sizeof *tg);
        wgpt_val_loss v;
        if (!in || !tg)
            wgpt_errf(err, errlen, "out of host memory for batches of %u x %u tokens", o->batch, T);
        else if (wgpt_val_run(l.model, ld, o->batches, in, tg, &v, err, errlen) < 0)
            ;
        else if (v.nonfinite)  // a NaN is no loss to report: the weights overflow on this data
            wgpt_errf(err, errlen, "the loss of batch %u is %s: %s's weights overflow on this data", v.nonfinite,
                      isnan(v.bad_loss) ? "NaN" : "Inf", o->checkpoint);
        else if (v.batches == 0)
            wgpt_errf(err, errlen, "%s has no validation batch of %u x %u tokens", o->data, o->batch, T);
        else
            rc = 0, res->batches = v.batches, res->loss = v.sum / v.batches;
        free(in), free(tg);
        wgpt_loader_free(ld);
    }
    wgpt_loaded_free(&l);
    return rc;
}
