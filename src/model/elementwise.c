// elementwise.c: host side of kernels/05_gelu.wgsl, 05_residual.wgsl and the
// flat kernels of 00_infrastructure.wgsl (see elementwise.h).
#include "model/elementwise.h"
#include "model/kernel_params.h"  // the kernels' params structs

#include <string.h>

#define EW_MAX_VIEWS 4  // gelu_backward_f16 binds 4

// Every kernel this file dispatches: the scalar kernel and its vec4 twin
// (full names, so that a grep finds each use), views bound, params bytes (4: n; 8: n, c).
typedef enum ew_kernel {
    EW_GELU_FORWARD, EW_GELU_BACKWARD, EW_RESIDUAL_FORWARD,
    EW_FILL_ZERO, EW_FILL_CONST, EW_SCALE, EW_AXPY, EW_COPY, EW_NKERNELS
} ew_kernel;
static const struct {
    const char *name, *vec4;
    int nviews;
    size_t params_size;
} EW_KERNEL[EW_NKERNELS] = {
    [EW_GELU_FORWARD] = {"gelu_forward", "gelu_forward_vec4", 2, sizeof(uint32_t)},
    [EW_GELU_BACKWARD] = {"gelu_backward", "gelu_backward_vec4", 3, sizeof(uint32_t)},
    [EW_RESIDUAL_FORWARD] = {"residual_forward", "residual_forward_vec4", 3, sizeof(uint32_t)},
    [EW_FILL_ZERO] = {"fill_zero", "fill_zero_vec4", 1, sizeof(ew_params)},
    [EW_FILL_CONST] = {"fill_const", "fill_const_vec4", 1, sizeof(ew_params)},
    [EW_SCALE] = {"scale", "scale_vec4", 1, sizeof(ew_params)},
    [EW_AXPY] = {"axpy", "axpy_vec4", 2, sizeof(ew_params)},
    [EW_COPY] = {"copy", "copy_vec4", 2, sizeof(ew_params)},
};

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

int wgpt_ew_vec4_ok(const wgpt_view *views, int nviews, uint64_t n) {
    return n % 4 == 0 && wgpt_views_vec4(views, nviews);
}

// Appends kernel k (or its vec4 twin where wgpt_ew_vec4_ok) over n floats:
// views[0..nviews) all hold n floats.
static int ew_add(wgpt_gpu *g, wgpt_op *op, ew_kernel k, const wgpt_view *views, uint64_t n, float c) {
    const char *kernel = EW_KERNEL[k].name;
    int nviews = EW_KERNEL[k].nviews;
    if (n == 0) return 0;
    for (int i = 0; i < nviews; i++)
        if (!views[i].buf || (views[i].size != 0 && views[i].size < n * 4))
            return wgpt_gpu_fail(g, "%s: binding %d %s; it needs %llu floats", kernel, i,
                                 views[i].buf ? "is smaller than its tensor" : "has no buffer",
                                 (unsigned long long)n);
    // Chunks are multiples of 64 floats, so every chunk of a vec4 range is too.
    int vec4 = wgpt_ew_vec4_ok(views, nviews, n);
    uint64_t chunk = ew_chunk(g, n);
    for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
        uint64_t cnt = n - i0 < chunk ? n - i0 : chunk;
        wgpt_view v[EW_MAX_VIEWS];
        for (int i = 0; i < nviews; i++) v[i] = (wgpt_view){views[i].buf, views[i].offset + i0 * 4, cnt * 4};
        ew_params p = {(uint32_t)cnt, c};
        if (!wgpt_op_add1d(g, op, vec4 ? EW_KERNEL[k].vec4 : kernel, v, nviews, &p, EW_KERNEL[k].params_size,
                           vec4 ? wgpt_ew_vec4_groups(cnt) : wgpt_groups(cnt)))
            return -1;
    }
    return 0;
}

int wgpt_gelu_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view inp, uint64_t n) {
    wgpt_view v[2] = {out, inp};
    return ew_add(g, op, EW_GELU_FORWARD, v, n, 0.0f);
}

// 8-element steps a thread of gelu_forward_f16: GF16_STEPS in 05_gelu.wgsl.
#define GF16_STEPS 2u

// kernel (gelu_forward_f16 or gelu_backward_f16) over n values in chunks:
// views[i] holds bytes[i] bytes a value (f16 copies 2, f32 4).
static int gelu_f16_(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, const unsigned *bytes,
                     int nviews, uint64_t n) {
    if (n == 0) return 0;
    if (n % 8 || !wgpt_views_vec4(views, nviews))
        return wgpt_gpu_fail(g, "%s: n=%llu must be a multiple of 8 and the views on 16-byte boundaries", kernel,
                             (unsigned long long)n);
    for (int i = 0; i < nviews; i++)
        if (!views[i].buf || wgpt_view_bytes(views[i]) < n * bytes[i])
            return wgpt_gpu_fail(g, "%s: %llu values need %llu bytes of binding %d; it has %llu", kernel,
                                 (unsigned long long)n, (unsigned long long)(n * bytes[i]), i,
                                 (unsigned long long)(views[i].buf ? wgpt_view_bytes(views[i]) : 0));
    // Chunks of a multiple of 128 values keep every view's offset on 256 bytes.
    uint64_t chunk = ew_chunk(g, n);
    if (chunk < n) chunk = chunk / 128 * 128;
    for (uint64_t i0 = 0; i0 < n; i0 += chunk) {
        uint64_t cnt = n - i0 < chunk ? n - i0 : chunk;
        wgpt_view c[EW_MAX_VIEWS];
        for (int i = 0; i < nviews; i++)
            c[i] = (wgpt_view){views[i].buf, views[i].offset + i0 * bytes[i], cnt * bytes[i]};
        uint32_t p = (uint32_t)cnt;
        uint64_t per_group = 8ull * GF16_STEPS * WGPT_WG;
        if (!wgpt_op_add1d(g, op, kernel, c, nviews, &p, sizeof p, (cnt + per_group - 1) / per_group)) return -1;
    }
    return 0;
}

int wgpt_gelu_forward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view out16, wgpt_view inp, uint64_t n) {
    wgpt_view v[2] = {out16, inp};
    static const unsigned bytes[2] = {2, 4};
    return gelu_f16_(g, op, "gelu_forward_f16", v, bytes, 2, n);
}

int wgpt_gelu_backward_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view dinp16, wgpt_view inp,
                           wgpt_view dout, uint64_t n) {
    wgpt_view v[4] = {dinp, dinp16, inp, dout};
    static const unsigned bytes[4] = {4, 2, 4, 4};
    return gelu_f16_(g, op, "gelu_backward_f16", v, bytes, 4, n);
}

int wgpt_gelu_backward(wgpt_gpu *g, wgpt_op *op, wgpt_view dinp, wgpt_view inp, wgpt_view dout, uint64_t n) {
    wgpt_view v[3] = {dinp, inp, dout};
    return ew_add(g, op, EW_GELU_BACKWARD, v, n, 0.0f);
}

int wgpt_residual_forward(wgpt_gpu *g, wgpt_op *op, wgpt_view out, wgpt_view a, wgpt_view b, uint64_t n) {
    wgpt_view v[3] = {out, a, b};
    return ew_add(g, op, EW_RESIDUAL_FORWARD, v, n, 0.0f);
}

int wgpt_infra_add(wgpt_gpu *g, wgpt_op *op, const char *kernel, const wgpt_view *views, int nviews, uint64_t n,
                   float c) {
    for (int k = EW_FILL_ZERO; k <= EW_COPY; k++)
        if (!strcmp(kernel, EW_KERNEL[k].name)) {
            if (nviews != EW_KERNEL[k].nviews)
                return wgpt_gpu_fail(g, "%s: %d views given; it binds %d", kernel, nviews, EW_KERNEL[k].nviews);
            return ew_add(g, op, (ew_kernel)k, views, n, c);
        }
    return wgpt_gpu_fail(g, "wgpt_infra_add: %s is not one of fill_zero, fill_const, scale, axpy, copy", kernel);
}
