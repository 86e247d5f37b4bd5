// cross_entropy.h: softmax cross-entropy loss (kernels/06_cross_entropy.wgsl):
// per-row losses and log-sum-exp, the gradient written over the logits, and
// the mean loss. Logits are (BT, Vp) with only the first V columns real.
#ifndef WGPT_CROSS_ENTROPY_H
#define WGPT_CROSS_ENTROPY_H

#include <stdint.h>

#include "model/input_status.h"
#include "model/op.h"

// losses (BT) = logsumexp(logits[row, :V]) - logits[row, target]; lse (BT)
// keeps the log-sum-exp for the backward. logits (BT,Vp), targets (BT) u32,
// status (WGPT_STATUS_WORDS u32): a target >= V gives loss NaN and sets
// WGPT_STATUS_BAD_TARGET. Logits are bound in row chunks if they exceed the
// device's binding limit. Views need 256-byte aligned offsets.
int wgpt_crossentropy_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view losses, wgpt_view lse, wgpt_view status,
                              wgpt_view logits, wgpt_view targets, uint32_t BT, uint32_t V, uint32_t Vp);

// In place on logits (BT,Vp): (softmax(logits[:V]) - onehot(target)) * dloss,
// padded columns set to 0. dloss = 1/BT for the mean loss. lse (BT) from the forward.
int wgpt_crossentropy_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view logits, wgpt_view lse, wgpt_view targets,
                               uint32_t BT, uint32_t V, uint32_t Vp, float dloss);

// The same gradient written as f16 (2 bytes a value) into dlogits16 (BT, Vp),
// which must be in another buffer; the logits are left as they are. Vp a
// multiple of 8; views on 16-byte boundaries. The f16 mode's logits matmuls read it.
int wgpt_crossentropy_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dlogits16, wgpt_view logits, wgpt_view lse,
                                   wgpt_view targets, uint32_t BT, uint32_t V, uint32_t Vp, float dloss);

// The train step's cross-entropy in one pass of each row (f16 mode): what
// wgpt_crossentropy_forward writes (losses, lse, status) and what
// wgpt_crossentropy_backward_f16 writes (dlogits16), the same values bit for
// bit, the logits read once from memory instead of twice. The views and shapes
// of wgpt_crossentropy_backward_f16 (Vp a multiple of 8, 16-byte offsets,
// dlogits16 in another buffer); the logits are left as they are.
int wgpt_crossentropy_fused_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view losses, wgpt_view lse, wgpt_view status,
                                wgpt_view dlogits16, wgpt_view logits, wgpt_view targets, uint32_t BT, uint32_t V,
                                uint32_t Vp, float dloss);

// out1 (1) = mean of losses (BT), summed in a fixed order (deterministic).
int wgpt_loss_mean(wgpt_gpu *g, wgpt_op *op, wgpt_view out1, wgpt_view losses, uint32_t BT);

#endif
