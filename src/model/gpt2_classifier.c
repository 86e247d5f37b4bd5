// gpt2_classifier.c: a training model's classifier and loss in chunks of
// rows (gpt2_internal.h cls_chunked), as llm.c's fused classifier: the
// logits of one chunk, its loss and gradient, the gradient's matmuls, then
// the next chunk; the (B, T, Vp) logits never exist.
#include "model/cross_entropy.h"
#include "model/gpt2_internal.h"
#include "model/linear.h"
#include "model/linear_f16.h"

#define GPU_OK(m, call)                                                         \
    do {                                                                        \
        if ((call) < 0) return wgpt_gpt2_fail_((m), "%s", wgpt_gpu_error((m)->g)); \
    } while (0)
#define P(t, l) wgpt_gpt2_mview_(m, (t), (l))
#define D(t, l) wgpt_gpt2_pview_(m, m->grads, (t), (l))
#define A(act, l) wgpt_gpt2_aview_(&m->act, (l))
#define P16(t, l) wgpt_gpt2_p16view_(m, (t), (l))

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

// The chunked classifier (training models, cls_chunked): for the rows
// [r0, r0 + n) of each chunk, logits = lnf @ wte^T into the logits buffer
// (one chunk's), the cross-entropy's losses and lse of those rows, and with
// backward their gradient (times the loss scale, over B*T positions): in
// fp32 dlogits in place and the linear's backward (d lnf's rows; d wte
// accumulated, chunk after chunk); in f16 the fused cross-entropy writes the
// f16 dlogits into d16 and the two f16 matmuls read them (lnf's f16 copy
// row-major). Then the mean loss over all rows. The losses are those of the
// whole logits bit for bit: each row's logits and loss are its own.
int wgpt_gpt2_classifier_(wgpt_gpt2 *m, wgpt_op *op, int backward) {
    wgpt_gpu *g = m->g;
    uint32_t C = m->c.channels, BT = m->B * m->T, V = m->c.vocab_size, Vp = m->c.padded_vocab_size;
    int f16 = m->precision == WGPT_PRECISION_F16;
    float dloss = m->loss_scale / (float)BT;
    wgpt_view none = {NULL, 0, 0}, scratch = A(mm_scratch, 0);
    for (uint32_t r0 = 0; r0 < BT; r0 += m->cls_rows) {  // (r0 a multiple of 64 rows: 256-byte offsets)
        uint32_t n = BT - r0 < m->cls_rows ? BT - r0 : m->cls_rows;
        wgpt_view lg = sub_(A(logits, 0), 0, (uint64_t)n * Vp * 4);
        wgpt_view losses = sub_(A(losses, 0), (uint64_t)r0 * 4, (uint64_t)n * 4);
        wgpt_view lse = sub_(A(ce_lse, 0), (uint64_t)r0 * 4, (uint64_t)n * 4);
        wgpt_view tgt = sub_(A(targets, 0), (uint64_t)r0 * 4, (uint64_t)n * 4);
        wgpt_view dln = backward ? sub_(A(dln, 0), (uint64_t)r0 * C * 4, (uint64_t)n * C * 4) : none;
        if (f16) {
            wgpt_view in16 = sub_(A(lnf16, 0), (uint64_t)r0 * C * 2, (uint64_t)n * C * 2);
            GPU_OK(m, wgpt_linear_f16_forward(g, op, lg, in16, P16(WGPT_WTE, 0), none, n, C, Vp, A(inp_t16, 0),
                                              scratch));
            if (!backward) {
                GPU_OK(m, wgpt_crossentropy_forward(g, op, losses, lse, A(status, 0), lg, tgt, n, V, Vp));
                continue;
            }
            wgpt_view d16 = A(d16, 0);  // (n, Vp) halves (gpt2.c check_f16_: 8 | Vp)
            d16.size = (uint64_t)n * Vp * 2;
            GPU_OK(m, wgpt_crossentropy_fused_f16(g, op, losses, lse, A(status, 0), d16, lg, tgt, n, V, Vp, dloss));
            GPU_OK(m, wgpt_linear_f16_backward_input(g, op, dln, d16, P16(WGPT_WTE, 0), n, C, Vp, 0, scratch));
            GPU_OK(m, wgpt_linear_f16_backward_weight(g, op, D(WGPT_WTE, 0), d16, in16, n, C, Vp, A(inp_t16, 0),
                                                      scratch));
        } else {
            wgpt_view in = sub_(A(lnf, 0), (uint64_t)r0 * C * 4, (uint64_t)n * C * 4);
            GPU_OK(m, wgpt_linear_forward(g, op, lg, in, P(WGPT_WTE, 0), none, n, C, Vp, scratch));
            GPU_OK(m, wgpt_crossentropy_forward(g, op, losses, lse, A(status, 0), lg, tgt, n, V, Vp));
            if (!backward) continue;
            GPU_OK(m, wgpt_crossentropy_backward(g, op, lg, lse, tgt, n, V, Vp, dloss));
            GPU_OK(m, wgpt_linear_backward(g, op, dln, D(WGPT_WTE, 0), none, lg, in, P(WGPT_WTE, 0), n, C, Vp, 0,
                                           scratch));
        }
    }
    GPU_OK(m, wgpt_loss_mean(g, op, A(loss, 0), A(losses, 0), BT));
    return 0;
}

