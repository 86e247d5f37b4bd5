// env.c: the GPU layer's environment variables, checked when a device or the
// adapter list is opened so that a bad value is an error naming it rather
// than a setting silently ignored (see the README's table).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/internal.h"

#define DEFAULT_TIMEOUT_S 600.0
#define MAX_TIMEOUT_S 1e7  // about 4 months: beyond that, a typo

double wgpt_gpu_timeout_s_(void) {
    const char *s = getenv("WGPT_GPU_TIMEOUT_S");
    if (!s || !*s) return DEFAULT_TIMEOUT_S;
    char *end;
    errno = 0;
    double t = strtod(s, &end);
    return end != s && !*end && !errno && t > 0 && t <= MAX_TIMEOUT_S ? t : DEFAULT_TIMEOUT_S;
}

// Comma-separated Dawn toggle names: lowercase letters, digits and '_'.
// Dawn ignores a name it does not know, so at least the spelling is checked.
static int toggles_ok_(const char *var, int max, char *err, size_t errlen) {
    const char *s = getenv(var);
    if (!s || !*s) return 0;
    if (strlen(s) >= WGPT_GPU_TOGGLES_MAX_CHARS) {
        snprintf(err, errlen, "%s holds %zu characters; at most %d", var, strlen(s), WGPT_GPU_TOGGLES_MAX_CHARS - 1);
        return -1;
    }
    int n = 0;
    for (const char *p = s;; p++) {
        const char *start = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_') p++;
        if (p == start || (*p && *p != ',')) {
            snprintf(err, errlen,
                     "%s='%s': '%.*s' is not a Dawn toggle name (lowercase letters, digits and _, names "
                     "separated by commas without spaces, e.g. use_dxc,dump_shaders)",
                     var, s, (int)strcspn(start, ","), start);
            return -1;
        }
        if (++n > max) {
            snprintf(err, errlen, "%s names more than %d toggles", var, max);
            return -1;
        }
        if (!*p) return 0;
    }
}

wgpt_kernels wgpt_gpu_env_kernels_(const char *type) {
    const char *s = getenv("WGPT_KERNELS");
    if (s && strcmp(s, "gpu") == 0) return WGPT_KERNELS_GPU;
    if (s && strcmp(s, "cpu") == 0) return WGPT_KERNELS_CPU;
    return type && strcmp(type, "CPU") == 0 ? WGPT_KERNELS_CPU : WGPT_KERNELS_GPU;
}

// WGPT_MATMUL_EPILOGUE: comma-separated names of WGPT_EPI_* bits, their bits
// in *bits; the first name that is none (its length in *bad_len), else NULL.
static const char *epilogues_(const char *s, uint32_t *bits, int *bad_len) {
    static const struct { const char *name; uint32_t bits; } NAMES[] = {
        {"none", 0}, {"round", WGPT_EPI_ROUND}, {"gelu", WGPT_EPI_GELU},
        {"gelu_grad", WGPT_EPI_GELU_GRAD}, {"all", WGPT_EPI_ALL}};
    *bits = 0;
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, ","), i = 0;
        while (i < sizeof NAMES / sizeof NAMES[0] && (strlen(NAMES[i].name) != n || strncmp(NAMES[i].name, p, n)))
            i++;
        if (i == sizeof NAMES / sizeof NAMES[0]) {
            *bad_len = (int)n;
            return p;
        }
        *bits |= NAMES[i].bits;
        p += n + (p[n] == ',');
    }
    return NULL;
}

uint32_t wgpt_gpu_env_epilogues_(void) {
    const char *s = getenv("WGPT_MATMUL_EPILOGUE");
    uint32_t bits = 0;
    int n;
    return s && !epilogues_(s, &bits, &n) ? bits : 0;
}

// WGPT_MATMUL_STREAMK's value as a wgpt_streamk (their order), -1 if it is none of them.
static int streamk_of_(const char *s) {
    static const char *const NAMES[] = {"auto", "off", "on"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, NAMES[i]) == 0) return i;
    return -1;
}

wgpt_streamk wgpt_gpu_env_streamk_(void) {
    const char *s = getenv("WGPT_MATMUL_STREAMK");
    int v = s ? streamk_of_(s) : -1;
    return v < 0 ? WGPT_STREAMK_AUTO : (wgpt_streamk)v;
}

int wgpt_gpu_env_check_(char *err, size_t errlen) {
    const char *s = getenv("WGPT_GPU_TIMEOUT_S");
    if (s && *s) {
        char *end;
        errno = 0;
        double t = strtod(s, &end);
        if (end == s || *end || errno || !(t > 0 && t <= MAX_TIMEOUT_S)) {
            snprintf(err, errlen,
                     "WGPT_GPU_TIMEOUT_S='%s': not a number of seconds in (0, %g] (how long to wait for the GPU "
                     "before reporting a hang; default %g)",
                     s, MAX_TIMEOUT_S, DEFAULT_TIMEOUT_S);
            return -1;
        }
    }
    s = getenv("WGPT_ROBUST");
    if (s && *s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0) {
        snprintf(err, errlen, "WGPT_ROBUST='%s': must be 1 (keep Dawn's robustness) or 0", s);
        return -1;
    }
    s = getenv("WGPT_KERNELS");
    if (s && *s && strcmp(s, "gpu") != 0 && strcmp(s, "cpu") != 0) {
        snprintf(err, errlen, "WGPT_KERNELS='%s': must be gpu or cpu (or unset: chosen by the device)", s);
        return -1;
    }
    s = getenv("WGPT_MATMUL_EPILOGUE");
    uint32_t bits;
    int bad_len;
    const char *bad = s ? epilogues_(s, &bits, &bad_len) : NULL;
    if (bad) {
        snprintf(err, errlen,
                 "WGPT_MATMUL_EPILOGUE='%s': '%.*s' is not an epilogue (round, gelu, gelu_grad, all or none, "
                 "separated by commas)", s, bad_len, bad);
        return -1;
    }
    s = getenv("WGPT_MATMUL_STREAMK");
    if (s && *s && streamk_of_(s) < 0) {
        snprintf(err, errlen, "WGPT_MATMUL_STREAMK='%s': must be auto, off or on (stream-K in the tensor-core "
                 "matmuls: where a split pass leaves units idle, never, or wherever it can run)", s);
        return -1;
    }
    s = getenv("WGPT_SGM_CONFIG");
    if (s && *s && (strspn(s, "0123456789") != strlen(s) || strlen(s) > 4)) {
        snprintf(err, errlen, "WGPT_SGM_CONFIG='%s': not the number of a subgroup-matrix configuration (0, 1, ... "
                 "in `wgpt info`'s list)", s);
        return -1;
    }
    s = getenv("WGPT_SGM_EMULATE");
    if (s && *s && strcmp(s, "0") != 0 && strcmp(s, "1") != 0) {
        snprintf(err, errlen, "WGPT_SGM_EMULATE='%s': must be 1 (emulate subgroup matrices where the device has "
                 "f16) or 0", s);
        return -1;
    }
    if (toggles_ok_("WGPT_DAWN_TOGGLES", WGPT_GPU_TOGGLES_ON_MAX, err, errlen) < 0) return -1;
    return toggles_ok_("WGPT_DAWN_TOGGLES_OFF", WGPT_GPU_TOGGLES_OFF_MAX, err, errlen);
}
