// variant.h: which twin of the hot kernels a layer dispatches. The GPU
// kernels (tiled, workgroup memory, barriers, 256 threads) suit real GPUs; on
// a CPU driver (Mesa llvmpipe / lavapipe) barriers and big workgroups are
// expensive and the caches do the reuse anyway, so the matmul, layernorm and
// attention layers have CPU twins ("*_flat" kernels: small workgroups, no
// barriers) with the same bindings, params and results up to rounding.
//
// The choice belongs to the device (so two devices in one process may
// differ): wgpt_gpu_options.kernels when it says GPU or CPU (the CLI sets it
// from WGPT_KERNELS=gpu|cpu, refusing another value), else the CPU twins on a
// device whose type is "CPU". It applies when a layer's dispatches are prepared (the wrappers
// of linear.h, layernorm.h, attention.h).
#ifndef WGPT_MODEL_VARIANT_H
#define WGPT_MODEL_VARIANT_H

#include "gpu/gpu.h"

// 1 if layers prepared for g use the CPU twins, else 0.
static inline int wgpt_kernel_variant_cpu(const wgpt_gpu *g) { return wgpt_gpu_get_info(g)->cpu_kernels; }

#endif
