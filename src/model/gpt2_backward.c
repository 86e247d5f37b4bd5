// gpt2_backward.c: the backward's outline, the same in every precision: the
// classifier and the loss, the final LayerNorm, the blocks from the last
// (each plan's own block backward), the embeddings, and the segment cuts
// between them; and the LayerNorm backward, which both plans run as it is.
#include "model/embedding.h"
#include "model/gpt2_views.h"
#include "model/layernorm.h"

int wgpt_gpt2_layernorm_bwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view inp, wgpt_view mean, wgpt_view rstd, int w, int b,
                             uint32_t l) {
    GPU_OK(m, wgpt_layernorm_backward(m->g, op, A(dres, 0), D(w, l), D(b, l), A(dln, 0), inp, P(w, l), mean, rstd,
                                      m->B * m->T, m->c.channels, A(ln_scratch, 0)));
    return 0;
}

int wgpt_gpt2_backward_(wgpt_gpt2 *m, int (*block_backward)(wgpt_gpt2 *m, wgpt_op *op, uint32_t l)) {
    wgpt_op *op = &m->bwd;
    uint32_t last = m->c.num_layers - 1;
    // the classifier and the loss, chunk by chunk, with their gradient (times
    // the loss scale in f16) into d lnf and d wte
    if (wgpt_gpt2_classifier_(m, op, 1) < 0 ||
        wgpt_gpt2_layernorm_bwd_(m, op, A(res3, last), A(lnf_mean, 0), A(lnf_rstd, 0), WGPT_LNFW, WGPT_LNFB, 0) < 0)
        return -1;
    m->bwd_cut[0] = op->n;  // segment 0 ends: lnfw and lnfb are final
    for (int l = (int)last; l >= 0; l--) {
        if (block_backward(m, op, (uint32_t)l) < 0) return -1;
        m->bwd_cut[1 + last - (uint32_t)l] = op->n;  // layer l's 12 tensors are final
    }
    GPU_OK(m, wgpt_encoder_backward(m->g, op, D(WGPT_WTE, 0), D(WGPT_WPE, 0), A(dres, 0), A(bucket, 0), m->B, m->T,
                                    m->c.channels, m->c.padded_vocab_size));
    m->bwd_cut[last + 2] = op->n;
    return 0;
}
