// gpt2_masters.c: where the fp32 master weights live, and ZeRO-1's exchange
// of the updated shards (gpt2.h).
//
// In f16 with several optimizer shards the matmul weights (qkvw, attprojw,
// fcw, fcprojw) are read in fp32 by nothing but AdamW: the matmuls read
// params16. So `params` holds the padded array less those weights' floats
// outside this shard ([keep_lo, keep_hi) of the padded array), in padded
// order: every other tensor whole (wte and wpe for the embedding, the norms
// for the layernorms, the biases for the matmuls' f32 bias add; wte's f16
// copy is the logits matmul's), then this shard's piece of each matmul
// weight. Every removed run starts and ends on a 64-float boundary (slices
// and shards do), so each tensor and the shard stay 256-byte aligned. The
// shard [keep_lo, keep_hi) is contiguous there too: AdamW binds it as one
// view and writes the f16 copy in the same dispatch (adamw_update_f16).
// Elsewhere the masters are the whole padded array.
#include <stdlib.h>
#include <string.h>

#include "model/gpt2_internal.h"
#include "model/precision.h"

int wgpt_gpt2_sharded_master_(int t) {
    return t == WGPT_QKVW || t == WGPT_ATTPROJW || t == WGPT_FCW || t == WGPT_FCPROJW;
}

// Floats of [b, e) inside [lo, hi).
static uint64_t overlap_(uint64_t b, uint64_t e, uint64_t lo, uint64_t hi) {
    uint64_t x = b > lo ? b : lo, y = e < hi ? e : hi;
    return x < y ? y - x : 0;
}

uint64_t wgpt_gpt2_master_at_(const wgpt_gpt2 *m, uint64_t p) {
    if (!m->split_masters) return p;
    uint64_t removed = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        if (!wgpt_gpt2_sharded_master_(t)) continue;
        uint64_t b = m->pt[t].base, e = b + m->pt[t].stride * m->pt[t].slices;
        if (p < e) e = p;
        if (e > b) removed += (e - b) - overlap_(b, e, m->keep_lo, m->keep_hi);
    }
    return p - removed;
}

void wgpt_gpt2_layout_masters_(wgpt_gpt2 *m, int split) {
    m->split_masters = split;
    m->keep_lo = split ? m->shard_off : 0;
    m->keep_hi = split ? m->shard_off + m->shard_n : m->padded_params;
    m->master_floats = wgpt_gpt2_master_at_(m, m->padded_params);
}

wgpt_view wgpt_gpt2_mview_(const wgpt_gpt2 *m, int t, uint32_t layer) {
    const wgpt_gpt2_tensor *p = &m->pt[t];
    if (m->split_masters && wgpt_gpt2_sharded_master_(t)) return (wgpt_view){NULL, 0, 0};  // not here: bind fails
    return (wgpt_view){m->params, wgpt_gpt2_master_at_(m, p->base + (uint64_t)layer * p->stride) * 4,
                       p->slice_floats * 4};
}

// The runs of whole tensors of a split model: [b[k], e[k]) of the padded
// array (adjacent tensors merged). Returns how many.
static int whole_runs_(const wgpt_gpt2 *m, uint64_t b[WGPT_GPT2_NUM_TENSORS], uint64_t e[WGPT_GPT2_NUM_TENSORS]) {
    int n = 0;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        if (wgpt_gpt2_sharded_master_(t)) continue;
        uint64_t tb = m->pt[t].base, te = tb + m->pt[t].stride * m->pt[t].slices;
        if (n && e[n - 1] == tb) e[n - 1] = te;
        else b[n] = tb, e[n] = te, n++;
    }
    return n;
}

#define GPU_OK_(m, call)                                                         \
    do {                                                                         \
        if ((call) < 0) return wgpt_gpt2_fail_((m), "%s", wgpt_gpu_error((m)->g)); \
    } while (0)

// params16 = f16(padded) through a staging buffer of at most 4 MiB, chunk by
// chunk (the cast kernel's rounding; no second whole fp32 array on the GPU).
static int cast_from_host_(wgpt_gpt2 *m, const float *padded) {
    uint64_t P = m->padded_params, lim = wgpt_gpu_get_info(m->g)->max_storage_binding / 4 / 64 * 64;
    uint64_t chunk = P < (1u << 20) ? P : (1u << 20);
    if (lim && chunk > lim) chunk = lim;
    wgpt_buf *stage = wgpt_buf_create(m->g, chunk * 4, "params f16 staging");
    if (!stage) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    wgpt_op op;
    wgpt_op_init(&op);
    int rc = 0;
    for (uint64_t o = 0; rc == 0 && o < P; o += chunk) {
        uint64_t k = P - o < chunk ? P - o : chunk;  // P and chunk are multiples of 64: k is even
        wgpt_view d = {m->params16, o * 2, k * 2}, s = {stage, 0, k * 4};
        // the upload lands after the previous chunk's cast (gpu.h: in order with recorded work)
        if (wgpt_buf_upload(m->g, stage, 0, padded + o, k * 4) < 0 || wgpt_cast_f16(m->g, &op, d, s, k) < 0 ||
            wgpt_op_record_range(m->g, &op, op.n - 1, op.n) < 0)
            rc = -1;
    }
    if (rc == 0 && wgpt_gpu_finish(m->g) < 0) rc = -1;
    if (rc < 0) wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    wgpt_op_free(&op);
    wgpt_buf_free(stage);
    return rc;
}

int wgpt_gpt2_upload_padded_(wgpt_gpt2 *m, const float *padded) {
    if (!m->split_masters) {
        GPU_OK_(m, wgpt_buf_upload(m->g, m->params, 0, padded, m->padded_params * 4));
        return wgpt_gpt2_refresh_f16_(m);  // the f16 copies follow the fp32 masters
    }
    uint64_t b[WGPT_GPT2_NUM_TENSORS], e[WGPT_GPT2_NUM_TENSORS];
    for (int k = 0, n = whole_runs_(m, b, e); k < n; k++)
        GPU_OK_(m, wgpt_buf_upload(m->g, m->params, wgpt_gpt2_master_at_(m, b[k]) * 4, padded + b[k], (e[k] - b[k]) * 4));
    // the shard's piece: the matmul weights' part in it, and again the whole tensors' (the same values)
    GPU_OK_(m, wgpt_buf_upload(m->g, m->params, wgpt_gpt2_master_at_(m, m->keep_lo) * 4, padded + m->keep_lo,
                               (m->keep_hi - m->keep_lo) * 4));
    return cast_from_host_(m, padded);
}

int wgpt_gpt2_get_param_shard(wgpt_gpt2 *m, float *params) {
    GPU_OK_(m, wgpt_buf_download(m->g, m->params, wgpt_gpt2_master_at_(m, m->shard_off) * 4, params, m->shard_n * 4));
    return 0;
}

int wgpt_gpt2_set_params_padded(wgpt_gpt2 *m, const float *padded) { return wgpt_gpt2_upload_padded_(m, padded); }

// The floats of whole tensors in shard i's piece of the padded array.
static uint64_t whole_in_shard_(const wgpt_gpt2 *m, uint64_t off, uint64_t n) {
    uint64_t b[WGPT_GPT2_NUM_TENSORS], e[WGPT_GPT2_NUM_TENSORS], total = 0;
    for (int k = 0, r = whole_runs_(m, b, e); k < r; k++) total += overlap_(b[k], e[k], off, off + n);
    return total;
}

// The shard update of a split model, shard i = [off, off + n) of the padded
// array: its f16 copy (n / 2 words of two halves), then the fp32 values of the
// whole tensors in it, in padded order. Elsewhere its fp32 values.
uint64_t wgpt_gpt2_shard_update_words(const wgpt_gpt2 *m, uint32_t i) {
    uint64_t off, n;
    wgpt_gpt2_shard_range(m, i, &off, &n);
    return m->split_masters ? n / 2 + whole_in_shard_(m, off, n) : n;
}

int wgpt_gpt2_get_shard_update(wgpt_gpt2 *m, uint32_t *words) {
    if (!m->split_masters) return wgpt_gpt2_get_param_shard(m, (float *)words);
    uint64_t lo = m->shard_off, hi = lo + m->shard_n, b[WGPT_GPT2_NUM_TENSORS], e[WGPT_GPT2_NUM_TENSORS];
    GPU_OK_(m, wgpt_buf_download(m->g, m->params16, lo * 2, words, m->shard_n * 2));
    words += m->shard_n / 2;
    for (int k = 0, r = whole_runs_(m, b, e); k < r; k++) {
        uint64_t x = b[k] > lo ? b[k] : lo, y = e[k] < hi ? e[k] : hi;
        if (x >= y) continue;
        GPU_OK_(m, wgpt_buf_download(m->g, m->params, wgpt_gpt2_master_at_(m, x) * 4, words, (y - x) * 4));
        words += y - x;
    }
    return 0;
}

int wgpt_gpt2_set_shard_updates(wgpt_gpt2 *m, const uint32_t *words) {
    if (!m->split_masters) return wgpt_gpt2_upload_padded_(m, (const float *)words);  // the shards in order: the array
    uint64_t b[WGPT_GPT2_NUM_TENSORS], e[WGPT_GPT2_NUM_TENSORS];
    int runs = whole_runs_(m, b, e);
    for (uint32_t i = 0; i < m->nshards; i++) {
        uint64_t lo, n;
        wgpt_gpt2_shard_range(m, i, &lo, &n);
        int theirs = i != m->shard;  // our own update is in place already (AdamW wrote both copies)
        if (theirs) GPU_OK_(m, wgpt_buf_upload(m->g, m->params16, lo * 2, words, n * 2));
        words += n / 2;
        for (int k = 0; k < runs; k++) {
            uint64_t x = b[k] > lo ? b[k] : lo, y = e[k] < lo + n ? e[k] : lo + n;
            if (x >= y) continue;
            if (theirs) GPU_OK_(m, wgpt_buf_upload(m->g, m->params, wgpt_gpt2_master_at_(m, x) * 4, words, (y - x) * 4));
            words += y - x;
        }
    }
    return 0;
}

// params16 = f16(params): after every change of the parameters (f16, a
// model that keeps its masters whole and owns them).
int wgpt_gpt2_build_cast_(wgpt_gpt2 *m) {
    wgpt_view d = {m->params16, 0, 0}, src = {m->params, 0, 0};
    GPU_OK_(m, wgpt_cast_f16(m->g, &m->cast, d, src, m->padded_params));
    return 0;
}

// After an upload of the parameters (AdamW writes the f16 copy of what it
// updates itself: adamw_update_f16).
int wgpt_gpt2_refresh_f16_(wgpt_gpt2 *m) {
    // split masters: uploads cast their own
    if (m->precision != WGPT_PRECISION_F16 || m->shared || m->split_masters) return 0;
    GPU_OK_(m, wgpt_op_record(m->g, &m->cast));
    return 0;
}
