// gpt2_plan.c: which plan a model runs and its choices, made once when it
// is created: the f16 mode's shape rules, the f16 plan's variants
// (gpt2_internal.h wgpt_gpt2_plan) from the shape and the device, and the
// plan's forward and backward ops (gpt2_fp32.c or gpt2_f16.c).
#include "model/attention.h"
#include "model/gpt2_internal.h"
#include "model/linear_f16.h"

// The f16 mode's shape rules, checked before anything is allocated.
int wgpt_gpt2_check_f16_(wgpt_gpt2 *m) {
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

// 1 if every linear of the model takes its input transposed (linear_f16.h);
// the chunked classifier reads lnf's f16 copy row-major (rows of it a chunk).
static int linear_takes_transposed_(const wgpt_gpt2 *m) {
    uint32_t C = m->c.channels, BT = m->B * m->T, Vp = m->c.padded_vocab_size;
    uint32_t shapes[5][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};
    for (int i = 0; i < (m->cls_chunked ? 4 : 5); i++)
        if (!wgpt_linear_f16_takes_transposed(m->g, BT, shapes[i][0], shapes[i][1])) return 0;
    return 1;
}

void wgpt_gpt2_plan_(wgpt_gpt2 *m) {
    wgpt_gpt2_plan *p = &m->plan;
    *p = (wgpt_gpt2_plan){0};
    if (m->precision != WGPT_PRECISION_F16) return;
    const wgpt_gpu_info *i = wgpt_gpu_get_info(m->g);
    uint32_t NH = m->c.num_heads;
    p->attn16 = wgpt_attention_uses_sgm(m->g, m->c.channels / NH) && m->T % 2 == 0;  // (its forward needs T even)
    p->attn_ds = p->attn16 && wgpt_attention_ds_bytes(m->B, m->T, NH) <= i->max_storage_binding;
    p->in16_t = linear_takes_transposed_(m);
    // The epilogues are off unless asked for: each was slower than the pass
    // it saves on an H100 (docs/kernels/03_linear_sgm.md); they need every
    // linear on subgroup matrices (in16_t), the rounding one the f16 attention
    uint32_t epi = p->in16_t ? i->matmul_epilogues : 0;
    p->epi_round = (epi & WGPT_EPI_ROUND) && p->attn16;
    p->epi_gelu = (epi & WGPT_EPI_GELU) != 0;
    p->epi_gelu_grad = (epi & WGPT_EPI_GELU_GRAD) != 0;
}

int wgpt_gpt2_build_forward_(wgpt_gpt2 *m) {
    return m->precision == WGPT_PRECISION_F16 ? wgpt_gpt2_forward_f16_(m) : wgpt_gpt2_forward_fp32_(m);
}

int wgpt_gpt2_build_backward_(wgpt_gpt2 *m) {
    return m->precision == WGPT_PRECISION_F16 ? wgpt_gpt2_backward_f16_(m) : wgpt_gpt2_backward_fp32_(m);
}
