// buffer_checks.c: the argument checks of new buffers, uploads, downloads,
// readbacks and bindings that both GPU backends make alike (backend_shared.h).
#include "gpu/backend_shared.h"

uint64_t wgpt_buf_size_check_(wgpt_gpu *g, const char *label, uint64_t bytes, uint64_t max_buffer) {
    uint64_t size = (bytes + 15) & ~(uint64_t)15;
    if (size == 0) size = 16;
    if (size > max_buffer) {
        wgpt_gpu_fail(g, "buffer '%s' needs %llu bytes; '%s' allows at most %llu in one buffer (maxBufferSize)", label,
                      (unsigned long long)bytes, wgpt_gpu_get_info(g)->name, (unsigned long long)max_buffer);
        return 0;
    }
    return size;
}

int wgpt_buf_range_check_(wgpt_gpu *g, const char *label, uint64_t size, uint64_t offset, uint64_t bytes,
                          const char *op) {
    if (offset % 4 || bytes % 4)
        return wgpt_gpu_fail(g, "%s of buffer '%s': offset %llu and size %llu must be multiples of 4", op, label,
                             (unsigned long long)offset, (unsigned long long)bytes);
    if (offset > size || bytes > size - offset)
        return wgpt_gpu_fail(g, "%s of buffer '%s': bytes [%llu, %llu) are outside its %llu bytes", op, label,
                             (unsigned long long)offset, (unsigned long long)(offset + bytes),
                             (unsigned long long)size);
    return 0;
}

int wgpt_readback_size_check_(wgpt_gpu *g, const char *label, uint64_t bytes, uint64_t max_buffer) {
    if (bytes == 0 || bytes % 4 || bytes > max_buffer)
        return wgpt_gpu_fail(g, "readback '%s' of %llu bytes: must be a positive multiple of 4, at most %llu", label,
                             (unsigned long long)bytes, (unsigned long long)max_buffer);
    return 0;
}

uint64_t wgpt_readback_ranges_check_(wgpt_gpu *g, const char *rb_label, uint64_t rb_size, const char *buf_label,
                                     uint64_t buf_size, const uint64_t *offsets, const uint64_t *sizes, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (wgpt_buf_range_check_(g, buf_label, buf_size, offsets[i], sizes[i], "readback") < 0) return 0;
        total += sizes[i];
    }
    if (total == 0 || total > rb_size) {
        wgpt_gpu_fail(g, "readback '%s': %llu bytes asked, it holds %llu", rb_label, (unsigned long long)total,
                      (unsigned long long)rb_size);
        return 0;
    }
    return total;
}

uint64_t wgpt_binding_check_(wgpt_gpu *g, const char *kernel, int i, const wgpt_view *v, const char *buf_label,
                             uint64_t buf_size) {
    const wgpt_gpu_info *info = wgpt_gpu_get_info(g);
    uint64_t size = wgpt_view_bytes(*v);
    if (v->offset % info->storage_offset_align) {
        wgpt_gpu_fail(g, "kernel '%s': binding %d (buffer '%s') starts at byte %llu, which is not a multiple "
                         "of %u (minStorageBufferOffsetAlignment)",
                      kernel, i, buf_label, (unsigned long long)v->offset, info->storage_offset_align);
        return 0;
    }
    if (size == 0 || size % 4 || v->offset + size > buf_size) {
        wgpt_gpu_fail(g, "kernel '%s': binding %d covers bytes [%llu, %llu) of buffer '%s' (%llu bytes)", kernel, i,
                      (unsigned long long)v->offset, (unsigned long long)(v->offset + size), buf_label,
                      (unsigned long long)buf_size);
        return 0;
    }
    if (size > info->max_storage_binding) {
        wgpt_gpu_fail(g, "kernel '%s': binding %d covers %llu bytes of buffer '%s'; '%s' binds at most %llu "
                         "(maxStorageBufferBindingSize): split the work into smaller ranges",
                      kernel, i, (unsigned long long)size, buf_label, info->name,
                      (unsigned long long)info->max_storage_binding);
        return 0;
    }
    return size;
}
