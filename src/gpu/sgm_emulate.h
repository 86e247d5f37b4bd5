// sgm_emulate.h: subgroup matrices emulated with subgroup broadcasts, on a
// device without them (lavapipe), so that the tensor-core kernels' own code
// runs and is checked where no tensor core is: wgpt_gpu_options.emulate_sgm
// or WGPT_SGM_EMULATE=1. For tests: the hardware's math (f16 products, exact
// in f32, summed in f32), far slower than any real kernel.
#ifndef WGPT_GPU_SGM_EMULATE_H
#define WGPT_GPU_SGM_EMULATE_H

#include <stddef.h>

#include "gpu.h"

// The fragment the emulation offers: NVIDIA's f16 x f16 -> f32 shape (M 16,
// N 8, K 16), in the device's own subgroups.
#define WGPT_SGM_EMU_M 16u
#define WGPT_SGM_EMU_N 8u
#define WGPT_SGM_EMU_K 16u

// Gives info one emulated configuration and marks it (info->sgm_emulated).
// Returns 0, or -1 with err naming what the device lacks: shader-f16, or one
// subgroup size that divides 16 (each lane holds whole rows of a fragment).
int wgpt_sgm_emulate_info(wgpt_gpu_info *info, char *err, size_t errlen);

// The WGSL `code` with every subgroup-matrix type and builtin replaced by
// plain WGSL of the same meaning, for the configuration cfg (SGM_TM, SGM_TN,
// SGM_TK, subgroups of sg_max): each matrix type a struct whose lane l holds
// rows l * rows / sg .. of it, as f32; subgroupMatrixLoad and Store functions
// generated for each array they touch (offsets and strides count that
// array's elements, the matrix's scalars packed in them as stored: 8 halves
// or 4 floats a vec4<u32>); subgroupMatrixMultiplyAccumulate one that takes
// each value of the right operand from its lane with subgroupBroadcast and
// sums in f32 in order of k. All of it unrolled to constant indices (with
// loops and dynamic indices lavapipe took 8.6 s to create one matmul
// pipeline, unrolled 1 s). The helpers go after the
// last line, so line numbers stay those of `code`. The code must have
// `enable f16; enable subgroups;` and subgroup uniformity diagnostics off.
// Limits, each refused with err naming it: one matrix type a kind (left,
// right, result), dimensions written as literals or SGM_TM/TN/TK, pointers
// `&array` to module-scope arrays of f32, f16 or u32 (or their vec2/vec4),
// only result matrices stored. Returns a malloc'd string, or NULL.
char *wgpt_sgm_emulate_source(const char *code, const wgpt_matrix_config *cfg, char *err, size_t errlen);

#endif
