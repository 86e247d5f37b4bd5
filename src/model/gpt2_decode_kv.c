// gpt2_decode_kv.c: the decoder's KV cache (see gpt2_decode.h): per layer a
// key and a value cache of (slots, context, C), f16 where the model runs f16,
// and two prepared passes over rows of (token, slot, position): the step (one
// row a slot, logits of every row) and the prefill (a chunk of one slot's
// prompt, logits of its last row). Each layer of a pass: LayerNorm, the qkv
// matmul, the rows' keys and values into the caches, attention of each row
// against its slot's cache (kernels/09_decode_attention.wgsl), the
// projection, the residual add with the next LayerNorm, the MLP (GELU in its
// first matmul); matmuls shaped for a few rows (decode_matvec,
// kernels/09_decode.wgsl) on the model's own weights.
#include <stdlib.h>
#include <string.h>

#include "model/decode_kernels.h"
#include "model/gpt2_decode_internal.h"
#include "util/err.h"

#define PREFILL_ROWS 128u  // rows of one prefill pass
// A pass is handed to the GPU in pieces: the first SUBMIT_FIRST dispatches as
// soon as they are recorded (the GPU starts while the rest is recorded), then
// every SUBMIT_NEXT; at batch 1 recording a dispatch costs the host about as
// long as the GPU takes to run one.
#ifndef WGPT_DECODE_SUBMIT_FIRST
#define WGPT_DECODE_SUBMIT_FIRST 8
#endif
#define SUBMIT_FIRST WGPT_DECODE_SUBMIT_FIRST
#define SUBMIT_NEXT 24

static wgpt_view whole_(wgpt_buf *b, uint64_t bytes) { return (wgpt_view){b, 0, bytes}; }

// Slice `layer` of parameter tensor t: the f16 copy (matmul weights where
// d->f16) or the fp32 masters.
static wgpt_view param_(const wgpt_decoder *d, int t, uint32_t layer, int f16) {
    const wgpt_gpt2 *m = d->m;
    if (!f16) return wgpt_gpt2_mview_(m, t, layer);
    const wgpt_gpt2_tensor *p = &m->pt[t];
    return (wgpt_view){m->params16, (p->base + (uint64_t)layer * p->stride) * 2, p->slice_floats * 2};
}

static wgpt_buf *alloc_(wgpt_decoder *d, uint64_t bytes, const char *label) {
    wgpt_buf *b = wgpt_buf_create(d->m->g, bytes, label);
    if (b) d->bytes += bytes;
    return b;
}

int wgpt_decoder_kv_init_(wgpt_decoder *d, char *err, size_t errlen) {
    wgpt_gpt2 *m = d->m;
    const wgpt_gpu_info *info = wgpt_gpu_get_info(m->g);
    uint32_t C = m->c.channels, L = m->c.num_layers, Vp = m->c.padded_vocab_size;
    if (C % 4) return wgpt_errf(err, errlen, "the KV-cache decoder needs C a multiple of 4 (C = %u)", C);
    if (m->split_masters)  // its embedding reads wte's fp32 values
        return wgpt_errf(err, errlen, "the KV-cache decoder needs the whole fp32 weights; this model keeps only its "
                                      "shard of them (ZeRO-1 in f16)");
    d->f16 = m->precision == WGPT_PRECISION_F16 && m->params16;
    d->step.rows = d->slots;
    d->prefill.rows = d->ctx < PREFILL_ROWS ? d->ctx : PREFILL_ROWS;
    d->prefill.last_only = 1;
    d->rows_max = d->step.rows > d->prefill.rows ? d->step.rows : d->prefill.rows;
    uint64_t R = d->rows_max, cache = (uint64_t)d->slots * d->ctx * C * (d->f16 ? 2 : 4);
    uint64_t acts = (R * 13 * C + C + (uint64_t)d->step.rows * Vp) * 4;
    uint64_t want = 2 * L * cache + acts;
    if (cache > info->max_storage_binding || cache > info->max_buffer)
        return wgpt_errf(err, errlen,
                         "a KV cache of %u slots x %u positions x %u channels is %.1f MiB a layer: the device binds "
                         "at most %.1f MiB (fewer slots)",
                         d->slots, d->ctx, C, cache / 1048576.0, info->max_storage_binding / 1048576.0);
    d->kc = calloc(L, sizeof *d->kc);
    d->vc = calloc(L, sizeof *d->vc);
    d->meta_host = calloc(WGPT_DECODE_META_U32 + 4 * R, 4);
    d->logits_host = malloc((uint64_t)d->step.rows * Vp * sizeof *d->logits_host);
    if (!d->kc || !d->vc || !d->meta_host || !d->logits_host)
        return wgpt_errf(err, errlen, "out of host memory for a decoder of %u slots", d->slots);
    int ok = 1;
    for (uint32_t l = 0; l < L && ok; l++) {
        d->kc[l] = alloc_(d, cache, "kv_k");
        d->vc[l] = alloc_(d, cache, "kv_v");
        ok = d->kc[l] && d->vc[l];
    }
    struct { wgpt_buf **b; uint64_t floats; const char *name; } acts_[] = {
        {&d->x, R * C, "dec_x"}, {&d->res2, R * C, "dec_res2"}, {&d->ln, R * C, "dec_ln"},
        {&d->qkv, R * 3 * C, "dec_qkv"},
        {&d->atty, R * C, "dec_atty"}, {&d->attproj, R * C, "dec_attproj"}, {&d->fch, R * 4 * C, "dec_fch"},
        {&d->fcproj, R * C, "dec_fcproj"}, {&d->last, C, "dec_last"},
        {&d->logits, (uint64_t)d->step.rows * Vp, "dec_logits"},
        {&d->meta, WGPT_DECODE_META_U32 + 4 * R, "dec_meta"},
    };
    for (size_t i = 0; i < sizeof acts_ / sizeof acts_[0] && ok; i++) {
        *acts_[i].b = alloc_(d, acts_[i].floats * 4, acts_[i].name);
        ok = *acts_[i].b != NULL;
    }
    if (!ok)
        return wgpt_errf(err, errlen,
                         "the KV-cache decoder wanted %.1f MiB of device memory (%u slots x %u positions, "
                         "caches %.1f MiB): %s",
                         want / 1048576.0, d->slots, d->ctx, 2.0 * L * cache / 1048576.0, wgpt_gpu_error(m->g));
    return 0;
}

void wgpt_decoder_kv_free_(wgpt_decoder *d) {
    wgpt_op_free(&d->step.op);
    wgpt_op_free(&d->prefill.op);
    for (uint32_t l = 0; d->kc && l < d->m->c.num_layers; l++) wgpt_buf_free(d->kc[l]);
    for (uint32_t l = 0; d->vc && l < d->m->c.num_layers; l++) wgpt_buf_free(d->vc[l]);
    wgpt_buf *acts[] = {d->x, d->res2, d->ln, d->qkv, d->atty, d->attproj, d->fch, d->fcproj, d->last, d->logits,
                        d->meta};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) wgpt_buf_free(acts[i]);
    free(d->kc), free(d->vc), free(d->meta_host), free(d->logits_host);
}

// One transformer block over R rows: x (the residual stream) and ln (its
// LayerNorm by this block's ln_1) -> x and ln by the next LayerNorm (the
// next block's ln_1, or ln_f after the last block). Seven dispatches where
// the attention stores the rows' keys and values itself (fused_kv: a step),
// else eight.
static int block_(wgpt_decoder *d, wgpt_op *op, uint32_t R, uint32_t l, int fused_kv) {
    wgpt_gpu *g = d->m->g;
    uint32_t C = d->m->c.channels, NH = d->m->c.num_heads, T = d->ctx, L = d->m->c.num_layers;
    int h = d->f16;
    uint64_t rc = (uint64_t)R * C * 4;
    wgpt_view x = whole_(d->x, rc), ln = whole_(d->ln, rc), qkv = whole_(d->qkv, 3 * rc), atty = whole_(d->atty, rc),
              attproj = whole_(d->attproj, rc), res2 = whole_(d->res2, rc), fch = whole_(d->fch, 4 * rc),
              fcproj = whole_(d->fcproj, rc), meta = whole_(d->meta, 0), kc = whole_(d->kc[l], 0),
              vc = whole_(d->vc[l], 0);
    int nw = l + 1 < L ? WGPT_LN1W : WGPT_LNFW, nb = l + 1 < L ? WGPT_LN1B : WGPT_LNFB;
    uint32_t nl = l + 1 < L ? l + 1 : 0;
    if (wgpt_decode_matvec(g, op, qkv, ln, param_(d, WGPT_QKVW, l, h), param_(d, WGPT_QKVB, l, 0), meta, R, C, 3 * C,
                           1, h, 0) < 0 ||
        (!fused_kv && wgpt_decode_kv_write(g, op, kc, vc, qkv, meta, R, C, T, h) < 0) ||
        wgpt_decode_attention(g, op, atty, qkv, kc, vc, meta, R, C, NH, T, h, fused_kv) < 0 ||
        wgpt_decode_matvec(g, op, attproj, atty, param_(d, WGPT_ATTPROJW, l, h), param_(d, WGPT_ATTPROJB, l, 0), meta,
                           R, C, C, 1, h, 0) < 0 ||
        wgpt_decode_residual_layernorm(g, op, res2, ln, x, attproj, param_(d, WGPT_LN2W, l, 0),
                                       param_(d, WGPT_LN2B, l, 0), meta, R, C) < 0 ||
        wgpt_decode_matvec(g, op, fch, ln, param_(d, WGPT_FCW, l, h), param_(d, WGPT_FCB, l, 0), meta, R, C, 4 * C, 1,
                           h, 1) < 0 ||
        wgpt_decode_matvec(g, op, fcproj, fch, param_(d, WGPT_FCPROJW, l, h), param_(d, WGPT_FCPROJB, l, 0), meta, R,
                           4 * C, C, 1, h, 0) < 0 ||
        wgpt_decode_residual_layernorm(g, op, x, ln, res2, fcproj, param_(d, nw, nl, 0), param_(d, nb, nl, 0), meta, R,
                                       C) < 0)
        return -1;
    return 0;
}

static int build_(wgpt_decoder *d, wgpt_decode_pass *pass) {
    wgpt_gpt2 *m = d->m;
    wgpt_gpu *g = m->g;
    wgpt_op *op = &pass->op;
    uint32_t R = pass->rows, C = m->c.channels, Vp = m->c.padded_vocab_size;
    uint64_t rc = (uint64_t)R * C * 4;
    wgpt_view meta = whole_(d->meta, 0), none = {NULL, 0, 0}, x = whole_(d->x, rc), ln = whole_(d->ln, rc);
    wgpt_op_init(op);
    if (wgpt_decode_embed(g, op, x, param_(d, WGPT_WTE, 0, 0), param_(d, WGPT_WPE, 0, 0), meta, R, C, d->ctx, d->V) < 0 ||
        wgpt_decode_residual_layernorm(g, op, none, ln, x, none, param_(d, WGPT_LN1W, 0, 0), param_(d, WGPT_LN1B, 0, 0),
                                       meta, R, C) < 0)
        return -1;
    // a step's rows are in distinct slots (wgpt_decoder_step checks): its
    // attention may store each row's key and value itself
    int fused_kv = !pass->last_only && (!d->f16 || (m->c.channels / m->c.num_heads) % 2 == 0);
    for (uint32_t l = 0; l < m->c.num_layers; l++)
        if (block_(d, op, R, l, fused_kv) < 0) return -1;
    // ln holds ln_f's output: the logits of every row, or of the last live one
    uint32_t rows = pass->last_only ? 1 : R;
    if (pass->last_only) {
        if (wgpt_decode_take_row(g, op, whole_(d->last, C * 4ull), ln, meta, R, C) < 0) return -1;
        ln = whole_(d->last, C * 4ull);
    }
    if (wgpt_decode_matvec(g, op, whole_(d->logits, (uint64_t)rows * Vp * 4), ln, param_(d, WGPT_WTE, 0, d->f16), none,
                           meta, rows, C, Vp, !pass->last_only, d->f16, 0) < 0)
        return -1;
    pass->built = 1;
    return 0;
}

int wgpt_decoder_kv_run_(wgpt_decoder *d, wgpt_decode_pass *pass, uint32_t n, float *logits, char *err,
                         size_t errlen) {
    wgpt_gpu *g = d->m->g;
    uint32_t V = d->V, Vp = d->m->c.padded_vocab_size;
    if (!pass->built && build_(d, pass) < 0) {
        wgpt_op_free(&pass->op);
        return wgpt_errf(err, errlen, "preparing the decoder: %s", wgpt_gpu_error(g));
    }
    d->meta_host[0] = n;
    if (wgpt_buf_upload(g, d->meta, 0, d->meta_host, (WGPT_DECODE_META_U32 + 4ull * n) * 4) < 0)
        return wgpt_errf(err, errlen, "decoding: %s", wgpt_gpu_error(g));
    for (int from = 0, to; from < pass->op.n; from = to) {
        to = from ? from + SUBMIT_NEXT : SUBMIT_FIRST;
        if (to > pass->op.n) to = pass->op.n;
        if (wgpt_op_record_range(g, &pass->op, from, to) < 0 || (to < pass->op.n && wgpt_gpu_submit(g) < 0))
            return wgpt_errf(err, errlen, "decoding: %s", wgpt_gpu_error(g));
    }
    if (!logits) return wgpt_gpu_submit(g) < 0 ? wgpt_errf(err, errlen, "decoding: %s", wgpt_gpu_error(g)) : 0;
    uint32_t rows = pass->last_only ? 1 : n;
    if (wgpt_buf_download(g, d->logits, 0, d->logits_host, (uint64_t)rows * Vp * 4) < 0)
        return wgpt_errf(err, errlen, "decoding: %s", wgpt_gpu_error(g));
    for (uint32_t r = 0; r < rows; r++) memcpy(logits + (size_t)r * V, d->logits_host + (size_t)r * Vp, V * 4);
    return 0;
}
