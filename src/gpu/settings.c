// settings.c: wgpt_gpu_options as both GPU backends take them (settings.h).
// The layer reads no environment variable: the CLI fills these fields from
// the WGPT_ variables and refuses bad values naming them (src/cli/gpu_env.c).
#include <stdio.h>
#include <string.h>

#include "gpu/backend_shared.h"

// How many names a comma-separated toggle list holds.
static int count_toggles_(const char *s) {
    int n = 1;
    for (; *s; s++) n += *s == ',';
    return n;
}

static int toggles_ok_(const char *field, const char *s, int max, char *err, size_t errlen) {
    if (!s || !*s) return 0;
    if (strlen(s) >= WGPT_GPU_TOGGLES_MAX_CHARS) {
        snprintf(err, errlen, "%s holds %zu characters; at most %d", field, strlen(s), WGPT_GPU_TOGGLES_MAX_CHARS - 1);
        return -1;
    }
    if (count_toggles_(s) > max) {
        snprintf(err, errlen, "%s names more than %d toggles", field, max);
        return -1;
    }
    return 0;
}

int wgpt_gpu_options_check_(const wgpt_gpu_options *o, char *err, size_t errlen) {
    if (!(o->timeout_s >= 0 && o->timeout_s <= WGPT_GPU_MAX_TIMEOUT_S)) {
        snprintf(err, errlen, "timeout_s %g: not a number of seconds in (0, %g] (or 0: %g)", o->timeout_s,
                 WGPT_GPU_MAX_TIMEOUT_S, WGPT_GPU_DEFAULT_TIMEOUT_S);
        return -1;
    }
    if (o->sgm_config < 0) {
        snprintf(err, errlen, "sgm_config %d: 0 (wgpt picks) or 1 + the index of a configuration", o->sgm_config);
        return -1;
    }
    if (toggles_ok_("dawn_toggles", o->dawn_toggles, WGPT_GPU_TOGGLES_ON_MAX, err, errlen) < 0) return -1;
    return toggles_ok_("dawn_toggles_off", o->dawn_toggles_off, WGPT_GPU_TOGGLES_OFF_MAX, err, errlen);
}

double wgpt_gpu_timeout_of_(const wgpt_gpu_options *o) {
    return o && o->timeout_s > 0 ? o->timeout_s : WGPT_GPU_DEFAULT_TIMEOUT_S;
}

void wgpt_gpu_keep_settings_(wgpt_gpu_info *i, const wgpt_gpu_options *o) {
    if (o->max_binding && o->max_binding < i->max_storage_binding) i->max_storage_binding = o->max_binding;
    i->cpu_kernels = o->kernels == WGPT_KERNELS_CPU ||
                     (o->kernels != WGPT_KERNELS_GPU && i->type && strcmp(i->type, "CPU") == 0);
    i->matmul_splits = o->matmul_splits;
    i->sgm_block = o->sgm_block;
    i->matmul_epilogues = o->matmul_epilogues;
    i->streamk = o->streamk;
}
