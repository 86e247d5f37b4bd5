// gpt2_update.c: the optimizer step: the gradient norm, clipping and AdamW
// as one prepared op (built at first use), the split update of ZeRO-1, the
// dynamic loss scale of f16, and the whole training step of one batch.
#include <math.h>

#include "model/gpt2_views.h"
#include "model/optimizer.h"

static int build_optimizer_(wgpt_gpt2 *m, const wgpt_adamw_config *o) {
    wgpt_gpu *g = m->g;
    wgpt_view all_g = {m->grads, 0, 0};
    GPU_OK(m, wgpt_grad_norm(g, &m->opt, all_g, m->padded_params, A(norm_scratch, 0), A(opt_state, 0),
                             o->max_grad_norm, &m->norm_handle));
    m->opt_update_from = m->opt.n;
    // the split update's norm: this shard's gradients only (its offset is 256-byte aligned)
    wgpt_view shard_g = {m->grads, m->shard_off * 4, m->shard_n * 4};
    GPU_OK(m, wgpt_grad_norm(g, &m->shard_norm, shard_g, m->shard_n, A(norm_scratch, 0), A(opt_state, 0),
                             o->max_grad_norm, &m->shard_norm_handle));
    // decay the 2D weights only, as GPT-2 training does
    static const int decayed[] = {WGPT_WTE, WGPT_WPE, WGPT_QKVW, WGPT_ATTPROJW, WGPT_FCW, WGPT_FCPROJW};
    // Only the shard's part of each tensor, counted from the shard's start:
    // the params and grads views start there, the moments hold the shard alone.
    wgpt_adamw_range r[WGPT_GPT2_NUM_TENSORS];
    uint64_t s0 = m->shard_off, s1 = m->shard_off + m->shard_n;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        float wd = 0;
        for (size_t i = 0; i < sizeof decayed / sizeof decayed[0]; i++)
            if (decayed[i] == t) wd = o->weight_decay;
        uint64_t b = m->pt[t].base, e = b + m->pt[t].stride * m->pt[t].slices;
        b = b > s0 ? b : s0, e = e < s1 ? e : s1;
        r[t] = (wgpt_adamw_range){b < e ? b - s0 : 0, b < e ? e - b : 0, wd};
    }
    wgpt_adamw_hparams hp = {o->lr, o->beta1, o->beta2, o->eps, 1};
    // the shard is contiguous in the masters too (gpt2_masters.c)
    wgpt_view pv = {m->params, wgpt_gpt2_master_at_(m, s0) * 4, m->shard_n * 4}, gv = {m->grads, s0 * 4, m->shard_n * 4};
    wgpt_view mv = {m->adam_m, 0, 0}, vv = {m->adam_v, 0, 0};
    if (m->precision == WGPT_PRECISION_F16) {  // AdamW writes the f16 copy of what it updates, the cast's rounding
        wgpt_view p16 = {m->params16, s0 * 2, m->shard_n * 2};
        GPU_OK(m, wgpt_adamw_update_f16(g, &m->opt, pv, p16, gv, mv, vv, A(opt_state, 0), r, WGPT_GPT2_NUM_TENSORS,
                                        &hp, &m->adamw));
    } else {
        GPU_OK(m, wgpt_adamw_update(g, &m->opt, pv, gv, mv, vv, A(opt_state, 0), r, WGPT_GPT2_NUM_TENSORS, &hp,
                                    &m->adamw));
    }
    m->opt_cfg = *o;
    return 0;
}

// The optimizer op is built on first use, and rebuilt if its constants change.
static int ensure_optimizer_(wgpt_gpt2 *m, const wgpt_adamw_config *o) {
    if (m->adamw && o->max_grad_norm == m->opt_cfg.max_grad_norm && o->beta1 == m->opt_cfg.beta1 &&
        o->beta2 == m->opt_cfg.beta2 && o->eps == m->opt_cfg.eps && o->weight_decay == m->opt_cfg.weight_decay)
        return 0;
    wgpt_adamw_free(m->adamw);
    m->adamw = NULL;
    wgpt_op_free(&m->opt);
    wgpt_op_free(&m->shard_norm);
    return build_optimizer_(m, o);
}

// The factor 1/(k * loss scale) the buffer's gradients are seen through when
// k micro-batches were summed (or the loss was scaled), so that clipping and
// AdamW see the gradient of the mean loss: set on the norm's finish (h), which
// folds it into the scale AdamW multiplies by (no pass over the buffer; on an
// H100 that pass took 0.34 ms of a GPT-2 124M f16 step).
static int set_grad_scale_(wgpt_gpt2 *m, const wgpt_grad_norm_handle *h, int k, float skip_norm) {
    m->grad_scale_c = 1.0f / ((float)k * m->loss_scale);
    GPU_OK(m, wgpt_grad_norm_set(m->g, h, skip_norm, m->grad_scale_c));
    return 0;
}

// A new loss scale rebuilds the backward, whose first kernel carries it.
static int use_loss_scale_(wgpt_gpt2 *m, float scale) {
    if (scale == m->loss_scale) return 0;
    m->loss_scale = scale;
    wgpt_op_free(&m->bwd);
    wgpt_op_init(&m->bwd);
    return wgpt_gpt2_build_backward_(m);
}

// After an update's state was read back (so no recorded work still uses the
// backward op; the f16 copy of the new parameters was recorded before that):
// the dynamic loss scale, halved by an overflow, doubled after
// WGPT_LOSS_SCALE_INTERVAL clean steps; a new scale rebuilds the backward,
// whose first kernel carries it.
static int after_update_(wgpt_gpt2 *m, const wgpt_optim_state *st, wgpt_step_result *out) {
    out->loss_scale = m->loss_scale;
    if (m->precision != WGPT_PRECISION_F16) return 0;
    float s = m->loss_scale;
    if (st->nonfinite) {
        s = s > 1.0f ? s * 0.5f : 1.0f;
        m->clean_steps = 0;
    } else if (++m->clean_steps >= WGPT_LOSS_SCALE_INTERVAL) {
        s = s < 16777216.0f ? s * 2.0f : s;
        m->clean_steps = 0;
    }
    return use_loss_scale_(m, s);
}

int wgpt_gpt2_update(wgpt_gpt2 *m, const wgpt_adamw_config *o, int t, int accum_steps, wgpt_step_result *out) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (ensure_optimizer_(m, o) < 0 || set_grad_scale_(m, &m->norm_handle, accum_steps, o->skip_norm) < 0) return -1;
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    GPU_OK(m, wgpt_op_record(m->g, &m->opt));  // (in f16 AdamW wrote params16 too)
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}

int wgpt_gpt2_update_shard_begin(wgpt_gpt2 *m, const wgpt_adamw_config *o, int accum_steps, double *sumsq,
                                 int *bad) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    // (no spike test on a shard's norm: it needs the whole norm)
    if (ensure_optimizer_(m, o) < 0 || set_grad_scale_(m, &m->shard_norm_handle, accum_steps, 0) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->shard_norm));
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    *sumsq = st.sumsq;
    *bad = st.nonfinite == 1;
    return 0;
}

// The whole norm's decisions as grad_norm_finish makes them (07_optimizer.wgsl),
// in f32: sumsq is already of the gradients times grad_scale (the shards'
// finishes scaled theirs), and the scale AdamW gets carries grad_scale.
static wgpt_optim_state norm_state_(float sumsq, int bad, float max_norm, float skip_norm, float grad_scale) {
    float norm = sqrtf(sumsq), scale = 1.0f;
    int nonfinite = bad || !isfinite(sumsq) || !isfinite(norm);
    int spike = !nonfinite && skip_norm > 0.0f && norm > skip_norm;
    if (!nonfinite && max_norm > 0.0f && norm > max_norm) scale = max_norm / norm;
    return (wgpt_optim_state){sumsq, norm, scale * grad_scale, nonfinite ? 1u : spike ? 2u : 0u};
}

int wgpt_gpt2_update_shard_end(wgpt_gpt2 *m, const wgpt_adamw_config *o, int t, double sumsq, int bad,
                               wgpt_step_result *out) {
    if (!m->training || !m->adamw)
        return wgpt_gpt2_fail_(m, "wgpt_gpt2_update_shard_end without wgpt_gpt2_update_shard_begin");
    wgpt_optim_state st = norm_state_((float)sumsq, bad, m->opt_cfg.max_grad_norm, o->skip_norm, m->grad_scale_c);
    GPU_OK(m, wgpt_buf_upload(m->g, m->opt_state.buf, 0, &st, sizeof st));
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    GPU_OK(m, wgpt_op_record_range(m->g, &m->opt, m->opt_update_from, m->opt.n));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}

int wgpt_gpt2_set_loss_scale(wgpt_gpt2 *m, float scale) { return wgpt_gpt2_restore_loss_scale(m, scale, 0); }

uint32_t wgpt_gpt2_loss_scale_clean_steps(const wgpt_gpt2 *m) { return (uint32_t)m->clean_steps; }

int wgpt_gpt2_restore_loss_scale(wgpt_gpt2 *m, float scale, uint32_t clean_steps) {
    int e;
    if (m->precision != WGPT_PRECISION_F16 || !m->training)
        return wgpt_gpt2_fail_(m, "only an f16 training model has a loss scale");
    if (!(scale >= 1.0f && scale <= 16777216.0f) || frexpf(scale, &e) != 0.5f)
        return wgpt_gpt2_fail_(m, "loss scale %g: must be a power of two in [1, 2^24]", scale);
    if (clean_steps >= WGPT_LOSS_SCALE_INTERVAL)
        return wgpt_gpt2_fail_(m, "loss scale: %u clean steps, but the scale doubles after %d", clean_steps,
                               WGPT_LOSS_SCALE_INTERVAL);
    m->clean_steps = (int)clean_steps;
    return use_loss_scale_(m, scale);
}

int wgpt_gpt2_inject_nan_grad(wgpt_gpt2 *m) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no gradients");
    const float nan = NAN;
    GPU_OK(m, wgpt_buf_upload(m->g, m->grads, 0, &nan, 4));
    return 0;
}

int wgpt_gpt2_train_step(wgpt_gpt2 *m, const int *tokens, const int *targets, const wgpt_adamw_config *o, int t,
                         wgpt_step_result *out) {
    if (ensure_optimizer_(m, o) < 0) return -1;
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    if (set_grad_scale_(m, &m->norm_handle, 1, o->skip_norm) < 0 ||
        wgpt_gpt2_record_step_(m, tokens, targets, 1) < 0)
        return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->opt));
    if (wgpt_gpt2_read_loss_(m, &out->loss) < 0) return -1;
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}
