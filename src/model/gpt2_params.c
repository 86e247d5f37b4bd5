// gpt2_params.c: the parameters, gradients and AdamW moments to and from
// the host, between the reference (contiguous) layout and the padded one
// (gpt2.h; where the masters live: gpt2_masters.c).
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"

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
