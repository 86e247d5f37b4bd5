// gpt2_acts.c: the model's GPU buffers: the parameters, gradients and AdamW
// moments, and the activations its plan reads and writes (gpt2_internal.h),
// sized for the plan's choices (wgpt_gpt2_plan) and the recompute mode.
#include "model/attention.h"
#include "model/embedding.h"
#include "model/gpt2_internal.h"
#include "model/input_status.h"
#include "model/layernorm.h"
#include "model/linear.h"
#include "model/linear_f16.h"

int wgpt_gpt2_alloc_params_(wgpt_gpt2 *m) {
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
#define ALLOC(m, list, tag) alloc_list_((m), (list), sizeof(list) / sizeof(list)[0], (tag))

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

// f32 tensors that a plan never touches get a token size.
#define TOKEN 64

// The forward's activations. Layer outputs the backward never reads get
// one slice that every layer reuses: the projections (the residual's
// gradient is theirs), and in f16 the f32 inputs of the matmuls, whose f16
// copies are what the backward reads; so do the tensors recomputed in the
// backward (gpt2.h wgpt_recompute). With the f16 attention (attn16) it reads
// f16 copies of qkv and of its own output, so their f32 versions are passing
// too; it writes atty16 itself (atty: a token); where the inputs are kept
// transposed (in16_t) the LayerNorms write their f16 copies straight from
// the residual stream, no f32 ln1, ln2, lnf.
static int alloc_forward_(wgpt_gpt2 *m, uint64_t scratch_f) {
    uint64_t L = m->c.num_layers, C = m->c.channels, BT = (uint64_t)m->B * m->T, NH = m->c.num_heads;
    uint64_t Vp = m->c.padded_vocab_size;
    uint64_t Lln = m->recompute >= WGPT_RECOMPUTE_ALL ? 1 : L;
    uint64_t Lf32 = m->precision == WGPT_PRECISION_F16 ? 1 : Lln, Lattn = m->plan.attn16 ? 1 : L;
    uint64_t atty_f = m->plan.attn16 ? TOKEN : BT * C, ln_f = m->plan.in16_t ? TOKEN : BT * C;
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
        {&m->lnf_rstd, "lnf rstd", 1, BT},        {&m->logits, "logits", 1, m->cls_rows * Vp},
        {&m->losses, "losses", 1, BT},            {&m->ce_lse, "ce lse", 1, BT},
        {&m->loss, "loss", 1, 4},                 {&m->status, "status", 1, WGPT_STATUS_WORDS},
        {&m->tokens, "tokens", 1, BT},            {&m->targets, "targets", 1, BT},
        {&m->mm_scratch, "matmul split partials", 1, scratch_f},
    };
    return ALLOC(m, forward, WGPT_MEM_ACTIVATIONS);
}

// fp32's GELU output (f16 writes the fcproj input's f16 copy directly).
static int alloc_fp32_(wgpt_gpt2 *m) {
    uint64_t L = m->c.num_layers, BT = (uint64_t)m->B * m->T, C = m->c.channels;
    const act_spec_ gelu[] = {{&m->fch_gelu, "fch gelu", m->recompute >= WGPT_RECOMPUTE_GELU ? 1 : L, BT * 4 * C}};
    return ALLOC(m, gelu, WGPT_MEM_ACTIVATIONS);
}

// The f16 copies of the matmuls' inputs (act sizes count floats, two halves
// each); the f16 attention's qkv and, a slice a layer where the matmuls take
// it so, its output transposed (attproj's forward and weight pass: no
// transposes); one matmul input's transposed copy.
static int alloc_f16_(wgpt_gpt2 *m) {
    uint64_t L = m->c.num_layers, C = m->c.channels, BT = (uint64_t)m->B * m->T;
    uint64_t Lgelu = m->recompute >= WGPT_RECOMPUTE_GELU ? 1 : L, Lln = m->recompute >= WGPT_RECOMPUTE_ALL ? 1 : L;
    const act_spec_ half_fwd[] = {
        {&m->ln1_16, "ln1 f16", Lln, BT * C / 2},     {&m->atty16, "atty f16", L, BT * C / 2},
        {&m->ln2_16, "ln2 f16", Lln, BT * C / 2},     {&m->fchg16, "fch gelu f16", Lgelu, BT * 4 * C / 2},
        {&m->lnf16, "lnf f16", 1, BT * C / 2},
    };
    const act_spec_ attn_half[] = {{&m->qkv16, "qkv f16", L, BT * 3 * C / 2},
                                   {&m->atty16_t, "atty f16 transposed", L, BT * C / 2}};
    if (ALLOC(m, half_fwd, WGPT_MEM_ACTIVATIONS) < 0) return -1;
    return m->plan.attn16 ? alloc_list_(m, attn_half, m->plan.in16_t ? 2 : 1, WGPT_MEM_ACTIVATIONS) : 0;
}

// The backward's scratch, one slice each; f32 gradients that the plan never
// writes get a token size: fcproj's input pass with GELU' writes d fch
// (epi_gelu_grad: no d fch gelu), and without that epilogue fc's bias pass
// makes d fch's f16 copy from d fch gelu, no f32 d fch, where it runs on the
// GPU path (wgpt_linear_backward_bias_gelu_cast). The f16 attention's
// backward keeps its dS blocks in d16 (free then: the attention
// projection's gradient copy is consumed) where they fit one binding
// (attn_ds), so that its dq kernel does not recompute them (attention.h).
static int alloc_backward_(wgpt_gpt2 *m, uint64_t scratch_f) {
    uint64_t C = m->c.channels, BT = (uint64_t)m->B * m->T, NH = m->c.num_heads;
    int f16 = m->precision == WGPT_PRECISION_F16, gelu_grad = m->plan.epi_gelu_grad;
    uint64_t dfch_gelu_f = gelu_grad ? TOKEN : BT * 4 * C;
    int no_dfch = f16 && !gelu_grad && wgpt_linear_bias_on_gpu(m->g, (uint32_t)BT, (uint32_t)(4 * C), scratch_f * 4);
    const act_spec_ backward[] = {
        {&m->dres, "d residual", 1, BT * C},      {&m->dln, "d ln", 1, BT * C},
        {&m->datty, "d atty", 1, BT * C},         {&m->dqkv, "d qkv", 1, BT * 3 * C},
        {&m->dfch, "d fch", 1, no_dfch ? TOKEN : BT * 4 * C}, {&m->dfch_gelu, "d fch gelu", 1, dfch_gelu_f},
        {&m->att_d, "att D", 1, BT * NH},
        {&m->bucket, "embedding bucket", 1, wgpt_embedding_bucket_words((uint32_t)BT)},
        {&m->norm_scratch, "norm partials", 1, (wgpt_grad_norm_scratch_bytes(m->g, m->padded_params) + 3) / 4},
        {&m->opt_state, "optimizer state", 1, 4},
        {&m->ln_scratch, "layernorm partials", 1, wgpt_layernorm_scratch_bytes((uint32_t)BT, (uint32_t)C) / 4},
    };
    if (ALLOC(m, backward, WGPT_MEM_SCRATCH) < 0) return -1;
    if (!f16) return 0;
    uint64_t Vp = m->c.padded_vocab_size, rows = m->cls_rows;  // the gradient's f16 copy (d16 counts halves)
    uint64_t dmost = BT * 4 * C > rows * Vp ? BT * 4 * C : rows * Vp;
    uint64_t ds = wgpt_attention_ds_bytes(m->B, m->T, (uint32_t)NH);
    if (m->plan.attn_ds && dmost < ds / 2) dmost = ds / 2;
    const act_spec_ half_bwd[] = {{&m->d16, "gradient f16", 1, dmost / 2}};
    return ALLOC(m, half_bwd, WGPT_MEM_SCRATCH);
}

int wgpt_gpt2_alloc_acts_(wgpt_gpt2 *m) {
    uint64_t BT = (uint64_t)m->B * m->T, C = m->c.channels, scratch_f = linear_scratch_floats_(m);
    if (alloc_forward_(m, scratch_f) < 0) return -1;
    if (m->precision == WGPT_PRECISION_F16 ? alloc_f16_(m) < 0 : alloc_fp32_(m) < 0) return -1;
    uint64_t t_floats = linear_transposed_floats_(m);
    // (without in16_t the f16 attention writes its output's transpose, unread, into inp_t16)
    if (m->plan.attn16 && !m->plan.in16_t && t_floats < BT * C / 2) t_floats = BT * C / 2;
    const act_spec_ inp_t[] = {{&m->inp_t16, "matmul input f16 transposed", 1, t_floats}};
    if (t_floats && ALLOC(m, inp_t, WGPT_MEM_SCRATCH) < 0) return -1;
    return m->training ? alloc_backward_(m, scratch_f) : 0;
}
