// kernel.c: the built-in kernel files and their pipelines, compiled by the page on first use.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/embedded.h"
#include "gpu/web/web_internal.h"

static const char SHARED_FILE[] = "00_shared.wgsl";

static int register_file_(wgpt_gpu *g, const char *label, const char *text, char *err, size_t errlen) {
    return wgpt_ktable_add_(&g->kt, g, sizeof(wgpt_kernel), label, text, err, errlen);
}

int wgpt_web_kernels_load_(wgpt_gpu *g, char *err, size_t errlen) {
    for (int i = 0; i < wgpt_embedded_kernel_count; i++) {
        const wgpt_embedded_file *f = &wgpt_embedded_kernels[i];
        if (strcmp(f->name, SHARED_FILE) == 0) {
            if (wgpt_ktable_set_shared_(&g->kt, f->name, f->text, err, errlen) < 0) return -1;
        } else if (register_file_(g, f->name, f->text, err, errlen) < 0) {
            return -1;
        }
    }
    if (!g->kt.shared_text) return snprintf(err, errlen, "the built-in kernels lack %s (a broken build?)", SHARED_FILE), -1;
    return 0;
}

void wgpt_web_kernels_free_(wgpt_gpu *g) { wgpt_ktable_free_(&g->kt); }

int wgpt_gpu_add_kernel_file(wgpt_gpu *g, const char *label, const char *text) {
    char err[1024];
    if (register_file_(g, label, text, err, sizeof err) < 0) return wgpt_gpu_fail(g, "%s", err);
    return 0;
}

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
    const wgpt_ksrc_file *f = &g->kt.files[k->id.file];
    char enables[512];
    wgpt_gpu_enables_(&g->info, enables, sizeof enables);
    wgpt_ksrc_composed src;
    if (wgpt_ksrc_compose(&src, enables, g->kt.shared_label, g->kt.shared_text, f, k->id.index) < 0)
        return wgpt_gpu_fail(g, "out of memory composing kernel %s", k->id.name);
    const wgpt_ksrc_kernel *sk = &f->kernels[k->id.index];
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
    k->pipeline = js_kernel_create(src.code, wgpt_ksrc_entry(f, k->id.index), k->id.name, names, values, sk->nconsts,
                                   raw, sizeof raw);
    int rc = 0;
    if (!k->pipeline) {
        char report[3072];
        map_errors_(&src, raw, report, sizeof report);
        rc = wgpt_gpu_fail(g, "kernel '%s' (%s) failed to compile:%s", k->id.name, f->label, report);
    }
    wgpt_ksrc_composed_free(&src);
    return rc;
}

wgpt_kernel *wgpt_kernel_get(wgpt_gpu *g, const char *name) {
    if (wgpt_web_check_(g) < 0) return NULL;
    wgpt_kernel *k = wgpt_ktable_find_(&g->kt, name);
    if (!k) return wgpt_gpu_fail(g, "no kernel named '%s' in the kernel files", name), NULL;
    if (!k->pipeline && compile_(g, k) < 0) return NULL;
    return k;
}

int wgpt_gpu_kernels_compiled(const wgpt_gpu *g) {
    int n = 0;
    for (int i = 0; i < g->kt.nkernels; i++) n += g->kt.kernels[i]->pipeline != 0;
    return n;
}
