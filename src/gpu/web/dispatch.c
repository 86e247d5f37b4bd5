// dispatch.c: bind groups, dispatches and submission in the browser.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/web/web_internal.h"

wgpt_bind *wgpt_bind_create(wgpt_gpu *g, wgpt_kernel *k, const wgpt_view *views, int nviews, const void *params,
                            size_t params_size) {
    if (wgpt_web_check_(g) < 0) return NULL;
    if (!k || nviews < 0 || nviews > 15) {
        wgpt_gpu_fail(g, "bind group: %s", !k ? "no kernel" : "0 to 15 buffers per kernel");
        return NULL;
    }
    if (params_size > 256) {
        wgpt_gpu_fail(g, "kernel '%s': params of %zu bytes; at most 256", k->id.name, params_size);
        return NULL;
    }
    int ids[16];
    double offs[16], sizes[16];
    for (int i = 0; i < nviews; i++) {
        const wgpt_view *v = &views[i];
        if (!v->buf) return wgpt_gpu_fail(g, "kernel '%s': binding %d has no buffer", k->id.name, i), NULL;
        uint64_t size = wgpt_binding_check_(g, k->id.name, i, v, v->buf->label, v->buf->size);
        if (!size) return NULL;
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
        snprintf(inner, sizeof inner, "%s", wgpt_web_check_(g) < 0 ? g->err : "refused by the browser");
        wgpt_gpu_fail(g, "bind group for kernel '%s' (%s) with %d buffer(s)%s: %s", k->id.name,
                      g->kt.files[k->id.file].label, nviews, params_size ? " and params" : "", inner);
        return NULL;
    }
    return b;
}

int wgpt_bind_set_params(wgpt_gpu *g, wgpt_bind *b, const void *params, size_t params_size) {
    if (wgpt_web_check_(g) < 0) return -1;
    if (!b->params_size || params_size != b->params_size)
        return wgpt_gpu_fail(g, "kernel '%s': params are %zu bytes, not %zu", b->kernel->id.name, b->params_size,
                             params_size);
    return js_bind_set_params(b->id, params, (int)params_size);  // submits first where the bind is pending
}

void wgpt_bind_free(wgpt_bind *b) {
    if (!b) return;
    js_bind_free(b->id);
    free(b);
}

int wgpt_dispatch(wgpt_gpu *g, wgpt_bind *b, uint32_t x, uint32_t y, uint32_t z) {
    if (wgpt_web_check_(g) < 0) return -1;
    uint32_t lim = g->info.max_workgroups_per_dim;
    if (x > lim || y > lim || z > lim)
        return wgpt_gpu_fail(g, "kernel '%s': dispatch %u x %u x %u exceeds %u workgroups a dimension",
                             b->kernel->id.name, x, y, z, lim);
    if (x == 0 || y == 0 || z == 0) return 0;
    return js_dispatch(b->id, x, y, z);
}

int wgpt_gpu_timings(wgpt_gpu *g, wgpt_timing *out, int max) {
    (void)g, (void)out, (void)max;
    return -1;
}
