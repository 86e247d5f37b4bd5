// agree.c: what every rank of a run must hold alike: a hash of the options,
// the shape, the data and the starting step (the option that differs named),
// and a stop request on any rank.
#include "train/run_internal.h"

#include <string.h>

// FNV-1a, for the options hash.
static uint64_t fnv_(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// One option every rank must hold alike: its value as a whole number, a
// float's bits or a string's hash.
typedef struct agreed_ {
    const char *option;
    uint64_t v;
    char kind;  // 'u' whole, 'f' float bits, 's' a string's hash (text: the string)
    const char *text;
} agreed_;

static uint64_t str_hash_(const char *s) { return s ? fnv_(1469598103934665603ull, s, strlen(s) + 1) : 0; }
static uint64_t bits_(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

// Every option that decides the model, the data, the schedule or the
// collectives (when a checkpoint, a validation or a stop makes every rank
// gather), so that a rank started otherwise stops the job at once instead of
// waiting in another collective (--comm-timeout) or training on other data.
// Options that only rank 0 uses (--log-every, --sample-*, --quiet) or that
// are each rank's own (--adapter, --comm-timeout, --bpe-dir) are left out.
static int agreed_list_(const run_ *r, agreed_ *a) {
    const wgpt_train_opts *o = r->o;
    int n = 0;
#define U_(name, val) a[n++] = (agreed_){name, (uint64_t)(val), 'u', NULL}
#define F_(name, val) a[n++] = (agreed_){name, bits_(val), 'f', NULL}
#define S_(name, val) a[n++] = (agreed_){name, str_hash_(val), 's', (val) ? (val) : "(none)"}
    S_("--data", o->data);
    S_("--init-from", o->init_from);
    S_("--tokenizer", wgpt_tokenizer_name(r->tok));
    U_("--layers", r->cfg.num_layers), U_("--heads", r->cfg.num_heads), U_("--channels", r->cfg.channels);
    U_("--seq", o->seq), U_("--batch", o->batch), U_("--total-batch", r->accum * (uint32_t)r->nranks);
    S_("--precision", wgpt_precision_name(wgpt_gpt2_precision(r->model)));
    U_("--seed", o->seed), U_("--steps", o->steps), U_("--stop-at", o->stop_at), U_("--warmup", o->warmup);
    F_("--lr", o->lr), F_("--min-lr-frac", o->min_lr_frac), F_("--weight-decay", o->weight_decay);
    F_("--beta1", o->beta1), F_("--beta2", o->beta2), F_("AdamW eps", o->eps), F_("--grad-clip", o->grad_clip);
    F_("--spike-factor", o->spike_factor), U_("--max-skips", o->max_skips);
    U_("--checkpoint-every", o->checkpoint_every), U_("--val-every", o->val_every);
    U_("--val-batches", o->val_batches), F_("--val-fraction", o->val_fraction);
    U_("--grad-buckets", o->grad_buckets);
    S_("--inject-nan", o->inject_nan), U_("--inject-device-loss", o->inject_loss_at);
    U_("the starting step (--resume, --out)", r->step);
#undef U_
#undef F_
#undef S_
    return n;
}

// Every rank must train the same model on the same data from the same step:
// a hash of the options, the shape, the data glob and the step, compared;
// where they differ, option by option, so that the message names it.
int wgpt_run_agree_(run_ *r) {
    if (r->nranks < 2) return 0;
    agreed_ a[48];
    int n = agreed_list_(r, a);
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (int i = 0; i < n; i++) h = fnv_(h, &a[i].v, sizeof a[i].v);
    char err[1024];
    if (wgpt_comm_min_max_u64(r->comm, h, &lo, &hi, err, sizeof err) < 0) return wgpt_run_fail_(r, "%s", err);
    if (lo == hi) return 0;
    for (int i = 0; i < n; i++) {  // every rank takes the same turns: the hashes differ on all of them
        if (wgpt_comm_min_max_u64(r->comm, a[i].v, &lo, &hi, err, sizeof err) < 0) return wgpt_run_fail_(r, "%s", err);
        if (lo == hi) continue;
        char here[160], all[96] = "";
        if (a[i].kind == 's') {
            snprintf(here, sizeof here, "'%.120s'", a[i].text);
        } else if (a[i].kind == 'f') {
            float x, y, v;
            uint32_t bl = (uint32_t)lo, bh = (uint32_t)hi, bv = (uint32_t)a[i].v;
            memcpy(&x, &bl, 4), memcpy(&y, &bh, 4), memcpy(&v, &bv, 4);
            snprintf(here, sizeof here, "%g", (double)v);
            snprintf(all, sizeof all, "; the ranks hold %g and %g, among others", (double)x, (double)y);
        } else {
            snprintf(here, sizeof here, "%llu", (unsigned long long)a[i].v);
            snprintf(all, sizeof all, "; the ranks hold %llu to %llu", (unsigned long long)lo,
                     (unsigned long long)hi);
        }
        return wgpt_run_fail_(
            r,
            "the %d ranks differ in %s (rank %d: %s%s): start every rank with the same command line and "
            "the same --out",
            r->nranks, a[i].option, r->rank, here, all);
    }
    return wgpt_run_fail_(r,
                          "the %d ranks differ in their options, data or starting step (rank %d's hash %016llx): start "
                          "every rank with the same command line and the same --out",
                          r->nranks, r->rank, (unsigned long long)h);
}

// A stop request on any rank (SIGTERM to one of them) stops them all after
// the same step. Returns 0 with r->stopping set, or 1.
int wgpt_run_agree_stop_(run_ *r) {
    uint64_t lo, hi;
    char err[1024], kept[4608];
    if (!r->comm) return r->stopping = wgpt_run_stop_requested_(r), 0;
    if (wgpt_comm_min_max_u64(r->comm, (uint64_t)wgpt_run_stop_requested_(r), &lo, &hi, err, sizeof err) < 0)
        return wgpt_run_fail_(r, "%s\n%s", err, wgpt_run_kept_(r, kept, sizeof kept));
    r->stopping = hi != 0;
    return 0;
}
