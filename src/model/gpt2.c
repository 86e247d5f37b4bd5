// gpt2.c: a GPT-2 model made and freed: its options (precision, recompute,
// ZeRO-1 shards), the plan they choose (gpt2_plan.c), its buffers
// (gpt2_acts.c) and its prepared forward and backward (gpt2_fp32.c,
// gpt2_f16.c). Running it: gpt2_step.c, gpt2_segments.c, gpt2_update.c,
// gpt2_logits.c; its parameters: gpt2_params.c, gpt2_masters.c.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "model/optimizer.h"

const char *wgpt_precision_name(wgpt_precision p) {
    return p == WGPT_PRECISION_F16 ? "f16" : p == WGPT_PRECISION_AUTO ? "auto" : "fp32";
}

int wgpt_precision_parse(const char *s, wgpt_precision *out) {
    if (strcmp(s, "fp32") == 0) *out = WGPT_PRECISION_FP32;
    else if (strcmp(s, "f16") == 0) *out = WGPT_PRECISION_F16;
    else if (strcmp(s, "auto") == 0) *out = WGPT_PRECISION_AUTO;
    else return -1;
    return 0;
}

wgpt_precision wgpt_precision_auto(const wgpt_gpu_info *i) {
    return i->has_f16 && i->has_subgroup_matrix && i->sgm_config >= 0 ? WGPT_PRECISION_F16 : WGPT_PRECISION_FP32;
}

wgpt_precision wgpt_gpt2_precision(const wgpt_gpt2 *m) { return m->precision; }
wgpt_recompute wgpt_gpt2_recompute(const wgpt_gpt2 *m) { return m->recompute; }

static const char *const RECOMPUTE_NAMES_[4] = {"none", "gelu", "all", "auto"};
const char *wgpt_recompute_name(wgpt_recompute r) { return (unsigned)r < 4 ? RECOMPUTE_NAMES_[r] : "?"; }
int wgpt_recompute_parse(const char *s, wgpt_recompute *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, RECOMPUTE_NAMES_[i]) == 0) return *out = (wgpt_recompute)i, 0;
    return -1;
}
float wgpt_gpt2_loss_scale(const wgpt_gpt2 *m) { return m->loss_scale; }

// The model's shape and options, before any GPU buffer: NULL with err
// filled where the shape or the shards do not fit.
static wgpt_gpt2 *new_(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, const wgpt_gpt2_opts *o,
                       const wgpt_gpt2 *share, char *err, size_t errlen) {
    if (wgpt_gpt2_check_shape(c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, errlen)) return NULL;
    if (!o->training && wgpt_gpt2_check_logits(c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, errlen)) return NULL;
    wgpt_gpt2 *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    m->g = g;
    m->c = *c;
    m->B = B;
    m->T = T;
    m->training = o->training;
    m->recompute = o->training ? o->recompute : WGPT_RECOMPUTE_NONE;
    m->shared = share != NULL;
    if (share) m->params = share->params, m->params16 = share->params16;
    wgpt_op_init(&m->fwd);
    wgpt_op_init(&m->bwd);
    wgpt_op_init(&m->opt);
    wgpt_op_init(&m->shard_norm);
    wgpt_op_init(&m->cast);
    wgpt_gpt2_layout_params_(m);
    m->shard = o->shard, m->nshards = o->nshards;
    wgpt_gpt2_shard_range_(m->padded_params, o->shard, o->nshards, &m->shard_off, &m->shard_n);
    if (m->shard_n == 0) {  // more ranks than 64-float blocks: a rank would have nothing to update
        snprintf(err, errlen, "%llu parameters cannot be split into %u optimizer shards of 64-float blocks: use "
                 "fewer ranks or a larger model", (unsigned long long)m->padded_params, o->nshards);
        free(m);
        return NULL;
    }
    m->cls_chunked = o->training;
    m->cls_rows = o->training ? wgpt_gpt2_cls_rows_(m) : B * T;
    if (!m->cls_rows) {  // (a single tensor that cannot be split)
        snprintf(err, errlen, "64 rows of the logits (%llu bytes) exceed the device's binding limit of %llu bytes",
                 (unsigned long long)(64ull * c->padded_vocab_size * 4),
                 (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
        free(m);
        return NULL;
    }
    return m;
}

// The precision the model runs in: auto becomes f16 where tensor cores make
// it pay and the shape allows it (wgpt_gpt2_check_f16_), else fp32.
static wgpt_precision precision_(wgpt_gpt2 *m, wgpt_precision p) {
    if (p != WGPT_PRECISION_AUTO) return p;
    p = WGPT_PRECISION_FP32;
    if (wgpt_precision_auto(wgpt_gpu_get_info(m->g)) == WGPT_PRECISION_F16 && wgpt_gpt2_check_f16_(m) == 0)
        p = WGPT_PRECISION_F16;
    m->err[0] = 0;
    return p;
}

// Where the fp32 masters live. f16 ZeRO-1: the matmul weights of this
// shard only (gpt2_masters.c); an inference instance reads the masters
// where its training model keeps them.
static int masters_(wgpt_gpt2 *m, const wgpt_gpt2 *share, char *err, size_t errlen) {
    int f16 = m->precision == WGPT_PRECISION_F16;
    if (!share) {
        wgpt_gpt2_layout_masters_(m, f16 && m->training && m->nshards > 1);
        return 0;
    }
    m->split_masters = share->split_masters, m->keep_lo = share->keep_lo, m->keep_hi = share->keep_hi;
    m->master_floats = share->master_floats;
    if (m->split_masters && !f16) {
        snprintf(err, errlen, "an inference instance of %u x %u positions would run in fp32 (f16 takes a "
                 "multiple of 8), but its training model keeps only its shard of the fp32 matmul weights "
                 "(ZeRO-1 in f16)", m->B, m->T);
        return -1;
    }
    return 0;
}

// The model of options o (nshards >= 1, recompute not auto), sharing the
// parameters of `share` (an inference instance) if not NULL.
static wgpt_gpt2 *create_(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, const wgpt_gpt2_opts *o,
                          const wgpt_gpt2 *share, char *err, size_t errlen) {
    wgpt_gpt2 *m = new_(g, c, B, T, o, share, err, errlen);
    if (!m) return NULL;
    m->precision = precision_(m, o->precision);
    int f16 = m->precision == WGPT_PRECISION_F16;
    m->loss_scale = f16 && m->training ? WGPT_LOSS_SCALE_INIT : 1.0f;
    if (m->training) {
        m->bwd_cut = calloc((size_t)c->num_layers + 2, sizeof *m->bwd_cut);
        m->seg_read = calloc((size_t)c->num_layers + 2, sizeof *m->seg_read);
        if (!m->bwd_cut || !m->seg_read) {
            snprintf(err, errlen, "out of host memory");
            wgpt_gpt2_free(m);
            return NULL;
        }
    }
    if (masters_(m, share, err, errlen) < 0) {
        wgpt_gpt2_free(m);
        return NULL;
    }
    // The plan's choices, then its buffers and ops. A forward-only model
    // prepares its forward (and compiles its kernels) at its first forward:
    // a command that decodes with the KV cache (model/gpt2_decode.h) never
    // runs it. Training builds the backward on it.
    int tag = wgpt_gpu_mem_tag(g, WGPT_MEM_SCRATCH);
    int rc = (f16 && wgpt_gpt2_check_f16_(m) < 0);
    if (!rc) wgpt_gpt2_plan_(m);
    rc = rc || wgpt_gpt2_alloc_params_(m) < 0 || wgpt_gpt2_alloc_acts_(m) < 0;
    wgpt_gpu_mem_tag(g, tag);
    if (rc || (m->training && wgpt_gpt2_build_forward_(m) < 0) || (m->training && wgpt_gpt2_build_backward_(m) < 0) ||
        (f16 && !m->shared && !m->split_masters && wgpt_gpt2_build_cast_(m) < 0)) {
        snprintf(err, errlen, "%s", m->err);
        wgpt_gpt2_free(m);
        return NULL;
    }
    return m;
}

wgpt_gpt2 *wgpt_gpt2_create(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                            size_t errlen) {
    wgpt_gpt2_opts o = {.training = 1, .precision = WGPT_PRECISION_FP32};
    return wgpt_gpt2_create_opts(g, c, B, T, &o, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_precision(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, int training,
                                      wgpt_precision precision, char *err, size_t errlen) {
    wgpt_gpt2_opts o = {.training = training != 0, .precision = precision};
    return wgpt_gpt2_create_opts(g, c, B, T, &o, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_sharded(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                    wgpt_precision precision, uint32_t shard, uint32_t nshards, char *err,
                                    size_t errlen) {
    if (nshards < 1 || shard >= nshards) {
        snprintf(err, errlen, "optimizer shard %u of %u: the shard must be below the count (>= 1)", shard, nshards);
        return NULL;
    }
    wgpt_gpt2_opts o = {.training = 1, .precision = precision, .shard = shard, .nshards = nshards};
    return wgpt_gpt2_create_opts(g, c, B, T, &o, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_opts(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                 const wgpt_gpt2_opts *opts, char *err, size_t errlen) {
    wgpt_gpt2_opts o = *opts;
    o.training = o.training != 0;
    o.nshards = o.nshards ? o.nshards : 1;
    if (o.shard >= o.nshards) {
        snprintf(err, errlen, "optimizer shard %u of %u: the shard must be below the count (>= 1)", o.shard,
                 o.nshards);
        return NULL;
    }
    if ((unsigned)o.recompute > WGPT_RECOMPUTE_AUTO) {
        snprintf(err, errlen, "recompute %d: none, gelu, all or auto", (int)o.recompute);
        return NULL;
    }
    if (o.recompute != WGPT_RECOMPUTE_AUTO || !o.training) {
        if (o.recompute == WGPT_RECOMPUTE_AUTO) o.recompute = WGPT_RECOMPUTE_NONE;
        return create_(g, c, B, T, &o, NULL, err, errlen);
    }
    // auto: the fastest that fits, trying again with less kept only where
    // the GPU's memory ran out (WebGPU cannot say beforehand how much there is)
    wgpt_gpt2 *m = NULL;
    for (int r = WGPT_RECOMPUTE_NONE; !m && r <= WGPT_RECOMPUTE_ALL; r++) {
        o.recompute = (wgpt_recompute)r;
        m = create_(g, c, B, T, &o, NULL, err, errlen);
        if (!m && !strstr(err, "out of GPU memory")) break;
    }
    return m;
}

wgpt_gpt2 *wgpt_gpt2_create_forward_only(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                                         size_t errlen) {
    wgpt_gpt2_opts o = {.training = 0, .precision = WGPT_PRECISION_FP32};
    return wgpt_gpt2_create_opts(g, c, B, T, &o, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_inference(wgpt_gpt2 *train, uint32_t B, uint32_t T, char *err, size_t errlen) {
    wgpt_gpt2_opts o = {.training = 0, .precision = train->precision, .nshards = 1};
    // f16 takes rows in eights; the fp32 forward reads the same f32 parameters
    if (o.precision == WGPT_PRECISION_F16 && ((uint64_t)B * T) % 8) o.precision = WGPT_PRECISION_FP32;
    return create_(train->g, &train->c, B, T, &o, train, err, errlen);
}

void wgpt_gpt2_free(wgpt_gpt2 *m) {
    if (!m) return;
    wgpt_adamw_free(m->adamw);
    wgpt_op_free(&m->fwd);
    wgpt_op_free(&m->bwd);
    wgpt_op_free(&m->opt);
    wgpt_op_free(&m->shard_norm);
    wgpt_op_free(&m->cast);
    for (uint32_t i = 0; m->seg_read && i < m->c.num_layers + 2; i++) wgpt_readback_free(m->g, m->seg_read[i]);
    free(m->seg_read), free(m->bwd_cut);
    if (!m->shared) wgpt_buf_free(m->params), wgpt_buf_free(m->params16);
    wgpt_buf_free(m->grads);
    wgpt_buf_free(m->adam_m);
    wgpt_buf_free(m->adam_v);
    wgpt_gpt2_act *acts[] = {&m->encoded, &m->ln1, &m->ln1_mean, &m->ln1_rstd, &m->qkv, &m->atty, &m->att_lse,
                             &m->attproj, &m->res2, &m->ln2, &m->ln2_mean, &m->ln2_rstd, &m->fch, &m->fch_gelu,
                             &m->fcproj, &m->res3, &m->lnf, &m->lnf_mean, &m->lnf_rstd, &m->logits, &m->losses,
                             &m->ce_lse, &m->loss, &m->status, &m->dres, &m->dln, &m->datty, &m->dqkv, &m->dfch,
                             &m->dfch_gelu, &m->att_d, &m->tokens, &m->targets, &m->bucket, &m->norm_scratch, &m->mm_scratch,
                             &m->opt_state, &m->ln_scratch, &m->ln1_16, &m->atty16, &m->ln2_16, &m->fchg16,
                             &m->lnf16, &m->d16, &m->qkv16, &m->inp_t16, &m->atty16_t};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) wgpt_buf_free(acts[i]->buf);
    free(m);
}
