// variant.c: the GPU / CPU kernel choice (see variant.h).
#include "model/variant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static wgpt_kernel_variant forced = WGPT_KERNELS_AUTO;

void wgpt_kernel_variant_force(wgpt_kernel_variant v) { forced = v; }

// WGPT_KERNELS, read on first use: "gpu", "cpu", or unset/empty for auto.
// Anything else counts as unset here; wgpt_kernel_variant_check_env refuses it.
static wgpt_kernel_variant from_env_(void) {
    static int done = 0;
    static wgpt_kernel_variant env = WGPT_KERNELS_AUTO;
    if (!done) {
        done = 1;
        const char *s = getenv("WGPT_KERNELS");
        if (s && strcmp(s, "gpu") == 0) env = WGPT_KERNELS_GPU;
        else if (s && strcmp(s, "cpu") == 0) env = WGPT_KERNELS_CPU;
    }
    return env;
}

int wgpt_kernel_variant_check_env(char *err, size_t errlen) {
    const char *s = getenv("WGPT_KERNELS");
    if (!s || !*s || strcmp(s, "gpu") == 0 || strcmp(s, "cpu") == 0) return 0;
    snprintf(err, errlen, "WGPT_KERNELS='%s': must be gpu or cpu (or unset: chosen by the device)", s);
    return -1;
}

int wgpt_kernel_variant_cpu(const wgpt_gpu *g) {
    if (forced != WGPT_KERNELS_AUTO) return forced == WGPT_KERNELS_CPU;
    wgpt_kernel_variant env = from_env_();
    if (env != WGPT_KERNELS_AUTO) return env == WGPT_KERNELS_CPU;
    const char *type = wgpt_gpu_get_info(g)->type;
    return type && strcmp(type, "CPU") == 0;
}
