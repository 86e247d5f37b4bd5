// kernel.c: kernel files (built in or from a folder), compilation, pipeline cache.
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "internal.h"
#include "sgm_emulate.h"

static const char SHARED_FILE[] = "00_shared.wgsl";

static int register_file_(wgpt_gpu *g, const char *label, const char *text, char *err, size_t errlen) {
    return wgpt_ktable_add_(&g->kt, g, sizeof(wgpt_kernel), label, text, err, errlen);
}

static int set_shared_(wgpt_gpu *g, const char *label, const char *text, char *err, size_t errlen) {
    return wgpt_ktable_set_shared_(&g->kt, label, text, err, errlen);
}

static char *read_file_(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read kernel file %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read kernel file %s", path);
        free(s);
        fclose(f);
        return NULL;
    }
    s[n] = 0;
    fclose(f);
    if (strlen(s) != (size_t)n) {
        snprintf(err, errlen, "kernel file %s contains a NUL byte", path);
        free(s);
        return NULL;
    }
    return s;
}

static int cmp_str_(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int load_dir_(wgpt_gpu *g, const char *dir, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot open kernel folder %s (from --kernel-dir or WGPT_KERNEL_DIR)", dir);
        return -1;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".wgsl") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str_);
    int rc = 0, have_shared = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text = read_file_(path, err, errlen);
        if (!text) rc = -1;
        else if (strcmp(names[i], SHARED_FILE) == 0) rc = set_shared_(g, names[i], text, err, errlen), have_shared = 1;
        else rc = register_file_(g, names[i], text, err, errlen);
        free(text);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    if (rc == 0 && !have_shared) {
        snprintf(err, errlen, "kernel folder %s has no %s", dir, SHARED_FILE);
        rc = -1;
    }
    return rc;
}

int wgpt_kernels_load_(wgpt_gpu *g, const char *dir, char *err, size_t errlen) {
    if (dir) return load_dir_(g, dir, err, errlen);
    int have_shared = 0;
    for (int i = 0; i < wgpt_embedded_kernel_count; i++) {
        const wgpt_embedded_file *f = &wgpt_embedded_kernels[i];
        int rc = strcmp(f->name, SHARED_FILE) == 0 ? (have_shared = 1, set_shared_(g, f->name, f->text, err, errlen))
                                                   : register_file_(g, f->name, f->text, err, errlen);
        if (rc < 0) return -1;
    }
    if (!have_shared) {
        snprintf(err, errlen, "the built-in kernels lack %s (a broken build?)", SHARED_FILE);
        return -1;
    }
    return 0;
}

void wgpt_kernels_free_(wgpt_gpu *g) {
    for (int i = 0; i < g->kt.nkernels; i++) {
        wgpt_kernel *k = g->kt.kernels[i];
        if (k->layout) wgpuBindGroupLayoutRelease(k->layout);
        if (k->pipeline) wgpuComputePipelineRelease(k->pipeline);
    }
    wgpt_ktable_free_(&g->kt);
}

int wgpt_gpu_add_kernel_file(wgpt_gpu *g, const char *label, const char *text) {
    char err[1024];
    if (register_file_(g, label, text, err, sizeof err) < 0) return wgpt_gpu_fail(g, "%s", err);
    return 0;
}

int wgpt_gpu_kernels_compiled(const wgpt_gpu *g) {
    int n = 0;
    for (int i = 0; i < g->kt.nkernels; i++) n += g->kt.kernels[i]->pipeline != NULL;
    return n;
}

// --- compilation ------------------------------------------------------------
typedef struct {
    int done;
    const wgpt_ksrc_composed *src;
    char *out;
    size_t cap, len;
    int errors;
} compile_report_;

static void on_compilation_info_(WGPUCompilationInfoRequestStatus status, const WGPUCompilationInfo *info,
                                 void *u1, void *u2) {
    (void)u2;
    compile_report_ *r = u1;
    if (status == WGPUCompilationInfoRequestStatus_Success && info) {
        for (size_t i = 0; i < info->messageCount; i++) {
            const WGPUCompilationMessage *m = &info->messages[i];
            if (m->type != WGPUCompilationMessageType_Error) continue;
            r->errors++;
            if (r->errors > 8) continue;
            const char *file = NULL;
            uint32_t line = 0;
            int mapped = m->lineNum && wgpt_ksrc_map_line(r->src, (uint32_t)m->lineNum, &file, &line) == 0;
            size_t ml = m->message.data ? (m->message.length == WGPU_STRLEN ? strlen(m->message.data)
                                                                            : m->message.length)
                                        : 0;
            int w;
            if (mapped && file)
                w = snprintf(r->out + r->len, r->cap - r->len, "\n  %s:%u:%u: error: %.*s", file, line,
                             (unsigned)m->linePos, (int)ml, m->message.data);
            else if (mapped)
                w = snprintf(r->out + r->len, r->cap - r->len,
                             "\n  (enable directives the engine wrote, line %u): error: %.*s", line, (int)ml,
                             m->message.data);
            else
                w = snprintf(r->out + r->len, r->cap - r->len, "\n  error: %.*s", (int)ml, m->message.data);
            if (w > 0) r->len += (size_t)w < r->cap - r->len ? (size_t)w : r->cap - r->len - 1;
        }
    }
    r->done = 1;
}

// With options.kernel_stats (a file; WGPT_KERNEL_STATS), the kernel's name goes there just before
// its pipeline is made: VK_LAYER_WGPT_stats (device.c turns it on) appends the
// driver's statistics of that pipeline after it. A kernel whose pipeline
// Dawn found in its cache gets no statistics line.
// A file that takes no line (a full disk, /dev/full) is an error naming the variable.
static int note_stats_(wgpt_gpu *g, const char *kernel, const char *file) {
    const char *path = g->kernel_stats;
    if (!path) return 0;
    FILE *f = fopen(path, "a");
    int ok = f && fprintf(f, "kernel %s (%s)\n", kernel, file) > 0 && fflush(f) == 0;
    int e = errno;
    if (f && fclose(f) != 0 && ok) ok = 0, e = errno;
    if (ok) return 0;
    return wgpt_gpu_fail(g, "WGPT_KERNEL_STATS=%s: cannot write the kernels' statistics there: %s", path, strerror(e));
}

static int compile_(wgpt_gpu *g, wgpt_kernel *k) {
    const wgpt_ksrc_file *f = &g->kt.files[k->id.file];
    char enables[512];
    int emulated = g->info.sgm_emulated;
    wgpt_gpu_enables_(&g->info, enables, sizeof enables);
    wgpt_ksrc_composed src;
    if (wgpt_ksrc_compose(&src, enables, g->kt.shared_label, g->kt.shared_text, f, k->id.index) < 0)
        return wgpt_gpu_fail(g, "out of memory composing kernel %s", k->id.name);
    if (emulated && (strstr(src.code, "subgroup_matrix_") || strstr(src.code, "subgroupMatrix"))) {
        char why[512];  // (an emulated device always has its one configuration picked: device.c)
        const wgpt_matrix_config *c = &g->info.matrix_configs[g->info.sgm_config];
        char *code = wgpt_sgm_emulate_source(src.code, c, why, sizeof why);
        if (!code) {
            wgpt_ksrc_composed_free(&src);
            return wgpt_gpu_fail(g, "kernel '%s' (%s): its subgroup matrices cannot be emulated: %s", k->id.name,
                                  f->label, why);
        }
        free(src.code);
        src.code = code;  // the same lines, the helpers after them: line numbers still map
    }

    WGPUShaderSourceWGSL wgsl = {{NULL, WGPUSType_ShaderSourceWGSL}, wgpt_sv_(src.code)};
    WGPUShaderModuleDescriptor md = {&wgsl.chain, wgpt_sv_(k->id.name)};
    wgpt_gpu_scope_push_(g);
    WGPUShaderModule mod = wgpuDeviceCreateShaderModule(g->device, &md);
    char report[3072] = "";
    compile_report_ r = {0, &src, report, sizeof report, 0, 0};
    WGPUCompilationInfoCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_compilation_info_, &r, NULL};
    wgpuShaderModuleGetCompilationInfo(mod, cb);
    int waited = wgpt_gpu_wait_(g, &r.done, "compiling a kernel");
    int scope = wgpt_gpu_scope_pop_(g, "shader module");
    if (waited < 0 || r.errors || scope < 0) {
        wgpuShaderModuleRelease(mod);
        wgpt_ksrc_composed_free(&src);
        if (r.errors)
            return wgpt_gpu_fail(g, "kernel '%s' (%s) failed to compile:%s%s", k->id.name, f->label, report,
                                  r.errors > 8 ? "\n  ..." : "");
        if (g->failed) return -1;
        return wgpt_gpu_fail(g, "kernel '%s' (%s) failed to compile: %s", k->id.name, f->label, g->err);
    }

    // A variant (kernel_source.h) is its section's entry point with override constants set.
    const wgpt_ksrc_kernel *sk = &f->kernels[k->id.index];
    const char *entry = wgpt_ksrc_entry(f, k->id.index);
    WGPUConstantEntry consts[WGPT_KSRC_MAX_CONSTS];
    for (int i = 0; i < sk->nconsts; i++)
        consts[i] = (WGPUConstantEntry){NULL, wgpt_sv_(sk->consts[i].name), sk->consts[i].value};
    WGPUComputePipelineDescriptor pd;
    memset(&pd, 0, sizeof pd);
    pd.label = wgpt_sv_(k->id.name);
    pd.compute.module = mod;
    pd.compute.entryPoint = wgpt_sv_(entry);
    pd.compute.constantCount = (size_t)sk->nconsts;
    pd.compute.constants = sk->nconsts ? consts : NULL;
    if (note_stats_(g, k->id.name, f->label) < 0) {
        wgpuShaderModuleRelease(mod);
        wgpt_ksrc_composed_free(&src);
        return -1;
    }
    wgpt_gpu_scope_push_(g);
    k->pipeline = wgpuDeviceCreateComputePipeline(g->device, &pd);
    scope = wgpt_gpu_scope_pop_(g, "compute pipeline");
    wgpuShaderModuleRelease(mod);
    wgpt_ksrc_composed_free(&src);
    if (scope < 0) {
        if (k->pipeline) wgpuComputePipelineRelease(k->pipeline);
        k->pipeline = NULL;
        char inner[sizeof g->err];
        snprintf(inner, sizeof inner, "%s", g->err);
        return wgpt_gpu_fail(g, "kernel '%s' (%s): the pipeline could not be created (is there a function "
                              "named '%s' with @compute%s?): %s",
                              k->id.name, f->label, entry, sk->nconsts ? ", and an override for each constant" : "",
                              inner);
    }
    k->layout = wgpuComputePipelineGetBindGroupLayout(k->pipeline, 0);
    return 0;
}

wgpt_kernel *wgpt_kernel_get(wgpt_gpu *g, const char *name) {
    if (wgpt_gpu_check_(g) < 0) return NULL;
    wgpt_kernel *k = wgpt_ktable_find_(&g->kt, name);
    if (!k) return wgpt_gpu_fail(g, "no kernel named '%s' in the kernel files", name), NULL;
    if (!k->pipeline && compile_(g, k) < 0) return NULL;
    return k;
}
