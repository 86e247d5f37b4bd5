// elementwise.c: host side of kernels/05_gelu.wgsl and 05_residual.wgsl
// (see elementwise.h).
#include "model/elementwise.h"

// The kernels' GeluParams / ResidualParams.
typedef struct ew_params {
    uint32_t n;
} ew_params;

#define EW_MAX_VIEWS 3

// Floats per dispatch: all n if a binding of n floats fits the device, else
// the largest multiple of 64 floats that does (256 bytes: chunk offsets stay
// multiples of any storage offset alignment WebGPU allows), and never so many
// that a u32 index could wrap.
static uint64_t ew_chunk(wgpt_gpu *g, uint64_t n) {
    uint64_t max = wgpt_gpu_get_info(g)->max_storage_binding / 4;
    if (max > (1ull << 31)) max = 1ull << 31;
    if (n <= max) return n;
    uint64_t c = max / 64 * 64;
    return c ? c : n;  // 0: the bind below fails and says why
}

// Appends `kernel` over n floats: views[0..nviews) all hold n floats.
static int ew_add(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews, uint64_t n) {
    if (n == 0) return 0;
    for (int i = 0; i < nviews; i++)
        if (!views[i].buf || (views[i].size != 0 && views[i].size < n * 4))
            return wgpt_gpu_fail(g, "%s: binding %d %s; it needs %llu floats", kernel, i,
                                 views[i].buf ? "is smaller than its tensor" : "has no buffer",
                                 (unsigned long long)n);
    uint64_t chunk = ew_chunk(g, n);
    for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
        uint64_t cnt = n - i0 < chunk ? n - i0 : chunk;
        wgpt_view v[EW_MAX_VIEWS];
        for (int i = 0; i < nviews; i++) v[i] = (wgpt_view){views[i].buf, views[i].offset + i0 * 4, cnt * 4};
        ew_params p = {(uint32_t)cnt};
        if (!wgpt_op_add1d(g, op, kernel, v, nviews, &p, sizeof p, wgpt_groups(cnt))) return -1;
    }
    return 0;
}

int wgpt_gelu_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, uint64_t n) {
    wgpt_view v[2] = {out, inp};
    return ew_add(g, op, "gelu_forward", v, 2, n);
}

int wgpt_gelu_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view inp, wgpt_view dout, uint64_t n) {
    wgpt_view v[3] = {dinp, inp, dout};
    return ew_add(g, op, "gelu_backward", v, 3, n);
}

int wgpt_residual_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view a, wgpt_view b, uint64_t n) {
    wgpt_view v[3] = {out, a, b};
    return ew_add(g, op, "residual_forward", v, 3, n);
}
