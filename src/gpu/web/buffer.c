// buffer.c: storage buffers, uploads, downloads, zero fills and readbacks in the browser.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/web/web_internal.h"

wgpt_buf *wgpt_buf_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (wgpt_web_check_(g) < 0) return NULL;
    if (!label) label = "buffer";
    uint64_t size = wgpt_buf_size_check_(g, label, bytes, g->info.max_buffer);
    if (!size) return NULL;
    wgpt_buf *b = calloc(1, sizeof *b);
    if (!b) return wgpt_gpu_fail(g, "out of host memory creating buffer '%s'", label), NULL;
    b->gpu = g;
    b->size = size;
    snprintf(b->label, sizeof b->label, "%s", label);
    b->id = js_buf_create((double)size);
    if (!b->id) {
        free(b);
        if (wgpt_web_check_(g) == 0) wgpt_gpu_fail(g, "creating buffer '%s' of %llu bytes failed", label, (unsigned long long)size);
        return NULL;
    }
    b->tag = wgpt_mem_account_add(&g->mem, size);
    return b;
}

void wgpt_buf_free(wgpt_buf *b) {
    if (!b) return;
    wgpt_mem_account_remove(&b->gpu->mem, b->size, b->tag);
    js_buf_free(b->id);
    free(b);
}

uint64_t wgpt_buf_size(const wgpt_buf *b) { return b->size; }
// (an offset past the end: 0 bytes, as the native backend's, not a wrapped size)
uint64_t wgpt_view_bytes(wgpt_view v) {
    return v.size ? v.size : (v.offset < v.buf->size ? v.buf->size - v.offset : 0);
}

void wgpt_gpu_memory(const wgpt_gpu *g, uint64_t *live, uint64_t *peak) {
    if (live) *live = g->mem.live;
    if (peak) *peak = g->mem.peak;
}

int wgpt_gpu_mem_tag(wgpt_gpu *g, int tag) { return wgpt_mem_account_set_tag(&g->mem, tag); }

void wgpt_gpu_memory_tags(const wgpt_gpu *g, uint64_t at_peak[WGPT_MEM_TAGS]) {
    memcpy(at_peak, g->mem.tag_at_peak, sizeof g->mem.tag_at_peak);
}

wgpt_view wgpt_gpu_unused_binding(wgpt_gpu *g) {
    if (!g->unused) g->unused = wgpt_buf_create(g, 4096, "wgpt unused binding");
    return (wgpt_view){g->unused, 0, 0};
}

static int check_range_(wgpt_gpu *g, const wgpt_buf *b, uint64_t offset, uint64_t bytes, const char *op) {
    return wgpt_buf_range_check_(g, b->label, b->size, offset, bytes, op);
}

int wgpt_buf_upload(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, const void *src, uint64_t bytes) {
    if (wgpt_web_check_(g) < 0 || check_range_(g, b, offset, bytes, "upload") < 0) return -1;
    if (!bytes) return 0;
    if (js_buf_write(b->id, (double)offset, src, (double)bytes) < 0) return wgpt_web_check_(g) < 0 ? -1 : wgpt_gpu_fail(g, "upload to '%s' failed", b->label);
    return 0;
}

int wgpt_buf_download(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, void *dst, uint64_t bytes) {
    if (wgpt_web_check_(g) < 0 || check_range_(g, b, offset, bytes, "download") < 0) return -1;
    if (!bytes) return 0;
    if (js_buf_read(b->id, (double)offset, dst, (double)bytes) < 0 || wgpt_web_check_(g) < 0)
        return g->failed ? -1 : wgpt_gpu_fail(g, "reading buffer '%s' back failed", b->label);
    return 0;
}

int wgpt_buf_zero(wgpt_gpu *g, wgpt_buf *b, uint64_t offset, uint64_t bytes) {
    if (wgpt_web_check_(g) < 0 || check_range_(g, b, offset, bytes, "zero fill") < 0) return -1;
    return bytes ? js_buf_zero(b->id, (double)offset, (double)bytes) : 0;
}

int wgpt_gpu_submit(wgpt_gpu *g) {
    if (wgpt_web_check_(g) < 0) return -1;
    js_submit();
    return wgpt_web_check_(g);
}

int wgpt_gpu_finish(wgpt_gpu *g) {
    if (wgpt_web_check_(g) < 0) return -1;
    js_finish();
    return wgpt_web_check_(g);
}

// Reads are taken at start (the browser's read-back is a wait like any other):
// ready is then 1 at once.
wgpt_readback *wgpt_readback_create(wgpt_gpu *g, uint64_t bytes, const char *label) {
    if (wgpt_web_check_(g) < 0) return NULL;
    if (wgpt_readback_size_check_(g, label, bytes, g->info.max_buffer) < 0) return NULL;
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
    if (wgpt_web_check_(g) < 0) return -1;
    if (r->busy) return wgpt_gpu_fail(g, "readback '%s': started again before it was finished", r->label);
    uint64_t total = wgpt_readback_ranges_check_(g, r->label, r->size, b->label, b->size, offsets, sizes, n);
    if (!total) return -1;
    for (int i = 0, at = 0; i < n; at += (int)sizes[i], i++)
        if (sizes[i] && wgpt_buf_download(g, b, offsets[i], r->host + at, sizes[i]) < 0) return -1;
    r->bytes = total;
    r->busy = 1;
    return 0;
}

int wgpt_readback_ready(wgpt_gpu *g, wgpt_readback *r) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    return wgpt_web_check_(g) < 0 ? -1 : 1;
}

int wgpt_readback_finish(wgpt_gpu *g, wgpt_readback *r, void *dst) {
    if (!r->busy) return wgpt_gpu_fail(g, "readback '%s': nothing was started", r->label);
    r->busy = 0;
    memcpy(dst, r->host, (size_t)r->bytes);
    return wgpt_web_check_(g);
}
