// gpt2_internal.h: the model's private state, shared by src/model/gpt2*.c.
#ifndef WGPT_GPT2_INTERNAL_H
#define WGPT_GPT2_INTERNAL_H

#include "model/gpt2.h"
#include "model/op.h"
#include "model/optimizer.h"

enum {
    WGPT_WTE, WGPT_WPE, WGPT_LN1W, WGPT_LN1B, WGPT_QKVW, WGPT_QKVB, WGPT_ATTPROJW, WGPT_ATTPROJB,
    WGPT_LN2W, WGPT_LN2B, WGPT_FCW, WGPT_FCB, WGPT_FCPROJW, WGPT_FCPROJB, WGPT_LNFW, WGPT_LNFB
};

typedef struct wgpt_gpt2_tensor {
    uint64_t base;          // first float in the padded buffers
    uint64_t stride;        // floats from one layer's slice to the next (aligned)
    uint64_t slice_floats;  // floats of one slice
    uint32_t slices;        // L for per-layer tensors, else 1
} wgpt_gpt2_tensor;

typedef struct wgpt_gpt2_act {
    wgpt_buf *buf;
    uint64_t floats, stride;
    uint32_t slices;
} wgpt_gpt2_act;

struct wgpt_gpt2 {
    wgpt_gpu *g;
    wgpt_gpt2_config c;
    uint32_t B, T;
    char err[2048];

    wgpt_gpt2_tensor pt[WGPT_GPT2_NUM_TENSORS];
    uint64_t padded_params;
    wgpt_buf *params, *grads, *adam_m, *adam_v;
    uint64_t param_bytes, activation_bytes, adam_bytes;
    // ZeRO-1 (gpt2.h): adam_m and adam_v hold [shard_off, shard_off + shard_n)
    // of the padded array; one shard of one is the whole array
    uint32_t shard, nshards;
    uint64_t shard_off, shard_n;
    // where the fp32 masters live (gpt2_masters.c): with split_masters (f16,
    // several shards) `params` holds the matmul weights of [keep_lo, keep_hi)
    // only and every other tensor whole; master_floats in all
    int split_masters;
    uint64_t keep_lo, keep_hi, master_floats;
    uint64_t master_bytes, weights16_bytes, grad_bytes;  // for wgpt_gpt2_memory_split

    // forward activations: per layer (L slices) unless noted
    wgpt_gpt2_act encoded;                        // (B,T,C), 1 slice
    wgpt_gpt2_act ln1, ln1_mean, ln1_rstd;        // (B,T,C), (B,T), (B,T)
    wgpt_gpt2_act qkv, atty, att_lse;             // (B,T,3C), (B,T,C), (B,NH,T)
    wgpt_gpt2_act attproj, res2;                  // (B,T,C)
    wgpt_gpt2_act ln2, ln2_mean, ln2_rstd;
    wgpt_gpt2_act fch, fch_gelu;                  // (B,T,4C)
    wgpt_gpt2_act fcproj, res3;                   // (B,T,C)
    wgpt_gpt2_act lnf, lnf_mean, lnf_rstd;        // 1 slice
    wgpt_gpt2_act logits;                         // (B,T,Vp), dlogits in place; (cls_rows,Vp) if cls_chunked
    // Training models run the classifier and the cross-entropy in chunks of
    // cls_rows rows (forward, loss, dlogits and the backward matmuls of one
    // chunk, then the next): the (B,T,Vp) logits never exist whole
    int cls_chunked;
    uint32_t cls_rows;
    wgpt_gpt2_act losses, ce_lse, loss;           // (B,T), (B,T), (1)
    wgpt_gpt2_act status;                         // u32 flags from the kernels
    wgpt_gpt2_act mm_scratch;                     // the matmuls' split partials (linear.h)
    // backward scratch (1 slice each)
    wgpt_gpt2_act dres, dln, datty, dqkv, dfch, dfch_gelu, att_d;
    // inputs of a step
    wgpt_gpt2_act tokens, targets;                // u32 (B,T)
    wgpt_gpt2_act bucket;                         // embedding-backward index (see embedding.h)
    wgpt_gpt2_act norm_scratch, opt_state;        // gradient-norm partials; wgpt_optim_state
    wgpt_gpt2_act ln_scratch;                     // the layernorms' dweight/dbias partials (layernorm.h)

    // the f16 mode (gpt2.h: wgpt_precision): f16 copies of the parameters (padded
    // layout, 2 bytes each) and of the matmuls' inputs; d16 holds one gradient cast
    wgpt_precision precision;
    wgpt_buf *params16;
    wgpt_gpt2_act ln1_16, atty16, ln2_16, fchg16, lnf16, d16;
    int attn16;          // f16 and wgpt_attention_uses_sgm: attention reads qkv16 and atty16
    int attn_ds;         // attn16, and its backward keeps dS in d16 (wgpt_attention_ds_bytes fits a binding)
    wgpt_gpt2_act qkv16; // (B,T,3C) f16, for the f16 attention (attn16)
    wgpt_gpt2_act inp_t16;  // a matmul input's f16 copy transposed (subgroup matrices; linear_f16.h), 1 slice
    wgpt_gpt2_act atty16_t; // attn16 and in16_t: the attention's f16 output transposed (C, BT), a slice a layer
    int in16_t;             // ln1_16, ln2_16, fchg16 and lnf16 hold their inputs transposed (C, BT)
    wgpt_op cast;        // params -> params16
    float loss_scale;    // dlogits are scaled by it, the gradients unscaled before the update
    int clean_steps;     // updates in a row without an overflow
    float grad_scale_c;  // 1/(k * loss scale): the last update's gradient factor (wgpt_grad_norm_set)

    int training;  // grads, AdamW state and the backward exist
    wgpt_recompute recompute;  // NONE, GELU or ALL (gpt2.h)
    int shared;    // params belong to another model (an inference instance)
    wgpt_op fwd, bwd, opt;
    // the steps of fwd before its cross-entropy: a training step's forward
    // when bwd begins with the fused cross-entropy (f16), else all of fwd
    int fwd_train_n;
    // the backward in segments (gpt2.h): bwd_cut[i] is the step of bwd that
    // ends segment i; a readback of each segment's gradients, made on first
    // use; the next segment to record
    int *bwd_cut;
    wgpt_readback **seg_read;
    uint32_t seg_next;
    wgpt_adamw *adamw;            // NULL until the first training step builds `opt`
    wgpt_grad_norm_handle norm_handle;
    // ZeRO-1's split update (wgpt_gpt2_update_shard_*): the norm of this
    // shard's gradients alone, and the first step of `opt` after its norm
    wgpt_op shard_norm;
    wgpt_grad_norm_handle shard_norm_handle;
    int opt_update_from;
    wgpt_adamw_config opt_cfg;    // the constants `opt` was built with
};

// Records params16 = f16(params) (f16 mode; nothing otherwise).
int wgpt_gpt2_refresh_f16_(wgpt_gpt2 *m);
int wgpt_gpt2_fail_(wgpt_gpt2 *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wgpt_gpt2_layout_params_(wgpt_gpt2 *m);
wgpt_view wgpt_gpt2_pview_(const wgpt_gpt2 *m, wgpt_buf *buf, int tensor, uint32_t layer);
// Slice `layer` of tensor t of the f16 parameter copy.
wgpt_view wgpt_gpt2_p16view_(const wgpt_gpt2 *m, int tensor, uint32_t layer);
// The chunked classifier (gpt2_classifier.c): the rows of a chunk for the
// model's shape and device (0: not even 64 rows of logits fit one binding),
// and the chunks' ops appended to op, their gradient with backward.
uint32_t wgpt_gpt2_cls_rows_(const wgpt_gpt2 *m);
int wgpt_gpt2_classifier_(wgpt_gpt2 *m, wgpt_op *op, int backward);
// The fp32 masters (gpt2_masters.c): 1 for the tensors that a split model
// keeps only its shard of; the master offset of float p of the padded array
// (p in a kept piece, or its end); the layout from the shard (after
// wgpt_gpt2_layout_params_); the view of a slice (no buffer for a tensor not
// kept whole); all parameters from a padded host array, the f16 copy included.
int wgpt_gpt2_sharded_master_(int tensor);
uint64_t wgpt_gpt2_master_at_(const wgpt_gpt2 *m, uint64_t p);
void wgpt_gpt2_layout_masters_(wgpt_gpt2 *m, int split);
wgpt_view wgpt_gpt2_mview_(const wgpt_gpt2 *m, int tensor, uint32_t layer);
int wgpt_gpt2_upload_padded_(wgpt_gpt2 *m, const float *padded);
int wgpt_gpt2_act_alloc_(wgpt_gpt2 *m, wgpt_gpt2_act *a, const char *name, uint32_t slices, uint64_t floats);
wgpt_view wgpt_gpt2_aview_(const wgpt_gpt2_act *a, uint32_t slice);

#endif
