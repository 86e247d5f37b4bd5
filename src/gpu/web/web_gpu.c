// web_gpu.c: the GPU layer (gpu/gpu.h) in a web page: the same interface as
// the Dawn backend (src/gpu/device.c ...), its work done by the page's
// navigator.gpu through functions web/wgpt_gpu.js gives the WebAssembly
// module (imports of module "wgpt_gpu", declared below). Built only for
// wasm32 (make web); the layers above cannot tell which backend they run on.
//
// Waits (opening the device, compiling a kernel, reading a buffer back,
// finishing the queue) are JavaScript promises: the imports that await one
// are wrapped in WebAssembly.Suspending, so the C code here blocks as it
// does natively while the page's event loop runs (JSPI).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/embedded.h"
#include "gpu/gpu.h"
#include "gpu/kernel_source.h"

#define IMPORT(name) __attribute__((import_module("wgpt_gpu"), import_name(#name)))

// What the page's adapter and device offer; written by js_open (web/wgpt_gpu.js
// knows this layout: keep the two in step).
typedef struct web_info {
    uint32_t sg_min, sg_max, has_f16, has_timestamps;
    uint32_t max_storage_binding, max_buffer, max_workgroup_storage, max_invocations;
    uint32_t max_workgroups_per_dim, storage_offset_align, is_fallback, reserved;
    char name[128], vendor[64], driver[128];
} web_info;

// 0, or -1 with the reason in err (no WebGPU, no adapter, no subgroups).
IMPORT(open) int js_open(int disable_f16, web_info *info, char *err, int errlen);
IMPORT(close) void js_close(void);
// 1 and the message in msg if the device was lost or reported an error no call caught.
IMPORT(error) int js_error(char *msg, int len);
IMPORT(force_loss) void js_force_loss(void);
IMPORT(buf_create) int js_buf_create(double bytes);
IMPORT(buf_free) void js_buf_free(int id);
IMPORT(buf_write) int js_buf_write(int id, double offset, const void *src, double bytes);
IMPORT(buf_read) int js_buf_read(int id, double offset, void *dst, double bytes);
IMPORT(buf_zero) int js_buf_zero(int id, double offset, double bytes);
// A pipeline id, or 0 with compile errors in err, one "LINE\tCOLUMN\tMESSAGE\n" each
// (LINE 0: no line), or a message with no tab.
IMPORT(kernel_create) int js_kernel_create(const char *code, const char *entry, const char *label,
                                           const char *const_names, const double *const_values, int nconsts,
                                           char *err, int errlen);
IMPORT(bind_create) int js_bind_create(int pipeline, const int *bufs, const double *offsets, const double *sizes,
                                       int n, const void *params, int params_size);
IMPORT(bind_set_params) int js_bind_set_params(int bind, const void *params, int params_size);
IMPORT(bind_free) void js_bind_free(int bind);
IMPORT(dispatch) int js_dispatch(int bind, uint32_t x, uint32_t y, uint32_t z);
IMPORT(submit) int js_submit(void);
IMPORT(finish) int js_finish(void);

// The parts of the Dawn backend that are plain C (env.c, chips.c).
int wgpt_chip_fill_(wgpt_gpu_info *info, char *err, size_t errlen);
int wgpt_gpu_env_check_(char *err, size_t errlen);
wgpt_kernels wgpt_gpu_env_kernels_(const char *type);
uint32_t wgpt_gpu_env_epilogues_(void);
wgpt_streamk wgpt_gpu_env_streamk_(void);

struct wgpt_kernel {
    wgpt_gpu *gpu;
    char name[64];
    int file, index;
    int pipeline;  // 0 until first use
};

struct wgpt_buf {
    wgpt_gpu *gpu;
    int id;
    uint64_t size;
    char label[64];
};

struct wgpt_bind {
    wgpt_gpu *gpu;
    wgpt_kernel *kernel;
    int id;
    size_t params_size;
};

struct wgpt_readback {
    uint8_t *host;
    uint64_t size, bytes;
    int busy;
    char label[64];
};

struct wgpt_gpu {
    wgpt_gpu_info info;
    char err[4096];
    int failed;
    uint64_t mem_live, mem_peak;
    wgpt_buf *unused;
    char *shared_label, *shared_text;
    wgpt_ksrc_file *files;
    int nfiles;
    wgpt_kernel **kernels;
    int nkernels, kernels_cap;
};

static const char SHARED_FILE[] = "00_shared.wgsl";
static int open_count_;  // one device at a time: the JS side holds one

int wgpt_gpu_fail(wgpt_gpu *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int check_(wgpt_gpu *g) {
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
    snprintf(out, outlen, "%s | %s | %s | subgroup %s | f16 %s | subgroup matrices no | timestamps no", i->name,
             i->backend, i->type, sg, i->has_f16 ? "yes" : "no");
}

// --- kernels (as src/gpu/kernel.c, from the built-in files only) ---------------
static int register_file_(wgpt_gpu *g, const char *label, const char *text, char *err, size_t errlen) {
    wgpt_ksrc_file f;
    if (wgpt_ksrc_parse(&f, label, text, err, errlen) < 0) return -1;
    for (int i = 0; i < f.nkernels; i++)
        for (int j = 0; j < g->nkernels; j++)
            if (strcmp(g->kernels[j]->name, f.kernels[i].name) == 0) {
                snprintf(err, errlen, "kernel '%s' is defined in both %s and %s", f.kernels[i].name,
                         g->files[g->kernels[j]->file].label, label);
                wgpt_ksrc_free(&f);
                return -1;
            }
    wgpt_ksrc_file *nf = realloc(g->files, (size_t)(g->nfiles + 1) * sizeof *nf);
    if (!nf) goto oom;
    g->files = nf;
    if (g->nkernels + f.nkernels > g->kernels_cap) {
        int cap = (g->nkernels + f.nkernels) * 2;
        wgpt_kernel **nk = realloc(g->kernels, (size_t)cap * sizeof *nk);
        if (!nk) goto oom;
        g->kernels = nk;
        g->kernels_cap = cap;
    }
    for (int i = 0; i < f.nkernels; i++) {
        wgpt_kernel *k = calloc(1, sizeof *k);
        if (!k) goto oom;
        k->gpu = g;
        snprintf(k->name, sizeof k->name, "%s", f.kernels[i].name);
        k->file = g->nfiles;
        k->index = i;
        g->kernels[g->nkernels++] = k;
    }
    g->files[g->nfiles++] = f;
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", label);
    wgpt_ksrc_free(&f);
    return -1;
}

static int load_kernels_(wgpt_gpu *g, char *err, size_t errlen) {
    for (int i = 0; i < wgpt_embedded_kernel_count; i++) {
        const wgpt_embedded_file *f = &wgpt_embedded_kernels[i];
        if (strcmp(f->name, SHARED_FILE) == 0) {
            if (wgpt_ksrc_check_shared(f->name, f->text, err, errlen) < 0) return -1;
            g->shared_label = strdup(f->name);
            g->shared_text = strdup(f->text);
            if (!g->shared_label || !g->shared_text) return snprintf(err, errlen, "out of memory"), -1;
        } else if (register_file_(g, f->name, f->text, err, errlen) < 0) {
            return -1;
        }
    }
    if (!g->shared_text) return snprintf(err, errlen, "the built-in kernels lack %s (a broken build?)", SHARED_FILE), -1;
    return 0;
}

int wgpt_gpu_add_kernel_file(wgpt_gpu *g, const char *label, const char *text) {
    char err[1024];
    if (register_file_(g, label, text, err, sizeof err) < 0) return wgpt_gpu_fail(g, "%s", err);
    return 0;
}

const char *wgpt_kernel_name(const wgpt_kernel *k) { return k->name; }

// The browser's messages, "LINE\tCOL\tMSG" a line, mapped back to kernel files.
static void map_errors_(const wgpt_ksrc_composed *src, const char *in, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    int shown = 0;
    while (*in && shown < 8) {
        const char *nl = strchr(in, '\n');
        size_t n = nl ? (size_t)(nl - in) : strlen(in);
        unsigned line = 0, col = 0;
        int off = 0;
        const char *file = NULL;
        uint32_t fline = 0;
        int w;
        if (sscanf(in, "%u\t%u\t%n", &line, &col, &off) == 2 && off > 0 && (size_t)off <= n) {
            int mapped = line && wgpt_ksrc_map_line(src, line, &file, &fline) == 0;
            if (mapped && file)
                w = snprintf(out + len, cap - len, "\n  %s:%u:%u: error: %.*s", file, fline, col, (int)(n - off),
                             in + off);
            else
                w = snprintf(out + len, cap - len, "\n  error: %.*s", (int)(n - off), in + off);
        } else {
            w = snprintf(out + len, cap - len, "\n  %.*s", (int)n, in);
        }
        if (w > 0) len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
        shown++;
        in += n + (nl ? 1 : 0);
    }
}

static int compile_(wgpt_gpu *g, wgpt_kernel *k) {
    const wgpt_ksrc_file *f = &g->files[k->file];
    const char *enables = g->info.has_f16 ? "enable f16;\nenable subgroups;\n" : "enable subgroups;\n";
    wgpt_ksrc_composed src;
    if (wgpt_ksrc_compose(&src, enables, g->shared_label, g->shared_text, f, k->index) < 0)
        return wgpt_gpu_fail(g, "out of memory composing kernel %s", k->name);
    const wgpt_ksrc_kernel *sk = &f->kernels[k->index];
    char names[WGPT_KSRC_MAX_CONSTS * 64 + 1];
    double values[WGPT_KSRC_MAX_CONSTS];
    size_t at = 0;
    for (int i = 0; i < sk->nconsts; i++) {
        size_t l = strlen(sk->consts[i].name) + 1;
        memcpy(names + at, sk->consts[i].name, l);
        at += l;
        values[i] = sk->consts[i].value;
    }
    names[at] = 0;
    char raw[3072] = "";
    k->pipeline = js_kernel_create(src.code, wgpt_ksrc_entry(f, k->index), k->name, names, values, sk->nconsts, raw,
                                   sizeof raw);
    int rc = 0;
    if (!k->pipeline) {
        char report[3072];
        map_errors_(&src, raw, report, sizeof report);
        rc = wgpt_gpu_fail(g, "kernel '%s' (%s) failed to compile:%s", k->name, f->label, report);
    }
    wgpt_ksrc_composed_free(&src);
    return rc;
}

wgpt_kernel *wgpt_kernel_get(wgpt_gpu *g, const char *name) {
    if (check_(g) < 0) return NULL;
    for (int i = 0; i < g->nkernels; i++) {
        wgpt_kernel *k = g->kernels[i];
        if (strcmp(k->name, name) != 0) continue;
        if (!k->pipeline && compile_(g, k) < 0) return NULL;
        return k;
    }
    wgpt_gpu_fail(g, "no kernel named '%s' in the kernel files", name);
    return NULL;
}

// --- devices -------------------------------------------------------------------
int wgpt_gpu_list(wgpt_gpu_info *out, int max, char *err, size_t errlen) {
    // The page has one adapter; opening it is the only way to learn of it.
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
    if (wgpt_gpu_env_check_(err, errlen) < 0) return NULL;
    if (opt->kernel_dir || opt->profile || opt->emulate_sgm || opt->select_uuid) {
        snprintf(err, errlen, "in the browser: %s is not available",
                 opt->kernel_dir ? "a kernel folder" : opt->profile ? "profiling (timestamps)"
                                                  : opt->emulate_sgm ? "subgroup-matrix emulation"
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
    i->robust = 1;  // the browser's robustness cannot be turned off
    i->max_storage_binding = w.max_storage_binding;
    i->max_buffer = w.max_buffer;
    i->max_workgroup_storage = w.max_workgroup_storage;
    i->max_invocations = w.max_invocations;
    i->max_workgroups_per_dim = w.max_workgroups_per_dim;
    i->storage_offset_align = w.storage_offset_align ? w.storage_offset_align : 256;
    if (opt->max_binding && opt->max_binding < i->max_storage_binding) i->max_storage_binding = opt->max_binding;
    i->cpu_kernels = opt->kernels == WGPT_KERNELS_CPU ||
                     (opt->kernels != WGPT_KERNELS_GPU && wgpt_gpu_env_kernels_(i->type) == WGPT_KERNELS_CPU);
    i->matmul_splits = opt->matmul_splits;
    i->sgm_block = opt->sgm_block;
    i->matmul_epilogues = opt->matmul_epilogues | wgpt_gpu_env_epilogues_();
    i->streamk = opt->streamk ? opt->streamk : wgpt_gpu_env_streamk_();
    if (wgpt_chip_fill_(i, err, errlen) < 0 || load_kernels_(g, err, errlen) < 0) {
        wgpt_gpu_close(g);
        return NULL;
    }
    return g;
}

void wgpt_gpu_close(wgpt_gpu *g) {
    if (!g) return;
    for (int i = 0; i < g->nkernels; i++) free(g->kernels[i]);
    free(g->kernels);
    for (int i = 0; i < g->nfiles; i++) wgpt_ksrc_free(&g->files[i]);
    free(g->files);
    free(g->shared_label);
    free(g->shared_text);
    wgpt_buf_free(g->unused);
    js_close();
    open_count_ = 0;
    free(g);
}

// --- buffers ---------------------------------------------------------------------
wgpt_buf *wgpt_buf_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (check_(g) < 0) return NULL;
    if (!label) label = "buffer";
    uint64_t size = (bytes + 15) & ~(uint64_t)15;
    if (size == 0) size = 16;
    if (size > g->info.max_buffer) {
        wgpt_gpu_fail(g, "buffer '%s' needs %llu bytes; '%s' allows at most %llu in one buffer (maxBufferSize)",
                      label, (unsigned long long)bytes, g->info.name, (unsigned long long)g->info.max_buffer);
        return NULL;
    }
    wgpt_buf *b = calloc(1, sizeof *b);
    if (!b) return wgpt_gpu_fail(g, "out of host memory creating buffer '%s'", label), NULL;
    b->gpu = g;
    b->size = size;
    snprintf(b->label, sizeof b->label, "%s", label);
    b->id = js_buf_create((double)size);
    if (!b->id) {
        free(b);
        if (check_(g) == 0) wgpt_gpu_fail(g, "creating buffer '%s' of %llu bytes failed", label, (unsigned long long)size);
        return NULL;
    }
    g->mem_live += size;
    if (g->mem_live > g->mem_peak) g->mem_peak = g->mem_live;
    return b;
}

void wgpt_buf_free(wgpt_buf *b) {
    if (!b) return;
    b->gpu->mem_live -= b->size;
    js_buf_free(b->id);
    free(b);
}

uint64_t wgpt_buf_size(const wgpt_buf *b) { return b->size; }
uint64_t wgpt_view_bytes(wgpt_view v) { return v.size ? v.size : v.buf->size - v.offset; }

void wgpt_gpu_memory(const wgpt_gpu *g, uint64_t *live, uint64_t *peak) {
    if (live) *live = g->mem_live;
    if (peak) *peak = g->mem_peak;
}

wgpt_view wgpt_gpu_unused_binding(wgpt_gpu *g) {
    if (!g->unused) g->unused = wgpt_buf_create(g, 4096, "wgpt unused binding");
    return (wgpt_view){g->unused, 0, 0};
}

static int check_range_(wgpt_gpu *g, const wgpt_buf *b, uint64_t offset, uint64_t bytes, const char *op) {
    if (offset % 4 || bytes % 4 || offset > b->size || bytes > b->size - offset)
        return wgpt_gpu_fail(g, "%s of buffer '%s': bytes [%llu, %llu) are not 4-aligned or outside its %llu bytes", op,
                             b->label, (unsigned long long)offset, (unsigned long long)(offset + bytes),
                             (unsigned long long)b->size);
    return 0;
}

int wgpt_buf_upload(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, const void *src, uint64_t bytes) {
    if (check_(g) < 0 || check_range_(g, b, offset, bytes, "upload") < 0) return -1;
    if (!bytes) return 0;
    if (js_buf_write(b->id, (double)offset, src, (double)bytes) < 0) return check_(g) < 0 ? -1 : wgpt_gpu_fail(g, "upload to '%s' failed", b->label);
    return 0;
}

int wgpt_buf_download(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, void *dst, uint64_t bytes) {
    if (check_(g) < 0 || check_range_(g, b, offset, bytes, "download") < 0) return -1;
    if (!bytes) return 0;
    if (js_buf_read(b->id, (double)offset, dst, (double)bytes) < 0 || check_(g) < 0)
        return g->failed ? -1 : wgpt_gpu_fail(g, "reading buffer '%s' back failed", b->label);
    return 0;
}

int wgpt_buf_zero(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, uint64_t bytes) {
    if (check_(g) < 0 || check_range_(g, b, offset, bytes, "zero fill") < 0) return -1;
    return bytes ? js_buf_zero(b->id, (double)offset, (double)bytes) : 0;
}

int wgpt_gpu_submit(wgpt_gpu *g) {
    if (check_(g) < 0) return -1;
    js_submit();
    return check_(g);
}

int wgpt_gpu_finish(wgpt_gpu *g) {
    if (check_(g) < 0) return -1;
    js_finish();
    return check_(g);
}

// Reads are taken at start (the browser's read-back is a wait like any other):
// ready is then 1 at once.
wgpt_readback *wgpt_readback_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (check_(g) < 0) return NULL;
    if (bytes == 0 || bytes % 4 || bytes > g->info.max_buffer) {
        wgpt_gpu_fail(g, "readback '%s' of %llu bytes: must be a positive multiple of 4, at most %llu", label,
                      (unsigned long long)bytes, (unsigned long long)g->info.max_buffer);
        return NULL;
    }
    wgpt_readback *r = calloc(1, sizeof *r);
    if (r) r->host = malloc((size_t)bytes);
    if (!r || !r->host) {
        free(r);
        wgpt_gpu_fail(g, "out of host memory creating readback '%s'", label);
        return NULL;
    }
    r->size = bytes;
    snprintf(r->label, sizeof r->label, "%s", label);
    return r;
}

void wgpt_readback_free(wgpt_gpu *g, wgpt_readback *r) {
    (void)g;
    if (!r) return;
    free(r->host);
    free(r);
}

int wgpt_readback_start(wgpt_gpu *g, wgpt_readback *r, wgpt_buf *b, const uint64_t *offsets, const uint64_t *sizes,
                        int n) {
    if (check_(g) < 0) return -1;
    if (r->busy) return wgpt_gpu_fail(g, "readback '%s': started again before it was finished", r->label);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (check_range_(g, b, offsets[i], sizes[i], "readback") < 0) return -1;
        total += sizes[i];
    }
    if (total == 0 || total > r->size)
        return wgpt_gpu_fail(g, "readback '%s': %llu bytes asked, it holds %llu", r->label, (unsigned long long)total,
                             (unsigned long long)r->size);
    for (int i = 0, at = 0; i < n; at += (int)sizes[i], i++)
        if (sizes[i] && wgpt_buf_download(g, b, offsets[i], r->host + at, sizes[i]) < 0) return -1;
    r->bytes = total;
    r->busy = 1;
    return 0;
}

int wgpt_readback_ready(wgpt_gpu *g, wgpt_readback *r) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    return check_(g) < 0 ? -1 : 1;
}

int wgpt_readback_finish(wgpt_gpu *g, wgpt_readback *r, void *dst) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    r->busy = 0;
    memcpy(dst, r->host, (size_t)r->bytes);
    return check_(g);
}

// --- bind groups and dispatch -------------------------------------------------------
wgpt_bind *wgpt_bind_create(wgpt_gpu *g, wgpt_kernel *k, const wgpt_view *views, int nviews, const void *params,
                            size_t params_size) {
    if (check_(g) < 0) return NULL;
    if (!k || nviews < 0 || nviews > 15) {
        wgpt_gpu_fail(g, "bind group: %s", !k ? "no kernel" : "0 to 15 buffers per kernel");
        return NULL;
    }
    if (params_size > 256) {
        wgpt_gpu_fail(g, "kernel '%s': params of %zu bytes; at most 256", k->name, params_size);
        return NULL;
    }
    int ids[16];
    double offs[16], sizes[16];
    for (int i = 0; i < nviews; i++) {
        const wgpt_view *v = &views[i];
        if (!v->buf) return wgpt_gpu_fail(g, "kernel '%s': binding %d has no buffer", k->name, i), NULL;
        uint64_t size = wgpt_view_bytes(*v);
        if (v->offset % g->info.storage_offset_align) {
            wgpt_gpu_fail(g, "kernel '%s': binding %d (buffer '%s') starts at byte %llu, which is not a multiple "
                             "of %u (minStorageBufferOffsetAlignment)",
                          k->name, i, v->buf->label, (unsigned long long)v->offset, g->info.storage_offset_align);
            return NULL;
        }
        if (size == 0 || size % 4 || v->offset + size > v->buf->size) {
            wgpt_gpu_fail(g, "kernel '%s': binding %d covers bytes [%llu, %llu) of buffer '%s' (%llu bytes)", k->name,
                          i, (unsigned long long)v->offset, (unsigned long long)(v->offset + size), v->buf->label,
                          (unsigned long long)v->buf->size);
            return NULL;
        }
        if (size > g->info.max_storage_binding) {
            wgpt_gpu_fail(g, "kernel '%s': binding %d covers %llu bytes of buffer '%s'; '%s' binds at most %llu "
                             "(maxStorageBufferBindingSize): split the work into smaller ranges",
                          k->name, i, (unsigned long long)size, v->buf->label, g->info.name,
                          (unsigned long long)g->info.max_storage_binding);
            return NULL;
        }
        ids[i] = v->buf->id;
        offs[i] = (double)v->offset;
        sizes[i] = (double)size;
    }
    wgpt_bind *b = calloc(1, sizeof *b);
    if (!b) return wgpt_gpu_fail(g, "out of host memory"), NULL;
    b->gpu = g;
    b->kernel = k;
    b->params_size = params_size;
    b->id = js_bind_create(k->pipeline, ids, offs, sizes, nviews, params, (int)params_size);
    if (!b->id) {
        free(b);
        char inner[sizeof g->err];
        snprintf(inner, sizeof inner, "%s", check_(g) < 0 ? g->err : "refused by the browser");
        wgpt_gpu_fail(g, "bind group for kernel '%s' (%s) with %d buffer(s)%s: %s", k->name, g->files[k->file].label,
                      nviews, params_size ? " and params" : "", inner);
        return NULL;
    }
    return b;
}

int wgpt_bind_set_params(wgpt_gpu *g, wgpt_bind *b, const void *params, size_t params_size) {
    if (check_(g) < 0) return -1;
    if (!b->params_size || params_size != b->params_size)
        return wgpt_gpu_fail(g, "kernel '%s': params are %zu bytes, not %zu", b->kernel->name, b->params_size,
                             params_size);
    return js_bind_set_params(b->id, params, (int)params_size);  // submits first where the bind is pending
}

void wgpt_bind_free(wgpt_bind *b) {
    if (!b) return;
    js_bind_free(b->id);
    free(b);
}

int wgpt_dispatch(wgpt_gpu *g, wgpt_bind *b, uint32_t x, uint32_t y, uint32_t z) {
    if (check_(g) < 0) return -1;
    uint32_t lim = g->info.max_workgroups_per_dim;
    if (x > lim || y > lim || z > lim)
        return wgpt_gpu_fail(g, "kernel '%s': dispatch %u x %u x %u exceeds %u workgroups a dimension", b->kernel->name,
                             x, y, z, lim);
    if (x == 0 || y == 0 || z == 0) return 0;
    return js_dispatch(b->id, x, y, z);
}

int wgpt_dims1d(wgpt_gpu *g, uint64_t n, uint32_t *x, uint32_t *y) {
    uint64_t dim = g->info.max_workgroups_per_dim < WGPT_MAX_WG_DIM ? g->info.max_workgroups_per_dim : WGPT_MAX_WG_DIM;
    uint64_t rows = n <= dim ? 1 : (n + dim - 1) / dim;
    if (rows > dim)
        return wgpt_gpu_fail(g, "%llu workgroups exceed even a 2D dispatch (%llu x %llu)", (unsigned long long)n,
                             (unsigned long long)dim, (unsigned long long)dim);
    *x = (uint32_t)(n <= dim ? n : dim);
    *y = (uint32_t)rows;
    return 0;
}

int wgpt_dispatch1d(wgpt_gpu *g, wgpt_bind *b, uint64_t n) {
    uint32_t x = 0, y = 0;
    if (wgpt_dims1d(g, n, &x, &y) < 0) return -1;
    return wgpt_dispatch(g, b, x, y, 1);
}

int wgpt_gpu_timings(wgpt_gpu *g, wgpt_timing *out, int max) {
    (void)g, (void)out, (void)max;
    return -1;
}
