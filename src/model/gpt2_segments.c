// gpt2_segments.c: the backward in segments (gpt2.h: a data-parallel run
// sends each segment's gradients while the GPU computes the rest), and which
// of a segment's gradients lie in which ZeRO-1 shard.
#include <stdio.h>
#include <string.h>

#include "model/gpt2_views.h"

// The gradient ranges (bytes of the gradient buffer) that segment i
// finishes, in tensor order; returns how many (at most 12).
static int segment_ranges_(const wgpt_gpt2 *m, uint32_t i, uint64_t off[12], uint64_t bytes[12]) {
    uint32_t L = m->c.num_layers, layer = 0;
    int first = WGPT_LNFW, last = WGPT_LNFB;  // segment 0
    if (i > L) first = WGPT_WTE, last = WGPT_WPE;  // the encoder: after the logits' share of wte
    else if (i > 0) first = WGPT_LN1W, last = WGPT_FCPROJB, layer = L - i;
    int n = 0;
    for (int t = first; t <= last; t++, n++) {
        wgpt_view v = wgpt_gpt2_pview_(m, m->grads, t, layer);
        off[n] = v.offset, bytes[n] = v.size;
    }
    return n;
}

// Adds to counts[j] how many of the floats [p, p + k) of the padded array lie in shard j.
static void shard_overlap_(const wgpt_gpt2 *m, uint64_t p, uint64_t k, uint64_t *counts) {
    for (uint32_t j = 0; j < m->nshards; j++) {
        uint64_t o, n;
        wgpt_gpt2_shard_range_(m->padded_params, j, m->nshards, &o, &n);
        uint64_t b = p > o ? p : o, e = p + k < o + n ? p + k : o + n;
        if (b < e) counts[j] += e - b;
    }
}

void wgpt_gpt2_shard_counts(const wgpt_gpt2 *m, int segment, uint64_t *counts) {
    memset(counts, 0, m->nshards * sizeof *counts);
    if (segment < 0) {  // the reference layout: every slice, in order
        for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++)
            for (uint32_t l = 0; l < m->pt[t].slices; l++)
                shard_overlap_(m, m->pt[t].base + l * m->pt[t].stride, m->pt[t].slice_floats, counts);
        return;
    }
    if ((uint32_t)segment >= wgpt_gpt2_grad_segments(m)) return;
    uint64_t off[12], bytes[12];
    for (int k = 0, n = segment_ranges_(m, (uint32_t)segment, off, bytes); k < n; k++)
        shard_overlap_(m, off[k] / 4, bytes[k] / 4, counts);
}

uint64_t wgpt_gpt2_segment_floats(const wgpt_gpt2 *m, uint32_t i) {
    uint64_t off[12], bytes[12], total = 0;
    if (i >= wgpt_gpt2_grad_segments(m)) return 0;
    for (int k = 0, n = segment_ranges_(m, i, off, bytes); k < n; k++) total += bytes[k] / 4;
    return total;
}

static int check_segment_(wgpt_gpt2 *m, uint32_t i, const char *what) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (i >= wgpt_gpt2_grad_segments(m))
        return wgpt_gpt2_fail_(m, "%s: backward segment %u of %u", what, i, wgpt_gpt2_grad_segments(m));
    return 0;
}

int wgpt_gpt2_accumulate_begin(wgpt_gpt2 *m, const int *tokens, const int *targets, int first) {
    if (wgpt_gpt2_record_forward_(m, tokens, targets, first) < 0) return -1;
    GPU_OK(m, wgpt_gpu_submit(m->g));  // the GPU starts on the forward
    return 0;
}

int wgpt_gpt2_backward_segment(wgpt_gpt2 *m, uint32_t i) {
    if (check_segment_(m, i, "recording") < 0) return -1;
    if (i != m->seg_next)
        return wgpt_gpt2_fail_(m, "backward segment %u recorded out of order (segment %u is next, after "
                               "wgpt_gpt2_accumulate_begin)", i, m->seg_next);
    uint64_t off[12], bytes[12];
    int n = segment_ranges_(m, i, off, bytes);
    if (!m->seg_read[i]) {
        char label[64];
        snprintf(label, sizeof label, "gradients of backward segment %u", i);
        m->seg_read[i] = wgpt_readback_create(m->g, wgpt_gpt2_segment_floats(m, i) * 4, label);
        if (!m->seg_read[i]) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    }
    GPU_OK(m, wgpt_op_record_range(m->g, &m->bwd, i ? m->bwd_cut[i - 1] : 0, m->bwd_cut[i]));
    GPU_OK(m, wgpt_readback_start(m->g, m->seg_read[i], m->grads, off, bytes, n));  // submits the segment
    m->seg_next = i + 1;
    return 0;
}

// A segment whose readback was started (recorded, not yet taken).
static int check_started_(wgpt_gpt2 *m, uint32_t i, const char *what) {
    if (check_segment_(m, i, what) < 0) return -1;
    if (i >= m->seg_next || !m->seg_read[i])
        return wgpt_gpt2_fail_(m, "%s: backward segment %u was not recorded", what, i);
    return 0;
}

int wgpt_gpt2_segment_ready(wgpt_gpt2 *m, uint32_t i) {
    if (check_started_(m, i, "reading gradients") < 0) return -1;
    int rc = wgpt_readback_ready(m->g, m->seg_read[i]);
    return rc < 0 ? wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g)) : rc;
}

int wgpt_gpt2_segment_take(wgpt_gpt2 *m, uint32_t i, float *grads) {
    if (check_started_(m, i, "reading gradients") < 0) return -1;
    GPU_OK(m, wgpt_readback_finish(m->g, m->seg_read[i], grads));
    return 0;
}

int wgpt_gpt2_segment_put(wgpt_gpt2 *m, uint32_t i, const float *grads) {
    if (check_segment_(m, i, "writing gradients") < 0) return -1;
    uint64_t off[12], bytes[12];
    for (int k = 0, n = segment_ranges_(m, i, off, bytes); k < n; grads += bytes[k] / 4, k++)
        GPU_OK(m, wgpt_buf_upload(m->g, m->grads, off[k], grads, bytes[k]));
    return 0;
}

int wgpt_gpt2_accumulate_end(wgpt_gpt2 *m, float *loss) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (m->seg_next != wgpt_gpt2_grad_segments(m))
        return wgpt_gpt2_fail_(m, "the backward ended after %u of its %u segments", m->seg_next,
                               wgpt_gpt2_grad_segments(m));
    return wgpt_gpt2_read_loss_(m, loss);
}

