// variant.h: which twin of the hot kernels a layer dispatches. The GPU
// kernels (tiled, workgroup memory, barriers, 256 threads) suit real GPUs; on
// a CPU driver (Mesa llvmpipe / lavapipe) barriers and big workgroups are
// expensive and the caches do the reuse anyway, so the matmul, layernorm and
// attention layers have CPU twins ("*_flat" kernels: small workgroups, no
// barriers) with the same bindings, params and results up to rounding.
//
// Choice, in order: wgpt_kernel_variant_force (tests), else the environment
// variable WGPT_KERNELS=gpu|cpu (read once), else the device: the CPU twins on
// a device whose type is "CPU". The choice is made when a layer's dispatches
// are prepared (the wrappers of linear.h, layernorm.h, attention.h).
#ifndef WGPT_MODEL_VARIANT_H
#define WGPT_MODEL_VARIANT_H

#include <stddef.h>

#include "gpu/gpu.h"

typedef enum wgpt_kernel_variant {
    WGPT_KERNELS_AUTO = -1,  // the environment, else the device type
    WGPT_KERNELS_GPU = 0,
    WGPT_KERNELS_CPU = 1,
} wgpt_kernel_variant;

// Overrides the choice for every device until called again with
// WGPT_KERNELS_AUTO. For tests that run each case with both twins.
void wgpt_kernel_variant_force(wgpt_kernel_variant v);

// 1 if layers prepared now for g use the CPU twins, else 0.
int wgpt_kernel_variant_cpu(const wgpt_gpu *g);

// 0 if WGPT_KERNELS is unset, empty, "gpu" or "cpu"; else -1 with err naming
// it (checked where a model is created, so that a typo is not ignored).
int wgpt_kernel_variant_check_env(char *err, size_t errlen);

#endif
