// op.c: prepared operations (see op.h).
#include "model/op.h"

#include <stdlib.h>

void wgpt_op_init(wgpt_op *op) {
    op->steps = NULL;
    op->n = op->cap = 0;
}

void wgpt_op_free(wgpt_op *op) {
    for (int i = 0; i < op->n; i++) wgpt_bind_free(op->steps[i].bind);
    free(op->steps);
    wgpt_op_init(op);
}

static wgpt_op_trace_fn trace_;
static void *trace_ctx_;

void wgpt_op_set_trace(wgpt_op_trace_fn fn, void *ctx) {
    trace_ = fn;
    trace_ctx_ = ctx;
}

wgpt_bind *wgpt_op_add(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews,
                       const void *params, size_t params_size, uint32_t x, uint32_t y, uint32_t z) {
    wgpt_kernel *k = wgpt_kernel_get(g, kernel);
    if (!k) return NULL;
    if (op->n == op->cap) {
        int cap = op->cap ? op->cap * 2 : 8;
        wgpt_op_step *s = realloc(op->steps, (size_t)cap * sizeof *s);
        if (!s) {
            wgpt_gpu_fail(g, "out of host memory preparing kernel '%s'", kernel);
            return NULL;
        }
        op->steps = s;
        op->cap = cap;
    }
    wgpt_bind *b = wgpt_bind_create(g, k, views, nviews, params, params_size);
    if (!b) return NULL;
    op->steps[op->n++] = (wgpt_op_step){b, x, y, z};
    if (trace_) trace_(trace_ctx_, kernel, views, nviews, params, params_size, x, y, z);
    return b;
}

wgpt_bind *wgpt_op_add1d(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews,
                         const void *params, size_t params_size, uint64_t groups) {
    uint32_t x = 0, y = 0;
    if (wgpt_dims1d(g, groups, &x, &y) < 0) return NULL;
    return wgpt_op_add(g, op, kernel, views, nviews, params, params_size, x, y, 1);
}

int wgpt_op_record(wgpt_gpu *g, const wgpt_op *op) { return wgpt_op_record_range(g, op, 0, op->n); }

int wgpt_op_record_range(wgpt_gpu *g, const wgpt_op *op, int from, int to) {
    if (from < 0 || to > op->n || from > to)
        return wgpt_gpu_fail(g, "steps [%d, %d) of an op of %d steps", from, to, op->n);
    for (int i = from; i < to; i++) {
        const wgpt_op_step *s = &op->steps[i];
        if (wgpt_dispatch(g, s->bind, s->x, s->y, s->z) < 0) return -1;
    }
    return 0;
}

uint64_t wgpt_op_chunk_rows(wgpt_gpu *g, uint64_t rows, uint64_t row_floats) {
    uint64_t max = wgpt_gpu_get_info(g)->max_storage_binding;
    uint64_t row_bytes = row_floats * 4;
    if (rows * row_bytes <= max) return rows;
    uint64_t r = (max / row_bytes) / 64 * 64;
    if (r == 0)
        wgpt_gpu_fail(g, "rows of %llu floats: not even 64 fit in one binding of %llu bytes "
                         "(maxStorageBufferBindingSize)",
                      (unsigned long long)row_floats, (unsigned long long)max);
    return r;
}
