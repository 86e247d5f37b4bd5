// sgm_pick.c: the subgroup-matrix choices both GPU backends make alike (the
// Dawn one, src/gpu/device.c, and the browser's, src/gpu/web/): which of the
// device's configurations the tensor-core kernels are compiled for, and the
// `enable` lines (and fragment constants) every kernel's source begins with.
#include <stdio.h>
#include <string.h>

#include "gpu/backend_shared.h"

// The configuration 03_linear_sgm.wgsl is compiled for (see gpu.h), or -1
// (internal.h).
// Its block holds 4 x 4 (or 4 x 2) fragments a subgroup: 16 rows by 8 or 16
// columns (NVIDIA's and AMD's shapes), K 8, 16 or 32 (its stages of 32 and
// 64 hold whole fragments).
int wgpt_sgm_choose_config_(wgpt_gpu_info *in, int want, char *err, size_t errlen) {
    in->sgm_config = -1;
    for (int i = 0; i < in->n_matrix_configs; i++) {
        const wgpt_matrix_config *c = &in->matrix_configs[i];
        if (c->input != WGPT_MATRIX_F16 || c->result != WGPT_MATRIX_F32 || c->sg_min != c->sg_max ||
            c->sg_min != in->subgroup_min || in->subgroup_min != in->subgroup_max || c->m != 16 ||
            (c->n != 8 && c->n != 16) || c->k % 8 || c->k > 32 || 32 % c->k)
            continue;
        if (want > 0) {  // options.sgm_config: configuration want - 1
            if (want - 1 == i) in->sgm_config = i;
            continue;
        }
        const wgpt_matrix_config *b = in->sgm_config >= 0 ? &in->matrix_configs[in->sgm_config] : NULL;
        if (!b || c->k > b->k || (c->k == b->k && c->m * c->n < b->m * b->n)) in->sgm_config = i;
    }
    if (want > 0 && in->sgm_config < 0) {  // a device without any is told so, not silently passed
        snprintf(err, errlen, "WGPT_SGM_CONFIG=%d: not an f16 x f16 -> f32 subgroup-matrix configuration of '%s' that "
                 "wgpt's kernels take (%s; see `wgpt info`)", want - 1, in->name,
                 in->n_matrix_configs ? "it has others" : "it has no subgroup matrices");
        return -1;
    }
    return 0;
}

int wgpt_sgm_pick_config_(wgpt_gpu_info *in, char *err, size_t errlen) {
    return wgpt_sgm_choose_config_(in, 0, err, errlen);
}

// The lines every kernel's source begins with (internal.h).
void wgpt_gpu_enables_(const wgpt_gpu_info *i, char *out, size_t cap) {
    if (i->has_subgroup_matrix && i->sgm_config >= 0) {
        // the fragment shape 03_linear_sgm.wgsl is written for (gpu.h: sgm_config)
        const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
        snprintf(out, cap,
                 "enable f16;\nenable subgroups;\n%s"
                 "const SGM_TM: u32 = %uu;\nconst SGM_TN: u32 = %uu;\nconst SGM_TK: u32 = %uu;\n"
                 "const SGM_SG: u32 = %uu;\n",
                 i->sgm_emulated ? "diagnostic(off, subgroup_uniformity);\n"
                                 : "enable chromium_experimental_subgroup_matrix;\n",
                 c->m, c->n, c->k, c->sg_max);
    } else if (i->has_subgroup_matrix && !i->sgm_emulated) {
        snprintf(out, cap, "enable f16;\nenable subgroups;\nenable chromium_experimental_subgroup_matrix;\n");
    } else {
        snprintf(out, cap, "%s", i->has_f16 ? "enable f16;\nenable subgroups;\n" : "enable subgroups;\n");
    }
}
