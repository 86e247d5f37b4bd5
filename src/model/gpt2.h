// gpt2.h: a GPT-2 model on the GPU: parameters, gradients, AdamW state and
// activations in GPU buffers; one training step (forward, cross-entropy,
// backward, global-norm clipping, AdamW) recorded as prepared ops and
// submitted at once, reading back only the loss.
//
// Parameters travel in the reference layout (tests/ref/gpt2_ref.h, llm.c's
// order): wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C),
// qkvb (L,3C), attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C),
// fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C).
// On the GPU every per-layer slice starts 256-byte aligned so that it can be
// bound on its own.
#ifndef WGPT_GPT2_H
#define WGPT_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

#define WGPT_GPT2_NUM_TENSORS 16

typedef struct wgpt_gpt2_config {
    uint32_t max_seq_len;        // maxT: rows of wpe
    uint32_t vocab_size;         // V
    uint32_t padded_vocab_size;  // Vp >= V (e.g. a multiple of 128); padded logits never count
    uint32_t num_layers;         // L
    uint32_t num_heads;          // NH
    uint32_t channels;           // C, a multiple of NH
} wgpt_gpt2_config;

typedef struct wgpt_gpt2 wgpt_gpt2;

typedef struct wgpt_adamw_config {
    float lr, beta1, beta2, eps, weight_decay;  // weight decay on 2D weights only
    float max_grad_norm;                        // <= 0: no clipping
    float skip_norm;                            // > 0: skip a step whose gradient norm exceeds it
} wgpt_adamw_config;

typedef struct wgpt_step_result {
    float loss;        // mean cross-entropy of the batch
    float grad_norm;   // global norm before clipping (0 if not computed)
    int skipped;       // parameters left untouched: 1 the gradient held NaN/Inf, 2 its norm was above skip_norm
    float loss_scale;  // the loss scale the step's backward ran with (1 in fp32)
} wgpt_step_result;

// What the matmuls multiply. WGPT_PRECISION_F16: the weights, AdamW's state,
// the activations and every other kernel stay f32; the matmuls multiply f16
// copies of the weights (cast after every update) and of their inputs (cast in
// the forward; the gradients in the backward) and accumulate in f32
// (model/linear_f16.h: tensor cores where the device has subgroup matrices).
// The loss gradient is multiplied by a loss scale so that small gradients
// survive f16, and the gradients divided by it before clipping and AdamW; a
// step whose gradient overflows is skipped (as any NaN/Inf step) and halves
// the scale, WGPT_LOSS_SCALE_INTERVAL clean steps in a row double it.
// WGPT_PRECISION_AUTO (the commands' default) becomes f16 on a device with
// shader-f16 and subgroup matrices (tensor cores: there the f16 step is 1.7x
// the fp32 one on an H200) when the shape allows it, fp32 elsewhere (on
// lavapipe, with f16 but no subgroup matrices, the f16 step is 2.5x slower);
// wgpt_gpt2_precision says what a model became.
typedef enum wgpt_precision { WGPT_PRECISION_FP32 = 0, WGPT_PRECISION_F16 = 1, WGPT_PRECISION_AUTO = 2 } wgpt_precision;
#define WGPT_LOSS_SCALE_INIT 65536.0f
#define WGPT_LOSS_SCALE_INTERVAL 1000
// "fp32" / "f16" / "auto"; wgpt_precision_parse returns -1 for anything else.
const char *wgpt_precision_name(wgpt_precision p);
int wgpt_precision_parse(const char *s, wgpt_precision *out);
// What auto becomes on a device, shape aside: f16 or fp32.
wgpt_precision wgpt_precision_auto(const wgpt_gpu_info *info);

// Number of floats of the parameters in the reference layout, and each tensor's.
size_t wgpt_gpt2_num_params(const wgpt_gpt2_config *c);
void wgpt_gpt2_param_sizes(const wgpt_gpt2_config *c, size_t sizes[WGPT_GPT2_NUM_TENSORS]);

// GPT-2's random initialisation (host, reference layout, deterministic per seed):
// weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), layernorm
// weights 1, biases 0, padded vocabulary rows 0.
void wgpt_gpt2_init_params(const wgpt_gpt2_config *c, float *params, uint64_t seed);

// GPT-2 124M (12 layers, 12 heads, C 768, T 1024, vocabulary 50257 padded to
// 50304): the benchmarks' model.
wgpt_gpt2_config wgpt_gpt2_124m_config(void);

// The benchmarks' synthetic batch (`wgpt bench`, bench/ref_step.c): n
// pseudo-random token ids below the vocabulary size, the same for every run,
// and as targets the next token (wrapping round).
void wgpt_gpt2_bench_tokens(const wgpt_gpt2_config *c, int *tokens, int *targets, size_t n);

// Training FLOPs per token, as the benchmarks count them: 6N for the
// parameters' forward and backward, plus 6 L C T for attention's QK^T and AV.
double wgpt_gpt2_flops_per_token(const wgpt_gpt2_config *c, uint32_t T);

// Which numbers of a shape a limit involves (wgpt_gpt2_check_shape), so that
// a caller can name the options that set them.
enum {
    WGPT_GPT2_DIM_B = 1,    // sequences a batch
    WGPT_GPT2_DIM_T = 2,    // tokens a sequence
    WGPT_GPT2_DIM_C = 4,    // channels
    WGPT_GPT2_DIM_NH = 8,   // heads
    WGPT_GPT2_DIM_L = 16,   // layers
    WGPT_GPT2_DIM_V = 32,   // vocabulary
};
// Checks that the kernels take a model of config c with batches (B, T) (the
// head size, T within the context, 32-bit indices) and, if max_buffer > 0, that
// its largest buffers fit one of that many bytes. Returns 0, or the
// WGPT_GPT2_DIM_ bits of what to change (> 0) with err saying what is too large.
int wgpt_gpt2_check_shape(const wgpt_gpt2_config *c, uint32_t B, uint32_t T, uint64_t max_buffer, char *err,
                          size_t errlen);
// The same for the (B, T, Vp) logits that an inference model holds whole (a
// training model's classifier holds a chunk of rows: no such limit).
int wgpt_gpt2_check_logits(const wgpt_gpt2_config *c, uint32_t B, uint32_t T, uint64_t max_buffer, char *err,
                           size_t errlen);

// Allocates everything for batches of B sequences of T tokens (T <= maxT) and
// prepares every op. Returns NULL with err filled (names the limit that fails).
wgpt_gpt2 *wgpt_gpt2_create(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                            size_t errlen);
// The same in a chosen precision (wgpt_gpt2_create: fp32). F16 needs C, 3C,
// 4C, Vp and B*T multiples of 8; the error says which is not (auto then
// takes fp32).
wgpt_gpt2 *wgpt_gpt2_create_precision(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, int training,
                                      wgpt_precision precision, char *err, size_t errlen);
wgpt_precision wgpt_gpt2_precision(const wgpt_gpt2 *m);

// Activation recomputation (llm.c's -r 0/1/2) of a training model: NONE keeps
// every layer's activations for the backward; GELU keeps no layer's GELU
// output (f32 in fp32, its f16 copy in f16) and recomputes it from the GELU's
// input in each layer's backward; ALL also recomputes the LayerNorms' outputs
// (ln1, ln2 and their f16 copies) from the residual stream and the saved
// statistics. The same kernels write the same values: the losses and
// gradients are those of NONE bit for bit; each costs a pass over those
// tensors a layer and saves (L - 1) of their slices. AUTO (the commands'
// default) takes the fastest that fits: NONE, else GELU, else ALL (where
// allocating the buffers fails); wgpt_gpt2_recompute says which.
typedef enum wgpt_recompute {
    WGPT_RECOMPUTE_NONE = 0, WGPT_RECOMPUTE_GELU = 1, WGPT_RECOMPUTE_ALL = 2, WGPT_RECOMPUTE_AUTO = 3
} wgpt_recompute;
// "none" / "gelu" / "all" / "auto"; wgpt_recompute_parse returns -1 for anything else.
const char *wgpt_recompute_name(wgpt_recompute r);
int wgpt_recompute_parse(const char *s, wgpt_recompute *out);
wgpt_recompute wgpt_gpt2_recompute(const wgpt_gpt2 *m);

// Everything a model is made with beyond its shape.
typedef struct wgpt_gpt2_opts {
    int training;               // gradients, optimizer state and the backward
    wgpt_precision precision;
    uint32_t shard, nshards;    // ZeRO-1 (wgpt_gpt2_create_sharded); nshards 0 is 1
    wgpt_recompute recompute;   // training models only
} wgpt_gpt2_opts;
wgpt_gpt2 *wgpt_gpt2_create_opts(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                 const wgpt_gpt2_opts *o, char *err, size_t errlen);
// The loss scale the next backward runs with (1 in fp32).
float wgpt_gpt2_loss_scale(const wgpt_gpt2 *m);
// Sets it (f16 training models: a test's), a power of two in [1, 2^24]; the
// count of clean steps restarts.
int wgpt_gpt2_set_loss_scale(wgpt_gpt2 *m, float scale);
// The dynamic loss scale's whole state, for checkpoints: the scale and the
// clean steps in a row counted toward its next doubling (0 in fp32).
uint32_t wgpt_gpt2_loss_scale_clean_steps(const wgpt_gpt2 *m);
// Restores both (a checkpoint's): the scale as wgpt_gpt2_set_loss_scale
// takes it, clean_steps below WGPT_LOSS_SCALE_INTERVAL.
int wgpt_gpt2_restore_loss_scale(wgpt_gpt2 *m, float scale, uint32_t clean_steps);
// A model with parameters but no gradients, optimizer state or backward:
// for sampling and evaluation from a checkpoint (fp32; for another precision
// wgpt_gpt2_create_precision with training 0). A forward-only model prepares
// its forward pass (and compiles its kernels) at its first forward, so that
// one used only through a decoder (model/gpt2_decode.h) compiles none of them.
wgpt_gpt2 *wgpt_gpt2_create_forward_only(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T, char *err,
                                         size_t errlen);
// A forward-only instance for batches (B, T) that uses train's parameters
// (no copy: it sees every update). No gradients or optimizer state. Free it
// before train.
wgpt_gpt2 *wgpt_gpt2_create_inference(wgpt_gpt2 *train, uint32_t B, uint32_t T, char *err, size_t errlen);
void wgpt_gpt2_free(wgpt_gpt2 *m);
// Bytes of GPU memory the model allocated: params+grads+AdamW state, activations.
void wgpt_gpt2_memory(const wgpt_gpt2 *m, uint64_t *param_bytes, uint64_t *activation_bytes);
// The first of those split: parameters and gradients (the f16 copy included),
// and the AdamW moments (this shard's only, in a sharded model).
void wgpt_gpt2_memory_parts(const wgpt_gpt2 *m, uint64_t *param_grad_bytes, uint64_t *adam_bytes);
// All of it by kind (bytes of GPU buffers; their sum is the two of wgpt_gpt2_memory).
typedef struct wgpt_gpt2_memory_kinds {
    uint64_t masters;      // the fp32 parameters: all, or with split_masters this shard's matmul weights
                           // (qkvw, attprojw, fcw, fcprojw) and every other tensor whole
    uint64_t weights16;    // their f16 copy, whole (f16 mode; 0 in fp32)
    uint64_t grads;        // the gradients, whole
    uint64_t adam;         // the AdamW moments: this shard's
    uint64_t activations;
    int split_masters;     // a ZeRO-1 model in f16 (wgpt_gpt2_create_sharded with nshards > 1)
} wgpt_gpt2_memory_kinds;
void wgpt_gpt2_memory_split(const wgpt_gpt2 *m, wgpt_gpt2_memory_kinds *out);
// The GPU layer's memory tags (wgpt_gpu_mem_tag) a model's buffers count
// under, so that a caller can split wgpt_gpu_memory's peak by them: the
// parameters with their f16 copy and the gradients; AdamW's moments; the
// forward's activations (kept for the backward); and scratch, the rest (the
// logits, the backward's passing gradients, the matmuls' partials and
// transposes, and every buffer made outside the model, untagged).
enum { WGPT_MEM_SCRATCH = 0, WGPT_MEM_PARAMS = 1, WGPT_MEM_OPTIMIZER = 2, WGPT_MEM_ACTIVATIONS = 3 };

// ZeRO-1: a training model that keeps the AdamW moments of shard `shard` of
// `nshards` contiguous pieces of the padded parameter array (64-float
// boundaries, the same on every device) and whose update changes only that
// piece of the parameters; the gradient norm still covers every gradient.
// In f16 with nshards > 1 it also keeps the fp32 masters of the matmul
// weights (qkvw, attprojw, fcw, fcprojw: the matmuls read their f16 copy)
// of its piece only, every other tensor whole (the embedding, layernorm and
// bias kernels read them in fp32); its update writes the piece's f16 copy
// as well. The caller gathers the updated pieces of all shards
// (wgpt_gpt2_get_shard_update, wgpt_gpt2_set_shard_updates). nshards 1 is an
// ordinary training model. Fails if a shard would be empty.
wgpt_gpt2 *wgpt_gpt2_create_sharded(wgpt_gpu *g, const wgpt_gpt2_config *c, uint32_t B, uint32_t T,
                                    wgpt_precision precision, uint32_t shard, uint32_t nshards, char *err,
                                    size_t errlen);
uint32_t wgpt_gpt2_num_shards(const wgpt_gpt2 *m);  // 1 unless sharded
// Floats of the padded parameter array, and shard i's piece of it.
uint64_t wgpt_gpt2_padded_params(const wgpt_gpt2 *m);
void wgpt_gpt2_shard_range(const wgpt_gpt2 *m, uint32_t i, uint64_t *offset, uint64_t *count);
// This model's piece of the fp32 parameters (padded layout, its shard's
// count): the true masters, in f16 too (a checkpoint gathers them).
int wgpt_gpt2_get_param_shard(wgpt_gpt2 *m, float *params);
// All parameters in the padded layout (wgpt_gpt2_padded_params floats); the
// f16 copies are refreshed. A model with split masters keeps what it holds.
int wgpt_gpt2_set_params_padded(wgpt_gpt2 *m, const float *padded);
// The exchange after a sharded update: shard i's update is
// wgpt_gpt2_shard_update_words(m, i) 32-bit words (the same on every shard);
// get gives this model's (after its update), set takes every shard's, one
// after the other in shard order, and leaves the model with every shard's
// update (its own is in place already). What a word holds is the model's
// business: the piece's fp32 values, or with split masters the piece's f16
// copy (two halves a word) and the fp32 values of its tensors kept whole.
uint64_t wgpt_gpt2_shard_update_words(const wgpt_gpt2 *m, uint32_t i);
int wgpt_gpt2_get_shard_update(wgpt_gpt2 *m, uint32_t *words);
int wgpt_gpt2_set_shard_updates(wgpt_gpt2 *m, const uint32_t *words);
// This shard's moments (padded layout, its shard's count each).
int wgpt_gpt2_get_adam_shard(wgpt_gpt2 *m, float *adam_m, float *adam_v);
// A padded-layout array (wgpt_gpt2_padded_params floats) in the reference layout.
void wgpt_gpt2_unpad(const wgpt_gpt2 *m, const float *padded, float *ref);

// Copies parameters (reference layout, wgpt_gpt2_num_params floats) in or
// out; get fails on a model with split masters (gather wgpt_gpt2_get_param_shard).
int wgpt_gpt2_set_params(wgpt_gpt2 *m, const float *params);
int wgpt_gpt2_get_params(wgpt_gpt2 *m, float *params);
int wgpt_gpt2_get_grads(wgpt_gpt2 *m, float *grads);  // after a backward
// Replaces the gradients (a data-parallel run's sum over the ranks, before wgpt_gpt2_update).
int wgpt_gpt2_set_grads(wgpt_gpt2 *m, const float *grads);

// tokens and targets are B*T ids in [0, V); an id out of range is an error
// naming it (checked on the host before upload, and by the kernels).
// Forward only: the mean loss (targets required).
int wgpt_gpt2_forward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss);
// Forward and backward (gradients zeroed first), no update: for tests.
int wgpt_gpt2_forward_backward(wgpt_gpt2 *m, const int *tokens, const int *targets, float *loss);
// Gradient accumulation: the forward and backward of one micro-batch, adding
// to the gradients (first: clear them before). Returns its mean loss.
int wgpt_gpt2_accumulate(wgpt_gpt2 *m, const int *tokens, const int *targets, int first, float *loss);
// The backward in segments, for a data-parallel run that sends gradients
// while the GPU computes the rest (a bucketed exchange). The segments, in
// order: 0 the loss, logits and final layernorm (finishing lnfw, lnfb); 1..L
// the transformer layers from the last to the first (segment i finishing
// the 12 tensors of layer L - i); L + 1 the encoder (wte, wpe: the logits
// matmul of segment 0 adds to wte too). Once a segment ran, its gradients are
// final for the micro-batch. wgpt_gpt2_accumulate is
//   accumulate_begin; backward_segment(0 .. S-1); accumulate_end
// and the gradients are the same bit for bit. Each segment's gradients are
// read back asynchronously as it is submitted: segment_ready polls,
// segment_take waits and copies them out (segment_floats floats: its
// tensors' slices in tensor order, no padding), segment_put writes a
// segment's gradients back (the sum over the ranks). A staging buffer per
// segment (the gradients' size in all) is made on first use.
uint32_t wgpt_gpt2_grad_segments(const wgpt_gpt2 *m);  // L + 2; 0 without a backward
uint64_t wgpt_gpt2_segment_floats(const wgpt_gpt2 *m, uint32_t i);
// The forward (submitted; up to the final LayerNorm: segment 0 runs the
// chunked classifier, the loss and its gradient) and, with first, the
// gradients cleared.
int wgpt_gpt2_accumulate_begin(wgpt_gpt2 *m, const int *tokens, const int *targets, int first);
// Records and submits segment i (in order) and starts the read of its gradients.
int wgpt_gpt2_backward_segment(wgpt_gpt2 *m, uint32_t i);
int wgpt_gpt2_segment_ready(wgpt_gpt2 *m, uint32_t i);  // 1 read, 0 not yet (never waits), -1 error
int wgpt_gpt2_segment_take(wgpt_gpt2 *m, uint32_t i, float *grads);
int wgpt_gpt2_segment_put(wgpt_gpt2 *m, uint32_t i, const float *grads);
// After the last segment: waits for the micro-batch and returns its mean loss.
int wgpt_gpt2_accumulate_end(wgpt_gpt2 *m, float *loss);
// After accum_steps micro-batches: gradients scaled to the mean, clipped,
// AdamW at 1-based step t with learning rate opt->lr. Fills grad_norm and skipped.
int wgpt_gpt2_update(wgpt_gpt2 *m, const wgpt_adamw_config *opt, int t, int accum_steps, wgpt_step_result *out);
// One training step of one batch: forward, backward, clip, AdamW at 1-based step t.
int wgpt_gpt2_train_step(wgpt_gpt2 *m, const int *tokens, const int *targets, const wgpt_adamw_config *opt,
                         int t, wgpt_step_result *out);
// Next-token logits at position (b, t) of a forward over tokens (B*T ids):
// out receives V floats (the padded ones are left out).
int wgpt_gpt2_logits(wgpt_gpt2 *m, const int *tokens, uint32_t b, uint32_t t, float *out);
// After wgpt_gpt2_forward: the logits of every position, (B, T, V) floats
// (the padded ones left out).
int wgpt_gpt2_read_logits(wgpt_gpt2 *m, float *out);
// ZeRO-1's update with the norm of the shards: for a sharded model whose
// gradients are summed over the ranks only in its shard (the rest is not
// read). begin: the mean scaling, the sum of squares of this shard's
// gradients (*sumsq, f32 in a fixed order) and whether one is NaN/Inf
// (*bad). The caller sums sumsq over the shards in shard order and ORs bad;
// end: with those, the clip and skip decisions of wgpt_gpt2_update (the same
// for every shard) and AdamW over the shard.
int wgpt_gpt2_update_shard_begin(wgpt_gpt2 *m, const wgpt_adamw_config *opt, int accum_steps, double *sumsq,
                                 int *bad);
int wgpt_gpt2_update_shard_end(wgpt_gpt2 *m, const wgpt_adamw_config *opt, int t, double sumsq, int bad,
                               wgpt_step_result *out);
// How many floats of each shard's piece of the padded array (counts[i] for
// shard i of wgpt_gpt2_num_shards) are in backward segment `segment`'s
// gradients (segment < 0: in the whole reference layout); the floats of a
// shard are consecutive there, shard after shard.
void wgpt_gpt2_shard_counts(const wgpt_gpt2 *m, int segment, uint64_t *counts);
// AdamW's moments in the reference layout (for checkpoints); zero before the
// first step. get fails on a sharded model (gather wgpt_gpt2_get_adam_shard);
// set takes the full moments and keeps the model's shard of them.
int wgpt_gpt2_get_adam(wgpt_gpt2 *m, float *adam_m, float *adam_v);
int wgpt_gpt2_set_adam(wgpt_gpt2 *m, const float *adam_m, const float *adam_v);
// Writes a NaN into the gradients (for tests of the fault handling): the next
// update must detect it and skip.
int wgpt_gpt2_inject_nan_grad(wgpt_gpt2 *m);
const char *wgpt_gpt2_error(const wgpt_gpt2 *m);

#endif
