// gpt2_layout.c: where each parameter tensor and activation lives on the GPU,
// and the conversions between the reference (contiguous) layout and ours.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"

// Floats per aligned slice: bindings must start at a multiple of 256 bytes.
static uint64_t align64_(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

void wgpt_gpt2_param_sizes(const wgpt_gpt2_config *c, size_t s[WGPT_GPT2_NUM_TENSORS]) {
    size_t L = c->num_layers, C = c->channels, Vp = c->padded_vocab_size, T = c->max_seq_len;
    s[WGPT_WTE] = Vp * C;
    s[WGPT_WPE] = T * C;
    s[WGPT_LN1W] = L * C;
    s[WGPT_LN1B] = L * C;
    s[WGPT_QKVW] = L * 3 * C * C;
    s[WGPT_QKVB] = L * 3 * C;
    s[WGPT_ATTPROJW] = L * C * C;
    s[WGPT_ATTPROJB] = L * C;
    s[WGPT_LN2W] = L * C;
    s[WGPT_LN2B] = L * C;
    s[WGPT_FCW] = L * 4 * C * C;
    s[WGPT_FCB] = L * 4 * C;
    s[WGPT_FCPROJW] = L * C * 4 * C;
    s[WGPT_FCPROJB] = L * C;
    s[WGPT_LNFW] = C;
    s[WGPT_LNFB] = C;
}

size_t wgpt_gpt2_num_params(const wgpt_gpt2_config *c) {
    size_t s[WGPT_GPT2_NUM_TENSORS], n = 0;
    wgpt_gpt2_param_sizes(c, s);
    for (int i = 0; i < WGPT_GPT2_NUM_TENSORS; i++) n += s[i];
    return n;
}

static int layered_(int t) { return t >= WGPT_LN1W && t <= WGPT_FCPROJB; }

void wgpt_gpt2_layout_params_(wgpt_gpt2 *m) {
    size_t s[WGPT_GPT2_NUM_TENSORS];
    wgpt_gpt2_param_sizes(&m->c, s);
    uint64_t off = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        uint32_t n = layered_(t) ? m->c.num_layers : 1;
        m->pt[t].slices = n;
        m->pt[t].slice_floats = s[t] / n;
        m->pt[t].stride = align64_(s[t] / n);
        m->pt[t].base = off;
        off += m->pt[t].stride * n;
    }
    m->padded_params = off;
}

wgpt_view wgpt_gpt2_pview_(const wgpt_gpt2 *m, wgpt_buf *buf, int t, uint32_t layer) {
    const wgpt_gpt2_tensor *p = &m->pt[t];
    return (wgpt_view){buf, (p->base + (uint64_t)layer * p->stride) * 4, p->slice_floats * 4};
}

wgpt_view wgpt_gpt2_p16view_(const wgpt_gpt2 *m, int t, uint32_t l) {
    const wgpt_gpt2_tensor *p = &m->pt[t];
    return (wgpt_view){m->params16, (p->base + (uint64_t)l * p->stride) * 2, p->slice_floats * 2};
}

// Reference layout <-> padded layout (host copies).
static void convert_(const wgpt_gpt2 *m, float *padded, float *ref, int to_padded) {
    size_t src = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        const wgpt_gpt2_tensor *p = &m->pt[t];
        for (uint32_t l = 0; l < p->slices; l++) {
            float *dst = padded + p->base + (uint64_t)l * p->stride;
            if (to_padded) memcpy(dst, ref + src, p->slice_floats * 4);
            else memcpy(ref + src, dst, p->slice_floats * 4);
            src += p->slice_floats;
        }
    }
}

static int move_(wgpt_gpt2 *m, wgpt_buf *buf, float *ref, int upload) {
    float *tmp = calloc(m->padded_params, sizeof *tmp);
    if (!tmp) return wgpt_gpt2_fail_(m, "out of host memory (%llu floats)", (unsigned long long)m->padded_params);
    int rc = 0;
    if (upload) {
        convert_(m, tmp, ref, 1);
        rc = wgpt_buf_upload(m->g, buf, 0, tmp, m->padded_params * 4);
    } else {
        rc = wgpt_buf_download(m->g, buf, 0, tmp, m->padded_params * 4);
        if (rc == 0) convert_(m, tmp, ref, 0);
    }
    free(tmp);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}

int wgpt_gpt2_set_params(wgpt_gpt2 *m, const float *params) {
    if (!m->split_masters) {
        // tensor by tensor from the reference layout, without a padded copy on the
        // host (a model's load: 0.5 GB for GPT-2 124M); the padding between slices
        // is zero from the buffer's creation and nothing writes it
        size_t src = 0;
        for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
            const wgpt_gpt2_tensor *p = &m->pt[t];
            // slices already aligned lie back to back in both layouts: one upload
            uint32_t run = p->stride == p->slice_floats ? p->slices : 1;
            for (uint32_t l = 0; l < p->slices; l += run, src += (size_t)run * p->slice_floats)
                if (wgpt_buf_upload(m->g, m->params, (p->base + (uint64_t)l * p->stride) * 4, params + src,
                                    (uint64_t)run * p->slice_floats * 4) < 0)
                    return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
        }
        return wgpt_gpt2_refresh_f16_(m);  // the f16 copies follow the fp32 masters
    }
    float *tmp = calloc(m->padded_params, sizeof *tmp);
    if (!tmp) return wgpt_gpt2_fail_(m, "out of host memory (%llu floats)", (unsigned long long)m->padded_params);
    convert_(m, tmp, (float *)params, 1);
    int rc = wgpt_gpt2_upload_padded_(m, tmp);
    free(tmp);
    return rc;
}

int wgpt_gpt2_get_params(wgpt_gpt2 *m, float *params) {
    if (m->split_masters)
        return wgpt_gpt2_fail_(m, "this model holds the fp32 matmul weights of shard %u of %u only (ZeRO-1 in f16): "
                               "gather them with wgpt_gpt2_get_param_shard", m->shard, m->nshards);
    return move_(m, m->params, params, 0);
}
int wgpt_gpt2_get_grads(wgpt_gpt2 *m, float *grads) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no gradients");
    return move_(m, m->grads, grads, 0);
}

int wgpt_gpt2_set_grads(wgpt_gpt2 *m, const float *grads) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no gradients");
    return move_(m, m->grads, (float *)grads, 1);
}

int wgpt_gpt2_get_adam(wgpt_gpt2 *m, float *adam_m, float *adam_v) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no optimizer state");
    if (m->nshards > 1)
        return wgpt_gpt2_fail_(m, "this model holds shard %u of %u of the AdamW moments: gather them with "
                               "wgpt_gpt2_get_adam_shard", m->shard, m->nshards);
    return move_(m, m->adam_m, adam_m, 0) < 0 ? -1 : move_(m, m->adam_v, adam_v, 0);
}

// The full moments (a checkpoint's) padded on the host; only the shard is uploaded.
int wgpt_gpt2_set_adam(wgpt_gpt2 *m, const float *adam_m, const float *adam_v) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no optimizer state");
    float *tmp = calloc(m->padded_params, sizeof *tmp);
    if (!tmp) return wgpt_gpt2_fail_(m, "out of host memory (%llu floats)", (unsigned long long)m->padded_params);
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        convert_(m, tmp, (float *)(i ? adam_v : adam_m), 1);
        rc = wgpt_buf_upload(m->g, i ? m->adam_v : m->adam_m, 0, tmp + m->shard_off, m->shard_n * 4);
    }
    free(tmp);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}

int wgpt_gpt2_get_adam_shard(wgpt_gpt2 *m, float *adam_m, float *adam_v) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no optimizer state");
    if (wgpt_buf_download(m->g, m->adam_m, 0, adam_m, m->shard_n * 4) < 0 ||
        wgpt_buf_download(m->g, m->adam_v, 0, adam_v, m->shard_n * 4) < 0)
        return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}

void wgpt_gpt2_unpad(const wgpt_gpt2 *m, const float *padded, float *ref) { convert_(m, (float *)padded, ref, 0); }

// Activation: one buffer, `slices` aligned slices of `floats` each.
int wgpt_gpt2_act_alloc_(wgpt_gpt2 *m, wgpt_gpt2_act *a, const char *name, uint32_t slices, uint64_t floats) {
    a->slices = slices;
    a->floats = floats;
    a->stride = align64_(floats);
    a->buf = wgpt_buf_create(m->g, a->stride * slices * 4, name);
    if (!a->buf) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    m->activation_bytes += wgpt_buf_size(a->buf);
    return 0;
}

// An activation of one slice is one buffer that every layer reuses (gpt2.c
// alloc_acts_): slice l of it is slice 0.
wgpt_view wgpt_gpt2_aview_(const wgpt_gpt2_act *a, uint32_t slice) {
    if (a->slices == 1) slice = 0;
    return (wgpt_view){a->buf, (uint64_t)slice * a->stride * 4, a->floats * 4};
}
