// device.c: the browser backend's device: open, close, the sticky error, its description (web_internal.h).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/web/web_internal.h"

static int open_count_;  // one device at a time: the JS side holds one

int wgpt_gpu_fail(wgpt_gpu *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

int wgpt_web_check_(wgpt_gpu *g) {
    if (g->failed) return -1;
    char msg[2048];
    if (js_error(msg, sizeof msg)) {
        g->failed = 1;
        return wgpt_gpu_fail(g, "%s", msg);
    }
    return 0;
}

const char *wgpt_gpu_error(const wgpt_gpu *g) { return g->err; }
const wgpt_gpu_info *wgpt_gpu_get_info(const wgpt_gpu *g) { return &g->info; }
const char *wgpt_gpu_dawn(void) { return "the browser's WebGPU (navigator.gpu)"; }
int wgpt_gpu_left_hung(void) { return 0; }
void wgpt_gpu_force_loss(wgpt_gpu *g) {
    (void)g;
    js_force_loss();
}

const char *wgpt_matrix_type_name(wgpt_matrix_type t) {
    static const char *names[] = {"?", "f32", "f16", "u32", "i32", "u8", "i8"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

void wgpt_gpu_describe(const wgpt_gpu_info *i, char *out, size_t outlen) {
    char sg[32];
    if (i->subgroup_min == i->subgroup_max) snprintf(sg, sizeof sg, "%u", i->subgroup_min);
    else snprintf(sg, sizeof sg, "%u-%u", i->subgroup_min, i->subgroup_max);
    char sgm[64] = "no";
    if (i->has_subgroup_matrix && i->sgm_config >= 0) {
        const wgpt_matrix_config *c = &i->matrix_configs[i->sgm_config];
        snprintf(sgm, sizeof sgm, "yes (%ux%ux%u)", c->m, c->n, c->k);
    } else if (i->has_subgroup_matrix) {
        snprintf(sgm, sizeof sgm, "yes (none wgpt takes)");
    }
    snprintf(out, outlen, "%s | %s | %s | subgroup %s | f16 %s | subgroup matrices %s | timestamps no", i->name,
             i->backend, i->type, sg, i->has_f16 ? "yes" : "no", sgm);
}

// The configurations web/wgpt_gpu.js wrote, checked as the Dawn backend checks
// its own (types 1..6, sizes 1..256, subgroup sizes within the adapter's).
static int copy_matrix_configs_(const web_info *w, wgpt_gpu_info *i, char *err, size_t errlen) {
    i->has_subgroup_matrix = w->has_sgm != 0;
    i->n_matrix_configs = 0;
    if (!i->has_subgroup_matrix) return 0;
    for (uint32_t j = 0; j < w->n_configs && j < WGPT_MAX_MATRIX_CONFIGS; j++) {
        const uint32_t *c = w->configs[j];
        if (c[0] < 1 || c[0] > 6 || c[1] < 1 || c[1] > 6 || c[2] < 1 || c[2] > 256 || c[3] < 1 || c[3] > 256 ||
            c[4] < 1 || c[4] > 256 || c[5] < i->subgroup_min || c[5] > c[6] || c[6] > i->subgroup_max) {
            snprintf(err, errlen, "the browser's subgroup-matrix config %u reads as types %u->%u, %ux%ux%u, subgroups "
                     "%u-%u: not one wgpt understands", j, c[0], c[1], c[2], c[3], c[4], c[5], c[6]);
            return -1;
        }
        i->matrix_configs[i->n_matrix_configs++] =
            (wgpt_matrix_config){(wgpt_matrix_type)c[0], (wgpt_matrix_type)c[1], c[2], c[3], c[4], c[5], c[6]};
    }
    return 0;
}

int wgpt_gpu_list(const wgpt_gpu_options *opt, wgpt_gpu_info *out, int max, char *err, size_t errlen) {
    // The page has one adapter; opening it is the only way to learn of it.
    (void)opt;  // (none of its process settings applies in a page)
    wgpt_gpu *g = wgpt_gpu_open(NULL, err, errlen);
    if (!g) return -1;
    if (max > 0) out[0] = g->info;
    wgpt_gpu_close(g);
    return max > 0 ? 1 : 0;
}

int wgpt_gpu_list_nth_gpu(const wgpt_gpu_info *list, int n, int i, int *ngpus) {
    int count = 0;
    for (int j = 0; j < n; j++) count += strcmp(list[j].type, "CPU") != 0;
    if (ngpus) *ngpus = count;
    if (!count) return -1;
    int want = i % count;
    for (int j = 0; j < n; j++)
        if (strcmp(list[j].type, "CPU") != 0 && want-- == 0) return j;
    return -1;
}

wgpt_gpu *wgpt_gpu_open(const wgpt_gpu_options *opt, char *err, size_t errlen) {
    wgpt_gpu_options defaults = {.adapter_index = -1};
    if (!opt) opt = &defaults;
    if (wgpt_gpu_options_check_(opt, err, errlen) < 0) return NULL;
    if (opt->kernel_dir || opt->profile || opt->emulate_sgm == 1 || opt->select_uuid) {
        snprintf(err, errlen, "in the browser: %s is not available",
                 opt->kernel_dir ? "a kernel folder" : opt->profile ? "profiling (timestamps)"
                                                  : opt->emulate_sgm == 1 ? "subgroup-matrix emulation"
                                                                     : "choosing a GPU by UUID");
        return NULL;
    }
    if (open_count_) {
        snprintf(err, errlen, "in the browser one device is open at a time; close the other first");
        return NULL;
    }
    wgpt_gpu *g = calloc(1, sizeof *g);
    if (!g) return snprintf(err, errlen, "out of memory"), NULL;
    web_info w;
    memset(&w, 0, sizeof w);
    if (js_open(opt->disable_f16, &w, err, (int)errlen) < 0) {
        free(g);
        return NULL;
    }
    open_count_ = 1;
    wgpt_gpu_info *i = &g->info;
    snprintf(i->name, sizeof i->name, "%s", w.name);
    snprintf(i->vendor, sizeof i->vendor, "%s", w.vendor);
    snprintf(i->driver, sizeof i->driver, "%s", w.driver);
    i->backend = "WebGPU (browser)";
    i->type = w.is_fallback ? "CPU" : "unknown";
    i->subgroup_min = w.sg_min;
    i->subgroup_max = w.sg_max;
    i->has_f16 = (int)w.has_f16;
    i->sgm_config = -1;
    if (copy_matrix_configs_(&w, i, err, errlen) < 0 || wgpt_sgm_choose_config_(i, opt->sgm_config, err, errlen) < 0) {
        js_close();
        open_count_ = 0;
        free(g);
        return NULL;
    }
    i->robust = 1;  // the browser's robustness cannot be turned off
    i->max_storage_binding = w.max_storage_binding;
    i->max_buffer = w.max_buffer;
    i->max_workgroup_storage = w.max_workgroup_storage;
    i->max_invocations = w.max_invocations;
    i->max_workgroups_per_dim = w.max_workgroups_per_dim;
    i->storage_offset_align = w.storage_offset_align ? w.storage_offset_align : 256;
    wgpt_gpu_keep_settings_(i, opt);
    wgpt_chip_fill_(i, opt->compute_units);
    if (wgpt_web_kernels_load_(g, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    return g;
}

void wgpt_gpu_close(wgpt_gpu *g) {
    if (!g) return;
    wgpt_web_kernels_free_(g);
    wgpt_buf_free(g->unused);
    js_close();
    open_count_ = 0;
    free(g);
}
