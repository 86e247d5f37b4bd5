// gpt2_layout.c: the model's ground floor, which every other gpt2_*.c file
// calls and which calls none of them: where each parameter tensor, shard
// and activation lives on the GPU, the model's error, its memory counts.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "util/err.h"

int wgpt_gpt2_fail_(wgpt_gpt2 *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wgpt_verrf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return -1;
}

const char *wgpt_gpt2_error(const wgpt_gpt2 *m) { return m->err; }

void wgpt_gpt2_memory(const wgpt_gpt2 *m, uint64_t *param_bytes, uint64_t *activation_bytes) {
    *param_bytes = m->param_bytes;
    *activation_bytes = m->activation_bytes;
}

void wgpt_gpt2_memory_parts(const wgpt_gpt2 *m, uint64_t *param_grad_bytes, uint64_t *adam_bytes) {
    *param_grad_bytes = m->param_bytes - m->adam_bytes;
    *adam_bytes = m->adam_bytes;
}

void wgpt_gpt2_memory_split(const wgpt_gpt2 *m, wgpt_gpt2_memory_kinds *out) {
    *out = (wgpt_gpt2_memory_kinds){m->master_bytes, m->weights16_bytes, m->grad_bytes,
                                    m->adam_bytes,   m->activation_bytes, m->split_masters};
}

// Shard i of n of the padded array: 64-float (256-byte) boundaries, so that
// every shard can be bound on any device (WebGPU's largest offset alignment)
// and every rank computes the same boundaries whatever its GPU.
void wgpt_gpt2_shard_range_(uint64_t padded, uint32_t i, uint32_t n, uint64_t *off, uint64_t *count) {
    uint64_t per = (padded / 64 + n - 1) / n * 64;
    uint64_t o = (uint64_t)i * per < padded ? (uint64_t)i * per : padded;
    *off = o;
    *count = padded - o < per ? padded - o : per;
}

void wgpt_gpt2_shard_range(const wgpt_gpt2 *m, uint32_t i, uint64_t *off, uint64_t *count) {
    wgpt_gpt2_shard_range_(m->padded_params, i, m->nshards, off, count);
}

uint32_t wgpt_gpt2_num_shards(const wgpt_gpt2 *m) { return m->nshards; }
uint64_t wgpt_gpt2_padded_params(const wgpt_gpt2 *m) { return m->padded_params; }

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

// An activation of one slice is one buffer that every layer reuses
// (gpt2_acts.c): slice l of it is slice 0.
wgpt_view wgpt_gpt2_aview_(const wgpt_gpt2_act *a, uint32_t slice) {
    if (a->slices == 1) slice = 0;
    return (wgpt_view){a->buf, (uint64_t)slice * a->stride * 4, a->floats * 4};
}
