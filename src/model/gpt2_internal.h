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

// The f16 plan's choices (gpt2_f16.c), made once when the model is created
// (gpt2_plan.c wgpt_gpt2_plan_) from the precision, the shape and the device;
// all 0 in fp32. The allocation (gpt2_acts.c) and the plan read them.
typedef struct wgpt_gpt2_plan {
    // the attention on subgroup matrices (wgpt_attention_uses_sgm, T even):
    // it reads qkv16 and writes atty16 and its transpose
    int attn16;
    int attn_ds;  // attn16, and its backward keeps dS in d16 (wgpt_attention_ds_bytes fits a binding)
    // every linear's forward and weight pass on subgroup matrices: ln1_16,
    // ln2_16, fchg16 (and lnf16 unless the classifier is chunked) hold their
    // inputs transposed (C, BT), written by the LayerNorms and the GELU
    int in16_t;
    // the matmul epilogues asked for (wgpt_gpu_info.matmul_epilogues) that
    // apply (in16_t; the rounding one also attn16): qkv's matmul writes qkv16
    // (WGPT_EPI_ROUND), fc's writes fch and fchg16 (WGPT_EPI_GELU), fcproj's
    // input pass applies GELU' (WGPT_EPI_GELU_GRAD)
    int epi_round, epi_gelu, epi_gelu_grad;
} wgpt_gpt2_plan;

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
    wgpt_gpt2_plan plan; // the f16 plan's choices
    wgpt_gpt2_act qkv16; // (B,T,3C) f16, for the f16 attention (plan.attn16)
    wgpt_gpt2_act inp_t16;  // a matmul input's f16 copy transposed (subgroup matrices; linear_f16.h), 1 slice
    wgpt_gpt2_act atty16_t; // attn16 and in16_t: the attention's f16 output transposed (C, BT), a slice a layer
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

// The files of the model, each calling only those listed below it (none
// calls back up; gpt2.h's functions are defined across them):
//   gpt2_logits.c                 the logits on the host
//   gpt2_update.c                 the optimizer step, the loss scale, the training step
//   gpt2_segments.c               the backward in segments, the shards' counts
//   gpt2_step.c                   a batch through the prepared ops
//   gpt2.c                        create and free: the options, then all below
//   gpt2_plan.c                   the plan's choices; the plan of the precision
//   gpt2_fp32.c, gpt2_f16.c       the plans: forward and backward, layer by layer
//   gpt2_classifier.c             the chunked classifier and loss (both plans)
//   gpt2_acts.c                   the GPU buffers the plan reads and writes
//   gpt2_params.c                 the parameters to and from the host
//   gpt2_masters.c                where the fp32 masters live; the f16 copy
//   gpt2_layout.c                 the layout, the views, the error (calls none)
//   gpt2_shape.c, gpt2_init.c     shape checks, initialisation (host only)

// gpt2_layout.c: the error (printf-style; returns -1); the padded layout of
// the parameters; the view of slice `layer` of tensor t of buf (params'
// layout: the gradients'), of the f16 copy, of an activation; an
// activation's buffer; shard i of n of a padded array of `padded` floats.
int wgpt_gpt2_fail_(wgpt_gpt2 *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wgpt_gpt2_layout_params_(wgpt_gpt2 *m);
wgpt_view wgpt_gpt2_pview_(const wgpt_gpt2 *m, wgpt_buf *buf, int tensor, uint32_t layer);
wgpt_view wgpt_gpt2_p16view_(const wgpt_gpt2 *m, int tensor, uint32_t layer);
int wgpt_gpt2_act_alloc_(wgpt_gpt2 *m, wgpt_gpt2_act *a, const char *name, uint32_t slices, uint64_t floats);
wgpt_view wgpt_gpt2_aview_(const wgpt_gpt2_act *a, uint32_t slice);
void wgpt_gpt2_shard_range_(uint64_t padded, uint32_t i, uint32_t n, uint64_t *off, uint64_t *count);
// The fp32 masters (gpt2_masters.c): 1 for the tensors that a split model
// keeps only its shard of; the master offset of float p of the padded array
// (p in a kept piece, or its end); the layout from the shard (after
// wgpt_gpt2_layout_params_); the view of a slice (no buffer for a tensor not
// kept whole); all parameters from a padded host array, the f16 copy
// included; the op that casts params into params16, and recording it
// after an upload (f16 mode; nothing otherwise).
int wgpt_gpt2_sharded_master_(int tensor);
uint64_t wgpt_gpt2_master_at_(const wgpt_gpt2 *m, uint64_t p);
void wgpt_gpt2_layout_masters_(wgpt_gpt2 *m, int split);
wgpt_view wgpt_gpt2_mview_(const wgpt_gpt2 *m, int tensor, uint32_t layer);
int wgpt_gpt2_upload_padded_(wgpt_gpt2 *m, const float *padded);
int wgpt_gpt2_build_cast_(wgpt_gpt2 *m);
int wgpt_gpt2_refresh_f16_(wgpt_gpt2 *m);
// gpt2_acts.c: the parameters' buffers, then the activations' (after wgpt_gpt2_plan_).
int wgpt_gpt2_alloc_params_(wgpt_gpt2 *m);
int wgpt_gpt2_alloc_acts_(wgpt_gpt2 *m);
// The chunked classifier (gpt2_classifier.c): the rows of a chunk for the
// model's shape and device (0: not even 64 rows of logits fit one binding),
// and the chunks' ops appended to op, their gradient with backward.
uint32_t wgpt_gpt2_cls_rows_(const wgpt_gpt2 *m);
int wgpt_gpt2_classifier_(wgpt_gpt2 *m, wgpt_op *op, int backward);
// The loss of whole logits (a model not cls_chunked, its logits written):
// the cross-entropy's losses and lse, then the mean loss.
int wgpt_gpt2_loss_(wgpt_gpt2 *m, wgpt_op *op);
// The plans: the forward into m->fwd (fwd_train_n set), the backward into
// m->bwd (bwd_cut set).
int wgpt_gpt2_forward_fp32_(wgpt_gpt2 *m);
int wgpt_gpt2_backward_fp32_(wgpt_gpt2 *m);
int wgpt_gpt2_forward_f16_(wgpt_gpt2 *m);
int wgpt_gpt2_backward_f16_(wgpt_gpt2 *m);
// gpt2_backward.c: the backward both plans share, around the plan's own
// block_backward of layer l; and the LayerNorm backward (d res from d ln).
int wgpt_gpt2_backward_(wgpt_gpt2 *m, int (*block_backward)(wgpt_gpt2 *m, wgpt_op *op, uint32_t l));
int wgpt_gpt2_layernorm_bwd_(wgpt_gpt2 *m, wgpt_op *op, wgpt_view inp, wgpt_view mean, wgpt_view rstd, int w, int b,
                             uint32_t l);
// gpt2_plan.c: the f16 mode's shape rules (-1 and the error if broken); the
// plan's choices (m->plan, from the precision, shape and device); the
// forward and backward of the model's precision.
int wgpt_gpt2_check_f16_(wgpt_gpt2 *m);
void wgpt_gpt2_plan_(wgpt_gpt2 *m);
int wgpt_gpt2_build_forward_(wgpt_gpt2 *m);
int wgpt_gpt2_build_backward_(wgpt_gpt2 *m);
// gpt2_step.c: waits for the recorded work and reads the loss (a
// kernel-reported bad id is an error); records the forward of one batch
// before a backward (zero_grads: the gradients cleared first, else they
// accumulate), or that and the whole backward.
int wgpt_gpt2_read_loss_(wgpt_gpt2 *m, float *loss);
int wgpt_gpt2_record_forward_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads);
int wgpt_gpt2_record_step_(wgpt_gpt2 *m, const int *tokens, const int *targets, int zero_grads);

#endif
