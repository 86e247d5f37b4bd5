// buffer.c: storage buffers, uploads, downloads, zero fills.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

// Host copies move in pieces of this size so that Dawn's staging stays small.
#define CHUNK ((uint64_t)64 << 20)

wgpt_buf *wgpt_buf_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (wgpt_gpu_check_(g) < 0) return NULL;
    if (!label) label = "buffer";
    uint64_t size = wgpt_buf_size_check_(g, label, bytes, g->limits.maxBufferSize);
    if (!size) return NULL;
    wgpt_buf *b = calloc(1, sizeof *b);
    if (!b) {
        wgpt_gpu_fail(g, "out of host memory creating buffer '%s'", label);
        return NULL;
    }
    b->gpu = g;
    b->size = size;
    snprintf(b->label, sizeof b->label, "%s", label);
    WGPUBufferDescriptor d;
    memset(&d, 0, sizeof d);
    d.label = wgpt_sv_(b->label);
    d.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
    d.size = size;
    wgpt_gpu_scope_push_(g);
    b->buffer = wgpuDeviceCreateBuffer(g->device, &d);
    char what[128];
    snprintf(what, sizeof what, "creating buffer '%s' of %llu bytes", label, (unsigned long long)size);
    if (wgpt_gpu_scope_pop_(g, what) < 0) {
        wgpt_buf_free(b);
        return NULL;
    }
    b->counted = 1;
    b->tag = wgpt_mem_account_add(&g->mem, size);
    return b;
}

int wgpt_gpu_mem_tag(wgpt_gpu *g, int tag) { return wgpt_mem_account_set_tag(&g->mem, tag); }

void wgpt_gpu_memory_tags(const wgpt_gpu *g, uint64_t at_peak[WGPT_MEM_TAGS]) {
    memcpy(at_peak, g->mem.tag_at_peak, sizeof g->mem.tag_at_peak);
}

void wgpt_gpu_memory(const wgpt_gpu *g, uint64_t *live, uint64_t *peak) {
    if (live) *live = g->mem.live;
    if (peak) *peak = g->mem.peak;
}

void wgpt_buf_free(wgpt_buf *b) {
    if (!b) return;
    if (b->counted) wgpt_mem_account_remove(&b->gpu->mem, b->size, b->tag);
    if (b->buffer) {
        wgpt_gpu_submit_pending_(b->gpu);
        wgpuBufferDestroy(b->buffer);
        wgpuBufferRelease(b->buffer);
    }
    free(b);
}

wgpt_view wgpt_gpu_unused_binding(wgpt_gpu *g) {
    if (!g->unused) g->unused = wgpt_buf_create(g, 4096, "unused binding");
    return (wgpt_view){g->unused, 0, 0};
}

uint64_t wgpt_buf_size(const wgpt_buf *b) { return b->size; }

uint64_t wgpt_view_bytes(wgpt_view v) {
    return v.size ? v.size : (v.offset < v.buf->size ? v.buf->size - v.offset : 0);
}

static int check_range_(wgpt_gpu *g, const wgpt_buf *b, uint64_t offset, uint64_t bytes, const char *op) {
    return wgpt_buf_range_check_(g, b->label, b->size, offset, bytes, op);
}

int wgpt_buf_upload(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, const void *src, uint64_t bytes) {
    if (wgpt_gpu_check_(g) < 0 || check_range_(g, b, offset, bytes, "upload") < 0) return -1;
    // writeBuffer runs at the next submit, before its commands: submit what is
    // recorded first so that the upload lands after it.
    if (g->recorded && wgpt_gpu_submit(g) < 0) return -1;
    const uint8_t *p = src;
    for (uint64_t done = 0; done < bytes; done += CHUNK) {
        uint64_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
        wgpuQueueWriteBuffer(g->queue, b->buffer, offset + done, p + done, (size_t)n);
    }
    return wgpt_gpu_check_(g);
}

typedef struct {
    int done;
    WGPUMapAsyncStatus status;
    char msg[512];
} map_result_;

static void on_map_(WGPUMapAsyncStatus status, WGPUStringView message, void *u1, void *u2) {
    (void)u2;
    map_result_ *r = u1;
    r->status = status;
    size_t n = message.data ? (message.length == WGPU_STRLEN ? strlen(message.data) : message.length) : 0;
    if (n >= sizeof r->msg) n = sizeof r->msg - 1;
    if (n) memcpy(r->msg, message.data, n);
    r->msg[n] = 0;
    r->done = 1;
}

static int ensure_readback_(wgpt_gpu *g, uint64_t size) {
    if (g->readback && g->readback_size >= size) return 0;
    if (g->readback) wgpuBufferRelease(g->readback);
    WGPUBufferDescriptor d;
    memset(&d, 0, sizeof d);
    d.label = wgpt_sv_("wgpt readback");
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    d.size = size;
    g->readback = wgpuDeviceCreateBuffer(g->device, &d);
    g->readback_size = size;
    return g->readback ? 0 : wgpt_gpu_fail(g, "could not create a readback buffer of %llu bytes",
                                            (unsigned long long)size);
}

// Copies [offset, offset+bytes) of src into the readback buffer, waits, and
// copies it out. bytes <= CHUNK.
static int read_chunk_(wgpt_gpu *g, WGPUBuffer src, uint64_t offset, void *dst, uint64_t bytes, const char *what) {
    WGPUCommandEncoder enc = wgpt_batch_encoder_(g);
    if (!enc || wgpt_batch_end_pass_(g) < 0) return -1;
    wgpuCommandEncoderCopyBufferToBuffer(enc, src, offset, g->readback, 0, bytes);
    g->recorded++;
    if (wgpt_gpu_submit(g) < 0) return -1;
    map_result_ r;
    memset(&r, 0, sizeof r);
    WGPUBufferMapCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_map_, &r, NULL};
    wgpuBufferMapAsync(g->readback, WGPUMapMode_Read, 0, (size_t)bytes, cb);
    if (wgpt_gpu_wait_(g, &r.done, what) < 0) return -1;
    if (r.status != WGPUMapAsyncStatus_Success)
        return wgpt_gpu_fail(g, "%s: mapping the readback buffer failed: %s", what, r.msg);
    const void *m = wgpuBufferGetConstMappedRange(g->readback, 0, (size_t)bytes);
    if (!m) {
        wgpuBufferUnmap(g->readback);
        return wgpt_gpu_fail(g, "%s: the readback buffer could not be mapped", what);
    }
    if (dst) memcpy(dst, m, (size_t)bytes);
    wgpuBufferUnmap(g->readback);
    return 0;
}

int wgpt_buf_download(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, void *dst, uint64_t bytes) {
    if (wgpt_gpu_check_(g) < 0 || check_range_(g, b, offset, bytes, "download") < 0) return -1;
    if (ensure_readback_(g, bytes < CHUNK ? (bytes ? bytes : 4) : CHUNK) < 0) return -1;
    char what[128];
    snprintf(what, sizeof what, "reading buffer '%s'", b->label);
    uint8_t *p = dst;
    for (uint64_t done = 0; done < bytes; done += CHUNK) {
        uint64_t n = bytes - done < CHUNK ? bytes - done : CHUNK;
        if (read_chunk_(g, b->buffer, offset + done, p + done, n, what) < 0) return -1;
    }
    return 0;
}

int wgpt_gpu_finish(wgpt_gpu *g) {
    if (wgpt_gpu_check_(g) < 0) return -1;
    if (!g->fence_src) {
        WGPUBufferDescriptor d;
        memset(&d, 0, sizeof d);
        d.label = wgpt_sv_("wgpt fence");
        d.usage = WGPUBufferUsage_CopySrc;
        d.size = 16;
        g->fence_src = wgpuDeviceCreateBuffer(g->device, &d);
    }
    if (ensure_readback_(g, 16) < 0) return -1;
    // A tiny copy after everything recorded: once it maps, the queue is idle.
    return read_chunk_(g, g->fence_src, 0, NULL, 16, "the submitted work");
}

int wgpt_buf_zero(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, uint64_t bytes) {
    if (wgpt_gpu_check_(g) < 0 || check_range_(g, b, offset, bytes, "zero fill") < 0) return -1;
    WGPUCommandEncoder enc = wgpt_batch_encoder_(g);
    if (!enc || wgpt_batch_end_pass_(g) < 0) return -1;
    wgpuCommandEncoderClearBuffer(enc, b->buffer, offset, bytes);
    g->recorded++;
    return 0;
}

// --- asynchronous reads --------------------------------------------------------
struct wgpt_readback {
    WGPUBuffer buffer;  // MapRead | CopyDst
    uint64_t size;      // bytes it holds
    uint64_t bytes;     // of the read in flight
    int busy;           // a map was started and not finished
    map_result_ res;    // written by on_map_ (Dawn's events)
    char label[64];
};

wgpt_readback *wgpt_readback_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (wgpt_gpu_check_(g) < 0) return NULL;
    if (wgpt_readback_size_check_(g, label, bytes, g->limits.maxBufferSize) < 0) return NULL;
    wgpt_readback *r = calloc(1, sizeof *r);
    if (!r) {
        wgpt_gpu_fail(g, "out of host memory creating readback '%s'", label);
        return NULL;
    }
    snprintf(r->label, sizeof r->label, "%s", label);
    r->size = bytes;
    WGPUBufferDescriptor d;
    memset(&d, 0, sizeof d);
    d.label = wgpt_sv_(r->label);
    d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;
    d.size = bytes;
    wgpt_gpu_scope_push_(g);
    r->buffer = wgpuDeviceCreateBuffer(g->device, &d);
    char what[128];
    snprintf(what, sizeof what, "creating readback '%s' of %llu bytes", r->label, (unsigned long long)bytes);
    int bad = wgpt_gpu_scope_pop_(g, what) < 0;
    if (!bad && !r->buffer) bad = 1, wgpt_gpu_fail(g, "%s failed", what);
    if (bad) {
        if (r->buffer) wgpuBufferRelease(r->buffer);
        free(r);
        return NULL;
    }
    return r;
}

void wgpt_readback_free(wgpt_gpu *g, wgpt_readback *r) {
    if (!r) return;
    if (r->busy && !r->res.done && (g->failed || wgpt_gpu_wait_(g, &r->res.done, "a readback") < 0))
        return;  // Dawn may still call on_map_ with r: leave it (and the buffer) to the process's exit
    if (r->busy && r->res.status == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(r->buffer);
    wgpuBufferDestroy(r->buffer);
    wgpuBufferRelease(r->buffer);
    free(r);
}

int wgpt_readback_start(wgpt_gpu *g, wgpt_readback *r, wgpt_buf *b, const uint64_t *offsets, const uint64_t *sizes,
                        int n) {
    if (wgpt_gpu_check_(g) < 0) return -1;
    if (r->busy) return wgpt_gpu_fail(g, "readback '%s': started again before it was finished", r->label);
    uint64_t total = wgpt_readback_ranges_check_(g, r->label, r->size, b->label, b->size, offsets, sizes, n);
    if (!total) return -1;
    WGPUCommandEncoder enc = wgpt_batch_encoder_(g);
    if (!enc || wgpt_batch_end_pass_(g) < 0) return -1;
    for (uint64_t i = 0, at = 0; i < (uint64_t)n; at += sizes[i], i++)
        if (sizes[i]) wgpuCommandEncoderCopyBufferToBuffer(enc, b->buffer, offsets[i], r->buffer, at, sizes[i]);
    g->recorded++;
    if (wgpt_gpu_submit(g) < 0) return -1;
    memset(&r->res, 0, sizeof r->res);
    r->bytes = total;
    r->busy = 1;
    WGPUBufferMapCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_map_, &r->res, NULL};
    wgpuBufferMapAsync(r->buffer, WGPUMapMode_Read, 0, (size_t)total, cb);
    return 0;
}

int wgpt_readback_ready(wgpt_gpu *g, wgpt_readback *r) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    if (!r->res.done) wgpuInstanceProcessEvents(g->instance);
    if (g->failed) return -1;
    if (g->interrupt && *g->interrupt) {
        g->hung = g->failed = 1;  // as wgpt_gpu_wait_: the queued work cannot be trusted
        return wgpt_gpu_fail(g, "interrupted while waiting for the GPU to finish readback '%s'", r->label);
    }
    return r->res.done;
}

int wgpt_readback_finish(wgpt_gpu *g, wgpt_readback *r, void *dst) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    char what[128];
    snprintf(what, sizeof what, "readback '%s'", r->label);
    if (wgpt_gpu_wait_(g, &r->res.done, what) < 0) return -1;
    r->busy = 0;
    if (r->res.status != WGPUMapAsyncStatus_Success)
        return wgpt_gpu_fail(g, "%s: mapping the staging buffer failed: %s", what, r->res.msg);
    const void *m = wgpuBufferGetConstMappedRange(r->buffer, 0, (size_t)r->bytes);
    if (m) memcpy(dst, m, (size_t)r->bytes);
    wgpuBufferUnmap(r->buffer);
    return m ? 0 : wgpt_gpu_fail(g, "%s: the staging buffer could not be mapped", what);
}
