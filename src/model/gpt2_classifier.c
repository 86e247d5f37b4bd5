// gpt2_classifier.c: a training model's classifier and loss in chunks of
// rows (gpt2_internal.h cls_chunked), as llm.c's fused classifier: the
// logits of one chunk, its loss and gradient, the gradient's matmuls, then
// the next chunk; the (B, T, Vp) logits never exist. And the loss of whole
// logits, for the other models.
#include "model/cross_entropy.h"
#include "model/gpt2_views.h"
#include "model/linear.h"
#include "model/linear_f16.h"

// Rows of the classifier's chunk (training models, gpt2_internal.h): all
// of them where their logits fit one binding, else as few chunks as fit,
// of equal size (a multiple of 64 rows, so that chunks start on 256-byte
// offsets; the last may be shorter). A function of the shape and the
// binding limit only, so that every run of a shape on a device splits the
// classifier's sums alike (its weight gradient sums the chunks in order).
// Chunks only where they must: at GPT-2 124M, batch 8, chunks of 1024 rows
// (8 a step) cost the f16 step 5% against one, in the weight pass's
// read-modify-write of d wte per chunk and the shorter passes.
// 0: not even 64 rows of logits fit one binding.
uint32_t wgpt_gpt2_cls_rows_(const wgpt_gpt2 *m) {
    uint64_t BT = (uint64_t)m->B * m->T, fit = wgpt_gpu_get_info(m->g)->max_storage_binding / 4 / m->c.padded_vocab_size;
    uint64_t most = fit / 64 * 64;
    if (fit >= BT) return (uint32_t)BT;
    if (!most) return 0;
    uint64_t n = (BT + most - 1) / most;  // chunks
    return (uint32_t)(((BT + n - 1) / n + 63) / 64 * 64);
}

// Bytes [off, off + size) of a view.
static wgpt_view sub_(wgpt_view v, uint64_t off, uint64_t size) { return (wgpt_view){v.buf, v.offset + off, size}; }

// One chunk of the classifier: rows [r0, r0 + n), logits into lg.
typedef struct chunk_ {
    uint32_t r0, n;
    wgpt_view lg, losses, lse, tgt, dln;  // dln: no buffer in the forward
} chunk_;

// fp32: logits, loss; with the backward dlogits in place and the linear's
// backward (d lnf's rows; d wte accumulated, chunk after chunk).
static int chunk_fp32_(wgpt_gpt2 *m, wgpt_op *op, const chunk_ *k, float dloss) {
    wgpt_gpu *g = m->g;
    uint32_t C = m->c.channels, V = m->c.vocab_size, Vp = m->c.padded_vocab_size, n = k->n;
    wgpt_view none = {NULL, 0, 0}, scratch = A(mm_scratch, 0);
    wgpt_view in = sub_(A(lnf, 0), (uint64_t)k->r0 * C * 4, (uint64_t)n * C * 4);
    GPU_OK(m, wgpt_linear_forward(g, op, k->lg, in, P(WGPT_WTE, 0), none, n, C, Vp, scratch));
    GPU_OK(m, wgpt_crossentropy_forward(g, op, k->losses, k->lse, A(status, 0), k->lg, k->tgt, n, V, Vp));
    if (!k->dln.buf) return 0;
    GPU_OK(m, wgpt_crossentropy_backward(g, op, k->lg, k->lse, k->tgt, n, V, Vp, dloss));
    GPU_OK(m, wgpt_linear_backward(g, op, k->dln, D(WGPT_WTE, 0), none, k->lg, in, P(WGPT_WTE, 0), n, C, Vp, 0,
                                   scratch));
    return 0;
}

// f16: the logits from lnf's f16 copy (row-major); with the backward the
// fused cross-entropy writes the f16 dlogits into d16 and the two f16
// matmuls read them.
static int chunk_f16_(wgpt_gpt2 *m, wgpt_op *op, const chunk_ *k, float dloss) {
    wgpt_gpu *g = m->g;
    uint32_t C = m->c.channels, V = m->c.vocab_size, Vp = m->c.padded_vocab_size, n = k->n;
    wgpt_view none = {NULL, 0, 0}, scratch = A(mm_scratch, 0);
    wgpt_view in16 = sub_(A(lnf16, 0), (uint64_t)k->r0 * C * 2, (uint64_t)n * C * 2);
    GPU_OK(m, wgpt_linear_f16_forward(g, op, k->lg, in16, P16(WGPT_WTE, 0), none, n, C, Vp, A(inp_t16, 0), scratch));
    if (!k->dln.buf) {
        GPU_OK(m, wgpt_crossentropy_forward(g, op, k->losses, k->lse, A(status, 0), k->lg, k->tgt, n, V, Vp));
        return 0;
    }
    wgpt_view d16 = A(d16, 0);  // (n, Vp) halves (gpt2_plan.c wgpt_gpt2_check_f16_: 8 | Vp)
    d16.size = (uint64_t)n * Vp * 2;
    GPU_OK(m, wgpt_crossentropy_fused_f16(g, op, k->losses, k->lse, A(status, 0), d16, k->lg, k->tgt, n, V, Vp,
                                          dloss));
    GPU_OK(m, wgpt_linear_f16_backward_input(g, op, k->dln, d16, P16(WGPT_WTE, 0), n, C, Vp, 0, scratch));
    GPU_OK(m, wgpt_linear_f16_backward_weight(g, op, D(WGPT_WTE, 0), d16, in16, n, C, Vp, A(inp_t16, 0), scratch));
    return 0;
}

// The chunked classifier (training models, cls_chunked): for the rows of
// each chunk, logits = lnf @ wte^T into the logits buffer (one chunk's),
// the cross-entropy's losses and lse of those rows, and with backward their
// gradient (times the loss scale, over B*T positions) into d lnf and d wte.
// Then the mean loss over all rows. The losses are those of the whole
// logits bit for bit: each row's logits and loss are its own.
int wgpt_gpt2_classifier_(wgpt_gpt2 *m, wgpt_op *op, int backward) {
    uint32_t C = m->c.channels, BT = m->B * m->T, Vp = m->c.padded_vocab_size;
    int (*chunk)(wgpt_gpt2 *, wgpt_op *, const chunk_ *, float) =
        m->precision == WGPT_PRECISION_F16 ? chunk_f16_ : chunk_fp32_;
    float dloss = m->loss_scale / (float)BT;
    wgpt_view none = {NULL, 0, 0};
    for (uint32_t r0 = 0; r0 < BT; r0 += m->cls_rows) {  // (r0 a multiple of 64 rows: 256-byte offsets)
        uint32_t n = BT - r0 < m->cls_rows ? BT - r0 : m->cls_rows;
        chunk_ k = {r0, n, sub_(A(logits, 0), 0, (uint64_t)n * Vp * 4),
                    sub_(A(losses, 0), (uint64_t)r0 * 4, (uint64_t)n * 4),
                    sub_(A(ce_lse, 0), (uint64_t)r0 * 4, (uint64_t)n * 4),
                    sub_(A(targets, 0), (uint64_t)r0 * 4, (uint64_t)n * 4),
                    backward ? sub_(A(dln, 0), (uint64_t)r0 * C * 4, (uint64_t)n * C * 4) : none};
        if (chunk(m, op, &k, dloss) < 0) return -1;
    }
    GPU_OK(m, wgpt_loss_mean(m->g, op, A(loss, 0), A(losses, 0), BT));
    return 0;
}

int wgpt_gpt2_loss_(wgpt_gpt2 *m, wgpt_op *op) {
    uint32_t BT = m->B * m->T, V = m->c.vocab_size, Vp = m->c.padded_vocab_size;
    GPU_OK(m, wgpt_crossentropy_forward(m->g, op, A(losses, 0), A(ce_lse, 0), A(status, 0), A(logits, 0),
                                        A(targets, 0), BT, V, Vp));
    GPU_OK(m, wgpt_loss_mean(m->g, op, A(loss, 0), A(losses, 0), BT));
    return 0;
}
