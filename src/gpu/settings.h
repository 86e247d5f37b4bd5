// settings.h: what both GPU backends (Dawn's, src/gpu/, and the browser's,
// src/gpu/web/) make of wgpt_gpu_options alike. On gpu.h alone.
#ifndef WGPT_GPU_SETTINGS_H
#define WGPT_GPU_SETTINGS_H

#include <stddef.h>

#include "gpu/gpu.h"

// 0, or -1 with err naming the field: values of opt the layer cannot take
// (the CLI refuses them first, naming the variable: src/cli/gpu_env.c);
// the limits are gpu.h's.
int wgpt_gpu_options_check_(const wgpt_gpu_options *opt, char *err, size_t errlen);
// How long a wait for the GPU may take: opt->timeout_s, else 600 s.
double wgpt_gpu_timeout_of_(const wgpt_gpu_options *opt);
// The settings of the layers above that a device keeps in its info
// (cpu_kernels, matmul_splits, sgm_block, matmul_epilogues, streamk, the
// binding limit), from opt and the device's type and limits in info.
void wgpt_gpu_keep_settings_(wgpt_gpu_info *info, const wgpt_gpu_options *opt);

// chips.c: info's compute_units and peaks from the table of known chips;
// compute_units (options.compute_units) instead of the table's where not 0.
void wgpt_chip_fill_(wgpt_gpu_info *info, uint32_t compute_units);
// sgm_pick.c: sets info->sgm_config from info's matrix configurations and
// subgroup sizes: the f16 x f16 -> f32 one 03_linear_sgm.wgsl takes (M 16, N 8
// or 16, K 8, 16 or 32, the adapter's one subgroup size), the largest K
// first, or -1; want > 0 (options.sgm_config): configuration want - 1, and -1
// with err filled if the kernels cannot take it.
int wgpt_sgm_choose_config_(wgpt_gpu_info *info, int want, char *err, size_t errlen);
// The same with want 0 (wgpt picks).
int wgpt_sgm_pick_config_(wgpt_gpu_info *info, char *err, size_t errlen);
// The lines every kernel's source begins with: `enable f16;`, `enable subgroups;`
// and, with subgroup matrices, `enable chromium_experimental_subgroup_matrix;`
// and the chosen configuration's fragment shape (SGM_TM, SGM_TN, SGM_TK, SGM_SG).
void wgpt_gpu_enables_(const wgpt_gpu_info *info, char *out, size_t cap);

#endif
