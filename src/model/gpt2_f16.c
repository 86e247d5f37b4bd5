// gpt2_f16.c: the f16 plan (gpt2.h wgpt_precision): GPT-2's forward and
// backward as gpt2_fp32.c's sequences, where every matmul multiplies f16
// copies (of the weights: params16; of its input, kept for the backward; of
// the gradient, in d16) and accumulates in f32; every other kernel stays f32.
// The variants (gpt2_internal.h wgpt_gpt2_plan, decided at create) change
// how a step of a block is made, never the sequence of steps:
//   in16_t     the LayerNorms and the GELU write their f16 copies
//              transposed (C, BT) for the subgroup-matrix matmuls, which
//              then transpose nothing (linear_f16.h *_t)
//   attn16     the attention on subgroup matrices, on qkv16, writing atty16
//              and its transpose itself (attention.h)
//   epi_*      a matmul writes in its epilogue what a pass after it would
//              (qkv16; fch and fchg16; d fch with GELU')
#include "model/attention.h"
#include "model/elementwise.h"
#include "model/embedding.h"
#include "model/gpt2_views.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "model/linear_f16.h"
#include "model/precision.h"

// One LayerNorm's forward tensors: out, mean, rstd, the f16 copy the next
// linear reads (in16), and its weight and bias (tensors w and b of layer l).
typedef struct ln_fwd {
    wgpt_view out, mean, rstd, in16;
    int w, b;
    uint32_t l;
    int t16;  // in16_t and not the chunked classifier's lnf: only the transposed f16 copy is written
} ln_fwd;

static ln_fwd ln1_(wgpt_gpt2 *m, uint32_t l) {
    return (ln_fwd){A(ln1, l), A(ln1_mean, l), A(ln1_rstd, l), A(ln1_16, l), WGPT_LN1W, WGPT_LN1B, l, m->plan.in16_t};
}
static ln_fwd ln2_(wgpt_gpt2 *m, uint32_t l) {
    return (ln_fwd){A(ln2, l), A(ln2_mean, l), A(ln2_rstd, l), A(ln2_16, l), WGPT_LN2W, WGPT_LN2B, l, m->plan.in16_t};
}
// The LayerNorm that reads block l's output: the next block's ln1, or lnf.
static ln_fwd ln_after_(wgpt_gpt2 *m, uint32_t l) {
    if (l + 1 < m->c.num_layers) return ln1_(m, l + 1);
    // (the chunked classifier reads rows of lnf: its f32 values, cast then)
    return (ln_fwd){A(lnf, 0), A(lnf_mean, 0), A(lnf_rstd, 0), A(lnf16, 0), WGPT_LNFW, WGPT_LNFB, 0,
                    m->plan.in16_t && !m->cls_chunked};
}

// The LayerNorm's transposed f16 copy, straight from inp and the saved
// statistics in one pass (the same halves as casting out: out is a token
// then, which nothing reads).
static int layernorm_t16_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    GPU_OK(m, wgpt_layernorm_f16_transpose(m->g, op, ln->in16, inp, ln->mean, ln->rstd, P(ln->w, ln->l),
                                           P(ln->b, ln->l), m->B * m->T, m->c.channels));
    return 0;
}

// One LayerNorm's forward: out, mean and rstd; where t16, mean and rstd,
// then the f16 copy (layernorm_t16_).
static int layernorm_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    wgpt_view stats_only = {NULL, 0, 0};
    GPU_OK(m, wgpt_layernorm_forward(m->g, op, ln->t16 ? stats_only : ln->out, ln->mean, ln->rstd, inp,
                                     P(ln->w, ln->l), P(ln->b, ln->l), m->B * m->T, m->c.channels));
    return ln->t16 ? layernorm_t16_(m, op, ln, inp) : 0;
}

// res = a + b, then the LayerNorm that reads res. Where only its statistics
// are kept (t16) one kernel writes res and them, so res is not read back
// (wgpt_layernorm_residual_stats: the same floats).
static int residual_layernorm_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view res, wgpt_view a, wgpt_view b, const ln_fwd *ln) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (!ln->t16) {
        GPU_OK(m, wgpt_residual_forward(m->g, op, res, a, b, (uint64_t)BT * C));
        return layernorm_(m, op, ln, res);
    }
    GPU_OK(m, wgpt_layernorm_residual_stats(m->g, op, res, ln->mean, ln->rstd, a, b, BT, C));
    return layernorm_t16_(m, op, ln, res);
}

// A LayerNorm's output again in the backward (wgpt_recompute ALL) from its
// input and the statistics of the forward: where only its transposed f16
// copy is kept, the forward's own kernel on the saved mean and rstd; else
// the forward's LayerNorm (which writes the same statistics again) and the
// cast the linear after it made.
static int layernorm_again_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    if (ln->t16) return layernorm_t16_(m, op, ln, inp);
    if (layernorm_(m, op, ln, inp) < 0) return -1;
    GPU_OK(m, wgpt_cast_f16(m->g, op, ln->in16, ln->out, (uint64_t)m->B * m->T * m->c.channels));
    return 0;
}

// out = in16 @ weight16^T + bias (tensor w of layer l), in16 row-major.
static int linear_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view in16, int w, uint32_t l, wgpt_view bias,
                   uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_f16_forward(m->g, op, out, in16, P16(w, l), bias, N, C, OC, A(inp_t16, 0), A(mm_scratch, 0)));
    return 0;
}

// The same on in16 transposed (in16_t: written so by the step before).
static int linear_t_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view in16, int w, uint32_t l, wgpt_view bias,
                     uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_f16_forward_t(m->g, op, out, in16, P16(w, l), bias, N, C, OC, A(mm_scratch, 0)));
    return 0;
}

// One linear's forward on an input the step before wrote in f32: in16_t,
// its transposed f16 copy is in in16 already; else it is cast there first
// (kept for the backward).
static int linear_in_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view in16, int w, uint32_t l,
                      wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC) {
    if (m->plan.in16_t) return linear_t_(m, op, out, in16, w, l, bias, N, C, OC);
    GPU_OK(m, wgpt_cast_f16(m->g, op, in16, inp, (uint64_t)N * C));
    return linear_(m, op, out, in16, w, l, bias, N, C, OC);
}

// Layer l's GELU output: fcproj's input's f16 copy, from fch (the forward's,
// and the backward's recomputation: the same kernel, the same values);
// transposed in the same pass where in16_t (as the fc matmul's GELU
// epilogue rounds it, WGPT_EPI_GELU), else row-major (wgpt_gpt2_check_f16_:
// 8 | C).
static int gelu_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (m->plan.in16_t) GPU_OK(m, wgpt_gelu_f16_transpose(m->g, op, A(fchg16, l), A(fch, l), BT, 4 * C));
    else GPU_OK(m, wgpt_gelu_forward_f16(m->g, op, A(fchg16, l), A(fch, l), (uint64_t)BT * 4 * C));
    return 0;
}

// qkv of layer l: epi_round, the matmul writes qkv16 itself (no f32 qkv, no
// cast); else qkv, and for the f16 attention its f16 copy.
static int qkv_forward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    wgpt_view none = {NULL, 0, 0};
    if (m->plan.epi_round) {
        GPU_OK(m, wgpt_linear_f16_forward_t16(m->g, op, none, A(qkv16, l), WGPT_OUT16_COPY, A(ln1_16, l),
                                              P16(WGPT_QKVW, l), P(WGPT_QKVB, l), BT, C, 3 * C));
        return 0;
    }
    if (linear_in_(m, op, A(qkv, l), A(ln1, l), A(ln1_16, l), WGPT_QKVW, l, P(WGPT_QKVB, l), BT, C, 3 * C) < 0)
        return -1;
    if (m->plan.attn16) GPU_OK(m, wgpt_cast_f16(m->g, op, A(qkv16, l), A(qkv, l), (uint64_t)BT * 3 * C));
    return 0;
}

// The attention of layer l and its projection. attn16: the attention writes
// atty16 and its transpose (the projection's input: kept for its weight
// pass where in16_t, else into inp_t16, unread) itself; else the f32
// attention, and the projection casts its output.
static int attention_forward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads, BT = B * T;
    if (!m->plan.attn16) {
        GPU_OK(m, wgpt_attention_forward(m->g, op, A(atty, l), A(att_lse, l), A(qkv, l), B, T, C, NH));
        GPU_OK(m, wgpt_cast_f16(m->g, op, A(atty16, l), A(atty, l), (uint64_t)BT * C));
        return linear_(m, op, A(attproj, l), A(atty16, l), WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT, C, C);
    }
    wgpt_view t = m->plan.in16_t ? A(atty16_t, l) : A(inp_t16, 0);
    t.size = (uint64_t)BT * C * 2;
    GPU_OK(m, wgpt_attention_forward_f16(m->g, op, A(atty16, l), t, A(att_lse, l), A(qkv16, l), B, T, C, NH));
    if (m->plan.in16_t) return linear_t_(m, op, A(attproj, l), t, WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT, C, C);
    return linear_(m, op, A(attproj, l), A(atty16, l), WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT, C, C);
}

// The MLP of layer l: fc, its GELU's f16 copy (epi_gelu: both from the fc
// matmul), fcproj on it.
static int mlp_forward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (m->plan.epi_gelu) {
        GPU_OK(m, wgpt_linear_f16_forward_t16(m->g, op, A(fch, l), A(fchg16, l), WGPT_OUT16_GELU_T, A(ln2_16, l),
                                              P16(WGPT_FCW, l), P(WGPT_FCB, l), BT, C, 4 * C));
    } else if (linear_in_(m, op, A(fch, l), A(ln2, l), A(ln2_16, l), WGPT_FCW, l, P(WGPT_FCB, l), BT, C, 4 * C) < 0 ||
               gelu_(m, op, l) < 0) {
        return -1;
    }
    if (m->plan.in16_t)
        return linear_t_(m, op, A(fcproj, l), A(fchg16, l), WGPT_FCPROJW, l, P(WGPT_FCPROJB, l), BT, 4 * C, C);
    return linear_(m, op, A(fcproj, l), A(fchg16, l), WGPT_FCPROJW, l, P(WGPT_FCPROJB, l), BT, 4 * C, C);
}

// Block l, from its ln1 (written by the block before, or the encoder's
// LayerNorm) to the LayerNorm after it. Each residual add runs with the
// LayerNorm that reads its result.
static int block_forward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
    ln_fwd ln2 = ln2_(m, l), after = ln_after_(m, l);
    if (qkv_forward_(m, op, l) < 0 || attention_forward_(m, op, l) < 0 ||
        residual_layernorm_(m, op, A(res2, l), residual, A(attproj, l), &ln2) < 0 || mlp_forward_(m, op, l) < 0)
        return -1;
    return residual_layernorm_(m, op, A(res3, l), A(res2, l), A(fcproj, l), &after);
}

int wgpt_gpt2_forward_f16_(wgpt_gpt2 *m) {
    wgpt_gpu *g = m->g;
    wgpt_op *op = &m->fwd;
    uint32_t B = m->B, T = m->T, C = m->c.channels, BT = B * T, V = m->c.vocab_size, Vp = m->c.padded_vocab_size;
    wgpt_view none = {NULL, 0, 0};
    GPU_OK(m, wgpt_encoder_forward(g, op, A(encoded, 0), A(status, 0), A(tokens, 0), P(WGPT_WTE, 0), P(WGPT_WPE, 0),
                                   B, T, C, V, Vp));
    ln_fwd ln1 = ln1_(m, 0);
    if (layernorm_(m, op, &ln1, A(encoded, 0)) < 0) return -1;
    for (uint32_t l = 0; l < m->c.num_layers; l++)
        if (block_forward_(m, op, l) < 0) return -1;
    if (m->cls_chunked) {  // a training step's forward ends here: its backward runs the classifier
        GPU_OK(m, wgpt_cast_f16(g, op, A(lnf16, 0), A(lnf, 0), (uint64_t)BT * C));
        m->fwd_train_n = op->n;
        return wgpt_gpt2_classifier_(m, op, 0);
    }
    if (linear_in_(m, op, A(logits, 0), A(lnf, 0), A(lnf16, 0), WGPT_WTE, 0, none, BT, C, Vp) < 0 ||
        wgpt_gpt2_loss_(m, op) < 0)
        return -1;
    m->fwd_train_n = op->n;
    return 0;
}

// d16 trimmed to an (N, OC) gradient's f16 copy.
static wgpt_view d16_(const wgpt_gpt2 *m, uint32_t N, uint32_t OC) {
    wgpt_view d16 = A(d16, 0);
    d16.size = (uint64_t)N * OC * 2;
    return d16;
}

// A linear's two backward matmuls on its gradient's f16 copy dout16: dinp
// overwritten, d weight (tensor w of layer l) accumulated from the input's
// f16 copy in16 (transposed where t).
static int linear_bwd_mm_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, uint32_t l, wgpt_view dout16,
                          wgpt_view in16, int t, uint32_t N, uint32_t C, uint32_t OC) {
    wgpt_gpu *g = m->g;
    GPU_OK(m, wgpt_linear_f16_backward_input(g, op, dinp, dout16, P16(w, l), N, C, OC, 0, A(mm_scratch, 0)));
    if (t) GPU_OK(m, wgpt_linear_f16_backward_weight_t(g, op, D(w, l), dout16, in16, N, C, OC, A(mm_scratch, 0)));
    else GPU_OK(m, wgpt_linear_f16_backward_weight(g, op, D(w, l), dout16, in16, N, C, OC, A(inp_t16, 0),
                                                   A(mm_scratch, 0)));
    return 0;
}

// One linear's backward from its f32 gradient dout: the bias gradient
// (tensor b) and dout's f16 copy (into d16) in one pass over it, then the
// two matmuls.
static int linear_bwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, int b, uint32_t l, wgpt_view dout,
                       wgpt_view in16, int t, uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_backward_bias_cast(m->g, op, D(b, l), d16_(m, N, OC), dout, N, OC, A(mm_scratch, 0)));
    return linear_bwd_mm_(m, op, dinp, w, l, d16_(m, N, OC), in16, t, N, C, OC);
}

// Layer l's MLP backward: fcproj's (dres its gradient), the GELU's, fc's (into dln).
static int mlp_backward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t C = m->c.channels, BT = m->B * m->T;
    int t = m->plan.in16_t;
    if (linear_bwd_(m, op, A(dfch_gelu, 0), WGPT_FCPROJW, WGPT_FCPROJB, l, A(dres, 0), A(fchg16, l), t, BT, 4 * C,
                    C) < 0)
        return -1;
    // the GELU's gradient as fc's bias gradient and f16 copy, in one pass
    // over d fch gelu (wgpt_gpt2_check_f16_: 8 | C)
    GPU_OK(m, wgpt_linear_backward_bias_gelu_cast(m->g, op, D(WGPT_FCB, l), d16_(m, BT, 4 * C), A(dfch, 0),
                                                  A(dfch_gelu, 0), A(fch, l), BT, 4 * C, A(mm_scratch, 0)));
    return linear_bwd_mm_(m, op, A(dln, 0), WGPT_FCW, l, d16_(m, BT, 4 * C), A(ln2_16, l), t, BT, C, 4 * C);
}

// The same with the GELU' epilogue (epi_gelu_grad, which needs in16_t):
// fcproj's gradient's f16 copy with its bias gradient, its weight pass, then
// its input pass with the GELU's backward in the same dispatch, which writes
// d fch and its f16 copy (into inp_t16: d16 holds fcproj's gradient, which
// that pass reads); then fc's passes on it.
static int mlp_backward_epi_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    wgpt_gpu *g = m->g;
    uint32_t C = m->c.channels, BT = m->B * m->T;
    wgpt_view d16 = d16_(m, BT, C), g16 = A(inp_t16, 0), scratch = A(mm_scratch, 0);
    g16.size = (uint64_t)BT * 4 * C * 2;
    GPU_OK(m, wgpt_linear_backward_bias_cast(g, op, D(WGPT_FCPROJB, l), d16, A(dres, 0), BT, C, scratch));
    GPU_OK(m, wgpt_linear_f16_backward_weight_t(g, op, D(WGPT_FCPROJW, l), d16, A(fchg16, l), BT, 4 * C, C, scratch));
    GPU_OK(m, wgpt_linear_f16_backward_input_gelu(g, op, A(dfch, 0), g16, A(fch, l), d16, P16(WGPT_FCPROJW, l), BT,
                                                  4 * C, C));
    if (linear_bwd_mm_(m, op, A(dln, 0), WGPT_FCW, l, g16, A(ln2_16, l), 1, BT, C, 4 * C) < 0) return -1;
    GPU_OK(m, wgpt_linear_backward_bias(g, op, D(WGPT_FCB, l), A(dfch, 0), BT, 4 * C, scratch));
    return 0;
}

// The attention's backward of layer l, from d atty into dqkv.
static int attention_backward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads;
    wgpt_view none = {NULL, 0, 0};
    if (m->plan.attn16)
        GPU_OK(m, wgpt_attention_backward_f16(m->g, op, A(dqkv, 0), A(att_d, 0), A(datty, 0), A(qkv16, l),
                                              A(atty16, l), A(att_lse, l), m->plan.attn_ds ? A(d16, 0) : none, B, T,
                                              C, NH));
    else
        GPU_OK(m, wgpt_attention_backward(m->g, op, A(dqkv, 0), A(att_d, 0), A(datty, 0), A(qkv, l), A(atty, l),
                                          A(att_lse, l), B, T, C, NH));
    return 0;
}

// Block l's backward: dres holds d res3 on entry, d of the block's input on exit.
static int block_backward_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t C = m->c.channels, BT = m->B * m->T;
    const wgpt_gpt2_plan *p = &m->plan;
    wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
    // what the forward did not keep of this layer (wgpt_recompute), into
    // the slices every layer shares: the GELU's output, the LayerNorms'
    if (m->recompute >= WGPT_RECOMPUTE_GELU && gelu_(m, op, l) < 0) return -1;
    ln_fwd ln2 = ln2_(m, l), ln1 = ln1_(m, l);
    if (m->recompute >= WGPT_RECOMPUTE_ALL &&
        (layernorm_again_(m, op, &ln2, A(res2, l)) < 0 || layernorm_again_(m, op, &ln1, residual) < 0))
        return -1;
    // res3 = res2 + fcproj: d fcproj = dres
    if ((p->epi_gelu_grad ? mlp_backward_epi_(m, op, l) : mlp_backward_(m, op, l)) < 0 ||
        wgpt_gpt2_layernorm_bwd_(m, op, A(res2, l), A(ln2_mean, l), A(ln2_rstd, l), WGPT_LN2W, WGPT_LN2B, l) < 0)
        return -1;
    // res2 = residual + attproj: d attproj = dres (now d res2); its weight
    // pass on the attention's transposed copy where there is one
    int atty_t = p->attn16 && p->in16_t;
    if (linear_bwd_(m, op, A(datty, 0), WGPT_ATTPROJW, WGPT_ATTPROJB, l, A(dres, 0),
                    atty_t ? A(atty16_t, l) : A(atty16, l), atty_t, BT, C, C) < 0 ||
        attention_backward_(m, op, l) < 0 ||
        linear_bwd_(m, op, A(dln, 0), WGPT_QKVW, WGPT_QKVB, l, A(dqkv, 0), A(ln1_16, l), p->in16_t, BT, C, 3 * C) < 0)
        return -1;
    return wgpt_gpt2_layernorm_bwd_(m, op, residual, A(ln1_mean, l), A(ln1_rstd, l), WGPT_LN1W, WGPT_LN1B, l);
}

int wgpt_gpt2_backward_f16_(wgpt_gpt2 *m) { return wgpt_gpt2_backward_(m, block_backward_); }
