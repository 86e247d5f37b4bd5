// gpu_env.c: the one place that reads the environment variables of the
// README's table into the options of the layers below (gpu_env.h). Every
// bad value is refused here, naming the variable and the value.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gpu_env.h"

// A variable's value, NULL where unset or empty (an empty value is unset).
static const char *env_(const char *name) {
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

// Comma-separated Dawn toggle names: lowercase letters, digits and '_'.
// Dawn ignores a name it does not know, so at least the spelling is checked.
static int toggles_(const char *var, int max, const char **out, char *err, size_t errlen) {
    const char *s = env_(var);
    if (!s) return 0;
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
        if (!*p) break;
    }
    if (!*out) *out = s;
    return 0;
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

// 0 or 1 (WGPT_ROBUST, WGPT_SGM_EMULATE): the value, -1 where unset, -2 for another value.
static int flag_(const char *var) {
    const char *s = env_(var);
    return !s ? -1 : strcmp(s, "1") == 0 ? 1 : strcmp(s, "0") == 0 ? 0 : -2;
}

// WGPT_GPU_TIMEOUT_S, WGPT_COMPUTE_UNITS and WGPT_SGM_CONFIG: the numbers.
static int numbers_(wgpt_gpu_options *o, char *err, size_t errlen) {
    const char *s = env_("WGPT_GPU_TIMEOUT_S");
    if (s) {
        char *end;
        errno = 0;
        double t = strtod(s, &end);
        if (end == s || *end || errno || !(t > 0 && t <= WGPT_GPU_MAX_TIMEOUT_S)) {
            snprintf(err, errlen,
                     "WGPT_GPU_TIMEOUT_S='%s': not a number of seconds in (0, %g] (how long to wait for the GPU "
                     "before reporting a hang; default %g)",
                     s, WGPT_GPU_MAX_TIMEOUT_S, WGPT_GPU_DEFAULT_TIMEOUT_S);
            return -1;
        }
        if (!o->timeout_s) o->timeout_s = t;
    }
    if ((s = env_("WGPT_COMPUTE_UNITS"))) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (*end != 0 || v == 0 || v >= 100000 || *s == '-') {
            snprintf(err, errlen, "WGPT_COMPUTE_UNITS='%s' is not a count of compute units (SMs, CUs) such as 132", s);
            return -1;
        }
        if (!o->compute_units) o->compute_units = (uint32_t)v;
    }
    if ((s = env_("WGPT_SGM_CONFIG"))) {
        if (strspn(s, "0123456789") != strlen(s) || strlen(s) > 4) {
            snprintf(err, errlen, "WGPT_SGM_CONFIG='%s': not the number of a subgroup-matrix configuration (0, 1, ... "
                     "in `wgpt info`'s list)", s);
            return -1;
        }
        if (!o->sgm_config) o->sgm_config = 1 + atoi(s);
    }
    return 0;
}

// WGPT_ROBUST, WGPT_KERNELS, WGPT_MATMUL_EPILOGUE, WGPT_MATMUL_STREAMK and WGPT_SGM_EMULATE: the choices.
static int choices_(wgpt_gpu_options *o, char *err, size_t errlen) {
    int f = flag_("WGPT_ROBUST");
    if (f == -2) {
        snprintf(err, errlen, "WGPT_ROBUST='%s': must be 1 (keep Dawn's robustness) or 0", getenv("WGPT_ROBUST"));
        return -1;
    }
    if (f == 1) o->robust = 1;
    const char *s = env_("WGPT_KERNELS");
    if (s && strcmp(s, "gpu") != 0 && strcmp(s, "cpu") != 0) {
        snprintf(err, errlen, "WGPT_KERNELS='%s': must be gpu or cpu (or unset: chosen by the device)", s);
        return -1;
    }
    if (s && o->kernels == WGPT_KERNELS_AUTO) o->kernels = strcmp(s, "gpu") == 0 ? WGPT_KERNELS_GPU : WGPT_KERNELS_CPU;
    if ((s = getenv("WGPT_MATMUL_EPILOGUE"))) {
        uint32_t bits;
        int bad_len;
        const char *bad = epilogues_(s, &bits, &bad_len);
        if (bad) {
            snprintf(err, errlen,
                     "WGPT_MATMUL_EPILOGUE='%s': '%.*s' is not an epilogue (round, gelu, gelu_grad, all or none, "
                     "separated by commas)", s, bad_len, bad);
            return -1;
        }
        o->matmul_epilogues |= bits;
    }
    if ((s = env_("WGPT_MATMUL_STREAMK"))) {
        static const char *const NAMES[] = {"auto", "off", "on"};  // wgpt_streamk's order
        int v = 0;
        while (v < 3 && strcmp(s, NAMES[v]) != 0) v++;
        if (v == 3) {
            snprintf(err, errlen, "WGPT_MATMUL_STREAMK='%s': must be auto, off or on (stream-K in the tensor-core "
                     "matmuls: where a split pass leaves units idle, never, or wherever it can run)", s);
            return -1;
        }
        if (o->streamk == WGPT_STREAMK_AUTO) o->streamk = (wgpt_streamk)v;
    }
    if ((f = flag_("WGPT_SGM_EMULATE")) == -2) {
        snprintf(err, errlen, "WGPT_SGM_EMULATE='%s': must be 1 (emulate subgroup matrices where the device has "
                 "f16) or 0", getenv("WGPT_SGM_EMULATE"));
        return -1;
    }
    if (f == 1 && !o->emulate_sgm) o->emulate_sgm = WGPT_SGM_EMULATE_IF_F16;
    return 0;
}

int wgpt_cli_gpu_env(wgpt_gpu_options *o, char *err, size_t errlen) {
    if (numbers_(o, err, errlen) < 0 || choices_(o, err, errlen) < 0 ||
        toggles_("WGPT_DAWN_TOGGLES", WGPT_GPU_TOGGLES_ON_MAX, &o->dawn_toggles, err, errlen) < 0 ||
        toggles_("WGPT_DAWN_TOGGLES_OFF", WGPT_GPU_TOGGLES_OFF_MAX, &o->dawn_toggles_off, err, errlen) < 0)
        return -1;
    if (!o->kernel_dir) o->kernel_dir = env_("WGPT_KERNEL_DIR");
    if (!o->kernel_stats) o->kernel_stats = env_("WGPT_KERNEL_STATS");
    if (!o->dawn_lib) o->dawn_lib = env_("WGPT_DAWN_LIB");
    return 0;
}

int wgpt_cli_comm_env(wgpt_comm_options *o, char *err, size_t errlen) {
    const char *s = env_("OMPI_COMM_WORLD_SIZE");  // set by mpirun for each rank it starts
    if (s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end || n < 1 || n > 1000000) {
            snprintf(err, errlen, "OMPI_COMM_WORLD_SIZE='%s': not a count of ranks (mpirun sets it)", s);
            return -1;
        }
        o->launched_ranks = (int)n;
    }
    // mpirun passes its MCA parameters (--mca NAME VALUE) to the ranks as
    // OMPI_MCA_NAME; Open MPI's own default where it is unset or unreadable.
    s = env_("OMPI_MCA_odls_base_sigkill_timeout");
    char *end;
    double t = s ? strtod(s, &end) : 1;
    o->kill_after_s = s && (end == s || *end || !(t >= 0)) ? 1 : t;
    return 0;
}
