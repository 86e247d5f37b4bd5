// gpt2.c: the GPT-2 model on the GPU: allocation, the prepared forward,
// backward and optimizer ops, and the training step.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/attention.h"
#include "model/cross_entropy.h"
#include "model/elementwise.h"
#include "model/embedding.h"
#include "model/gpt2_internal.h"
#include "model/input_status.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "model/linear_f16.h"
#include "model/precision.h"
#include "model/variant.h"
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

#define GPU_OK(m, call)                                                         \
    do {                                                                        \
        if ((call) < 0) return wgpt_gpt2_fail_((m), "%s", wgpt_gpu_error((m)->g)); \
    } while (0)

const char *wgpt_precision_name(wgpt_precision p) {
    return p == WGPT_PRECISION_F16 ? "f16" : p == WGPT_PRECISION_AUTO ? "auto" : "fp32";
}

int wgpt_precision_parse(const char *s, wgpt_precision *out) {
    if (strcmp(s, "fp32") == 0) *out = WGPT_PRECISION_FP32;
    else if (strcmp(s, "f16") == 0) *out = WGPT_PRECISION_F16;
    else if (strcmp(s, "auto") == 0) *out = WGPT_PRECISION_AUTO;
    else return -1;
    return 0;
}

wgpt_precision wgpt_precision_auto(const wgpt_gpu_info *i) {
    return i->has_f16 && i->has_subgroup_matrix && i->sgm_config >= 0 ? WGPT_PRECISION_F16 : WGPT_PRECISION_FP32;
}

wgpt_precision wgpt_gpt2_precision(const wgpt_gpt2 *m) { return m->precision; }
wgpt_recompute wgpt_gpt2_recompute(const wgpt_gpt2 *m) { return m->recompute; }

static const char *const RECOMPUTE_NAMES_[4] = {"none", "gelu", "all", "auto"};
const char *wgpt_recompute_name(wgpt_recompute r) { return (unsigned)r < 4 ? RECOMPUTE_NAMES_[r] : "?"; }
int wgpt_recompute_parse(const char *s, wgpt_recompute *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, RECOMPUTE_NAMES_[i]) == 0) return *out = (wgpt_recompute)i, 0;
    return -1;
}
float wgpt_gpt2_loss_scale(const wgpt_gpt2 *m) { return m->loss_scale; }

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
static void shard_range_(uint64_t padded, uint32_t i, uint32_t n, uint64_t *off, uint64_t *count) {
    uint64_t per = (padded / 64 + n - 1) / n * 64;
    uint64_t o = (uint64_t)i * per < padded ? (uint64_t)i * per : padded;
    *off = o;
    *count = padded - o < per ? padded - o : per;
}

void wgpt_gpt2_shard_range(const wgpt_gpt2 *m, uint32_t i, uint64_t *off, uint64_t *count) {
    shard_range_(m->padded_params, i, m->nshards, off, count);
}

uint32_t wgpt_gpt2_num_shards(const wgpt_gpt2 *m) { return m->nshards; }
uint64_t wgpt_gpt2_padded_params(const wgpt_gpt2 *m) { return m->padded_params; }

static int alloc_params_(wgpt_gpt2 *m) {
    wgpt_buf **bufs[4] = {&m->params, &m->grads, &m->adam_m, &m->adam_v};
    const char *names[4] = {"params", "grads", "adam m", "adam v"};
    for (int i = m->shared ? 1 : 0; i < (m->training ? 4 : 1); i++) {
        // the masters: the whole array, or (f16 ZeRO-1) less the others' matmul
        // weights; the moments: this rank's shard only
        uint64_t floats = i >= 2 ? m->shard_n : i == 0 ? m->master_floats : m->padded_params;
        wgpt_gpu_mem_tag(m->g, i >= 2 ? WGPT_MEM_OPTIMIZER : WGPT_MEM_PARAMS);
        *bufs[i] = wgpt_buf_create(m->g, floats * 4, names[i]);
        if (!*bufs[i]) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
        m->param_bytes += wgpt_buf_size(*bufs[i]);
        if (i >= 2) m->adam_bytes += wgpt_buf_size(*bufs[i]);
        if (i == 0) m->master_bytes = wgpt_buf_size(*bufs[i]);
        if (i == 1) m->grad_bytes = wgpt_buf_size(*bufs[i]);
    }
    if (m->precision == WGPT_PRECISION_F16 && !m->shared) {
        wgpt_gpu_mem_tag(m->g, WGPT_MEM_PARAMS);
        m->params16 = wgpt_buf_create(m->g, m->padded_params * 2, "params f16");
        if (!m->params16) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
        m->param_bytes += wgpt_buf_size(m->params16);
        m->weights16_bytes = wgpt_buf_size(m->params16);
    }
    return 0;
}

// The f16 mode's shape rules, checked before anything is allocated.
static int check_f16_(wgpt_gpt2 *m) {
    const wgpt_gpu_info *i = wgpt_gpu_get_info(m->g);
    uint32_t C = m->c.channels, Vp = m->c.padded_vocab_size, BT = m->B * m->T;
    if (C % 8 || Vp % 8 || BT % 8)
        return wgpt_gpt2_fail_(m, "precision f16 needs the channels (%u), the padded vocabulary (%u) and batch x "
                               "sequence (%u) to be multiples of 8", C, Vp, BT);
    if (i->storage_offset_align > 128)
        return wgpt_gpt2_fail_(m, "precision f16: the device aligns bindings to %u bytes; the f16 weights' slices "
                               "are 128-byte aligned", i->storage_offset_align);
    // The parameters, gradients and moments are bound per tensor or in
    // chunks; the f16 matmuls bind each activation of a layer whole, and an
    // inference model the logits whole (a training model's classifier binds
    // a chunk of rows, wgpt_gpt2_cls_rows_).
    uint64_t rows = m->cls_chunked ? m->cls_rows : BT;
    uint64_t mlp = (uint64_t)BT * 4 * C * 4, logits = rows * Vp * 4;
    if (mlp > i->max_storage_binding || logits > i->max_storage_binding)
        return wgpt_gpt2_fail_(m, "precision f16 binds a layer's MLP activation (%llu bytes) and %llu rows of the "
                               "logits (%llu bytes) whole; the device binds at most %llu",
                               (unsigned long long)mlp, (unsigned long long)rows, (unsigned long long)logits,
                               (unsigned long long)i->max_storage_binding);
    return 0;
}

typedef struct act_spec_ {
    wgpt_gpt2_act *a;
    const char *name;
    uint64_t slices, floats;
} act_spec_;

// The buffers of a list, counted under memory tag `tag` (gpt2.h WGPT_MEM_*;
// the matmuls' split partials and the logits under scratch wherever they are listed).
static int alloc_list_(wgpt_gpt2 *m, const act_spec_ *list, size_t n, int tag) {
    for (size_t i = 0; i < n; i++) {
        wgpt_gpu_mem_tag(m->g, list[i].a == &m->mm_scratch || list[i].a == &m->logits ? WGPT_MEM_SCRATCH : tag);
        if (wgpt_gpt2_act_alloc_(m, list[i].a, list[i].name, (uint32_t)list[i].slices, list[i].floats) < 0) return -1;
    }
    return 0;
}

// The matmuls' split partials: enough for the largest need of the model's linears.
static uint64_t linear_scratch_floats_(const wgpt_gpt2 *m) {
    uint32_t C = m->c.channels, Vp = m->c.padded_vocab_size;
    uint32_t shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};
    uint64_t most = 0;
    for (int i = 0; i < 5; i++) {
        uint32_t BT = i == 4 ? m->cls_rows : m->B * m->T;  // the classifier: a chunk of rows
        uint64_t b = wgpt_linear_scratch_bytes(m->g, BT, shapes[i][0], shapes[i][1]);
        if (m->precision == WGPT_PRECISION_F16) {  // the f16 weight pass's split-k, then the bias partials
            uint64_t h = wgpt_linear_f16_scratch_bytes(m->g, BT, shapes[i][0], shapes[i][1]);
            uint64_t bb = wgpt_linear_bias_scratch_bytes(m->g, BT, shapes[i][1]);
            b = h > b ? h : b;
            b = bb > b ? bb : b;
        }
        if (b > most) most = b;
    }
    return (most + 3) / 4;
}

// 1 if every linear of the model takes its input transposed (linear_f16.h);
// the chunked classifier reads lnf's f16 copy row-major (rows of it a chunk).
static int linear_takes_transposed_(const wgpt_gpt2 *m) {
    uint32_t C = m->c.channels, BT = m->B * m->T, Vp = m->c.padded_vocab_size;
    uint32_t shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};
    for (int i = 0; i < (m->cls_chunked ? 4 : 5); i++)
        if (!wgpt_linear_f16_takes_transposed(m->g, BT, shapes[i][0], shapes[i][1])) return 0;
    return 1;
}

// 1 where the f16 matmuls write the result of `bit` (WGPT_EPI_*) in their
// epilogue (linear_f16.h): asked for by the device's options
// (wgpt_gpu_info.matmul_epilogues), and every linear on subgroup matrices
// (in16_t), which those epilogues need.
static int epi_(const wgpt_gpt2 *m, uint32_t bit) {
    return m->in16_t && (wgpt_gpu_get_info(m->g)->matmul_epilogues & bit) != 0 &&
           (bit != WGPT_EPI_ROUND || m->attn16);
}

// The transposed f16 input of the subgroup-matrix forward and weight passes
// (linear_f16.h): the largest of the model's linears (0 where none takes one).
static uint64_t linear_transposed_floats_(const wgpt_gpt2 *m) {
    uint32_t C = m->c.channels, BT = m->B * m->T, Vp = m->c.padded_vocab_size;
    uint32_t shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};
    uint64_t most = 0;
    for (int i = 0; m->precision == WGPT_PRECISION_F16 && i < 5; i++) {
        uint64_t b = wgpt_linear_f16_transposed_bytes(m->g, i == 4 ? m->cls_rows : BT, shapes[i][0], shapes[i][1]);
        if (b > most) most = b;
    }
    return (most + 3) / 4;
}

static int alloc_acts_(wgpt_gpt2 *m) {
    uint64_t L = m->c.num_layers, C = m->c.channels, BT = (uint64_t)m->B * m->T, NH = m->c.num_heads;
    uint64_t Vp = m->c.padded_vocab_size;
    // Layer outputs the backward never reads get one slice that every layer
    // reuses: the projections (the residual's gradient is theirs), and in f16
    // the f32 inputs of the matmuls, whose f16 copies are what the backward reads.
    // (In f16 the backward passes fch gelu to linear_bwd_, which reads in16 only.)
    int f16 = m->precision == WGPT_PRECISION_F16;
    // Recomputed in the backward (gpt2.h wgpt_recompute): one slice that every layer reuses
    uint64_t Lgelu = m->recompute >= WGPT_RECOMPUTE_GELU ? 1 : L, Lln = m->recompute >= WGPT_RECOMPUTE_ALL ? 1 : L;
    uint64_t Lf32 = f16 ? 1 : Lln;
    // With the f16 attention (attn16) it reads f16 copies of qkv and of its
    // own output, so their f32 versions are passing too.
    m->attn16 = f16 && wgpt_attention_uses_sgm(m->g, C / NH) && m->T % 2 == 0;  // (its forward needs T even)
    uint64_t Lattn = m->attn16 ? 1 : L;
    // Where every linear's forward and weight pass run on subgroup matrices,
    // the f16 copies of ln1, ln2, lnf and fch gelu are kept transposed (C, BT),
    // the layout those passes multiply (linear_f16.h), so the backward
    // transposes nothing; atty16 stays row-major for the f16 attention's backward.
    m->in16_t = f16 && linear_takes_transposed_(m);
    // f32 tensors that mode never touches get a token size: the f16 attention
    // writes atty16 (and its transpose), fcproj's input pass with GELU' d fch
    // (WGPT_EPI_GELU_GRAD; linear_f16.h), and without that epilogue fc's bias
    // pass makes d fch's f16 copy from d fch gelu, no f32 d fch, where it
    // runs on the GPU path (wgpt_linear_backward_bias_gelu_cast), and where
    // the inputs are kept transposed the LayerNorms write their f16 copies
    // straight from the residual stream (layernorm_fwd_), no f32 ln1, ln2, lnf
    const uint64_t token = 64;
    uint64_t atty_f = m->attn16 ? token : BT * C;
    uint64_t ln_f = m->in16_t ? token : BT * C;
    int gelu_grad = epi_(m, WGPT_EPI_GELU_GRAD);
    uint64_t dfch_gelu_f = gelu_grad ? token : BT * 4 * C;
    uint64_t scratch_f = linear_scratch_floats_(m);
    int no_dfch = f16 && !gelu_grad && wgpt_linear_bias_on_gpu(m->g, (uint32_t)BT, (uint32_t)(4 * C), scratch_f * 4);
    uint64_t dfch_f = no_dfch ? token : BT * 4 * C;
    const act_spec_ forward[] = {
        {&m->encoded, "encoded", 1, BT * C},      {&m->ln1, "ln1", Lf32, ln_f},
        {&m->ln1_mean, "ln1 mean", L, BT},        {&m->ln1_rstd, "ln1 rstd", L, BT},
        {&m->qkv, "qkv", Lattn, BT * 3 * C},      {&m->atty, "atty", Lattn, atty_f},
        {&m->att_lse, "att lse", L, BT * NH},     {&m->attproj, "attproj", 1, BT * C},
        {&m->res2, "residual2", L, BT * C},       {&m->ln2, "ln2", Lf32, ln_f},
        {&m->ln2_mean, "ln2 mean", L, BT},        {&m->ln2_rstd, "ln2 rstd", L, BT},
        {&m->fch, "fch", L, BT * 4 * C},
        {&m->fcproj, "fcproj", 1, BT * C},        {&m->res3, "residual3", L, BT * C},
        {&m->lnf, "lnf", 1, m->cls_chunked ? BT * C : ln_f},  {&m->lnf_mean, "lnf mean", 1, BT},
        {&m->lnf_rstd, "lnf rstd", 1, BT},        {&m->logits, "logits", 1, (uint64_t)m->cls_rows * Vp},
        {&m->losses, "losses", 1, BT},            {&m->ce_lse, "ce lse", 1, BT},
        {&m->loss, "loss", 1, 4},                 {&m->status, "status", 1, WGPT_STATUS_WORDS},
        {&m->tokens, "tokens", 1, BT},            {&m->targets, "targets", 1, BT},
        {&m->mm_scratch, "matmul split partials", 1, scratch_f},
    };
    const act_spec_ backward[] = {
        {&m->dres, "d residual", 1, BT * C},      {&m->dln, "d ln", 1, BT * C},
        {&m->datty, "d atty", 1, BT * C},         {&m->dqkv, "d qkv", 1, BT * 3 * C},
        {&m->dfch, "d fch", 1, dfch_f},           {&m->dfch_gelu, "d fch gelu", 1, dfch_gelu_f},
        {&m->att_d, "att D", 1, BT * NH},
        {&m->bucket, "embedding bucket", 1, wgpt_embedding_bucket_words((uint32_t)BT)},
        {&m->norm_scratch, "norm partials", 1, (wgpt_grad_norm_scratch_bytes(m->g, m->padded_params) + 3) / 4},
        {&m->opt_state, "optimizer state", 1, 4},
        {&m->ln_scratch, "layernorm partials", 1, wgpt_layernorm_scratch_bytes(BT, C) / 4},
    };
    // the f16 mode's copies: act sizes count floats, two halves each
    uint64_t dmost = BT * 4 * C > (uint64_t)m->cls_rows * Vp ? BT * 4 * C : (uint64_t)m->cls_rows * Vp;
    // The f16 attention's backward keeps its dS blocks in d16 (free then: the
    // attention projection's gradient copy is consumed) where they fit one
    // binding, so that its dq kernel does not recompute them (attention.h).
    uint64_t ds = wgpt_attention_ds_bytes(m->B, m->T, (uint32_t)NH);
    m->attn_ds = m->attn16 && ds <= wgpt_gpu_get_info(m->g)->max_storage_binding;
    if (m->attn_ds && dmost < ds / 2) dmost = ds / 2;  // (dmost counts halves)
    const act_spec_ half_fwd[] = {
        {&m->ln1_16, "ln1 f16", Lln, BT * C / 2},     {&m->atty16, "atty f16", L, BT * C / 2},
        {&m->ln2_16, "ln2 f16", Lln, BT * C / 2},     {&m->fchg16, "fch gelu f16", Lgelu, BT * 4 * C / 2},
        {&m->lnf16, "lnf f16", 1, BT * C / 2},
    };
    // the f16 attention's output transposed, a slice a layer where the
    // matmuls take it so (attproj's forward and weight pass: no transposes)
    const act_spec_ attn_half[] = {{&m->qkv16, "qkv f16", L, BT * 3 * C / 2},
                                  {&m->atty16_t, "atty f16 transposed", L, BT * C / 2}};
    uint64_t t_floats = linear_transposed_floats_(m);
    // (without in16_t the attention writes that copy, unread, into inp_t16)
    if (m->attn16 && !m->in16_t && t_floats < BT * C / 2) t_floats = BT * C / 2;
    const act_spec_ inp_t[] = {{&m->inp_t16, "matmul input f16 transposed", 1, t_floats}};
    // the f32 GELU output: fp32 only (f16 writes the fcproj input's f16 copy directly)
    const act_spec_ gelu_f32[] = {{&m->fch_gelu, "fch gelu", Lgelu, BT * 4 * C}};
    const act_spec_ half_bwd[] = {{&m->d16, "gradient f16", 1, dmost / 2}};
    const int act = WGPT_MEM_ACTIVATIONS, scratch = WGPT_MEM_SCRATCH;
    if (alloc_list_(m, forward, sizeof forward / sizeof forward[0], act) < 0) return -1;
    if (!f16 && alloc_list_(m, gelu_f32, 1, act) < 0) return -1;
    if (f16 && alloc_list_(m, half_fwd, sizeof half_fwd / sizeof half_fwd[0], act) < 0) return -1;
    if (m->attn16 && alloc_list_(m, attn_half, m->in16_t ? 2 : 1, act) < 0) return -1;
    if (inp_t[0].floats && alloc_list_(m, inp_t, 1, scratch) < 0) return -1;
    if (!m->training) return 0;
    if (alloc_list_(m, backward, sizeof backward / sizeof backward[0], scratch) < 0) return -1;
    return f16 ? alloc_list_(m, half_bwd, 1, scratch) : 0;
}

#define P(t, l) wgpt_gpt2_mview_(m, (t), (l))
#define D(t, l) wgpt_gpt2_pview_(m, m->grads, (t), (l))
#define A(act, l) wgpt_gpt2_aview_(&m->act, (l))
#define P16(t, l) wgpt_gpt2_p16view_(m, (t), (l))

// The f16 forward on an input whose f16 copy is already in in16.
static int linear_fwd16_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view in16, int w, uint32_t l, wgpt_view bias,
                         uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_f16_forward(m->g, op, out, in16, P16(w, l), bias, N, C, OC, A(inp_t16, 0), A(mm_scratch, 0)));
    return 0;
}

// One LayerNorm's forward tensors: out, mean, rstd, the f16 copy the next
// linear reads (in16), and its weight and bias (tensors w and b of layer l).
typedef struct ln_fwd {
    wgpt_view out, mean, rstd, in16;
    int w, b;
    uint32_t l;
    int t16;  // in16_t and not the chunked classifier's lnf: only the transposed f16 copy is written
} ln_fwd;

static ln_fwd ln1_(wgpt_gpt2 *m, uint32_t l) {
    return (ln_fwd){A(ln1, l), A(ln1_mean, l), A(ln1_rstd, l), A(ln1_16, l), WGPT_LN1W, WGPT_LN1B, l, m->in16_t};
}
static ln_fwd ln2_(wgpt_gpt2 *m, uint32_t l) {
    return (ln_fwd){A(ln2, l), A(ln2_mean, l), A(ln2_rstd, l), A(ln2_16, l), WGPT_LN2W, WGPT_LN2B, l, m->in16_t};
}
// The LayerNorm that reads block l's output: the next block's ln1, or lnf.
static ln_fwd ln_after_(wgpt_gpt2 *m, uint32_t l) {
    if (l + 1 < m->c.num_layers) return ln1_(m, l + 1);
    // (the chunked classifier reads rows of lnf: its f32 values, cast then)
    return (ln_fwd){A(lnf, 0), A(lnf_mean, 0), A(lnf_rstd, 0), A(lnf16, 0), WGPT_LNFW, WGPT_LNFB, 0,
                    m->in16_t && !m->cls_chunked};
}

// Where the linears take their inputs transposed (in16_t): the LayerNorm's
// f16 copy, straight from inp and the saved statistics in one pass (the same
// halves as casting out: out is a token then, which nothing reads).
static int layernorm_f16_fwd_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    GPU_OK(m, wgpt_layernorm_f16_transpose(m->g, op, ln->in16, inp, ln->mean, ln->rstd, P(ln->w, ln->l),
                                           P(ln->b, ln->l), BT, C));
    return 0;
}

// One LayerNorm's forward: out, mean and rstd; where in16_t, mean and rstd,
// then the f16 copy (layernorm_f16_fwd_).
static int layernorm_fwd_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    wgpt_view stats_only = {NULL, 0, 0};
    GPU_OK(m, wgpt_layernorm_forward(m->g, op, ln->t16 ? stats_only : ln->out, ln->mean, ln->rstd, inp,
                                     P(ln->w, ln->l), P(ln->b, ln->l), BT, C));
    return ln->t16 ? layernorm_f16_fwd_(m, op, ln, inp) : 0;
}

// res = a + b, then the LayerNorm that reads res (layernorm_fwd_). Where only
// its statistics are kept (in16_t) one kernel writes res and them, so res is
// not read back (wgpt_layernorm_residual_stats: the same floats).
static int residual_layernorm_fwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view res, wgpt_view a, wgpt_view b,
                                   const ln_fwd *ln) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (!ln->t16) {
        GPU_OK(m, wgpt_residual_forward(m->g, op, res, a, b, (uint64_t)BT * C));
        return layernorm_fwd_(m, op, ln, res);
    }
    GPU_OK(m, wgpt_layernorm_residual_stats(m->g, op, res, ln->mean, ln->rstd, a, b, BT, C));
    return layernorm_f16_fwd_(m, op, ln, res);
}

// The f16 forward whose matmul also writes an f16 result in its epilogue
// (epi_; linear_f16.h wgpt_out16), on the input's transposed f16 copy (in16_t),
// which its LayerNorm wrote (layernorm_fwd_).
static int linear_fwd_t16_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view out16, wgpt_out16 kind, wgpt_view in16,
                           int w, uint32_t l, wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC) {
    GPU_OK(m, wgpt_linear_f16_forward_t16(m->g, op, out, out16, kind, in16, P16(w, l), bias, N, C, OC));
    return 0;
}

// 1 if in16 holds its input transposed (alloc_acts_: m->in16_t).
static int in16_t_(const wgpt_gpt2 *m, wgpt_view in16) { return m->in16_t && in16.buf != m->atty16.buf; }

// One linear's forward: in fp32 the f32 kernels; in f16 the input's f16 copy
// (kept in in16 for the backward, transposed where in16_t_: there the
// LayerNorm before it wrote that copy, layernorm_fwd_) times the weight's.
static int linear_fwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view out, wgpt_view inp, wgpt_view in16, int w, uint32_t l,
                       wgpt_view bias, uint32_t N, uint32_t C, uint32_t OC) {
    wgpt_gpu *g = m->g;
    if (m->precision == WGPT_PRECISION_FP32)
        GPU_OK(m, wgpt_linear_forward(g, op, out, inp, P(w, l), bias, N, C, OC, A(mm_scratch, 0)));
    else if (in16_t_(m, in16)) {
        GPU_OK(m, wgpt_linear_f16_forward_t(g, op, out, in16, P16(w, l), bias, N, C, OC, A(mm_scratch, 0)));
    } else {
        GPU_OK(m, wgpt_cast_f16(g, op, in16, inp, (uint64_t)N * C));
        return linear_fwd16_(m, op, out, in16, w, l, bias, N, C, OC);
    }
    return 0;
}

// d16 trimmed to an (N, OC) gradient's f16 copy.
static wgpt_view d16_view_(const wgpt_gpt2 *m, uint32_t N, uint32_t OC) {
    wgpt_view d16 = A(d16, 0);
    d16.size = (uint64_t)N * OC * 2;
    return d16;
}

// The f16 backward's two matmuls on the gradient's f16 copy already in d16
// (d16_view_, or elsewhere: mlp_bwd16_).
static int linear_bwd16_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, uint32_t l, wgpt_view d16, wgpt_view in16,
                         uint32_t N, uint32_t C, uint32_t OC) {
    wgpt_gpu *g = m->g;
    GPU_OK(m, wgpt_linear_f16_backward_input(g, op, dinp, d16, P16(w, l), N, C, OC, 0, A(mm_scratch, 0)));
    if (in16_t_(m, in16))
        GPU_OK(m, wgpt_linear_f16_backward_weight_t(g, op, D(w, l), d16, in16, N, C, OC, A(mm_scratch, 0)));
    else
        GPU_OK(m, wgpt_linear_f16_backward_weight(g, op, D(w, l), d16, in16, N, C, OC, A(inp_t16, 0),
                                                  A(mm_scratch, 0)));
    return 0;
}

// The f16 backward of a linear whose gradient's f16 copy is already in d16:
// the two matmuls, and the bias gradient from the f32 gradient.
static int linear_bwd16_bias_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, uint32_t l, wgpt_view dbias,
                              wgpt_view dout, wgpt_view d16, wgpt_view in16, uint32_t N, uint32_t C, uint32_t OC) {
    if (linear_bwd16_(m, op, dinp, w, l, d16, in16, N, C, OC) < 0) return -1;
    if (dbias.buf) GPU_OK(m, wgpt_linear_backward_bias(m->g, op, dbias, dout, N, OC, A(mm_scratch, 0)));
    return 0;
}

// One linear's backward (dinp overwritten, dweight and dbias accumulated); in
// f16 the gradient's f16 copy times the weight's and the input's, the bias
// gradient from the f32 gradient.
static int linear_bwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view dinp, int w, uint32_t l, wgpt_view dbias, wgpt_view dout,
                       wgpt_view inp, wgpt_view in16, uint32_t N, uint32_t C, uint32_t OC) {
    wgpt_gpu *g = m->g;
    if (m->precision == WGPT_PRECISION_FP32) {
        GPU_OK(m, wgpt_linear_backward(g, op, dinp, D(w, l), dbias, dout, inp, P(w, l), N, C, OC, 0,
                                       A(mm_scratch, 0)));
        return 0;
    }
    // the gradient's f16 copy for the matmuls and the bias gradient in one pass over it
    if (dbias.buf)
        GPU_OK(m, wgpt_linear_backward_bias_cast(g, op, dbias, d16_view_(m, N, OC), dout, N, OC, A(mm_scratch, 0)));
    else
        GPU_OK(m, wgpt_cast_f16(g, op, d16_view_(m, N, OC), dout, (uint64_t)N * OC));
    return linear_bwd16_(m, op, dinp, w, l, d16_view_(m, N, OC), in16, N, C, OC);
}

// Layer l's MLP backward in f16 with the GELU' epilogue (epi_,
// WGPT_EPI_GELU_GRAD): fcproj's gradient's f16 copy with its bias gradient,
// its weight pass, then its input pass with the GELU's backward in the same
// dispatch (linear_f16.h), which writes d fch and its f16 copy (into inp_t16:
// d16 holds fcproj's gradient, which that pass reads); then fc's passes on it.
static int mlp_bwd16_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    wgpt_gpu *g = m->g;
    uint32_t C = m->c.channels, BT = m->B * m->T;
    wgpt_view d16 = d16_view_(m, BT, C), g16 = A(inp_t16, 0), scratch = A(mm_scratch, 0);
    g16.size = (uint64_t)BT * 4 * C * 2;
    GPU_OK(m, wgpt_linear_backward_bias_cast(g, op, D(WGPT_FCPROJB, l), d16, A(dres, 0), BT, C, scratch));
    GPU_OK(m, wgpt_linear_f16_backward_weight_t(g, op, D(WGPT_FCPROJW, l), d16, A(fchg16, l), BT, 4 * C, C, scratch));
    GPU_OK(m, wgpt_linear_f16_backward_input_gelu(g, op, A(dfch, 0), g16, A(fch, l), d16, P16(WGPT_FCPROJW, l), BT,
                                                  4 * C, C));
    return linear_bwd16_bias_(m, op, A(dln, 0), WGPT_FCW, l, D(WGPT_FCB, l), A(dfch, 0), g16, A(ln2_16, l), BT, C,
                              4 * C);
}

// Layer l's GELU output: what fcproj multiplies, from fch (the forward's, and
// the backward's recomputation: the same kernel, the same values).
static int gelu_fwd_(wgpt_gpt2 *m, wgpt_op *op, uint32_t l) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (m->precision == WGPT_PRECISION_F16 && m->in16_t) {
        // the f16 copy the fcproj matmul reads, straight from the GELU, transposed in the same pass
        // (as the fc matmul's GELU epilogue rounds it, WGPT_EPI_GELU)
        GPU_OK(m, wgpt_gelu_f16_transpose(m->g, op, A(fchg16, l), A(fch, l), BT, 4 * C));
    } else if (m->precision == WGPT_PRECISION_F16) {
        // the same row-major (check_f16_: 8 | C)
        GPU_OK(m, wgpt_gelu_forward_f16(m->g, op, A(fchg16, l), A(fch, l), (uint64_t)BT * 4 * C));
    } else {
        GPU_OK(m, wgpt_gelu_forward(m->g, op, A(fch_gelu, l), A(fch, l), (uint64_t)BT * 4 * C));
    }
    return 0;
}

// A LayerNorm's output again in the backward (wgpt_recompute ALL) from its
// input and the statistics of the forward: where only its transposed f16
// copy is kept, the forward's own kernel on the saved mean and rstd; else
// the forward's LayerNorm (which writes the same statistics again) and, in
// f16, the cast the linear after it made.
static int layernorm_again_(wgpt_gpt2 *m, wgpt_op *op, const ln_fwd *ln, wgpt_view inp) {
    uint32_t BT = m->B * m->T, C = m->c.channels;
    if (ln->t16) return layernorm_f16_fwd_(m, op, ln, inp);
    if (layernorm_fwd_(m, op, ln, inp) < 0) return -1;
    if (m->precision == WGPT_PRECISION_F16) GPU_OK(m, wgpt_cast_f16(m->g, op, ln->in16, ln->out, (uint64_t)BT * C));
    return 0;
}

static int build_forward_(wgpt_gpt2 *m) {
    wgpt_gpu *g = m->g;
    wgpt_op *op = &m->fwd;
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads, BT = B * T;
    uint32_t V = m->c.vocab_size, Vp = m->c.padded_vocab_size;
    wgpt_view none = {NULL, 0, 0};
    GPU_OK(m, wgpt_encoder_forward(g, op, A(encoded, 0), A(status, 0), A(tokens, 0), P(WGPT_WTE, 0),
                                   P(WGPT_WPE, 0), B, T, C, V, Vp));
    // Each residual add runs with the LayerNorm that reads its result
    // (residual_layernorm_fwd_): ln2 in the block, the next block's ln1 or lnf
    // at its end; only the first ln1 reads the embeddings.
    ln_fwd ln = ln1_(m, 0);
    if (layernorm_fwd_(m, op, &ln, A(encoded, 0)) < 0) return -1;
    for (uint32_t l = 0; l < m->c.num_layers; l++) {
        wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
        // The f16 epilogues (epi_) are off unless asked for: each was slower
        // than the pass it saves on an H100 (17d4ba4:bench/RESULTS.md sections 22, 23; the
        // rounding one was timed only beside the GELU ones)
        if (epi_(m, WGPT_EPI_ROUND)) {  // the matmul writes qkv16 itself: no f32 qkv, no cast
            if (linear_fwd_t16_(m, op, none, A(qkv16, l), WGPT_OUT16_COPY, A(ln1_16, l), WGPT_QKVW, l, P(WGPT_QKVB, l),
                                BT, C, 3 * C) < 0)
                return -1;
        } else {
            if (linear_fwd_(m, op, A(qkv, l), A(ln1, l), A(ln1_16, l), WGPT_QKVW, l, P(WGPT_QKVB, l), BT, C, 3 * C) < 0)
                return -1;
            if (m->attn16) GPU_OK(m, wgpt_cast_f16(g, op, A(qkv16, l), A(qkv, l), (uint64_t)BT * 3 * C));
        }
        if (m->attn16) {
            // the attention writes atty16 and its transpose (the attproj forward's
            // input: kept for its weight pass, in16_t) itself: no cast, no transpose
            wgpt_view t = m->in16_t ? A(atty16_t, l) : A(inp_t16, 0);
            t.size = (uint64_t)BT * C * 2;
            GPU_OK(m, wgpt_attention_forward_f16(g, op, A(atty16, l), t, A(att_lse, l), A(qkv16, l), B, T, C, NH));
            if (m->in16_t)
                GPU_OK(m, wgpt_linear_f16_forward_t(g, op, A(attproj, l), t, P16(WGPT_ATTPROJW, l), P(WGPT_ATTPROJB, l),
                                                    BT, C, C, A(mm_scratch, 0)));
            else if (linear_fwd16_(m, op, A(attproj, l), A(atty16, l), WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT, C,
                                   C) < 0)
                return -1;
        } else {
            GPU_OK(m, wgpt_attention_forward(g, op, A(atty, l), A(att_lse, l), A(qkv, l), B, T, C, NH));
            if (linear_fwd_(m, op, A(attproj, l), A(atty, l), A(atty16, l), WGPT_ATTPROJW, l, P(WGPT_ATTPROJB, l), BT,
                            C, C) < 0)
                return -1;
        }
        ln = ln2_(m, l);
        if (residual_layernorm_fwd_(m, op, A(res2, l), residual, A(attproj, l), &ln) < 0) return -1;
        int f16 = m->precision == WGPT_PRECISION_F16;
        if (epi_(m, WGPT_EPI_GELU)) {
            // fch, and its GELU's f16 copy transposed (fcproj's input), both from the fc matmul
            if (linear_fwd_t16_(m, op, A(fch, l), A(fchg16, l), WGPT_OUT16_GELU_T, A(ln2_16, l), WGPT_FCW, l,
                                P(WGPT_FCB, l), BT, C, 4 * C) < 0)
                return -1;
        } else {
            if (linear_fwd_(m, op, A(fch, l), A(ln2, l), A(ln2_16, l), WGPT_FCW, l, P(WGPT_FCB, l), BT, C, 4 * C) < 0)
                return -1;
            if (gelu_fwd_(m, op, l) < 0) return -1;
        }
        if (f16 && m->in16_t)
            GPU_OK(m, wgpt_linear_f16_forward_t(g, op, A(fcproj, l), A(fchg16, l), P16(WGPT_FCPROJW, l),
                                                P(WGPT_FCPROJB, l), BT, 4 * C, C, A(mm_scratch, 0)));
        else if (f16) {
            if (linear_fwd16_(m, op, A(fcproj, l), A(fchg16, l), WGPT_FCPROJW, l, P(WGPT_FCPROJB, l), BT, 4 * C, C) < 0)
                return -1;
        } else if (linear_fwd_(m, op, A(fcproj, l), A(fch_gelu, l), A(fchg16, l), WGPT_FCPROJW, l, P(WGPT_FCPROJB, l),
                               BT, 4 * C, C) < 0)
            return -1;
        ln = ln_after_(m, l);
        if (residual_layernorm_fwd_(m, op, A(res3, l), A(res2, l), A(fcproj, l), &ln) < 0) return -1;
    }
    if (m->cls_chunked) {
        // a training step's forward ends here: its backward runs the classifier (build_backward_)
        if (m->precision == WGPT_PRECISION_F16) GPU_OK(m, wgpt_cast_f16(g, op, A(lnf16, 0), A(lnf, 0), (uint64_t)BT * C));
        m->fwd_train_n = op->n;
        return wgpt_gpt2_classifier_(m, op, 0);
    }
    if (linear_fwd_(m, op, A(logits, 0), A(lnf, 0), A(lnf16, 0), WGPT_WTE, 0, none, BT, C, Vp) < 0) return -1;
    GPU_OK(m, wgpt_crossentropy_forward(g, op, A(losses, 0), A(ce_lse, 0), A(status, 0), A(logits, 0), A(targets, 0),
                                        BT, V, Vp));
    GPU_OK(m, wgpt_loss_mean(g, op, A(loss, 0), A(losses, 0), BT));
    m->fwd_train_n = op->n;
    return 0;
}

static int build_backward_(wgpt_gpt2 *m) {
    wgpt_gpu *g = m->g;
    wgpt_op *op = &m->bwd;
    uint32_t B = m->B, T = m->T, C = m->c.channels, NH = m->c.num_heads, BT = B * T;
    uint32_t Vp = m->c.padded_vocab_size;
    wgpt_view none = {NULL, 0, 0};
    uint32_t last = m->c.num_layers - 1;
    // the classifier and the loss, chunk by chunk, with their gradient
    // (times the loss scale, 1 in fp32) into d lnf and d wte
    if (wgpt_gpt2_classifier_(m, op, 1) < 0) return -1;
    // dres accumulates the residual stream's gradient from here down
    GPU_OK(m, wgpt_layernorm_backward(g, op, A(dres, 0), D(WGPT_LNFW, 0), D(WGPT_LNFB, 0), A(dln, 0), A(res3, last),
                                      P(WGPT_LNFW, 0), A(lnf_mean, 0), A(lnf_rstd, 0), BT, C,
                                      A(ln_scratch, 0)));
    m->bwd_cut[0] = op->n;  // segment 0 ends: lnfw and lnfb are final
    for (int li = (int)last; li >= 0; li--) {
        uint32_t l = (uint32_t)li;
        wgpt_view residual = l == 0 ? A(encoded, 0) : A(res3, l - 1);
        // what the forward did not keep of this layer (wgpt_recompute), into
        // the slices every layer shares: the GELU's output, the LayerNorms'
        if (m->recompute >= WGPT_RECOMPUTE_GELU && gelu_fwd_(m, op, l) < 0) return -1;
        if (m->recompute >= WGPT_RECOMPUTE_ALL) {
            ln_fwd ln2 = ln2_(m, l), ln1 = ln1_(m, l);
            if (layernorm_again_(m, op, &ln2, A(res2, l)) < 0 || layernorm_again_(m, op, &ln1, residual) < 0) return -1;
        }
        // res3 = res2 + fcproj: d fcproj = dres
        if (epi_(m, WGPT_EPI_GELU_GRAD)) {
            if (mlp_bwd16_(m, op, l) < 0) return -1;
        } else {
            if (linear_bwd_(m, op, A(dfch_gelu, 0), WGPT_FCPROJW, l, D(WGPT_FCPROJB, l), A(dres, 0), A(fch_gelu, l),
                            A(fchg16, l), BT, 4 * C, C) < 0)
                return -1;
            if (m->precision == WGPT_PRECISION_F16) {
                // the GELU's gradient as fc's bias gradient and f16 copy, in one pass
                // over d fch gelu (check_f16_: 8 | C)
                GPU_OK(m, wgpt_linear_backward_bias_gelu_cast(g, op, D(WGPT_FCB, l), d16_view_(m, BT, 4 * C),
                                                              A(dfch, 0), A(dfch_gelu, 0), A(fch, l), BT, 4 * C,
                                                              A(mm_scratch, 0)));
                if (linear_bwd16_(m, op, A(dln, 0), WGPT_FCW, l, d16_view_(m, BT, 4 * C), A(ln2_16, l), BT, C, 4 * C) < 0)
                    return -1;
            } else {
                GPU_OK(m, wgpt_gelu_backward(g, op, A(dfch, 0), A(fch, l), A(dfch_gelu, 0), (uint64_t)BT * 4 * C));
                if (linear_bwd_(m, op, A(dln, 0), WGPT_FCW, l, D(WGPT_FCB, l), A(dfch, 0), A(ln2, l), A(ln2_16, l), BT,
                                C, 4 * C) < 0)
                    return -1;
            }
        }
        GPU_OK(m, wgpt_layernorm_backward(g, op, A(dres, 0), D(WGPT_LN2W, l), D(WGPT_LN2B, l), A(dln, 0), A(res2, l),
                                          P(WGPT_LN2W, l), A(ln2_mean, l), A(ln2_rstd, l), BT, C,
                                          A(ln_scratch, 0)));
        // res2 = residual + attproj: d attproj = dres (now d res2)
        // (its weight pass on the attention's transposed copy where there is one)
        wgpt_view atty16 = m->attn16 && m->in16_t ? A(atty16_t, l) : A(atty16, l);
        if (linear_bwd_(m, op, A(datty, 0), WGPT_ATTPROJW, l, D(WGPT_ATTPROJB, l), A(dres, 0), A(atty, l), atty16, BT,
                        C, C) < 0)
            return -1;
        if (m->attn16)
            GPU_OK(m, wgpt_attention_backward_f16(g, op, A(dqkv, 0), A(att_d, 0), A(datty, 0), A(qkv16, l),
                                                  A(atty16, l), A(att_lse, l), m->attn_ds ? A(d16, 0) : none, B, T,
                                                  C, NH));
        else
            GPU_OK(m, wgpt_attention_backward(g, op, A(dqkv, 0), A(att_d, 0), A(datty, 0), A(qkv, l), A(atty, l),
                                              A(att_lse, l), B, T, C, NH));
        if (linear_bwd_(m, op, A(dln, 0), WGPT_QKVW, l, D(WGPT_QKVB, l), A(dqkv, 0), A(ln1, l), A(ln1_16, l), BT, C,
                        3 * C) < 0)
            return -1;
        GPU_OK(m, wgpt_layernorm_backward(g, op, A(dres, 0), D(WGPT_LN1W, l), D(WGPT_LN1B, l), A(dln, 0), residual,
                                          P(WGPT_LN1W, l), A(ln1_mean, l), A(ln1_rstd, l), BT, C,
                                          A(ln_scratch, 0)));
        m->bwd_cut[1 + last - l] = op->n;  // layer l's 12 tensors are final
    }
    GPU_OK(m, wgpt_encoder_backward(g, op, D(WGPT_WTE, 0), D(WGPT_WPE, 0), A(dres, 0), A(bucket, 0), B, T, C, Vp));
    m->bwd_cut[last + 2] = op->n;
    return 0;
}

static int build_optimizer_(wgpt_gpt2 *m, const wgpt_adamw_config *o) {
    wgpt_gpu *g = m->g;
    wgpt_view all_g = {m->grads, 0, 0};
    GPU_OK(m, wgpt_grad_norm(g, &m->opt, all_g, m->padded_params, A(norm_scratch, 0), A(opt_state, 0),
                             o->max_grad_norm, &m->norm_handle));
    m->opt_update_from = m->opt.n;
    // the split update's norm: this shard's gradients only (its offset is 256-byte aligned)
    wgpt_view shard_g = {m->grads, m->shard_off * 4, m->shard_n * 4};
    GPU_OK(m, wgpt_grad_norm(g, &m->shard_norm, shard_g, m->shard_n, A(norm_scratch, 0), A(opt_state, 0),
                             o->max_grad_norm, &m->shard_norm_handle));
    // decay the 2D weights only, as GPT-2 training does
    static const int decayed[] = {WGPT_WTE, WGPT_WPE, WGPT_QKVW, WGPT_ATTPROJW, WGPT_FCW, WGPT_FCPROJW};
    // Only the shard's part of each tensor, counted from the shard's start:
    // the params and grads views start there, the moments hold the shard alone.
    wgpt_adamw_range r[WGPT_GPT2_NUM_TENSORS];
    uint64_t s0 = m->shard_off, s1 = m->shard_off + m->shard_n;
    for (int t = 0; t < WGPT_GPT2_NUM_TENSORS; t++) {
        float wd = 0;
        for (size_t i = 0; i < sizeof decayed / sizeof decayed[0]; i++)
            if (decayed[i] == t) wd = o->weight_decay;
        uint64_t b = m->pt[t].base, e = b + m->pt[t].stride * m->pt[t].slices;
        b = b > s0 ? b : s0, e = e < s1 ? e : s1;
        r[t] = (wgpt_adamw_range){b < e ? b - s0 : 0, b < e ? e - b : 0, wd};
    }
    wgpt_adamw_hparams hp = {o->lr, o->beta1, o->beta2, o->eps, 1};
    // the shard is contiguous in the masters too (gpt2_masters.c)
    wgpt_view pv = {m->params, wgpt_gpt2_master_at_(m, s0) * 4, m->shard_n * 4}, gv = {m->grads, s0 * 4, m->shard_n * 4};
    wgpt_view mv = {m->adam_m, 0, 0}, vv = {m->adam_v, 0, 0};
    if (m->precision == WGPT_PRECISION_F16) {  // AdamW writes the f16 copy of what it updates, the cast's rounding
        wgpt_view p16 = {m->params16, s0 * 2, m->shard_n * 2};
        GPU_OK(m, wgpt_adamw_update_f16(g, &m->opt, pv, p16, gv, mv, vv, A(opt_state, 0), r, WGPT_GPT2_NUM_TENSORS,
                                        &hp, &m->adamw));
    } else {
        GPU_OK(m, wgpt_adamw_update(g, &m->opt, pv, gv, mv, vv, A(opt_state, 0), r, WGPT_GPT2_NUM_TENSORS, &hp,
                                    &m->adamw));
    }
    m->opt_cfg = *o;
    return 0;
}

// params16 = f16(params): after every change of the parameters.
static int build_cast_(wgpt_gpt2 *m) {
    wgpt_view d = {m->params16, 0, 0}, src = {m->params, 0, 0};
    GPU_OK(m, wgpt_cast_f16(m->g, &m->cast, d, src, m->padded_params));
    return 0;
}

// After an upload of the parameters (AdamW writes the f16 copy of what it
// updates itself: adamw_update_f16).
int wgpt_gpt2_refresh_f16_(wgpt_gpt2 *m) {
    // split masters: uploads cast their own
    if (m->precision != WGPT_PRECISION_F16 || m->shared || m->split_masters) return 0;
    GPU_OK(m, wgpt_op_record(m->g, &m->cast));
    return 0;
}

static wgpt_gpt2 *create_(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, int training,
                          const wgpt_gpt2 *share, wgpt_precision precision, uint32_t shard, uint32_t nshards,
                          wgpt_recompute recompute, char *err, size_t errlen) {
    if (wgpt_gpt2_check_shape(c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, errlen)) return NULL;
    if (!training && wgpt_gpt2_check_logits(c, B, T, wgpt_gpu_get_info(g)->max_buffer, err, errlen)) return NULL;
    wgpt_gpt2 *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    m->g = g;
    m->c = *c;
    m->B = B;
    m->T = T;
    m->training = training;
    m->recompute = training ? recompute : WGPT_RECOMPUTE_NONE;
    m->shared = share != NULL;
    if (share) m->params = share->params, m->params16 = share->params16;
    wgpt_op_init(&m->fwd);
    wgpt_op_init(&m->bwd);
    wgpt_op_init(&m->opt);
    wgpt_op_init(&m->shard_norm);
    wgpt_op_init(&m->cast);
    wgpt_gpt2_layout_params_(m);
    m->shard = shard, m->nshards = nshards;
    shard_range_(m->padded_params, shard, nshards, &m->shard_off, &m->shard_n);
    if (m->shard_n == 0) {  // more ranks than 64-float blocks: a rank would have nothing to update
        snprintf(err, errlen, "%llu parameters cannot be split into %u optimizer shards of 64-float blocks: use "
                 "fewer ranks or a larger model", (unsigned long long)m->padded_params, nshards);
        free(m);
        return NULL;
    }
    m->cls_chunked = training;
    m->cls_rows = training ? wgpt_gpt2_cls_rows_(m) : B * T;
    if (!m->cls_rows) {  // (a single tensor that cannot be split)
        snprintf(err, errlen, "64 rows of the logits (%llu bytes) exceed the device's binding limit of %llu bytes",
                 (unsigned long long)(64ull * c->padded_vocab_size * 4),
                 (unsigned long long)wgpt_gpu_get_info(g)->max_storage_binding);
        free(m);
        return NULL;
    }
    if (precision == WGPT_PRECISION_AUTO) {  // f16 where tensor cores make it pay and the shape allows it
        precision = WGPT_PRECISION_FP32;
        if (wgpt_precision_auto(wgpt_gpu_get_info(g)) == WGPT_PRECISION_F16 && check_f16_(m) == 0)
            precision = WGPT_PRECISION_F16;
        m->err[0] = 0;
    }
    m->precision = precision;
    m->loss_scale = precision == WGPT_PRECISION_F16 && training ? WGPT_LOSS_SCALE_INIT : 1.0f;
    if (training) {
        m->bwd_cut = calloc((size_t)c->num_layers + 2, sizeof *m->bwd_cut);
        m->seg_read = calloc((size_t)c->num_layers + 2, sizeof *m->seg_read);
        if (!m->bwd_cut || !m->seg_read) {
            snprintf(err, errlen, "out of host memory");
            wgpt_gpt2_free(m);
            return NULL;
        }
    }
    int f16 = precision == WGPT_PRECISION_F16;
    // f16 ZeRO-1: the fp32 matmul weights of this shard only (gpt2_masters.c);
    // an inference instance reads the masters where its training model keeps them
    if (share) {
        m->split_masters = share->split_masters, m->keep_lo = share->keep_lo, m->keep_hi = share->keep_hi;
        m->master_floats = share->master_floats;
        if (m->split_masters && !f16) {
            snprintf(err, errlen, "an inference instance of %u x %u positions would run in fp32 (f16 takes a "
                     "multiple of 8), but its training model keeps only its shard of the fp32 matmul weights "
                     "(ZeRO-1 in f16)", B, T);
            wgpt_gpt2_free(m);
            return NULL;
        }
    } else {
        wgpt_gpt2_layout_masters_(m, f16 && training && nshards > 1);
    }
    // A forward-only model prepares its forward (and compiles its kernels) at
    // its first forward: a command that decodes with the KV cache
    // (model/gpt2_decode.h) never runs it. Training builds the backward on it.
    int tag = wgpt_gpu_mem_tag(g, WGPT_MEM_SCRATCH);
    int rc = (f16 && check_f16_(m) < 0) || alloc_params_(m) < 0 || alloc_acts_(m) < 0;
    wgpt_gpu_mem_tag(g, tag);
    if (rc || (m->training && build_forward_(m) < 0) || (m->training && build_backward_(m) < 0) ||
        (f16 && !m->shared && !m->split_masters && build_cast_(m) < 0)) {
        snprintf(err, errlen, "%s", m->err);
        wgpt_gpt2_free(m);
        return NULL;
    }
    return m;
}

wgpt_gpt2 *wgpt_gpt2_create(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                            size_t errlen) {
    return create_(g, c, B, T, 1, NULL, WGPT_PRECISION_FP32, 0, 1, WGPT_RECOMPUTE_NONE, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_precision(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, int training,
                                      wgpt_precision precision, char *err, size_t errlen) {
    return create_(g, c, B, T, training != 0, NULL, precision, 0, 1, WGPT_RECOMPUTE_NONE, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_sharded(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                    wgpt_precision precision, uint32_t shard, uint32_t nshards, char *err,
                                    size_t errlen) {
    if (nshards < 1 || shard >= nshards) {
        snprintf(err, errlen, "optimizer shard %u of %u: the shard must be below the count (>= 1)", shard, nshards);
        return NULL;
    }
    return create_(g, c, B, T, 1, NULL, precision, shard, nshards, WGPT_RECOMPUTE_NONE, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_opts(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                 const wgpt_gpt2_opts *o, char *err, size_t errlen) {
    uint32_t n = o->nshards ? o->nshards : 1;
    if (o->shard >= n) {
        snprintf(err, errlen, "optimizer shard %u of %u: the shard must be below the count (>= 1)", o->shard, n);
        return NULL;
    }
    if ((unsigned)o->recompute > WGPT_RECOMPUTE_AUTO) {
        snprintf(err, errlen, "recompute %d: none, gelu, all or auto", (int)o->recompute);
        return NULL;
    }
    if (o->recompute != WGPT_RECOMPUTE_AUTO || !o->training)
        return create_(g, c, B, T, o->training != 0, NULL, o->precision, o->shard, n,
                       o->recompute == WGPT_RECOMPUTE_AUTO ? WGPT_RECOMPUTE_NONE : o->recompute, err, errlen);
    // auto: the fastest that fits, trying again with less kept only where
    // the GPU's memory ran out (WebGPU cannot say beforehand how much there is)
    wgpt_gpt2 *m = NULL;
    for (int r = WGPT_RECOMPUTE_NONE; !m && r <= WGPT_RECOMPUTE_ALL; r++) {
        m = create_(g, c, B, T, 1, NULL, o->precision, o->shard, n, (wgpt_recompute)r, err, errlen);
        if (!m && !strstr(err, "out of GPU memory")) break;
    }
    return m;
}

wgpt_gpt2 *wgpt_gpt2_create_forward_only(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                                         size_t errlen) {
    return create_(g, c, B, T, 0, NULL, WGPT_PRECISION_FP32, 0, 1, WGPT_RECOMPUTE_NONE, err, errlen);
}

wgpt_gpt2 *wgpt_gpt2_create_inference(wgpt_gpt2 *train, uint32_t B, uint32_t T, char *err, size_t errlen) {
    wgpt_precision p = train->precision;
    // f16 takes rows in eights; the fp32 forward reads the same f32 parameters
    if (p == WGPT_PRECISION_F16 && ((uint64_t)B * T) % 8) p = WGPT_PRECISION_FP32;
    return create_(train->g, &train->c, B, T, 0, train, p, 0, 1, WGPT_RECOMPUTE_NONE, err, errlen);
}

void wgpt_gpt2_free(wgpt_gpt2 *m) {
    if (!m) return;
    wgpt_adamw_free(m->adamw);
    wgpt_op_free(&m->fwd);
    wgpt_op_free(&m->bwd);
    wgpt_op_free(&m->opt);
    wgpt_op_free(&m->shard_norm);
    wgpt_op_free(&m->cast);
    for (uint32_t i = 0; m->seg_read && i < m->c.num_layers + 2; i++) wgpt_readback_free(m->g, m->seg_read[i]);
    free(m->seg_read), free(m->bwd_cut);
    if (!m->shared) wgpt_buf_free(m->params), wgpt_buf_free(m->params16);
    wgpt_buf_free(m->grads);
    wgpt_buf_free(m->adam_m);
    wgpt_buf_free(m->adam_v);
    wgpt_gpt2_act *acts[] = {&m->encoded, &m->ln1, &m->ln1_mean, &m->ln1_rstd, &m->qkv, &m->atty, &m->att_lse,
                             &m->attproj, &m->res2, &m->ln2, &m->ln2_mean, &m->ln2_rstd, &m->fch, &m->fch_gelu,
                             &m->fcproj, &m->res3, &m->lnf, &m->lnf_mean, &m->lnf_rstd, &m->logits, &m->losses,
                             &m->ce_lse, &m->loss, &m->status, &m->dres, &m->dln, &m->datty, &m->dqkv, &m->dfch,
                             &m->dfch_gelu, &m->att_d, &m->tokens, &m->targets, &m->bucket, &m->norm_scratch, &m->mm_scratch,
                             &m->opt_state, &m->ln_scratch, &m->ln1_16, &m->atty16, &m->ln2_16, &m->fchg16,
                             &m->lnf16, &m->d16, &m->qkv16, &m->inp_t16, &m->atty16_t};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) wgpt_buf_free(acts[i]->buf);
    free(m);
}

// Checks ids on the host (names the first bad one) and uploads them as u32.
static int upload_ids_(wgpt_gpt2 *m, wgpt_gpt2_act *dst, const int *ids, const char *what) {
    uint32_t n = m->B * m->T;
    uint32_t *u = malloc(n * sizeof *u);
    if (!u) return wgpt_gpt2_fail_(m, "out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->c.vocab_size) {
            free(u);
            return wgpt_gpt2_fail_(m, "%s id %d at position %u is out of range [0, %u)", what, ids[i], i,
                                   m->c.vocab_size);
        }
        u[i] = (uint32_t)ids[i];
    }
    int rc = wgpt_buf_upload(m->g, dst->buf, 0, u, (uint64_t)n * 4);
    free(u);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}

static int upload_batch_(wgpt_gpt2 *m, const int *tokens, const int *targets) {
    if (!targets) return wgpt_gpt2_fail_(m, "targets are required");
    if (upload_ids_(m, &m->tokens, tokens, "token") < 0 || upload_ids_(m, &m->targets, targets, "target") < 0)
        return -1;
    return 0;
}

// Waits for the recorded work and reads the loss; a kernel-reported bad id is an error.
static int read_loss_(wgpt_gpt2 *m, float *loss) {
    char msg[256];
    int st = wgpt_input_status_check(m->g, A(status, 0), m->c.vocab_size, msg, sizeof msg);
    if (st < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    if (st > 0) return wgpt_gpt2_fail_(m, "%s", msg);
    GPU_OK(m, wgpt_buf_download(m->g, m->loss.buf, 0, loss, 4));
    return 0;
}

int wgpt_gpt2_forward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss) {
    if (m->fwd.n == 0 && build_forward_(m) < 0) return -1;  // (forward-only models: see create_)
    if (upload_batch_(m, tokens, targets) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->fwd));
    return read_loss_(m, loss);
}

// Records the forward of one batch before a backward; zero_grads first
// clears the gradients (the first micro-batch of a step), else they accumulate.
static int record_forward_for_backward_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (upload_batch_(m, tokens, targets) < 0) return -1;
    uint32_t bad = 0;
    uint32_t *u = malloc((size_t)m->B * m->T * sizeof *u);
    if (!u) return wgpt_gpt2_fail_(m, "out of host memory");
    for (uint32_t i = 0; i < m->B * m->T; i++) u[i] = (uint32_t)tokens[i];
    int rc = wgpt_encoder_bucket_upload(m->g, A(bucket, 0), u, m->B * m->T, m->c.vocab_size, &bad);
    free(u);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    GPU_OK(m, wgpt_op_record_range(m->g, &m->fwd, 0, m->fwd_train_n));
    if (zero_grads) GPU_OK(m, wgpt_buf_zero(m->g, m->grads, 0, m->padded_params * 4));
    GPU_OK(m, wgpt_buf_zero(m->g, m->dres.buf, 0, wgpt_buf_size(m->dres.buf)));
    m->seg_next = 0;
    return 0;
}

// The forward and the whole backward of one batch.
static int record_forward_backward_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads) {
    if (record_forward_for_backward_(m, tokens, targets, zero_grads) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->bwd));
    m->seg_next = wgpt_gpt2_grad_segments(m);
    return 0;
}

uint32_t wgpt_gpt2_grad_segments(const wgpt_gpt2 *m) { return m->training ? m->c.num_layers + 2 : 0; }

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
        shard_range_(m->padded_params, j, m->nshards, &o, &n);
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
    if (record_forward_for_backward_(m, tokens, targets, first) < 0) return -1;
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
    return read_loss_(m, loss);
}

int wgpt_gpt2_forward_backward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss) {
    if (record_forward_backward_(m, tokens, targets, 1) < 0) return -1;
    return read_loss_(m, loss);
}

int wgpt_gpt2_accumulate(wgpt_gpt2 *m, const int *tokens, const int *targets, int first, float *loss) {
    if (record_forward_backward_(m, tokens, targets, first) < 0) return -1;
    return read_loss_(m, loss);
}

// The optimizer op is built on first use, and rebuilt if its constants change.
static int ensure_optimizer_(wgpt_gpt2 *m, const wgpt_adamw_config *o) {
    if (m->adamw && o->max_grad_norm == m->opt_cfg.max_grad_norm && o->beta1 == m->opt_cfg.beta1 &&
        o->beta2 == m->opt_cfg.beta2 && o->eps == m->opt_cfg.eps && o->weight_decay == m->opt_cfg.weight_decay)
        return 0;
    wgpt_adamw_free(m->adamw);
    m->adamw = NULL;
    wgpt_op_free(&m->opt);
    wgpt_op_free(&m->shard_norm);
    return build_optimizer_(m, o);
}

// The factor 1/(k * loss scale) the buffer's gradients are seen through when
// k micro-batches were summed (or the loss was scaled), so that clipping and
// AdamW see the gradient of the mean loss: set on the norm's finish (h), which
// folds it into the scale AdamW multiplies by (no pass over the buffer; on an
// H100 that pass took 0.34 ms of a GPT-2 124M f16 step).
static int set_grad_scale_(wgpt_gpt2 *m, const wgpt_grad_norm_handle *h, int k, float skip_norm) {
    m->grad_scale_c = 1.0f / ((float)k * m->loss_scale);
    GPU_OK(m, wgpt_grad_norm_set(m->g, h, skip_norm, m->grad_scale_c));
    return 0;
}

// A new loss scale rebuilds the backward, whose first kernel carries it.
static int use_loss_scale_(wgpt_gpt2 *m, float scale) {
    if (scale == m->loss_scale) return 0;
    m->loss_scale = scale;
    wgpt_op_free(&m->bwd);
    wgpt_op_init(&m->bwd);
    return build_backward_(m);
}

// After an update's state was read back (so no recorded work still uses the
// backward op; the f16 copy of the new parameters was recorded before that):
// the dynamic loss scale, halved by an overflow, doubled after
// WGPT_LOSS_SCALE_INTERVAL clean steps; a new scale rebuilds the backward,
// whose first kernel carries it.
static int after_update_(wgpt_gpt2 *m, const wgpt_optim_state *st, wgpt_step_result *out) {
    out->loss_scale = m->loss_scale;
    if (m->precision != WGPT_PRECISION_F16) return 0;
    float s = m->loss_scale;
    if (st->nonfinite) {
        s = s > 1.0f ? s * 0.5f : 1.0f;
        m->clean_steps = 0;
    } else if (++m->clean_steps >= WGPT_LOSS_SCALE_INTERVAL) {
        s = s < 16777216.0f ? s * 2.0f : s;
        m->clean_steps = 0;
    }
    return use_loss_scale_(m, s);
}

int wgpt_gpt2_update(wgpt_gpt2 *m, const wgpt_adamw_config *o, int t, int accum_steps, wgpt_step_result *out) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    if (ensure_optimizer_(m, o) < 0 || set_grad_scale_(m, &m->norm_handle, accum_steps, o->skip_norm) < 0) return -1;
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    GPU_OK(m, wgpt_op_record(m->g, &m->opt));  // (in f16 AdamW wrote params16 too)
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}

int wgpt_gpt2_update_shard_begin(wgpt_gpt2 *m, const wgpt_adamw_config *o, int accum_steps, double *sumsq,
                                 int *bad) {
    if (!m->training) return wgpt_gpt2_fail_(m, "this model was created for inference only");
    // (no spike test on a shard's norm: it needs the whole norm)
    if (ensure_optimizer_(m, o) < 0 || set_grad_scale_(m, &m->shard_norm_handle, accum_steps, 0) < 0) return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->shard_norm));
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    *sumsq = st.sumsq;
    *bad = st.nonfinite == 1;
    return 0;
}

// The whole norm's decisions as grad_norm_finish makes them (07_optimizer.wgsl),
// in f32: sumsq is already of the gradients times grad_scale (the shards'
// finishes scaled theirs), and the scale AdamW gets carries grad_scale.
static wgpt_optim_state norm_state_(float sumsq, int bad, float max_norm, float skip_norm, float grad_scale) {
    float norm = sqrtf(sumsq), scale = 1.0f;
    int nonfinite = bad || !isfinite(sumsq) || !isfinite(norm);
    int spike = !nonfinite && skip_norm > 0.0f && norm > skip_norm;
    if (!nonfinite && max_norm > 0.0f && norm > max_norm) scale = max_norm / norm;
    return (wgpt_optim_state){sumsq, norm, scale * grad_scale, nonfinite ? 1u : spike ? 2u : 0u};
}

int wgpt_gpt2_update_shard_end(wgpt_gpt2 *m, const wgpt_adamw_config *o, int t, double sumsq, int bad,
                               wgpt_step_result *out) {
    if (!m->training || !m->adamw)
        return wgpt_gpt2_fail_(m, "wgpt_gpt2_update_shard_end without wgpt_gpt2_update_shard_begin");
    wgpt_optim_state st = norm_state_((float)sumsq, bad, m->opt_cfg.max_grad_norm, o->skip_norm, m->grad_scale_c);
    GPU_OK(m, wgpt_buf_upload(m->g, m->opt_state.buf, 0, &st, sizeof st));
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    GPU_OK(m, wgpt_op_record_range(m->g, &m->opt, m->opt_update_from, m->opt.n));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}

int wgpt_gpt2_set_loss_scale(wgpt_gpt2 *m, float scale) { return wgpt_gpt2_restore_loss_scale(m, scale, 0); }

uint32_t wgpt_gpt2_loss_scale_clean_steps(const wgpt_gpt2 *m) { return (uint32_t)m->clean_steps; }

int wgpt_gpt2_restore_loss_scale(wgpt_gpt2 *m, float scale, uint32_t clean_steps) {
    int e;
    if (m->precision != WGPT_PRECISION_F16 || !m->training)
        return wgpt_gpt2_fail_(m, "only an f16 training model has a loss scale");
    if (!(scale >= 1.0f && scale <= 16777216.0f) || frexpf(scale, &e) != 0.5f)
        return wgpt_gpt2_fail_(m, "loss scale %g: must be a power of two in [1, 2^24]", scale);
    if (clean_steps >= WGPT_LOSS_SCALE_INTERVAL)
        return wgpt_gpt2_fail_(m, "loss scale: %u clean steps, but the scale doubles after %d", clean_steps,
                               WGPT_LOSS_SCALE_INTERVAL);
    m->clean_steps = (int)clean_steps;
    return use_loss_scale_(m, scale);
}

int wgpt_gpt2_inject_nan_grad(wgpt_gpt2 *m) {
    if (!m->training) return wgpt_gpt2_fail_(m, "an inference model has no gradients");
    const float nan = NAN;
    GPU_OK(m, wgpt_buf_upload(m->g, m->grads, 0, &nan, 4));
    return 0;
}

int wgpt_gpt2_train_step(wgpt_gpt2 *m, const int *tokens, const int *targets, const wgpt_adamw_config *o, int t,
                         wgpt_step_result *out) {
    if (ensure_optimizer_(m, o) < 0) return -1;
    GPU_OK(m, wgpt_adamw_set_step(m->g, m->adamw, o->lr, t));
    if (set_grad_scale_(m, &m->norm_handle, 1, o->skip_norm) < 0 ||
        record_forward_backward_(m, tokens, targets, 1) < 0)
        return -1;
    GPU_OK(m, wgpt_op_record(m->g, &m->opt));
    if (read_loss_(m, &out->loss) < 0) return -1;
    wgpt_optim_state st;
    GPU_OK(m, wgpt_buf_download(m->g, m->opt_state.buf, 0, &st, sizeof st));
    out->grad_norm = st.norm;
    out->skipped = (int)st.nonfinite;
    return after_update_(m, &st, out);
}

// A training model keeps one chunk of the logits (cls_chunked): an
// inference instance on its parameters computes them all.
static wgpt_gpt2 *logits_model_(wgpt_gpt2 *m) {
    char err[1024];
    wgpt_gpt2 *inf = wgpt_gpt2_create_inference(m, m->B, m->T, err, sizeof err);
    if (!inf) wgpt_gpt2_fail_(m, "the logits of a training model: %s", err);
    return inf;
}

int wgpt_gpt2_logits(wgpt_gpt2 *m, const int *tokens, uint32_t b, uint32_t t, float *out) {
    if (b >= m->B || t >= m->T) return wgpt_gpt2_fail_(m, "logits row (%u, %u) outside the batch (%u, %u)", b, t, m->B, m->T);
    if (m->cls_chunked) {
        wgpt_gpt2 *inf = logits_model_(m);
        if (!inf) return -1;
        int rc = wgpt_gpt2_logits(inf, tokens, b, t, out);
        if (rc < 0) wgpt_gpt2_fail_(m, "%s", wgpt_gpt2_error(inf));
        wgpt_gpt2_free(inf);
        return rc;
    }
    int *zeros = calloc((size_t)m->B * m->T, sizeof *zeros);
    if (!zeros) return wgpt_gpt2_fail_(m, "out of host memory");
    float loss;
    int rc = wgpt_gpt2_forward(m, tokens, zeros, &loss);
    free(zeros);
    if (rc < 0) return -1;
    uint64_t row = (uint64_t)b * m->T + t;
    GPU_OK(m, wgpt_buf_download(m->g, m->logits.buf, row * m->c.padded_vocab_size * 4, out,
                                (uint64_t)m->c.vocab_size * 4));
    return 0;
}

// A training model's: the forward of the last batch again, on an inference instance.
static int read_logits_chunked_(wgpt_gpt2 *m, float *out) {
    uint64_t n = (uint64_t)m->B * m->T;
    uint32_t *ids = malloc(n * 4);
    int *tok = malloc(n * sizeof *tok), *tgt = malloc(n * sizeof *tgt);
    int rc = ids && tok && tgt ? 0 : wgpt_gpt2_fail_(m, "out of host memory");
    if (rc == 0 && wgpt_buf_download(m->g, m->tokens.buf, 0, ids, n * 4) < 0) rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    if (rc == 0 && wgpt_buf_download(m->g, m->targets.buf, 0, tgt, n * 4) < 0) rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    for (uint64_t i = 0; rc == 0 && i < n; i++) tok[i] = (int)ids[i];
    wgpt_gpt2 *inf = rc == 0 ? logits_model_(m) : NULL;
    if (rc == 0 && !inf) rc = -1;
    float loss;
    if (rc == 0 && (wgpt_gpt2_forward(inf, tok, tgt, &loss) < 0 || wgpt_gpt2_read_logits(inf, out) < 0))
        rc = wgpt_gpt2_fail_(m, "%s", wgpt_gpt2_error(inf));
    wgpt_gpt2_free(inf);
    free(ids), free(tok), free(tgt);
    return rc;
}

int wgpt_gpt2_read_logits(wgpt_gpt2 *m, float *out) {
    if (m->cls_chunked) return read_logits_chunked_(m, out);
    uint64_t rows = (uint64_t)m->B * m->T, Vp = m->c.padded_vocab_size, V = m->c.vocab_size;
    float *all = malloc(rows * Vp * sizeof *all);
    if (!all) return wgpt_gpt2_fail_(m, "out of host memory");
    int rc = wgpt_buf_download(m->g, m->logits.buf, 0, all, rows * Vp * 4);
    for (uint64_t r = 0; rc == 0 && r < rows; r++) memcpy(out + r * V, all + r * Vp, V * sizeof *out);
    free(all);
    if (rc < 0) return wgpt_gpt2_fail_(m, "%s", wgpt_gpu_error(m->g));
    return 0;
}
