// optimizer.h: the optimizer step on the flat parameter arrays, appended to a
// prepared op (kernels/07_optimizer.wgsl): the global gradient norm with its
// clip scale and non-finite flag, written to a small GPU state buffer, then
// AdamW, which reads that buffer (no CPU round trip between the two).
//
// Every flat array may be larger than the device's maxStorageBufferBindingSize
// (GPT-2 124M: 497 MB each): the wrappers split it into chunks that fit.
// Offsets and counts are in floats. The base views' offsets must be multiples
// of the device's minStorageBufferOffsetAlignment; size 0 means "to the
// buffer's end". Functions return 0, or -1 with the message in wgpt_gpu_error
// (invalid arguments and out of memory included).
#ifndef WGPT_MODEL_OPTIMIZER_H
#define WGPT_MODEL_OPTIMIZER_H

#include "model/op.h"

// Gradient floats summed by one grad_norm_partial workgroup (NORM_SLICE).
#define WGPT_NORM_SLICE 4096u

// The 16-byte state buffer (OptState in the kernel file), written by
// wgpt_grad_norm and read by wgpt_adamw_update. Download it for logging.
// The gradients it speaks of are the buffer's times the norm's grad_scale
// (wgpt_grad_norm_set; 1 unless set).
typedef struct wgpt_optim_state {
    float sumsq;         // sum of squared gradients (f32, fixed order), times grad_scale^2
    float norm;          // sqrt(sumsq), before clipping
    float scale;         // what AdamW multiplies the buffer's gradients by: grad_scale, times
                         // max_norm / norm if max_norm > 0 and norm > max_norm
    uint32_t nonfinite;  // 1: a gradient or the sum is NaN/Inf; 2: the norm is above the skip threshold.
                         // Either way AdamW skips the step
} wgpt_optim_state;
#define WGPT_OPTIM_STATE_BYTES 16u

// Bytes of the scratch buffer (the per-workgroup partial sums) that
// wgpt_grad_norm needs for n gradient floats on this device; 0 if n is 0.
uint64_t wgpt_grad_norm_scratch_bytes(wgpt_gpu *g, uint64_t n);

// Appends the global L2 norm of grads[0, n) and its clip decision:
// per-chunk grad_norm_partial dispatches into scratch, then one
// grad_norm_finish that writes state. Deterministic: a fixed summation order.
// max_norm <= 0 disables clipping (scale 1).
// grads (n); scratch (>= wgpt_grad_norm_scratch_bytes); state (WGPT_OPTIM_STATE_BYTES)
// The finish dispatch of a prepared norm, to set the spike threshold per step.
typedef struct wgpt_grad_norm_handle {
    wgpt_bind *finish;  // belongs to the op
    uint32_t n_parts;
    float max_norm;
} wgpt_grad_norm_handle;
int wgpt_grad_norm(wgpt_gpu *g, wgpt_op *op, wgpt_view grads, uint64_t n, wgpt_view scratch, wgpt_view state,
                   float max_norm, wgpt_grad_norm_handle *h);
// Per step, taking effect at the next recording of the op (h from
// wgpt_grad_norm): steps whose finite norm exceeds skip_norm are skipped like
// non-finite ones (state.nonfinite = 2; skip_norm <= 0 turns it off); and the
// gradients the norm and AdamW see are the buffer's times grad_scale (e.g.
// 1 / (micro-batches x loss scale)), folded into state.scale instead of a
// pass over the buffer (the sum of squares is of the buffer's values, so
// only |gradient| / grad_scale past ~1e19 overflows it: then the step counts
// as non-finite). grad_scale must be positive and finite.
int wgpt_grad_norm_set(wgpt_gpu *g, const wgpt_grad_norm_handle *h, float skip_norm, float grad_scale);

// A range of the flat arrays updated with its own weight decay: GPT-2 decays
// the 2D weights only (wd 0 for biases and layernorm parameters).
typedef struct wgpt_adamw_range {
    uint64_t offset, count;  // floats from the start of every base view
    float weight_decay;
} wgpt_adamw_range;

// The per-step hyperparameters of wgpt_adamw_update.
typedef struct wgpt_adamw_hparams {
    float lr, beta1, beta2, eps;  // beta1, beta2 in [0, 1)
    int t;                        // 1-based step number (bias corrections)
} wgpt_adamw_hparams;

// The binds of one prepared AdamW update (one per chunk), to change lr and t
// every step without rebuilding. The binds belong to the op: free the handle
// before or after the op, but do not use it once the op is freed.
typedef struct wgpt_adamw wgpt_adamw;

// Appends one AdamW step over every range (ranges may come in any order, must
// not overlap; adjacent ranges with the same decay share dispatches), with
// g = grads * state.scale; a step whose state.nonfinite is set leaves params,
// m and v untouched. Elements outside the ranges are never written.
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   params -= lr * ((m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*params)
// params, grads, m, v: the flat arrays (same layout); state from wgpt_grad_norm.
// *out receives the handle (free with wgpt_adamw_free).
int wgpt_adamw_update(wgpt_gpu *g, wgpt_op *op, wgpt_view params, wgpt_view grads, wgpt_view m, wgpt_view v,
                      wgpt_view state, const wgpt_adamw_range *ranges, int nranges, const wgpt_adamw_hparams *hp,
                      wgpt_adamw **out);
// The same, also writing params16 = f16(params) (round to nearest even, as
// wgpt_cast_f16) for every element it updates, in the same dispatch: the f16
// mode's update (no cast of the whole array after it; with ZeRO-1 a rank
// holds only its shard of the fp32 masters anyway).
// params16 is bound over the same floats as params (2 bytes each; its offset
// a multiple of the storage alignment); every range starts and ends on an
// even float. A skipped step writes neither.
int wgpt_adamw_update_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view params, wgpt_view params16, wgpt_view grads,
                          wgpt_view m, wgpt_view v, wgpt_view state, const wgpt_adamw_range *ranges, int nranges,
                          const wgpt_adamw_hparams *hp, wgpt_adamw **out);
// Sets the learning rate and step number of every chunk's dispatch for the
// next recording of the op (beta1, beta2, eps stay as created). t >= 1.
int wgpt_adamw_set_step(wgpt_gpu *g, wgpt_adamw *h, float lr, int t);
void wgpt_adamw_free(wgpt_adamw *h);

#endif
