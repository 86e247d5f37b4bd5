// gpt2_fp32.c: the fp32 plan: GPT-2's forward and backward as one straight
// sequence of layer calls each (llm.c's gpt2_forward and gpt2_backward),
// appended to the model's prepared ops. Every tensor is f32; which
// activations are kept per layer and which recomputed is the allocation's
// business (gpt2_acts.c: a slice every layer shares reads the same here).
#include "model/attention.h"
#include "model/elementwise.h"
#include "model/embedding.h"
#include "model/gpt2_views.h"
#include "model/layernorm.h"
#include "model/linear.h"

// out = inp @ weight^T + bias, weight tensor w of layer l.
static int linear_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view inp, int w, uint32_t l, wgpt_view bias,
                   uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_forward(m->g, op, out, inp, P(w, l), bias, N, C, OC, A(mm_scratch, 0)));
    return 0;
}

// dinp = dout @ weight; d weight and d bias (tensors w, b of layer l) accumulate.
static int linear_bwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, int b, uint32_t l, wgpt_view dout,
                       wgpt_view inp, uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_backward(m->g, op, dinp, D(w, l), D(b, l), dout, inp, P(w, l), N, C, OC, 0,
                                   A(mm_scratch, 0)));
    return 0;
}

// out, mean, rstd = LayerNorm(inp) with tensors w, b of layer l.
static int layernorm_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view mean, wgpt_view rstd, wgpt_view inp,
                      int w, int b, uint32_t l) {
    GPU_OK(m, wgpt_layernorm_forward(m->g, op, out, mean, rstd, inp, P(w, l), P(b, l), m->B * m->T, m->c.channels));
    return 0;
}

// fch_gelu = GELU(fch) of layer l.
static int gelu_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    GPU_OK(m, wgpt_gelu_forward(m->g, op, A(fch_gelu, l), A(fch, l), (uint64_t)m->B * m->T * 4 * m->c.channels));
    return 0;
}

// The LayerNorm that reads block l's output: the next block's ln1, or lnf.
static int layernorm_after_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    if (l + 1 < m->c.num_layers)
        return layernorm_(m, op, A(ln1, l + 1), A(ln1_mean, l + 1), A(ln1_rstd, l + 1), A(res3, l), WGPT_LN1W,
                          WGPT_LN1B, l + 1);
    return layernorm_(m, op, A(lnf, 0), A(lnf_mean, 0), A(lnf_rstd, 0), A(res3, l), WGPT_LNFW, WGPT_LNFB, 0);
}

// Block l, from its ln1 (written by the block before, or the encoder's
// LayerNorm) to the LayerNorm after it.
static int block_forward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads, BT = B * T;
    wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
    if (linear_(m, op, A(qkv, l), A(ln1, l), WGPT_QKVW, l, P(WGPT_QKVB, l), BT, C, 3 * C) < 0) return -1;
    GPU_OK(m, wgpt_attention_forward(m->g, op, A(atty, l), A(att_lse, l), A(qkv, l), B, T, C, NH));
    if (linear_(m, op, A(attproj, l), A(atty, l), WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT, C, C) < 0) return -1;
    GPU_OK(m, wgpt_residual_forward(m->g, op, A(res2, l), residual, A(attproj, l), (uint64_t)BT * C));
    if (layernorm_(m, op, A(ln2, l), A(ln2_mean, l), A(ln2_rstd, l), A(res2, l), WGPT_LN2W, WGPT_LN2B, l) < 0 ||
        linear_(m, op, A(fch, l), A(ln2, l), WGPT_FCW, l, P(WGPT_FCB, l), BT, C, 4 * C) < 0 || gelu_(m, op, l) < 0 ||
        linear_(m, op, A(fcproj, l), A(fch_gelu, l), WGPT_FCPROJW, l, P(WGPT_FCPROJB, l), BT, 4 * C, C) < 0)
        return -1;
    GPU_OK(m, wgpt_residual_forward(m->g, op, A(res3, l), A(res2, l), A(fcproj, l), (uint64_t)BT * C));
    return layernorm_after_(m, op, l);
}

int wgpt_gpt2_forward_fp32_(wgpt_gpt2 *m) {
    wgpt_gpu *g = m->g;
    wgpt_op *op = &m->fwd;
    uint32_t B = m->B, T = m->T, C = m->c.channels, BT = B * T, V = m->c.vocab_size, Vp = m->c.padded_vocab_size;
    wgpt_view none = {NULL, 0, 0};
    GPU_OK(m, wgpt_encoder_forward(g, op, A(encoded, 0), A(status, 0), A(tokens, 0), P(WGPT_WTE, 0), P(WGPT_WPE, 0),
                                   B, T, C, V, Vp));
    if (layernorm_(m, op, A(ln1, 0), A(ln1_mean, 0), A(ln1_rstd, 0), A(encoded, 0), WGPT_LN1W, WGPT_LN1B, 0) < 0)
        return -1;
    for (uint32_t l = 0; l < m->c.num_layers; l++)
        if (block_forward_(m, op, l) < 0) return -1;
    if (m->cls_chunked) {  // a training step's forward ends here: its backward runs the classifier
        m->fwd_train_n = op->n;
        return wgpt_gpt2_classifier_(m, op, 0);
    }
    if (linear_(m, op, A(logits, 0), A(lnf, 0), WGPT_WTE, 0, none, BT, C, Vp) < 0 || wgpt_gpt2_loss_(m, op) < 0)
        return -1;
    m->fwd_train_n = op->n;
    return 0;
}

// Block l's backward: dres holds d res3 on entry, d of the block's input on exit.
static int block_backward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads, BT = B * T;
    wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
    // what the forward did not keep of this layer (wgpt_recompute), into
    // the slices every layer shares: the GELU's output, the LayerNorms'
    if (m->recompute >= WGPT_RECOMPUTE_GELU && gelu_(m, op, l) < 0) return -1;
    if (m->recompute >= WGPT_RECOMPUTE_ALL &&
        (layernorm_(m, op, A(ln2, l), A(ln2_mean, l), A(ln2_rstd, l), A(res2, l), WGPT_LN2W, WGPT_LN2B, l) < 0 ||
         layernorm_(m, op, A(ln1, l), A(ln1_mean, l), A(ln1_rstd, l), residual, WGPT_LN1W, WGPT_LN1B, l) < 0))
        return -1;
    // res3 = res2 + fcproj: d fcproj = dres
    if (linear_bwd_(m, op, A(dfch_gelu, 0), WGPT_FCPROJW, WGPT_FCPROJB, l, A(dres, 0), A(fch_gelu, l), BT, 4 * C,
                    C) < 0)
        return -1;
    GPU_OK(m, wgpt_gelu_backward(m->g, op, A(dfch, 0), A(fch, l), A(dfch_gelu, 0), (uint64_t)BT * 4 * C));
    if (linear_bwd_(m, op, A(dln, 0), WGPT_FCW, WGPT_FCB, l, A(dfch, 0), A(ln2, l), BT, C, 4 * C) < 0 ||
        wgpt_gpt2_layernorm_bwd_(m, op, A(res2, l), A(ln2_mean, l), A(ln2_rstd, l), WGPT_LN2W, WGPT_LN2B, l) < 0)
        return -1;
    // res2 = residual + attproj: d attproj = dres (now d res2)
    if (linear_bwd_(m, op, A(datty, 0), WGPT_ATTPROJW, WGPT_ATTPROJB, l, A(dres, 0), A(atty, l), BT, C, C) < 0)
        return -1;
    GPU_OK(m, wgpt_attention_backward(m->g, op, A(dqkv, 0), A(att_d, 0), A(datty, 0), A(qkv, l), A(atty, l),
                                      A(att_lse, l), B, T, C, NH));
    if (linear_bwd_(m, op, A(dln, 0), WGPT_QKVW, WGPT_QKVB, l, A(dqkv, 0), A(ln1, l), BT, C, 3 * C) < 0) return -1;
    return wgpt_gpt2_layernorm_bwd_(m, op, residual, A(ln1_mean, l), A(ln1_rstd, l), WGPT_LN1W, WGPT_LN1B, l);
}

int wgpt_gpt2_backward_fp32_(wgpt_gpt2 *m) { return wgpt_gpt2_backward_(m, block_backward_); }
