// dispatch.c: bind groups, recording dispatches into one command buffer,
// submission, and per-dispatch GPU timestamps.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// --- bind groups -----------------------------------------------------------------
wgpt_bind *wgpt_bind_create(wgpt_gpu *g, wgpt_kernel *k, const wgpt_view *views, int nviews, const void *params,
                            size_t params_size) {
    if (wgpt_gpu_check_(g) < 0) return NULL;
    if (!k || nviews < 0 || nviews > 15) {
        wgpt_gpu_fail(g, "bind group: %s", !k ? "no kernel" : "0 to 15 buffers per kernel");
        return NULL;
    }
    WGPUBindGroupEntry e[16];
    memset(e, 0, sizeof e);
    for (int i = 0; i < nviews; i++) {
        const wgpt_view *v = &views[i];
        if (!v->buf) {
            wgpt_gpu_fail(g, "kernel '%s': binding %d has no buffer", k->id.name, i);
            return NULL;
        }
        uint64_t size = wgpt_binding_check_(g, k->id.name, i, v, v->buf->label, v->buf->size);
        if (!size) return NULL;
        e[i].binding = (uint32_t)i;
        e[i].buffer = v->buf->buffer;
        e[i].offset = v->offset;
        e[i].size = size;
    }
    wgpt_bind *b = calloc(1, sizeof *b);
    if (!b) {
        wgpt_gpu_fail(g, "out of host memory");
        return NULL;
    }
    b->gpu = g;
    b->kernel = k;
    int n = nviews;
    if (params_size) {
        WGPUBufferDescriptor d;
        memset(&d, 0, sizeof d);
        d.label = wgpt_sv_(k->id.name);
        d.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
        d.size = (params_size + 15) & ~(size_t)15;
        b->uniform = wgpuDeviceCreateBuffer(g->device, &d);
        b->params_size = params_size;
        e[n].binding = (uint32_t)n;
        e[n].buffer = b->uniform;
        e[n].offset = 0;
        e[n].size = d.size;
        n++;
        uint8_t tmp[256] = {0};
        if (params_size > sizeof tmp) {
            wgpt_gpu_fail(g, "kernel '%s': params of %zu bytes; at most %zu", k->id.name, params_size, sizeof tmp);
            wgpt_bind_free(b);
            return NULL;
        }
        memcpy(tmp, params, params_size);
        wgpuQueueWriteBuffer(g->queue, b->uniform, 0, tmp, (size_t)d.size);
    }
    WGPUBindGroupDescriptor bd;
    memset(&bd, 0, sizeof bd);
    bd.label = wgpt_sv_(k->id.name);
    bd.layout = k->layout;
    bd.entryCount = (size_t)n;
    bd.entries = e;
    wgpt_gpu_scope_push_(g);
    b->group = wgpuDeviceCreateBindGroup(g->device, &bd);
    char what[160];
    snprintf(what, sizeof what, "bind group for kernel '%s' (%s) with %d buffer(s)%s", k->id.name,
             g->kt.files[k->id.file].label, nviews, params_size ? " and params" : "");
    if (wgpt_gpu_scope_pop_(g, what) < 0) {
        wgpt_bind_free(b);
        return NULL;
    }
    return b;
}

int wgpt_bind_set_params(wgpt_gpu *g, wgpt_bind *b, const void *params, size_t params_size) {
    if (wgpt_gpu_check_(g) < 0) return -1;
    if (!b->uniform || params_size != b->params_size)
        return wgpt_gpu_fail(g, "kernel '%s': params are %zu bytes, not %zu", b->kernel->id.name, b->params_size,
                              params_size);
    // The write lands before the next submit's commands: dispatches already
    // recorded with this bind group must be submitted first.
    if (b->used_in_batch == g->batch && g->recorded && wgpt_gpu_submit(g) < 0) return -1;
    uint8_t tmp[256] = {0};
    memcpy(tmp, params, params_size);
    wgpuQueueWriteBuffer(g->queue, b->uniform, 0, tmp, (params_size + 15) & ~(size_t)15);
    return 0;
}

// Recorded dispatches not yet submitted go first: a buffer destroyed while a
// recording holds it fails that recording's submit (Dawn: "used in submit
// while destroyed"), losing the work of whatever else it held; work already
// submitted runs to its end after a destroy.
void wgpt_gpu_submit_pending_(wgpt_gpu *g) {
    if (g && g->encoder) wgpt_gpu_submit(g);  // (an error stays the device's)
}

void wgpt_bind_free(wgpt_bind *b) {
    if (!b) return;
    if (b->group) wgpuBindGroupRelease(b->group);
    if (b->uniform) {
        wgpt_gpu_submit_pending_(b->gpu);
        wgpuBufferDestroy(b->uniform);
        wgpuBufferRelease(b->uniform);
    }
    free(b);
}

// --- recording ---------------------------------------------------------------------
WGPUCommandEncoder wgpt_batch_encoder_(wgpt_gpu *g) {
    if (!g->encoder) {
        WGPUCommandEncoderDescriptor d = {NULL, wgpt_sv_("wgpt batch")};
        g->encoder = wgpuDeviceCreateCommandEncoder(g->device, &d);
        if (!g->encoder) wgpt_gpu_fail(g, "could not create a command encoder");
    }
    return g->encoder;
}

int wgpt_batch_end_pass_(wgpt_gpu *g) {
    if (g->pass) {
        wgpuComputePassEncoderEnd(g->pass);
        wgpuComputePassEncoderRelease(g->pass);
        g->pass = NULL;
    }
    return 0;
}

void wgpt_batch_release_(wgpt_gpu *g) {
    if (g->pass) {
        wgpuComputePassEncoderEnd(g->pass);
        wgpuComputePassEncoderRelease(g->pass);
        g->pass = NULL;
    }
    if (g->encoder) {
        wgpuCommandEncoderRelease(g->encoder);
        g->encoder = NULL;
    }
    g->recorded = 0;
}

int wgpt_dispatch(wgpt_gpu *g, wgpt_bind *b, uint32_t x, uint32_t y, uint32_t z) {
    if (wgpt_gpu_check_(g) < 0) return -1;
    uint32_t lim = g->info.max_workgroups_per_dim;
    if (x > lim || y > lim || z > lim)
        return wgpt_gpu_fail(g, "kernel '%s': dispatch (%u, %u, %u) exceeds %u workgroups per dimension",
                              b->kernel->id.name, x, y, z, lim);
    if (x == 0 || y == 0 || z == 0) return 0;
    WGPUCommandEncoder enc = wgpt_batch_encoder_(g);
    if (!enc) return -1;
    int timed = g->profile && g->query_used + 2 <= g->query_cap;
    if (timed) wgpt_batch_end_pass_(g);  // one pass per dispatch, timed at its edges
    if (!g->pass) {
        WGPUComputePassDescriptor pd;
        memset(&pd, 0, sizeof pd);
        WGPUPassTimestampWrites tw = {NULL, g->queries, g->query_used, g->query_used + 1};
        if (timed) {
            pd.timestampWrites = &tw;
            g->query_names[g->query_used / 2] = b->kernel->id.name;
            g->query_used += 2;
        }
        g->pass = wgpuCommandEncoderBeginComputePass(enc, &pd);
    }
    wgpuComputePassEncoderSetPipeline(g->pass, b->kernel->pipeline);
    wgpuComputePassEncoderSetBindGroup(g->pass, 0, b->group, 0, NULL);
    wgpuComputePassEncoderDispatchWorkgroups(g->pass, x, y, z);
    if (timed) wgpt_batch_end_pass_(g);
    b->used_in_batch = g->batch;
    g->recorded++;
    // Hand long recordings (a training step: ~500 dispatches) to the GPU in
    // pieces, so that it works while the rest is still being recorded rather
    // than waiting for the whole step.
    if (g->recorded >= WGPT_SUBMIT_EVERY && !g->profile) return wgpt_gpu_submit(g);
    return 0;
}

int wgpt_gpu_submit(wgpt_gpu *g) {
    if (wgpt_gpu_check_(g) < 0) {
        wgpt_batch_release_(g);
        return -1;
    }
    if (!g->encoder) return 0;
    wgpt_batch_end_pass_(g);
    WGPUCommandBufferDescriptor d = {NULL, wgpt_sv_("wgpt batch")};
    WGPUCommandBuffer cb = wgpuCommandEncoderFinish(g->encoder, &d);
    wgpuCommandEncoderRelease(g->encoder);
    g->encoder = NULL;
    g->recorded = 0;
    g->batch++;
    if (!cb) return wgpt_gpu_fail(g, "could not finish the command buffer");
    wgpuQueueSubmit(g->queue, 1, &cb);
    wgpuCommandBufferRelease(cb);
    wgpuInstanceProcessEvents(g->instance);  // surfaces validation errors early
    return wgpt_gpu_check_(g);
}

// --- profiling ----------------------------------------------------------------------
#define QUERY_CAP 4096u

int wgpt_profile_init_(wgpt_gpu *g) {
    WGPUQuerySetDescriptor qd = {NULL, wgpt_sv_("wgpt timestamps"), WGPUQueryType_Timestamp, QUERY_CAP};
    g->queries = wgpuDeviceCreateQuerySet(g->device, &qd);
    WGPUBufferDescriptor d;
    memset(&d, 0, sizeof d);
    d.size = QUERY_CAP * 8;
    d.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
    g->query_resolve = wgpuDeviceCreateBuffer(g->device, &d);
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    g->query_read = wgpuDeviceCreateBuffer(g->device, &d);
    g->query_names = calloc(QUERY_CAP / 2, sizeof *g->query_names);
    if (!g->queries || !g->query_resolve || !g->query_read || !g->query_names)
        return wgpt_gpu_fail(g, "could not create the timestamp query set");
    g->query_cap = QUERY_CAP;
    g->profile = 1;
    return 0;
}

void wgpt_profile_free_(wgpt_gpu *g) {
    if (g->queries) {
        wgpuQuerySetDestroy(g->queries);
        wgpuQuerySetRelease(g->queries);
    }
    if (g->query_resolve) wgpuBufferRelease(g->query_resolve);
    if (g->query_read) wgpuBufferRelease(g->query_read);
    free(g->query_names);
    g->queries = NULL;
    g->query_resolve = g->query_read = NULL;
    g->query_names = NULL;
}

typedef struct {
    int done;
    WGPUMapAsyncStatus status;
} ts_map_;

static void on_ts_map_(WGPUMapAsyncStatus status, WGPUStringView message, void *u1, void *u2) {
    (void)message, (void)u2;
    ts_map_ *r = u1;
    r->status = status;
    r->done = 1;
}

int wgpt_gpu_timings(wgpt_gpu *g, wgpt_timing *out, int max) {
    if (!g->profile) return wgpt_gpu_fail(g, "timings need a device opened with profiling");
    if (wgpt_gpu_check_(g) < 0) return -1;
    uint32_t used = g->query_used;
    if (used == 0) return 0;
    WGPUCommandEncoder enc = wgpt_batch_encoder_(g);
    if (!enc) return -1;
    wgpt_batch_end_pass_(g);
    wgpuCommandEncoderResolveQuerySet(enc, g->queries, 0, used, g->query_resolve, 0);
    wgpuCommandEncoderCopyBufferToBuffer(enc, g->query_resolve, 0, g->query_read, 0, (uint64_t)used * 8);
    g->recorded++;
    if (wgpt_gpu_submit(g) < 0) return -1;
    ts_map_ r = {0, 0};
    WGPUBufferMapCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_ts_map_, &r, NULL};
    wgpuBufferMapAsync(g->query_read, WGPUMapMode_Read, 0, (size_t)used * 8, cb);
    if (wgpt_gpu_wait_(g, &r.done, "reading timestamps") < 0) return -1;
    if (r.status != WGPUMapAsyncStatus_Success) return wgpt_gpu_fail(g, "could not map the timestamp buffer");
    const uint64_t *ts = wgpuBufferGetConstMappedRange(g->query_read, 0, (size_t)used * 8);
    int n = 0;
    for (uint32_t i = 0; i + 1 < used && n < max; i += 2, n++) {
        out[n].kernel = g->query_names[i / 2];
        out[n].ms = ts && ts[i + 1] >= ts[i] ? (double)(ts[i + 1] - ts[i]) * 1e-6 : 0.0;
    }
    wgpuBufferUnmap(g->query_read);
    g->query_used = 0;
    return n;
}
