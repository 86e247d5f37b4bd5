// op.h: a prepared GPU operation: the bind groups and dispatch shapes of one
// step of the model (a layer's forward, its backward, an optimizer update),
// created once and recorded every training step without rebuilding anything.
#ifndef WGPT_OP_H
#define WGPT_OP_H

#include "gpu/gpu.h"

typedef struct wgpt_op_step {
    wgpt_bind *bind;
    uint32_t x, y, z;  // workgroups
} wgpt_op_step;

typedef struct wgpt_op {
    wgpt_op_step *steps;
    int n, cap;
} wgpt_op;

void wgpt_op_init(wgpt_op *op);
void wgpt_op_free(wgpt_op *op);  // frees the binds it holds
// Appends a dispatch of `kernel` with the given bindings and params (copied).
// Returns the new step's bind (to update its params later), or NULL on error.
wgpt_bind *wgpt_op_add(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews,
                       const void *params, size_t params_size, uint32_t x, uint32_t y, uint32_t z);
// The same for a 1D grid of `groups` workgroups (2D past 65535; see flat_id).
wgpt_bind *wgpt_op_add1d(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews,
                         const void *params, size_t params_size, uint64_t groups);
// Bytes [off, off + bytes) of v as a view of their own; 0 if v has no buffer
// or (when sized) is too small for them.
static inline int wgpt_view_part(wgpt_view v, uint64_t off, uint64_t bytes, wgpt_view *out) {
    if (!v.buf || (v.size && off + bytes > v.size)) return 0;
    *out = (wgpt_view){v.buf, v.offset + off, bytes};
    return 1;
}

// 1 if every view starts on a 16-byte boundary, as kernels that bind their
// arrays as vec4s need (the *_vec4 twins).
static inline int wgpt_views_vec4(const wgpt_view *views, int nviews) {
    for (int i = 0; i < nviews; i++)
        if (views[i].offset % 16) return 0;
    return 1;
}

// A test hook (tests/test_gpt2_plan.c): called by wgpt_op_add with every step
// it prepares, so that a test can list a model's plan (kernel, bindings,
// params, grid) without running it. NULL (the default): no call. Not for
// concurrent use; it costs nothing when a step is recorded.
typedef void (*wgpt_op_trace_fn)(void *ctx, const char *kernel, const wgpt_view *views, int nviews,
                                 const void *params, size_t params_size, uint32_t x, uint32_t y, uint32_t z);
void wgpt_op_set_trace(wgpt_op_trace_fn fn, void *ctx);

// Records every step, in order, into the current batch.
int wgpt_op_record(wgpt_gpu *g, const wgpt_op *op);
// Records steps [from, to) only (a segment of a longer op).
int wgpt_op_record_range(wgpt_gpu *g, const wgpt_op *op, int from, int to);

// Rows per chunk when a (rows, row_floats) tensor must be split so that each
// binding stays within the device's maxStorageBufferBindingSize: a multiple of
// 64 rows (so chunk offsets stay 256-byte aligned), or all rows if they fit.
// Returns 0 if even 64 rows do not fit (with the GPU error set).
uint64_t wgpt_op_chunk_rows(wgpt_gpu *g, uint64_t rows, uint64_t row_floats);

#endif
