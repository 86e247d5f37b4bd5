// precision.c: the f16 cast's dispatch (see precision.h).
#include "model/precision.h"

#include "model/variant.h"

// 8-element steps a thread of cast_f16_vec4: CAST_V8 in 08_precision.wgsl.
#define CAST_V8 2u

int wgpt_cast_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint64_t n) {
    if (!dst16.buf || !src.buf) return wgpt_gpu_fail(g, "cast_f16: a view has no buffer");
    if (n % 2 || n > UINT32_MAX) return wgpt_gpu_fail(g, "cast_f16: n=%llu must be even and below 2^32",
                                                      (unsigned long long)n);
    uint64_t lim = wgpt_gpu_get_info(g)->max_storage_binding;
    if (wgpt_view_bytes(dst16) < n * 2 || wgpt_view_bytes(src) < n * 4 || n * 4 > lim)
        return wgpt_gpu_fail(g, "cast_f16: %llu elements need %llu bytes of dst and %llu of src in one binding each "
                             "(have %llu and %llu; the device binds at most %llu)", (unsigned long long)n,
                             (unsigned long long)(n * 2), (unsigned long long)(n * 4),
                             (unsigned long long)wgpt_view_bytes(dst16), (unsigned long long)wgpt_view_bytes(src),
                             (unsigned long long)lim);
    wgpt_view v[2] = {{dst16.buf, dst16.offset, n * 2}, {src.buf, src.offset, n * 4}};
    uint32_t p = (uint32_t)n;
    // GPUs take whole vec4s where the sizes and offsets allow (the CPU twin
    // keeps one pair a thread, see variant.h).
    if (!wgpt_kernel_variant_cpu(g) && n % 8 == 0 && wgpt_views_vec4(v, 2))
        return wgpt_op_add1d(g, op, "cast_f16_vec4", v, 2, &p, sizeof p, (n / 8 + WGPT_WG * CAST_V8 - 1) / (WGPT_WG * CAST_V8))
                   ? 0
                   : -1;
    return wgpt_op_add1d(g, op, "cast_f16", v, 2, &p, sizeof p, wgpt_groups(n / 2)) ? 0 : -1;
}

// TR of 08_precision.wgsl: the halves a side of transpose_f16's tile.
#define TRANSPOSE_TILE 64u

// What a transpose's source holds: halves, floats, or floats to GELU.
enum { FROM_F16, FROM_F32, FROM_F32_GELU };

// transpose_f16, cast_f16_transpose or gelu_f16_transpose: the same tiles, the source 2 or 4 bytes an
// element (their _v8 twins where rows and cols are multiples of 8).
static int transpose_(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols,
                      int from) {
    static const char *const NAME[3][2] = {{"transpose_f16", "transpose_f16_v8"},
                                           {"cast_f16_transpose", "cast_f16_transpose_v8"},
                                           {"gelu_f16_transpose", "gelu_f16_transpose_v8"}};
    const char *kernel = NAME[from][0];
    int from_f32 = from != FROM_F16;
    if (!dst16.buf || !src.buf) return wgpt_gpu_fail(g, "%s: a view has no buffer", kernel);
    if (!rows || !cols || rows % 2 || cols % 2)
        return wgpt_gpu_fail(g, "%s: %u x %u: both must be even and positive", kernel, rows, cols);
    uint64_t bytes = (uint64_t)rows * cols * 2, sbytes = bytes * (from_f32 ? 2 : 1);
    uint64_t lim = wgpt_gpu_get_info(g)->max_storage_binding;
    if (wgpt_view_bytes(dst16) < bytes || wgpt_view_bytes(src) < sbytes || sbytes > lim)
        return wgpt_gpu_fail(g, "%s: %u x %u needs %llu bytes of dst and %llu of src in one binding each "
                             "(have %llu and %llu; the device binds at most %llu)", kernel, rows, cols,
                             (unsigned long long)bytes, (unsigned long long)sbytes,
                             (unsigned long long)wgpt_view_bytes(dst16), (unsigned long long)wgpt_view_bytes(src),
                             (unsigned long long)lim);
    uint32_t gx = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE, gy = (rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    if (gx > WGPT_MAX_WG_DIM || gy > WGPT_MAX_WG_DIM)
        return wgpt_gpu_fail(g, "%s: %u x %u tiles exceed %u a dimension", kernel, gx, gy, WGPT_MAX_WG_DIM);
    wgpt_view v[2] = {{dst16.buf, dst16.offset, bytes}, {src.buf, src.offset, sbytes}};
    uint32_t p[2] = {rows, cols};
    // GPUs move 16 bytes a thread where whole vec4s fit (the CPU twin keeps
    // the u32 kernel, see variant.h): on an H100 the u32 kernels ran at about
    // 1 TB/s (RESULTS section 21).
    if (!wgpt_kernel_variant_cpu(g) && rows % 8 == 0 && cols % 8 == 0 && wgpt_views_vec4(v, 2))
        kernel = NAME[from][1];
    return wgpt_op_add(g, op, kernel, v, 2, p, sizeof p, gx, gy, 1) ? 0 : -1;
}

int wgpt_transpose_f16(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src16, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src16, rows, cols, FROM_F16);
}

int wgpt_cast_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src, rows, cols, FROM_F32);
}

int wgpt_gelu_f16_transpose(wgpt_gpu *g, wgpt_op *op, wgpt_view dst16, wgpt_view src, uint32_t rows, uint32_t cols) {
    return transpose_(g, op, dst16, src, rows, cols, FROM_F32_GELU);
}
