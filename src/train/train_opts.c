// train_opts.c: defaults and checks of the training options (see train_opts.h).
#include "train/train_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "model/gpt2.h"  // defines: wgpt_precision
#include "util/err.h"

void wgpt_train_defaults(wgpt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->data = "data/fortunes/*.bin";
    o->out_dir = "runs/demo";
    o->tokenizer = NULL;  // what the shards record
    o->precision = WGPT_PRECISION_AUTO;
    o->recompute = "auto";
    o->bpe_dir = "third_party/gpt2-bpe";
    o->layers = 4;
    o->heads = 4;
    o->channels = 128;
    o->batch = 8;
    o->seq = 64;
    o->steps = 300;
    o->lr = 3e-3f;
    o->min_lr_frac = 0.1f;
    o->warmup = 20;
    o->weight_decay = 0.1f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->grad_clip = 1.0f;
    o->val_every = 50;
    o->val_batches = 8;
    o->sample_every = 0;
    o->sample_tokens = 200;
    o->temperature = 0.8f;
    o->top_k = 40;
    o->checkpoint_every = 100;
    o->log_every = 10;
    o->val_fraction = 0.1f;
    o->spike_factor = 100.0f;  // real divergence spikes are 100x and more; clipping handles the rest
    o->max_skips = 5;
    o->grad_buckets = 1;
    o->seed = 1337;
    o->gpu.adapter_index = -1;
}

// Steps are passed to the optimizer as an int.
#define MAX_STEPS 2147483647.0

typedef struct limit_ {
    wgpt_train_limit l;
    size_t offset;
    char type;  // 'u' uint32_t, 'f' float
} limit_;

#define U_(name, field, lo, hi) {{name, lo, hi, 0, 0}, offsetof(wgpt_train_opts, field), 'u'}
#define F_(name, field, lo, hi, open_lo, open_hi) {{name, lo, hi, open_lo, open_hi}, offsetof(wgpt_train_opts, field), 'f'}
static const limit_ LIMITS_[] = {
    U_("layers", layers, 1, 1024),
    U_("heads", heads, 1, 1024),
    U_("channels", channels, 1, 65536),
    U_("batch", batch, 1, 65536),
    U_("seq", seq, 1, 262144),
    U_("total-batch", total_batch, 0, 4294967295.0),
    U_("steps", steps, 1, MAX_STEPS),
    U_("stop-at", stop_at, 0, MAX_STEPS),
    F_("lr", lr, 0, 10, 1, 0),
    F_("min-lr-frac", min_lr_frac, 0, 1, 0, 0),
    U_("warmup", warmup, 0, MAX_STEPS),
    F_("weight-decay", weight_decay, 0, 10, 0, 0),
    F_("beta1", beta1, 0, 1, 0, 1),  // beta = 1 divides by 1 - beta^t = 0
    F_("beta2", beta2, 0, 1, 0, 1),
    F_("grad-clip", grad_clip, 0, 1e9, 0, 0),
    U_("val-every", val_every, 0, MAX_STEPS),
    U_("val-batches", val_batches, 1, 1000000),
    F_("val-fraction", val_fraction, 0, 1, 0, 1),
    U_("sample-every", sample_every, 0, MAX_STEPS),
    U_("sample-tokens", sample_tokens, 1, WGPT_TRAIN_MAX_SAMPLE_TOKENS),
    F_("temperature", temperature, 0, 100, 0, 0),
    U_("top-k", top_k, 0, 65536),
    U_("checkpoint-every", checkpoint_every, 0, MAX_STEPS),
    U_("log-every", log_every, 0, MAX_STEPS),
    F_("spike-factor", spike_factor, 0, 1e9, 0, 0),
    U_("max-skips", max_skips, 0, MAX_STEPS),
    U_("grad-buckets", grad_buckets, 0, 1),
    U_("inject-device-loss", inject_loss_at, 0, MAX_STEPS),
};
#undef U_
#undef F_

const wgpt_train_limit *wgpt_train_limit_of(const char *option) {
    for (size_t i = 0; i < sizeof LIMITS_ / sizeof LIMITS_[0]; i++)
        if (strcmp(LIMITS_[i].l.option, option) == 0) return &LIMITS_[i].l;
    return NULL;
}

static int in_range_(const wgpt_train_limit *l, double v) {
    return isfinite(v) && (l->open_min ? v > l->min : v >= l->min) && (l->open_max ? v < l->max : v <= l->max);
}

// "--inject-nan 3,5": whole step numbers separated by commas.
static int step_list_ok_(const char *s) {
    if (!*s) return 0;
    for (const char *p = s; *p;) {
        if (*p < '0' || *p > '9') return 0;
        while (*p >= '0' && *p <= '9') p++;
        if (*p == ',') p++;
        else if (*p) return 0;
    }
    return s[strlen(s) - 1] != ',';
}

int wgpt_train_check(const wgpt_train_opts *o, char *err, size_t errlen) {
    for (size_t i = 0; i < sizeof LIMITS_ / sizeof LIMITS_[0]; i++) {
        const limit_ *l = &LIMITS_[i];
        const char *p = (const char *)o + l->offset;
        double v;
        if (l->type == 'u') {
            uint32_t u;
            memcpy(&u, p, sizeof u);
            v = u;
        } else {
            float f;
            memcpy(&f, p, sizeof f);
            v = f;
        }
        if (in_range_(&l->l, v)) continue;
        if (l->type == 'u')
            return wgpt_errf(err, errlen, "--%s %.0f: out of range: allowed %.0f to %.0f", l->l.option, v, l->l.min,
                         l->l.max);
        return wgpt_errf(err, errlen, "--%s %g: out of range: allowed %c%g, %g%c", l->l.option, v,
                     l->l.open_min ? '(' : '[', l->l.min, l->l.max, l->l.open_max ? ')' : ']');
    }
    if (!(o->eps > 0 && o->eps < 1)) return wgpt_errf(err, errlen, "AdamW eps %g: must be in (0, 1)", (double)o->eps);
    if (!o->data || !*o->data) return wgpt_errf(err, errlen, "--data: no shard files given");
    if (!o->out_dir || !*o->out_dir) return wgpt_errf(err, errlen, "--out: no output folder given");
    if (o->precision != WGPT_PRECISION_FP32 && o->precision != WGPT_PRECISION_F16 && o->precision != WGPT_PRECISION_AUTO)
        return wgpt_errf(err, errlen, "precision %d: not a wgpt_precision", (int)o->precision);
    wgpt_recompute recompute;
    if (!o->recompute || wgpt_recompute_parse(o->recompute, &recompute) < 0)
        return wgpt_errf(err, errlen, "--recompute '%s': unknown (auto, none, gelu or all)", o->recompute ? o->recompute : "");
    if (o->tokenizer && !wgpt_tokenizer_known(o->tokenizer))
        return wgpt_errf(err, errlen, "--tokenizer '%s': unknown (gpt2 or bytes)", o->tokenizer);
    if (o->tokenizer && strcmp(o->tokenizer, "gpt2") == 0 && (!o->bpe_dir || !*o->bpe_dir))
        return wgpt_errf(err, errlen, "--bpe-dir: no folder given for the gpt2 tokenizer's files");
    if (o->channels % o->heads)
        return wgpt_errf(err, errlen, "--channels %u is not a multiple of --heads %u", o->channels, o->heads);
    uint64_t micro = (uint64_t)o->batch * o->seq;
    uint64_t total = o->total_batch ? o->total_batch : micro;
    if (total % micro)
        return wgpt_errf(err, errlen, "--total-batch %llu is not a multiple of --batch x --seq = %u x %u = %llu",
                     (unsigned long long)total, o->batch, o->seq, (unsigned long long)micro);
    if (total / micro > WGPT_TRAIN_MAX_ACCUM)
        return wgpt_errf(err, errlen, "--total-batch %llu would take %llu micro-batches a step; at most %u",
                     (unsigned long long)total, (unsigned long long)(total / micro), WGPT_TRAIN_MAX_ACCUM);
    if (o->stop_at > o->steps)
        return wgpt_errf(err, errlen, "--stop-at %u is past the end of the run (--steps %u)", o->stop_at, o->steps);
    if (o->spike_factor > 0 && o->spike_factor < 1)
        return wgpt_errf(err, errlen, "--spike-factor %g would skip ordinary steps: 0 (off) or >= 1", (double)o->spike_factor);
    if (o->inject_nan && !step_list_ok_(o->inject_nan))
        return wgpt_errf(err, errlen, "--inject-nan '%s': not a comma-separated list of steps (e.g. 3,5)", o->inject_nan);
    return 0;
}
